"""landmarks='leverage': recursive ridge leverage scores (Musco & Musco 2017) on a subsample, then one scoring pass."""

import dask.array as da
import numpy as np
import pytest
import zarr
from scipy import linalg, stats
from sklearn.datasets import make_blobs
from sklearn.metrics.pairwise import rbf_kernel
from threadpoolctl import threadpool_limits

from dkapprox.kernels import Kernel
from dkapprox.nystroem import Nystroem
from dkapprox.nystroem.landmarks import Leverage, uniform_indices
from dkapprox.nystroem.leverage import inclusion_probabilities, leverage_scores, recursive_state, tail_ridge


def blobs(n, seed):
    """Zipf-sized clusters whose widths shrink with their size (test_landmarks.py's): very uneven density."""
    sizes = np.maximum(1, np.round(n * (w := 1.0 / np.arange(1, 31) ** 1.5) / w.sum())).astype(int)
    X, _ = make_blobs(n_samples=sizes, n_features=8, cluster_std=np.geomspace(0.1, 2.0, 30),
                      center_box=(-10, 10), random_state=seed)
    return X[np.random.default_rng(seed).permutation(len(X))]


def exact_scores(K, rank):
    """Exact ridge leverage scores at lambda = (sum of the eigenvalues beyond rank) / rank, and lambda."""
    with threadpool_limits(1):  # two BLAS threads on a busy 2-core machine: many times slower
        w, Q = linalg.eigh(K)
    w = np.clip(w, 0, None)
    ridge = np.sort(w)[::-1][rank:].sum() / rank
    return np.einsum("ij,j,ij->i", Q, w / (w + ridge), Q), ridge


def test_the_recursion_finds_the_ridge_and_the_scores_of_all_the_rows():
    """A dictionary of 128 of 2000 rows, drawn over four levels, scores them as the exact scores rank them."""
    X = blobs(2000, seed=1)
    kernel = Kernel("rbf", (("gamma", 0.1),))
    exact, ridge = exact_scores(rbf_kernel(X, gamma=0.1), rank=8)
    for seed in range(2):
        state = recursive_state(X, 128, 8, kernel, np.random.RandomState(seed))
        assert 90 <= state.pilot.shape[0] <= 170  # about 128 drawn at the last level
        assert 0.6 * ridge < state.ridge < 1.2 * ridge, (state.ridge, ridge)  # measured 0.77-0.94x
        assert stats.spearmanr(leverage_scores(X, state), exact).statistic > 0.97


def test_a_small_sample_is_its_own_dictionary():
    X = np.random.default_rng(0).random((50, 3))
    state = recursive_state(X, 25, 2, Kernel("rbf"), np.random.RandomState(0))
    np.testing.assert_array_equal(state.pilot, X)  # 50 <= 2 x 25 rows: exact scores among them
    exact, ridge = exact_scores(rbf_kernel(X), rank=2)
    np.testing.assert_allclose(state.ridge, ridge, rtol=1e-9)
    np.testing.assert_allclose(leverage_scores(X, state) / state.ridge, exact, rtol=1e-6)


def test_inclusion_probabilities_sum_to_the_budget_and_never_exceed_one():
    scores = np.random.default_rng(1).pareto(1.0, 1000) + 1e-3
    for size in (1, 10, 100, 999):
        p = inclusion_probabilities(scores, size)
        assert p.max() <= 1.0 and np.isclose(p.sum(), size)
        assert np.all(np.diff(p[np.argsort(scores)]) >= 0)  # increasing in the score
    assert np.array_equal(inclusion_probabilities(scores, 1000), np.ones(1000))
    assert tail_ridge(np.array([5.0, 3.0, 1.0, 1.0]), 2) == 1.0


@pytest.mark.parametrize("chunks", [(97, -1), (1, -1), (64, 2), (500, -1)], ids=str)
def test_the_same_landmarks_for_every_chunking(chunks):
    X = blobs(500, seed=2)
    params = dict(gamma=0.1, n_components=10, n_landmarks=40, landmarks="leverage",
                  landmark_params={"sample_size": 300}, random_state=3)  # a recursion of 3 levels
    reference = Nystroem(**params).fit(X)
    est = Nystroem(**params).fit(da.from_array(X, chunks=chunks))
    np.testing.assert_array_equal(est.component_indices_, reference.component_indices_)
    np.testing.assert_array_equal(est.components_, reference.components_)
    assert est.landmark_passes_ == reference.landmark_passes_ == 3


def test_numpy_dask_and_zarr_in_choose_the_same_rows(tmp_path):
    X = blobs(1200, seed=4).astype(np.float32)
    z = zarr.create_array(tmp_path / "x.zarr", shape=X.shape, chunks=(250, 8), dtype=X.dtype)
    z[...] = X
    params = dict(gamma=0.1, n_components=30, landmarks="leverage", random_state=0)
    on_numpy = Nystroem(**params).fit(X)
    for data in (da.from_array(X, chunks=(300, -1)), zarr.open_array(tmp_path / "x.zarr", mode="r")):
        est = Nystroem(**params).fit(data)
        np.testing.assert_array_equal(est.component_indices_, on_numpy.component_indices_)
        np.testing.assert_array_equal(est.components_, X[on_numpy.component_indices_])
        assert est.landmark_passes_ == 2 and est.components_.dtype == np.float32


def test_landmarks_are_sampled_from_every_row_not_only_the_subsample():
    X = np.random.default_rng(5).random((3000, 4))
    est = Nystroem(n_components=40, landmarks="leverage", landmark_params={"sample_size": 200},
                   random_state=7).fit(X)
    sample = set(uniform_indices(3000, 200, np.random.RandomState(7)))
    assert len(set(est.component_indices_) - sample) > 30  # the scoring pass reads every row
    assert len(np.unique(est.component_indices_)) == 40
    np.testing.assert_array_equal(est.components_, X[est.component_indices_])


def test_leverage_beats_uniform_on_uneven_density_by_far():
    """Its own ground. Measured (2,000 rows, Frobenius error on the fitted rows, 2 seeds): plain
    Nystroem(64) 0.61x uniform's error, rank 32 of 128 landmarks 0.34x."""
    X = blobs(2000, seed=0)
    K = rbf_kernel(X, gamma=0.1)
    errors = {}
    for method in ("uniform", "leverage"):
        for m, wide in ((64, None), (32, 128)):
            errors[method, m] = np.mean([np.linalg.norm(K - Z @ Z.T) for Z in (
                Nystroem(gamma=0.1, n_components=m, n_landmarks=wide, landmarks=method, random_state=s)
                .fit(X).transform(X) for s in range(2))])
    assert errors["leverage", 64] < 0.75 * errors["uniform", 64], errors
    assert errors["leverage", 32] < 0.5 * errors["uniform", 32], errors


def test_options_are_checked():
    X = np.random.default_rng(6).random((60, 3))
    with pytest.raises(ValueError, match=r"landmark_params\['sample_size'\] must be an int >= 1 or None"):
        Nystroem(landmarks="leverage", n_components=5, landmark_params={"sample_size": 0}).fit(X)
    with pytest.raises(ValueError, match=r"valid options: \['pilot_size', 'rank', 'sample_size'\]"):
        Nystroem(landmarks="leverage", n_components=5, landmark_params={"n_iter": 1}).fit(X)
    small = Leverage(sample_size=40, pilot_size=8, rank=2)
    est = Nystroem(landmarks="leverage", n_components=5, random_state=0,
                   landmark_params={"sample_size": 40, "pilot_size": 8, "rank": 2}).fit(X)
    assert small.state(X[:40], 5, Kernel("rbf"), np.random.RandomState(0)).pilot.shape[0] <= 40
    assert len(np.unique(est.component_indices_)) == 5


def test_every_kernel_gives_distinct_rows_and_finite_features():
    X = np.random.default_rng(7).random((300, 4))
    for kernel, params in [("rbf", {}), ("laplacian", {}), ("cosine", {}), ("chi2", {}), ("linear", {}),
                           ("polynomial", {"degree": 2}), ("sigmoid", {"gamma": 0.1, "coef0": 0.2})]:
        est = Nystroem(kernel=kernel, n_components=10, n_landmarks=40, landmarks="leverage", random_state=0,
                       **params).fit(X)
        assert len(np.unique(est.component_indices_)) == 40, kernel
        assert np.isfinite(est.transform(X)).all(), kernel
