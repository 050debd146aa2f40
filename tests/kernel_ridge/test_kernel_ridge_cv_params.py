"""KernelRidgeCV's kernel_params: a grid of degree and coef0 crossed with the gammas, by both routes."""

import dask.array as da
import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
from sklearn.model_selection import GridSearchCV, ParameterGrid

from dkapprox.linear_model import HashedKFold, KernelRidge, KernelRidgeClassifierCV, KernelRidgeCV

RNG = np.random.default_rng(1)
X = RNG.normal(size=(120, 3))
Y = X[:, 0] * X[:, 1] + 0.5 * X[:, 2] ** 2 + 0.1 * RNG.normal(size=120)  # degree 2 fits, degree 1 cannot
ALPHAS, GAMMAS = [1e-2, 1.0], [0.1, 0.5]
GRID = {"degree": [1, 2, 3], "coef0": [0.5, 2.0]}


def test_every_row_a_center_chooses_gridsearchcvs_candidate_over_sklearns_exact_poly_kernel_ridge():
    """With every row a center each fold's model is scikit-learn's exact KernelRidge (representer theorem),
    for every (degree, coef0, gamma, alpha): the same scores, the same choice, the same predictions."""
    ours = KernelRidgeCV(alphas=ALPHAS, gammas=GAMMAS, kernel="poly", kernel_params=GRID, n_centers=120,
                         route="statistics", random_state=0).fit(X, Y)
    theirs = GridSearchCV(SkKernelRidge(kernel="poly"), {"alpha": ALPHAS, "gamma": GAMMAS, **GRID},
                          cv=HashedKFold(5, random_state=0)).fit(X, Y)
    order = [theirs.cv_results_["params"].index(p) for p in ours.cv_results_["params"]]
    assert sorted(order) == list(range(24))  # every candidate of theirs, once
    for key in ["mean_test_score"] + [f"split{k}_test_score" for k in range(5)]:
        np.testing.assert_allclose(ours.cv_results_[key], theirs.cv_results_[key][order], rtol=1e-7, atol=1e-9)
    np.testing.assert_array_equal(ours.cv_results_["rank_test_score"], theirs.cv_results_["rank_test_score"][order])
    assert ours.best_params_ == theirs.best_params_ and ours.best_params_["degree"] == 2
    assert (ours.degree_, ours.coef0_, ours.gamma_, ours.alpha_) == tuple(
        theirs.best_params_[k] for k in ("degree", "coef0", "gamma", "alpha"))
    np.testing.assert_allclose(ours.predict(X[:30]), theirs.predict(X[:30]), atol=1e-8)
    scores = ours.cv_results_["mean_test_score"]
    assert scores[ours.cv_results_["param_degree"] == 1].max() < ours.best_score_ - 0.1  # the grid matters


def test_cv_results_hold_a_column_a_searched_parameter_in_parametergrid_order():
    search = KernelRidgeCV(alphas=ALPHAS, gammas=GAMMAS, kernel="poly", kernel_params=GRID, n_centers=20,
                           route="statistics", random_state=0).fit(X, Y)
    results = search.cv_results_
    assert {k for k in results if k.startswith("param_")} == {"param_alpha", "param_coef0", "param_degree",
                                                             "param_gamma"}
    # the kernel_params point slowest (ParameterGrid's order), then gamma, then alpha
    expected = [{**point, "gamma": g, "alpha": a} for point in ParameterGrid(GRID) for g in GAMMAS for a in ALPHAS]
    assert results["params"] == expected
    assert results["param_degree"].dtype.kind == "i" and results["param_degree"].tolist() == [
        p["degree"] for p in expected]
    assert results["mean_test_score"].shape == (24,) and search.best_params_ == expected[search.best_index_]


@pytest.mark.parametrize("kernel, grid, message", [
    ("poly", {"width": [1.0]}, "kernel_params has an unknown parameter 'width': the parameters of the named kernels "
                               "besides gamma are 'coef0', 'degree', and kernel='poly' takes 'coef0', 'degree'"),
    ("rbf", {"degree": [2, 3]}, "kernel_params names 'degree', which kernel='rbf' does not take: the parameters it "
                                "takes besides gamma are none"),
    ("sigmoid", {"degree": [2]}, "kernel='sigmoid' does not take: the parameters it takes besides gamma are 'coef0'"),
    ("poly", {"gamma": [0.1]}, "kernel_params cannot hold 'gamma': give the bandwidths to search as gammas"),
    ("poly", {"degree": []}, "Parameter grid for parameter 'degree' of kernel_params need to be a non-empty sequence"),
    ("poly", {"degree": 2}, "Parameter grid for parameter 'degree' of kernel_params needs to be a list or a numpy "
                            r"array, but got 2 \(of type int\) instead"),
    ("poly", {"coef0": [0.0, np.inf]}, r"kernel_params\['coef0'\] must hold finite numbers; got \[0.0, inf\]"),
    ("poly", {"coef0": ["one"]}, r"kernel_params\['coef0'\] must hold finite numbers"),
    ("poly", {"degree": [2, -1]}, r"kernel_params\['degree'\] must hold numbers >= 0, as degree; got \[2, -1\]"),
])
def test_bad_kernel_params_are_refused_in_scikit_learns_words_before_any_pass(kernel, grid, message):
    search = KernelRidgeCV(kernel=kernel, kernel_params=grid, gammas=[0.1], n_centers=10)
    with pytest.raises(ValueError, match=message):
        search.fit(X, Y)
    assert not hasattr(search, "cv_results_")


def test_kernel_params_must_be_a_dict():
    with pytest.raises(ValueError, match="The 'kernel_params' parameter of KernelRidgeCV must be an "
                                                    "instance of 'dict' or None"):
        KernelRidgeCV(kernel="poly", kernel_params=[("degree", [2])]).fit(X, Y)


def test_the_cg_route_and_dask_input_search_kernel_params_as_the_statistics_route():
    kw = dict(alphas=ALPHAS, gammas=GAMMAS, kernel="poly", kernel_params={"degree": [1, 2], "coef0": [2.0]},
              n_centers=40, random_state=0)
    exact = KernelRidgeCV(route="statistics", **kw).fit(X, Y)
    cg = KernelRidgeCV(route="cg", tol=1e-11, max_iter=300, halving_factor=None, **kw).fit(X, Y)
    lazy = KernelRidgeCV(route="statistics", **kw).fit(da.from_array(X, chunks=50), da.from_array(Y, chunks=50))
    for other in (cg, lazy):
        np.testing.assert_allclose(other.cv_results_["mean_test_score"], exact.cv_results_["mean_test_score"],
                                   atol=1e-7)
        assert other.best_params_ == exact.best_params_ and other.degree_ == 2
        np.testing.assert_allclose(other.predict(X), exact.predict(X), atol=1e-6)
    assert cg.route_ == "cg" and np.all(cg.cv_results_["n_iterations"] > 0)


def test_the_chosen_model_predicts_with_the_chosen_degree_and_coef0():
    """The refit is KernelRidge with degree_, coef0_, gamma_ and alpha_ on the same centers; the classifier
    searches the grid too."""
    centers = X[:30]
    search = KernelRidgeCV(alphas=[0.1], gammas=[0.5], kernel="poly", kernel_params={"degree": [3, 2],
                                                                                     "coef0": [1.0, 3.0]},
                           centers=centers, route="statistics", random_state=0).fit(X, Y)
    assert (search.degree_, search.coef0_) != (search.degree, search.coef0)  # not the fixed defaults (3, 1)
    fit = KernelRidge(alpha=search.alpha_, kernel="poly", gamma=search.gamma_, degree=search.degree_,
                      coef0=search.coef0_, centers=centers, tol=1e-12, max_iter=500).fit(X, Y)
    np.testing.assert_allclose(search.predict(X), fit.predict(X), atol=1e-6)
    labels = (Y > np.median(Y)).astype(int)
    classifier = KernelRidgeClassifierCV(alphas=[0.1], gammas=[0.5], kernel="poly", kernel_params={"degree": [1, 2]},
                                         n_centers=40, cv=3, route="statistics", random_state=0).fit(X, labels)
    assert classifier.best_params_["degree"] == 2 and classifier.degree_ == 2
    assert classifier.cv_results_["param_degree"].tolist() == [1, 2]


def test_no_kernel_params_is_the_fixed_degree_and_coef0_and_a_one_point_grid_the_same_search():
    kw = dict(alphas=ALPHAS, gammas=GAMMAS, kernel="poly", n_centers=30, route="statistics", random_state=0)
    fixed = KernelRidgeCV(degree=2, coef0=0.5, **kw).fit(X, Y)
    assert {k for k in fixed.cv_results_ if k.startswith("param_")} == {"param_alpha", "param_gamma"}
    assert set(fixed.best_params_) == {"alpha", "gamma"} and (fixed.degree_, fixed.coef0_) == (2, 0.5)
    one = KernelRidgeCV(kernel_params={"degree": [2], "coef0": [0.5]}, **kw).fit(X, Y)
    np.testing.assert_array_equal(one.cv_results_["mean_test_score"], fixed.cv_results_["mean_test_score"])
    np.testing.assert_array_equal(one.dual_coef_, fixed.dual_coef_)
    assert one.best_params_ == {**fixed.best_params_, "degree": 2, "coef0": 0.5}
    # kernel_params names override the fixed parameters: degree=5 is not searched
    other = KernelRidgeCV(degree=5, kernel_params={"degree": [2], "coef0": [0.5]}, **kw).fit(X, Y)
    np.testing.assert_array_equal(other.dual_coef_, fixed.dual_coef_)


def test_the_default_gammas_cross_the_kernel_params():
    search = KernelRidgeCV(alphas=[1.0], kernel="poly", kernel_params={"degree": [1, 2]}, n_centers=20,
                           route="statistics", random_state=0).fit(X, Y)
    scale = 1.0 / (X.shape[1] * X.var())
    gammas = scale * np.array([0.1, 0.3, 1, 3, 10])
    np.testing.assert_allclose(search.cv_results_["param_gamma"], np.tile(gammas, 2))
    assert search.cv_results_["param_degree"].tolist() == [1] * 5 + [2] * 5
