"""Blocks on a GPU: CuPy in gives CuPy out, dask arrays of CuPy chunks stay CuPy, jobs with --device cuda.

The tests marked ``gpu`` need CuPy and an NVIDIA GPU, and skip where there is none: the one
place a skip is right (CI has no GPU). They ran, and pass, on a GPU (``benchmarks/gpu_session.sh``
is that run; docs/gpu.md has what it found). What runs everywhere: a machine without CuPy or a
GPU refuses ``--device cuda`` with exit 69 before it writes anything, never computing on the CPU
in silence. The CPU side of the same block functions is tests/backends/test_array_api.py.
"""

import importlib.util
import subprocess
import sys

import dask.array as da
import numpy as np
import pytest
import zarr
from _rounding import assert_chunking_promise

import dkapprox
import dkapprox.io
from dkapprox.backends import _xp

from .test_array_api import CASES as ARRAY_API_CASES
from .test_array_api import case_id
from .test_array_api import data as array_api_data


def _gpu_count():
    if importlib.util.find_spec("cupy") is None:
        return 0
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no driver, no device
        return 0


HAS_GPU = _gpu_count() > 0
gpu = pytest.mark.skipif(not HAS_GPU, reason="needs CuPy and an NVIDIA GPU")

CASES = [
    (dkapprox.RBFSampler, dict(n_components=64, random_state=0)),
    (dkapprox.SkewedChi2Sampler, dict(n_components=64, random_state=0)),
    (dkapprox.AdditiveChi2Sampler, dict(sample_steps=2)),
    (dkapprox.PolynomialCountSketch, dict(n_components=64, coef0=1.0, random_state=0)),
    (dkapprox.GaussianRandomProjection, dict(n_components=16, random_state=0)),
    (dkapprox.SparseRandomProjection, dict(n_components=16, random_state=0)),
    (dkapprox.RandomFourierFeatures, dict(n_components=64, sampling="structured", random_state=0)),
    (dkapprox.RandomFourierFeatures, dict(n_components=64, features="sincos", kernel="laplacian", random_state=0)),
    (dkapprox.Nystroem, dict(n_components=32, random_state=0)),
    (dkapprox.Nystroem, dict(kernel="laplacian", n_components=32, random_state=0)),
    (dkapprox.Nystroem, dict(kernel="chi2", n_components=32, random_state=0)),
]


def data(dtype=np.float64, n=2_000, d=12):
    return np.random.default_rng(0).random((n, d)).astype(dtype)


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed: the GPU tests run")
def test_device_cuda_without_cupy_exits_69_before_it_writes_anything(tmp_path):
    src = tmp_path / "in.zarr"
    zarr.create_array(str(src), shape=(100, 4), chunks=(50, 4), dtype="f8")[:] = data(n=100, d=4)
    out, model = tmp_path / "out.zarr", tmp_path / "model"
    run = subprocess.run([sys.executable, "-m", "dkapprox", "featurize", str(src), "--method", "rbf",
                          "--n-components", "8", "--out", str(out), "--save-model", str(model), "--device", "cuda"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 69, run.stderr
    assert "--device cuda needs CuPy" in run.stderr and "dkapprox[gpu-cuda13]" in run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert not out.exists() and not model.exists()


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("cls, params", CASES)
def test_cupy_in_gives_cupy_out_within_the_bound(cls, params, dtype):
    import cupy

    X = data(dtype)
    est = cls(**params).fit(X)
    got = est.transform(cupy.asarray(X))
    assert isinstance(got, cupy.ndarray) and got.dtype == est.transform(X).dtype
    assert_chunking_promise(est, X, cupy.asnumpy(got), what=f"{cls.__name__} on CuPy")


@gpu
@pytest.mark.gpu
def test_a_dask_array_of_cupy_chunks_stays_lazy_and_cupy():
    import cupy

    X = data(np.float32)
    est = dkapprox.Nystroem(n_components=64, random_state=0).fit(X)
    Xd = da.from_array(X, chunks=(500, -1)).map_blocks(cupy.asarray, meta=cupy.empty((0, 0), np.float32))
    Z = est.transform(Xd)
    assert isinstance(Z, da.Array) and isinstance(Z._meta, cupy.ndarray)
    got = Z.compute()
    assert isinstance(got, cupy.ndarray)
    assert_chunking_promise(est, X, cupy.asnumpy(got), what="Nystroem on dask-CuPy")


@gpu
@pytest.mark.gpu
def test_the_state_reaches_the_gpu_once_per_worker_whatever_the_number_of_blocks():
    import cupy
    from distributed import Client, LocalCluster

    X = data(np.float32, n=8_000)
    est = dkapprox.RBFSampler(n_components=256, random_state=0).fit(X)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True) as cluster, Client(cluster) as client:
        before = client.run(lambda: _xp.copies["count"])
        Xd = da.from_array(X, chunks=(500, -1)).map_blocks(cupy.asarray, meta=cupy.empty((0, 0), np.float32))
        est.transform(Xd).map_blocks(cupy.asnumpy, meta=np.empty((0, 0), np.float32)).compute()
        after = client.run(lambda: _xp.copies["count"])
    assert [after[w] - before[w] for w in after] == [1], (before, after)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("cuda_cluster", ["local", "cuda"])
def test_a_job_with_device_cuda_writes_what_the_cpu_job_writes_within_the_bound(tmp_path, cuda_cluster):
    """The CPU job on a LocalCluster; --device cuda on one (CuPy in its worker) and on dask-cuda's LocalCUDACluster."""
    X = data(np.float32, n=4_000)
    src = tmp_path / "in.zarr"
    zarr.create_array(str(src), shape=X.shape, chunks=(1_000, X.shape[1]), dtype="f4")[:] = X
    outs = {}
    for device, kind in (("cpu", "local"), ("cuda", cuda_cluster)):
        out = tmp_path / f"{device}.zarr"
        run = subprocess.run([sys.executable, "-m", "dkapprox", "featurize", str(src), "--method", "rbf",
                              "--n-components", "128", "--out", str(out), "--save-model", str(tmp_path / device),
                              "--device", device, "--cluster", _cluster_config(tmp_path, kind)],
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr
        outs[device] = dkapprox.io.open_features(out).compute()
    est = dkapprox.models.load(tmp_path / "cpu")
    assert_chunking_promise(est, X, outs["cuda"], outs["cpu"], what="--device cuda against the CPU job")


def _cluster_config(tmp_path, kind):
    path = tmp_path / f"{kind}.yaml"
    extra = "processes: true\n" if kind == "local" else ""
    path.write_text(f"kind: {kind}\nn_workers: 1\nthreads_per_worker: 1\n{extra}dashboard_address: null\n")
    return str(path)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", ARRAY_API_CASES, ids=case_id)
def test_every_block_function_of_the_array_api_suite_on_cupy(case, dtype):
    """tests/backends/test_array_api.py's cases with CuPy as the second namespace: same dtype, within the bound."""
    import cupy

    cls, params = case
    X = array_api_data(dtype)
    est = cls(**params).fit(X)
    expected = est.transform(X)
    got = est.transform(cupy.asarray(X))
    assert isinstance(got, cupy.ndarray) and got.dtype == expected.dtype and got.shape == expected.shape
    assert_chunking_promise(est, X, cupy.asnumpy(got), expected, what=f"{case_id(case)} on CuPy")


@gpu
@pytest.mark.gpu
def test_float32_products_on_the_gpu_are_float32_not_tf32():
    """CuPy's matmul in float32 rounds as float32 (TF32 keeps 10 mantissa bits: errors near 1e-3)."""
    import cupy

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((512, 2048)), rng.standard_normal((2048, 512))
    exact = a @ b
    got = cupy.asnumpy(cupy.asarray(a, dtype=cupy.float32) @ cupy.asarray(b, dtype=cupy.float32))
    # float32 rounding of the inputs and a 2048-term sum: a few 1e-7 relative to the terms' scale
    scale = np.abs(a) @ np.abs(b)
    assert np.max(np.abs(got - exact) / scale) < 2048 * np.finfo(np.float32).eps / 4


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("landmarks, n_landmarks", [("uniform", None), ("kmeans", None), ("leverage", None),
                                                    ("rpcholesky", None), ("leverage", 96)])
def test_landmark_passes_over_dask_cupy_blocks_run_on_the_gpu(landmarks, n_landmarks):
    import cupy

    X = data(np.float32, n=4_000)
    host = da.from_array(X, chunks=(1_000, -1))
    dev = host.map_blocks(cupy.asarray, meta=cupy.empty((0, 0), np.float32))
    params = dict(n_components=48, n_landmarks=n_landmarks, landmarks=landmarks, random_state=0)
    want = dkapprox.Nystroem(**params).fit(host)
    got = dkapprox.Nystroem(**params).fit(dev)
    assert isinstance(got.components_, np.ndarray) and isinstance(got.normalization_, np.ndarray)
    assert got.landmark_passes_ == want.landmark_passes_
    np.testing.assert_array_equal(got.component_indices_, want.component_indices_)
    np.testing.assert_allclose(got.components_, want.components_, rtol=1e-6, atol=1e-6)
    Z = got.transform(dev)
    assert isinstance(Z._meta, cupy.ndarray)
    assert_chunking_promise(got, X, cupy.asnumpy(Z.compute()), got.transform(X), what=f"{landmarks} on dask-CuPy")


# KernelRidge on CuPy: the twins of tests/kernel_ridge/test_device.py, whose docstring
# derives the tolerances (float64: 1e-8; float32: 2e-3 against the NumPy float32 fit, 1e-3 against float64)
KRR_CASES = [("rbf", dict(gamma=0.3), np.float64), ("rbf", dict(gamma=0.3), np.float32),
             ("laplacian", dict(gamma=0.2), np.float64), ("polynomial", dict(degree=2, gamma=0.5), np.float64)]
KRR_TOL = {np.float64: (1e-10, 1e-8), np.float32: (1e-6, 2e-3)}


def _krr_data(n=1_200, dtype=np.float64, targets=1):
    from .test_kernel_ridge_device import regression

    return regression(n=n, dtype=dtype, targets=targets)


def _krr(kernel, kw, dtype):
    from dkapprox.linear_model import KernelRidge

    return KernelRidge(alpha=1.0, kernel=kernel, n_centers=100, tol=KRR_TOL[dtype][0], max_iter=200,
                       random_state=0, **kw)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("kernel, kw, dtype", KRR_CASES, ids=[f"{k}-{d.__name__}" for k, _, d in KRR_CASES])
def test_kernel_ridge_on_cupy_fits_the_numpy_model_and_predicts_cupy(kernel, kw, dtype):
    import cupy

    X, y = _krr_data(dtype=dtype)
    want = _krr(kernel, kw, dtype).fit(X, y)
    got = _krr(kernel, kw, dtype).fit(cupy.asarray(X), y)
    assert isinstance(got.dual_coef_, np.ndarray) and got.dual_coef_.dtype == dtype
    np.testing.assert_array_equal(got.centers_, want.centers_)
    pred = got.predict(cupy.asarray(X))
    assert isinstance(pred, cupy.ndarray) and pred.dtype == dtype
    np.testing.assert_allclose(cupy.asnumpy(pred), want.predict(X), rtol=0, atol=KRR_TOL[dtype][1])
    assert got.score(cupy.asarray(X), cupy.asarray(y)) == pytest.approx(want.score(X, y), abs=KRR_TOL[dtype][1])


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kernel_ridge_on_dask_cupy_blocks_stays_lazy_and_cupy(dtype):
    import cupy

    X, y = _krr_data(dtype=dtype)
    w = np.random.default_rng(1).uniform(0.0, 2.0, size=X.shape[0])
    want = _krr("rbf", dict(gamma=0.3), dtype).fit(X, y, sample_weight=w)
    dev = da.from_array(X, chunks=(300, -1)).map_blocks(cupy.asarray, meta=cupy.empty((0, 0), dtype))
    got = _krr("rbf", dict(gamma=0.3), dtype).fit(dev, da.from_array(y, chunks=300),
                                                  sample_weight=da.from_array(w, chunks=300))
    np.testing.assert_array_equal(got.centers_, want.centers_)
    pred = got.predict(dev)
    assert isinstance(pred, da.Array) and isinstance(pred._meta, cupy.ndarray) and pred.dtype == dtype
    host = pred.compute()
    assert isinstance(host, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(host), want.predict(X), rtol=0, atol=KRR_TOL[dtype][1])
    assert got.score(dev, da.from_array(y, chunks=300)) == pytest.approx(want.score(X, y), abs=KRR_TOL[dtype][1])


@gpu
@pytest.mark.gpu
def test_kernel_ridge_preconditioner_on_cupy_is_the_hosts_and_solves_there():
    import cupy

    from dkapprox.kernel_ridge._falkon import Preconditioner
    from dkapprox.kernel_ridge._falkon_device import DevicePreconditioner
    from dkapprox.kernels import Kernel

    X, _ = _krr_data(n=300)
    kernel = Kernel("rbf", (("gamma", 0.3),))
    alphas = np.array([1.0, 0.1])
    host = Preconditioner(kernel.between(X, X), alphas)
    dev = DevicePreconditioner(_xp.namespace(cupy.empty(1)), cupy.cuda.Device(), kernel, X, alphas)
    assert dev.T.inverse is None  # CuPy's triangular solver, no inverse
    host.set_weight_total(500.0)
    dev.set_weight_total(500.0)
    v = np.random.default_rng(2).normal(size=(300, 2))
    for name in ("apply", "apply_t", "penalty"):
        want, got = getattr(host, name)(v), getattr(dev, name)(v)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9 * np.abs(want).max(), err_msg=name)


@gpu
@pytest.mark.gpu
def test_kernel_ridge_on_cupy_many_slices_a_block_give_what_one_slice_gives(monkeypatch):
    """Slices of 64 rows (the last one short) through CuPy's reused buffer, against one slice a block."""
    import cupy

    from dkapprox.kernel_ridge import _falkon_device

    X, y = _krr_data(dtype=np.float32)
    one = _krr("rbf", dict(gamma=0.3), np.float32).fit(cupy.asarray(X), y)
    monkeypatch.setattr(_falkon_device, "DEVICE_SLICE_ELEMENTS", 100 * 64)
    many = _krr("rbf", dict(gamma=0.3), np.float32).fit(cupy.asarray(X), y)
    np.testing.assert_allclose(cupy.asnumpy(many.predict(cupy.asarray(X))), cupy.asnumpy(one.predict(cupy.asarray(X))),
                               rtol=0, atol=KRR_TOL[np.float32][1])


def test_one_gpu_extra_per_cuda_major_version():
    """CuPy ships one package per CUDA major version; so do our extras (CUDA 13 ran)."""
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for major in (12, 13):
        names = [req.split(">")[0].split("=")[0] for req in extras[f"gpu-cuda{major}"]]
        assert names == [f"cupy-cuda{major}x", f"dask-cuda[cu{major}]", "array-api-compat"], names
    assert extras["gpu"] == extras["gpu-cuda12"]  # what [gpu] always meant


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("turns", [True, False])
def test_a_bad_block_among_dask_cupy_blocks_raises_scikit_learns_message_with_or_without_turns(turns):
    """The check of a CuPy block is waited for after its work is queued (dkapprox.engine._device_turns)."""
    import cupy
    import dask

    X = data(np.float32)
    est = dkapprox.RBFSampler(n_components=64, random_state=0).fit(X)
    X[777, 3] = np.nan
    Xd = da.from_array(X, chunks=(500, -1)).map_blocks(cupy.asarray, meta=cupy.empty((0, 0), np.float32))
    with dask.config.set({"dkapprox.device-turns": turns}):
        with pytest.raises(ValueError, match="Input X contains NaN"):
            est.transform(Xd).compute(scheduler="threads", num_workers=8)
        fine = est.transform(Xd[:500]).compute(scheduler="threads", num_workers=8)
    assert isinstance(fine, cupy.ndarray) and fine.shape == (500, 64)
