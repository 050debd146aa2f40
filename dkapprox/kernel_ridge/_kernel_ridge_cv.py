"""KernelRidgeCV and KernelRidgeClassifierCV: the kernel's parameters, alpha and folds searched in one pass.

The search here chooses the centers and builds the grid (:mod:`._cv_grid`); :mod:`._cv_route` picks the
route, :mod:`._cv_stats_route` or :mod:`._cv_cg_route` scores every candidate and refits the chosen one.
"""

from __future__ import annotations

import logging
import time
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from scipy.stats import rankdata
from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS
from sklearn.utils import check_random_state

from .. import backends, engine, inputs, utils
from ..inputs import BlockCheck, row_source
from ..kernels import Kernel
from ..learning import (
    NumericTargets,
    check_sample_weight,
    check_Xy,
    classifier_targets,
    fold_key,
    search_results,
)
from ..utils import Interval, StrOptions
from . import _cv_stats as cv
from . import _kernel_grid
from ._cv_cg_route import CGRoute
from ._cv_grid import SearchGrid, search_folds
from ._cv_route import PROBE_ABOVE_FLOPS, check_size, choose_route
from ._cv_stats_route import StatisticsRoute
from ._kernel_ridge import _KernelCenters, _KernelRidgeClassifier, _KernelRidgeRegressor

# the route threshold stays readable here, where it was defined before the routes had modules
__all__ = ["PROBE_ABOVE_FLOPS", "KernelRidgeCV", "KernelRidgeClassifierCV"]

log = logging.getLogger("dkapprox.linear_model")

REGRESSION_SCORINGS = ("r2", "neg_mean_squared_error", "neg_root_mean_squared_error")
CLASSIFICATION_SCORINGS = ("accuracy",)
#: the default bandwidth grid: these multiples of gamma='scale' (1 / (n_features * X.var()))
DEFAULT_GAMMA_FACTORS = (0.1, 0.3, 1.0, 3.0, 10.0)


class _KernelRidgeSearch(_KernelCenters):
    """Shared by both searches: the grid's parameters, the centers, the grid, the route, the results."""

    _parameter_constraints: dict = {
        **_KernelCenters._parameter_constraints,
        "alphas": ["array-like"],
        "gammas": ["array-like", None],
        "kernel": [StrOptions(set(PAIRWISE_KERNEL_FUNCTIONS) - {"precomputed"})],
        "cv": [Interval(Integral, 2, None, closed="left"), "array-like", "cv_object"],
        "scoring": [str, None],
        "route": [StrOptions({"auto", "statistics", "cg"})],
        "halving_factor": [Interval(Real, 1, None, closed="neither"), None],
    }
    _scorings: tuple = ()

    def __init__(self, alphas=(1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0), *, gammas=None, kernel="rbf", degree=3, coef0=1,
                 kernel_params=None, n_centers=None, centers="uniform", center_params=None, cv=5, scoring=None,
                 route="auto", tol=1e-4, max_iter=100, halving_factor=3, random_state=None):
        super().__init__(kernel=kernel, degree=degree, coef0=coef0, kernel_params=kernel_params, n_centers=n_centers,
                         centers=centers, center_params=center_params, tol=tol, max_iter=max_iter,
                         random_state=random_state)
        self.alphas = alphas
        self.gammas = gammas
        self.cv = cv
        self.scoring = scoring
        self.route = route
        self.halving_factor = halving_factor

    def _validate_params(self):
        """scikit-learn's check of each parameter, then ``kernel_params``'s grid against the kernel: before any
        data is read (and the command line's usage errors come from here)."""
        super()._validate_params()
        _kernel_grid.kernel_points(self.kernel, self.kernel_params)

    def _kernel(self) -> Kernel:
        """The chosen kernel (a model saved before ``degree_`` and ``coef0_`` existed: the fixed ones)."""
        params = {"gamma": getattr(self, "gamma_", None), "degree": getattr(self, "degree_", self.degree),
                  "coef0": getattr(self, "coef0_", self.coef0)}
        return Kernel(self.kernel, tuple(sorted(params.items())))

    # -- the grid -------------------------------------------------------------------------------
    def _grid(self, name, values):
        grid = np.atleast_1d(np.asarray(values, dtype=np.float64)).ravel() if values is not None else None
        if grid is not None and (grid.size == 0 or not np.all(np.isfinite(grid)) or np.any(grid <= 0)):
            raise ValueError(f"{name} must be a non-empty list of positive numbers; got {values!r}.")
        return grid

    def _scoring(self):
        scoring = self.scoring or self._scorings[0]
        if scoring not in self._scorings:
            raise ValueError(f"scoring={scoring!r} cannot be computed from streamed statistics by "
                             f"{type(self).__name__}; the scorings it offers are {', '.join(self._scorings)}.")
        return scoring

    # -- the fit ----------------------------------------------------------------------------------
    def _search(self, X, y, targets, lazy, sample_weight, classes=None):
        """Centers, then the statistics route or the CG route (chosen by measured cost); the chosen model."""
        started = time.perf_counter()
        seconds = {}
        alphas = self._grid("alphas", self.alphas)
        gammas = self._grid("gammas", self.gammas)
        kernel_points = _kernel_grid.kernel_points(self.kernel, self.kernel_params)
        scoring = self._scoring()
        if backends.namespace(X._meta if lazy else X) is not None:
            raise ValueError(f"{type(self).__name__} runs on NumPy blocks: device arrays (CuPy) are not supported "
                             "yet. Copy X to the host first.")
        passes = 0
        if gammas is None:
            from ..kernel_approximation import data_variance

            var = float(data_variance(X, type(self).__name__))
            scale = 1.0 / (X.shape[1] * var) if var != 0 else 1.0
            gammas = scale * np.asarray(DEFAULT_GAMMA_FACTORS)
            passes += 1 if lazy else 0
        check = BlockCheck(type(self).__name__)
        rows = row_source(X, check=check if lazy else None)
        n_samples = rows.n_rows
        n_folds, labels, label_array = search_folds(self.cv, X, lazy, n_samples)
        selector = self._selector(X)
        m = self._n_centers(n_samples, selector)
        fixed = {"coef0": self.coef0, "degree": self.degree}
        candidates, kernels = _kernel_grid.kernel_candidates(self.kernel, fixed, kernel_points, gammas)
        statistics_fit = check_size(self.route, self.kernel_params, len(kernels), n_folds, m, alphas.size,
                                    targets.n_targets)
        middle = {**kernel_points[len(kernel_points) // 2], "gamma": float(np.sort(gammas)[gammas.size // 2])}
        kernel = _kernel_grid.kernel_of(self.kernel, fixed, middle)
        chosen = selector.select(rows, m, kernel, check_random_state(self.random_state))
        points = chosen.components
        points64 = np.asarray(points.toarray() if sp.issparse(points) else points, dtype=np.float64)
        passes += rows.passes
        seconds["centers"] = time.perf_counter() - started
        weights, constant = check_sample_weight(sample_weight, X, lazy)
        if lazy:
            if any(c != c for c in X.chunks[0]):
                X = engine.with_row_sizes(X, rows.sizes)
            X, self.input_persisted_ = inputs.persist_if_fits(X)
        else:
            self.input_persisted_ = False
        arrays = [X, y] + ([] if label_array is None else [label_array]) + ([] if weights is None else [weights])
        t0 = time.perf_counter()
        factors = np.stack([cv.center_factor(k, points64) for k in kernels])
        seconds["factors"] = time.perf_counter() - t0
        dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
        grid = SearchGrid(kernels=kernels, candidates=candidates, alphas=alphas, points=points64, factors=factors,
                          n_folds=n_folds, fold_key=fold_key(self.random_state), labels=labels, targets=targets,
                          weighted=weights is not None, constant=1.0 if constant is None else float(constant),
                          scoring=scoring, classes=classes, dtype=dtype)
        t0 = time.perf_counter()
        self.route_, self.route_seconds_ = choose_route(self.route, grid, statistics_fit, n_samples, self.max_iter)
        seconds["route"] = time.perf_counter() - t0
        check = check if lazy else None
        if self.route_ == "statistics":
            route = StatisticsRoute(grid, arrays, lazy, check, n_samples, seconds)
        else:
            route = CGRoute(grid, arrays, lazy, check, n_samples, seconds, name=type(self).__name__, tol=self.tol,
                            max_iter=self.max_iter, halving_factor=self.halving_factor)
        self._results(candidates, alphas, route.search())
        g, a = np.unravel_index(self.best_index_, (len(kernels), alphas.size))
        dual = route.refit(g, a)
        best = dict(kernels[g].params)
        self.gamma_, self.alpha_ = float(best["gamma"]), float(alphas[a])
        self.degree_, self.coef0_ = best["degree"], best["coef0"]
        self.centers_ = points.astype(dtype) if points.dtype != dtype else points
        self.center_indices_ = chosen.indices
        self.center_passes_ = rows.passes
        self.dual_coef_ = dual.astype(dtype)
        self.passes_ = passes + route.passes
        self.n_iter_ = route.n_iter
        self.n_splits_ = n_folds
        seconds["total"] = time.perf_counter() - started
        self.phase_seconds_ = seconds
        points = "" if self.kernel_params is None else f" x {len(kernel_points)} kernel_params points"
        utils.news(log, "%s: %d gammas%s x %d alphas x %d folds by %s in %d passes, %.1f s: best %s, alpha=%g "
                       "(%s %.4g)", type(self).__name__, gammas.size, points, alphas.size, n_folds, self.route_,
                       self.passes_, seconds["total"], _kernel_grid.shown(candidates[g]), self.alpha_, scoring,
                       self.best_score_)
        return self

    def _results(self, candidates, alphas, found):
        """``cv_results_`` in scikit-learn's shape (``search_results``) from a route's :class:`._cv_grid.Found`:
        the kernel candidates (dicts of gamma and the searched kernel_params) slowest, in their order.

        With the CG route, ``found.dropped`` (n_kernels, n_alphas) holds the iteration after which successive
        halving dropped each candidate (0: kept) and ``found.iterations`` the CG iterations its fold columns
        ran. A dropped candidate's scores are those of its last iterates; it ranks after every kept one
        (as scikit-learn's halving searches choose among the last round), and only a kept one is chosen.
        """
        n = len(candidates) * alphas.size
        dropped = np.zeros(n, dtype=int) if found.dropped is None else np.asarray(found.dropped).reshape(n)
        results = search_results(list(candidates), alphas, found.scores)
        mean = results["mean_test_score"]
        kept = dropped == 0
        rank = np.empty(n, dtype=np.int32)
        rank[kept] = rankdata(-mean[kept], method="min")
        if (~kept).any():
            rank[~kept] = kept.sum() + rankdata(-mean[~kept], method="min")
        results["rank_test_score"] = rank
        results["dropped_at_iteration"] = dropped
        results["n_iterations"] = (np.zeros(n, dtype=int) if found.iterations is None
                                   else np.asarray(found.iterations).reshape(n))
        self.cv_results_ = results
        self.best_index_ = int(np.flatnonzero(kept)[np.argmax(mean[kept])])
        self.best_params_ = results["params"][self.best_index_]
        self.best_score_ = float(mean[self.best_index_])
        self.fold_weights_ = found.fold_weights


class KernelRidgeCV(_KernelRidgeRegressor, _KernelRidgeSearch):
    """Kernel ridge with gamma, alpha (and degree, coef0) chosen by K-fold cross-validation in one pass.

    The grid search ``GridSearchCV(KernelRidge(kernel, n_centers=m), {'gamma': gammas, 'alpha':
    alphas, **kernel_params}, cv=...)`` would run as ``n_gammas x n_alphas x n_folds`` whole fits
    (times the points of ``kernel_params``, a grid of degree or coef0); this reads the data once for
    all of them (plus the centers' passes), and refits the best on every row from the same statistics.

    Parameters
    ----------
    alphas : array-like of shape (n_alphas,), default=(1e-3, 1e-2, 1e-1, 1, 10, 100)
        Ridge strengths to try (positive), scikit-learn's KernelRidge ``alpha``.
    gammas : array-like of shape (n_gammas,), default=None
        Bandwidths to try (positive). None: ``gamma='scale'`` (``1 / (n_features * X.var())``, one
        pass over dask input) times 0.1, 0.3, 1, 3 and 10. Why 'scale' and not the median distance
        of a sample: it is exact and chunk-invariant, costs one pass that reads each block once, and
        for standardized features the median heuristic ``1 / median |x - x'|^2`` is ``1 / (2 d)``,
        half of it: within the grid's two decades.
    kernel : str, default='rbf'
        A kernel of ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS`` that takes ``gamma``.
        rbf and laplacian share one distance computation across the gammas; the others compute
        the kernel once per kernel candidate (a gamma, with a point of ``kernel_params``).
    degree, coef0 : float
        Of the polynomial and sigmoid kernels, fixed during the search unless ``kernel_params``
        names them (its values then replace these).
    kernel_params : dict of str to list, default=None
        A grid of the kernel's other parameters to search, as ``GridSearchCV``'s ``param_grid``:
        ``'degree'`` (poly) and ``'coef0'`` (poly, sigmoid) to non-empty lists of finite numbers,
        e.g. ``{'degree': [2, 3], 'coef0': [0, 1]}``. Its points, in ``ParameterGrid``'s order,
        are crossed with ``gammas``: each (point, gamma) is a kernel candidate, each candidate's
        kernel computed once a block, its factor once. A name the kernel does not take, and
        ``'gamma'`` (the grid is ``gammas``), are refused. None: the fixed ``degree`` and ``coef0``.
        Not scikit-learn ``KernelRidge``'s ``kernel_params`` (a callable kernel's fixed arguments):
        the search takes named kernels only.
    n_centers : int, default=None
        Number of centers ``m``, chosen once for the whole search; None: ``min(1000, n_samples)``.
    centers : {'uniform', 'kmeans', 'leverage', 'rpcholesky'} or array-like, default='uniform'
        As in :class:`KernelRidge`. A kernel-dependent method (leverage, rpcholesky) uses the
        grid's middle gamma (with ``kernel_params``' middle point).
    center_params : dict, default=None
        Options of the center method (Nystroem's ``landmark_params``).
    cv : int, array-like of shape (n_samples,), K-fold splitter or list of (train, test), default=5
        An int: that many folds, by a seeded hash of the global row index (chunk-invariant; the
        same folds as :class:`RidgeCV` and :class:`HashedKFold` with the same ``random_state``).
        An array (NumPy or dask, aligned with X's rows): each row's fold label, for grouped or
        time-ordered data. A scikit-learn splitter, or its splits, whose test sets partition the
        rows (``KFold``, ``GroupKFold``, ``PredefinedSplit``): read as fold labels (in memory).
    scoring : str, default=None
        'r2' (default), 'neg_mean_squared_error' or 'neg_root_mean_squared_error', averaged over targets,
        weighted by sample_weight: scores a fold's statistics give exactly.
    route : {'auto', 'statistics', 'cg'}, default='auto'
        How every candidate is solved. 'statistics': one pass of per-fold ``m x m`` statistics, every
        candidate solved exactly on the driver (``2 n m^2`` multiply-adds a kernel candidate). 'cg':
        Falkon's CG with every candidate's fold columns in the same passes (about ``4 n m`` a column
        and iteration), losing candidates dropped by successive halving. 'auto': the statistics route when
        its pass is small (under 2e10 multiply-adds) or, when its statistics would not fit
        ``dkapprox.cv-statistics-bytes``, CG; otherwise the one whose block functions, timed on the
        driver over the same rows, cost less (``route_seconds_``).
    tol : float, default=1e-4
        The CG route's relative residual per column, as :class:`KernelRidge`'s ``tol``.
    max_iter : int, default=100
        The CG route's iterations at most, for the search and the chosen model together.
    halving_factor : float > 1 or None, default=3
        The CG route's successive halving: after 4, 8, 16, ... iterations, of the candidates whose
        scored iterates have every fold's relative residual at most 0.05 (*judged*), the best
        ``1 / halving_factor`` run on; an unjudged candidate is never dropped (an early iterate of a
        small alpha scores far below its solution). None: every candidate runs to ``tol``.
    random_state : int, RandomState instance or None, default=None
        Seeds the centers and the fold hash.

    Attributes
    ----------
    cv_results_ : dict of ndarrays
        scikit-learn's ``GridSearchCV.cv_results_`` keys: ``params``, ``param_gamma``, ``param_alpha``
        (and ``param_degree``, ``param_coef0`` for the names of ``kernel_params``),
        ``split{k}_test_score``, ``mean_test_score``, ``std_test_score``, ``rank_test_score``. One
        candidate per (kernel_params point, gamma, alpha), the point slowest, alpha fastest. Also
        ``n_iterations`` (the CG iterations each candidate's fold columns ran; 0 on the statistics
        route) and ``dropped_at_iteration`` (the iteration after which halving dropped it, 0 if
        kept). A dropped candidate's scores are those of its last iterates, and it ranks after every
        kept one.
    best_params_ : dict
        The chosen candidate's parameters: ``alpha``, ``gamma`` and the names of ``kernel_params``.
    best_score_ : float
        Mean over folds of the chosen candidate's score (``scoring``).
    best_index_ : int
        Index of the chosen candidate in ``cv_results_``.
    gamma_ : float
        The chosen candidate's gamma.
    alpha_ : float
        The chosen candidate's alpha.
    degree_ : float
        The chosen candidate's kernel's degree (the fixed ``degree`` where ``kernel_params`` does not name it).
    coef0_ : float
        The chosen candidate's kernel's coef0 (the fixed ``coef0`` where ``kernel_params`` does not name it).
    dual_coef_ : ndarray of shape (n_centers,) or (n_centers, n_targets)
        The chosen model refitted on every row (by the statistics route from the same statistics, no further
        pass): ``predict(X) = k(X, centers_) @ dual_coef_``, :class:`KernelRidge`'s model with ``alpha=alpha_,
        kernel=kernel, gamma=gamma_, degree=degree_, coef0=coef0_`` on ``centers_``.
    centers_ : ndarray or sparse matrix of shape (n_centers, n_features)
        The centers, in X's dtype, chosen once for the whole search.
    center_indices_ : ndarray of shape (n_centers,), dtype int64
        Global row index of each center (-1 for given centers; the seed row of a k-means centroid).
    center_passes_ : int
        Passes over the data the choice of the centers made (part of ``passes_``).
    passes_ : int
        Passes over the data: one for the default grid's 'scale' on dask input, the centers', then the
        statistics route's one for the statistics, or the CG route's one for the right-hand sides, one an
        iteration and one for the last iterates' scores.
    n_iter_ : int
        CG iterations (the search's and the chosen model's after it); 0 on the statistics route,
        which solves each candidate directly.
    route_ : str
        'statistics' or 'cg': the route taken.
    route_seconds_ : dict
        route='auto' with a probe: each route's estimated seconds for the whole data in one process (the probe's
        per row times n_samples); empty otherwise.
    phase_seconds_ : dict
        Seconds spent choosing centers, factoring, choosing the route, then in the statistics pass, the
        solves, scoring and refit (statistics), or the first pass, the search and the refit (CG).
    n_splits_ : int
        Number of folds.
    fold_weights_ : ndarray of shape (``n_splits_``,)
        Each fold's total weight (its row count, unweighted).
    input_persisted_ : bool
        Whether the fit kept a dask input in memory for its passes, as :class:`KernelRidge` does.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during ``fit``; only for input with string feature names.

    Notes
    -----
    One pass over the data gathers, for every kernel candidate (a gamma, with a point of
    ``kernel_params``) and fold, the fold's ``G_f = K^T W K`` (``m x m``) and ``K^T W y``: each
    block's distances to the centers once (rbf, laplacian; other kernels once a candidate), an
    exponential per gamma, and its rows' products added to their own fold's sums. Every (kernel,
    alpha, fold) candidate is then solved on the driver, ``(G - G_f + alpha K_CC) a = r - r_f``, and
    scored on its held-out fold from the same statistics (its squared error is ``sum w y^2 - 2 a^T r_f +
    a^T G_f a``); the chosen model solves ``(G + alpha K_CC) a = r``. The cost is ``n m^2`` multiply-adds
    per kernel candidate, and the statistics take ``n_kernels x n_folds x m^2`` float64 a task
    (``n_kernels``: the gammas times the points of ``kernel_params``; the search refuses more than
    ``dkapprox.cv-statistics-bytes``, 2 GiB, and says how many centers fit).
    Every candidate solved this way is the exact Nystroem kernel ridge solution :class:`KernelRidge`'s
    CG converges to.

    The CG route (``route='cg'``, or 'auto' where it measures cheaper) solves the same problems by
    Falkon's preconditioned CG (:class:`KernelRidge`'s), each kernel candidate's columns (every alpha
    and fold, and the all-rows problem of each candidate, which becomes the chosen model) advanced
    together: a pass forms each kernel's slice once for all its columns, and scores every candidate's
    previous iterates on its held-out rows on the way. Its cost is about ``(4 (n_folds + 1) + 2)
    n_alphas n m`` multiply-adds a kernel candidate and iteration while every candidate runs;
    converged and dropped candidates cost nothing more.

    Examples
    --------
    >>> import dask.array as da
    >>> from sklearn.datasets import make_friedman1
    >>> from dkapprox.linear_model import KernelRidgeCV
    >>> X, y = make_friedman1(n_samples=20_000, noise=0.5, random_state=0)
    >>> X, y = da.from_array(X, chunks=5_000), da.from_array(y, chunks=5_000)
    >>> grid = dict(alphas=[1e-3, 1e-1, 10], gammas=[0.1, 1, 10], n_centers=300, random_state=0)
    >>> search = KernelRidgeCV(**grid).fit(X, y)
    >>> search.route_, search.passes_, search.best_params_
    ('statistics', 2, {'alpha': 0.001, 'gamma': 0.1})
    >>> by_cg = KernelRidgeCV(route="cg", tol=1e-6, **grid).fit(X, y)
    >>> by_cg.best_params_ == search.best_params_, by_cg.cv_results_["dropped_at_iteration"][by_cg.best_index_]
    (True, np.int64(0))
    >>> round(search.score(X, y), 2), round(by_cg.score(X, y), 2)
    (0.98, 0.98)

    A polynomial kernel's degree searched with its gamma and alpha, in the same one pass:

    >>> poly = KernelRidgeCV(alphas=[1e-3, 1e-1], gammas=[0.1, 1], kernel="poly", kernel_params={"degree": [2, 3]},
    ...                      n_centers=300, random_state=0).fit(X, y)
    >>> poly.best_params_, poly.degree_, poly.passes_
    ({'alpha': 0.001, 'degree': 3, 'gamma': 1.0}, 3, 2)

    """
    _scorings = REGRESSION_SCORINGS

    def fit(self, X, y, sample_weight=None):
        """Search the grid (by either route), then refit the best on every row.

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
        X, y, lazy = check_Xy(self, X, y, y_numeric=True, on_host=True)
        self._search(X, y, NumericTargets.of(y), lazy, sample_weight)
        if y.ndim == 1:
            self.dual_coef_ = self.dual_coef_.ravel()
        return self



class KernelRidgeClassifierCV(_KernelRidgeClassifier, _KernelRidgeSearch):
    """KernelRidgeClassifier with gamma and alpha chosen by K-fold cross-validation: two passes.

    One-vs-rest kernel ridge on +1/-1 targets, as :class:`KernelRidgeClassifier`; the statistics pass
    of :class:`KernelRidgeCV`, then one more pass for each held-out row's predicted class under every
    candidate (accuracy is not a function of the statistics).

    Parameters
    ----------
    alphas : array-like of shape (n_alphas,), default=(1e-3, 1e-2, 1e-1, 1, 10, 100)
        Ridge strengths to try (positive), scikit-learn's KernelRidge ``alpha``.
    gammas : array-like of shape (n_gammas,), default=None
        Bandwidths to try (positive). None: ``gamma='scale'`` (``1 / (n_features * X.var())``, one
        pass over dask input) times 0.1, 0.3, 1, 3 and 10. Why 'scale' and not the median distance
        of a sample: it is exact and chunk-invariant, costs one pass that reads each block once, and
        for standardized features the median heuristic ``1 / median |x - x'|^2`` is ``1 / (2 d)``,
        half of it: within the grid's two decades.
    kernel : str, default='rbf'
        A kernel of ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS`` that takes ``gamma``.
        rbf and laplacian share one distance computation across the gammas; the others compute
        the kernel once per kernel candidate (a gamma, with a point of ``kernel_params``).
    degree, coef0 : float
        Of the polynomial and sigmoid kernels, fixed during the search unless ``kernel_params``
        names them (its values then replace these).
    kernel_params : dict of str to list, default=None
        A grid of the kernel's other parameters to search, as ``GridSearchCV``'s ``param_grid``:
        ``'degree'`` (poly) and ``'coef0'`` (poly, sigmoid) to non-empty lists of finite numbers,
        e.g. ``{'degree': [2, 3], 'coef0': [0, 1]}``. Its points, in ``ParameterGrid``'s order,
        are crossed with ``gammas``: each (point, gamma) is a kernel candidate, each candidate's
        kernel computed once a block, its factor once. A name the kernel does not take, and
        ``'gamma'`` (the grid is ``gammas``), are refused. None: the fixed ``degree`` and ``coef0``.
        Not scikit-learn ``KernelRidge``'s ``kernel_params`` (a callable kernel's fixed arguments):
        the search takes named kernels only.
    n_centers : int, default=None
        Number of centers ``m``, chosen once for the whole search; None: ``min(1000, n_samples)``.
    centers : {'uniform', 'kmeans', 'leverage', 'rpcholesky'} or array-like, default='uniform'
        As in :class:`KernelRidge`. A kernel-dependent method (leverage, rpcholesky) uses the
        grid's middle gamma (with ``kernel_params``' middle point).
    center_params : dict, default=None
        Options of the center method (Nystroem's ``landmark_params``).
    cv : int, array-like of shape (n_samples,), K-fold splitter or list of (train, test), default=5
        An int: that many folds, by a seeded hash of the global row index (chunk-invariant; the
        same folds as :class:`RidgeCV` and :class:`HashedKFold` with the same ``random_state``).
        An array (NumPy or dask, aligned with X's rows): each row's fold label, for grouped or
        time-ordered data. A scikit-learn splitter, or its splits, whose test sets partition the
        rows (``KFold``, ``GroupKFold``, ``PredefinedSplit``): read as fold labels (in memory).
    scoring : str, default=None
        'accuracy' (default, weighted by sample_weight): the only one.
    route : {'auto', 'statistics', 'cg'}, default='auto'
        How every candidate is solved. 'statistics': one pass of per-fold ``m x m`` statistics, every
        candidate solved exactly on the driver (``2 n m^2`` multiply-adds a kernel candidate). 'cg':
        Falkon's CG with every candidate's fold columns in the same passes (about ``4 n m`` a column
        and iteration), losing candidates dropped by successive halving. 'auto': the statistics route when
        its pass is small (under 2e10 multiply-adds) or, when its statistics would not fit
        ``dkapprox.cv-statistics-bytes``, CG; otherwise the one whose block functions, timed on the
        driver over the same rows, cost less (``route_seconds_``).
    tol : float, default=1e-4
        The CG route's relative residual per column, as :class:`KernelRidge`'s ``tol``.
    max_iter : int, default=100
        The CG route's iterations at most, for the search and the chosen model together.
    halving_factor : float > 1 or None, default=3
        The CG route's successive halving: after 4, 8, 16, ... iterations, of the candidates whose
        scored iterates have every fold's relative residual at most 0.05 (*judged*), the best
        ``1 / halving_factor`` run on; an unjudged candidate is never dropped (an early iterate of a
        small alpha scores far below its solution). None: every candidate runs to ``tol``.
    random_state : int, RandomState instance or None, default=None
        Seeds the centers and the fold hash.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    cv_results_ : dict of ndarrays
        scikit-learn's ``GridSearchCV.cv_results_`` keys: ``params``, ``param_gamma``, ``param_alpha``
        (and ``param_degree``, ``param_coef0`` for the names of ``kernel_params``),
        ``split{k}_test_score``, ``mean_test_score``, ``std_test_score``, ``rank_test_score``. One
        candidate per (kernel_params point, gamma, alpha), the point slowest, alpha fastest. Also
        ``n_iterations`` (the CG iterations each candidate's fold columns ran; 0 on the statistics
        route) and ``dropped_at_iteration`` (the iteration after which halving dropped it, 0 if
        kept). A dropped candidate's scores are those of its last iterates, and it ranks after every
        kept one.
    best_params_ : dict
        The chosen candidate's parameters: ``alpha``, ``gamma`` and the names of ``kernel_params``.
    best_score_ : float
        Mean over folds of the chosen candidate's accuracy.
    best_index_ : int
        Index of the chosen candidate in ``cv_results_``.
    gamma_ : float
        The chosen candidate's gamma.
    alpha_ : float
        The chosen candidate's alpha.
    degree_ : float
        The chosen candidate's kernel's degree (the fixed ``degree`` where ``kernel_params`` does not name it).
    coef0_ : float
        The chosen candidate's kernel's coef0 (the fixed ``coef0`` where ``kernel_params`` does not name it).
    dual_coef_ : ndarray of shape (n_centers,) or (n_centers, n_classes)
        The chosen model refitted on every row, one column per class (one, raveled, for two classes):
        :class:`KernelRidgeClassifier`'s model with ``alpha=alpha_, kernel=kernel, gamma=gamma_,
        degree=degree_, coef0=coef0_`` on ``centers_``.
    centers_ : ndarray or sparse matrix of shape (n_centers, n_features)
        The centers, in X's dtype, chosen once for the whole search.
    center_indices_ : ndarray of shape (n_centers,), dtype int64
        Global row index of each center (-1 for given centers; the seed row of a k-means centroid).
    center_passes_ : int
        Passes over the data the choice of the centers made (part of ``passes_``).
    passes_ : int
        Passes over the data: one for the default grid's 'scale' on dask input, the centers', then the
        statistics route's one for the statistics and one for the held-out predictions, or the CG route's
        one for the right-hand sides, one an iteration and one for the last iterates' scores.
    n_iter_ : int
        CG iterations (the search's and the chosen model's after it); 0 on the statistics route,
        which solves each candidate directly.
    route_ : str
        'statistics' or 'cg': the route taken.
    route_seconds_ : dict
        route='auto' with a probe: each route's estimated seconds for the whole data in one process (the probe's
        per row times n_samples); empty otherwise.
    phase_seconds_ : dict
        Seconds spent choosing centers, factoring, choosing the route, then in the statistics pass, the
        solves, scoring and refit (statistics), or the first pass, the search and the refit (CG).
    n_splits_ : int
        Number of folds.
    fold_weights_ : ndarray of shape (``n_splits_``,)
        Each fold's total weight (its row count, unweighted).
    input_persisted_ : bool
        Whether the fit kept a dask input in memory for its passes, as :class:`KernelRidge` does.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during ``fit``; only for input with string feature names.

    Notes
    -----
    One pass over the data gathers, for every kernel candidate (a gamma, with a point of
    ``kernel_params``) and fold, the fold's ``G_f = K^T W K`` (``m x m``) and ``K^T W y``: each
    block's distances to the centers once (rbf, laplacian; other kernels once a candidate), an
    exponential per gamma, and its rows' products added to their own fold's sums. Every (kernel,
    alpha, fold) candidate is then solved on the driver, ``(G - G_f + alpha K_CC) a = r - r_f``, and
    scored on its held-out fold in a second pass; the chosen model solves ``(G + alpha K_CC) a = r``. The
    cost is ``n m^2`` multiply-adds per kernel candidate, and the statistics take ``n_kernels x n_folds x
    m^2`` float64 a task (``n_kernels``: the gammas times the points of ``kernel_params``; the search
    refuses more than ``dkapprox.cv-statistics-bytes``, 2 GiB, and says how many centers fit).
    Every candidate solved this way is the exact Nystroem kernel ridge solution :class:`KernelRidge`'s
    CG converges to.

    The CG route (``route='cg'``, or 'auto' where it measures cheaper) solves the same problems by
    Falkon's preconditioned CG (:class:`KernelRidge`'s), each kernel candidate's columns (every alpha
    and fold, and the all-rows problem of each candidate, which becomes the chosen model) advanced
    together: a pass forms each kernel's slice once for all its columns, and scores every candidate's
    previous iterates on its held-out rows on the way. Its cost is about ``(4 (n_folds + 1) + 2)
    n_alphas n m`` multiply-adds a kernel candidate and iteration while every candidate runs;
    converged and dropped candidates cost nothing more.

    Examples
    --------
    >>> import dask.array as da
    >>> from sklearn.datasets import load_digits
    >>> from dkapprox.linear_model import KernelRidgeClassifierCV
    >>> digits = load_digits()
    >>> X = da.from_array(digits.data / 16, chunks=300)
    >>> y = da.from_array(digits.target, chunks=300)
    >>> search = KernelRidgeClassifierCV(alphas=[1e-3, 1e-1], gammas=[0.02, 0.2], n_centers=400, random_state=0)
    >>> search.fit(X, y).best_params_["gamma"]
    0.02
    >>> search.best_score_ > 0.95
    True

    """
    _scorings = CLASSIFICATION_SCORINGS

    def fit(self, X, y, sample_weight=None):
        """Search the grid (by either route), then refit the best on every row.

        The statistics route reads the data once more for the held-out classes.

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
        if self._binarizer is not None:
            raise ValueError(f"{type(self).__name__} takes class labels (1-D y); multilabel targets are not "
                             "supported: use KernelRidgeClassifier with a chosen gamma and alpha.")
        self._search(X, y, targets, lazy, sample_weight, classes=self.classes_)
        if self.dual_coef_.shape[1] == 1:
            self.dual_coef_ = self.dual_coef_.ravel()
        return self

