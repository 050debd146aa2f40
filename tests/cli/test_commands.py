"""The dkapprox command line, run as a real subprocess: exit codes, messages, round trips, resume.

Most runs use an in-process LocalCluster (``processes: false``) to keep the
suite fast; the demo and the worker-death test use real worker processes.
Commands that fail on purpose are independent, so they run side by side
(``failures`` below), each test then checking its own.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import scipy.sparse as sp
import zarr
from _rounding import assert_chunking_promise, transform_by_blocks
from distributed import KilledWorker
from distributed.comm import CommClosedError

from dkapprox import io, models
from dkapprox.cli import exit_code, main
from dkapprox.kernel_approximation import RBFSampler
from dkapprox.nystroem import Nystroem
from dkapprox.random_features import RandomBinningFeatures, RandomFourierFeatures

ENV = dict(os.environ, PYTHONUNBUFFERED="1", DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="1")
#: the cluster config templates' one copy, at the repository's top (the wheel carries it as package data)
TEMPLATES = pathlib.Path(__file__).resolve().parents[2] / "cluster_configs"


def cli(*args, timeout=180):
    """Run ``python -m dkapprox ARGS``; the CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "dkapprox", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=ENV)


def cli_many(*argvs, at_once=6):
    """Run independent commands side by side (each pays the import time in parallel)."""
    with ThreadPoolExecutor(at_once) as pool:
        return list(pool.map(lambda argv: cli(*argv), argvs))


def assert_one_line_error(result, code, *fragments):
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])


def make_input(path, rows=2000, features=8, chunk=250, seed=0, nan_at=None):
    X = np.random.default_rng(seed).standard_normal((rows, features)).astype(np.float32)
    if nan_at is not None:
        X[nan_at] = np.nan
    zarr.create_array(str(path), shape=X.shape, chunks=(chunk, features), dtype=X.dtype)[:] = X
    return X


def expected_rbf(X, random_state=0, rows=250):
    """The library's features of the same 250-row blocks the store holds: the same bits."""
    return transform_by_blocks(RBFSampler(n_components=64, gamma=0.5, random_state=random_state).fit(X), X, rows)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """An input store, a threads-only cluster config, models A (seed 0) and B (seed 1), A's output."""
    base = tmp_path_factory.mktemp("cli")
    X = make_input(base / "x.zarr")
    (base / "local.yaml").write_text("kind: local\nn_workers: 1\nthreads_per_worker: 2\n"
                                     "processes: false\ndashboard_address: null\n")
    fits = cli_many(*[("fit", base / "x.zarr", "--method", "rbf", "--n-components", 64, "--gamma", 0.5,
                       "--random-state", seed, "--out", base / name, "--cluster", base / "local.yaml")
                      for seed, name in [(0, "model"), (1, "model_b")]])
    assert all(r.returncode == 0 for r in fits), [r.stderr for r in fits]
    first = cli("transform", base / "x.zarr", "--model", base / "model", "--out", base / "z.zarr",
                "--cluster", base / "local.yaml")
    assert first.returncode == 0, first.stderr
    return {"dir": base, "X": X, "input": base / "x.zarr", "model": base / "model", "model_b": base / "model_b",
            "out": base / "z.zarr", "first": first, "cluster": base / "local.yaml"}


# -- round trips -----------------------------------------------------------------------------


def test_fit_transform_info_round_trip_equals_the_library(work):
    assert "8 blocks written, 0 already there, of 8" in work["first"].stdout
    got = io.open_features(work["out"]).compute()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, expected_rbf(work["X"]))

    model_json, out_json, model_yaml = cli_many(("info", work["model"], "--json"), ("info", work["out"], "--json"),
                                                ("info", work["model"]))
    assert model_json.returncode == out_json.returncode == model_yaml.returncode == 0
    model_doc, out_doc = json.loads(model_json.stdout), json.loads(out_json.stdout)
    assert model_doc["kind"] == "model" and model_doc["class"] == "RBFSampler"
    assert model_doc["params"]["n_components"] == 64 and model_doc["n_features_in"] == 8
    assert out_doc["kind"] == "features" and out_doc["status"] == "complete"
    assert out_doc["shape"] == [2000, 64] and out_doc["blocks_done"] == out_doc["blocks_total"] == 8
    assert out_doc["plan"]["model"] == model_doc["fingerprint"]
    assert out_doc["plan"]["input"]["path"] == str(work["input"])
    assert "kind: model" in model_yaml.stdout and "class: RBFSampler" in model_yaml.stdout


def test_rerunning_a_finished_job_does_nothing_and_succeeds(work):
    again = cli("transform", work["input"], "--model", work["model"], "--out", work["out"],
                "--cluster", work["cluster"])
    assert again.returncode == 0, again.stderr
    assert "already complete for this job; nothing to do" in again.stdout


def test_featurize_and_nystroem_equal_the_library(work, tmp_path):
    rbf, nystroem = cli_many(
        ("featurize", work["input"], "--method", "rbf", "--n-components", 64, "--gamma", 0.5, "--out",
         tmp_path / "f.zarr", "--save-model", tmp_path / "m", "--cluster", work["cluster"]),
        ("featurize", work["input"], "--method", "nystroem", "--n-components", 50, "--param", "kernel=rbf",
         "--gamma", 0.2, "--random-state", 3, "--out", tmp_path / "n.zarr", "--cluster", work["cluster"]),
    )
    assert rbf.returncode == 0 and nystroem.returncode == 0, (rbf.stderr, nystroem.stderr)
    # featurize = fit + transform: the same model, the same numbers
    assert models.fingerprint(models.load(tmp_path / "m")) == models.fingerprint(models.load(work["model"]))
    np.testing.assert_array_equal(io.open_features(tmp_path / "f.zarr").compute(), expected_rbf(work["X"]))
    # Nystroem samples its landmarks over the whole store, as the library does on the same store
    est = Nystroem(n_components=50, kernel="rbf", gamma=0.2, random_state=3).fit(io.open_array(work["input"]))
    np.testing.assert_array_equal(io.open_features(tmp_path / "n.zarr").compute(),
                                  transform_by_blocks(est, work["X"], 250))


def _store_bytes(path):
    return sum(f.stat().st_size for f in pathlib.Path(path).rglob("*") if f.is_file())


def test_fourier_and_binning_jobs_equal_the_library_and_their_models_round_trip(work, tmp_path):
    """The two maps the docs recommend beyond scikit-learn's, their non-numeric parameters given with
    --param. Binning's features are scipy.sparse: the job stores them dense (the store holds dense
    chunks), equal to the library's ``transform(X).toarray()``; its model, saved and loaded, writes
    the same store through `transform`, and `info` describes both models."""
    c = ("--cluster", work["cluster"])
    fourier, binning = cli_many(
        ("featurize", work["input"], "--method", "fourier", "--n-components", 64, "--gamma", 0.3,
         "--param", "kernel=laplacian", "--param", "sampling=orthogonal", "--param", "features=sincos",
         "--random-state", 5, "--out", tmp_path / "f.zarr", "--save-model", tmp_path / "fm", *c),
        ("featurize", work["input"], "--method", "binning", "--n-components", 512, "--gamma", 0.5,
         "--param", "n_grids=16", "--random-state", 5, "--compression", "zstd", "--out", tmp_path / "b.zarr",
         "--save-model", tmp_path / "bm", *c),
    )
    assert fourier.returncode == 0 and binning.returncode == 0, (fourier.stderr, binning.stderr)
    assert "fitted RandomFourierFeatures(" in fourier.stderr and "kernel='laplacian'" in fourier.stderr
    assert "2,000 x 64 float32" in fourier.stdout and "2,000 x 512 float32" in binning.stdout

    rff = RandomFourierFeatures(64, kernel="laplacian", gamma=0.3, sampling="orthogonal", features="sincos",
                                random_state=5).fit(work["X"])
    np.testing.assert_array_equal(io.open_features(tmp_path / "f.zarr").compute(),
                                  transform_by_blocks(rff, work["X"], 250))
    assert models.fingerprint(models.load(tmp_path / "fm")) == models.fingerprint(rff)

    rbf = RandomBinningFeatures(512, gamma=0.5, n_grids=16, random_state=5).fit(work["X"])
    expected = rbf.transform(work["X"])
    assert sp.issparse(expected)  # the library's output stays sparse; the store is dense
    stored = io.open_features(tmp_path / "b.zarr").compute()
    assert isinstance(stored, np.ndarray) and stored.dtype == np.float32
    np.testing.assert_array_equal(stored, expected.toarray())  # binning sums no products: exact
    loaded = models.load(tmp_path / "bm")
    assert models.fingerprint(loaded) == models.fingerprint(rbf) and loaded.dense_output is False
    # mostly zeros (16 of 512 columns at most): zstd keeps a small fraction of the raw bytes
    assert _store_bytes(tmp_path / "b.zarr") < 0.1 * stored.nbytes

    again, binning_info, fourier_info = cli_many(
        ("transform", work["input"], "--model", tmp_path / "bm", "--out", tmp_path / "b2.zarr", *c),
        ("info", tmp_path / "bm", "--json"), ("info", tmp_path / "fm", "--json"))
    assert again.returncode == binning_info.returncode == fourier_info.returncode == 0, again.stderr
    np.testing.assert_array_equal(io.open_features(tmp_path / "b2.zarr").compute(), stored)
    assert io.describe(tmp_path / "b2.zarr")["plan"]["model"] == models.fingerprint(rbf)
    b_doc, f_doc = json.loads(binning_info.stdout), json.loads(fourier_info.stdout)
    assert b_doc["class"] == "RandomBinningFeatures" and b_doc["fingerprint"] == models.fingerprint(rbf)
    assert b_doc["params"] == rbf.get_params() and b_doc["n_features_in"] == 8
    assert b_doc["arrays"]["hash_multipliers_"] == {"dtype": "uint64", "shape": [16, 8]}
    assert f_doc["class"] == "RandomFourierFeatures" and f_doc["fingerprint"] == models.fingerprint(rff)
    assert {k: f_doc["params"][k] for k in ("kernel", "sampling", "features", "n_components")} == \
        {"kernel": "laplacian", "sampling": "orthogonal", "features": "sincos", "n_components": 64}
    # binning runs on NumPy blocks only: asked for the GPU, the job says so before anything runs
    on_gpu = cli("transform", work["input"], "--model", tmp_path / "bm", "--out", tmp_path / "g.zarr",
                 "--device", "cuda", *c)
    assert_one_line_error(on_gpu, 2, "--device cuda: RandomBinningFeatures (--method binning) runs on the host")
    assert not (tmp_path / "g.zarr").exists()


def test_overwrite_replaces_with_the_flag(work, tmp_path):
    out = tmp_path / "z.zarr"
    shutil.copytree(work["out"], out)
    replaced = cli("transform", work["input"], "--model", work["model_b"], "--out", out, "--overwrite",
                   "--cluster", work["cluster"])
    assert replaced.returncode == 0, replaced.stderr
    np.testing.assert_array_equal(io.open_features(out).compute(), expected_rbf(work["X"], random_state=1))


def test_other_block_rows_are_another_job(work, tmp_path):
    """Rows per block are part of the plan: features of other blocks equal the first run's only
    within the rounding bound, so a finished store is not reported done for them and an
    unfinished one is not resumed with them; --overwrite starts over."""
    out = tmp_path / "z.zarr"
    shutil.copytree(work["out"], out)
    base = ("transform", work["input"], "--model", work["model"], "--out", out, "--cluster", work["cluster"])
    same, other = cli_many((*base, "--block-rows", 250), (*base, "--block-rows", 100))
    assert same.returncode == 0 and "nothing to do" in same.stdout, same.stderr
    assert_one_line_error(other, 73, "--overwrite")
    assert "block_rows" in other.stderr and "250" in other.stderr and "100" in other.stderr, other.stderr
    plan = io.describe(out)["plan"]
    assert plan["block_rows"] == 250
    np.testing.assert_array_equal(io.open_features(out).compute(), expected_rbf(work["X"]))  # untouched
    store = zarr.open_group(str(out), mode="r+")  # an unfinished store of 250-row blocks: not resumed with 100
    store.attrs.update({**store.attrs.asdict(), "dkapprox": {**store.attrs["dkapprox"], "status": "writing"}})
    resumed = cli(*base, "--block-rows", 100)
    assert resumed.returncode in (65, 73), resumed.stderr
    assert "block_rows" in resumed.stderr, resumed.stderr
    replaced = cli(*base, "--block-rows", 100, "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert io.describe(out)["plan"]["block_rows"] == 100
    got = io.open_features(out).compute()
    np.testing.assert_array_equal(got, expected_rbf(work["X"], rows=100))
    est = RBFSampler(n_components=64, gamma=0.5, random_state=0).fit(work["X"])
    assert_chunking_promise(est, work["X"], got, expected_rbf(work["X"]))  # against 250-row blocks


# -- exit codes: every failing command, side by side -------------------------------------------


def _hostile_store(path, **changes):
    zarr.create_array(str(path), shape=(1000, 32), chunks=(1000, 32), dtype="f4")
    meta = json.loads((path / "zarr.json").read_text())
    meta.update(changes)
    (path / "zarr.json").write_text(json.dumps(meta))


def _tampered_models(work, base):
    flipped, edited = base / "flipped", base / "edited"
    shutil.copytree(work["model"], flipped)
    shutil.copytree(work["model"], edited)
    npy = next((flipped / "arrays").glob("*.npy"))
    data = bytearray(npy.read_bytes())
    data[-1] ^= 0x01  # one bit of one weight
    npy.write_bytes(bytes(data))
    doc = json.loads((edited / "model.json").read_text())
    doc["estimator"]["params"]["gamma"] = 5.0
    (edited / "model.json").write_text(json.dumps(doc))
    return flipped, edited


@pytest.fixture(scope="module")
def failures(work, tmp_path_factory):
    """Bad inputs, bad models and bad configs; one subprocess per exit code, run side by side."""
    base = tmp_path_factory.mktemp("failures")
    _hostile_store(base / "huge.zarr", shape=[10**15, 32])
    make_input(base / "nan.zarr", rows=500, nan_at=(123, 4))
    make_input(base / "narrow.zarr", rows=100, features=5)
    flipped, edited = _tampered_models(work, base)
    marker = base / "ran"
    (base / "evil.yaml").write_text(f"kind: local\nn_workers: !!python/object/apply:os.system ['touch {marker}']\n")
    (base / "typo.yaml").write_text("kind: local\nn_worker: 2\n")
    (base / "down.yaml").write_text("kind: scheduler\naddress: tcp://127.0.0.1:9\ntimeout: 1s\n")
    x, m, c, o = work["input"], work["model"], work["cluster"], base / "never.zarr"
    commands = {
        "unknown method": ("fit", x, "--method", "nope", "--out", base / "m"),
        "missing input": ("fit", base / "nothing.zarr", "--method", "rbf", "--out", base / "m"),
        "debug": ("--debug", "fit", base / "nothing.zarr", "--method", "rbf", "--out", base / "m"),
        "huge": ("fit", base / "huge.zarr", "--method", "rbf", "--out", base / "m"),
        "flipped model": ("transform", x, "--model", flipped, "--out", o),
        "evil config": ("transform", x, "--model", m, "--out", o, "--cluster", base / "evil.yaml"),
        "scheduler down": ("transform", x, "--model", m, "--out", o, "--cluster", base / "down.yaml"),
        "other job": ("transform", x, "--model", work["model_b"], "--out", work["out"], "--cluster", c),
    }
    before = io.open_features(work["out"]).compute()
    results = dict(zip(commands, cli_many(*commands.values())))
    return {"results": results, "base": base, "flipped": flipped, "edited": edited, "marker": marker,
            "out_before": before, "out_after": io.open_features(work["out"]).compute(), "never": o}


def in_process(capsys, *args):
    """The same entry point in this process (for variants of a code a subprocess already checked)."""
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, captured.out, captured.err)


def test_usage_errors_exit_2_in_one_line(failures, work, capsys):
    x, m, base = work["input"], work["model"], failures["base"]
    assert_one_line_error(failures["results"]["unknown method"], 2, "'nope' is not one of")
    for args, fragment in [
        (("fit", x, "--method", "rbf", "--param", "n_components=0", "--out", base / "m"),
         "The 'n_components' parameter of RBFSampler must be an int"),
        (("fit", x, "--method", "rbf", "--param", "colour=red", "--out", base / "m"),
         "--param colour: RBFSampler has no such parameter"),
        (("fit", x, "--method", "rbf", "--param", "gamma", "--out", base / "m"), "expected KEY=VALUE"),
        (("fit", x, "--method", "additive_chi2", "--n-components", 5, "--out", base / "m"),
         "--n-components: AdditiveChi2Sampler has no parameter 'n_components'"),
        (("fit", x, "--method", "fourier", "--param", "kernel=gauss", "--out", base / "m"),
         "The 'kernel' parameter of RandomFourierFeatures must be a str among"),
        (("fit", x, "--method", "fourier", "--param", "sampling=sobol", "--out", base / "m"),
         "The 'sampling' parameter of RandomFourierFeatures must be a str among"),
        (("featurize", x, "--method", "fourier", "--n-components", 33, "--param", "features=sincos",
          "--out", base / "o"), "n_components must be even with features='sincos'"),
        (("fit", x, "--method", "fourier", "--gamma", "scale", "--out", base / "m"),
         "The 'gamma' parameter of RandomFourierFeatures must be a float in the range [0.0, inf)"),
        (("featurize", x, "--method", "binning", "--param", "n_grids=many", "--out", base / "o"),
         "The 'n_grids' parameter of RandomBinningFeatures must be an int in the range [1, inf). Got 'many'"),
        (("featurize", x, "--method", "binning", "--param", "dense_output=maybe", "--out", base / "o"),
         "The 'dense_output' parameter of RandomBinningFeatures must be an instance of 'bool'"),
        (("fit", x, "--method", "binning", "--param", "kernel=laplacian", "--out", base / "m"),
         "--param kernel: RandomBinningFeatures has no such parameter"),
        (("featurize", x, "--method", "binning", "--device", "cuda", "--out", base / "o"),
         "--device cuda: RandomBinningFeatures (--method binning) runs on the host only"),
        (("transform", x, "--model", m, "--out", base / "o", "--cluster", work["cluster"], "--scheduler", "tcp://h:1"),
         "give --cluster or --scheduler, not both"),
        (("demo", "--memory-limit", "lots"), "expected a size such as 768MiB"),
        (("frobnicate",), "No such command 'frobnicate'"),
    ]:
        assert_one_line_error(in_process(capsys, *args), 2, fragment)
    assert not (base / "m").exists() and not (base / "o").exists()


def test_missing_input_or_model_exits_66(failures, work, capsys):
    assert_one_line_error(failures["results"]["missing input"], 66, "nothing.zarr")
    missing_model = in_process(capsys, "transform", work["input"], "--model", failures["base"] / "no-model",
                               "--out", failures["never"])
    assert_one_line_error(missing_model, 66, "no-model")


def test_hostile_or_bad_input_exits_65(failures, work, capsys):
    base = failures["base"]
    assert_one_line_error(failures["results"]["huge"], 65, "huge.zarr")
    nan = in_process(capsys, "transform", base / "nan.zarr", "--model", work["model"], "--out", base / "nan-out.zarr",
                     "--cluster", work["cluster"])
    assert_one_line_error(nan, 65, "NaN")
    narrow = in_process(capsys, "transform", base / "narrow.zarr", "--model", work["model"], "--out", failures["never"])
    assert_one_line_error(narrow, 65, "X has 5 features, but RBFSampler is expecting 8")
    # a chunk length of 0: zarr 3.4 reads it as 1 (and warns) where 3.1 refuses; 65 from the stored document on both
    _hostile_store(base / "zero-chunk.zarr", chunk_grid={"name": "regular", "configuration": {"chunk_shape": [0, 32]}})
    zero = in_process(capsys, "featurize", base / "zero-chunk.zarr", "--method", "rbf", "--out", failures["never"])
    assert_one_line_error(zero, 65, "zero-chunk.zarr", "chunks (0, 32)")


def test_tampered_model_exits_65_and_writes_nothing(failures, work, capsys):
    assert_one_line_error(failures["results"]["flipped model"], 65, str(failures["flipped"]))
    edited = in_process(capsys, "transform", work["input"], "--model", failures["edited"], "--out", failures["never"])
    assert_one_line_error(edited, 65, str(failures["edited"]), "modified")
    assert not failures["never"].exists()


def test_bad_cluster_config_exits_78_and_never_runs_it(failures, work, capsys):
    assert_one_line_error(failures["results"]["evil config"], 78, "not a plain YAML config")
    typo = in_process(capsys, "transform", work["input"], "--model", work["model"], "--out", failures["never"],
                      "--cluster", failures["base"] / "typo.yaml")
    assert_one_line_error(typo, 78, "unknown key 'n_worker' (did you mean 'n_workers'?)")
    assert not failures["marker"].exists()


def test_unreachable_scheduler_is_a_temporary_failure(failures):
    assert_one_line_error(failures["results"]["scheduler down"], 75, "cannot reach the scheduler at tcp://127.0.0.1:9")


def test_no_overwrite_without_the_flag_and_never_inside_the_input(failures, work, capsys):
    assert_one_line_error(failures["results"]["other job"], 73, "finished dkapprox output")
    np.testing.assert_array_equal(failures["out_after"], failures["out_before"])
    refit = in_process(capsys, "fit", work["input"], "--method", "rbf", "--out", work["model"],
                       "--cluster", work["cluster"])
    assert_one_line_error(refit, 73, str(work["model"]))
    inside = in_process(capsys, "transform", work["input"], "--model", work["model"],
                        "--out", work["input"] / "features.zarr", "--cluster", work["cluster"])
    assert_one_line_error(inside, 65, "inside")
    assert not (work["input"] / "features.zarr").exists()


def test_debug_shows_the_traceback(failures):
    result = failures["results"]["debug"]
    assert result.returncode == 66
    assert "Traceback (most recent call last)" in result.stderr and "InputMissingError" in result.stderr


def test_quiet_version_and_cluster_script(capsys):
    version = in_process(capsys, "--version")
    assert version.returncode == 0 and version.stdout.startswith("dkapprox ")
    configs = str(TEMPLATES)
    script = in_process(capsys, "cluster-script", os.path.join(configs, "slurm.yaml"))
    assert script.returncode == 0 and "#SBATCH --mem=32G" in script.stdout and script.stderr == ""
    bad = in_process(capsys, "-q", "cluster-script", os.path.join(configs, "nope.yaml"))
    assert_one_line_error(bad, 78, "no such cluster config")


def test_cluster_config_prints_the_top_level_templates_byte_for_byte(capsys, tmp_path):
    from dkapprox.cluster import SCHEMAS, load_config

    listed = in_process(capsys, "cluster-config", "--list")
    assert listed.returncode == 0 and listed.stdout.split() == sorted(SCHEMAS), listed
    assert sorted(path.stem for path in TEMPLATES.glob("*.yaml")) == sorted(SCHEMAS)  # one template a kind
    for name in sorted(SCHEMAS):
        printed = in_process(capsys, "cluster-config", name)
        shipped = (TEMPLATES / f"{name}.yaml").read_bytes()  # cluster_configs/NAME.yaml, exactly
        assert printed.returncode == 0 and printed.stdout.encode("utf-8") == shipped, name
        copy = tmp_path / f"{name}.yaml"  # what `dkapprox cluster-config NAME > NAME.yaml` leaves
        copy.write_text(printed.stdout)
        assert load_config(copy).kind == name
    script = in_process(capsys, "cluster-script", tmp_path / "slurm.yaml")
    assert script.returncode == 0 and "#SBATCH --mem=32G" in script.stdout
    bad = in_process(capsys, "cluster-config", "slurmm")
    assert_one_line_error(bad, 2, "no cluster config template 'slurmm'", ", ".join(sorted(SCHEMAS)))
    assert bad.stdout == ""
    assert_one_line_error(in_process(capsys, "cluster-config"), 2, "give a template NAME", "slurm")


@pytest.mark.parametrize("exc, code", [
    (KilledWorker("('rbf-1', 0)", "tcp://w:1", 3), 75),
    (CommClosedError("scheduler lost"), 75),
    (TimeoutError("no answer"), 75),
    (PermissionError(13, "Permission denied"), 77),
    (OSError(28, "No space left on device"), 74),
    (ValueError("Input X contains NaN."), 65),
    (RuntimeError("a bug"), 1),
])
def test_exit_codes_of_errors_from_dask_and_the_system(exc, code):
    assert exit_code(exc) == code


@pytest.mark.slow
def test_a_block_too_large_for_any_worker_exits_75_at_once_with_the_block_rows_that_fit(tmp_path):
    # Real worker processes with a small memory limit and a block far too large for it: refused
    # before any worker is killed. Blocks that kill their workers: tests/faults/test_memory.py.
    make_input(tmp_path / "x.zarr", rows=150_000, features=16, chunk=150_000)  # one 1.2 GB output block
    config = tmp_path / "small.yaml"
    config.write_text("kind: local\nn_workers: 1\nthreads_per_worker: 1\nmemory_limit: 600MiB\n"
                      "dashboard_address: null\n")
    args = ("featurize", tmp_path / "x.zarr", "--method", "rbf", "--n-components", 2048,
            "--out", tmp_path / "o.zarr", "--cluster", config)
    result = cli(*args, timeout=300)
    assert_one_line_error(result, 75, "150,000 x 2,048 float32 (1.14 GiB", "cannot fit any worker",
                          "memory limit is 600.00 MiB", "nothing was computed; rerun with --block-rows")
    assert not (tmp_path / "o.zarr").exists()
    rows = int(result.stderr.rsplit("--block-rows ", 1)[1].split()[0])
    fine = cli(*args, "--block-rows", rows, timeout=300)  # nothing was made, so no --overwrite
    assert fine.returncode == 0, fine.stderr
    assert f"{-(-150_000 // rows)} blocks written" in fine.stdout


# -- interrupt and resume --------------------------------------------------------------------


def _blocks_done(out):
    try:
        return io.describe(out)["blocks_done"]
    except Exception:  # not created yet, or caught between two files
        return -1


def _start(*args):
    return subprocess.Popen([sys.executable, "-m", "dkapprox", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)


def _interrupt_when(proc, out, at_least, *, sig=9, timeout=120):
    """Send ``sig`` once ``at_least`` blocks are recorded: (exit code, blocks recorded after, stderr)."""
    deadline = time.monotonic() + timeout
    while _blocks_done(out) < at_least:
        assert proc.poll() is None, f"the job ended before block {at_least}: {proc.communicate()}"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    return proc.returncode, _blocks_done(out), stderr


def test_interrupted_at_several_points_the_rerun_writes_only_what_is_missing(tmp_path):
    """SIGKILL at start, after some blocks, SIGTERM later, SIGKILL near the end; a changed model is
    refused on resume; the final rerun writes only the missing blocks and gives the undisturbed output."""
    make_input(tmp_path / "x.zarr", rows=40_000, features=16, chunk=100)  # 400 small blocks
    (tmp_path / "one.yaml").write_text("kind: local\nn_workers: 1\nthreads_per_worker: 1\n"
                                       "processes: false\ndashboard_address: null\n")
    cluster = ("--cluster", tmp_path / "one.yaml")
    fits = cli_many(*[("fit", tmp_path / "x.zarr", "--method", "rbf", "--n-components", 256, "--random-state", seed,
                       "--out", tmp_path / name, *cluster) for seed, name in [(0, "model"), (7, "changed")]])
    assert all(f.returncode == 0 for f in fits), [f.stderr for f in fits]
    job = ("transform", tmp_path / "x.zarr", "--model", tmp_path / "model", *cluster)
    reference = cli(*job, "--out", tmp_path / "ref.zarr")
    assert reference.returncode == 0, reference.stderr
    out = tmp_path / "z.zarr"

    early = _start(*job, "--out", out)  # 1. killed while starting, before anything is written
    time.sleep(0.3)
    early.kill()
    early.communicate()
    recorded = []
    for at_least, sig in [(20, 9), (120, 15), (250, 9)]:  # 2.-4. after some blocks, SIGTERM, near the end
        code, done, stderr = _interrupt_when(_start(*job, "--out", out), out, at_least, sig=sig)
        assert code == (-9 if sig == 9 else 143), stderr
        if sig == 15:
            assert "dkapprox: SIGTERM: stopped; rerun the same command to resume" in stderr
            assert "Traceback" not in stderr
        assert done >= max([at_least, *recorded])
        recorded.append(done)
    assert io.describe(out)["status"] == "writing"
    with pytest.raises(Exception, match="not finished|incomplete|unfinished"):
        io.open_features(out)

    changed = cli("transform", tmp_path / "x.zarr", "--model", tmp_path / "changed", *cluster, "--out", out)
    assert_one_line_error(changed, 73, "another job", "plan.model")
    before = _blocks_done(out)
    assert before == recorded[-1]  # the refused run wrote nothing

    final = cli(*job, "--out", out)
    assert final.returncode == 0, final.stderr
    assert f"{400 - before} blocks written, {before} already there, of 400" in final.stdout
    np.testing.assert_array_equal(io.open_features(out).compute(), io.open_features(tmp_path / "ref.zarr").compute())


# -- the demo --------------------------------------------------------------------------------


def test_demo_small_runs_on_real_worker_processes(tmp_path):
    result = cli("demo", "--small", "--workers", 1, "--progress", "--dir", tmp_path / "demo", timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("cluster: LocalCluster, 1 workers x 768.00 MiB (dashboard http")
    assert any(line.startswith("made") and "20,000 x 32 float32" in line for line in lines)
    assert any(line.startswith("fit    RBFSampler(") for line in lines)
    assert any(line.startswith("wrote") and "20,000 x 128 float32" in line and "10 blocks" in line for line in lines)
    assert any(line.startswith("check  first 1,000 rows equal") for line in lines)
    assert any(line.startswith("workers:") and "restarts 0" in line for line in lines)
    assert "100% Completed" in result.stderr  # distributed's progress bar, on stderr
    assert "dashboard" in result.stderr
    assert io.describe(tmp_path / "demo" / "features.zarr")["status"] == "complete"
    again = cli("demo", "--small", "--workers", 1, "--dir", tmp_path / "demo", timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("kept from an earlier run") == 2
