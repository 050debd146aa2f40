"""What the learners share: penalties, label outputs, delegated methods, and the docstrings each writes out."""

import inspect
import re
import threading
import warnings

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.decomposition import IncrementalPCA
from sklearn.linear_model import SGDClassifier, SGDRegressor

from dkapprox import RBFSampler
from dkapprox.learning._targets import NumericTargets, label_output
from dkapprox.linear_model import (
    FeatureMapRidgeCV,
    Incremental,
    KernelRidge,
    KernelRidgeClassifier,
    KernelRidgeClassifierCV,
    KernelRidgeCV,
    Ridge,
    RidgeClassifier,
    RidgeCV,
)


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


def _sections(doc):
    """A numpydoc docstring's sections: heading -> the lines under its underline."""
    lines = inspect.cleandoc(doc).splitlines()
    heads = [i for i in range(len(lines) - 1) if lines[i] and re.fullmatch(r"-+", lines[i + 1])
             and len(lines[i + 1]) == len(lines[i])]
    return {lines[i]: lines[i + 2: j] for i, j in zip(heads, heads[1:] + [len(lines) + 1])}


def _entries(doc, section):
    """A section's entries, ``name -> (header line, description lines)``: a name at the margin, its text below."""
    entries, name = {}, None
    for line in _sections(doc).get(section, []):
        if line and not line.startswith(" "):
            name = line.split(" : ")[0]
            entries[name] = [line]
        elif name is not None and line:
            entries[name].append(line)
    return entries


# (docstrings that share entries, section, the entries each writes alike: the names, or every one they all have
# but those named after "all but")
SHARED = [
    ((KernelRidge, KernelRidgeClassifier), "Parameters", None),
    ((KernelRidge, KernelRidgeClassifier), "Notes", None),
    ((KernelRidgeCV, KernelRidgeClassifierCV), "Parameters", ("all but", ["scoring"])),
    ((KernelRidge, KernelRidgeClassifier), "Attributes",
     ["centers_", "center_indices_", "n_iter_", "residuals_", "gamma_", "passes_", "center_passes_",
      "input_persisted_", "n_features_in_", "feature_names_in_"]),
    ((KernelRidgeCV, KernelRidgeClassifierCV), "Attributes",
     ["cv_results_", "best_params_", "best_index_", "gamma_", "alpha_", "degree_", "coef0_", "centers_", "n_iter_",
      "route_", "route_seconds_", "phase_seconds_", "n_splits_", "fold_weights_"]),
    ((KernelRidge, KernelRidgeClassifier, KernelRidgeCV, KernelRidgeClassifierCV), "Attributes",
     ["center_indices_", "center_passes_"]),
    ((Ridge, RidgeClassifier, RidgeCV, FeatureMapRidgeCV, KernelRidge, KernelRidgeClassifier, KernelRidgeCV,
      KernelRidgeClassifierCV), "Attributes", ["n_features_in_", "feature_names_in_"]),
    ((RidgeCV, FeatureMapRidgeCV), "Attributes", ["fold_sizes_"]),
    ((KernelRidge.fit, KernelRidgeClassifier.fit, KernelRidgeCV.fit, KernelRidgeClassifierCV.fit,
      RidgeClassifier.fit), "Parameters", ["X", "sample_weight"]),
    ((KernelRidgeClassifier.fit, KernelRidgeClassifierCV.fit, RidgeClassifier.fit), "Parameters", ["y"]),
    ((Ridge.predict, RidgeClassifier.predict, RidgeClassifier.decision_function, KernelRidge.predict,
      KernelRidgeClassifier.predict, KernelRidgeClassifier.decision_function, Incremental.predict), "Parameters",
     ["X"]),
    ((RidgeClassifier.predict, KernelRidgeClassifier.predict), "Returns", None),
    ((RidgeClassifier.decision_function, KernelRidgeClassifier.decision_function), "Returns", None),
]


@pytest.mark.parametrize("objs, section, names", SHARED, ids=lambda v: v if isinstance(v, str) else None)
def test_shared_docstring_entries_are_written_alike(objs, section, names):
    # the text once filled from one template is written out in each class: an edit of one copy fails here
    if section == "Notes":
        notes = [_sections(o.__doc__)["Notes"] for o in objs]
        assert notes[0] and all(n == notes[0] for n in notes)
        return
    entries = [_entries(o.__doc__, section) for o in objs]
    if names is None or names[0] == "all but":
        names = set.intersection(*(set(e) for e in entries)) - set(names[1] if names else ())
    for name in names:
        texts = [" ".join(" ".join(e[name]).split()) if name in e else None for e in entries]  # wrapped as it may
        assert texts[0] is not None and all(t == texts[0] for t in texts), (name, texts)


def _fitted():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(120, 3)), columns=["a", "b", "c"])
    y = np.sin(X["a"].to_numpy())
    labels = np.digitize(X["a"].to_numpy(), [-0.5, 0.5])
    small = dict(n_centers=20, random_state=0)
    yield Ridge().fit(X, y)
    yield RidgeClassifier().fit(X, labels)
    yield RidgeCV(random_state=0).fit(X, y)
    yield FeatureMapRidgeCV(RBFSampler(n_components=10, random_state=0), {"gamma": [0.1, 1.0]}).fit(X, y)
    yield Incremental(SGDClassifier(random_state=0)).fit(dd.from_pandas(X, npartitions=2),
                                                          da.from_array(labels, chunks=60), classes=[0, 1, 2])
    yield KernelRidge(kernel="rbf", gamma="scale", **small).fit(X, y)
    yield KernelRidgeClassifier(kernel="rbf", gamma="scale", **small).fit(X, labels)
    for route in ("statistics", "cg"):
        yield KernelRidgeCV(alphas=[1.0], gammas=[1.0], route=route, **small).fit(X, y)
        yield KernelRidgeClassifierCV(alphas=[1.0], gammas=[1.0], route=route, **small).fit(X, labels)


def test_every_fitted_attribute_is_described_with_its_type():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence of the small fits is not what is tested
        fitted = list(_fitted())
    for estimator in fitted:
        documented = _entries(type(estimator).__doc__, "Attributes")
        public = {k for k in vars(estimator) if k.endswith("_") and not k.startswith("_")}
        missing = public - set(documented)
        assert not missing, (type(estimator).__name__, missing)
        for name, (header, *description) in documented.items():
            assert re.fullmatch(r"[a-z0-9_]+_", name), (type(estimator).__name__, name)  # one attribute an entry
            assert " : " in header and description, (type(estimator).__name__, name)


def test_in_memory_predictions_run_in_row_blocks_on_every_core_one_blas_thread_each(monkeypatch):
    """NumPy ``X``: blocks of PREDICT_ROWS rows, two at once on two cores, each on one BLAS thread."""
    from threadpoolctl import threadpool_info

    from dkapprox import learning, utils

    monkeypatch.setattr(utils, "available_cpus", lambda: 2)
    rows = learning.PREDICT_ROWS
    X = np.random.default_rng(0).normal(size=(2 * rows + 5, 3))
    seen, barrier = [], threading.Barrier(2)

    def block_fn(block, state):
        if block.shape[0] == rows:
            barrier.wait(timeout=30)  # fails unless the two full blocks run at once
        seen.append((block.shape[0], sorted({lib["num_threads"] for lib in threadpool_info()
                                             if lib["user_api"] == "blas"})))
        return block[:, 0] * state

    out = learning.apply_rows(None, X, False, block_fn, 2.0, tail=(), dtype=X.dtype, method="predict")
    np.testing.assert_array_equal(out, X[:, 0] * 2.0)
    assert sorted(seen) == [(5, [1]), (rows, [1]), (rows, [1])]
    seen.clear()
    sparse = learning.apply_rows(None, sp.csr_matrix(X), False, lambda b, s: np.asarray(b.sum(axis=1)).ravel(),
                                 None, tail=(), dtype=X.dtype, method="predict")
    np.testing.assert_allclose(sparse, X.sum(axis=1))  # a sparse X: one call over the whole
