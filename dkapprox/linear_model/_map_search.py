"""FeatureMapRidgeCV: a grid of a feature map's parameters and of ridge's alpha, every candidate in one pass.

Each candidate feature map (a clone of the transformer with one point of the grid's parameters) is
fitted as it normally fits; then one pass over the row blocks maps each block by every candidate's
block function and gathers each candidate's per-fold statistics (:mod:`._moments`, the folds of
:class:`RidgeCV`). Every (map, alpha, fold) is scored on the driver from those statistics, exactly as
:class:`RidgeCV` scores its alphas, and the best map's ridge is refitted from the same statistics.
"""

from __future__ import annotations

import math
import time
from numbers import Integral

import dask
import numpy as np
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin, clone
from sklearn.model_selection import ParameterGrid
from sklearn.pipeline import make_pipeline
from sklearn.utils import get_tags
from sklearn.utils.validation import check_is_fitted

from ..learning import (
    STATISTICS_BYTES,
    NumericTargets,
    check_Xy,
    fold_key,
    gather_moments,
    moments_nbytes,
    pool_folds,
    search_results,
)
from ..utils import HasMethods, Interval, StrOptions, format_size
from ._ridge import Ridge
from ._ridge_cv import SCORINGS, check_folds, cv_scores


class FeatureMapRidgeCV(MultiOutputMixin, RegressorMixin, BaseEstimator):
    """Grid search over a feature map's parameters and ridge's alpha: every candidate in one pass.

    What ``GridSearchCV(make_pipeline(transformer, Ridge()), {<map parameters>, 'ridge__alpha':
    alphas}, cv=HashedKFold(n_folds, random_state=...))`` computes with a fit per candidate and fold,
    from one pass over the data: each candidate map is fitted as it fits alone (a data-independent
    map such as :class:`~dkapprox.RBFSampler` reads nothing; :class:`~dkapprox.Nystroem` reads its
    landmarks), then every row block is read once and mapped by every candidate, and each candidate's
    per-fold statistics of its features are gathered, as :class:`RidgeCV` gathers those of its input.
    Every alpha and fold of every candidate is then scored on the driver, and the best candidate's
    ridge is refitted from the same statistics.

    One difference from that ``GridSearchCV``: each candidate's map is fitted once on all rows, not
    once per training fold (``GridSearchCV`` refits the pipeline's transformer on each fold's
    training rows). For maps whose fit reads no data (random Fourier features with a numeric gamma,
    random projections) the two are the same; for data-dependent ones (Nystroem's landmarks, gamma
    ``'scale'``) the held-out rows may have been seen by the map's fit, not by the ridge.

    Parameters
    ----------
    transformer : dkapprox feature map
        An unfitted dkapprox transformer (:class:`~dkapprox.RBFSampler`, :class:`~dkapprox.Nystroem`,
        :class:`~dkapprox.RandomFourierFeatures`, ...), cloned for each candidate.
    param_grid : dict of str to list
        The transformer's parameters to search (its ``get_params`` names), each with a non-empty list
        of values, e.g. ``{'gamma': [0.01, 0.1, 1]}``, or for RandomFourierFeatures
        ``{'kernel': ['rbf', 'laplacian'], 'length_scale': [0.5, 2]}``. Candidates follow
        scikit-learn's :class:`~sklearn.model_selection.ParameterGrid` order.
    alphas : array-like of shape (n_alphas,), default=(0.1, 1.0, 10.0)
        Ridge strengths to try (positive).
    fit_intercept : bool, default=True
        Fit the ridge's intercept.
    scoring : {'r2', 'neg_mean_squared_error', 'neg_root_mean_squared_error'} or None, default=None
        Score of a fold, averaged over targets; None is R^2. Scores that need individual
        predictions cannot come from statistics and are not offered.
    n_folds : int, default=5
        Number of folds, at least 2: a seeded hash of the global row index (chunk-invariant), the
        folds of :class:`RidgeCV` and :class:`HashedKFold`.
    random_state : int, RandomState instance or None, default=None
        Seed of the fold hash (the transformer keeps its own ``random_state``).

    Attributes
    ----------
    cv_results_ : dict of ndarrays
        scikit-learn's ``GridSearchCV.cv_results_`` keys: ``params`` (dicts of the transformer's
        parameter names and ``'alpha'``), ``param_<name>``, ``split{k}_test_score``,
        ``mean_test_score``, ``std_test_score``, ``rank_test_score``. One candidate per
        (map parameters, alpha), alpha fastest.
    best_params_ : dict
        The chosen candidate's parameters: the map's searched ones and ``'alpha'``.
    best_score_ : float
        Mean over folds of the chosen candidate's score.
    best_index_ : int
        Index of the chosen candidate in ``cv_results_``.
    best_estimator_ : sklearn.pipeline.Pipeline
        The fitted map with the best parameters, then a fitted :class:`Ridge` with the best alpha,
        refitted on every row from the search's statistics (no further pass).
    passes_ : int
        Passes over the data: the candidate maps' own fits' (Nystroem's ``landmark_passes_``; one
        for ``gamma='scale'`` on dask input), plus one for the statistics of every candidate.
    n_splits_ : int
        Number of folds.
    fold_sizes_ : ndarray of shape (n_folds,)
        Rows in each fold.
    fit_seconds_ : dict
        Seconds spent fitting the maps, in the statistics pass, and scoring and refitting.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during ``fit``; only for input with string feature names.

    Notes
    -----
    A block task holds the block and one candidate's features at a time; the statistics are
    ``n_candidates x n_folds x (d^2 + (n_targets + 1) d + 2 n_targets + 2)`` float64 for maps of ``d``
    features (a 10-candidate, 5-fold search at ``d = 1,024`` is 400 MiB a partial: fewer components,
    candidates or folds where the workers are short of memory). The maps' work is the sum of the
    candidates' (each candidate's features are computed once a block), the data is read once.

    A search whose partial would exceed the dask config ``dkapprox.cv-statistics-bytes`` (2 GiB by
    default, the limit :class:`KernelRidgeCV` keeps) is refused with a ``ValueError`` before the
    statistics pass, and before the maps' fits where the parameters give the width (``n_components``
    of RBFSampler, RandomFourierFeatures, ...; Nystroem's is known once fitted): it says the size,
    the limit and the most components a candidate may have with that grid (at the default, 2,316 for
    10 candidates and 5 folds of one target). Raise the limit where the workers have the memory.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dkapprox import RBFSampler
    >>> from dkapprox.linear_model import FeatureMapRidgeCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20_000, 4))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=20_000)
    >>> X, y = da.from_array(X, chunks=5_000), da.from_array(y, chunks=5_000)
    >>> search = FeatureMapRidgeCV(RBFSampler(n_components=200, random_state=0), {"gamma": [0.01, 0.3, 10]},
    ...                            alphas=[1e-3, 1.0], random_state=0).fit(X, y)
    >>> search.best_params_
    {'alpha': 0.001, 'gamma': 0.3}
    >>> search.passes_, search.cv_results_["mean_test_score"].shape
    (1, (6,))
    >>> round(search.score(X, y), 2)
    0.95
    """

    _parameter_constraints: dict = {
        "transformer": [HasMethods(["fit", "transform"])],
        "param_grid": [dict],
        "alphas": ["array-like"],
        "fit_intercept": ["boolean"],
        "scoring": [StrOptions(set(SCORINGS)), None],
        "n_folds": [Interval(Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, transformer, param_grid, *, alphas=(0.1, 1.0, 10.0), fit_intercept=True, scoring=None,
                 n_folds=5, random_state=None):
        self.transformer = transformer
        self.param_grid = param_grid
        self.alphas = alphas
        self.fit_intercept = fit_intercept
        self.scoring = scoring
        self.n_folds = n_folds
        self.random_state = random_state

    def fit(self, X, y, sample_weight=None):
        """Fit every candidate map, gather every candidate's statistics in one pass, refit the best.

        Parameters
        ----------
        X : array-like, sparse matrix, dask or zarr array of shape (n_samples, n_features)
            Each candidate map is fitted on X as given; a dask array's row block sizes must be known,
            since the folds follow global row indices.
        y : array-like or dask array of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : float, array-like or dask array of shape (n_samples,), default=None
            Non-negative row weights, as in :class:`RidgeCV` (the maps' fits do not see them).

        Returns
        -------
        self : FeatureMapRidgeCV
            With ``best_estimator_`` and ``cv_results_``.
        """
        before = dict(vars(self))
        try:
            return self._fit(X, y, sample_weight)
        except BaseException:
            vars(self).clear()  # nothing half-fitted: a failed fit leaves the estimator as it was
            vars(self).update(before)
            raise

    def _fit(self, X, y, sample_weight):
        self._validate_params()
        alphas = np.atleast_1d(np.asarray(self.alphas, dtype=np.float64)).ravel()
        if alphas.size == 0 or not np.all(np.isfinite(alphas)) or np.any(alphas <= 0):
            raise ValueError(f"alphas must be a non-empty list of positive numbers; got {self.alphas!r}.")
        candidates = self._candidates()
        scoring = self.scoring or "r2"
        started = time.perf_counter()
        seconds = {}
        X_given = X
        X, y, lazy = check_Xy(self, X, y, y_numeric=True, on_host=True)
        rows = X.shape[0]
        if lazy and rows != rows:
            raise ValueError("Cross-validation folds need the global row index of every block, but the row "
                             "block sizes of X are unknown. Call X.compute_chunk_sizes() first.")
        if self.n_folds > rows:
            raise ValueError(f"Cannot have number of folds n_folds={self.n_folds} greater than the number of "
                             f"samples: n_samples={rows}.")
        n_targets = 1 if y.ndim == 1 else y.shape[1]
        maps = [clone(self.transformer).set_params(**params) for params in candidates]
        widths = _widths_before_fit(maps)
        if widths is not None:  # refused before the maps' fits (gamma='scale' reads the data) where it can be
            self._check_size(widths, n_targets)
        maps = [m.fit(X_given) for m in maps]
        passes = sum(_fit_passes(m, lazy) for m in maps)
        dtypes = [np.dtype(m._out_dtype(X.dtype)) for m in maps]
        widths = [len(m.get_feature_names_out()) for m in maps]
        self._check_size(widths, n_targets)  # the fitted widths (Nystroem's, a projection's 'auto')
        checks = []
        for m in maps:
            check = m._block_check()
            if check not in checks:
                checks.append(check)
        pairs = [(type(m)._block_fn, m._state(X.dtype)) for m in maps]
        seconds["maps"] = time.perf_counter() - started
        t0 = time.perf_counter()
        moments = gather_moments(self, X, y, lazy, NumericTargets(n_targets), n_folds=self.n_folds,
                                 fold_key=fold_key(self.random_state), sample_weight=sample_weight,
                                 maps=(pairs, checks, max(widths)))
        passes += 1
        seconds["statistics"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        check_folds(moments[0])  # the same rows in the same folds for every candidate
        totals = [pool_folds(m) for m in moments]
        # (n_candidates, n_alphas, n_folds), each fold's score averaged over targets
        scores = np.stack([cv_scores(m, total, alphas, scoring, self.fit_intercept).mean(axis=2).T
                           for m, total in zip(moments, totals)])
        results = search_results(candidates, alphas, scores)
        best = int(np.argmax(results["mean_test_score"]))
        c, a = divmod(best, alphas.size)
        ridge = Ridge(alpha=float(alphas[a]), fit_intercept=self.fit_intercept)
        ridge._solve(totals[c], dtypes[c], alpha=alphas[a], ravel=y.ndim == 1)
        ridge.n_features_in_ = widths[c]
        seconds["scores"] = time.perf_counter() - t0
        self.cv_results_ = results
        self.best_index_ = best
        self.best_params_ = results["params"][best]
        self.best_score_ = float(results["mean_test_score"][best])
        self.best_estimator_ = make_pipeline(maps[c], ridge)
        self.passes_ = passes
        self.n_splits_ = int(self.n_folds)
        self.fold_sizes_ = moments[0].count.copy()
        seconds["total"] = time.perf_counter() - started
        self.fit_seconds_ = seconds
        return self

    def _check_size(self, widths, n_targets):
        """Refuse a pass whose partial would not fit ``dkapprox.cv-statistics-bytes``: the float64 Moments of
        ``n_folds`` folds of every candidate's features (``widths``), as :func:`._moments.moments_nbytes` counts
        them, saying what would fit."""
        limit = int(dask.config.get("dkapprox.cv-statistics-bytes", STATISTICS_BYTES))
        n_c, n_f, t = len(widths), int(self.n_folds), int(n_targets)
        size = sum(moments_nbytes(n_f, d, t) for d in widths)
        if size <= limit:
            return
        low, high = min(widths), max(widths)
        formula = "(n_components^2 + (n_targets + 1) n_components + 2 n_targets + 2) float64"
        if low == high:
            what = f"n_candidates={n_c} x n_folds={n_f} x {formula} at n_components={high}"
        else:
            what = f"the sum over n_candidates={n_c} of n_folds={n_f} x {formula}, n_components from {low} to {high}"
        most = _most_width(limit, n_c, n_f, t)
        fewer = []
        candidates = limit // moments_nbytes(n_f, high, t)
        if candidates >= 1:
            fewer.append(f"at most {candidates} candidate{'s' if candidates > 1 else ''} of {high} components")
        folds = limit // sum(moments_nbytes(1, d, t) for d in widths)
        if 2 <= folds < n_f:
            fewer.append(f"at most {folds} folds")
        fewer = f" ({' or '.join(fewer)})" if fewer else ""
        most = (f"use at most {most} components a candidate with this grid" if most else
                "not one component a candidate fits with this grid")
        raise ValueError(
            f"The search's statistics would take {format_size(size)} a task ({what}, n_targets={t}), more than "
            f"dkapprox.cv-statistics-bytes={format_size(limit)}: {most}, or fewer candidates or folds{fewer}, or raise "
            "the limit where the workers have the memory.")

    def _candidates(self):
        """The grid's points as dicts of the transformer's parameters (ValueError naming what is wrong)."""
        grid = self.param_grid
        for name in ("_block_fn", "_state", "_block_check", "_out_dtype"):
            if not hasattr(self.transformer, name):
                raise ValueError(f"transformer must be a dkapprox feature map (RBFSampler, Nystroem, ...); got "
                                 f"{type(self.transformer).__name__}, which has no block function.")
        if not grid:
            raise ValueError("param_grid must name at least one parameter of the transformer, with a list of "
                             f"values; got {grid!r}.")
        known = self.transformer.get_params()
        for name, values in grid.items():
            if name not in known:
                raise ValueError(f"param_grid names {name!r}, which {type(self.transformer).__name__} does not "
                                 f"have; its parameters are {', '.join(sorted(known))}.")
            if name == "alpha":
                raise ValueError("param_grid may not name 'alpha': the ridge's alphas are the alphas parameter.")
            if isinstance(values, (str, bytes)) or not hasattr(values, "__len__") or len(values) == 0:
                raise ValueError(f"param_grid[{name!r}] must be a non-empty list of values; got {values!r}.")
        return list(ParameterGrid(grid))

    def predict(self, X):
        """The predictions of ``best_estimator_``: the best map's features, then its ridge.

        Parameters
        ----------
        X : array-like, sparse matrix, dask or zarr array of shape (n_samples, n_features)
            Lazy in, lazy out: a dask array gives a dask array, one task per row block.

        Returns
        -------
        y_pred : array of shape (n_samples,) or (n_samples, n_targets)
        """
        check_is_fitted(self)
        return self.best_estimator_.predict(X)

    def score(self, X, y):
        """``best_estimator_``'s R^2 on (X, y), averaged over targets: one pass over dask input.

        Parameters
        ----------
        X : array-like, sparse matrix, dask or zarr array of shape (n_samples, n_features)
        y : array-like or dask array of shape (n_samples,) or (n_samples, n_targets)

        Returns
        -------
        r2 : float
        """
        check_is_fitted(self)
        return self.best_estimator_.score(X, y)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = get_tags(self.transformer).input_tags
        tags.input_tags.sparse = inner.sparse
        tags.input_tags.positive_only = inner.positive_only
        return tags


def _widths_before_fit(maps):
    """Each unfitted map's output width where its parameters say it (``n_components`` of RBFSampler,
    RandomFourierFeatures, ...), else None (Nystroem's rank, a projection's ``'auto'``: known once fitted)."""
    widths = []
    for m in maps:
        try:
            width = m._n_features_out
        except (AttributeError, TypeError, ValueError):
            return None
        if not isinstance(width, Integral) or isinstance(width, bool) or width < 1:
            return None  # the map's own fit refuses it, in its words
        widths.append(int(width))
    return widths


def _most_width(limit, n_candidates, n_folds, n_targets):
    """The most features a candidate may have for ``n_candidates`` of them to fit ``limit`` bytes (0: none)."""
    each = limit // n_candidates  # n_candidates x size <= limit exactly when size <= limit // n_candidates
    d = math.isqrt(max(0, each) // (8 * n_folds))  # moments_nbytes >= 8 n_folds d^2: an upper bound
    while d > 0 and moments_nbytes(n_folds, d, n_targets) > each:
        d -= 1
    return d


def _fit_passes(transformer, lazy):
    """Passes over the data a fitted map's fit made: Nystroem's ``landmark_passes_``; ``gamma='scale'``'s
    variance on dask input (in memory it is NumPy's, no pass); none for the maps that read no data."""
    if hasattr(transformer, "landmark_passes_"):
        return int(transformer.landmark_passes_)
    return int(lazy and isinstance(getattr(transformer, "gamma", None), str) and transformer.gamma == "scale")
