"""Incremental: any scikit-learn estimator with ``partial_fit``, fed the row blocks of dask arrays."""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier, is_regressor
from sklearn.utils import check_random_state, get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .. import engine, inputs
from ..inputs import check_input
from ..learning import StreamedScore, as_targets, distinct_labels, in_memory, lazy_predict
from ..utils import HasMethods, Interval


@dataclass(frozen=True)
class MethodCall:
    """A fitted estimator's method on a block, cast to the declared dtype (shipped once)."""

    estimator: object
    method: str
    dtype: np.dtype


def call_method(block, state):
    out = getattr(state.estimator, state.method)(block)
    return np.asarray(out).astype(state.dtype, copy=False)


def _estimator_has(name):
    def check(self):
        getattr(self.estimator_ if hasattr(self, "estimator_") else self.estimator, name)
        return True

    return check


class Incremental(StreamedScore, MetaEstimatorMixin, BaseEstimator):
    """Fit a ``partial_fit`` estimator on dask arrays block by block, with the model on the driver.

    The maintained replacement for ``dask_ml.wrappers.Incremental`` for
    learning on dkapprox features: each epoch visits the row blocks in an
    order drawn from ``random_state``; every block (for a lazily transformed
    array: its features) is computed where dask runs tasks (the workers of a
    distributed cluster if one is the default client) and only that block
    travels to the driver, where ``estimator_.partial_fit`` consumes it. The
    next blocks are computed while the driver learns (``prefetch``). For a
    fixed ``random_state`` (and a seeded estimator) the fitted model is the
    same on every run and on any cluster; it does depend on the chunking,
    since a block is one ``partial_fit`` call.

    Prediction, ``predict_proba``, ``decision_function`` and ``transform``
    on dask input are lazy, the fitted estimator entering the graph as one
    key; ``score`` is one pass (accuracy for classifiers, R^2 for regressors).

    Parameters
    ----------
    estimator : estimator with ``partial_fit``
        E.g. ``SGDClassifier``, ``SGDRegressor``, ``Perceptron``,
        ``MultinomialNB``, ``MLPClassifier``. Cloned by ``fit``.
    n_epochs : int, default=1
        Passes over the blocks made by ``fit``.
    shuffle_blocks : bool, default=True
        Visit the blocks in a random order (a new permutation each epoch).
    random_state : int, RandomState instance or None, default=None
        Seed of the block orders.
    prefetch : int, default=1
        Blocks computed ahead of the one being learned; the driver holds
        ``prefetch + 1`` blocks at most.

    Attributes
    ----------
    estimator_ : estimator
        The fitted clone.
    classes_ : ndarray of shape (n_classes,)
        For classifiers, the classes (from ``classes=`` or one pass over y).
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during ``fit``; only for dask input with
        string feature names (a dask DataFrame).
    n_blocks_seen_ : int
        ``partial_fit`` calls made on blocks so far.

    Notes
    -----
    NumPy input is one block. For classifiers ``partial_fit`` needs every
    class on its first call: pass ``classes=`` to ``fit``, or it is found
    with one pass over ``y`` (never over ``X``).

    Examples
    --------
    >>> import dask.array as da
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.linear_model import SGDClassifier
    >>> from sklearn.pipeline import make_pipeline
    >>> from dkapprox import RBFSampler
    >>> from dkapprox.linear_model import Incremental
    >>> X, y = make_classification(n_samples=6_000, n_features=10, random_state=0)
    >>> X, y = da.from_array(X, chunks=500), da.from_array(y, chunks=500)
    >>> model = make_pipeline(
    ...     RBFSampler(gamma=0.05, n_components=300, random_state=0),
    ...     Incremental(SGDClassifier(random_state=0), n_epochs=5, random_state=0),
    ... ).fit(X, y)
    >>> y_pred = model.predict(X)     # lazy: a dask array, nothing computed yet
    >>> y_pred.numblocks, y_pred.dtype
    ((12,), dtype('int64'))
    >>> model.score(X, y) > 0.9
    True
    """

    _input_dtype = None  # the wrapped estimator chooses its dtypes: a frame's values in pandas' common dtype

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["partial_fit"])],
        "n_epochs": [Interval(Integral, 1, None, closed="left")],
        "shuffle_blocks": ["boolean"],
        "random_state": ["random_state"],
        "prefetch": [Interval(Integral, 0, None, closed="left")],
    }

    def __init__(self, estimator, *, n_epochs=1, shuffle_blocks=True, random_state=None, prefetch=1):
        self.estimator = estimator
        self.n_epochs = n_epochs
        self.shuffle_blocks = shuffle_blocks
        self.random_state = random_state
        self.prefetch = prefetch

    def fit(self, X, y=None, **fit_params):
        """Fit a clone of the estimator: ``n_epochs`` passes over the blocks.

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)
        y : {ndarray, dask array} of shape (n_samples,) or (n_samples, n_targets), default=None
        **fit_params : dict
            Passed to every ``partial_fit`` call (e.g. ``classes``).

        Returns
        -------
        self : object
            Fitted estimator.
        """
        self._validate_params()
        self.estimator_ = clone(self.estimator)
        self.n_blocks_seen_ = 0
        return self._epochs(X, y, self.n_epochs, fit_params)

    def partial_fit(self, X, y=None, **fit_params):
        """One more pass over the blocks, continuing from the current model.

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)
        y : {ndarray, dask array}, default=None
        **fit_params : dict
            Passed to every ``partial_fit`` call.

        Returns
        -------
        self : object
        """
        if not hasattr(self, "estimator_"):
            self._validate_params()
            self.estimator_ = clone(self.estimator)
            self.n_blocks_seen_ = 0
        return self._epochs(X, y, 1, fit_params)

    def _epochs(self, X, y, n_epochs, fit_params):
        if is_classifier(self.estimator_) and y is not None and "classes" not in fit_params:
            fit_params = {**fit_params, "classes": getattr(self.estimator_, "classes_", None)}
            if fit_params["classes"] is None:
                fit_params["classes"] = distinct_labels(y)
        given = inputs.as_input(X, dtype=self._input_dtype)
        if not given.lazy:
            y = in_memory(y)  # X is in memory, so y fits too
            for _ in range(n_epochs):
                self._learn(given.data, y, fit_params)
            return self
        X = check_input(self, given, reset=True, dtype=self._input_dtype)
        rng = check_random_state(self.random_state)
        arrays = [X] if y is None else [X, as_targets(y)]
        n_blocks = X.numblocks[0]
        for _ in range(n_epochs):
            order = rng.permutation(n_blocks) if self.shuffle_blocks else np.arange(n_blocks)
            for blocks in engine.iter_row_blocks(arrays, order, prefetch=self.prefetch):
                if blocks[0].shape[0]:
                    self._learn(blocks[0], blocks[1] if y is not None else None, fit_params)
        return self

    def _learn(self, X, y, fit_params):
        self.estimator_.partial_fit(X, y, **fit_params)
        self.n_blocks_seen_ += 1
        self.n_features_in_ = self.estimator_.n_features_in_

    @property
    def classes_(self):
        """The classes of the fitted classifier."""
        return self.estimator_.classes_

    # -- after the fit ---------------------------------------------------------
    def _apply(self, X, method):
        check_is_fitted(self, "estimator_")
        given = inputs.as_input(X, dtype=self._input_dtype)
        if not given.lazy:
            return getattr(self.estimator_, method)(given.data)
        X = check_input(self, given, reset=False, dtype=self._input_dtype)
        tail, dtype = self._declared(method)
        state = MethodCall(self.estimator_, method, np.dtype(dtype))
        return lazy_predict(self, X, call_method, state, tail=tail, dtype=dtype, method=method)

    def _declared(self, method):
        """Trailing shape and dtype of a method's output, from the fitted attributes."""
        est = self.estimator_
        if method == "predict":
            if is_classifier(est):
                return (), est.classes_.dtype
            outputs = getattr(est, "n_outputs_", 1)
            return ((), np.float64) if outputs == 1 else ((outputs,), np.float64)
        if method == "transform":
            return (len(est.get_feature_names_out()),), np.float64
        n_classes = len(est.classes_)
        if method == "decision_function" and n_classes == 2:
            return (), np.float64
        return (n_classes,), np.float64

    def predict(self, X):
        """The estimator's predictions (lazy on dask input).

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray or dask array
        """
        return self._apply(X, "predict")

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities (lazy on dask input), as float64.

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray or dask array of shape (n_samples, n_classes)
        """
        return self._apply(X, "predict_proba")

    @available_if(_estimator_has("decision_function"))
    def decision_function(self, X):
        """Decision scores (lazy on dask input), as float64.

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray or dask array of shape (n_samples,) or (n_samples, n_classes)
        """
        return self._apply(X, "decision_function")

    @available_if(_estimator_has("transform"))
    def transform(self, X):
        """The estimator's transform (lazy on dask input), as float64.

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)

        Returns
        -------
        X_new : ndarray or dask array of shape (n_samples, n_features_out)
        """
        return self._apply(X, "transform")

    def _score_in_memory(self, X, y):
        check_is_fitted(self, "estimator_")
        return self.estimator_.score(X, in_memory(y))

    def _score_plan(self, X):
        check_is_fitted(self, "estimator_")
        if not (is_classifier(self.estimator_) or is_regressor(self.estimator_)):
            raise ValueError(
                f"score on dask input needs a classifier or a regressor; {type(self.estimator_).__name__} "
                "is neither. Compute its score on an in-memory sample instead."
            )
        X = check_input(self, X, reset=False, dtype=self._input_dtype)
        kind = "accuracy" if is_classifier(self.estimator_) else "r2"
        return X, call_method, MethodCall(self.estimator_, "predict", np.dtype(self._declared("predict")[1])), kind

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        tags.target_tags = inner.target_tags
        tags.input_tags = inner.input_tags
        return tags
