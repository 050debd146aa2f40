"""The config loader: every shipped config is valid; unsafe or unknown content is refused by name."""

import subprocess
import sys
from pathlib import Path

import pytest

from dkapprox.cluster import SCHEMAS, ClusterConfigError, load_config, parse_config, template, template_names
from dkapprox.errors import DkapproxError

CONFIGS = Path(__file__).resolve().parents[2] / "cluster_configs"  # the templates' one copy (wheel: package data)


@pytest.mark.parametrize("name", ["local", "scheduler", "slurm", "pbs", "kubernetes"])
def test_every_shipped_config_is_valid(name):
    config = load_config(CONFIGS / f"{name}.yaml")
    assert config.kind == name
    assert set(config.options) <= set(SCHEMAS[name])


def test_shipped_configs_cover_every_kind():
    assert {p.stem for p in CONFIGS.glob("*.yaml")} == set(SCHEMAS)


def test_the_package_reads_the_top_level_templates_and_the_repository_holds_no_other_copy():
    """cluster_configs/ is the one source: what the package lists and reads is that folder's files, byte
    for byte, and no copy of them sits in the package's source (the wheel gets them by a mapping)."""
    assert template_names() == sorted(path.stem for path in CONFIGS.glob("*.yaml"))
    texts = {path.read_bytes() for path in CONFIGS.glob("*.yaml")}
    for name in template_names():
        assert template(name).encode("utf-8") == (CONFIGS / f"{name}.yaml").read_bytes(), name
    source = CONFIGS.parent / "dkapprox"
    assert source.is_dir() and not (source / "cluster" / "configs").exists()
    copies = [str(path) for path in source.rglob("*") if path.is_file() and path.read_bytes() in texts]
    assert not copies, f"{copies}: a second copy of a template; cluster_configs/ is the one source"


def test_unknown_top_level_key_is_named_with_a_suggestion():
    with pytest.raises(ClusterConfigError, match=r"unknown key 'n_worker' \(did you mean 'n_workers'\?\)"):
        parse_config("kind: local\nn_worker: 4\n", source="jobs/local.yaml")


def test_unknown_nested_key_is_named_with_its_path(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("kind: scheduler\naddress: tls://h:8786\ntls:\n  ca_file: ca.pem\n  certfile: c.pem\n")
    with pytest.raises(ClusterConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message and "unknown key 'tls.certfile'" in message and "'cert'" in message


def test_error_is_a_dkapprox_error_and_a_value_error():
    assert issubclass(ClusterConfigError, DkapproxError) and issubclass(ClusterConfigError, ValueError)


@pytest.mark.parametrize("text, expected", [
    ("kind: local\nn_workers: 0\n", "n_workers must be an integer >= 1 (got 0)"),
    ("kind: local\nn_workers: true\n", "n_workers must be an integer >= 1 (got True)"),
    ("kind: local\nmemory_limit: lots\n", "memory_limit must be a positive byte size"),
    ("kind: slurm\ncores: 4\n", "missing required key 'memory'"),
    ("kind: slurm\ncores: 4\nmemory: 8GiB\njobs: 2\nadapt: {maximum_jobs: 3}\n", "either 'jobs' or 'adapt'"),
    ("kind: scheduler\naddress: tcp://h:1\ntimeout: soon\n", "timeout must be a duration"),
    ("kind: scheduler\n", "missing required key 'address'"),
    ("kind: scheduler\naddress: tcp://h:1\ntls: {cert: c.pem}\n", "missing required key 'tls.ca_file'"),
    ("kind: slurm\ncores: 4\nmemory: 8GiB\njob_extra_directives: --exclusive\n",
     "job_extra_directives must be a list of strings"),
    ("kind: kubernetes\nname: k\nresources: {requests: {cpu: [1]}}\n", "resources.requests must be a mapping"),
    ("kind: slurmm\n", "unknown kind 'slurmm' (did you mean 'slurm'?)"),
    ("n_workers: 2\n", "missing required key 'kind'"),
    ("- kind: local\n", "expected a mapping with a 'kind' key, got list"),
    ("kind: local\n  n_workers: 2\n bad", "not a plain YAML config"),
])
def test_wrong_values_are_refused_with_the_key_and_the_expectation(text, expected):
    with pytest.raises(ClusterConfigError) as info:
        parse_config(text)
    assert expected in str(info.value)


@pytest.mark.parametrize("tag", [
    "!!python/object/apply:os.system ['touch {marker}']",
    "!!python/object/new:subprocess.Popen [['touch', '{marker}']]",
    "!!python/name:os.system",
])
def test_hostile_yaml_never_runs(tmp_path, tag):
    marker = tmp_path / "ran"
    path = tmp_path / "evil.yaml"
    path.write_text(f"kind: local\nn_workers: {tag.format(marker=marker)}\n")
    with pytest.raises(ClusterConfigError, match="not a plain YAML config.*never run") as info:
        load_config(path)
    assert str(path) in str(info.value)
    assert not marker.exists()


def test_a_huge_file_is_refused_before_parsing(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("kind: local\n" + "# padding\n" * 200_000)
    with pytest.raises(ClusterConfigError, match="too large"):
        load_config(path)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ClusterConfigError, match="no such cluster config"):
        load_config(tmp_path / "nope.yaml")


def test_tls_paths_are_relative_to_the_config(tmp_path):
    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "s.yaml"
    path.write_text("kind: scheduler\naddress: tls://h:1\ntls: {ca_file: certs/ca.pem, cert: /abs/c.pem}\n")
    tls = load_config(path).options["tls"]
    assert tls["ca_file"] == str(tmp_path / "conf" / "certs" / "ca.pem")
    assert tls["cert"] == "/abs/c.pem"


@pytest.mark.parametrize("name, package", [("slurm", "dask-jobqueue"), ("kubernetes", "dask-kubernetes")])
def test_missing_optional_package_gives_the_install_command(name, package):
    # A fresh interpreter in which the optional package cannot be imported.
    module = package.replace("-", "_")
    code = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "from dkapprox.cluster import load_config, render, ClusterConfigError\n"
        f"try:\n    render(load_config({str(CONFIGS / (name + '.yaml'))!r}))\n"
        "except ClusterConfigError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    extra = "jobqueue" if name == "slurm" else "kubernetes"
    assert f"needs {package}, which is not installed: pip install 'dkapprox[{extra}]'" in out
