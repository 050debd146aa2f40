"""Landmark selection: chunk invariance, what the landmarks are, and that kmeans/leverage beat uniform."""

import tracemalloc

import dask.array as da
import numpy as np
import pytest
from _arrays import rows_where
from _rounding import assert_chunking_promise, compute_checked
from scipy import linalg, stats
from sklearn.datasets import make_blobs
from sklearn.metrics.pairwise import rbf_kernel
from threadpoolctl import threadpool_limits

from dkapprox.kernels import Kernel
from dkapprox.nystroem import Nystroem
from dkapprox.nystroem.landmarks import Leverage, leverage_scores, row_uniforms, uniform_indices

METHODS = ["uniform", "kmeans", "leverage", "rpcholesky"]
CHUNKS = [(97, -1), (1, -1), (300, -1), (64, 2)]


def data(n=300, d=5, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).random((n, d)).astype(dtype)


def fit(X, method, **kw):
    kw = {"n_components": 20, "random_state": 7, "landmarks": method, **kw}
    return Nystroem(**kw).fit(X)


def assert_same_fit(a, b, rtol):
    np.testing.assert_array_equal(a.component_indices_, b.component_indices_)
    np.testing.assert_allclose(a.components_, b.components_, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(a.normalization_, b.normalization_, rtol=rtol, atol=rtol * 100)


@pytest.mark.parametrize("chunks", CHUNKS, ids=str)
@pytest.mark.parametrize("method", METHODS)
def test_fit_is_chunk_invariant(method, chunks):
    X = data()
    reference = fit(X, method)
    assert_same_fit(fit(da.from_array(X, chunks=chunks), method), reference, rtol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_fit_with_unknown_chunk_sizes_costs_one_more_pass(method):
    X = data()
    lazy = da.from_array(X, chunks=(50, -1))
    unknown = rows_where(lazy, lazy[:, 0] >= 0)  # every row, but dask no longer knows how many per block
    assert np.isnan(unknown.chunks[0][0])
    known, counted = fit(lazy, method), fit(unknown, method)
    assert_same_fit(counted, fit(X, method), rtol=1e-12)
    assert counted.landmark_passes_ == known.landmark_passes_ + 1
    assert known.landmark_passes_ == {"uniform": 1, "kmeans": 5, "leverage": 2, "rpcholesky": 1}[method]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("method", METHODS)
def test_transform_is_chunk_invariant(method, dtype):
    X = data(dtype=dtype)
    est = fit(X, method)
    expected = est.transform(X)
    for chunks in [(97, -1), (1, -1), (64, 2)]:
        lazy = est.transform(da.from_array(X, chunks=chunks))
        assert lazy.dtype == dtype
        got = compute_checked(lazy)
        assert got.dtype == dtype
        assert_chunking_promise(est, X, got, expected, what=f"{method} {chunks}")


@pytest.mark.parametrize("method", ["uniform", "leverage", "rpcholesky"])
def test_uniform_and_leverage_landmarks_are_distinct_rows(method):
    X = data(n=400)
    for est in (fit(X, method, n_components=60), fit(da.from_array(X, chunks=33), method, n_components=60)):
        indices = est.component_indices_
        assert indices.dtype == np.int64
        assert len(np.unique(indices)) == 60
        np.testing.assert_array_equal(est.components_, X[indices])


def test_kmeans_component_indices_are_the_rows_that_seeded_the_centroids():
    X = data(n=400)
    seeds_only = fit(X, "kmeans", landmark_params={"n_iter": 0})
    indices = seeds_only.component_indices_
    assert len(np.unique(indices)) == 20 and indices.min() >= 0 and indices.max() < 400
    np.testing.assert_array_equal(seeds_only.components_, X[indices])
    refined = fit(X, "kmeans")
    np.testing.assert_array_equal(refined.component_indices_, indices)
    assert not np.allclose(refined.components_, X[indices])  # Lloyd moved the centroids
    # every centroid is the mean of the rows nearest to the previous centroids: inside the data's box
    assert (refined.components_ >= X.min(0)).all() and (refined.components_ <= X.max(0)).all()


def test_uniform_above_the_permutation_limit_draws_in_o_of_m_memory():
    rs = np.random.RandomState(0)
    tracemalloc.start()
    indices = uniform_indices(10**12, 1000, rs)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2_000_000  # bytes; a permutation of 10**12 rows would be 8 TB
    assert len(np.unique(indices)) == 1000 and indices.min() >= 0 and indices.max() < 10**12
    X = data(n=500)
    small_limit = {"max_permutation_rows": 100}
    est = fit(X, "uniform", landmark_params=small_limit)
    assert len(np.unique(est.component_indices_)) == 20
    np.testing.assert_array_equal(est.components_, X[est.component_indices_])
    assert_same_fit(fit(da.from_array(X, chunks=37), "uniform", landmark_params=small_limit), est, rtol=0)
    assert not np.array_equal(est.component_indices_, fit(X, "uniform").component_indices_)


def test_row_uniforms_depend_on_the_row_only():
    rows = np.arange(200_000, dtype=np.int64)
    u = row_uniforms(12345, rows)
    assert u.min() > 0 and u.max() < 1
    assert stats.kstest(u, "uniform").pvalue > 1e-3
    split = np.concatenate([row_uniforms(12345, rows[:777]), row_uniforms(12345, rows[777:])])
    np.testing.assert_array_equal(split, u)
    assert np.corrcoef(u[:-1], u[1:])[0, 1] < 0.01
    assert not np.array_equal(row_uniforms(12346, rows[:10]), u[:10])


def test_leverage_scores_track_exact_ridge_leverage_scores():
    X = blobs(1000, seed=0)
    gamma, n_components = 0.1, 128
    kernel = Kernel("rbf", (("gamma", gamma),))
    rs = np.random.RandomState(0)
    pilot = X[uniform_indices(len(X), n_components, rs)]
    state = Leverage().state(pilot, n_components, kernel, rs)
    approx = leverage_scores(X, state)
    with threadpool_limits(1):  # two BLAS threads on a busy 2-core machine: 20x slower
        w, Q = linalg.eigh(rbf_kernel(X, gamma=gamma))
    ridge = state.ridge * len(X) / len(pilot)  # back on the scale of the full kernel
    exact = np.einsum("ij,j,ij->i", Q, np.clip(w, 0, None) / (np.clip(w, 0, None) + ridge), Q)
    assert stats.spearmanr(approx, exact).statistic > 0.9


def test_array_landmarks_are_used_as_given():
    X = data(n=100, d=4)
    given = np.random.default_rng(5).random((7, 4))
    est = Nystroem(landmarks=given, n_components=50).fit(X.astype(np.float32))
    assert est.components_.dtype == np.float32
    np.testing.assert_allclose(est.components_, given.astype(np.float32))
    np.testing.assert_array_equal(est.component_indices_, np.full(7, -1))
    assert est.transform(X).shape == (100, 7)
    lazy_given = Nystroem(landmarks=da.from_array(given, chunks=3)).fit(da.from_array(X, chunks=30))
    np.testing.assert_allclose(lazy_given.components_, given)
    assert lazy_given.landmark_passes_ == 0
    with pytest.raises(ValueError, match="landmarks has 3 features"):
        Nystroem(landmarks=given[:, :3]).fit(X)
    with pytest.raises(ValueError, match="landmark_params has no options"):
        Nystroem(landmarks=given, landmark_params={"n_iter": 2}).fit(X)


def test_landmark_params_are_checked_and_never_written_to():
    X = data(n=100)
    params = {"n_iter": 1}
    fit(X, "kmeans", landmark_params=params)
    assert params == {"n_iter": 1}
    with pytest.raises(ValueError, match=r"\['n_iter'\] are not options of landmarks='leverage'"):
        fit(X, "leverage", landmark_params=params)
    for method, bad in [("kmeans", {"n_iter": -1}), ("kmeans", {"sample_size": 0}), ("leverage", {"rank": 2.5}),
                        ("leverage", {"pilot_size": True}), ("uniform", {"max_permutation_rows": None})]:
        with pytest.raises(ValueError, match=f"landmark_params\\['{next(iter(bad))}'\\] must be an int"):
            fit(X, method, landmark_params=bad)


def blobs(n, seed):
    """Zipf-sized clusters whose widths shrink with their size: very uneven density."""
    sizes = np.maximum(1, np.round(n * (w := 1.0 / np.arange(1, 31) ** 1.5) / w.sum())).astype(int)
    X, _ = make_blobs(n_samples=sizes, n_features=8, cluster_std=np.geomspace(0.1, 2.0, 30),
                      center_box=(-10, 10), random_state=seed)
    return X[np.random.default_rng(seed).permutation(len(X))]


def kernel_error(est, X_train, X_test, gamma):
    Z = est.fit(X_train).transform(X_test)
    K = rbf_kernel(X_test, gamma=gamma)
    return np.linalg.norm(K - Z @ Z.T) / np.linalg.norm(K)


def test_kmeans_and_leverage_beat_uniform_on_uneven_density():
    X = blobs(7000, seed=0)
    X_test, X_train = X[:1000], X[1000:]
    errors = {m: kernel_error(Nystroem(gamma=0.1, n_components=128, landmarks=m, random_state=0),
                              X_train, X_test, 0.1) for m in METHODS}
    assert errors["kmeans"] < 0.7 * errors["uniform"], errors
    assert errors["leverage"] < 0.7 * errors["uniform"], errors
