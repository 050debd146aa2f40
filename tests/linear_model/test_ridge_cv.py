"""RidgeCV: every fold score equals scikit-learn's Ridge fitted on the same split; folds ignore chunking."""

import dask.array as da
import numpy as np
import pytest
from _arrays import rows_where
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import linear_model as sk
from sklearn.model_selection import GridSearchCV

from dkapprox.learning._moments import hashed_folds
from dkapprox.linear_model import HashedKFold, RidgeCV

ALPHAS = np.logspace(-3, 3, 7)


def make_data(seed, n=500, d=10, n_targets=None):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 3, size=d) + 2.0
    w = rng.normal(size=(d,) if n_targets is None else (d, n_targets))
    y = X @ w + 3.0 * rng.normal(size=(n,) if n_targets is None else (n, n_targets))
    return X, y


def sklearn_grid(X, y, *, n_folds, random_state, scoring, fit_intercept=True, alphas=ALPHAS):
    grid = GridSearchCV(sk.Ridge(fit_intercept=fit_intercept), {"alpha": alphas}, scoring=scoring,
                        cv=HashedKFold(n_folds, random_state=random_state))
    grid.fit(X, y)
    per_fold = np.array([grid.cv_results_[f"split{k}_test_score"] for k in range(n_folds)])
    return grid, per_fold


@pytest.mark.parametrize("scoring", [None, "neg_mean_squared_error", "neg_root_mean_squared_error"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("n_targets", [None, 3])
def test_fold_scores_equal_sklearn_ridge_fitted_per_fold(seed, scoring, fit_intercept, n_targets):
    X, y = make_data(seed, n_targets=n_targets)
    ours = RidgeCV(ALPHAS, n_folds=5, random_state=seed, scoring=scoring, fit_intercept=fit_intercept)
    ours.fit(X, y)
    grid, per_fold = sklearn_grid(X, y, n_folds=5, random_state=seed, scoring=scoring,
                                  fit_intercept=fit_intercept)
    np.testing.assert_allclose(ours.cv_scores_, per_fold, rtol=1e-8, atol=1e-10)
    assert ours.alpha_ == grid.best_params_["alpha"]
    assert ours.best_score_ == pytest.approx(grid.best_score_, rel=1e-9)
    np.testing.assert_allclose(ours.coef_, grid.best_estimator_.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours.intercept_, grid.best_estimator_.intercept_, rtol=1e-9, atol=1e-12)
    assert ours.fold_sizes_.tolist() == np.bincount(HashedKFold(5, random_state=seed).folds(len(X))).tolist()


def test_alpha_per_target_equals_one_search_per_target():
    X, y = make_data(7, n_targets=3)
    y[:, 1] = X[:, 0] + 30.0 * np.random.default_rng(0).normal(size=len(X))  # a noisy target wants more alpha
    ours = RidgeCV(ALPHAS, n_folds=4, random_state=3, alpha_per_target=True).fit(X, y)
    assert ours.cv_scores_.shape == (4, ALPHAS.size, 3)
    for t in range(3):
        grid, per_fold = sklearn_grid(X, y[:, t], n_folds=4, random_state=3, scoring=None)
        np.testing.assert_allclose(ours.cv_scores_[:, :, t], per_fold, rtol=1e-8, atol=1e-10)
        assert ours.alpha_[t] == grid.best_params_["alpha"]
        np.testing.assert_allclose(ours.coef_[t], grid.best_estimator_.coef_, rtol=1e-9)
    assert len(set(ours.alpha_)) > 1


@pytest.mark.parametrize("chunks", [(97, -1), (333, 4), (1000, -1), (7, -1)])
def test_dask_folds_and_scores_do_not_depend_on_chunking(chunks):
    X, y = make_data(11, n=1000)
    ref = RidgeCV(ALPHAS, n_folds=5, random_state=42).fit(X, y)
    ours = RidgeCV(ALPHAS, n_folds=5, random_state=42).fit(
        da.from_array(X, chunks=chunks), da.from_array(y, chunks=250))
    assert ours.fold_sizes_.tolist() == ref.fold_sizes_.tolist()
    np.testing.assert_allclose(ours.cv_scores_, ref.cv_scores_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-9, atol=1e-12)
    assert ours.alpha_ == ref.alpha_


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 60), min_size=1, max_size=12), st.integers(2, 7), st.integers(0, 2**31 - 1))
def test_hashed_folds_are_a_function_of_the_row_alone(block_rows, n_folds, key):
    n = sum(block_rows)
    whole = hashed_folds(np.arange(n), n_folds, key)
    starts = np.concatenate([[0], np.cumsum(block_rows)[:-1]])
    blockwise = np.concatenate([hashed_folds(np.arange(s, s + r), n_folds, key)
                                for s, r in zip(starts, block_rows)])
    assert np.array_equal(whole, blockwise)
    assert whole.min() >= 0 and whole.max() < n_folds


def test_hashed_folds_are_balanced_and_seeded():
    a = HashedKFold(5, random_state=0).folds(100_000)
    b = HashedKFold(5, random_state=1).folds(100_000)
    sizes = np.bincount(a, minlength=5)
    assert np.all(np.abs(sizes - 20_000) < 5 * np.sqrt(100_000 * 0.2 * 0.8))  # binomial, 5 sigma
    assert np.array_equal(a, HashedKFold(5, random_state=0).folds(100_000))
    assert np.mean(a == b) < 0.3  # another seed, another split (agreement by chance is 0.2)


def test_errors():
    X, y = make_data(0, n=6)
    with pytest.raises(ValueError, match="received no rows; use fewer folds"):
        RidgeCV(n_folds=40, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="non-negative"):
        RidgeCV(alphas=[1.0, -2.0]).fit(X, y)
    with pytest.raises(ValueError, match="n_folds"):
        RidgeCV(n_folds=1).fit(X, y)
    X, y = make_data(0)
    Xd, yd = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    keep = Xd[:, 0] > 0
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        RidgeCV(random_state=0).fit(rows_where(Xd, keep), rows_where(yd, keep))


@pytest.mark.parametrize("d, rows", [(1, 5), (2, 5), (40, 200), (40, 10)], ids=["d1", "d2", "full-rank", "rank-10"])
def test_one_reduction_for_all_alphas_equals_a_solve_per_alpha(d, rows):
    # the path solver (one tridiagonal reduction per fold) against one Cholesky / eigh per alpha;
    # rank-10 makes A + 0 * I singular: that alpha takes the eigh fallback, like solve_ridge
    from dkapprox.learning._solve import solve_ridge, solve_ridge_path

    rng = np.random.default_rng(d + rows)
    G = rng.normal(size=(rows, d)) * rng.uniform(0.1, 10, size=d)
    A, B = G.T @ G, rng.normal(size=(d, 3))
    alphas = np.array([0.0, 1e-3, 1.0, 1e3])
    W = solve_ridge_path(A, B, alphas)
    assert W.shape == (4, d, 3)
    for a, alpha in enumerate(alphas):
        expected = solve_ridge(A, B, alpha)[0]
        np.testing.assert_allclose(W[a], expected, rtol=1e-7, atol=1e-9 * np.abs(expected).max())
