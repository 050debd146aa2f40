"""What every streaming learner shares: checking (X, y), the statistics pass, lazy predict and score.

In-memory input is validated by scikit-learn's ``validate_data`` (its
messages) and cut into row slices; dask input is checked on metadata only and
reduced with :func:`dkapprox.engine.reduce_aligned_rows`, so a fit reads the
data once and the driver receives only the statistics.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from numbers import Real

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin, is_classifier
from sklearn.exceptions import DataConversionWarning
from sklearn.preprocessing import LabelBinarizer
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, column_or_1d, validate_data

from .. import backends, engine, inputs, utils
from ..backends import combine_block_moments
from ..inputs import FLOAT_DTYPES, check_input
from ..utils import check_sample_weight as sklearn_check_sample_weight
from ._moments import MappedSpec, MomentsSpec, block_moments, combine_mapped, combine_moments, mapped_moments
from ._targets import NumericTargets, OneVsAllTargets, union_labels, unique_labels_block

# in-memory input is cut into row slices of about this many bytes of features,
# so that the centered copy of a slice, not of the whole array, is what we add
SLICE_BYTES = 32 << 20
SPLIT_EVERY = 8
# in-memory predictions run in blocks of this many rows on every core, as dask's threads run a dask X's
PREDICT_ROWS = 8192


def target_input(y):
    """Targets or weights (``y``, ``sample_weight``) through the door: a 1-D Zarr array is a target vector."""
    return inputs.as_input(y, dtype=None, targets=True)


def as_targets(y):
    """Targets as a dask array (from dask or zarr, 1-D or 2-D) or as NumPy."""
    given = target_input(y)
    return given.data if given.lazy else np.asarray(given.data)


def in_memory(y):
    """``y`` as NumPy: computed if it is a dask or zarr array (used when X is in memory)."""
    return target_input(y).in_memory()


def check_Xy(estimator, X, y, *, y_numeric, on_host=False):
    """Validated ``(X, y, lazy)``: NumPy by scikit-learn, dask by metadata only.

    ``on_host``: the estimator's blocks are NumPy (or sparse): an array on a device, or a dask
    array of device chunks, is refused before anything converts or reads it.
    """
    if y is None:
        raise ValueError(
            f"This {type(estimator).__name__} estimator requires y to be passed, but the target y is None."
        )
    given = inputs.as_input(X)
    if on_host and given.namespace is not None:
        raise ValueError(f"{type(estimator).__name__} runs on NumPy blocks: device arrays (CuPy) are not supported "
                         "yet. Copy X to the host first (X.get(), or X.map_blocks(lambda b: b.get())).")
    if given.device:  # an array on a device, checked there; its targets (n values a row) come to the host
        X = check_input(estimator, given, reset=True)
        y = check_array(backends.to_numpy(in_memory(y)), ensure_2d=False, dtype=None, input_name="y")
        _check_targets(estimator, X, y, y_numeric)
        return X, y, False
    if not given.lazy:
        y = in_memory(y)  # X is in memory, so its targets fit too
        X, y = validate_data(estimator, given.data, y, accept_sparse=("csr", "csc"), dtype=FLOAT_DTYPES,
                             multi_output=True, y_numeric=y_numeric)
        return X, y, False
    X = check_input(estimator, given, reset=True)
    y = as_targets(y)
    _check_targets(estimator, X, y, y_numeric)
    return X, y, True


def _check_targets(estimator, X, y, y_numeric):
    """The shape and dtype checks of targets beside a dask or device ``X`` (metadata only)."""
    if y.ndim not in (1, 2):
        raise ValueError(f"y should be a 1d or 2d array, got an array of shape {y.shape} instead.")
    if y_numeric and y.dtype.kind not in "biuf":
        raise ValueError(f"y must be numeric for {type(estimator).__name__}; got dtype {y.dtype}.")
    n_x, n_y = X.shape[0], y.shape[0]
    if not (np.isnan(n_x) or np.isnan(n_y)) and n_x != n_y:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: [{n_x}, {n_y}]")


def check_sample_weight(sample_weight, X, lazy):
    """``(weights, constant)``: an array of weights (NumPy, or dask when X is), or a scalar, or neither.

    In-memory weights are checked by scikit-learn (its messages); dask weights
    by metadata here and by value in each block task (finite, non-negative).
    """
    if sample_weight is None:
        return None, None
    if isinstance(sample_weight, Real):
        weight = float(sample_weight)
        if not np.isfinite(weight) or weight < 0:
            raise ValueError(f"sample_weight must be a finite non-negative number; got {sample_weight!r}.")
        return None, weight
    if not lazy:  # a device X's weights come to the host: one float64 a row, beside the rows' products
        rows = X if backends.namespace(X) is None else np.empty((X.shape[0], 0))
        weights = sklearn_check_sample_weight(backends.to_numpy(in_memory(sample_weight)), rows, dtype=np.float64,
                                              ensure_non_negative=True)
        return weights, None
    weights = as_targets(sample_weight)
    if weights.ndim != 1:
        raise ValueError("Sample weights must be 1D array or scalar")
    n_x, n_w = X.shape[0], weights.shape[0]
    if not (np.isnan(n_x) or np.isnan(n_w)) and n_x != n_w:
        raise ValueError(f"sample_weight.shape == {weights.shape}, expected {(n_x,)}!")
    if weights.dtype.kind not in "biuf":
        raise ValueError(f"sample_weight must be numeric; got dtype {weights.dtype}.")
    return weights, None


def gather_moments(estimator, X, y, lazy, targets, *, n_folds=1, fold_key=0, sample_weight=None, maps=None):
    """The per-fold statistics of (X, y), weighted by ``sample_weight``: one pass over the rows.

    ``maps``: ``(block_fn, state)`` pairs, ``checks`` and the widest output, of feature maps each row
    block goes through in the same pass (:class:`._moments.MappedSpec`): then the statistics of each
    map's features, a tuple of Moments in the order of the maps.
    """
    weights, constant = check_sample_weight(sample_weight, X, lazy)
    spec = MomentsSpec(targets, int(n_folds), int(fold_key), type(estimator).__name__, constant)
    chunk_fn, combine_fn, width = block_moments, combine_moments, X.shape[1]
    if maps is not None:
        pairs, checks, widest = maps
        spec = MappedSpec(spec, tuple(pairs), tuple(checks))
        chunk_fn, combine_fn, width = mapped_moments, combine_mapped, max(width, widest)
    arrays = [X, y] if weights is None else [X, y, weights]
    if lazy:
        # a running total: the statistics (n_folds x d x d) are the largest things a fit holds, and a
        # tree would hold up to SPLIT_EVERY - 1 of them at each of its log(n_blocks) levels
        reduced = engine.reduce_aligned_rows(arrays, chunk_fn, combine_fn, spec, split_every=SPLIT_EVERY,
                                             running=True)
        return inputs.compute(reduced, arrays=arrays)[0]
    rows = max(1, SLICE_BYTES // (8 * width))
    parts = [chunk_fn(start, spec, *(a[start : start + rows] for a in arrays))
             for start in range(0, X.shape[0], rows)]
    return combine_fn(parts)


def classifier_targets(estimator, y, lazy):
    """``(y, targets, classes, binarizer)`` of a one-vs-all classifier, as scikit-learn's RidgeClassifier
    reads labels: on dask input 1-D class labels (one pass over y for the classes; a column vector warns);
    in memory, scikit-learn's ``LabelBinarizer`` (+1 / -1), which also takes multilabel indicators
    (``binarizer`` is then kept to decode predictions; else None)."""
    if lazy:
        if y.ndim == 2 and y.shape[1] != 1:
            raise ValueError(f"{type(estimator).__name__} takes class labels (1-D y) on dask input; multilabel "
                             f"targets (y of shape {y.shape}) must be in memory.")
        if y.ndim == 2:
            warnings.warn("A column-vector y was passed when a 1d array was expected. Please change "
                          "the shape of y to (n_samples, ), for example using ravel().",
                          DataConversionWarning, stacklevel=3)
        classes = distinct_labels(y)
        check_classification_targets(classes)
        return y, OneVsAllTargets(classes), classes, None
    binarizer = LabelBinarizer(pos_label=1, neg_label=-1)
    labels, y = y, binarizer.fit_transform(y)
    if not binarizer.y_type_.startswith("multilabel"):
        column_or_1d(labels, warn=True)  # scikit-learn's warning for a column vector
        binarizer_kept = None
    else:
        binarizer_kept = binarizer
    return y, NumericTargets(y.shape[1]), binarizer.classes_, binarizer_kept


def distinct_labels(y):
    """Sorted class labels of in-memory or dask ``y`` (one pass over y, never over X)."""
    given = target_input(y)
    if not given.lazy:
        return unique_labels_block(0, None, given.data)
    return inputs.compute(engine.reduce_aligned_rows([given.data], unique_labels_block, union_labels, None))[0]


def lazy_predict(estimator, X, block_fn, state, *, tail, dtype, method):
    """``block_fn(block, state)`` over the row blocks of a checked dask ``X``, lazily."""
    name = f"{type(estimator).__name__.lower()}-{method}"
    return engine.map_rows(X, block_fn, state, n_out=tail, dtype=dtype, name=name)


def apply_rows(estimator, X, lazy, block_fn, state, *, tail, dtype, method):
    """A prediction method's output: ``block_fn`` of an in-memory ``X``'s blocks of :data:`PREDICT_ROWS` rows on
    every core (a device or sparse ``X``: of the whole), the same block function lazily over the row blocks of a
    dask ``X`` (:func:`lazy_predict`: ``tail``, ``dtype``, ``method``)."""
    if not lazy and not isinstance(X, np.ndarray):
        return block_fn(X, state)
    if not lazy:
        return engine.map_rows_in_threads(X, block_fn, state, rows=PREDICT_ROWS, threads=utils.available_cpus())
    return lazy_predict(estimator, X, block_fn, state, tail=tail, dtype=dtype, method=method)


@dataclass(frozen=True)
class ScoreSpec:
    """A block's predictions (``predict(block, state)``) scored against its targets."""

    predict: object
    state: object
    kind: str  # 'r2' or 'accuracy'


def score_block(row_start, spec, X, y):
    pred = backends.to_numpy(spec.predict(X, spec.state))  # a device block's predictions: rows values to the host
    y = np.asarray(backends.to_numpy(y))
    rows = y.shape[0]
    if spec.kind == "accuracy":
        if pred.ndim == 1:
            hit = pred == y.reshape(rows)
        else:
            hit = np.all(pred == y.reshape(pred.shape), axis=1)
        return rows, int(np.count_nonzero(hit))
    y2 = y.reshape(rows, -1).astype(np.float64)
    err = y2 - pred.reshape(rows, -1)
    mean = y2.mean(axis=0) if rows else np.zeros(y2.shape[1])
    return rows, mean, ((y2 - mean) ** 2).sum(axis=0), (err * err).sum(axis=0)


def combine_accuracy(parts):
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def combine_r2(parts):
    """(rows, mean of y, M2 of y, squared error) of several blocks: the moments' fold, errors summed."""
    return combine_block_moments(parts)


def lazy_score(X, y, predict, state, kind):
    """Accuracy, or R^2 averaged over targets, of a model on dask data: one pass, nothing kept."""
    spec = ScoreSpec(predict, state, kind)
    y = as_targets(y)
    combine = combine_accuracy if kind == "accuracy" else combine_r2
    result = inputs.compute(engine.reduce_aligned_rows([X, y], score_block, combine, spec), arrays=[X, y])[0]
    if kind == "accuracy":
        return result[1] / result[0]
    _, _, m2, sse = result
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(m2 > 0, 1.0 - sse / m2, np.where(sse == 0, 1.0, 0.0))
    return float(np.mean(r2))


class StreamedScore:
    """``score`` for the streaming learners: scikit-learn's on in-memory ``X``, one pass over dask ``X``.

    A learner says how to score in memory (``_score_in_memory(X, y)``, ``y``
    possibly a dask array: bring it to memory with :func:`in_memory`; by default
    scikit-learn's ``ClassifierMixin.score`` or ``RegressorMixin.score``) and
    what to map over dask blocks (``_score_plan(X)``, ``X`` through the door
    -> checked ``X``, the block predict function, its state and ``'r2'`` or
    ``'accuracy'``). ``_input_dtype`` is the ``dtype`` the learner checks its
    input with (:func:`dkapprox.inputs._lazy.as_input`).
    """

    _input_dtype = FLOAT_DTYPES

    def score(self, X, y):
        """Accuracy (classifiers) or R^2 averaged over targets (regressors); one pass on dask input.

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)
        y : {ndarray, dask array} of shape (n_samples,) or (n_samples, n_outputs)

        Returns
        -------
        score : float
        """
        given = inputs.as_input(X, dtype=self._input_dtype)
        if not given.lazy:
            return self._score_in_memory(given.data, y)
        X, predict, state, kind = self._score_plan(given)
        return lazy_score(X, y, predict, state, kind)

    def _score_in_memory(self, X, y):
        mixin = ClassifierMixin if is_classifier(self) else RegressorMixin
        return mixin.score(self, X, in_memory(y))
