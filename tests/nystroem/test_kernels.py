"""Kernel plumbing and the transform: diagonals, frozen parameters, lazy transform, state shipped once."""

import copy

import cloudpickle
import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from _rounding import assert_chunking_promise, transform_by_blocks
from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS, pairwise_kernels, rbf_kernel

from dkapprox.engine import _dask_compat
from dkapprox.kernels import Kernel, RBFSlices, row_slices
from dkapprox.nystroem import Nystroem
from dkapprox.nystroem.kernels import NystroemState

PARAMS = {"polynomial": (("coef0", 0.5), ("degree", 2), ("gamma", 0.7)), "sigmoid": (("gamma", 0.2),),
          "rbf": (("gamma", 3.0),)}


def scaled_dot(x, y, scale=2.0):
    return scale * float(np.dot(x, y))


@pytest.mark.parametrize("metric", sorted(PAIRWISE_KERNEL_FUNCTIONS) + [scaled_dot])
def test_diagonal_equals_the_kernel_matrix_diagonal(metric):
    X = np.random.default_rng(0).random((40, 5))
    X[3] = 0.0  # a zero row (cosine normalizes it to zero)
    kernel = Kernel(metric, PARAMS.get(metric, (("scale", 3.0),) if callable(metric) else ()))
    expected = np.diag(pairwise_kernels(X, metric=metric, filter_params=True, **dict(kernel.params)))
    np.testing.assert_allclose(kernel.diagonal(X), expected, rtol=1e-12, atol=1e-12)
    if not callable(metric):  # a callable gets what it gets: this one takes dense rows only
        np.testing.assert_allclose(kernel.diagonal(sp.csr_matrix(X)), expected, rtol=1e-12, atol=1e-12)


def test_transform_is_lazy_and_declares_what_it_computes():
    X = np.random.default_rng(0).random((500, 6)).astype(np.float32)
    est = Nystroem(n_components=40, random_state=0).fit(X)
    lazy = est.transform(da.from_array(X, chunks=(64, 3)))
    assert lazy.dtype == np.float32 and lazy.shape == (500, 40)
    assert lazy.chunks == ((64,) * 7 + (52,), (40,))
    assert lazy._meta.dtype == np.float32
    out = lazy.compute()
    assert out.dtype == np.float32 and out.shape == (500, 40)


def test_landmarks_and_normalization_enter_the_graph_once():
    X = np.random.default_rng(0).random((400, 300))
    est = Nystroem(n_components=400, random_state=0).fit(X)  # state: 400 x 300 + 400 x 400 float64 = 2.2 MB
    state_bytes = est.components_.nbytes + est.normalization_.nbytes
    lazy = est.transform(da.from_array(X, chunks=(2, -1)))  # 200 blocks
    graph = dict(lazy.__dask_graph__())
    assert len(cloudpickle.dumps(graph)) < 2 * state_bytes + X.nbytes


def test_n_jobs_runs_pairwise_kernels_in_parallel_for_in_memory_input_only():
    X = np.random.default_rng(0).random((300, 4))
    serial = Nystroem(n_components=30, random_state=0).fit(X)
    fitted_in_parallel = Nystroem(n_components=30, random_state=0, n_jobs=2).fit(X)
    # the landmarks' kernel in joblib's row splits: the state rounds another way, as any fit statistic. The
    # kernel's entries move by a few eps (its distances sum 4 features); K^(-1/2) moves by at most about
    # cond(K) times that, relative to its largest entry (first order): measured 1e-9 of a 4e-7 bound here,
    # under OpenBLAS's Haswell and Sandybridge kernels alike (a fixed rtol of 1e-9 failed under Sandybridge)
    landmark_kernel = rbf_kernel(serial.components_, gamma=1.0 / X.shape[1])
    eps = np.finfo(np.float64).eps
    bound = X.shape[1] * eps * np.linalg.cond(landmark_kernel) * np.abs(serial.normalization_).max()
    np.testing.assert_allclose(fitted_in_parallel.normalization_, serial.normalization_, rtol=0, atol=bound)
    parallel = copy.deepcopy(serial).set_params(n_jobs=2)  # the same state, transformed in parallel
    assert_chunking_promise(serial, X, parallel.transform(X), what="joblib's row splits")
    np.testing.assert_array_equal(parallel.transform(da.from_array(X, chunks=100)).compute(),
                                  transform_by_blocks(serial, X, 100))  # dask tasks run one job each: the same blocks


def test_feature_names_and_pandas_output():
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(np.random.default_rng(0).random((30, 3)), columns=["a", "b", "c"])
    est = Nystroem(n_components=5, random_state=0).set_output(transform="pandas").fit(X)
    out = est.transform(X)
    assert list(out.columns) == [f"nystroem{i}" for i in range(5)]
    assert list(est.feature_names_in_) == ["a", "b", "c"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("gamma", [None, 0.3])
def test_rbf_slices_are_sklearn_rbf_kernel_bit_for_bit(dtype, gamma):
    X = np.random.default_rng(0).normal(3.0, 2.0, size=(1500, 12)).astype(dtype)
    landmarks = X[:40]
    state = NystroemState(Kernel("rbf", (("gamma", gamma),)), landmarks, np.eye(40, dtype=dtype))
    slices = row_slices(1500, 40)
    buffers = RBFSlices.of(state, X, slices)
    assert len(slices) > 1
    for s in slices:
        np.testing.assert_array_equal(buffers.kernel(X[s]), rbf_kernel(X[s], landmarks, gamma=gamma))


@pytest.mark.parametrize("kernel", ["rbf", "polynomial", "sigmoid", "laplacian"])
def test_one_row_blocks_within_the_bound_and_the_same_bits_when_computed_again(kernel):
    """A one-row block takes BLAS's matrix-vector path, whose rounding differs from a longer
    block's: the chunking promise (a bound) covers it, and the same one-row blocks computed
    again give the same bits."""
    X = np.random.default_rng(0).random((300, 12)).astype(np.float32) + 0.01
    est = Nystroem(kernel=kernel, n_components=20, random_state=1).fit(X)
    expected = est.transform(X)
    for chunks in [(1, -1), (299, -1), (7, -1)]:
        lazy = est.transform(da.from_array(X, chunks=chunks))
        got = lazy.compute()
        assert_chunking_promise(est, X, got, expected, what=f"{kernel} {chunks}")
        np.testing.assert_array_equal(lazy.compute(), got)
    sixth = dask.compute(_dask_compat.delayed_blocks(est.transform(da.from_array(X, chunks=1)))[5])[0]
    np.testing.assert_array_equal(est.transform(X[5:6]), sixth)


def int64_indices(X, cls):
    """``X`` as ``cls`` (csr_matrix or csr_array) with int64 indices and indptr (as scipy keeps them in a
    csr_array built with them, or in a matrix with more than 2**31 entries, sliced)."""
    out = cls(X, copy=True)
    out.indices, out.indptr = X.indices.astype(np.int64), X.indptr.astype(np.int64)
    assert out.indices.dtype == np.int64
    return out


@pytest.mark.parametrize("method, cls", [("uniform", sp.csr_matrix), ("uniform", sp.csr_array),
                                         ("kmeans", sp.csr_array), ("leverage", sp.csr_array),
                                         ("rpcholesky", sp.csr_array)])
def test_laplacian_kernel_on_sparse_input_with_int64_indices(method, cls):
    """scikit-learn's sparse manhattan loop takes int32 indices only ("Buffer dtype mismatch, expected
    'const int' but got 'long'", even with uniform landmarks): the kernel hands it int32 ones."""
    X = sp.random(120, 9, density=0.3, format="csr", random_state=0)
    wide = int64_indices(X, cls)
    params = dict(kernel="laplacian", gamma=0.5, n_components=12, landmarks=method, random_state=0)
    expected = Nystroem(**params).fit(X).transform(X)
    est = Nystroem(**params).fit(wide)
    np.testing.assert_array_equal(est.transform(wide), expected)
    assert wide.indices.dtype == np.int64  # the user's matrix is left as it was
    lazy = da.from_array(wide, chunks=(50, -1), asarray=False)
    np.testing.assert_allclose(Nystroem(**params).fit(lazy).transform(lazy).compute(), expected, rtol=0, atol=1e-12)
    landmarks = int64_indices(sp.csr_matrix(est.components_), cls)
    assert Kernel("laplacian").between(wide, landmarks).shape == (120, 12)
