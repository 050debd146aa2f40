"""The `cuda` cluster kind: dask-cuda's LocalCUDACluster, one single-threaded worker per GPU.

dask-cuda is not installed here (it is the `gpu` extra), so starting a `cuda` config must end in a
MissingPackageError that names it. Where it is installed, that test gives way to one that starts a
real LocalCUDACluster, which needs a GPU. No part of dask is mocked.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from dkapprox.cluster import (
    SCHEMAS,
    ClusterConfigError,
    connect,
    load_config,
    parse_config,
    render,
    template,
    template_names,
)
from dkapprox.errors import MissingPackageError

CONFIGS = Path(__file__).resolve().parents[2] / "cluster_configs"  # the templates' one copy (wheel: package data)
HAS_DASK_CUDA = importlib.util.find_spec("dask_cuda") is not None


def _cuda(text=""):
    return parse_config("kind: cuda\n" + text, source="gpu.yaml")


def test_the_template_is_a_valid_cuda_config_and_is_listed():
    config = load_config(CONFIGS / "cuda.yaml")
    assert config.kind == "cuda"
    assert set(config.options) == set(SCHEMAS["cuda"])  # the template shows every key
    assert config.options["threads_per_worker"] == 1
    assert config.options["n_workers"] is None  # one worker per visible GPU
    assert "cuda" in template_names()
    assert template("cuda") == (CONFIGS / "cuda.yaml").read_text(encoding="utf-8")
    assert "#1262" in template("cuda") and "dkapprox[gpu]" in template("cuda")


def test_render_summarises_without_importing_dask_cuda():
    # in a fresh interpreter: neither dkapprox's import nor checking and rendering a cuda config
    # may import dask_cuda or cupy (they initialise CUDA); only starting the cluster does
    code = (
        "import sys\n"
        "import dkapprox, dkapprox.cli\n"
        "from dkapprox.cluster import load_config, render\n"
        f"print(render(load_config({str(CONFIGS / 'cuda.yaml')!r})))\n"
        "print(sorted(m for m in ('dask_cuda', 'cupy', 'rmm') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == "kind: cuda" and "threads_per_worker: 1" in out
    assert out.splitlines()[-1] == "[]"
    assert render(_cuda("n_workers: 2")).startswith("kind: cuda\nn_workers: 2\n")


@pytest.mark.parametrize("value", ["2", "8", "0", "true", "'1'", "1.0"])
def test_more_than_one_thread_per_gpu_worker_is_refused_naming_the_dask_cuda_issue(value):
    with pytest.raises(ClusterConfigError) as info:
        _cuda(f"threads_per_worker: {value}\n")
    message = str(info.value)
    assert message.startswith("gpu.yaml: threads_per_worker must be 1 for a 'cuda' cluster (got ")
    assert "dask-cuda #1262" in message and "https://github.com/rapidsai/dask-cuda/issues/1262" in message


def test_one_thread_per_worker_and_the_defaults_are_accepted():
    assert _cuda("threads_per_worker: 1\n").options == {"threads_per_worker": 1}
    assert _cuda().options == {}  # every key is optional: dask-cuda's defaults


@pytest.mark.parametrize("value, devices", [
    ("'0,1'", [0, 1]), ("0", [0]), ("[1, 0]", [1, 0]), ("' 2 , 3 '", [2, 3]),
    ("[GPU-d6ac2d46-159b-5895-a854-cb745962ef0f]", ["GPU-d6ac2d46-159b-5895-a854-cb745962ef0f"]),
    ("null", None),
])
def test_cuda_visible_devices_takes_a_string_a_list_or_an_index(value, devices):
    assert _cuda(f"CUDA_VISIBLE_DEVICES: {value}\n").options["CUDA_VISIBLE_DEVICES"] == devices


@pytest.mark.parametrize("text, expected", [
    ("CUDA_VISIBLE_DEVICES: '0,,1'\n", "CUDA_VISIBLE_DEVICES must be GPU indices or UUIDs"),
    ("CUDA_VISIBLE_DEVICES: []\n", "CUDA_VISIBLE_DEVICES must be GPU indices or UUIDs"),
    ("CUDA_VISIBLE_DEVICES: -1\n", "CUDA_VISIBLE_DEVICES must be GPU indices or UUIDs"),
    ("CUDA_VISIBLE_DEVICES: [0, gpu0]\n", "CUDA_VISIBLE_DEVICES must be GPU indices or UUIDs"),
    ("CUDA_VISIBLE_DEVICES: '0,1,0'\n", "CUDA_VISIBLE_DEVICES names GPU 0 twice"),
    ("CUDA_VISIBLE_DEVICES: '0,1'\nn_workers: 3\n",
     "n_workers (3) is more than the GPUs in CUDA_VISIBLE_DEVICES (2): dask-cuda runs one worker per GPU"),
    ("n_workers: 0\n", "n_workers must be an integer >= 1"),
    ("device_memory_limit: 1.5\n", "device_memory_limit must be a fraction of the GPU's memory in (0, 1]"),
    ("device_memory_limit: lots\n", "device_memory_limit must be a positive byte size"),
    ("device_memory_limit: true\n", "device_memory_limit must be a fraction"),
    ("rmm_pool_size: -1\n", "rmm_pool_size must be a positive byte size"),
    ("rmm_pool_size: auto\n", "rmm_pool_size must be a positive byte size"),
    ("memory_limit: 0.5\n", "memory_limit must be a byte size"),
    ("processes: false\n", "unknown key 'processes'"),  # dask-cuda needs worker processes
    ("threads: 1\n", "unknown key 'threads'"),
])
def test_bad_values_are_refused_by_name(text, expected):
    with pytest.raises(ClusterConfigError, match="^gpu.yaml: ") as info:
        _cuda(text)
    assert expected in str(info.value)


def test_gpu_sizes_take_fractions_bytes_and_auto():
    options = _cuda("device_memory_limit: 0.8\nrmm_pool_size: 24GiB\nmemory_limit: auto\n").options
    assert options == {"device_memory_limit": 0.8, "rmm_pool_size": "24GiB", "memory_limit": "auto"}
    assert _cuda("device_memory_limit: auto\n").options["device_memory_limit"] == "auto"
    assert _cuda("device_memory_limit: 30GiB\n").options["device_memory_limit"] == "30GiB"
    assert _cuda("rmm_pool_size: 0.9\n").options["rmm_pool_size"] == 0.9


def test_an_unknown_kind_near_cuda_is_suggested():
    with pytest.raises(ClusterConfigError, match=r"unknown kind 'cudaa' \(did you mean 'cuda'\?\).*cuda"):
        parse_config("kind: cudaa\n")


@pytest.mark.skipif(HAS_DASK_CUDA, reason="dask-cuda is installed here: test_a_cuda_cluster_starts_on_a_gpu "
                                          "starts a real one instead")
def test_starting_without_dask_cuda_names_the_package_and_the_extra():
    assert importlib.util.find_spec("dask_cuda") is None
    config = load_config(CONFIGS / "cuda.yaml")
    with pytest.raises(MissingPackageError) as info:
        with connect(config):
            pytest.fail("a cuda cluster started without dask-cuda")
    assert info.value.package == "dask-cuda"
    assert str(info.value) == ("a 'cuda' cluster needs dask-cuda, which is not installed: "
                               "pip install 'dkapprox[gpu]'")
    assert "dask_cuda" not in sys.modules


@pytest.mark.skipif(HAS_DASK_CUDA, reason="dask-cuda is installed here")
def test_the_command_line_exits_69_without_dask_cuda_and_writes_nothing(tmp_path):
    assert importlib.util.find_spec("dask_cuda") is None
    zarr.create_array(str(tmp_path / "in.zarr"), shape=(20, 4), chunks=(10, 4), dtype="f8")[:] = (
        np.arange(80.0).reshape(20, 4))
    (tmp_path / "gpu.yaml").write_text(template("cuda"))
    result = subprocess.run(
        [sys.executable, "-m", "dkapprox", "fit", "in.zarr", "--method", "rbf", "--n-components", "8",
         "--out", "model", "--cluster", "gpu.yaml"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 69, result.stderr
    assert "needs dask-cuda, which is not installed: pip install 'dkapprox[gpu]'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "model").exists()


def _gpus():
    """How many GPUs the NVIDIA driver shows (0 without one), asked without importing CUDA here."""
    try:
        out = subprocess.run(["nvidia-smi", "--list-gpus"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines()) if out.returncode == 0 else 0


def test_a_cuda_cluster_starts_on_a_gpu():
    """Where dask-cuda is installed: a real LocalCUDACluster, one single-threaded worker per GPU."""
    pytest.importorskip("dask_cuda", reason="dask-cuda is not installed (the gpu extra): "
                                            "test_starting_without_dask_cuda_names_the_package_and_the_extra")
    gpus = _gpus()
    if not gpus:
        pytest.skip("needs a GPU: nvidia-smi lists none")
    config = _cuda("n_workers: 1\nthreads_per_worker: 1\ndevice_memory_limit: 0.5\ndashboard_address: null\n")
    with connect(config) as client:
        info = client.scheduler_info(n_workers=-1)["workers"]
        assert [w["nthreads"] for w in info.values()] == [1]
        assert client.submit(sum, [1, 2]).result() == 3
