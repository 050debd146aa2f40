"""FeatureMapRidgeCV: the grid search over a map's parameters and alpha that GridSearchCV runs, in one pass."""

import re

import dask
import dask.array as da
import numpy as np
import pytest
from _arrays import rows_where
from dask.callbacks import Callback
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import Ridge as SkRidge
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from dkapprox import Nystroem, RandomFourierFeatures, RBFSampler
from dkapprox.learning._moments import MappedSpec, MomentsSpec, fold_key, mapped_moments
from dkapprox.learning._streaming import gather_moments
from dkapprox.learning._targets import NumericTargets
from dkapprox.linear_model import FeatureMapRidgeCV, HashedKFold, Ridge
from dkapprox.utils import format_size

RNG = np.random.default_rng(0)
X = RNG.normal(size=(240, 3))
Y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 4 + 0.1 * RNG.normal(size=240)
ALPHAS = [1e-3, 0.1, 10.0]


def _sklearn_means(search):
    """{(sorted params): mean test score} of a fitted GridSearchCV over a pipeline, names stripped of their step."""
    out = {}
    for params, mean in zip(search.cv_results_["params"], search.cv_results_["mean_test_score"]):
        out[tuple(sorted((k.split("__")[-1], v) for k, v in params.items()))] = mean
    return out


def _means(search):
    return {tuple(sorted(p.items())): m for p, m in zip(search.cv_results_["params"],
                                                          search.cv_results_["mean_test_score"])}


@pytest.mark.parametrize("transformer, grid", [
    (RBFSampler(n_components=40, random_state=0), {"gamma": [0.05, 0.5, 5.0]}),
    (RandomFourierFeatures(n_components=40, random_state=0),
     {"kernel": ["rbf", "laplacian"], "length_scale": [0.5, 2.0]}),
], ids=["rbf-gamma", "fourier-kernel-length_scale"])
def test_scores_and_choice_are_gridsearchcvs(transformer, grid):
    search = FeatureMapRidgeCV(transformer, grid, alphas=ALPHAS, n_folds=4, random_state=0).fit(X, Y)
    step = type(transformer).__name__.lower()
    sk = GridSearchCV(make_pipeline(transformer, SkRidge()),
                      {**{f"{step}__{k}": v for k, v in grid.items()}, "ridge__alpha": ALPHAS},
                      cv=HashedKFold(4, random_state=0)).fit(X, Y)
    ours, theirs = _means(search), _sklearn_means(sk)
    assert ours.keys() == theirs.keys()
    for key in ours:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-9, atol=1e-12, err_msg=str(key))
    assert search.best_params_ == {k.split("__")[-1]: v for k, v in sk.best_params_.items()}
    np.testing.assert_allclose(search.best_score_, sk.best_score_, rtol=1e-9)
    np.testing.assert_allclose(search.predict(X), sk.predict(X), rtol=1e-8, atol=1e-10)
    results = search.cv_results_
    n = len(results["params"])
    assert n == np.prod([len(v) for v in grid.values()]) * len(ALPHAS)
    assert set(results) >= {"params", "mean_test_score", "std_test_score", "rank_test_score", "param_alpha",
                            *(f"param_{k}" for k in grid), *(f"split{k}_test_score" for k in range(4))}
    assert results["rank_test_score"][search.best_index_] == 1
    assert isinstance(search.best_estimator_, Pipeline)
    assert isinstance(search.best_estimator_[-1], Ridge) and search.best_estimator_[-1].alpha == search.best_params_[
        "alpha"]
    assert search.passes_ == 1


def test_nystroem_scores_equal_gridsearchcv_over_the_same_fitted_map():
    """A data-dependent map: each candidate fitted once on all rows, so compared with GridSearchCV over that
    very fitted map (frozen), alpha by alpha."""
    gammas = [0.1, 1.0]
    search = FeatureMapRidgeCV(Nystroem(n_components=30, random_state=0), {"gamma": gammas}, alphas=ALPHAS,
                               n_folds=3, random_state=1).fit(X, Y)
    ours = _means(search)
    for gamma in gammas:
        fitted = Nystroem(gamma=gamma, n_components=30, random_state=0).fit(X)
        sk = GridSearchCV(make_pipeline(FrozenEstimator(fitted), SkRidge()), {"ridge__alpha": ALPHAS},
                          cv=HashedKFold(3, random_state=1)).fit(X, Y)
        for alpha, mean in zip(ALPHAS, sk.cv_results_["mean_test_score"]):
            np.testing.assert_allclose(ours[(("alpha", alpha), ("gamma", gamma))], mean, rtol=1e-9)
    best = search.best_estimator_[0]
    np.testing.assert_array_equal(best.components_,
                                  Nystroem(gamma=search.best_params_["gamma"], n_components=30,
                                           random_state=0).fit(X).components_)


class _Computes(Callback):
    def __init__(self):
        super().__init__()
        self.count = 0

    def _start(self, dsk):
        self.count += 1


@pytest.mark.parametrize("transformer, grid", [
    (RBFSampler(n_components=20, random_state=0), {"gamma": [0.1, 1.0]}),
    (RBFSampler(gamma="scale", n_components=20, random_state=0), {"n_components": [10, 20]}),
    (Nystroem(n_components=15, random_state=0), {"gamma": [0.1, 1.0]}),
], ids=["rbf", "rbf-scale", "nystroem"])
def test_dask_input_equals_numpy_and_passes_are_counted(transformer, grid):
    params = dict(alphas=ALPHAS, n_folds=3, random_state=0)
    eager = FeatureMapRidgeCV(transformer, grid, **params).fit(X, Y)
    Xd, Yd = da.from_array(X, chunks=70), da.from_array(Y, chunks=70)
    with _Computes() as computes:
        lazy = FeatureMapRidgeCV(transformer, grid, **params).fit(Xd, Yd)
    assert lazy.passes_ == computes.count  # each compute of the fit is one read of the data
    map_passes = sum(getattr(clone_fit, "landmark_passes_", 0) for clone_fit in
                     [type(transformer)(**{**transformer.get_params(), **p}).fit(Xd) for p in _points(grid)])
    scale = len(_points(grid)) if transformer.get_params().get("gamma") == "scale" else 0
    assert lazy.passes_ == 1 + map_passes + scale
    np.testing.assert_allclose(lazy.cv_results_["mean_test_score"], eager.cv_results_["mean_test_score"],
                               rtol=1e-10, atol=1e-12)
    assert lazy.best_params_ == eager.best_params_
    np.testing.assert_allclose(lazy.predict(Xd).compute(), eager.predict(X), rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(lazy.fold_sizes_, eager.fold_sizes_)


def _points(grid):
    from sklearn.model_selection import ParameterGrid

    return list(ParameterGrid(grid))


def test_chunking_and_weights():
    """Folds follow the global row index, not the chunks; weights reach every candidate's statistics."""
    w = RNG.uniform(0.5, 2.0, size=X.shape[0])
    params = dict(transformer=RBFSampler(n_components=20, random_state=0), param_grid={"gamma": [0.2, 2.0]},
                  alphas=ALPHAS, n_folds=3, random_state=0)
    a = FeatureMapRidgeCV(**params).fit(da.from_array(X, chunks=50), Y, sample_weight=w)
    b = FeatureMapRidgeCV(**params).fit(da.from_array(X, chunks=(100, 140)), Y, sample_weight=da.from_array(w))
    np.testing.assert_allclose(a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"], rtol=1e-10)
    unweighted = FeatureMapRidgeCV(**params).fit(X, Y)
    assert not np.allclose(a.cv_results_["mean_test_score"], unweighted.cv_results_["mean_test_score"])


@pytest.mark.parametrize("params, message", [
    (dict(alphas=[]), "alphas must be a non-empty list of positive numbers"),
    (dict(alphas=[0.0, 1.0]), "alphas must be a non-empty list of positive numbers"),
    (dict(alphas=[-1.0]), "alphas must be a non-empty list of positive numbers"),
    (dict(param_grid={}), "param_grid must name at least one parameter"),
    (dict(param_grid={"gama": [1.0]}), "param_grid names 'gama', which RBFSampler does not have"),
    (dict(param_grid={"gamma": []}), r"param_grid\['gamma'\] must be a non-empty list"),
    (dict(scoring="accuracy"), "The 'scoring' parameter of FeatureMapRidgeCV must be"),
    (dict(n_folds=300), "Cannot have number of folds n_folds=300 greater than the number of samples: n_samples=240"),
    (dict(transformer=StandardScaler()), "transformer must be a dkapprox feature map"),
])
def test_bad_input_is_refused_and_nothing_is_fitted(params, message):
    base = dict(transformer=RBFSampler(n_components=10, random_state=0), param_grid={"gamma": [1.0]})
    search = FeatureMapRidgeCV(**{**base, **params})
    with pytest.raises(ValueError, match=message):
        search.fit(X, Y)
    assert not [k for k in vars(search) if k.endswith("_")]
    fitted = FeatureMapRidgeCV(**base).fit(X, Y)
    before = dict(vars(fitted))
    with pytest.raises(ValueError, match=message):
        fitted.set_params(**params).fit(X, Y)
    assert vars(fitted).keys() == before.keys() and fitted.cv_results_ is before["cv_results_"]


def test_unknown_row_sizes_are_refused_before_any_map_is_fitted():
    Xd = da.from_array(X, chunks=60)
    Xd = rows_where(Xd, Xd[:, 0] > -100)  # unknown row sizes, in both of dask's array modes
    search = FeatureMapRidgeCV(Nystroem(n_components=10, random_state=0), {"gamma": [1.0]})
    with _Computes() as computes, pytest.raises(ValueError, match=r"Call X.compute_chunk_sizes\(\) first"):
        search.fit(Xd, da.from_array(Y, chunks=60))
    assert computes.count == 0 and not hasattr(search, "cv_results_")


def _refused(search, X, y, message):
    """``search.fit`` refused with ``message`` in no compute of the data, nothing fitted."""
    with _Computes() as computes, pytest.raises(ValueError, match=message):
        search.fit(X, y)
    assert not [k for k in vars(search) if k.endswith("_")]
    return computes.count


def test_a_grid_whose_statistics_would_not_fit_is_refused_before_any_pass_saying_what_fits():
    """Refused before the maps' fits (gamma='scale' would read the data for each) and the statistics pass; the
    message names the size, the formula, the limit and the most components that fit, which then does."""
    Xd, Yd = da.from_array(X, chunks=60), da.from_array(Y, chunks=60)
    scale = RBFSampler(gamma="scale", random_state=0)
    with dask.config.set({"dkapprox.cv-statistics-bytes": 2**20}):
        search = FeatureMapRidgeCV(scale, {"n_components": [200], "random_state": [0, 1]}, n_folds=5)
        assert _refused(search, Xd, Yd, r"statistics would take 3.08 MiB a task \(n_candidates=2 x n_folds=5 x "
                        r"\(n_components\^2 \+ \(n_targets \+ 1\) n_components \+ 2 n_targets \+ 2\) float64 at "
                        r"n_components=200, n_targets=1\), more than dkapprox.cv-statistics-bytes=1.00 MiB: use at "
                        r"most 113 components a candidate with this grid, or fewer candidates or folds") == 0
        # 2 x 5 x (113^2 + 2 x 113 + 4) x 8 bytes fit 1 MiB, 114 do not
        FeatureMapRidgeCV(scale, {"n_components": [113], "random_state": [0, 1]}, n_folds=5).fit(Xd, Yd)
        assert _refused(FeatureMapRidgeCV(scale, {"n_components": [114], "random_state": [0, 1]}, n_folds=5),
                        Xd, Yd, "use at most 113 components") == 0
        # widths that differ, two targets: the sum over the candidates, and how many of the widest would fit
        mixed = FeatureMapRidgeCV(RBFSampler(random_state=0), {"n_components": [50, 200], "gamma": [0.1, 1.0]},
                                  n_folds=3)
        assert _refused(mixed, Xd, da.stack([Yd, Yd], axis=1),
                        r"1.98 MiB a task \(the sum over n_candidates=4 of n_folds=3 x .* n_components from 50 to "
                        r"200, n_targets=2\).* at most 102 components a candidate with this grid, or fewer "
                        r"candidates or folds \(at most 1 candidate of 200 components\)") == 0
    # the default limit, 2 GiB, takes these
    FeatureMapRidgeCV(scale, {"n_components": [200], "random_state": [0, 1]}, n_folds=5).fit(Xd, Yd)


def test_a_map_whose_width_is_known_once_fitted_is_refused_after_its_fit_before_the_statistics_pass():
    Xd, Yd = da.from_array(X, chunks=60), da.from_array(Y, chunks=60)
    nystroem = Nystroem(n_components=150, random_state=0)
    landmark_passes = sum(Nystroem(n_components=150, gamma=g, random_state=0).fit(Xd).landmark_passes_
                          for g in (0.1, 1.0))
    search = FeatureMapRidgeCV(nystroem, {"gamma": [0.1, 1.0]}, n_folds=5)
    with dask.config.set({"dkapprox.cv-statistics-bytes": 2**20}):
        assert _refused(search, Xd, Yd, r"would take 1.74 MiB a task .* at n_components=150, n_targets=1\), "
                                        r"more than dkapprox.cv-statistics-bytes=1.00 MiB: use at most 113 "
                                        r"components") == landmark_passes
        fitted = FeatureMapRidgeCV(Nystroem(n_components=100, random_state=0), {"gamma": [0.1, 1.0]},
                                   n_folds=5).fit(Xd, Yd)
        before = dict(vars(fitted))
        with pytest.raises(ValueError, match="use at most 113 components"):
            fitted.set_params(transformer=nystroem).fit(Xd, Yd)
    assert vars(fitted).keys() == before.keys() and fitted.cv_results_ is before["cv_results_"]


@pytest.mark.parametrize("lazy", [False, True], ids=["numpy", "dask"])
def test_the_checked_size_is_the_pass_partials_own(lazy):
    """The limit is exactly the bytes of the pass's partial, measured on the statistics that pass gathers:
    a limit of that many bytes fits, one byte fewer is refused; a block's own partial is no larger."""
    grid = {"gamma": [0.1, 1.0], "n_components": [7, 20]}
    targets = np.stack([Y, -Y, 2 * Y], axis=1)
    search = FeatureMapRidgeCV(RBFSampler(random_state=0), grid, n_folds=3, random_state=0)
    maps = [RBFSampler(random_state=0, **p).fit(X) for p in _points(grid)]
    pairs = [(type(m)._block_fn, m._state(X.dtype)) for m in maps]
    checks = list(dict.fromkeys(m._block_check() for m in maps))
    Xs, Ys = (da.from_array(X, chunks=60), da.from_array(targets, chunks=60)) if lazy else (X, targets)
    moments = gather_moments(search, Xs, Ys, lazy, NumericTargets(3), n_folds=3, fold_key=fold_key(0),
                             maps=(pairs, checks, 20))
    size = sum(m.nbytes for m in moments)
    spec = MappedSpec(MomentsSpec(NumericTargets(3), 3), tuple(pairs), tuple(checks))
    assert sum(m.nbytes for m in mapped_moments(0, spec, X[:60], targets[:60])) == size
    X32 = X.astype(np.float32)  # float32 maps: a block's partial in float32, folded in float64
    maps32 = [RBFSampler(random_state=0, **p).fit(X32) for p in _points(grid)]
    spec32 = MappedSpec(spec.moments, tuple((type(m)._block_fn, m._state(np.float32)) for m in maps32), spec.checks)
    assert sum(m.nbytes for m in mapped_moments(0, spec32, X32[:60], targets[:60])) < size
    with dask.config.set({"dkapprox.cv-statistics-bytes": size}):
        fitted = search.fit(Xs, Ys)
    np.testing.assert_array_equal(fitted.fold_sizes_, moments[0].count)  # the same pass, the same folds
    with dask.config.set({"dkapprox.cv-statistics-bytes": size - 1}):
        with pytest.raises(ValueError, match=rf"would take {re.escape(format_size(size))} a task "
                                             rf"\(the sum over n_candidates=4 "
                                             rf".* n_components from 7 to 20, n_targets=3\), more than "
                                             rf"dkapprox.cv-statistics-bytes={re.escape(format_size(size - 1))}: "):
            FeatureMapRidgeCV(RBFSampler(random_state=0), grid, n_folds=3).fit(Xs, Ys)
