"""KernelRidge on device blocks (issue 41, item 5), checked on the CPU with array-api-strict.

array-api-strict's ``Device('device1')`` refuses NumPy conversion as a GPU does for CuPy, so a pass
or a prediction that touched its block with NumPy fails here as it would on a GPU. A fit on a device
array (or a dask array of device blocks) must give the NumPy fit's model within the rounding the
two paths differ by, and predict on device blocks gives device blocks. The CuPy twins of these
tests are in tests/backends/test_gpu.py (marked ``gpu``).

Tolerances. The device path sums its slices in another order and forms the rbf kernel from its
factors in another rounding than the host, so two fits differ by the kernel values' rounding carried
through the normal equations, plus where CG stops. float32: the host's own test bounds a float32 fit
against the float64 fit of such a problem at 1e-3 (float32 kernel values, eps 6e-8, through a system of
condition ~1e4 at alpha=1: tests/kernel_ridge/test_falkon.py); the device's float32 fit is held to
that same 1e-3 against the float64 NumPy fit, so two float32 fits differ by at most 2e-3 (measured: 2e-4
in memory, 1e-3 on dask blocks). float64: the same amplification of eps64 (2e-16) gives 4e-12, and
CG stops at a relative residual of tol=1e-10 of a preconditioned system near the identity: tested at
1e-8 (100 tol; measured 1e-10).
"""

import array_api_strict as xs
import dask.array as da
import numpy as np
import pytest

from dkapprox.backends import _xp
from dkapprox.kernel_ridge._falkon import Preconditioner
from dkapprox.kernel_ridge._falkon_device import DevicePreconditioner
from dkapprox.kernels import Kernel
from dkapprox.linear_model import KernelRidge

DEVICE = xs.Device("device1")
CPU = xs.Device("CPU_DEVICE")
KERNELS = [("rbf", dict(gamma=0.3)), ("laplacian", dict(gamma=0.2)), ("polynomial", dict(degree=2, gamma=0.5))]
TOL = {np.float64: (1e-10, 1e-8), np.float32: (1e-6, 2e-3)}  # (CG tol, agreement with the NumPy fit)
FLOAT32_VS_FLOAT64 = 1e-3  # the host's bound of a float32 fit against the float64 one


def on_device(a):
    return xs.asarray(a, device=DEVICE)


def to_host(a):
    return np.asarray(a.to_device(CPU))


def regression(n=1_200, d=4, targets=1, dtype=np.float64):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 4 + 0.1 * rng.normal(size=n)
    if targets > 1:
        y = np.column_stack([y] + [np.cos(X[:, k % d]) for k in range(1, targets)])
    return X.astype(dtype), y


def device_blocks(X, rows=300):
    """A dask array whose blocks live on the device, behind NumPy meta (array-api-strict cannot be dask's meta)."""
    return da.from_array(X, chunks=(rows, -1)).map_blocks(on_device, dtype=X.dtype, meta=np.empty((0, 0), X.dtype))


def params(kernel, kw, dtype):
    return dict(alpha=1.0, kernel=kernel, n_centers=100, tol=TOL[dtype][0], max_iter=200, random_state=0, **kw)


# the polynomial kernel of degree 2 on 4 features has rank 15 < 100 centers: its float32 fit does not
# converge on the host either (a rank-deficient K_CC rounded in float32), so it is tested in float64
CASES = [(k, kw, dtype) for k, kw in KERNELS for dtype in (np.float64, np.float32)
         if not (k == "polynomial" and dtype == np.float32)]


@pytest.mark.parametrize("kernel, kw, dtype", CASES, ids=[f"{k}-{d.__name__}" for k, _, d in CASES])
def test_a_device_array_fits_the_numpy_model_and_predicts_on_its_device(kernel, kw, dtype):
    X, y = regression(dtype=dtype)
    want = KernelRidge(**params(kernel, kw, dtype)).fit(X, y)
    got = KernelRidge(**params(kernel, kw, dtype)).fit(on_device(X), y)
    assert isinstance(got.dual_coef_, np.ndarray) and got.dual_coef_.dtype == dtype
    np.testing.assert_array_equal(got.centers_, want.centers_)
    assert got.center_passes_ == want.center_passes_ and abs(got.n_iter_ - want.n_iter_) <= 1
    pred = got.predict(on_device(X))
    assert _xp.namespace(pred) is xs and pred.device == DEVICE and _xp.numpy_dtype(pred) == dtype
    np.testing.assert_allclose(to_host(pred), want.predict(X), rtol=0, atol=TOL[dtype][1])
    assert got.score(on_device(X), y) == pytest.approx(want.score(X, y), abs=TOL[dtype][1])
    if dtype == np.float32:
        exact = KernelRidge(**params(kernel, kw, np.float64)).fit(X.astype(np.float64), y).predict(X.astype(np.float64))
        np.testing.assert_allclose(to_host(pred), exact, rtol=0, atol=FLOAT32_VS_FLOAT64)


@pytest.mark.parametrize("kernel, kw, dtype", [CASES[1], CASES[2]], ids=["rbf-float32", "laplacian-float64"])
def test_dask_blocks_on_a_device_fit_the_numpy_model_and_predict_device_blocks(kernel, kw, dtype):
    X, y = regression(n=600, targets=2, dtype=dtype)  # two targets: a 1-D prediction of device blocks behind
    # NumPy meta would be concatenated by NumPy in dask's drop_axis (CuPy meta has its own concatenate)
    want = KernelRidge(**params(kernel, kw, dtype)).fit(X, y)
    got = KernelRidge(**params(kernel, kw, dtype)).fit(device_blocks(X), da.from_array(y, chunks=(300, -1)))
    np.testing.assert_array_equal(got.centers_, want.centers_)
    pred = got.predict(device_blocks(X))
    assert isinstance(pred, da.Array)

    def checked(block):  # every block of the prediction is on the device, in the input's dtype
        assert _xp.namespace(block) is xs and block.device == DEVICE and _xp.numpy_dtype(block) == dtype
        return to_host(block)

    host = pred.map_blocks(checked, dtype=dtype, meta=np.empty((0, 0), dtype)).compute()
    np.testing.assert_allclose(host, want.predict(X), rtol=0, atol=TOL[dtype][1])


@pytest.mark.parametrize("lazy", [False, True])
def test_sample_weight_on_a_device_fits_the_weighted_numpy_model(lazy):
    X, y = regression()
    w = np.random.default_rng(1).uniform(0.0, 2.0, size=X.shape[0])
    p = params("rbf", dict(gamma=0.3), np.float64)
    want = KernelRidge(**p).fit(X, y, sample_weight=w)
    if lazy:
        got = KernelRidge(**p).fit(device_blocks(X), da.from_array(y, chunks=300),
                                   sample_weight=da.from_array(w, chunks=300))
    else:
        got = KernelRidge(**p).fit(on_device(X), y, sample_weight=on_device(w))
    np.testing.assert_allclose(got.dual_coef_, want.dual_coef_, rtol=1e-7, atol=1e-7 * np.abs(want.dual_coef_).max())


def test_the_preconditioner_on_a_device_is_the_hosts_within_its_rounding():
    """Without a triangular solver (the array API has none) the factors are inverted once: B and B^T
    are then one matrix and its transpose, and agree with the host's solves within cond(L) eps."""
    X, _ = regression(n=60)
    kernel = Kernel("rbf", (("gamma", 0.3),))
    alphas = np.array([1.0, 0.1])
    host = Preconditioner(kernel.between(X, X), alphas)
    dev = DevicePreconditioner(xs, DEVICE, kernel, X, alphas)
    host.set_weight_total(500.0)
    dev.set_weight_total(500.0)
    assert dev.jitter == pytest.approx(host.jitter)
    v = np.random.default_rng(2).normal(size=(60, 2))
    for name in ("apply", "apply_t", "penalty"):
        want, got = getattr(host, name)(v), getattr(dev, name)(v)
        assert isinstance(got, np.ndarray)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9 * np.abs(want).max(), err_msg=name)


def test_what_cannot_run_on_a_device_says_so():
    X, y = regression(n=200)
    with pytest.raises(TypeError, match="KernelRidge's kernel .* runs on NumPy blocks only"):
        KernelRidge(kernel=lambda a, b: float(a @ b), n_centers=10).fit(on_device(X), y)
    # a dask array of device blocks behind NumPy meta: the pass's block function says it
    with pytest.raises(TypeError, match="runs on NumPy blocks only"):
        KernelRidge(kernel=lambda a, b: float(a @ b), n_centers=10).fit(device_blocks(X), da.from_array(y, chunks=300))
    host_model = KernelRidge(kernel=lambda a, b: float(a @ b), n_centers=10).fit(X, y)
    with pytest.raises(TypeError, match="runs on NumPy blocks only"):
        host_model.predict(on_device(X))
    with pytest.raises(ValueError, match="Input X contains NaN"):
        bad = X.copy()
        bad[3, 1] = np.nan
        KernelRidge(kernel="rbf", n_centers=10).fit(on_device(bad), y)


def test_a_host_model_predicts_device_arrays_on_the_device():
    X, y = regression(n=400)
    model = KernelRidge(kernel="rbf", gamma=0.3, n_centers=50, random_state=0).fit(X, y)
    pred = model.predict(on_device(X))
    assert pred.device == DEVICE
    np.testing.assert_allclose(to_host(pred), model.predict(X), rtol=0, atol=1e-10)


@pytest.mark.parametrize("kernel, kw", KERNELS[:2], ids=[k for k, _ in KERNELS[:2]])
def test_many_slices_a_block_give_what_one_slice_gives(monkeypatch, kernel, kw):
    """A block cut into slices of 64 rows (the last one short): the slices' sums and the buffer they reuse."""
    from dkapprox.kernel_ridge import _falkon_device

    X, y = regression(dtype=np.float32)
    one = KernelRidge(**params(kernel, kw, np.float32)).fit(on_device(X), y)
    monkeypatch.setattr(_falkon_device, "DEVICE_SLICE_ELEMENTS", 100 * 64)
    many = KernelRidge(**params(kernel, kw, np.float32)).fit(on_device(X), y)
    np.testing.assert_allclose(to_host(many.predict(on_device(X))), to_host(one.predict(on_device(X))), rtol=0,
                               atol=TOL[np.float32][1])
