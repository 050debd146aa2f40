"""landmarks='rpcholesky': randomly pivoted Cholesky on a uniform subsample, accelerated by rejection sampling."""

import dask.array as da
import numpy as np
import pytest
from scipy import stats
from sklearn.datasets import make_blobs
from sklearn.metrics.pairwise import rbf_kernel

from dkapprox.kernels import Kernel
from dkapprox.nystroem import Nystroem
from dkapprox.nystroem.landmarks import RPCholesky, uniform_indices
from dkapprox.nystroem.rpcholesky import rpcholesky


def blobs(n, seed):
    """Zipf-sized clusters whose widths shrink with their size (test_landmarks.py's): very uneven density."""
    sizes = np.maximum(1, np.round(n * (w := 1.0 / np.arange(1, 31) ** 1.5) / w.sum())).astype(int)
    X, _ = make_blobs(n_samples=sizes, n_features=8, cluster_std=np.geomspace(0.1, 2.0, 30),
                      center_box=(-10, 10), random_state=seed)
    return X[np.random.default_rng(seed).permutation(len(X))]


def test_pivots_follow_the_distribution_of_sequential_rpcholesky():
    """The accelerated sampler (proposals, rejection) draws pivot sets as one-at-a-time RPCholesky does.

    A linear kernel on 3-d points of different norms: the first pivot is drawn with probability
    ||x_i||^2 / sum ||x||^2, the second from the residual diagonal after the first.
    """
    rows = np.random.default_rng(0).normal(size=(6, 3)) * np.array([[3.0], [1.0], [0.5], [2.0], [1.5], [0.8]])
    K = rows @ rows.T
    kernel = Kernel("linear")
    probabilities = {}
    for i in range(6):
        residual = np.clip(np.diag(K) - K[:, i] ** 2 / K[i, i], 0, None)
        for j in range(6):
            if j != i:
                pair = frozenset((i, j))
                p = K[i, i] / np.trace(K) * residual[j] / residual.sum()
                probabilities[pair] = probabilities.get(pair, 0.0) + p
    rs = np.random.RandomState(0)
    draws = 2000
    counts = {pair: 0 for pair in probabilities}
    for _ in range(draws):
        pivots = rpcholesky(rows, 2, kernel, rs)
        assert len(set(pivots)) == 2
        counts[frozenset(pivots.tolist())] += 1
    pairs = sorted(probabilities, key=sorted)
    observed = np.array([counts[p] for p in pairs])
    expected = np.array([probabilities[p] for p in pairs]) * draws
    assert abs(expected.sum() - draws) < 1e-6
    assert stats.chisquare(observed, expected).pvalue > 1e-3, (observed, expected.round(1))


def test_a_kernel_of_low_rank_still_gives_k_distinct_pivots():
    rows = np.random.default_rng(1).random((40, 3))  # linear kernel: rank 3
    pivots = rpcholesky(rows, 7, Kernel("linear"), np.random.RandomState(0))
    assert len(np.unique(pivots)) == 7 and pivots.min() >= 0 and pivots.max() < 40
    est = Nystroem(kernel="linear", n_components=7, landmarks="rpcholesky", random_state=0).fit(rows)
    Z = est.transform(rows)
    assert np.isfinite(Z).all()
    np.testing.assert_allclose(Z @ Z.T, rows @ rows.T, rtol=0, atol=1e-8)  # 3 pivots already span it


def test_duplicate_rows_are_chosen_once():
    base = np.random.default_rng(2).random((10, 4))
    rows = np.repeat(base, 5, axis=0)  # every point five times
    pivots = rpcholesky(rows, 10, Kernel("rbf", (("gamma", 0.5),)), np.random.RandomState(1))
    # the residual of a copy of a pivot is zero: the ten pivots are ten different points
    assert len({tuple(r) for r in rows[pivots]}) == 10


@pytest.mark.parametrize("chunks", [(97, -1), (1, -1), (64, 2), (400, -1)], ids=str)
def test_the_same_landmarks_for_every_chunking(chunks):
    X = np.random.default_rng(3).random((400, 5))
    params = dict(n_components=25, landmarks="rpcholesky", landmark_params={"sample_size": 150}, random_state=11)
    reference = Nystroem(**params).fit(X)
    est = Nystroem(**params).fit(da.from_array(X, chunks=chunks))
    np.testing.assert_array_equal(est.component_indices_, reference.component_indices_)
    np.testing.assert_array_equal(est.components_, reference.components_)
    assert est.landmark_passes_ == reference.landmark_passes_ == 1


def test_landmarks_come_from_the_seeded_uniform_subsample():
    X = np.random.default_rng(4).random((500, 3))
    est = Nystroem(n_components=20, landmarks="rpcholesky", landmark_params={"sample_size": 60},
                   random_state=7).fit(X)
    sample = uniform_indices(500, 60, np.random.RandomState(7))
    assert set(est.component_indices_) <= set(sample)
    assert len(np.unique(est.component_indices_)) == 20
    np.testing.assert_array_equal(est.components_, X[est.component_indices_])
    again = Nystroem(n_components=20, landmarks="rpcholesky", landmark_params={"sample_size": 60},
                     random_state=7).fit(X)
    np.testing.assert_array_equal(again.component_indices_, est.component_indices_)
    other = Nystroem(n_components=20, landmarks="rpcholesky", random_state=8).fit(X)
    assert not np.array_equal(other.component_indices_, est.component_indices_)


def test_default_subsample_size():
    assert RPCholesky().sample_rows(10**9, 64) == 10_000
    assert RPCholesky().sample_rows(10**9, 4096) == 8 * 4096
    assert RPCholesky().sample_rows(3_000, 64) == 3_000
    assert RPCholesky(sample_size=10).sample_rows(10**6, 64) == 64  # never fewer rows than landmarks


def test_rpcholesky_beats_uniform_on_uneven_density():
    """Its own ground: trace-norm error on clusters of uneven density (0.45x uniform's, measured)."""
    X = blobs(2000, seed=0)
    K = rbf_kernel(X, gamma=0.1)
    errors = {}
    for method in ("uniform", "rpcholesky"):
        residuals = [K - Z @ Z.T for Z in (
            Nystroem(gamma=0.1, n_components=64, landmarks=method, random_state=s).fit(X).transform(X)
            for s in range(2))]
        errors[method] = (np.mean([np.trace(R) for R in residuals]), np.mean([np.linalg.norm(R) for R in residuals]))
    assert errors["rpcholesky"][0] < 0.65 * errors["uniform"][0], errors
    assert errors["rpcholesky"][1] < 0.5 * errors["uniform"][1], errors


def test_bad_options_raise_clear_errors():
    X = np.random.default_rng(5).random((50, 3))
    with pytest.raises(ValueError, match=r"landmark_params\['sample_size'\] must be an int >= 1 or None"):
        Nystroem(landmarks="rpcholesky", n_components=5, landmark_params={"sample_size": 0}).fit(X)
    with pytest.raises(ValueError, match=r"\['n_iter'\] are not options of landmarks='rpcholesky'; "
                                         r"valid options: \['sample_size'\]"):
        Nystroem(landmarks="rpcholesky", n_components=5, landmark_params={"n_iter": 2}).fit(X)
    with pytest.raises(ValueError, match="needs the data points, not a precomputed kernel"):
        Nystroem(kernel="precomputed", landmarks="rpcholesky", n_components=5).fit(rbf_kernel(X))
    with pytest.raises(ValueError, match=r"The 'landmarks' parameter of Nystroem must be a str among .*rpcholesky"):
        Nystroem(landmarks="rpcholesk").fit(X)


def test_every_kernel_gives_distinct_pivots_and_finite_features():
    X = np.random.default_rng(6).random((120, 4))
    for kernel, params in [("rbf", {}), ("laplacian", {}), ("cosine", {}), ("chi2", {}),
                           ("polynomial", {"degree": 2}), ("sigmoid", {"gamma": 0.1, "coef0": 0.2})]:
        est = Nystroem(kernel=kernel, n_components=15, n_landmarks=30, landmarks="rpcholesky", random_state=0,
                       **params).fit(X)
        assert len(np.unique(est.component_indices_)) == 30, kernel
        assert np.isfinite(est.transform(X)).all(), kernel


def test_a_low_rank_kernel_on_float32_rows_ends():
    """float32 kernel values left a residual of float32 rounding once a rank-7 kernel was exhausted:
    no proposal was ever accepted on it, and the loop ran forever (cosine kernel, 7 features, 20 pivots)."""
    rows = np.random.default_rng(7).random((230, 7)).astype(np.float32)
    pivots = rpcholesky(rows, 20, Kernel("cosine"), np.random.RandomState(1))
    assert len(np.unique(pivots)) == 20
    Z = Nystroem(kernel="cosine", n_components=20, landmarks="rpcholesky", random_state=1).fit(rows).transform(rows)
    unit = rows / np.linalg.norm(rows.astype(np.float64), axis=1, keepdims=True)
    np.testing.assert_allclose(Z @ Z.T, unit @ unit.T, rtol=0, atol=1e-4)  # 7 pivots span the kernel


def test_rounds_that_accept_nothing_end_the_loop(monkeypatch):
    """A residual of rounding noise (here: every proposal rejected) ends in a uniform fill, not a hang."""
    import dkapprox.nystroem.rpcholesky as module

    monkeypatch.setattr(module, "_accept", lambda sub, *a: (np.empty(0, dtype=np.int64), sub[:0, :0]))
    pivots = rpcholesky(np.random.default_rng(8).random((50, 3)), 10, Kernel("rbf"), np.random.RandomState(0))
    assert len(np.unique(pivots)) == 10
