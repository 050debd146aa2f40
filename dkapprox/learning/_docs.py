"""The learners' method docstrings: each parameter the methods take alike described in one place.

:func:`documented` gives a method its numpydoc docstring from a summary line, its parameters and
what it returns; the texts below are the parameters (and returns) several methods share.
"""

from __future__ import annotations

#: the rows of every fit, predict and transform: in memory or lazy
X_ROWS = "X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)"

#: a regressor's targets
Y_TARGETS = "y : {ndarray, dask array} of shape (n_samples,) or (n_samples, n_targets)"

#: a one-vs-all classifier's targets
Y_LABELS = """y : {ndarray, dask array} of shape (n_samples,)
    Class labels (in memory, also a multilabel indicator matrix)."""

#: the fits' row weights
SAMPLE_WEIGHT = """sample_weight : float or {ndarray, dask array} of shape (n_samples,), default=None
    Non-negative weight of each row, as in scikit-learn."""

#: a one-vs-all classifier's decision_function
SCORES = """scores : ndarray or dask array of shape (n_samples,) or (n_samples, n_classes)
    For two classes, the score of ``classes_[1]``."""

#: a one-vs-all classifier's predict
LABELS = """y_pred : ndarray or dask array of shape (n_samples,) or (n_samples, n_classes)
    A label per row; an indicator matrix for multilabel targets."""

#: what a fit returns
FITTED = """self : object
    Fitted estimator."""


def documented(summary, *parameters, returns):
    """A decorator: the method's docstring is ``summary``, then ``Parameters`` and ``Returns`` sections.

    ``parameters`` and ``returns`` are numpydoc entries (a ``name : type`` line, its description indented
    four spaces below); the method itself is returned unchanged.
    """
    sections = ["Parameters", "-" * 10, *parameters, "", "Returns", "-" * 7, returns]
    doc = summary + "\n\n" + "\n".join(sections) + "\n"

    def give(method):
        method.__doc__ = doc
        return method

    return give
