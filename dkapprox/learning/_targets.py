"""Targets in, predictions out: the small states and block functions of the learners.

Each state is a frozen dataclass of a few arrays, shipped to the workers as
one graph key; each block function is module-level (pickled by reference) and
is also what the in-memory path calls, so NumPy and dask inputs run the same
arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.validation import assert_all_finite

from ..engine import SizedState


@dataclass(frozen=True)
class NumericTargets:
    """Regression targets: a block of y as a (rows, n_targets) matrix in the features' dtype."""

    n_targets: int

    @classmethod
    def of(cls, y):
        """The targets of a checked ``y``: one for a 1-D ``y``, else one a column."""
        return cls(1 if y.ndim == 1 else y.shape[1])

    def encode(self, y, dtype):
        y = np.asarray(y)
        if y.dtype.kind not in "biuf":
            raise ValueError(f"y must be numeric for regression; got a block of dtype {y.dtype}.")
        assert_all_finite(y, input_name="y")
        # n_targets, not -1: a zero-row block of a 1-D y cannot infer its width
        return y.reshape(y.shape[0], self.n_targets).astype(dtype, copy=False)


@dataclass(frozen=True)
class OneVsAllTargets:
    """Class labels as +1 / -1 columns, as scikit-learn's RidgeClassifier binarizes them.

    Two classes give one column (+1 for ``classes[1]``); more give one column
    per class.
    """

    classes: np.ndarray

    @property
    def n_targets(self):
        return 1 if len(self.classes) <= 2 else len(self.classes)

    def encode(self, y, dtype):
        y = np.ravel(np.asarray(y))
        if len(self.classes) <= 2:
            hit = (y == self.classes[-1])[:, None] if len(self.classes) == 2 else np.zeros((y.size, 1), bool)
        else:
            hit = y[:, None] == self.classes[None, :]
        return np.where(hit, 1, -1).astype(dtype)


def unique_labels_block(row_start, state, y):
    """Sorted distinct labels of one block of y (NaN labels rejected)."""
    y = np.ravel(np.asarray(y))
    if y.dtype.kind == "f":
        assert_all_finite(y, input_name="y")
    return np.unique(y)


def union_labels(parts):
    return np.unique(np.concatenate(parts))


@dataclass(frozen=True)
class LinearState(SizedState):
    """A fitted linear model: ``X @ coef.T + intercept``."""

    coef: np.ndarray  # (n_features,) or (n_targets, n_features)
    intercept: object  # float or (n_targets,)


def linear_predict(block, state):
    coef = state.coef
    return safe_sparse_dot(block, coef.T if coef.ndim == 2 else coef, dense_output=True) + state.intercept


@dataclass(frozen=True)
class ClassifierState(SizedState):
    """A fitted one-vs-all linear classifier."""

    coef: np.ndarray  # (n_features,) or (n_targets, n_features)
    intercept: np.ndarray  # (n_targets,)
    classes: np.ndarray
    binarizer: object = None  # scikit-learn's LabelBinarizer, for multilabel targets only


def decision_block(block, state):
    coef = state.coef
    scores = safe_sparse_dot(block, coef.T if coef.ndim == 2 else coef, dense_output=True) + state.intercept
    return scores.ravel() if scores.ndim == 2 and scores.shape[1] == 1 else scores


def label_block(block, state):
    return labels_of(decision_block(block, state), state.classes, state.binarizer)


def label_output(classes, binarizer=None):
    """``(tail, dtype)`` of :func:`labels_of`'s output: an indicator row for multilabel targets, else a label."""
    if binarizer is not None:
        return (len(classes),), np.dtype(int)
    return (), classes.dtype


def labels_of(scores, classes, binarizer=None):
    """Class labels of one-vs-all scores (one column for two classes): RidgeClassifier's rule."""
    if binarizer is not None:
        return binarizer.inverse_transform(2.0 * (scores > 0).astype(scores.dtype) - 1.0)
    index = (scores > 0).astype(np.intp) if scores.ndim == 1 else scores.argmax(axis=1)
    return classes.take(index, axis=0)
