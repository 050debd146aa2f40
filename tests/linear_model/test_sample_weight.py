"""sample_weight: scikit-learn's weighted ridge, read in the same single pass as the data."""

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn import linear_model as sk

from dkapprox.linear_model import Ridge, RidgeClassifier


def data(seed, n=600, d=8, n_targets=None, classes=None):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 3, size=d) + 1.5
    w = rng.normal(size=(d,) if n_targets is None else (d, n_targets))
    y = X @ w + rng.normal(size=(n,) if n_targets is None else (n, n_targets))
    if classes:
        y = np.digitize(X @ rng.normal(size=d), np.quantile(X @ rng.normal(size=d), [0.3, 0.6])[: classes - 1])
    weights = rng.exponential(size=n) * (rng.random(n) > 0.1)  # some rows weigh nothing
    return X, y, weights


def assert_same_model(ours, theirs, rtol=1e-8):
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=rtol, atol=1e-10)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=rtol, atol=1e-10)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("n_targets", [None, 3])
@pytest.mark.parametrize("as_dask", [False, True], ids=["numpy", "dask"])
def test_weighted_ridge_equals_sklearn(fit_intercept, n_targets, as_dask):
    X, y, w = data(1, n_targets=n_targets)
    theirs = sk.Ridge(alpha=2.0, fit_intercept=fit_intercept).fit(X, y, sample_weight=w)
    if as_dask:
        X, y, w = da.from_array(X, chunks=97), da.from_array(y, chunks=97), da.from_array(w, chunks=97)
    ours = Ridge(alpha=2.0, fit_intercept=fit_intercept).fit(X, y, sample_weight=w)
    assert_same_model(ours, theirs)


@pytest.mark.parametrize("classes", [2, 3])
def test_weighted_classifier_equals_sklearn(classes):
    X, y, w = data(2, classes=classes)
    theirs = sk.RidgeClassifier(alpha=0.5).fit(X, y, sample_weight=w)
    for Xi, yi, wi in [(X, y, w), (da.from_array(X, chunks=128), da.from_array(y, chunks=128), w)]:
        ours = RidgeClassifier(alpha=0.5).fit(Xi, yi, sample_weight=wi)  # dask X with NumPy weights too
        assert_same_model(ours, theirs)
        np.testing.assert_array_equal(ours.classes_, theirs.classes_)


def test_weights_do_not_depend_on_chunking_and_integers_repeat_rows():
    X, y, _ = data(3)
    counts = np.random.default_rng(3).integers(0, 4, size=X.shape[0])
    repeated = Ridge(alpha=1.0).fit(np.repeat(X, counts, axis=0), np.repeat(y, counts))
    fits = [Ridge(alpha=1.0).fit(da.from_array(X, chunks=c), da.from_array(y, chunks=c),
                                 sample_weight=da.from_array(counts, chunks=c)) for c in (1_000, 61, 7)]
    for fit in fits:
        assert_same_model(fit, repeated, rtol=1e-9)


def test_a_scalar_weight_scales_the_data_term_like_sklearn():
    X, y, _ = data(4)
    theirs = sk.Ridge(alpha=3.0).fit(X, y, sample_weight=2.5)
    assert_same_model(Ridge(alpha=3.0).fit(da.from_array(X, chunks=100), y, sample_weight=2.5), theirs)
    assert_same_model(Ridge(alpha=3.0).fit(X, y, sample_weight=2.5), theirs)


def test_float32_weights_keep_float32_blocks():
    X, y, w = data(5)
    ours = Ridge(alpha=1.0).fit(da.from_array(X.astype(np.float32), chunks=100), y, sample_weight=w)
    theirs = sk.Ridge(alpha=1.0).fit(X, y, sample_weight=w)
    assert ours.coef_.dtype == np.float32
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=2e-3, atol=2e-4)


def test_bad_weights_are_refused_with_scikit_learns_words():
    X, y, w = data(6)
    Xd, yd = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    negative = w.copy()
    negative[450] = -1.0
    with pytest.raises(ValueError, match="Negative values in data passed to `sample_weight`"):
        Ridge().fit(X, y, sample_weight=negative)
    with pytest.raises(ValueError, match="Negative values in data passed to `sample_weight`"), \
            dask.config.set(scheduler="sync"):
        Ridge().fit(Xd, yd, sample_weight=da.from_array(negative, chunks=100))  # found in block 4
    nan = w.copy()
    nan[3] = np.nan
    with pytest.raises(ValueError, match="sample_weight contains NaN"):
        Ridge().fit(Xd, yd, sample_weight=nan)
    with pytest.raises(ValueError, match=r"sample_weight.shape == \(599,\), expected \(600,\)!"):
        Ridge().fit(Xd, yd, sample_weight=da.from_array(w[:-1], chunks=100))
    with pytest.raises(ValueError, match="Sample weights must be 1D array or scalar"):
        Ridge().fit(Xd, yd, sample_weight=da.from_array(w[:, None], chunks=100))
    with pytest.raises(ValueError, match="finite non-negative number"):
        Ridge().fit(Xd, yd, sample_weight=-1.0)


@pytest.mark.parametrize("scoring", ["r2", "neg_mean_squared_error"])
def test_weighted_cv_scores_equal_weighted_sklearn_fits_per_fold(scoring):
    from sklearn.metrics import mean_squared_error, r2_score

    from dkapprox.linear_model import HashedKFold, RidgeCV

    X, y, w = data(7)
    alphas = np.logspace(-2, 3, 6)
    cv = RidgeCV(alphas, n_folds=4, random_state=3, scoring=scoring)
    cv.fit(da.from_array(X, chunks=77), da.from_array(y, chunks=77), sample_weight=da.from_array(w, chunks=77))
    metric = r2_score if scoring == "r2" else lambda *a, **k: -mean_squared_error(*a, **k)
    expected = np.array([[metric(y[test], sk.Ridge(alpha=a).fit(X[train], y[train], sample_weight=w[train])
                                 .predict(X[test]), sample_weight=w[test]) for a in alphas]
                         for train, test in HashedKFold(4, random_state=3).split(X)])
    np.testing.assert_allclose(cv.cv_scores_, expected, rtol=1e-8, atol=1e-10)
    assert cv.alpha_ == alphas[expected.mean(axis=0).argmax()]
    assert_same_model(cv, sk.Ridge(alpha=cv.alpha_).fit(X, y, sample_weight=w))
