"""RidgeClassifier: scikit-learn's coefficients and labels, on NumPy and on dask."""

import dask.array as da
import numpy as np
import pytest
from dask.array.utils import assert_eq
from sklearn import linear_model as sk
from sklearn.datasets import make_classification

from dkapprox.linear_model import RidgeClassifier


def make_data(seed, n_classes, n=600, dtype=np.float64):
    X, y = make_classification(n_samples=n, n_features=12, n_informative=6, n_classes=n_classes,
                               random_state=seed)
    return X.astype(dtype) + 1.5, y


def tol(dtype):
    return dict(rtol=2e-3, atol=2e-4) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("n_classes", [2, 4])
@pytest.mark.parametrize("labels", ["int", "str"])
def test_equals_sklearn_ridge_classifier(seed, dtype, n_classes, labels):
    X, y = make_data(seed, n_classes, dtype=dtype)
    if labels == "str":
        y = np.array(["ant", "bee", "cat", "dog"])[y]
    ours = RidgeClassifier(alpha=3.0).fit(X, y)
    ref = sk.RidgeClassifier(alpha=3.0).fit(X, y)
    assert ours.coef_.shape == ref.coef_.shape and np.shape(ours.intercept_) == np.shape(ref.intercept_)
    assert ours.coef_.dtype == ref.coef_.dtype
    np.testing.assert_array_equal(ours.classes_, ref.classes_)
    np.testing.assert_allclose(ours.coef_, ref.coef_, **tol(dtype))
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, **tol(dtype))
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X), **tol(dtype))
    agree = np.mean(ours.predict(X) == ref.predict(X))
    assert agree == 1.0 if dtype == np.float64 else agree > 0.995  # float32 ties may flip a row
    assert ours.score(X, y) == pytest.approx(ref.score(X, y), abs=0.005)


def test_multilabel_in_memory_equals_sklearn():
    X, y = make_data(0, 3)
    Y = np.c_[y == 0, y == 1, y > 0].astype(int)
    ours, ref = RidgeClassifier().fit(X, Y), sk.RidgeClassifier().fit(X, Y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-9)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
    Xd = da.from_array(X, chunks=128)
    assert_eq(ours.predict(Xd), ref.predict(X))
    assert ours.score(Xd, Y) == pytest.approx(ref.score(X, Y))
    with pytest.raises(ValueError, match="multilabel targets .* must be in memory"):
        RidgeClassifier().fit(Xd, da.from_array(Y, chunks=128))


@pytest.mark.parametrize("n_classes", [2, 5])
@pytest.mark.parametrize("chunks", [(64, -1), (250, 4)])
def test_dask_fit_equals_in_memory_and_predicts_lazily(n_classes, chunks):
    X, y = make_data(3, n_classes)
    labels = np.array(["a", "b", "c", "d", "e"])[y]
    ref = sk.RidgeClassifier(alpha=0.5).fit(X, labels)
    Xd, yd = da.from_array(X, chunks=chunks), da.from_array(labels, chunks=100)
    ours = RidgeClassifier(alpha=0.5).fit(Xd, yd)
    np.testing.assert_array_equal(ours.classes_, ref.classes_)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-9, atol=1e-12)
    pred, scores = ours.predict(Xd), ours.decision_function(Xd)
    assert isinstance(pred, da.Array) and isinstance(scores, da.Array)
    assert_eq(pred, ref.predict(X))  # declared chunks, dtype (<U1) and meta are what compute gives
    assert_eq(scores, ref.decision_function(X), rtol=1e-9, atol=1e-12)
    assert ours.score(Xd, yd) == pytest.approx(ref.score(X, labels))
    assert ours.score(Xd, labels) == pytest.approx(ref.score(X, labels))


def test_labels_are_checked():
    X, y = make_data(0, 2)
    Xd = da.from_array(X, chunks=100)
    with pytest.raises(ValueError, match="Unknown label type"):
        RidgeClassifier().fit(Xd, da.from_array(np.linspace(0, 1, len(X)), chunks=100))
    bad = y.astype(float)
    bad[5] = np.nan
    with pytest.raises(ValueError, match="Input y contains NaN"):
        RidgeClassifier().fit(Xd, da.from_array(bad, chunks=100))
