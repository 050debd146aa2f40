"""KernelRidge and KernelRidgeClassifier: Nystroem kernel ridge solved by Falkon's CG, a pass an iteration."""

from __future__ import annotations

import logging
import time
import warnings
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, MultiOutputMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array, check_is_fitted

from .. import backends, engine, inputs, utils
from ..inputs import FLOAT_DTYPES, BlockCheck, check_input, row_source
from ..kernels import Kernel
from ..learning import (
    NumericTargets,
    StreamedScore,
    apply_rows,
    check_sample_weight,
    check_Xy,
    classifier_targets,
    in_memory,
    label_output,
    labels_of,
    penalties,
)
from ..nystroem import SELECTORS, Given, make_selector
from ..utils import Interval, StrOptions
from ._cv_grid import data_pass
from ._falkon import (
    Centers,
    LabelState,
    PassState,
    Preconditioner,
    PredictState,
    combine_normal,
    conjugate_gradient,
    predict_block,
)
from ._falkon_device import DevicePreconditioner, DeviceRows, block_partial, block_predict, check_device_kernel

log = logging.getLogger("dkapprox.linear_model")

#: n_centers=None takes this many centers (or every row of a smaller training set)
DEFAULT_CENTERS = 1000


class _KernelCenters(BaseEstimator):
    """What every kernel ridge estimator shares, the searches too: the kernel's, the centers' and the CG's
    parameters, the choice of the centers, and the kernel predictions from ``centers_`` and ``dual_coef_``."""

    _parameter_constraints: dict = {
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "n_centers": [Interval(Integral, 1, None, closed="left"), None],
        "centers": [StrOptions(set(SELECTORS)), "array-like"],
        "center_params": [dict, None],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, *, kernel, degree, coef0, kernel_params, n_centers, centers, center_params, tol, max_iter,
                 random_state):
        self.kernel = kernel
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.n_centers = n_centers
        self.centers = centers
        self.center_params = center_params
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state

    def _kernel(self) -> Kernel:
        """The fitted model's kernel, with every parameter frozen."""
        raise NotImplementedError

    def _selector(self, X):
        if isinstance(self.centers, str):
            return make_selector(self.centers, self.center_params)
        if self.center_params:
            raise ValueError("center_params has no options for an array of centers.")
        given = check_array(inputs.as_input(self.centers, dtype=None).in_memory(), accept_sparse="csr",
                            dtype=FLOAT_DTYPES, input_name="centers")
        if given.shape[1] != X.shape[1]:
            raise ValueError(f"centers has {given.shape[1]} features, but {type(self).__name__} is fitted on "
                             f"X with {X.shape[1]} features.")
        return Given(given)

    def _n_centers(self, n_samples, selector):
        if isinstance(selector, Given):
            if self.n_centers is not None and self.n_centers != selector.components.shape[0]:
                raise ValueError(f"n_centers={self.n_centers} but centers holds {selector.components.shape[0]} "
                                 "rows: leave n_centers=None with an array of centers.")
            return selector.components.shape[0]
        if self.n_centers is None:
            return min(DEFAULT_CENTERS, n_samples)
        if self.n_centers > n_samples:
            raise ValueError(f"n_centers={self.n_centers} must be at most the number of samples, "
                             f"n_samples={n_samples}: a center is a training row (or a centroid of them).")
        return self.n_centers

    def _predict_state(self, coef):
        return PredictState(Centers(self._kernel(), self.centers_), coef)

    def _scores(self, X, method):
        """``k(X, centers_) @ dual_coef_``: NumPy for in-memory X, lazy for dask."""
        check_is_fitted(self)
        given = inputs.as_input(X)
        X = check_input(self, given, reset=False)
        coef = self.dual_coef_
        return apply_rows(self, X, given.lazy, block_predict, self._predict_state(coef), tail=coef.shape[1:],
                          dtype=X.dtype, method=method)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.pairwise = isinstance(self.kernel, str) and self.kernel == "precomputed"
        return tags


class _FalkonKernelRidge(_KernelCenters):
    """The fit of both estimators: ``alpha``, the kernel's ``gamma``, the centers, then Falkon's CG."""

    _parameter_constraints: dict = {
        **_KernelCenters._parameter_constraints,
        "alpha": [Interval(Real, 0, None, closed="left"), "array-like"],
        "kernel": [StrOptions(set(PAIRWISE_KERNEL_FUNCTIONS) | {"precomputed"}), callable],
        "gamma": [Interval(Real, 0, None, closed="left"), StrOptions({"scale"}), None],
    }

    def __init__(self, alpha=1.0, *, kernel="linear", gamma=None, degree=3, coef0=1, kernel_params=None,
                 n_centers=None, centers="uniform", center_params=None, tol=1e-4, max_iter=100,
                 random_state=None):
        super().__init__(kernel=kernel, degree=degree, coef0=coef0, kernel_params=kernel_params, n_centers=n_centers,
                         centers=centers, center_params=center_params, tol=tol, max_iter=max_iter,
                         random_state=random_state)
        self.alpha = alpha
        self.gamma = gamma

    def _kernel(self) -> Kernel:
        """scikit-learn's KernelRidge kernel: a callable takes ``kernel_params``, a name gamma, degree, coef0."""
        if isinstance(self.kernel, str) and self.kernel == "precomputed":
            raise ValueError(f"{type(self).__name__} needs the data points to choose centers and evaluate "
                             "the kernel: kernel='precomputed' is not supported. Use scikit-learn's "
                             "KernelRidge for a precomputed kernel matrix.")
        if callable(self.kernel):
            params = dict(self.kernel_params or {})
        else:
            gamma = self.gamma_ if isinstance(self.gamma, str) else self.gamma  # "scale": measured by fit
            params = {"gamma": gamma, "degree": self.degree, "coef0": self.coef0}
        return Kernel(self.kernel, tuple(sorted(params.items())))

    def _scale_gamma(self, X, lazy) -> int:
        """gamma='scale' as scikit-learn's SVC: ``1 / (n_features * X.var())`` (1 for constant X); its passes."""
        if not (isinstance(self.gamma, str) and self.gamma == "scale"):
            return 0
        from ..kernel_approximation import data_variance

        var = float(data_variance(X, type(self).__name__))
        self.gamma_ = 1.0 / (X.shape[1] * var) if var != 0 else 1.0
        return 1 if lazy else 0

    def _fit_targets(self, X, y, targets, lazy, sample_weight):
        """Choose the centers, then CG: one pass for the right-hand side, then one an iteration."""
        started = time.perf_counter()
        scale_passes = self._scale_gamma(X, lazy)
        kernel = self._kernel()
        selector = self._selector(X)
        weights, constant = check_sample_weight(sample_weight, X, lazy)
        alphas = penalties(self.alpha, targets.n_targets)
        if alphas.size == 1:
            alphas = np.full(targets.n_targets, alphas[0])
        check = BlockCheck(type(self).__name__)
        xp = backends.namespace(X._meta if lazy else X)  # where the data lives: None for NumPy (and NumPy meta)
        if xp is not None:
            check_device_kernel(kernel, type(self).__name__)
        rows = DeviceRows(X) if not lazy and xp is not None else row_source(X, check=check if lazy else None)
        n_samples = rows.n_rows
        if n_samples == 0:
            raise ValueError(f"Found array with 0 sample(s) while a minimum of 1 is required by {type(self).__name__}.")
        n_centers = self._n_centers(n_samples, selector)
        chosen = selector.select(rows, n_centers, kernel, check_random_state(self.random_state))
        points = chosen.components
        dtype = backends.numpy_dtype(X) if xp is not None and not lazy else X.dtype
        points = points.astype(dtype) if points.dtype != dtype else points
        centers = Centers(kernel, points)
        dense = points.toarray() if sp.issparse(points) else points
        if xp is not None and hasattr(xp, "linalg"):  # the m x m algebra where the data is (_falkon_device)
            pre = DevicePreconditioner(xp, backends.device_of(X._meta if lazy else X), kernel, dense, alphas)
        else:
            pre = Preconditioner(kernel.between(np.asarray(dense, dtype=np.float64),
                                                np.asarray(dense, dtype=np.float64)), alphas)
        if lazy:
            if any(c != c for c in X.chunks[0]):  # NaN: row sizes were unknown; row_source counted them
                X = engine.with_row_sizes(X, rows.sizes)
            X, self.input_persisted_ = inputs.persist_if_fits(X)
        else:
            self.input_persisted_ = False
        arrays = [X, y] if weights is None else [X, y, weights]
        factor = 1.0 if constant is None else constant
        first = PassState(centers, None, targets, weights is not None, check if lazy else None)
        b, weight_total, _ = self._pass(arrays, first, lazy)
        pre.set_weight_total(weight_total * factor)
        passes = rows.passes + 1
        data = [X] if weights is None else [X, weights]

        def apply(beta):
            g = self._pass(data, PassState(centers, pre.apply(beta), None, weights is not None), lazy)[0]
            return pre.apply_t(g * factor) + pre.penalty(beta)

        def report(iteration, residual):
            utils.news(log, "%s: CG iteration %d of at most %d, relative residual %.3g (tol %g), %.1f s",
                           type(self).__name__, iteration, self.max_iter, residual, self.tol,
                           time.perf_counter() - started)

        result = conjugate_gradient(apply, pre.apply_t(b * factor), tol=self.tol, max_iter=self.max_iter,
                                    callback=report)
        self.centers_ = points
        self.center_indices_ = chosen.indices
        self.dual_coef_ = pre.apply(result.beta).astype(dtype)
        self.n_iter_ = result.n_iter
        self.residuals_ = np.asarray(result.residuals)
        self.center_passes_ = rows.passes
        self.passes_ = scale_passes + passes + result.n_iter
        if not result.converged:
            warnings.warn(
                f"{type(self).__name__}: conjugate gradient did not converge in max_iter={self.max_iter} "
                f"iterations: relative residual {result.residuals[-1]:.3g} > tol={self.tol}. Increase max_iter "
                "or alpha, or loosen tol.", ConvergenceWarning, stacklevel=3)

    @staticmethod
    def _pass(arrays, state, lazy):
        if not lazy:
            return data_pass(arrays, state, lazy, block_partial, combine_normal)
        reduced = engine.reduce_aligned_rows(arrays, block_partial, combine_normal, state)
        return inputs.compute(reduced, arrays=arrays[:1])[0]


class _KernelRidgeRegressor(StreamedScore, MultiOutputMixin, RegressorMixin, _KernelCenters):
    """What a fitted kernel ridge regressor does with its centers and ``dual_coef_`` (KernelRidge, KernelRidgeCV)."""

    def predict(self, X):
        """Predict ``k(X, centers_) @ dual_coef_``; lazy on dask input.

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray or dask array of shape (n_samples,) or (n_samples, n_targets)
        """
        return self._scores(X, "predict")

    def _score_in_memory(self, X, y):
        if backends.namespace(X) is not None:  # a device array's predictions come to the host to be scored
            from sklearn.metrics import r2_score

            return r2_score(backends.to_numpy(in_memory(y)), backends.to_numpy(self.predict(X)))
        return RegressorMixin.score(self, X, in_memory(y))

    def _score_plan(self, X):
        check_is_fitted(self)
        return check_input(self, X, reset=False), block_predict, self._predict_state(self.dual_coef_), "r2"


class KernelRidge(_KernelRidgeRegressor, _FalkonKernelRidge):
    """Kernel ridge regression with ``n_centers`` Nystroem centers, solved out of core by Falkon's CG.

    The model of :class:`sklearn.kernel_ridge.KernelRidge` with the function restricted to the span
    of ``k(., c)`` over ``m`` centers ``c``: its parameters, plus the number of centers, how they
    are chosen and the CG's ``tol`` and ``max_iter``. ``fit`` reads NumPy, scipy.sparse, dask or
    Zarr input: the centers' passes (Nystroem's landmark table), one pass for ``K_nm^T W y``, then
    one pass per CG iteration. ``predict`` is lazy on dask input (one task a row block).

    Parameters
    ----------
    alpha : float or array-like of shape (n_targets,), default=1.0
        Regularization strength, scikit-learn's (not divided by the number of rows): the loss is
        ``sum_i w_i ||y_i - f(x_i)||^2 + alpha ||f||^2``.
    kernel : str or callable, default="linear"
        A kernel of ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS`` or a callable, as in
        scikit-learn's ``KernelRidge``; it must be positive semi-definite (the preconditioner is a
        Cholesky factor). ``'precomputed'`` is refused: centers are data points.
    gamma : float, 'scale' or None, default=None
        Of the named kernels, as in scikit-learn (None: each kernel's default, ``1 / n_features``
        for rbf). ``'scale'``: ``1 / (n_features * X.var())``, the variance of all entries, as
        scikit-learn's ``SVC`` (one more pass over dask input), stored in ``gamma_``.
    degree, coef0 : float
        Parameters of the named kernels, as in scikit-learn.
    kernel_params : dict, default=None
        Parameters of a callable kernel.
    n_centers : int, default=None
        Number of centers ``m``; None: ``min(1000, n_samples)``. Falkon's advice: ``m`` of order
        ``sqrt(n_samples)`` reaches the exact kernel ridge's statistical accuracy. Memory on the
        driver: a few ``m x m`` float64 matrices (2 GiB each at m = 16,384).
    centers : {'uniform', 'kmeans', 'leverage', 'rpcholesky'} or array-like, default='uniform'
        How the centers are chosen: every landmark method of :class:`dkapprox.Nystroem`, with its
        passes over the data, or the centers themselves.
    center_params : dict, default=None
        Options of the center method (Nystroem's ``landmark_params``).
    tol : float, default=1e-4
        CG stops when every target's preconditioned residual is at most ``tol`` times its initial one.
    max_iter : int, default=100
        At most this many CG iterations (each one pass over the data); a ``ConvergenceWarning``
        names the residual reached when CG stops there.
    random_state : int, RandomState instance or None, default=None
        Seeds the choice of centers.

    Attributes
    ----------
    dual_coef_ : ndarray of shape (n_centers,) or (n_centers, n_targets)
        Coefficients of the centers, ``predict(X) = k(X, centers_) @ dual_coef_``; in X's dtype.
    centers_ : ndarray or sparse matrix of shape (n_centers, n_features)
        The centers, in X's dtype.
    center_indices_ : ndarray of shape (n_centers,), dtype int64
        Global row index of each center (-1 for given centers; the seed row of a k-means centroid).
    n_iter_ : int
        CG iterations run.
    residuals_ : ndarray of shape (``n_iter_``,)
        The largest relative preconditioned residual over the targets after each iteration.
    gamma_ : float
        Only with ``gamma='scale'``: the bandwidth measured from the training data.
    passes_ : int
        Passes over the data: one for ``gamma='scale'`` on dask input, the centers'
        (``center_passes_``), one for the right-hand side, one an iteration.
    center_passes_ : int
        Passes over the data the choice of the centers made (part of ``passes_``).
    input_persisted_ : bool
        Whether the fit kept a dask input in memory for its passes (see Notes).
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during ``fit``; only for input with string feature names.

    Notes
    -----
    The solver is Falkon's (Rudi, Carratino, Rosasco 2017): the Nystroem kernel ridge normal equations
    ``(K_nm^T W K_nm + alpha K_mm) a = K_nm^T W y``, preconditioned with Cholesky factors of the
    ``m x m`` center kernel on the driver and solved by conjugate gradient
    (``dkapprox.kernel_ridge._falkon``). Each iteration is one pass over the row blocks: a task
    forms ``k(block, centers)`` a slice of rows at a time, multiplies it twice and returns an
    ``m x n_targets`` float64 partial, summed in a tree; the ``n x m`` matrix is never stored, and
    float32 blocks are multiplied in float32 a slice (a few hundred rows) at a time, each slice's
    product added in float64. With ``n_centers = n_samples`` (all rows, ``centers='uniform'``) it is
    scikit-learn's ``KernelRidge``: the preconditioner is then the system itself (up to a jitter of
    ``m * eps * mean(diag K_mm)`` on ``K_mm``), and CG converges in one iteration.

    On dask input the input is kept in the workers' memory (``persist``) when it takes at most a
    quarter of it (``dkapprox.persist-fraction``; under a distributed client the workers' memory
    limits to their pause line, less what they hold; else this machine's available memory), and is
    otherwise read again every pass, one block a task, as it was read the first time: nothing
    spills. The centers enter each pass's graph once, as one key.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dkapprox.linear_model import KernelRidge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20_000, 3))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=20_000)
    >>> X, y = da.from_array(X, chunks=5_000), da.from_array(y, chunks=5_000)
    >>> model = KernelRidge(alpha=1.0, kernel="rbf", gamma=0.5, n_centers=300, random_state=0).fit(X, y)
    >>> y_pred = model.predict(X)     # lazy: a dask array, nothing computed yet
    >>> y_pred.numblocks, y_pred.dtype
    ((4,), dtype('float64'))
    >>> model.passes_ == 2 + model.n_iter_, bool(model.residuals_[-1] <= model.tol)
    (True, True)
    >>> round(model.score(X, y), 2)
    0.98

    """

    def fit(self, X, y, sample_weight=None):
        """Fit the model: the centers' passes, then one pass for the right-hand side and one per CG iteration.

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)
        y : {ndarray, dask array} of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : float or {ndarray, dask array} of shape (n_samples,), default=None
            Non-negative weight of each row, as in scikit-learn.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        self._validate_params()
        X, y, lazy = check_Xy(self, X, y, y_numeric=True)  # NumPy, sparse or device blocks
        self._fit_targets(X, y, NumericTargets.of(y), lazy, sample_weight)
        if y.ndim == 1:
            self.dual_coef_ = self.dual_coef_.ravel()
        return self


class _KernelRidgeClassifier(StreamedScore, ClassifierMixin, _KernelCenters):
    """What a fitted kernel ridge classifier does with its centers and ``dual_coef_``: KernelRidgeClassifier's and
    KernelRidgeClassifierCV's."""

    def decision_function(self, X):
        """One-vs-rest scores ``k(X, centers_) @ dual_coef_`` (lazy on dask input).

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)

        Returns
        -------
        scores : ndarray or dask array of shape (n_samples,) or (n_samples, n_classes)
            For two classes, the score of ``classes_[1]``.
        """
        return self._scores(X, "decision_function")

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
        check_is_fitted(self)
        given = inputs.as_input(X)
        if given.namespace is not None:
            raise ValueError(f"{type(self).__name__} runs on NumPy blocks: device arrays (CuPy) are not supported "
                             "yet. Copy X to the host first (X.get(), or X.map_blocks(lambda b: b.get())).")
        X = check_input(self, given, reset=False)
        state = LabelState(self._predict_state(self.dual_coef_), self.classes_, self._binarizer)
        tail, dtype = label_output(self.classes_, self._binarizer)
        return apply_rows(self, X, given.lazy, label_block, state, tail=tail, dtype=dtype, method="predict")

    def _score_plan(self, X):
        check_is_fitted(self)
        state = LabelState(self._predict_state(self.dual_coef_), self.classes_, self._binarizer)
        return check_input(self, X, reset=False), label_block, state, "accuracy"


class KernelRidgeClassifier(_KernelRidgeClassifier, _FalkonKernelRidge):
    """Kernel ridge on +1/-1 targets (one-vs-rest, as RidgeClassifier), solved by Falkon's CG.

    Each class is a :class:`KernelRidge` regression of +1 (this class) against -1 (the others);
    two classes make one. All classes share the centers and every pass. On dask input the labels
    are read first (one pass over ``y`` only).

    Parameters
    ----------
    alpha : float or array-like of shape (n_targets,), default=1.0
        Regularization strength, scikit-learn's (not divided by the number of rows): the loss is
        ``sum_i w_i ||y_i - f(x_i)||^2 + alpha ||f||^2``.
    kernel : str or callable, default="linear"
        A kernel of ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS`` or a callable, as in
        scikit-learn's ``KernelRidge``; it must be positive semi-definite (the preconditioner is a
        Cholesky factor). ``'precomputed'`` is refused: centers are data points.
    gamma : float, 'scale' or None, default=None
        Of the named kernels, as in scikit-learn (None: each kernel's default, ``1 / n_features``
        for rbf). ``'scale'``: ``1 / (n_features * X.var())``, the variance of all entries, as
        scikit-learn's ``SVC`` (one more pass over dask input), stored in ``gamma_``.
    degree, coef0 : float
        Parameters of the named kernels, as in scikit-learn.
    kernel_params : dict, default=None
        Parameters of a callable kernel.
    n_centers : int, default=None
        Number of centers ``m``; None: ``min(1000, n_samples)``. Falkon's advice: ``m`` of order
        ``sqrt(n_samples)`` reaches the exact kernel ridge's statistical accuracy. Memory on the
        driver: a few ``m x m`` float64 matrices (2 GiB each at m = 16,384).
    centers : {'uniform', 'kmeans', 'leverage', 'rpcholesky'} or array-like, default='uniform'
        How the centers are chosen: every landmark method of :class:`dkapprox.Nystroem`, with its
        passes over the data, or the centers themselves.
    center_params : dict, default=None
        Options of the center method (Nystroem's ``landmark_params``).
    tol : float, default=1e-4
        CG stops when every target's preconditioned residual is at most ``tol`` times its initial one.
    max_iter : int, default=100
        At most this many CG iterations (each one pass over the data); a ``ConvergenceWarning``
        names the residual reached when CG stops there.
    random_state : int, RandomState instance or None, default=None
        Seeds the choice of centers.

    Attributes
    ----------
    dual_coef_ : ndarray of shape (n_centers,) or (n_centers, n_classes)
        Coefficients of the centers, one column per class; one column (raveled) for two classes.
    classes_ : ndarray of shape (n_classes,)
        The class labels (the column indices of a multilabel indicator y).
    centers_ : ndarray or sparse matrix of shape (n_centers, n_features)
        The centers, in X's dtype.
    center_indices_ : ndarray of shape (n_centers,), dtype int64
        Global row index of each center (-1 for given centers; the seed row of a k-means centroid).
    n_iter_ : int
        CG iterations run.
    residuals_ : ndarray of shape (``n_iter_``,)
        The largest relative preconditioned residual over the targets after each iteration.
    gamma_ : float
        Only with ``gamma='scale'``: the bandwidth measured from the training data.
    passes_ : int
        Passes over the data: one for ``gamma='scale'`` on dask input, the centers'
        (``center_passes_``), one for the right-hand side, one an iteration.
    center_passes_ : int
        Passes over the data the choice of the centers made (part of ``passes_``).
    input_persisted_ : bool
        Whether the fit kept a dask input in memory for its passes (see Notes).
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during ``fit``; only for input with string feature names.

    Notes
    -----
    The solver is Falkon's (Rudi, Carratino, Rosasco 2017): the Nystroem kernel ridge normal equations
    ``(K_nm^T W K_nm + alpha K_mm) a = K_nm^T W y``, preconditioned with Cholesky factors of the
    ``m x m`` center kernel on the driver and solved by conjugate gradient
    (``dkapprox.kernel_ridge._falkon``). Each iteration is one pass over the row blocks: a task
    forms ``k(block, centers)`` a slice of rows at a time, multiplies it twice and returns an
    ``m x n_targets`` float64 partial, summed in a tree; the ``n x m`` matrix is never stored, and
    float32 blocks are multiplied in float32 a slice (a few hundred rows) at a time, each slice's
    product added in float64. With ``n_centers = n_samples`` (all rows, ``centers='uniform'``) it is
    scikit-learn's ``KernelRidge``: the preconditioner is then the system itself (up to a jitter of
    ``m * eps * mean(diag K_mm)`` on ``K_mm``), and CG converges in one iteration.

    On dask input the input is kept in the workers' memory (``persist``) when it takes at most a
    quarter of it (``dkapprox.persist-fraction``; under a distributed client the workers' memory
    limits to their pause line, less what they hold; else this machine's available memory), and is
    otherwise read again every pass, one block a task, as it was read the first time: nothing
    spills. The centers enter each pass's graph once, as one key.

    Examples
    --------
    >>> import dask.array as da
    >>> from sklearn.datasets import load_digits
    >>> from dkapprox.linear_model import KernelRidgeClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = da.from_array(X / 16, chunks=300), da.from_array(y, chunks=300)
    >>> clf = KernelRidgeClassifier(alpha=1e-2, kernel="rbf", gamma=0.2, n_centers=500, random_state=0)
    >>> y_pred = clf.fit(X, y).predict(X)     # lazy: a dask array, nothing computed yet
    >>> y_pred.numblocks, y_pred.dtype
    ((6,), dtype('int64'))
    >>> clf.score(X, y) > 0.99
    True

    """

    def fit(self, X, y, sample_weight=None):
        """Fit one kernel ridge regression per class: a pass over y, then the passes of :class:`KernelRidge`.

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
        X, y, lazy = check_Xy(self, X, y, y_numeric=False, on_host=True)
        y, targets, self.classes_, self._binarizer = classifier_targets(self, y, lazy)
        self._fit_targets(X, y, targets, lazy, sample_weight)
        if self.dual_coef_.shape[1] == 1:
            self.dual_coef_ = self.dual_coef_.ravel()
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        return tags


def label_block(block, state):
    return labels_of(predict_block(block, state.scores), state.classes, state.binarizer)
