"""What the linear_model family shares through one place: penalties, label outputs, delegated methods, docstrings."""

import inspect

import dask.array as da
import numpy as np
import pytest
from sklearn.decomposition import IncrementalPCA
from sklearn.linear_model import SGDClassifier, SGDRegressor

from dkapprox.learning._targets import NumericTargets, label_output
from dkapprox.linear_model import Incremental, KernelRidge, KernelRidgeClassifier, Ridge, RidgeClassifier


@pytest.mark.parametrize("make", [lambda: Ridge(alpha=[1.0, 2.0, 3.0]),
                                  lambda: KernelRidge(alpha=[1.0, 2.0, 3.0], n_centers=5, random_state=0)])
@pytest.mark.parametrize("lazy", [False, True])
def test_a_penalty_count_that_is_not_the_targets_is_refused_alike(make, lazy):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)), rng.normal(size=(40, 2))
    if lazy:
        X, y = da.from_array(X, chunks=10), da.from_array(y, chunks=10)
    with pytest.raises(ValueError, match=r"^Number of targets and number of penalties do not correspond: 3 != 2$"):
        make().fit(X, y)


def test_numeric_targets_and_label_outputs():
    assert NumericTargets.of(np.zeros(4)).n_targets == 1
    assert NumericTargets.of(np.zeros((4, 1))).n_targets == 1
    assert NumericTargets.of(da.zeros((4, 3), chunks=2)).n_targets == 3
    classes = np.array(["a", "b", "c"])
    assert label_output(classes) == ((), classes.dtype)
    assert label_output(classes, binarizer=object()) == ((3,), np.dtype(int))


def test_incrementals_delegated_methods_exist_where_the_estimators_do():
    assert not hasattr(Incremental(SGDRegressor()), "predict_proba")
    assert not hasattr(Incremental(SGDRegressor()), "transform")
    assert hasattr(Incremental(SGDClassifier()), "decision_function")
    assert hasattr(Incremental(IncrementalPCA()), "transform")
    assert hasattr(Incremental(IncrementalPCA()), "predict")  # always there, as before
    for name in ("predict", "predict_proba", "decision_function", "transform"):
        method = getattr(Incremental, name)
        assert method.__name__ == name and method.__qualname__ == f"Incremental.{name}"


@pytest.mark.parametrize("method", [Ridge.predict, RidgeClassifier.fit, RidgeClassifier.predict,
                                    RidgeClassifier.decision_function, KernelRidge.fit, KernelRidge.predict,
                                    KernelRidgeClassifier.fit, KernelRidgeClassifier.predict,
                                    KernelRidgeClassifier.decision_function, Incremental.predict,
                                    Incremental.predict_proba, Incremental.decision_function, Incremental.transform])
def test_shared_docstrings_are_numpydoc_with_the_methods_parameters(method):
    doc = inspect.getdoc(method)
    summary, rest = doc.split("\n\nParameters\n----------\n")
    parameters, returns = rest.split("\n\nReturns\n-------\n")
    names = [line.split(" : ")[0] for line in parameters.splitlines() if not line.startswith(" ")]
    assert names == [p for p in inspect.signature(method).parameters if p != "self"]
    assert summary and " : " in returns.splitlines()[0]
    assert "{{" not in doc
