"""KernelRidgeCV and KernelRidgeClassifierCV: a (gamma, alpha, fold) grid from one pass of per-fold statistics."""

import functools

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
from sklearn.model_selection import GridSearchCV, KFold, PredefinedSplit
from sklearn.preprocessing import LabelBinarizer

from dkapprox.linear_model import HashedKFold, KernelRidge
from dkapprox.linear_model import KernelRidgeClassifierCV as _KernelRidgeClassifierCV
from dkapprox.linear_model import KernelRidgeCV as _KernelRidgeCV

# The tests down to the CG route's hold the statistics route (exact, against GridSearchCV) by name;
# route='auto' takes it for such small searches anyway (PROBE_ABOVE_FLOPS), but a test says which it tests
KernelRidgeCV = functools.partial(_KernelRidgeCV, route="statistics")
KernelRidgeClassifierCV = functools.partial(_KernelRidgeClassifierCV, route="statistics")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(240, 3))
Y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.1 * RNG.normal(size=240)
ALPHAS, GAMMAS = [1e-2, 1.0, 100.0], [0.02, 0.5, 20.0]
LABELS = np.digitize(X[:, 0] + X[:, 1], [-0.7, 0.7])  # three classes


class OneVsRestKernelRidge(ClassifierMixin, BaseEstimator):
    """scikit-learn's exact KernelRidge on +1/-1 targets, one column a class: the classifier's reference."""

    def __init__(self, alpha=1.0, gamma=None):
        self.alpha, self.gamma = alpha, gamma

    def fit(self, X, y):
        self.binarizer_ = LabelBinarizer(pos_label=1, neg_label=-1).fit(y)
        self.classes_ = self.binarizer_.classes_
        self.model_ = SkKernelRidge(alpha=self.alpha, kernel="rbf", gamma=self.gamma).fit(
            X, self.binarizer_.transform(y).astype(float))
        return self

    def predict(self, X):
        scores = self.model_.predict(X)
        return self.classes_[scores.argmax(axis=1)] if scores.ndim > 1 and scores.shape[1] > 1 \
            else self.classes_[(scores.ravel() > 0).astype(int)]


def _same_order(ours, theirs):
    return [theirs.cv_results_["params"].index(p) for p in ours.cv_results_["params"]]


@pytest.mark.parametrize("scoring", ["r2", "neg_mean_squared_error", "neg_root_mean_squared_error"])
def test_every_row_a_center_scores_the_grid_as_gridsearchcv_over_sklearns_exact_kernel_ridge(scoring):
    """With every row a center, each fold's model is scikit-learn's exact KernelRidge on the other folds
    (the representer theorem: the held-out rows' centers get no weight), so every score agrees."""
    ours = KernelRidgeCV(alphas=ALPHAS, gammas=GAMMAS, n_centers=240, scoring=scoring, random_state=0).fit(X, Y)
    theirs = GridSearchCV(SkKernelRidge(kernel="rbf"), {"alpha": ALPHAS, "gamma": GAMMAS}, scoring=scoring,
                          cv=HashedKFold(5, random_state=0)).fit(X, Y)
    order = _same_order(ours, theirs)
    for key in ["mean_test_score", "std_test_score"] + [f"split{k}_test_score" for k in range(5)]:
        np.testing.assert_allclose(ours.cv_results_[key], theirs.cv_results_[key][order], rtol=1e-7, atol=1e-9)
    np.testing.assert_array_equal(ours.cv_results_["rank_test_score"], theirs.cv_results_["rank_test_score"][order])
    assert ours.best_params_ == theirs.best_params_
    assert ours.best_score_ == pytest.approx(theirs.best_score_, rel=1e-7)
    np.testing.assert_allclose(ours.predict(X[:50]), theirs.predict(X[:50]), atol=1e-6)
    assert ours.passes_ == 2 and ours.n_iter_ == 0 and ours.route_ == "statistics"
    assert set(ours.phase_seconds_) >= {"centers", "statistics", "solves", "scores", "refit", "total"}


def test_the_classifier_scores_accuracy_as_gridsearchcv_over_one_vs_rest_exact_kernel_ridge():
    # not gamma=20: a held-out row's scores are then all near exp(-20 d^2), and their argmax is rounding's
    folds, gammas = HashedKFold(4, random_state=3), [0.02, 0.5, 2.0]
    ours = KernelRidgeClassifierCV(alphas=ALPHAS, gammas=gammas, n_centers=240, cv=4, random_state=3)
    ours.fit(X, LABELS)
    theirs = GridSearchCV(OneVsRestKernelRidge(), {"alpha": ALPHAS, "gamma": gammas}, cv=folds).fit(X, LABELS)
    order = _same_order(ours, theirs)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"][order],
                               atol=1e-12)
    assert ours.best_params_ == theirs.best_params_
    assert ours.passes_ == 3  # centers, statistics, held-out predictions
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


def test_dask_input_gives_numpys_search_and_the_chosen_model_is_kernel_ridges():
    kw = dict(alphas=ALPHAS, gammas=GAMMAS, n_centers=60, random_state=0)
    mem = KernelRidgeCV(**kw).fit(X, Y)
    lazy = KernelRidgeCV(**kw).fit(da.from_array(X, chunks=70), da.from_array(Y, chunks=70))
    np.testing.assert_array_equal(lazy.centers_, mem.centers_)
    np.testing.assert_allclose(lazy.cv_results_["mean_test_score"], mem.cv_results_["mean_test_score"], atol=1e-10)
    np.testing.assert_allclose(lazy.predict(X), mem.predict(X), atol=1e-8)
    assert isinstance(lazy.predict(da.from_array(X, chunks=70)), da.Array)
    fit = KernelRidge(alpha=mem.alpha_, kernel="rbf", gamma=mem.gamma_, n_centers=60, random_state=0, tol=1e-12,
                      max_iter=1000).fit(X, Y)
    np.testing.assert_allclose(mem.predict(X), fit.predict(X), atol=1e-6)


def test_fold_labels_splitters_and_their_splits_are_the_same_folds():
    labels = np.arange(240) % 4
    kw = dict(alphas=ALPHAS, gammas=GAMMAS, n_centers=240, random_state=0)
    given = KernelRidgeCV(cv=labels, **kw).fit(X, Y)
    theirs = GridSearchCV(SkKernelRidge(kernel="rbf"), {"alpha": ALPHAS, "gamma": GAMMAS},
                          cv=PredefinedSplit(labels)).fit(X, Y)
    np.testing.assert_allclose(given.cv_results_["mean_test_score"],
                               theirs.cv_results_["mean_test_score"][_same_order(given, theirs)], atol=1e-9)
    splitter = KernelRidgeCV(cv=PredefinedSplit(labels), **kw).fit(X, Y)
    splits = KernelRidgeCV(cv=list(PredefinedSplit(labels).split(X)), **kw).fit(X, Y)
    lazy = KernelRidgeCV(cv=da.from_array(labels, chunks=50), **kw).fit(da.from_array(X, chunks=50), Y)
    for other in (splitter, splits, lazy):
        np.testing.assert_allclose(other.cv_results_["mean_test_score"], given.cv_results_["mean_test_score"],
                                   atol=1e-10)
    assert given.n_splits_ == 4


def test_a_weight_of_two_is_a_repeated_row_in_the_same_fold():
    labels = np.arange(240) % 3
    w = np.where(np.arange(240) % 5 == 0, 2.0, 1.0)
    kw = dict(alphas=ALPHAS, gammas=GAMMAS, random_state=0)
    centers = X[:40]
    weighted = KernelRidgeCV(centers=centers, cv=labels, **kw).fit(X, Y, sample_weight=w)
    again = np.flatnonzero(w == 2)
    rows = np.concatenate([np.arange(240), again])
    repeated = KernelRidgeCV(centers=centers, cv=labels[rows], **kw).fit(X[rows], Y[rows])
    np.testing.assert_allclose(weighted.cv_results_["mean_test_score"], repeated.cv_results_["mean_test_score"],
                               atol=1e-10)
    np.testing.assert_allclose(weighted.dual_coef_, repeated.dual_coef_, rtol=1e-8, atol=1e-8)


def test_the_default_gammas_are_scale_times_two_decades():
    search = KernelRidgeCV(alphas=[1.0], n_centers=30, random_state=0).fit(da.from_array(X, chunks=100), Y)
    scale = 1.0 / (X.shape[1] * X.var())
    np.testing.assert_allclose(np.unique(search.cv_results_["param_gamma"]), scale * np.array([0.1, 0.3, 1, 3, 10]))
    assert search.passes_ == 3  # gamma='scale', the uniform centers' take, the statistics


def test_multi_target_scores_are_averaged_over_targets_as_scikit_learns():
    Y2 = np.column_stack([Y, X[:, 2] ** 2])
    ours = KernelRidgeCV(alphas=ALPHAS, gammas=GAMMAS, n_centers=240, random_state=0).fit(X, Y2)
    theirs = GridSearchCV(SkKernelRidge(kernel="rbf"), {"alpha": ALPHAS, "gamma": GAMMAS},
                          cv=HashedKFold(5, random_state=0)).fit(X, Y2)
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"],
                               theirs.cv_results_["mean_test_score"][_same_order(ours, theirs)], rtol=1e-7)
    assert ours.predict(X).shape == (240, 2)


@pytest.mark.parametrize("params, message", [
    (dict(alphas=[]), "alphas must be a non-empty list of positive numbers"),
    (dict(alphas=[1.0, -1.0]), "alphas must be a non-empty list of positive numbers"),
    (dict(gammas=[0.0]), "gammas must be a non-empty list of positive numbers"),
    (dict(gammas=[np.nan]), "gammas must be a non-empty list of positive numbers"),
    (dict(cv=500), "Cannot have number of folds n_folds=500 greater than the number of samples: n_samples=240"),
    (dict(cv=np.zeros(100)), r"one label per row of X: got shape \(100,\) for 240 rows"),
    (dict(cv=np.zeros(240)), "needs at least 2 distinct folds"),
    (dict(scoring="roc_auc"), "scoring='roc_auc' cannot be computed from streamed statistics by KernelRidgeCV; "
                              "the scorings it offers are r2, neg_mean_squared_error"),
    (dict(cv=[(np.arange(100, 240), np.arange(100))]), "leave 140 rows out of every fold"),
])
def test_bad_grids_folds_and_scorings_are_refused_before_any_pass(params, message):
    search = KernelRidgeCV(**{"n_centers": 20, **params})
    with pytest.raises(ValueError, match=message):
        search.fit(X, Y)
    assert not hasattr(search, "cv_results_")


def test_a_grid_whose_statistics_would_not_fit_says_how_many_centers_would():
    search = KernelRidgeCV(alphas=[1.0], gammas=[0.1, 1.0], n_centers=200, cv=5)
    with dask.config.set({"dkapprox.cv-statistics-bytes": 2**20}):
        with pytest.raises(ValueError, match=r"would take 3.\d+ MiB a task .* use at most 114 centers"):
            search.fit(da.from_array(X, chunks=60), Y)


def test_a_fold_whose_training_rows_hold_one_class_is_refused():
    labels = np.arange(240) % 2
    y = np.where(labels == 0, "a", "b")
    with pytest.raises(ValueError, match=r"training rows of fold 0 \(every row outside it\) hold fewer than two "
                                         r"of the classes \['a', 'b'\]"):
        KernelRidgeClassifierCV(n_centers=20, cv=labels).fit(X, y)
    with pytest.raises(ValueError, match="scoring='r2' cannot be computed from streamed statistics by "
                                         "KernelRidgeClassifierCV; the scorings it offers are accuracy"):
        KernelRidgeClassifierCV(scoring="r2").fit(X, y)


def test_the_search_takes_kfold_splitters_and_other_kernels():
    search = KernelRidgeCV(kernel="laplacian", alphas=[0.1, 1.0], gammas=[0.1, 1.0], n_centers=240,
                           cv=KFold(3), random_state=0).fit(X, Y)
    theirs = GridSearchCV(SkKernelRidge(kernel="laplacian"), {"alpha": [0.1, 1.0], "gamma": [0.1, 1.0]},
                          cv=KFold(3)).fit(X, Y)
    np.testing.assert_allclose(search.cv_results_["mean_test_score"],
                               theirs.cv_results_["mean_test_score"][_same_order(search, theirs)], rtol=1e-7)


# -- the CG route -----------------------------------------------------------------------------------------
EXACT = dict(tol=1e-11, max_iter=500, halving_factor=None)


def test_cg_without_halving_scores_and_refits_as_the_statistics_route():
    """Run to a tight tol with nothing dropped, every candidate's fold models are the statistics route's."""
    kw = dict(alphas=ALPHAS, gammas=GAMMAS, n_centers=80, random_state=0)
    exact = KernelRidgeCV(**kw).fit(X, Y)
    cg = _KernelRidgeCV(route="cg", **EXACT, **kw).fit(X, Y)
    np.testing.assert_allclose(cg.cv_results_["mean_test_score"], exact.cv_results_["mean_test_score"], atol=1e-7)
    np.testing.assert_array_equal(cg.cv_results_["rank_test_score"], exact.cv_results_["rank_test_score"])
    assert cg.best_params_ == exact.best_params_ and cg.route_ == "cg"
    np.testing.assert_allclose(cg.predict(X), exact.predict(X), atol=1e-6)
    assert np.all(cg.cv_results_["dropped_at_iteration"] == 0) and np.all(cg.cv_results_["n_iterations"] > 0)
    # the centers' pass, the right-hand sides, one an iteration, the last iterates' scores, none to refit:
    # the chosen all-rows column converged alongside its folds
    assert cg.passes_ == 1 + 1 + cg.n_iter_ + 1
    assert set(cg.phase_seconds_) >= {"centers", "route", "first pass", "search", "refit", "total"}


def test_cg_classifier_and_dask_input_agree_with_the_statistics_route():
    kw = dict(alphas=ALPHAS, gammas=[0.02, 0.5, 2.0], n_centers=60, cv=4, random_state=3)
    exact = KernelRidgeClassifierCV(**kw).fit(X, LABELS)
    Xd, yd = da.from_array(X, chunks=70), da.from_array(LABELS, chunks=70)
    cg = _KernelRidgeClassifierCV(route="cg", **EXACT, **kw).fit(Xd, yd)
    # accuracy counts rows: a row whose class score is a tie to 1e-9 may flip, one row is 1/60 of a fold
    np.testing.assert_allclose(cg.cv_results_["mean_test_score"], exact.cv_results_["mean_test_score"], atol=0.02)
    assert cg.best_params_ == exact.best_params_
    assert np.mean(cg.predict(X) == exact.predict(X)) > 0.99


def test_halving_drops_judged_losers_records_when_and_keeps_the_winner():
    Xb = RNG.normal(size=(600, 3))
    yb = np.sin(2 * Xb[:, 0]) + 0.3 * Xb[:, 1] + 0.1 * RNG.normal(size=600)
    kw = dict(alphas=[1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0], gammas=[0.05, 0.5, 5.0, 50.0], n_centers=100,
              random_state=0)
    exact = KernelRidgeCV(**kw).fit(Xb, yb)
    halved = _KernelRidgeCV(route="cg", tol=1e-6, max_iter=200, halving_factor=3, **kw).fit(Xb, yb)
    dropped, iterations = halved.cv_results_["dropped_at_iteration"], halved.cv_results_["n_iterations"]
    assert (dropped > 0).sum() >= 6 and set(dropped[dropped > 0]) <= {4, 8, 16, 32, 64, 128}
    assert np.all(iterations[dropped > 0] <= dropped[dropped > 0])  # a dropped candidate runs no further
    assert dropped[halved.best_index_] == 0 and halved.best_params_ == exact.best_params_
    rank = halved.cv_results_["rank_test_score"]
    assert rank[dropped == 0].max() < rank[dropped > 0].min()  # the kept rank first
    assert halved.best_score_ == pytest.approx(exact.best_score_, abs=1e-4)
    full = _KernelRidgeCV(route="cg", tol=1e-6, max_iter=200, halving_factor=None, **kw).fit(Xb, yb)
    assert iterations.sum() < full.cv_results_["n_iterations"].sum()


def test_cg_weights_fold_labels_and_float32():
    labels = np.arange(240) % 3
    w = np.where(np.arange(240) % 5 == 0, 2.0, 1.0)
    kw = dict(alphas=ALPHAS, gammas=GAMMAS, centers=X[:40], cv=labels, random_state=0)
    exact = KernelRidgeCV(**kw).fit(X, Y, sample_weight=w)
    cg = _KernelRidgeCV(route="cg", **EXACT, **kw).fit(X, Y, sample_weight=w)
    np.testing.assert_allclose(cg.cv_results_["mean_test_score"], exact.cv_results_["mean_test_score"], atol=1e-7)
    np.testing.assert_allclose(cg.dual_coef_, exact.dual_coef_, rtol=1e-5, atol=1e-6)
    twice = _KernelRidgeCV(route="cg", **EXACT, **kw).fit(X, Y, sample_weight=2.0)  # a scalar weight: alpha / 2
    exact_twice = KernelRidgeCV(**kw).fit(X, Y, sample_weight=2.0)
    np.testing.assert_allclose(twice.cv_results_["mean_test_score"], exact_twice.cv_results_["mean_test_score"],
                               atol=1e-7)
    single = _KernelRidgeCV(route="cg", tol=1e-5, max_iter=500, halving_factor=None, **kw)
    single.fit(X.astype(np.float32), Y, sample_weight=w)
    # float32 kernels and products (as KernelRidge's on float32 blocks): the same choice, its score near
    assert single.dual_coef_.dtype == np.float32 and single.best_params_ == exact.best_params_
    assert single.best_score_ == pytest.approx(exact.best_score_, abs=1e-3)


def test_cg_max_iter_warns_for_the_chosen_model_and_counts_its_passes():
    search = _KernelRidgeCV(route="cg", alphas=[1e-4], gammas=[0.5], n_centers=120, tol=1e-12, max_iter=3,
                            random_state=0)
    with pytest.warns(ConvergenceWarning, match="did not converge in max_iter=3 iterations for the chosen gamma=0.5"):
        search.fit(X, Y)
    assert search.n_iter_ == 3 and search.passes_ == 1 + 1 + 3 + 1
    assert search.cv_results_["n_iterations"].tolist() == [3]


def test_auto_takes_the_statistics_route_for_small_searches_and_cg_where_statistics_would_not_fit():
    small = _KernelRidgeCV(alphas=[1.0], gammas=[0.1, 1.0], n_centers=50, random_state=0).fit(X, Y)
    assert small.route_ == "statistics" and small.route_seconds_ == {}
    with dask.config.set({"dkapprox.cv-statistics-bytes": 2**20}):
        big = _KernelRidgeCV(alphas=[1.0], gammas=[0.1, 1.0], n_centers=200, random_state=0).fit(X, Y)
        assert big.route_ == "cg"
        with pytest.raises(ValueError, match=r"CG columns would take .* a task \(48 columns = n_gammas x n_alphas x "
                                             r"\(n_folds \+ 1\) x n_targets, .*use at most 910 centers"):
            _KernelRidgeCV(route="cg", alphas=np.logspace(-3, 3, 4), gammas=[0.1, 1.0], n_centers=2000,
                           random_state=0).fit(np.tile(X, (10, 1)), np.tile(Y, 10))


def test_auto_measures_both_routes_and_takes_the_cheaper():
    from dkapprox.kernel_ridge import _kernel_ridge_cv

    rows = RNG.normal(size=(20_000, 3))
    target = np.sin(2 * rows[:, 0])
    search = _KernelRidgeCV(alphas=[1e-2, 1.0], gammas=[0.1, 1.0], n_centers=500, tol=1e-3, random_state=0)
    search.fit(rows, target)
    assert 2.0 * 20_000 * 500**2 * 2 >= _kernel_ridge_cv.PROBE_ABOVE_FLOPS
    assert set(search.route_seconds_) == {"statistics", "cg"}
    assert search.route_ == min(search.route_seconds_, key=search.route_seconds_.get)
