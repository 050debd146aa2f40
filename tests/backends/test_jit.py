"""The compiled Fourier feature map against the NumPy reference, libm and scikit-learn."""

import math
import subprocess
import sys

import dask.array as da
import numpy as np
import pytest
from _estimators import CONTRACT_ESTIMATORS
from _estimators import ident as contract_ident
from _rounding import assert_chunking_promise, transform_by_blocks
from sklearn.base import clone
from sklearn.kernel_approximation import RBFSampler as SkRBFSampler

import dkapprox
from dkapprox import backends
from dkapprox.backends import _jit

pytestmark = pytest.mark.skipif(not _jit.enabled(), reason="numba is a dependency: this fails where it is missing")


@pytest.fixture
def compiled_always(monkeypatch):
    """Every float64 block takes the compiled path, however small, in tiles of a few rows (7 rows of
    64 frequencies) so that blocks span several tiles and end in a short one."""
    monkeypatch.setattr(_jit, "MIN_COMPILED_VALUES", 0)
    monkeypatch.setattr(_jit, "TILE_VALUES", 7 * 64)


@pytest.fixture
def numpy_only(monkeypatch):
    monkeypatch.setenv("DKAPPROX_JIT", "0")


def ulps(got, expected):
    return np.abs(got - expected) / np.spacing(np.maximum(np.abs(expected), np.finfo(np.float64).tiny))


@pytest.mark.parametrize("limit", [1.0, 1e3, 1e5, _jit._kernels().REDUCTION_LIMIT if _jit.enabled() else 1.0])
def test_cos_and_sin_within_two_ulp_of_libm(limit):
    k = _jit._kernels()
    x = np.random.default_rng(0).uniform(-limit, limit, size=(400, 500))
    x[0, :4] = [0.0, -0.0, limit, -limit]
    cos = np.empty_like(x)
    k.cos_rows(x, np.zeros(500), 1.0, cos)
    both = np.empty((400, 1000))
    k.sincos_rows(x, 1.0, both)
    assert ulps(cos, np.cos(x)).max() <= 2 and ulps(both[:, :500], np.cos(x)).max() <= 2
    assert ulps(both[:, 500:], np.sin(x)).max() <= 2
    np.testing.assert_array_equal(both[:, :500], cos)


def test_touched_empty_gives_a_fresh_array_of_the_shape_and_dtype():
    from dkapprox.utils._system import touched_empty

    for shape, dtype in [((3000, 700), np.float64), ((5, 3), np.float32), ((0, 4), np.float64), ((1,), np.int64)]:
        a = touched_empty(shape, dtype)
        assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous and a.flags.owndata
    a = touched_empty((3000, 700))
    assert (a.reshape(-1)[::512] == 0).all()  # one value in each 4 KiB page written


def test_out_of_range_arguments_anywhere_in_a_row_take_libm():
    k = _jit._kernels()
    x = np.random.default_rng(7).uniform(-5, 5, size=(3, 50))
    x[1, 17], x[2, 0], x[2, 49] = 3e7, np.nan, -1e9
    cos, both = np.empty_like(x), np.empty((3, 100))
    with np.errstate(invalid="ignore"):
        k.cos_rows(x, np.zeros(50), 1.0, cos)
        k.sincos_rows(x, 1.0, both)
    assert ulps(cos, np.cos(x))[np.isfinite(x)].max() <= 2 and np.isnan(cos[2, 0])
    assert cos[1, 17] == np.cos(3e7) and both[2, 99] == np.sin(-1e9) and both[1, 67] == np.sin(3e7)
    assert ulps(both[:, 50:], np.sin(x))[np.isfinite(x)].max() <= 2


def test_beyond_the_reduction_libm_itself():
    k = _jit._kernels()
    x = np.array([[1e6, -3e7, 1e300, np.inf, -np.inf, np.nan, k.REDUCTION_LIMIT * 1.0000001, 0.5]])
    cos = np.empty_like(x)
    with np.errstate(invalid="ignore"):
        k.cos_rows(x, np.zeros(x.shape[1]), 2.0, cos)
        both = np.empty((1, 2 * x.shape[1]))
        k.sincos_rows(x, 2.0, both)
        np.testing.assert_array_equal(cos[:, :-1], 2.0 * np.cos(x[:, :-1]))
        np.testing.assert_array_equal(both[:, x.shape[1]:-1], 2.0 * np.sin(x[:, :-1]))


def fourier_estimators():
    yield dkapprox.RBFSampler(n_components=64, gamma=0.3, random_state=0)
    yield dkapprox.SkewedChi2Sampler(n_components=64, random_state=0)
    for kernel in ("rbf", "laplacian", "cauchy", "matern"):
        for features in ("cos", "sincos"):
            for sampling in ("iid", "orthogonal", "structured", "qmc"):
                yield dkapprox.RandomFourierFeatures(64, kernel=kernel, gamma=0.3, features=features,
                                                     sampling=sampling, random_state=0)


ESTIMATORS = list(fourier_estimators())


def ident(est):
    p = est.get_params()
    return f"{type(est).__name__}-{p.get('kernel', '')}-{p.get('features', '')}-{p.get('sampling', '')}"


@pytest.mark.filterwarnings("ignore:sampling='structured' shares one draw")  # said on purpose for product spectra
@pytest.mark.parametrize("estimator", ESTIMATORS, ids=ident)
def test_compiled_path_equals_the_numpy_reference_within_the_cos_rounding(estimator, compiled_always, monkeypatch):
    X = np.random.default_rng(1).random((300, 12)) + 0.01
    est = estimator.fit(X)
    compiled = est.transform(X)
    monkeypatch.setenv("DKAPPROX_JIT", "0")
    reference = est.transform(X)
    assert compiled.dtype == reference.dtype == np.float64
    # both cos within 1 ulp of the true value, the tiles' products within the chunking bound
    assert_chunking_promise(est, X, compiled, reference, what="compiled vs NumPy")
    assert (compiled != reference).any()  # the compiled path ran: its cos rounds otherwise somewhere


@pytest.mark.parametrize("estimator", ESTIMATORS[:6], ids=ident)
def test_compiled_same_blocks_same_bits_and_chunking_within_the_bound(estimator, compiled_always):
    X = np.random.default_rng(2).random((500, 12)) + 0.01
    est = estimator.fit(X)
    lazy = est.transform(da.from_array(X, chunks=(97, -1)))
    got = lazy.compute()
    np.testing.assert_array_equal(got, transform_by_blocks(est, X, 97))
    np.testing.assert_array_equal(lazy.compute(), got)
    assert_chunking_promise(est, X, got)


@pytest.mark.parametrize("seed", range(3))
def test_compiled_rbf_sampler_gives_scikit_learns_numbers(seed, compiled_always):
    X = np.random.default_rng(seed).normal(size=(2000, 32))
    ours = dkapprox.RBFSampler(n_components=512, gamma=0.1, random_state=seed).fit(X).transform(X)
    theirs = SkRBFSampler(n_components=512, gamma=0.1, random_state=seed).fit(X).transform(X)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10)


def test_large_gamma_arguments_take_libm(compiled_always):
    X = np.random.default_rng(3).normal(size=(200, 8)) * 1e3
    est = dkapprox.RBFSampler(n_components=64, gamma=1e6, random_state=0).fit(X)  # |x.w| ~ 1e6 or more
    W = est.random_weights_
    assert np.abs(X @ W).max() > _jit._kernels().REDUCTION_LIMIT
    expected = math.sqrt(2 / 64) * np.cos(X @ W + est.random_offset_)
    assert_chunking_promise(est, X, est.transform(X), expected)


def test_float32_and_small_blocks_stay_on_numpy(monkeypatch):
    X = np.random.default_rng(4).random((100, 8))
    est = dkapprox.RBFSampler(n_components=32, random_state=0).fit(X)
    for data in (X.astype(np.float32), X):  # float32: NumPy's SIMD cos; 100 x 32 < MIN_COMPILED_VALUES
        monkeypatch.delenv("DKAPPROX_JIT", raising=False)
        a = est.transform(data)
        monkeypatch.setenv("DKAPPROX_JIT", "0")
        np.testing.assert_array_equal(a, est.transform(data))


@pytest.mark.parametrize("features", ["cos", "sincos"])
def test_float32_maps_each_tile_as_numpy_would_and_never_loads_numba(features):
    """float32 tiles: each tile's product, then NumPy's own ops on it, written once; same bits as doing that by hand.

    By hand means the same BLAS calls: the offset is one more row of the weights against a column of
    ones (dkapprox.backends._jit._tiled_numpy), a 17-term sum rounded once, not ``X @ W`` then ``+= b``
    (rounded twice). The two agree only on kernels that add the 17th product last (Sandybridge,
    Prescott); under other kernels (Haswell's) some of the values differ. Both sides on one BLAS
    thread, as a block task runs (promise 1 of docs/precision.md)."""
    code = f"""
import sys, numpy as np, dkapprox
from threadpoolctl import threadpool_limits
from dkapprox.backends import _jit
X = np.random.default_rng(5).normal(size=(10_000, 16)).astype(np.float32)
est = dkapprox.RandomFourierFeatures(512, features={features!r}, random_state=0).fit(X)
W = est.random_weights_.astype(np.float32)  # kept in float64, cast to the data's dtype for its state
b = None if est.random_offset_ is None else est.random_offset_.astype(np.float32)
with threadpool_limits(1, user_api="blas"):
    got = est.transform(X)
assert X.shape[0] * got.shape[1] >= _jit.MIN_COMPILED_VALUES  # a block the float64 path would compile for
step = max(1, min(_jit.TILE_ROWS_32, _jit.TILE_VALUES_32 // W.shape[1]))
assert step < X.shape[0]  # several tiles
parts = []
with threadpool_limits(1, user_api="blas"):
    for start in range(0, X.shape[0], step):
        rows = X[start:start + step]
        if b is None:
            p = rows @ W
            parts.append(np.hstack([np.cos(p), np.sin(p)]) * float(np.sqrt(1.0 / W.shape[1])))
        else:  # the offset as the product's last row, against a column of ones
            p = np.hstack([rows, np.ones((rows.shape[0], 1), np.float32)]) @ np.vstack([W, b[None, :]])
            parts.append(np.cos(p) * float(np.sqrt(2.0 / W.shape[1])))
expected = np.vstack(parts)
assert got.dtype == np.float32 and expected.dtype == np.float32
np.testing.assert_array_equal(got, expected)
print("numba" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "False"


def test_switched_off_or_missing_numba_runs_the_numpy_path(numpy_only):
    assert not _jit.enabled()
    code = ("import sys, warnings; sys.modules['numba'] = None\n"
            "import numpy as np, dkapprox\n"
            "from dkapprox.backends import _jit\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    on = _jit.enabled()\n"
            "Z = dkapprox.RBFSampler(n_components=512, random_state=0).fit_transform(np.ones((400, 4)))\n"
            "print(on, Z.shape, [str(x.message) for x in w])\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "DKAPPROX_JIT"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("False (400, 512)") and "compiled kernels unavailable" in out.stdout, out.stdout


def test_a_worker_loads_the_kernels_once_not_per_task(tmp_path):
    from distributed import Client, LocalCluster

    X = da.random.default_rng(0).random((40_000, 16), chunks=(1000, 16))
    est = dkapprox.RBFSampler(n_components=256, random_state=0).fit(X)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        est.transform(X).sum().compute()
        stats = client.run(_kernel_stats)
    (compiled, signatures), = stats.values()
    assert compiled and signatures == 1  # one compiled signature served 40 blocks


def _kernel_stats():
    from dkapprox.backends import _jit

    k = _jit._kernels()
    return k is not None, len(k.cos_rows.signatures)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel,gamma", [("laplacian", 0.4), ("laplacian", None), ("chi2", 0.7), ("chi2", None),
                                          ("additive_chi2", None)])
def test_compiled_pairwise_kernels_equal_scikit_learns(kernel, gamma, dtype):
    from sklearn.kernel_approximation import Nystroem as SkNystroem
    from sklearn.metrics.pairwise import pairwise_kernels

    X = np.random.default_rng(5).random((3000, 20)).astype(dtype)
    X[:5, :3] = 0.0  # chi2: terms with x + l == 0 are skipped
    params = {} if gamma is None else {"gamma": gamma}
    ours = dkapprox.Nystroem(kernel=kernel, n_components=200, random_state=0, **params).fit(X)
    landmarks_t = np.ascontiguousarray(ours.components_.astype(np.float64).T)
    default = (1.0 if kernel == "chi2" else 1 / 20) if gamma is None else gamma
    K = _jit.pairwise_kernel(kernel, X, landmarks_t, default)
    assert K is not None  # the compiled path ran
    expected = pairwise_kernels(X.astype(np.float64), ours.components_.astype(np.float64), metric=kernel,
                                filter_params=True, **params)
    np.testing.assert_allclose(K, expected, rtol=1e-12, atol=1e-300)
    if kernel != "additive_chi2":  # scikit-learn's Nystroem takes no indefinite kernel
        theirs = SkNystroem(kernel=kernel, n_components=200, random_state=0, **params).fit(X)
        tol = 1e-10 if dtype == np.float64 else 2e-4
        np.testing.assert_allclose(ours.transform(X), theirs.transform(X), rtol=tol, atol=tol)
    lazy = ours.transform(da.from_array(X, chunks=(700, -1))).compute()
    np.testing.assert_array_equal(lazy, transform_by_blocks(ours, X, 700))
    assert_chunking_promise(ours, X, lazy)


def test_negative_input_to_chi2_gets_scikit_learns_error():
    X = np.random.default_rng(6).random((500, 5))
    est = dkapprox.Nystroem(kernel="chi2", n_components=50, random_state=0).fit(X)
    with pytest.raises(ValueError, match="negative values"):
        est.transform(X - 0.5)


def test_read_only_package_folder_caches_in_the_users_folder(tmp_path):
    """A package folder on a read-only file system (a container image): numba keeps the compiled
    code in the user's cache folder instead, and the next process loads it from there."""
    import os
    import shutil
    from pathlib import Path

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI runs as root with util-linux: a read-only bind mount must be possible")
        pytest.skip("needs root and unshare for a read-only bind mount")
    src, home = tmp_path / "src", tmp_path / "home"
    shutil.copytree(Path(_jit.__file__).parents[1], src / "dkapprox", ignore=shutil.ignore_patterns("__pycache__"))
    home.mkdir()
    probe = ("import dkapprox; from dkapprox.backends import _jit; k = _jit._kernels(\"cos_rows\"); "
             "print(dkapprox.__file__, sum(k.cos_rows.stats.cache_hits.values()))")
    script = (f"mount --bind {src} {src} && mount -o remount,ro,bind {src} && "
              f"! touch {src}/written 2>/dev/null && "
              f"{sys.executable} -c '{probe}' && {sys.executable} -c '{probe}'")
    env = dict(os.environ, HOME=str(home), PYTHONPATH=str(src))
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("DKAPPROX_JIT", None)
    out = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300,
                         env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.split("\n")[:2]
    assert first.startswith(str(src)) and first.endswith(" 0")  # compiled: nothing to load yet
    assert second.endswith(" 1")  # the second process loaded cos_rows from the cache
    assert list((home / ".cache" / "numba").rglob("*cos_rows*.nbi"))
    assert not list((src / "dkapprox").rglob("*.nbi"))


INNER_PRODUCT_CASES = [("poly", {}), ("polynomial", {"degree": 1, "gamma": 0.5, "coef0": 0.0}),
                       ("poly", {"degree": 2, "coef0": -1.0}), ("poly", {"degree": 5, "gamma": 0.3, "coef0": -0.5}),
                       ("poly", {"degree": 2.5, "coef0": -1.0}), ("sigmoid", {}),
                       ("sigmoid", {"gamma": 0.2, "coef0": -0.3})]


def _inner_product_params(params, n_features):
    return params.get("gamma", 1.0 / n_features), params.get("coef0", 1), params.get("degree", 3)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel,params", INNER_PRODUCT_CASES)
def test_compiled_inner_product_kernels_equal_scikit_learns(kernel, params, dtype):
    from sklearn.metrics.pairwise import pairwise_kernels

    X = np.random.default_rng(7).normal(size=(400, 16)).astype(dtype)  # negative bases: NaN for degree 2.5
    landmarks = X[:90].astype(np.float64)
    with np.errstate(invalid="ignore"):  # NumPy's power warns of the NaN in both
        K = _jit.inner_product_kernel(kernel, X, landmarks.T, *_inner_product_params(params, 16))
        expected = pairwise_kernels(X.astype(np.float64), landmarks, metric=kernel, filter_params=True, **params)
    assert K is not None and K.dtype == np.float64  # the compiled path ran
    assert np.isnan(expected).any() == (params.get("degree") == 2.5)
    np.testing.assert_allclose(K, expected, rtol=1e-12, atol=1e-300)  # NaN where scikit-learn's is NaN


def _spy_inner_product_kernel(monkeypatch):
    """Records whether each call of the compiled inner-product kernel ran (True) or declined (False)."""
    calls, real = [], _jit.inner_product_kernel

    def spy(*args, **kwargs):
        K = real(*args, **kwargs)
        calls.append(K is not None)
        return K

    monkeypatch.setattr(backends, "inner_product_kernel", spy)  # the name the kernels' slices call
    return calls


#: not the NaN kernel, nor degree 1: a linear kernel's basis matrix has rank n_features + 1 < n_components, and
#: two pseudo-inverses of it differ by far more than rounding whatever computed the kernel
NYSTROEM_INNER_PRODUCT = [case for case in INNER_PRODUCT_CASES if case[1].get("degree") not in (1, 2.5)]


@pytest.mark.parametrize("kernel,params", NYSTROEM_INNER_PRODUCT)
def test_compiled_inner_product_nystroem_equals_scikit_learns(kernel, params, monkeypatch):
    from sklearn.kernel_approximation import Nystroem as SkNystroem

    X = np.random.default_rng(8).normal(size=(1500, 16))
    calls = _spy_inner_product_kernel(monkeypatch)
    ours = dkapprox.Nystroem(kernel=kernel, n_components=120, random_state=0, **params).fit(X)
    theirs = SkNystroem(kernel=kernel, n_components=120, random_state=0, **params).fit(X)
    np.testing.assert_allclose(ours.transform(X), theirs.transform(X), rtol=1e-10, atol=1e-10)
    assert calls and all(calls)  # every slice took the compiled path


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel,params", [("poly", {"degree": 3, "coef0": -0.5}), ("polynomial", {"degree": 1.5}),
                                           ("sigmoid", {"gamma": 0.1})])
def test_compiled_inner_product_same_blocks_same_bits(kernel, params, dtype, monkeypatch):
    X = (np.random.default_rng(9).random((2000, 12)) + 0.05).astype(dtype)
    calls = _spy_inner_product_kernel(monkeypatch)
    est = dkapprox.Nystroem(kernel=kernel, n_components=100, random_state=0, **params).fit(X)
    lazy = est.transform(da.from_array(X, chunks=(450, -1))).compute(scheduler="threads")
    assert sum(calls) >= 5  # each block's slices compiled (dask's empty meta block is declined)
    np.testing.assert_array_equal(lazy, transform_by_blocks(est, X, 450))
    assert_chunking_promise(est, X, lazy)


@pytest.mark.parametrize("kernel,params", [("poly", {"degree": 3}), ("sigmoid", {})])
def test_switched_off_inner_product_kernels_take_scikit_learns(kernel, params, monkeypatch):
    X = np.random.default_rng(10).normal(size=(1000, 16))
    est = dkapprox.Nystroem(kernel=kernel, n_components=100, random_state=0, **params).fit(X)
    calls = _spy_inner_product_kernel(monkeypatch)
    compiled = est.transform(X)
    assert calls and all(calls)
    monkeypatch.setenv("DKAPPROX_JIT", "0")
    calls.clear()
    reference = est.transform(X)
    assert calls and not any(calls)  # declined: scikit-learn's kernel ran
    if kernel == "sigmoid":  # the same BLAS call and affine bits, NumPy's tanh: the same bits
        np.testing.assert_array_equal(compiled, reference)
    else:  # products by squaring against pow: a few ulp
        assert (compiled != reference).any()
        assert_chunking_promise(est, X, compiled, reference, what="compiled vs NumPy")


def _spy_binning(monkeypatch):
    """Records whether each block's cells were compiled (True) or left to the NumPy loop (False)."""
    calls, real = [], _jit.binning_cells

    def spy(*args):
        done = real(*args)
        calls.append(done)
        return done

    monkeypatch.setattr(backends, "binning_cells", spy)  # the name binning's block function calls
    return calls


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n_components", [1000, 2**32])  # int32 and int64 columns
def test_compiled_binning_gives_the_numpy_loops_bits(dtype, n_components, compiled_always, monkeypatch):
    from dkapprox.random_features.binning import binning_features

    X = (np.random.default_rng(11).normal(size=(300, 9)) * 4).astype(dtype)
    est = dkapprox.RandomBinningFeatures(n_components=n_components, gamma=0.7, n_grids=40, random_state=0).fit(X)
    X[0, :6] = [np.nan, np.inf, -np.inf, 1e30, -1e30, 9.3e18]  # casts beyond int64: x86's 0x8000... in both
    state = est._state(X.dtype)
    calls = _spy_binning(monkeypatch)
    with np.errstate(invalid="ignore"):
        compiled = binning_features(X, state)
        monkeypatch.setenv("DKAPPROX_JIT", "0")
        reference = binning_features(X, state)
    assert calls == [True, False]  # compiled, then switched off
    assert compiled.indices.dtype == reference.indices.dtype == (np.int32 if n_components < 2**31 else np.int64)
    for part in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(compiled, part), getattr(reference, part))
    assert compiled.data.dtype == dtype


@pytest.mark.parametrize("dense_output", [False, True])
def test_compiled_binning_same_blocks_same_bits(dense_output, compiled_always, monkeypatch):
    import scipy.sparse as sp

    X = np.random.default_rng(12).random((900, 7))
    est = dkapprox.RandomBinningFeatures(n_components=512, n_grids=16, dense_output=dense_output,
                                         random_state=0).fit(X)
    calls = _spy_binning(monkeypatch)
    lazy = est.transform(da.from_array(X, chunks=(250, -1))).compute(scheduler="threads")
    assert sum(calls) >= 4
    by_blocks = transform_by_blocks(est, X, 250)
    whole = est.transform(X)
    for got in (lazy, by_blocks):  # exact: the same bits for every chunking
        assert sp.issparse(got) != dense_output
        np.testing.assert_array_equal(got.toarray() if sp.issparse(got) else got,
                                      whole.toarray() if sp.issparse(whole) else whole)


@pytest.mark.filterwarnings("ignore:sampling='structured' shares one draw")
@pytest.mark.parametrize("estimator", CONTRACT_ESTIMATORS, ids=contract_ident)
def test_every_estimator_both_paths_within_the_bound(estimator, compiled_always, monkeypatch):
    """Every registered transformer, float64, compiled against DKAPPROX_JIT=0: within the chunking bound
    (the two paths round the cos, the kernels' sums and the tiles' products differently), and bit for bit
    where there is no compiled path or it does the NumPy loop's exact steps (random binning)."""
    X = np.random.default_rng(8).random((300, 12)) + 0.01
    est = clone(estimator).fit(X)
    compiled = est.transform(X)
    monkeypatch.setenv("DKAPPROX_JIT", "0")
    reference = est.transform(X)
    assert type(compiled) is type(reference) and compiled.dtype == reference.dtype == np.float64
    assert_chunking_promise(est, X, compiled, reference, what="compiled vs NumPy")
    if type(est).__name__ in EXACT_BOTH_WAYS:
        np.testing.assert_array_equal(_dense(compiled), _dense(reference))


#: transformers whose two paths give the same bits: no compiled step, or one with the NumPy loop's exact steps
EXACT_BOTH_WAYS = {"GaussianRandomProjection", "SparseRandomProjection", "PolynomialCountSketch",
                   "AdditiveChi2Sampler", "RandomBinningFeatures"}


def _dense(a):
    return a.toarray() if hasattr(a, "toarray") else np.asarray(a)
