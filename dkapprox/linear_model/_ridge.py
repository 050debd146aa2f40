"""Ridge and RidgeClassifier: one pass over the rows, then a solve on the driver."""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MultiOutputMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from .. import inputs
from ..inputs import check_input
from ..learning import (
    ClassifierState,
    LinearState,
    NumericTargets,
    StreamedScore,
    apply_rows,
    check_Xy,
    classifier_targets,
    decision_block,
    gather_moments,
    intercept_of,
    label_block,
    label_output,
    linear_predict,
    normal_equations,
    penalties,
    solve_ridge,
)
from ..utils import Interval


class _StreamingRidge(BaseEstimator):
    """Shared by the ridge learners: the solve from the pooled statistics, and input checks."""

    _parameter_constraints: dict = {
        "alpha": [Interval(Real, 0, None, closed="left"), "array-like"],
        "fit_intercept": ["boolean"],
    }

    def __init__(self, alpha=1.0, *, fit_intercept=True):
        self.alpha = alpha
        self.fit_intercept = fit_intercept

    def _solve(self, pooled, dtype, *, alpha, ravel):
        """Set coef_, intercept_ and solver_ from one-fold Moments ``pooled``.

        ``ravel``: y was 1-D, so the intercept is a scalar (as in scikit-learn).
        """
        A, B, center_z, center_y = normal_equations(pooled, self.fit_intercept)
        alpha = penalties(alpha, B.shape[1])
        # one BLAS thread: NumPy's and SciPy's BLAS pools fight over the cores (benchmarks/bench_blas_threads.py)
        with threadpool_limits(1):
            W, self.solver_ = solve_ridge(A, B, alpha if alpha.size > 1 else alpha[0])
        coef = W.T.astype(dtype)
        if coef.shape[0] == 1:  # one target: scikit-learn 1.9 ravels coef_, even for y of shape (n, 1)
            coef = coef.ravel()
        if self.fit_intercept:
            intercept = intercept_of(W, center_z, center_y).astype(dtype)
            intercept = intercept[0] if ravel else intercept
        else:
            intercept = 0.0
        self.coef_, self.intercept_ = coef, intercept

    def _check_predict_input(self, X):
        """``(X checked, whether it is lazy)``: ``X`` through the door
        (:func:`dkapprox.inputs._lazy.as_input`), checked."""
        check_is_fitted(self)
        given = inputs.as_input(X)
        return check_input(self, given, reset=False, accept_sparse=("csr", "csc")), given.lazy

    def _out_dtype(self, X):
        return np.result_type(X.dtype, self.coef_.dtype)

    def _tail(self):
        """Trailing shape of a row's scores: one column per target (or class) but for a raveled ``coef_``."""
        return () if self.coef_.ndim == 1 else (self.coef_.shape[0],)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class _StreamingRegressor(StreamedScore, MultiOutputMixin, RegressorMixin, _StreamingRidge):
    """Prediction and scoring of the ridge regressors (Ridge, RidgeCV)."""

    def predict(self, X):
        """Predict with the linear model; lazy (one task per row block) on dask input.

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray or dask array of shape (n_samples,) or (n_samples, n_targets)
        """
        X, lazy = self._check_predict_input(X)
        return apply_rows(self, X, lazy, linear_predict, LinearState(self.coef_, self.intercept_),
                          tail=self._tail(), dtype=self._out_dtype(X), method="predict")

    def _score_plan(self, X):
        return self._check_predict_input(X)[0], linear_predict, LinearState(self.coef_, self.intercept_), "r2"


class Ridge(_StreamingRegressor):
    """Linear least squares with l2 regularization, fitted in one pass over dask arrays.

    The same model as :class:`sklearn.linear_model.Ridge` (minimizes
    ``||y - Xw - b||^2 + alpha * ||w||^2``): on NumPy input, the same
    coefficients to float tolerance. On a dask (or zarr) array ``fit`` reads
    every row block once, reducing it to the count, means and centered
    cross-products of (X, y), folded into a running total (the total so
    far and 7 new partials per step), and solves the
    ``n_features x n_features`` system on the driver (Cholesky, or eigh when
    it is singular). A task holds one block and returns O(n_features^2)
    statistics; at most one total and one group of 7 partials wait at
    once, whatever the number of blocks; the driver receives only the final
    statistics.

    Put a dkapprox transformer in front with a scikit-learn
    :class:`~sklearn.pipeline.Pipeline`: its ``transform`` of a dask array is
    lazy, so the features are computed block by block inside the reduction
    and never stored, in memory or on disk.

    Parameters
    ----------
    alpha : float or array-like of shape (n_targets,), default=1.0
        Regularization strength; an array gives one penalty per target.
    fit_intercept : bool, default=True
        Fit an intercept (on centered statistics, as scikit-learn does).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
        Weight vector(s), in X's dtype (float32 stays float32, as in
        scikit-learn); raveled for a single target, even from y of shape
        (n_samples, 1), as in scikit-learn 1.9.
    intercept_ : float or ndarray of shape (n_targets,)
        Independent term of the linear model: a float for 1-D y, one per
        target for 2-D y; 0.0 with ``fit_intercept=False``.
    solver_ : {'cholesky', 'eigh'}
        How the system was solved (eigh, a minimum-norm solution, when
        ``X^T X + alpha I`` is singular).
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during ``fit``; only for input with string
        feature names.

    Notes
    -----
    Block statistics are computed in the features' dtype and folded in
    float64. ``score`` on dask input is one more pass (R^2 averaged over
    targets, scikit-learn's default).

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from sklearn.pipeline import make_pipeline
    >>> from dkapprox import RBFSampler
    >>> from dkapprox.linear_model import Ridge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20_000, 4))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=20_000)
    >>> X, y = da.from_array(X, chunks=5_000), da.from_array(y, chunks=5_000)
    >>> model = make_pipeline(RBFSampler(gamma=0.2, n_components=200, random_state=0),
    ...                       Ridge(alpha=1e-3)).fit(X, y)
    >>> y_pred = model.predict(X)     # lazy: a dask array, nothing computed yet
    >>> y_pred.numblocks, y_pred.dtype
    ((4,), dtype('float64'))
    >>> round(model.score(X, y), 2)
    0.98
    """

    def fit(self, X, y, sample_weight=None):
        """Fit the model: one pass over X and y.

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)
            Training features; a dask array may be the lazy output of a
            transformer, and its row sizes may be unknown.
        y : {ndarray, dask array} of shape (n_samples,) or (n_samples, n_targets)
            Targets; an in-memory y is cut to X's row blocks.
        sample_weight : float or {ndarray, dask array} of shape (n_samples,), default=None
            Non-negative weight of each row (read in the same pass), as in
            scikit-learn: the loss is ``sum w_i ||y_i - x_i W - b||^2``.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        self._validate_params()
        X, y, lazy = check_Xy(self, X, y, y_numeric=True)
        pooled = gather_moments(self, X, y, lazy, NumericTargets.of(y), sample_weight=sample_weight)
        self._solve(pooled, X.dtype, alpha=self.alpha, ravel=y.ndim == 1)
        return self


class RidgeClassifier(StreamedScore, ClassifierMixin, _StreamingRidge):
    """Classifier using ridge regression on +1/-1 targets, fitted in one pass over dask arrays.

    The same model as :class:`sklearn.linear_model.RidgeClassifier`: each
    class is a ridge regression of +1 (this class) against -1 (the others);
    two classes make one regression. On NumPy input, scikit-learn's
    coefficients to float tolerance (and its multilabel support). On a dask
    array the labels are first read once (only ``y``: the distinct classes),
    then the features once, as in :class:`Ridge`.

    Parameters
    ----------
    alpha : float or array-like of shape (n_targets,), default=1.0
        Regularization strength.
    fit_intercept : bool, default=True
        Fit an intercept.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_classes, n_features)
        Weight vectors, one row per class; raveled for two classes (as
        scikit-learn 1.9 does).
    intercept_ : float or ndarray of shape (1,) or (n_classes,)
        Independent term of each class's regression (one for two classes);
        0.0 with ``fit_intercept=False``.
    classes_ : ndarray of shape (n_classes,)
        The class labels (the column indices of a multilabel indicator y).
    solver_ : {'cholesky', 'eigh'}
        How the system was solved, as in :class:`Ridge`.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during ``fit``; only for input with string
        feature names.

    Notes
    -----
    ``class_weight`` is not supported (pass ``sample_weight``). On dask input
    ``y`` holds class labels (1-D); multilabel targets must be in memory.

    Examples
    --------
    >>> import dask.array as da
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.pipeline import make_pipeline
    >>> from dkapprox import RBFSampler
    >>> from dkapprox.linear_model import RidgeClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = da.from_array(X / 16, chunks=300), da.from_array(y, chunks=300)
    >>> clf = make_pipeline(RBFSampler(gamma=0.2, n_components=500, random_state=0),
    ...                     RidgeClassifier(alpha=1e-2)).fit(X, y)
    >>> y_pred = clf.predict(X)     # lazy: a dask array, nothing computed yet
    >>> y_pred.numblocks, y_pred.dtype
    ((6,), dtype('int64'))
    >>> clf.score(X, y) > 0.99
    True
    """

    def fit(self, X, y, sample_weight=None):
        """Fit one ridge regression per class: a pass over y, then one over X.

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)
        y : {ndarray, dask array} of shape (n_samples,)
            Class labels (in memory, also a multilabel indicator matrix).
        sample_weight : float or {ndarray, dask array} of shape (n_samples,), default=None
            Non-negative weight of each row, as in scikit-learn.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        self._validate_params()
        X, y, lazy = check_Xy(self, X, y, y_numeric=False)
        y, targets, self.classes_, self._binarizer = classifier_targets(self, y, lazy)
        pooled = gather_moments(self, X, y, lazy, targets, sample_weight=sample_weight)
        self._solve(pooled, X.dtype, alpha=self.alpha, ravel=False)
        return self

    def _state(self):
        intercept = np.asarray(self.intercept_, dtype=self.coef_.dtype)
        return ClassifierState(self.coef_, intercept, self.classes_, self._binarizer)

    def decision_function(self, X):
        """Signed distance to each class's hyperplane (lazy on dask input).

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray or dask array of shape (n_samples,) or (n_samples, n_classes)
            For two classes, the score of ``classes_[1]``.
        """
        X, lazy = self._check_predict_input(X)
        return apply_rows(self, X, lazy, decision_block, self._state(), tail=self._tail(),
                          dtype=self._out_dtype(X), method="decision_function")

    def predict(self, X):
        """Class labels (lazy on dask input).

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray or dask array of shape (n_samples,) or (n_samples, n_classes)
            A label per row; an indicator matrix for multilabel targets.
        """
        X, lazy = self._check_predict_input(X)
        tail, dtype = label_output(self.classes_, self._binarizer)
        return apply_rows(self, X, lazy, label_block, self._state(), tail=tail, dtype=dtype, method="predict")

    def _score_plan(self, X):
        return self._check_predict_input(X)[0], label_block, self._state(), "accuracy"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        return tags
