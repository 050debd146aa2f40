"""Incremental: partial_fit over dask blocks in a seeded order, reproducibly (cluster: test_cluster.py)."""

import dask.array as da
import numpy as np
import pytest
from dask.array.utils import assert_eq
from sklearn.base import clone
from sklearn.cluster import MiniBatchKMeans
from sklearn.datasets import make_classification
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.naive_bayes import GaussianNB

from dkapprox import RBFSampler
from dkapprox.linear_model import Incremental

CHUNK = 250


def data(seed=0, n=3000):
    X, y = make_classification(n_samples=n, n_features=8, n_informative=5, n_classes=3, random_state=seed)
    return X, y


def manual_fit(estimator, X, y, *, seed, n_epochs, classes):
    """What Incremental promises: partial_fit on the NumPy blocks in RandomState(seed)'s orders."""
    est = clone(estimator)
    rng = np.random.RandomState(seed)
    n_blocks = -(-len(X) // CHUNK)
    for _ in range(n_epochs):
        for b in rng.permutation(n_blocks):
            est.partial_fit(X[b * CHUNK : (b + 1) * CHUNK], y[b * CHUNK : (b + 1) * CHUNK], classes=classes)
    return est


def test_block_order_is_seeded_and_the_fit_reproducible():
    X, y = data()
    Xd, yd = da.from_array(X, chunks=CHUNK), da.from_array(y, chunks=CHUNK)
    sgd = SGDClassifier(random_state=0)
    first = Incremental(sgd, n_epochs=3, random_state=7).fit(Xd, yd)
    again = Incremental(sgd, n_epochs=3, random_state=7).fit(Xd, yd)
    other = Incremental(sgd, n_epochs=3, random_state=8).fit(Xd, yd)
    expected = manual_fit(sgd, X, y, seed=7, n_epochs=3, classes=np.unique(y))
    np.testing.assert_array_equal(first.estimator_.coef_, expected.coef_)
    np.testing.assert_array_equal(again.estimator_.coef_, first.estimator_.coef_)
    assert not np.array_equal(other.estimator_.coef_, first.estimator_.coef_)
    assert first.n_blocks_seen_ == 3 * Xd.numblocks[0]
    np.testing.assert_array_equal(first.classes_, [0, 1, 2])


@pytest.mark.parametrize("prefetch", [0, 3])
def test_prefetch_does_not_change_the_model(prefetch):
    X, y = data(1)
    Xd, yd = da.from_array(X, chunks=CHUNK), y  # in-memory y is cut to X's blocks
    ref = Incremental(SGDClassifier(random_state=0), n_epochs=2, random_state=0).fit(Xd, yd)
    ours = Incremental(SGDClassifier(random_state=0), n_epochs=2, random_state=0, prefetch=prefetch).fit(Xd, yd)
    np.testing.assert_array_equal(ours.estimator_.coef_, ref.estimator_.coef_)


def test_partial_fit_continues_and_unshuffled_order_is_block_order():
    X, y = data(2)
    Xd, yd = da.from_array(X, chunks=CHUNK), da.from_array(y, chunks=CHUNK)
    inc = Incremental(GaussianNB(), shuffle_blocks=False)
    inc.partial_fit(Xd, yd).partial_fit(Xd, yd)
    ref = GaussianNB()
    for _ in range(2):
        for b in range(Xd.numblocks[0]):
            ref.partial_fit(X[b * CHUNK : (b + 1) * CHUNK], y[b * CHUNK : (b + 1) * CHUNK], classes=[0, 1, 2])
    np.testing.assert_allclose(inc.estimator_.theta_, ref.theta_, rtol=1e-12)
    np.testing.assert_allclose(inc.estimator_.var_, ref.var_, rtol=1e-12)


def test_methods_after_fit_are_lazy_and_equal_the_estimators():
    X, y = data(3)
    Xd = da.from_array(X, chunks=CHUNK)
    inc = Incremental(SGDClassifier(loss="log_loss", random_state=0), n_epochs=3, random_state=0).fit(Xd, y)
    est = inc.estimator_
    for method in ("predict", "predict_proba", "decision_function"):
        lazy = getattr(inc, method)(Xd)
        assert isinstance(lazy, da.Array)
        assert_eq(lazy, getattr(est, method)(X))  # declared shape, dtype and chunks are right
    assert inc.score(Xd, y) == pytest.approx(est.score(X, y))
    reg = Incremental(SGDRegressor(random_state=0), n_epochs=2, random_state=0).fit(Xd, X[:, 0] + y)
    assert_eq(reg.predict(Xd), reg.estimator_.predict(X))
    assert reg.score(Xd, X[:, 0] + y) == pytest.approx(reg.estimator_.score(X, X[:, 0] + y))
    km = Incremental(MiniBatchKMeans(n_clusters=3, random_state=0, n_init=1), random_state=0).fit(Xd)
    assert_eq(km.transform(Xd), km.estimator_.transform(X))
    assert not hasattr(Incremental(SGDRegressor()).fit(Xd, y), "predict_proba")


def test_classes_come_from_y_or_from_the_caller():
    X, y = data(5)
    Xd = da.from_array(X, chunks=CHUNK)
    inc = Incremental(SGDClassifier(random_state=0), random_state=0).fit(Xd, y, classes=[0, 1, 2, 3])
    np.testing.assert_array_equal(inc.classes_, [0, 1, 2, 3])
    with pytest.raises(ValueError, match="n_epochs"):
        Incremental(SGDClassifier(), n_epochs=0).fit(Xd, y)
    with pytest.raises(ValueError, match="implementing 'partial_fit'"):
        Incremental(RBFSampler()).fit(Xd, y)
