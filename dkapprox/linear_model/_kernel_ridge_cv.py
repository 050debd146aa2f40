"""KernelRidgeCV and KernelRidgeClassifierCV: gamma, alpha and folds searched in one pass over the data."""

from __future__ import annotations

import logging
import time
from numbers import Integral, Real

import dask
import numpy as np
import scipy.linalg
import scipy.sparse as sp
from sklearn.base import ClassifierMixin, MultiOutputMixin, RegressorMixin
from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS
from sklearn.utils import check_random_state

from .. import _graph, _lazy, _progress, _xp
from .._sklearn_compat import Interval, StrOptions
from .._validation import BlockCheck
from ..nystroem._rows import row_source
from ..nystroem.kernels import Kernel
from . import _cv_stats as cv
from ._kernel_ridge import KernelRidge, KernelRidgeClassifier, _FalkonKernelRidge
from ._map_search import search_results
from ._ridge_cv import fold_key
from ._streaming import (
    StreamedScore,
    check_sample_weight,
    check_Xy,
    classifier_targets,
    distinct_labels,
    target_input,
)
from ._targets import NumericTargets

log = logging.getLogger("dkapprox.linear_model")

REGRESSION_SCORINGS = ("r2", "neg_mean_squared_error", "neg_root_mean_squared_error")
CLASSIFICATION_SCORINGS = ("accuracy",)
#: the default bandwidth grid: these multiples of gamma='scale' (1 / (n_features * X.var()))
DEFAULT_GAMMA_FACTORS = (0.1, 0.3, 1.0, 3.0, 10.0)
#: the largest pass partial (n_gammas x n_folds x m x m float64) a search accepts, in bytes (dask config
#: ``dkapprox.cv-statistics-bytes``): a task holds one and a fold of the tree two
STATISTICS_BYTES = 2 * 2**30


class _KernelRidgeSearch(_FalkonKernelRidge):
    """Shared by both searches: the grid, the folds, the one statistics pass and the driver's solves."""

    _parameter_constraints: dict = {
        "alphas": ["array-like"],
        "gammas": ["array-like", None],
        "kernel": [StrOptions(set(PAIRWISE_KERNEL_FUNCTIONS) - {"precomputed"})],
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "n_centers": [Interval(Integral, 1, None, closed="left"), None],
        "centers": _FalkonKernelRidge._parameter_constraints["centers"],
        "center_params": [dict, None],
        "cv": [Interval(Integral, 2, None, closed="left"), "array-like", "cv_object"],
        "scoring": [str, None],
        "random_state": ["random_state"],
    }
    _scorings: tuple = ()

    def __init__(self, alphas=(1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0), *, gammas=None, kernel="rbf", degree=3, coef0=1,
                 n_centers=None, centers="uniform", center_params=None, cv=5, scoring=None, random_state=None):
        self.alphas = alphas
        self.gammas = gammas
        self.kernel = kernel
        self.degree = degree
        self.coef0 = coef0
        self.n_centers = n_centers
        self.centers = centers
        self.center_params = center_params
        self.cv = cv
        self.scoring = scoring
        self.random_state = random_state

    def _kernel(self) -> Kernel:
        gamma = getattr(self, "gamma_", None)
        return Kernel(self.kernel, tuple(sorted({"gamma": gamma, "degree": self.degree, "coef0": self.coef0}.items())))

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

    def _folds(self, X, lazy, n_samples):
        """``(n_folds, labels or None, label array or None)``: hashed folds for an int cv, else the labels."""
        if isinstance(self.cv, Integral):
            if self.cv > n_samples:
                raise ValueError(f"Cannot have number of folds n_folds={self.cv} greater than the number of "
                                 f"samples: n_samples={n_samples}.")
            return int(self.cv), None, None
        splits = self.cv
        if hasattr(splits, "split") and not hasattr(splits, "ndim"):  # a scikit-learn splitter
            splits = list(splits.split(np.zeros((n_samples, 1))))
        if isinstance(splits, (list, tuple)) and splits and isinstance(splits[0], tuple):
            splits = _labels_of_splits(splits, n_samples)
        given = target_input(splits)
        labels = given.data
        if labels.ndim != 1 or labels.shape[0] != n_samples:
            raise ValueError(f"cv as fold labels must be one label per row of X: got shape {tuple(labels.shape)} "
                             f"for {n_samples} rows.")
        if given.lazy:
            distinct = np.asarray(distinct_labels(labels))  # one pass over the labels (dask's unique: legacy only)
            if not lazy:
                labels = np.asarray(_lazy.compute(labels)[0])
        else:
            labels = np.asarray(labels)
            distinct = np.unique(labels)
            if lazy:
                import dask.array as da

                labels = da.from_array(labels, chunks=(X.chunks[0],))
        if distinct.size < 2:
            raise ValueError(f"cv as fold labels needs at least 2 distinct folds; got {distinct.size}.")
        return int(distinct.size), distinct, labels

    def _check_size(self, n_gammas, n_folds, m):
        limit = int(dask.config.get("dkapprox.cv-statistics-bytes", STATISTICS_BYTES))
        size = n_gammas * n_folds * m * m * 8
        if size > limit:
            most = max(0, int((limit / (8 * n_gammas * n_folds)) ** 0.5))
            raise ValueError(
                f"The search's statistics would take {_size(size)} a task (n_gammas={n_gammas} x "
                f"n_folds={n_folds} x n_centers^2={m}^2 float64), more than dkapprox.cv-statistics-bytes="
                f"{_size(limit)}: use at most {most} centers with this grid, or fewer gammas or folds "
                "(or raise the limit where the workers have the memory).")

    # -- the fit ----------------------------------------------------------------------------------
    def _search(self, X, y, targets, lazy, sample_weight, classes=None):
        """Centers, one statistics pass, the driver's solves and scores; the chosen model's dual_coef_."""
        started = time.perf_counter()
        seconds = {}
        alphas = self._grid("alphas", self.alphas)
        gammas = self._grid("gammas", self.gammas)
        scoring = self._scoring()
        if _xp.namespace(X._meta if lazy else X) is not None:
            raise ValueError(f"{type(self).__name__} runs on NumPy blocks: device arrays (CuPy) are not supported "
                             "yet. Copy X to the host first.")
        passes = 0
        if gammas is None:
            from ..kernel_approximation.rbf import data_variance

            var = float(data_variance(X, type(self).__name__))
            scale = 1.0 / (X.shape[1] * var) if var != 0 else 1.0
            gammas = scale * np.asarray(DEFAULT_GAMMA_FACTORS)
            passes += 1 if lazy else 0
        check = BlockCheck(type(self).__name__)
        rows = row_source(X, check=check if lazy else None)
        n_samples = rows.n_rows
        n_folds, labels, label_array = self._folds(X, lazy, n_samples)
        selector = self._selector(X)
        m = self._n_centers(n_samples, selector)
        self._check_size(gammas.size, n_folds, m)
        params = (("coef0", self.coef0), ("degree", self.degree))
        middle = float(np.sort(gammas)[gammas.size // 2])
        kernel = Kernel(self.kernel, tuple(sorted({**dict(params), "gamma": middle}.items())))
        chosen = selector.select(rows, m, kernel, check_random_state(self.random_state))
        points = chosen.components
        points64 = np.asarray(points.toarray() if sp.issparse(points) else points, dtype=np.float64)
        passes += rows.passes
        seconds["centers"] = time.perf_counter() - started
        weights, constant = check_sample_weight(sample_weight, X, lazy)
        if lazy:
            if any(c != c for c in X.chunks[0]):
                X = _graph.with_row_sizes(X, rows.sizes)
            X, self.input_persisted_ = _lazy.persist_if_fits(X)
        else:
            self.input_persisted_ = False
        arrays = [X, y] + ([] if label_array is None else [label_array]) + ([] if weights is None else [weights])
        t0 = time.perf_counter()
        factors = np.stack([cv.center_factor(self.kernel, params, g, points64) for g in gammas])
        seconds["factors"] = time.perf_counter() - t0
        state = cv.GridState(self.kernel, params, gammas, points64, factors, n_folds, fold_key(self.random_state),
                             labels, targets, weights is not None, check if lazy else None)
        t0 = time.perf_counter()
        G, r, sums, positives, counts = self._pass(arrays, state, lazy, cv.statistics_partial, cv.combine_statistics)
        G = cv.symmetric(G)
        passes += 1
        seconds["statistics"] = time.perf_counter() - t0
        if constant is not None:
            G, r, sums = G * constant, r * constant, sums * np.array([constant, constant, constant])[None, :, None]
        empty = np.flatnonzero(sums[:, 0, 0] <= 0)
        if empty.size:
            raise ValueError(f"Cannot cross-validate n_samples={n_samples} in {n_folds} folds: fold(s) "
                             f"{empty.tolist()} received no rows (or no weight); use fewer folds.")
        if classes is not None:
            self._check_classes(positives, counts, classes)
        t0 = time.perf_counter()
        G_all, r_all = G.sum(axis=1), r.sum(axis=1)
        z = np.empty((gammas.size, n_folds, alphas.size, m, r.shape[3]))  # each candidate's T a
        for g in range(gammas.size):
            for f in range(n_folds):
                z[g, f] = cv.ridge_path(G_all[g] - G[g, f], r_all[g] - r[g, f], alphas)
        seconds["solves"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if classes is None:
            scores = np.empty((gammas.size, alphas.size, n_folds))
            for g in range(gammas.size):
                for f in range(n_folds):
                    for a in range(alphas.size):
                        c = z[g, f, a]  # (m, t)
                        sse = sums[f, 2] - 2 * np.einsum("mt,mt->t", c, r[g, f]) + np.einsum(
                            "mt,mn,nt->t", c, G[g, f], c)
                        scores[g, a, f] = cv.regression_scores(np.maximum(sse, 0.0), sums[f], scoring)
        else:
            # each candidate's a = T^-1 z, (n_gammas, n_folds, m, n_alphas * t): column a * t + target, as
            # fold_predictions_partial reads it
            stacked = np.transpose(z, (0, 1, 3, 2, 4)).reshape(gammas.size, n_folds, m, -1)
            stacked = np.stack([[scipy.linalg.solve_triangular(factors[g], stacked[g, f], check_finite=False)
                                 for f in range(n_folds)] for g in range(gammas.size)])
            scoring_state = cv.GridState(self.kernel, params, gammas, points64, factors, n_folds, state.fold_key,
                                         labels, targets, weights is not None, None, stacked)
            correct, weight = self._pass(arrays, scoring_state, lazy, cv.fold_predictions_partial,
                                         cv.combine_predictions)
            passes += 1
            scores = np.moveaxis(correct / weight[None, :, None], 1, 2)  # (n_gammas, n_alphas, n_folds)
        seconds["scores"] = time.perf_counter() - t0
        self._results(gammas, alphas, scores, sums[:, 0, 0])
        g, a = np.unravel_index(self.best_index_, (gammas.size, alphas.size))
        t0 = time.perf_counter()
        dual = scipy.linalg.solve_triangular(factors[g], cv.ridge_path(G_all[g], r_all[g], [alphas[a]])[0],
                                             check_finite=False)
        seconds["refit"] = time.perf_counter() - t0
        dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
        self.gamma_, self.alpha_ = float(gammas[g]), float(alphas[a])
        self.centers_ = points.astype(dtype) if points.dtype != dtype else points
        self.center_indices_ = chosen.indices
        self.center_passes_ = rows.passes
        self.dual_coef_ = dual.astype(dtype)
        self.passes_ = passes
        self.n_iter_ = 0
        self.n_splits_ = n_folds
        self.route_ = "statistics"
        seconds["total"] = time.perf_counter() - started
        self.phase_seconds_ = seconds
        _progress.news(log, "%s: %d gammas x %d alphas x %d folds in %d passes, %.1f s: best gamma=%g alpha=%g "
                       "(%s %.4g)", type(self).__name__, gammas.size, alphas.size, n_folds, passes, seconds["total"],
                       self.gamma_, self.alpha_, scoring, self.best_score_)
        return self

    @staticmethod
    def _pass(arrays, state, lazy, chunk_fn, combine_fn):
        if not lazy:
            return chunk_fn(0, state, *arrays)
        reduced = _graph.reduce_aligned_rows(arrays, chunk_fn, combine_fn, state, running=True)
        return _lazy.compute(reduced, arrays=arrays[:1])[0]

    @staticmethod
    def _check_classes(positives, counts, classes):
        """Every fold's training rows (those outside it) must hold at least two classes."""
        for f in range(counts.shape[0]):
            pos = positives.sum(axis=0) - positives[f]  # rows of each one-vs-rest column's class
            if positives.shape[1] > 1:
                held = int((pos > 0).sum())
            else:  # two classes, one column: classes_[1] where positive, classes_[0] elsewhere
                held = int(pos[0] > 0) + int(counts.sum() - counts[f] - pos[0] > 0)
            if held < 2:
                raise ValueError(f"The training rows of fold {f} (every row outside it) hold fewer than two "
                                 f"of the classes {np.asarray(classes).tolist()}: use fewer folds, or fold labels "
                                 "that keep every class in each training set.")

    def _results(self, gammas, alphas, scores, fold_weights):
        """``cv_results_`` in scikit-learn's shape (:func:`._map_search.search_results`): gamma slowest."""
        results = search_results([{"gamma": float(g)} for g in gammas], alphas, scores)
        mean = results["mean_test_score"]
        self.cv_results_ = results
        self.best_index_ = int(np.argmax(mean))
        self.best_params_ = results["params"][self.best_index_]
        self.best_score_ = float(mean[self.best_index_])
        self.fold_weights_ = fold_weights


def _size(nbytes):
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.1f} MiB"


def _labels_of_splits(splits, n_samples):
    """Fold labels of ``(train, test)`` splits whose test sets partition the rows (K-fold splitters')."""
    labels = np.full(n_samples, -1)
    for k, (train, test) in enumerate(splits):
        test = np.asarray(test)
        if test.dtype == bool:
            test = np.flatnonzero(test)
        if np.any(labels[test] >= 0):
            raise ValueError("cv's test sets overlap: each row must be held out by exactly one split.")
        labels[test] = k
        train = np.asarray(train)
        if np.setdiff1d(np.arange(n_samples), test).size != np.unique(train).size:
            raise ValueError("cv's splits must train on every row they do not hold out (K-fold splits).")
    if np.any(labels < 0):
        raise ValueError(f"cv's test sets leave {int((labels < 0).sum())} rows out of every fold: each row "
                         "must be held out by exactly one split.")
    return labels


_SEARCH_PARAMETERS = """
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
        the kernel once per gamma.
    degree, coef0 : float
        Of the polynomial and sigmoid kernels, fixed during the search.
    n_centers : int, default=None
        Number of centers ``m``, chosen once for the whole search; None: ``min(1000, n_samples)``.
    centers : {'uniform', 'kmeans', 'leverage', 'rpcholesky'} or array-like, default='uniform'
        As in :class:`KernelRidge`. A kernel-dependent method (leverage, rpcholesky) uses the
        grid's middle gamma.
    center_params : dict, default=None
    cv : int, array-like of shape (n_samples,), K-fold splitter or list of (train, test), default=5
        An int: that many folds, by a seeded hash of the global row index (chunk-invariant; the
        same folds as :class:`RidgeCV` and :class:`HashedKFold` with the same ``random_state``).
        An array (NumPy or dask, aligned with X's rows): each row's fold label, for grouped or
        time-ordered data. A scikit-learn splitter, or its splits, whose test sets partition the
        rows (``KFold``, ``GroupKFold``, ``PredefinedSplit``): read as fold labels (in memory).
    scoring : str, default=None
        @SCORINGS@
    random_state : int, RandomState instance or None, default=None
        Seeds the centers and the fold hash.
"""

_SEARCH_ATTRIBUTES = """
    cv_results_ : dict of ndarrays
        scikit-learn's ``GridSearchCV.cv_results_`` keys: ``params``, ``param_gamma``, ``param_alpha``,
        ``split{k}_test_score``, ``mean_test_score``, ``std_test_score``, ``rank_test_score``. One
        candidate per (gamma, alpha), gamma slowest.
    best_params_ : dict
    best_score_ : float
    best_index_ : int
    gamma_, alpha_ : float
        The chosen candidate's.
    dual_coef_ : ndarray of shape (n_centers,) or (n_centers, n_targets)
        The chosen model refitted on every row (from the same statistics: no further pass).
    centers_, center_indices_, center_passes_ :
        As in :class:`KernelRidge`.
    passes_ : int
        Passes over the data: one for the default grid's 'scale' on dask input, the centers', one for
        the statistics@EXTRA@.
    n_iter_ : int
        0: the statistics route solves each candidate directly, no CG.
    route_ : str
        'statistics': per-fold ``m x m`` statistics, solved on the driver.
    phase_seconds_ : dict
        Seconds spent choosing centers, in the statistics pass, in the solves, scoring and refit.
    n_splits_ : int
    fold_weights_ : ndarray of shape (``n_splits_``,)
        Each fold's total weight (its row count, unweighted).
    input_persisted_, n_features_in_, feature_names_in_ :
        As in :class:`KernelRidge`.
"""

_SEARCH_NOTES = """
    One pass over the data gathers, for every gamma and fold, the fold's ``G_f = K^T W K`` (``m x
    m``) and ``K^T W y``: each block's distances to the centers once, an exponential per gamma, and
    its rows' products added to their own fold's sums. Every (gamma, alpha, fold) candidate is then
    solved on the driver, ``(G - G_f + alpha K_CC) a = r - r_f``, and scored on its held-out fold
    @SCORED@; the chosen model solves ``(G + alpha K_CC) a = r``. The cost is ``n m^2`` multiply-adds
    per gamma, and the statistics take ``n_gammas x n_folds x m^2`` float64 a task (the search
    refuses more than ``dkapprox.cv-statistics-bytes``, 2 GiB, and says how many centers fit).
    Every candidate solved this way is the exact Nystroem kernel ridge solution :class:`KernelRidge`'s
    CG converges to.
"""


class KernelRidgeCV(StreamedScore, MultiOutputMixin, RegressorMixin, _KernelRidgeSearch):
    __doc__ = f"""Kernel ridge with gamma and alpha chosen by K-fold cross-validation, out of core, in one pass.

    The grid search ``GridSearchCV(KernelRidge(kernel, n_centers=m), {{'gamma': gammas, 'alpha':
    alphas}}, cv=...)`` would run as ``n_gammas x n_alphas x n_folds`` whole fits; this reads the
    data once for all of them (plus the centers' passes), and refits the best on every row from the
    same statistics.
    {_SEARCH_PARAMETERS.replace("@SCORINGS@", "'r2' (default), 'neg_mean_squared_error' or "
                                "'neg_root_mean_squared_error', averaged over targets, weighted by "
                                "sample_weight: scores a fold's statistics give exactly.")}
    Attributes
    ----------
    {_SEARCH_ATTRIBUTES.replace("@EXTRA@", "")}
    Notes
    -----
    {_SEARCH_NOTES.replace("@SCORED@", "from the same statistics (its squared error is "
                           "``sum w y^2 - 2 a^T r_f + a^T G_f a``)")}
    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dkapprox.linear_model import KernelRidgeCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20_000, 3))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=20_000)
    >>> X, y = da.from_array(X, chunks=5_000), da.from_array(y, chunks=5_000)
    >>> search = KernelRidgeCV(alphas=[1e-2, 1, 100], gammas=[0.01, 0.5, 20], n_centers=300, random_state=0)
    >>> search.fit(X, y).best_params_
    {{'alpha': 0.01, 'gamma': 0.5}}
    >>> search.passes_, search.cv_results_["mean_test_score"].shape
    (2, (9,))
    >>> round(search.score(X, y), 2)
    0.98
    """
    _scorings = REGRESSION_SCORINGS

    def fit(self, X, y, sample_weight=None):
        """Search the grid (the centers' passes and one pass), then refit the best on every row.

        Parameters
        ----------
        X : {{ndarray, sparse matrix, dask array, zarr array}} of shape (n_samples, n_features)
        y : {{ndarray, dask array}} of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : float or {{ndarray, dask array}} of shape (n_samples,), default=None

        Returns
        -------
        self : object
        """
        self._validate_params()
        X, y, lazy = check_Xy(self, X, y, y_numeric=True, on_host=True)
        n_targets = 1 if y.ndim == 1 else y.shape[1]
        self._search(X, y, NumericTargets(n_targets), lazy, sample_weight)
        if y.ndim == 1:
            self.dual_coef_ = self.dual_coef_.ravel()
        return self

    predict = KernelRidge.predict
    _score_in_memory = KernelRidge._score_in_memory
    _score_plan = KernelRidge._score_plan


class KernelRidgeClassifierCV(StreamedScore, ClassifierMixin, _KernelRidgeSearch):
    __doc__ = f"""KernelRidgeClassifier with gamma and alpha chosen by K-fold cross-validation: two passes.

    One-vs-rest kernel ridge on +1/-1 targets, as :class:`KernelRidgeClassifier`; the statistics pass
    of :class:`KernelRidgeCV`, then one more pass for each held-out row's predicted class under every
    candidate (accuracy is not a function of the statistics).
    {_SEARCH_PARAMETERS.replace("@SCORINGS@", "'accuracy' (default, weighted by sample_weight): the only one.")}
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    {_SEARCH_ATTRIBUTES.replace("@EXTRA@", ", one for the held-out predictions")}
    Notes
    -----
    {_SEARCH_NOTES.replace("@SCORED@", "in a second pass")}
    Examples
    --------
    >>> import dask.array as da
    >>> from sklearn.datasets import load_digits
    >>> from dkapprox.linear_model import KernelRidgeClassifierCV
    >>> X, y = load_digits(return_X_y=True)
    >>> X, y = da.from_array(X / 16, chunks=300), da.from_array(y, chunks=300)
    >>> search = KernelRidgeClassifierCV(alphas=[1e-3, 1e-1], gammas=[0.02, 0.2], n_centers=400, random_state=0)
    >>> search.fit(X, y).best_params_["gamma"]
    0.02
    >>> search.best_score_ > 0.95
    True
    """
    _scorings = CLASSIFICATION_SCORINGS

    def fit(self, X, y, sample_weight=None):
        """Search the grid (the centers' passes and two passes), then refit the best on every row.

        Parameters
        ----------
        X : {{ndarray, sparse matrix, dask array, zarr array}} of shape (n_samples, n_features)
        y : {{ndarray, dask array}} of shape (n_samples,)
            Class labels.
        sample_weight : float or {{ndarray, dask array}} of shape (n_samples,), default=None

        Returns
        -------
        self : object
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

    decision_function = KernelRidgeClassifier.decision_function
    predict = KernelRidgeClassifier.predict
    _score_in_memory = KernelRidgeClassifier._score_in_memory
    _score_plan = KernelRidgeClassifier._score_plan
