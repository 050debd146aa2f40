"""GaussianProcessRegressor: scikit-learn's interface, a sparse variational GP out of core, the exact GP in memory."""

from __future__ import annotations

import time
from numbers import Integral, Real

import dask.array as da
import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse as sp
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin, clone
from sklearn.gaussian_process import GaussianProcessRegressor as _ExactGP
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.gaussian_process.kernels import Kernel as GPKernel
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .. import backends, engine, inputs
from ..inputs import BlockCheck, check_input, row_source
from ..kernels import Kernel
from ..learning import StreamedScore, check_Xy, in_memory
from ..nystroem import SELECTORS, Given, make_selector
from ..utils import HasMethods, Interval, StrOptions, format_size
from . import _grid, _passes, _sparse
from ._kernels import read_kernel

#: scikit-learn's fitted arrays of the exact GP, kept as this estimator's (a model file saves them)
_EXACT_STATE = ("kernel_", "X_train_", "y_train_", "alpha_", "L_", "_y_train_mean", "_y_train_std")
#: what a fit with length_scale_grid adds; a later fit without one drops them
_GRID_STATE = ("grid_scores_", "grid_thetas_", "best_index_", "best_length_scale_")
#: the n x n matrices an exact fit, or a covariance, may hold at most, as a fraction of the memory free now
MEMORY_FRACTION = 0.5


class GaussianProcessRegressor(StreamedScore, MultiOutputMixin, RegressorMixin, BaseEstimator):
    """Gaussian process regression on NumPy or dask input: scikit-learn's estimator, sparse out of core.

    With ``n_centers=None`` every row is a center: the exact GP, fitted in memory by scikit-learn's
    :class:`sklearn.gaussian_process.GaussianProcessRegressor` (any scikit-learn GP kernel; n x n memory).
    With ``n_centers=m`` it is Titsias' sparse variational GP (SGPR, "VFE", as GPflow's and GPyTorch's
    SGPR): ``m`` inducing points chosen as KernelRidge's centers are, the hyperparameters maximizing the
    variational lower bound on the log marginal likelihood, whose statistics ``K_mn K_nm`` and ``K_mn y``
    come from one pass over the rows and its length-scale gradient from a second. The m x m algebra runs
    on the driver; ``predict`` maps the mean and standard deviation over the row blocks, lazily for dask.

    Parameters
    ----------
    kernel : scikit-learn GP kernel, default=None
        ``None`` is ``ConstantKernel(1.0, constant_value_bounds="fixed") * RBF(1.0, length_scale_bounds="fixed")``,
        as in scikit-learn. The sparse GP takes RBF or Matern (nu in 0.5, 1.5, 2.5, inf), with one length
        scale or one a feature, optionally times a ConstantKernel, optionally plus a WhiteKernel (the noise).
    alpha : float, default=1e-10
        Added to the diagonal of the training kernel (noise variance not learned); an array of one value
        a row for the exact GP only.
    optimizer : "fmin_l_bfgs_b", callable or None, default="fmin_l_bfgs_b"
        As in scikit-learn: L-BFGS-B on the (bound on the) log marginal likelihood over ``kernel.theta``
        within ``kernel.bounds``; ``None`` keeps the kernel's hyperparameters.
    n_restarts_optimizer : int, default=0
        Further starts drawn log-uniformly within the bounds (all bounds must be finite).
    normalize_y : bool, default=False
        Center and scale the targets by their mean and standard deviation.
    n_centers : int or None, default=None
        Inducing points m; ``None``: every row (the exact GP).
    centers : {"uniform", "kmeans", "leverage", "rpcholesky"} or array-like, default="uniform"
        How the centers are chosen, as Nystroem's landmarks; the kernel-aware selectors use an isotropic
        RBF at the kernel's mean initial length scale.
    center_params : dict or None, default=None
        Options of the center selector.
    random_state : int, RandomState instance or None, default=None
        Seeds the centers and the optimizer's restarts.
    length_scale_grid : array-like of shape (n_candidates,) or (n_candidates, n_features), default=None
        Candidate length scales for the sparse GP, all scored in ONE pass over the data: each block's
        statistics of every candidate are gathered at once, then on the driver each candidate's bound is
        maximized over the signal variance and the noise (those the kernel leaves free, within its bounds, as
        each L-BFGS-B step does) and the best candidate is kept. With ``optimizer=None`` the fit stops there
        (``kernel_`` is the best candidate); otherwise the optimizer starts from it. A row of the grid is one
        candidate: a number (one length scale, or one shared by every feature of an ARD kernel) or a row of
        ``n_features`` (an ARD kernel). The kernel's length scale must be free and the candidates within its
        bounds. ``None``: no grid, scikit-learn's behaviour. A constructor parameter, as ``RidgeCV``'s
        ``alphas`` and ``KernelRidgeCV``'s ``gammas``, so that ``clone``, ``GridSearchCV``, pipelines and model
        files keep it; the score is the fit's own objective (the bound on the evidence), not a
        cross-validated score, so one pass serves every candidate. Sparse GP only: the exact GP reads X into
        memory once whatever the search, so a grid saves it no pass (use ``n_restarts_optimizer`` or
        scikit-learn's ``GridSearchCV``). The pass holds ``n_candidates x n_centers²`` float64 a task; more
        than ``dkapprox.cv-statistics-bytes`` (2 GiB) is refused, naming how many candidates fit.

    Attributes
    ----------
    kernel_ : kernel instance
        The kernel with the hyperparameters found (``kernel`` when ``optimizer=None``).
    log_marginal_likelihood_value_ : float
        The log marginal likelihood (exact GP) or its variational lower bound (sparse GP) at ``kernel_``.
    centers_ : ndarray of shape (n_centers, n_features)
        The inducing points, float64; sparse GP only.
    center_indices_ : ndarray of int or None
        Row indices of the centers in X, where they are rows of X; sparse GP only.
    dual_coef_ : ndarray of shape (n_centers, n_targets)
        ``(σ² K_mm + K_mn K_nm)⁻¹ K_mn y``: the predictive mean is ``k(x, centers_) @ dual_coef_`` (times
        the targets' scale, plus their mean, with ``normalize_y``); sparse GP only.
    X_train_ : ndarray of shape (n_samples, n_features)
        The training rows; exact GP only, as scikit-learn's.
    y_train_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
        The training targets (normalized with ``normalize_y``); exact GP only.
    alpha_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
        The dual coefficients of the training rows; exact GP only.
    L_ : ndarray of shape (n_samples, n_samples)
        Lower Cholesky factor of the training kernel matrix; exact GP only.
    noise_variance_ : float
        σ²: the WhiteKernel's noise level plus ``alpha``.
    n_passes_ : int
        Passes over the training data the fit made: the centers', the targets' mean and scale with
        ``normalize_y`` on dask input, one for the whole ``length_scale_grid``, one per evaluation of the
        bound at new length scales and one per gradient with a free length scale (0 for the exact GP: it
        reads X once into memory).
    grid_scores_ : ndarray of shape (n_candidates,)
        The bound of each candidate of ``length_scale_grid`` at its best signal variance and noise (``-inf``
        where it is not positive definite); only with a grid.
    grid_thetas_ : ndarray of shape (n_candidates, n_kernel_params)
        ``kernel.theta`` of each candidate there (log hyperparameters; NaN where its score is ``-inf``):
        ``kernel.clone_with_theta(grid_thetas_[i])`` is the kernel ``grid_scores_[i]`` scores; only with a grid.
    best_index_ : int
        The candidate of ``length_scale_grid`` with the highest bound; only with a grid.
    best_length_scale_ : float or ndarray of shape (n_features,)
        Its length scale, where the optimizer started (``kernel_`` holds where it ended); only with a grid.
    input_persisted_ : bool
        Whether dask input was persisted in the workers' memory for the fit's passes (where it fits);
        sparse GP only.
    fit_seconds_ : float
        Wall time of the fit; sparse GP only.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit. Defined only when ``X`` has
        feature names that are all strings.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    >>> from dkapprox.gaussian_process import GaussianProcessRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(500, 1))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(500)
    >>> gp = GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1), n_centers=30, random_state=0).fit(X, y)
    >>> mean, std = gp.predict(np.array([[0.0], [1.0]]), return_std=True)
    >>> bool(np.all(np.abs(mean - np.sin([0.0, 1.0])) < 0.1)), bool(np.all((std > 0.05) & (std < 0.2)))
    (True, True)

    Five length scales scored in one pass, the best kept (``optimizer=None``: no search beyond the grid; the
    other pass is the centers' draw):

    >>> grid = GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1), n_centers=30, optimizer=None, random_state=0,
    ...                                 length_scale_grid=[0.1, 0.3, 1.0, 3.0, 10.0]).fit(X, y)
    >>> grid.best_length_scale_, grid.n_passes_
    (1.0, 2)
    """

    _parameter_constraints: dict = {
        "kernel": [None, HasMethods(["__call__", "diag", "clone_with_theta"])],
        "alpha": [Interval(Real, 0, None, closed="left"), np.ndarray],
        "optimizer": [StrOptions({"fmin_l_bfgs_b"}), callable, None],
        "n_restarts_optimizer": [Interval(Integral, 0, None, closed="left")],
        "normalize_y": ["boolean"],
        "n_centers": [Interval(Integral, 1, None, closed="left"), None],
        "centers": [StrOptions(set(SELECTORS)), "array-like"],
        "center_params": [dict, None],
        "random_state": ["random_state"],
        "length_scale_grid": ["array-like", None],
    }

    def __init__(self, kernel=None, *, alpha=1e-10, optimizer="fmin_l_bfgs_b", n_restarts_optimizer=0,
                 normalize_y=False, n_centers=None, centers="uniform", center_params=None, random_state=None,
                 length_scale_grid=None):
        self.kernel = kernel
        self.alpha = alpha
        self.optimizer = optimizer
        self.n_restarts_optimizer = n_restarts_optimizer
        self.normalize_y = normalize_y
        self.n_centers = n_centers
        self.centers = centers
        self.center_params = center_params
        self.random_state = random_state
        self.length_scale_grid = length_scale_grid

    # -- fit -------------------------------------------------------------------------

    def fit(self, X, y):
        """Fit the Gaussian process: choose the centers, then the hyperparameters (passes over X each).

        Parameters
        ----------
        X : {ndarray, dask array, zarr array} of shape (n_samples, n_features)
        y : {ndarray, dask array} of shape (n_samples,) or (n_samples, n_targets)

        Returns
        -------
        self : GaussianProcessRegressor
            Fitted estimator.
        """
        self._validate_params()
        _refuse_sparse(X)
        for name in _GRID_STATE:
            self.__dict__.pop(name, None)
        kernel = self._initial_kernel()
        if self.n_centers is None and isinstance(self.centers, str):
            if self.length_scale_grid is not None:
                raise ValueError("length_scale_grid is for the sparse GP (give n_centers, or an array of centers): "
                                 "its one pass over the data is what a grid saves, and the exact GP reads X into "
                                 "memory once whatever the search. For the exact GP use n_restarts_optimizer, or "
                                 "scikit-learn's GridSearchCV over the kernel's length_scale.")
            return self._fit_exact(X, y, kernel)
        return self._fit_sparse(X, y, kernel)

    def _initial_kernel(self):
        if self.kernel is None:
            return C(1.0, constant_value_bounds="fixed") * RBF(1.0, length_scale_bounds="fixed")
        if not isinstance(self.kernel, GPKernel):
            raise ValueError("kernel must be a scikit-learn Gaussian process kernel (an instance of "
                             f"sklearn.gaussian_process.kernels.Kernel), got {type(self.kernel).__name__}.")
        return clone(self.kernel)

    def _fit_exact(self, X, y, kernel):
        X, y, lazy = check_Xy(self, X, y, y_numeric=True, on_host=True)
        if lazy:
            n = X.shape[0]
            if n != n:
                raise ValueError("The exact GP (n_centers=None) needs the number of rows: give X known chunk sizes.")
            self._refuse_square(n, "the exact GP's n x n kernel matrix", "give n_centers (the sparse GP)")
            X, y = inputs.compute(X, y, arrays=[X])
        exact = _ExactGP(kernel, alpha=self.alpha, optimizer=self.optimizer,
                         n_restarts_optimizer=self.n_restarts_optimizer, normalize_y=self.normalize_y,
                         random_state=self.random_state).fit(np.asarray(X), np.asarray(y))
        for name in _EXACT_STATE:
            setattr(self, name, getattr(exact, name))
        self.log_marginal_likelihood_value_ = float(exact.log_marginal_likelihood_value_)
        self.noise_variance_ = float(np.mean(self.alpha)) + _white_noise(self.kernel_)
        self.n_passes_ = 0
        self._exact = True
        self._y_ndim = int(np.ndim(y))
        return self

    def _exact_model(self):
        """scikit-learn's estimator holding this fit's arrays: its predict and log_marginal_likelihood are ours."""
        exact = _ExactGP(self.kernel_, alpha=self.alpha, normalize_y=self.normalize_y)
        for name in _EXACT_STATE:
            setattr(exact, name, getattr(self, name))
        exact.log_marginal_likelihood_value_ = self.log_marginal_likelihood_value_
        exact.n_features_in_ = self.n_features_in_
        return exact

    def _fit_sparse(self, X, y, kernel):
        started = time.perf_counter()
        if np.ndim(self.alpha) != 0:
            raise ValueError("alpha must be a number for the sparse GP (n_centers given); an array of one value a "
                             "row is for the exact GP (n_centers=None).")
        X, y, lazy = check_Xy(self, X, y, y_numeric=True, on_host=True)
        params = read_kernel(kernel, X.shape[1])
        grid = None if self.length_scale_grid is None else _grid.candidates(self.length_scale_grid, kernel, X.shape[1])
        check = BlockCheck(type(self).__name__)
        rows = row_source(X, check=check if lazy else None)
        n_samples = rows.n_rows
        selector, n_centers = self._selector(X, n_samples)
        if grid is not None:
            _grid.check_size(grid.shape[0], n_centers)
        gamma = 0.5 / float(np.mean(params.length_scale)) ** 2
        chosen = selector.select(rows, n_centers, Kernel("rbf", (("gamma", gamma),)),
                                 check_random_state(self.random_state))
        centers = np.asarray(chosen.components.toarray() if hasattr(chosen.components, "toarray")
                             else chosen.components, dtype=np.float64)
        if lazy:
            if any(c != c for c in X.chunks[0]):
                X = engine.with_row_sizes(X, rows.sizes)
            if any(c != c for c in y.chunks[0]):
                y = engine.with_row_sizes(y, rows.sizes)
            X, self.input_persisted_ = inputs.persist_if_fits(X)
        else:
            self.input_persisted_ = False
        self._y_ndim = int(y.ndim)
        y_mean, y_std, passes = self._normalization(y, lazy)
        training = _sparse.Training(X, y, lazy, centers, y_mean, y_std, float(self.alpha), check if lazy else None,
                                    rows.passes + passes)
        _sparse.TRAINING[self] = training
        theta = kernel.theta
        if grid is not None:
            found = _grid.search(training, kernel, grid, X.shape[1])
            theta = found.thetas[found.best]
            self.grid_scores_, self.grid_thetas_, self.best_index_ = found.scores, found.thetas, found.best
            best = read_kernel(kernel.clone_with_theta(theta), X.shape[1]).length_scale
            self.best_length_scale_ = float(best) if np.ndim(best) == 0 else best
        if self.optimizer is not None and kernel.n_dims > 0:
            theta, _ = training.optimize(kernel.clone_with_theta(theta), self.optimizer, self.n_restarts_optimizer,
                                         self.random_state)
        kernel_ = kernel.clone_with_theta(theta)
        if self.optimizer is not None and kernel.n_dims > 0:
            kernel_._check_bounds_params()  # scikit-learn's ConvergenceWarning for a value at its bound
        bound, params = training.evaluate(kernel_, gradient=False)
        self.kernel_ = kernel_
        self.log_marginal_likelihood_value_ = bound.value
        self.centers_ = centers
        self.center_indices_ = chosen.indices
        self.dual_coef_ = bound.coef
        self.noise_variance_ = params.noise + float(self.alpha)
        self._exact = False
        self._L, self._LB, self._y_train_mean, self._y_train_std = bound.L, bound.LB, y_mean, y_std
        self.n_passes_ = training.passes
        self.fit_seconds_ = time.perf_counter() - started
        return self

    def _selector(self, X, n_samples):
        if isinstance(self.centers, str):
            selector = make_selector(self.centers, self.center_params)
            if self.n_centers > n_samples:
                raise ValueError(f"n_centers={self.n_centers} must be at most the number of samples, "
                                 f"n_samples={n_samples}: a center is a training row (or a centroid of them).")
            return selector, self.n_centers
        if self.center_params:
            raise ValueError("center_params has no options for an array of centers.")
        given = np.asarray(inputs.as_input(self.centers, dtype=None).in_memory(), dtype=np.float64)
        if given.ndim != 2 or given.shape[1] != X.shape[1]:
            raise ValueError(f"centers has shape {given.shape}, but {type(self).__name__} is fitted on X with "
                             f"{X.shape[1]} features.")
        if self.n_centers is not None and self.n_centers != given.shape[0]:
            raise ValueError(f"n_centers={self.n_centers} but centers holds {given.shape[0]} rows: leave "
                             "n_centers=None with an array of centers.")
        return Given(given), given.shape[0]

    def _normalization(self, y, lazy):
        """``(mean, std, passes)`` of the targets: scikit-learn's normalize_y (a zero std is 1)."""
        t = 1 if y.ndim == 1 else y.shape[1]
        if not self.normalize_y:
            return np.zeros(t), np.ones(t), 0
        if lazy:  # one pass over y: the moments folded exactly, whatever the chunks
            reduced = engine.reduce_aligned_rows([y], _passes.target_moments, backends.combine_block_moments, None)
            rows, mean, m2, _ = inputs.compute(reduced, arrays=[y])[0]
            std = np.sqrt(np.asarray(m2) / max(rows, 1))
        else:
            y2 = y.reshape(y.shape[0], -1)
            mean, std = y2.mean(axis=0), y2.std(axis=0)
        std = np.where(std < 10 * np.finfo(np.float64).eps, 1.0, std)
        return np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64), int(lazy)

    def log_marginal_likelihood(self, theta=None, eval_gradient=False, clone_kernel=True):
        """The log marginal likelihood (exact GP) or its variational bound (sparse GP) at ``theta``.

        ``theta=None`` returns ``log_marginal_likelihood_value_``. Otherwise the sparse GP reads the training
        data again: one pass, and one more for ``eval_gradient`` when a length scale is free.

        Parameters
        ----------
        theta : array-like of shape (n_kernel_params,), default=None
            Log-transformed hyperparameters, as ``kernel_.theta``.
        eval_gradient : bool, default=False
            Also return the gradient in ``theta``.
        clone_kernel : bool, default=True
            Accepted for scikit-learn's signature; the kernel is always cloned.

        Returns
        -------
        log_likelihood : float
        log_likelihood_gradient : ndarray of shape (n_kernel_params,), only with ``eval_gradient``
        """
        check_is_fitted(self)
        if theta is None:
            if eval_gradient:
                raise ValueError("Gradient can only be evaluated for theta!=None")
            return self.log_marginal_likelihood_value_
        if self._exact:
            return self._exact_model().log_marginal_likelihood(theta, eval_gradient=eval_gradient,
                                                               clone_kernel=clone_kernel)
        training = _sparse.TRAINING.get(self)
        if training is None:
            raise ValueError("log_marginal_likelihood(theta) reads the training data again, which a loaded or "
                             "copied model does not hold: fit it in this process (log_marginal_likelihood() with "
                             "no theta gives the fitted value).")
        kernel = self.kernel_.clone_with_theta(np.asarray(theta, dtype=np.float64))
        try:
            bound, grad = training.evaluate(kernel, gradient=eval_gradient)
        except np.linalg.LinAlgError:
            return (-np.inf, np.zeros_like(theta)) if eval_gradient else -np.inf
        return (bound.value, grad) if eval_gradient else bound.value

    # -- predict ---------------------------------------------------------------------

    def predict(self, X, return_std=False, return_cov=False):
        """The predictive mean, with its standard deviation or covariance; lazy for dask input.

        Parameters
        ----------
        X : {ndarray, dask array, zarr array} of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the standard deviation of the predictive distribution (with the WhiteKernel's
            noise, as scikit-learn's).
        return_cov : bool, default=False
            Also return the n x n covariance (in memory: refused where it would not fit).

        Returns
        -------
        y_mean : ndarray or dask array of shape (n_samples,) or (n_samples, n_targets)
        y_std : of the same shape, only with ``return_std``
        y_cov : ndarray of shape (n_samples, n_samples) or (n_samples, n_samples, n_targets), only with
            ``return_cov``
        """
        if return_std and return_cov:
            raise RuntimeError("At most one of return_std or return_cov can be requested.")
        check_is_fitted(self)
        given = inputs.as_input(X)
        if given.namespace is not None:
            raise ValueError("GaussianProcessRegressor runs on NumPy blocks: device arrays (CuPy) are not "
                             "supported. Copy X to the host first (X.get(), or X.map_blocks(lambda b: b.get())).")
        _refuse_sparse(X)
        X = check_input(self, given, reset=False)
        if return_cov:
            X = self._in_memory_for_cov(X, given.lazy)
            return self._predict_cov(X)
        if self._exact:
            return self._predict_exact(X, given.lazy, return_std)
        state = self._predict_state(return_std)
        t = state.coef.shape[1]
        if not given.lazy:
            out = _passes.predict_in_memory(X, state)
        else:
            out = engine.map_rows(X, _passes.predict_block, state, n_out=(2 * t if return_std else t),
                                  dtype=np.float64, name="gp-predict")
        mean, std = out[:, :t], out[:, t:]
        if self._y_ndim == 1:
            mean, std = mean[:, 0], (std[:, 0] if return_std else std)
        return (mean, std) if return_std else mean

    def _predict_state(self, with_std):
        params = read_kernel(self.kernel_, self.n_features_in_)
        return _passes.PredictState(params, self.centers_, self.dual_coef_, self._L, self._LB, self._y_train_mean,
                                    self._y_train_std, with_std)

    def _predict_exact(self, X, lazy, return_std):
        exact = self._exact_model()
        if not lazy:
            return exact.predict(X, return_std=return_std)
        t = 1 if self._y_ndim == 1 else self.y_train_.shape[1]
        out = engine.map_rows(X, _exact_block, (exact, return_std, t), n_out=(2 * t if return_std else t),
                              dtype=np.float64, name="gp-predict-exact")
        mean, std = out[:, :t], out[:, t:]
        if self._y_ndim == 1:
            mean, std = mean[:, 0], (std[:, 0] if return_std else std)
        return (mean, std) if return_std else mean

    def _in_memory_for_cov(self, X, lazy):
        n = X.shape[0]
        if n != n:
            raise ValueError("return_cov needs the number of rows: give X known chunk sizes.")
        self._refuse_square(n, "return_cov's n x n covariance", "use return_std, or predict fewer rows at a time")
        return inputs.compute(X, arrays=[X])[0] if lazy else X

    def _refuse_square(self, n, what, advice):
        import psutil

        need = 8 * n * n
        free = psutil.virtual_memory().available
        if need > MEMORY_FRACTION * free:
            raise ValueError(f"{what} for {n:,} rows needs {format_size(need)}, more than half the memory "
                             f"free now ({format_size(free)}): {advice}.")

    def _predict_cov(self, X):
        if self._exact:
            return self._exact_model().predict(X, return_cov=True)
        state = self._predict_state(False)
        params, centers = state.params, state.centers
        X = np.asarray(X, dtype=np.float64)
        K = params.cross(X, centers)
        mean = K @ state.coef * state.y_std + state.y_mean
        Phi = _passes.whiten(state.L, K)
        inner = scipy.linalg.solve_triangular(state.LB, Phi.T, lower=True)
        cov = params.cross(X, X) - Phi @ Phi.T + inner.T @ inner
        cov[np.diag_indices_from(cov)] += params.noise
        cov = 0.5 * (cov + cov.T)
        if self._y_ndim == 1:
            return mean[:, 0], cov * state.y_std[0] ** 2
        return mean, np.einsum("ij,k->ijk", cov, state.y_std ** 2)

    def sample_y(self, X, n_samples=1, random_state=0):
        """Draw samples from the predictive distribution at X (its covariance in memory), as scikit-learn.

        Parameters
        ----------
        X : {ndarray, dask array} of shape (n_samples_X, n_features)
        n_samples : int, default=1
        random_state : int, RandomState instance or None, default=0

        Returns
        -------
        y_samples : ndarray of shape (n_samples_X, n_samples) or (n_samples_X, n_targets, n_samples)
        """
        rng = check_random_state(random_state)
        y_mean, y_cov = self.predict(X, return_cov=True)
        if y_mean.ndim == 1:
            return rng.multivariate_normal(y_mean, y_cov, n_samples).T
        return np.hstack([rng.multivariate_normal(y_mean[:, t], y_cov[..., t], n_samples).T[:, np.newaxis]
                          for t in range(y_mean.shape[1])])

    # -- score -----------------------------------------------------------------------

    def _score_in_memory(self, X, y):
        return RegressorMixin.score(self, X, in_memory(y))

    def _score_plan(self, given):
        check_is_fitted(self)
        X = check_input(self, given, reset=False)
        if self._exact:
            return X, _exact_mean_block, self._exact_model(), "r2"
        return X, _passes.predict_mean_block, self._predict_state(False), "r2"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = True
        return tags


def _refuse_sparse(X):
    """Dense data only, in scikit-learn's words (a dask array of sparse blocks too)."""
    if sp.issparse(X) or (isinstance(X, da.Array) and engine.is_sparse_meta(X)):
        raise TypeError("Sparse data was passed for X, but dense data is required. Use '.toarray()' to convert to a "
                        "dense numpy array.")


def _white_noise(kernel) -> float:
    from sklearn.gaussian_process.kernels import WhiteKernel

    found = [k.noise_level for k in _parts(kernel) if isinstance(k, WhiteKernel)]
    return float(sum(found))


def _parts(kernel):
    for name in ("k1", "k2"):
        if hasattr(kernel, name):
            yield from _parts(getattr(kernel, name))
    yield kernel


def _exact_block(X, state):
    model, with_std, t = state
    if not with_std:
        return model.predict(X).reshape(X.shape[0], t)
    mean, std = model.predict(X, return_std=True)
    return np.concatenate([mean.reshape(X.shape[0], t), std.reshape(X.shape[0], t)], axis=1)


def _exact_mean_block(X, model):
    return model.predict(X)

