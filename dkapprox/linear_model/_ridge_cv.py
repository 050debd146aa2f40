"""RidgeCV: exact K-fold cross-validation of an alpha grid in the same single pass as a fit.

Rows go to folds by a seeded hash of their global index (:class:`HashedKFold`
gives the same split to scikit-learn). The pass gathers each fold's
statistics; the training statistics of fold k are the total minus fold k's,
and fold k's validation error for any (coef, intercept) follows from fold k's
statistics alone (see :func:`._solve.fold_errors`), so every alpha and every
fold is scored on the driver without reading a row again.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from numbers import Integral, Real

import numpy as np
from sklearn.model_selection import BaseCrossValidator
from threadpoolctl import threadpool_limits

from ..learning import (
    NumericTargets,
    check_Xy,
    fold_errors,
    fold_key,
    gather_moments,
    hashed_folds,
    intercept_of,
    normal_equations,
    pool_folds,
    solve_ridge_path,
    target_scores,
    without_folds,
)
from ..utils import Interval, StrOptions, available_cpus, num_samples
from ._ridge import _StreamingRegressor

SCORINGS = ("r2", "neg_mean_squared_error", "neg_root_mean_squared_error")


class HashedKFold(BaseCrossValidator):
    """K-fold split by a seeded hash of the row index: the folds of :class:`RidgeCV`.

    Row ``i`` is in fold ``splitmix64(i + key) mod n_splits``, the key drawn
    from ``random_state``. Folds are therefore independent of chunking and of
    row order elsewhere, and their sizes are random (binomial) rather than
    equal. With the same integer ``random_state`` as a :class:`RidgeCV`, this
    scikit-learn splitter reproduces its folds (e.g. for ``GridSearchCV``).

    Parameters
    ----------
    n_splits : int, default=5
        Number of folds, at least 2.
    random_state : int, RandomState instance or None, default=None
        Seed of the hash key.

    Examples
    --------
    >>> import numpy as np
    >>> from dkapprox.linear_model import HashedKFold
    >>> cv = HashedKFold(n_splits=3, random_state=0)
    >>> [test.size for _, test in cv.split(np.zeros((30, 1)))]
    [7, 11, 12]
    """

    def __init__(self, n_splits=5, *, random_state=None):
        if not isinstance(n_splits, Integral) or n_splits < 2:
            raise ValueError(f"n_splits must be an integer of at least 2; got {n_splits!r}.")
        self.n_splits = int(n_splits)
        self.random_state = random_state

    def folds(self, n_samples):
        """Fold of each of the rows ``0 .. n_samples - 1``."""
        return hashed_folds(np.arange(n_samples), self.n_splits, fold_key(self.random_state))

    def _iter_test_masks(self, X=None, y=None, groups=None):
        folds = self.folds(num_samples(X))
        for k in range(self.n_splits):
            yield folds == k

    def get_n_splits(self, X=None, y=None, groups=None):
        """The number of folds."""
        return self.n_splits


class RidgeCV(_StreamingRegressor):
    """Ridge with its alpha chosen by exact K-fold cross-validation, in one pass over the data.

    For each alpha and fold, the model fitted on the other folds is scored on
    the fold, exactly as ``GridSearchCV(Ridge(), {'alpha': alphas},
    cv=HashedKFold(n_folds, random_state=...))`` would score it, but from
    per-fold statistics gathered in the same single pass a :class:`Ridge`
    fit makes (each block's rows are grouped by fold, one matrix product per
    fold, so the pass costs what a fit costs). The final model is refitted on
    all rows from the same statistics.

    Parameters
    ----------
    alphas : array-like of shape (n_alphas,), default=(0.1, 1.0, 10.0)
        Regularization strengths to try (non-negative).
    fit_intercept : bool, default=True
        Fit an intercept.
    scoring : {'r2', 'neg_mean_squared_error', 'neg_root_mean_squared_error'} or None, default=None
        Score of a fold, averaged over targets; None is R^2 (what
        scikit-learn's RidgeCV uses with an explicit ``cv``). Scores that need
        individual predictions cannot come from statistics and are not offered.
    n_folds : int, default=5
        Number of folds, at least 2.
    random_state : int, RandomState instance or None, default=None
        Seed of the fold hash; pass an int for the same folds on every fit.
    alpha_per_target : bool, default=False
        Choose one alpha per target (by that target's mean score).

    Attributes
    ----------
    alpha_ : float or ndarray of shape (n_targets,)
        The chosen alpha; one per target with ``alpha_per_target`` and
        several targets.
    best_score_ : float or ndarray of shape (n_targets,)
        Mean over folds of the chosen alpha's score.
    cv_scores_ : ndarray of shape (n_folds, n_alphas) or (n_folds, n_alphas, n_targets)
        Score of every fold and alpha (per target with ``alpha_per_target``).
    fold_sizes_ : ndarray of shape (n_folds,)
        Rows in each fold.
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
        Weight vector(s) of the model refitted on all rows with ``alpha_``,
        as :class:`Ridge`'s ``coef_``.
    intercept_ : float or ndarray of shape (n_targets,)
        Independent term of that model, as :class:`Ridge`'s ``intercept_``.
    solver_ : {'cholesky', 'eigh'}
        How that model's system was solved, as :class:`Ridge`'s ``solver_``.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during ``fit``; only for input with string
        feature names.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dkapprox.linear_model import RidgeCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(10_000, 20))
    >>> y = X @ rng.normal(size=20) + rng.normal(size=10_000)
    >>> cv = RidgeCV(alphas=np.logspace(-2, 4, 7), n_folds=5, random_state=0)
    >>> cv.fit(da.from_array(X, chunks=2_000), da.from_array(y, chunks=2_000)).alpha_
    1.0
    >>> cv.cv_scores_.shape
    (5, 7)
    """

    _parameter_constraints: dict = {
        "alphas": ["array-like", Interval(Real, 0, None, closed="neither")],
        "fit_intercept": ["boolean"],
        "scoring": [StrOptions(set(SCORINGS)), None],
        "n_folds": [Interval(Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
        "alpha_per_target": ["boolean"],
    }

    def __init__(self, alphas=(0.1, 1.0, 10.0), *, fit_intercept=True, scoring=None, n_folds=5,
                 random_state=None, alpha_per_target=False):
        self.alphas = alphas
        self.fit_intercept = fit_intercept
        self.scoring = scoring
        self.n_folds = n_folds
        self.random_state = random_state
        self.alpha_per_target = alpha_per_target

    def fit(self, X, y, sample_weight=None):
        """Score every alpha on every fold and refit with the best: one pass over X and y.

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)
            The row block sizes of a dask array must be known (the folds
            follow global row indices).
        y : {ndarray, dask array} of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : float or {ndarray, dask array} of shape (n_samples,), default=None
            Non-negative row weights: each fold's model is fitted with the
            weights of its training rows, and scored with the weights of its
            validation rows (weighted R^2 or mean squared error, as
            scikit-learn's metrics compute them with ``sample_weight``).

        Returns
        -------
        self : object
            Fitted estimator.
        """
        self._validate_params()
        alphas = np.atleast_1d(np.asarray(self.alphas, dtype=np.float64)).ravel()
        if alphas.size == 0 or np.any(alphas < 0) or not np.all(np.isfinite(alphas)):
            raise ValueError(f"alphas must be a non-empty list of non-negative numbers; got {self.alphas!r}.")
        scoring = self.scoring or "r2"
        X, y, lazy = check_Xy(self, X, y, y_numeric=True)
        targets = NumericTargets.of(y)
        folds = gather_moments(self, X, y, lazy, targets, n_folds=self.n_folds,
                               fold_key=fold_key(self.random_state), sample_weight=sample_weight)
        check_folds(folds)
        total = pool_folds(folds)
        scores = cv_scores(folds, total, alphas, scoring, self.fit_intercept)  # (n_folds, n_alphas, n_targets)
        self.fold_sizes_ = folds.count.copy()
        if self.alpha_per_target and targets.n_targets > 1:
            mean = scores.mean(axis=0)
            best = mean.argmax(axis=0)
            self.alpha_ = alphas[best]
            self.best_score_ = mean[best, np.arange(targets.n_targets)]
            self.cv_scores_ = scores
        else:
            per_fold = scores.mean(axis=2)
            best = int(per_fold.mean(axis=0).argmax())
            self.alpha_ = float(alphas[best])
            self.best_score_ = float(per_fold.mean(axis=0)[best])
            self.cv_scores_ = scores if self.alpha_per_target else per_fold
        self._solve(total, X.dtype, alpha=self.alpha_, ravel=y.ndim == 1)
        return self


def check_folds(folds):
    """Refuse per-fold Moments with an empty fold, or a fold that holds every row (nothing to train on)."""
    empty = np.flatnonzero(folds.count == 0)
    if empty.size or np.any(folds.count == folds.count.sum()):
        raise ValueError(
            f"Cannot cross-validate n_samples={int(folds.count.sum())} in {folds.count.shape[0]} folds: "
            f"fold(s) {empty.tolist()} received no rows; use fewer folds."
        )


def cv_scores(folds, total, alphas, scoring, fit_intercept):
    """Scores (n_folds, n_alphas, n_targets): n_folds reductions of a d x d matrix on the driver.

    ``folds``: per-fold Moments, ``total``: their pool. Each solve runs on one BLAS thread and the
    folds run in parallel threads (LAPACK releases the GIL): NumPy's and SciPy's BLAS pools, each
    with a thread per core, would fight over the cores (benchmarks/bench_blas_threads.py measures it).
    """
    train = without_folds(folds, total)
    n_folds = folds.count.shape[0]
    workers = min(n_folds, available_cpus())
    with threadpool_limits(1), ThreadPoolExecutor(max_workers=workers) as pool:
        per_fold = pool.map(lambda k: fold_scores(train.fold(k), folds.fold(k), alphas, scoring, fit_intercept),
                            range(n_folds))
        return np.stack(list(per_fold))


def fold_scores(train, held_out, alphas, scoring, fit_intercept):
    """Scores (n_alphas, n_targets) on one held-out fold of the models trained on ``train``, every alpha."""
    A, B, center_z, center_y = normal_equations(train, fit_intercept)
    scores = np.empty((alphas.size, B.shape[1]))
    for a, W in enumerate(solve_ridge_path(A, B, alphas)):  # one reduction of A for all alphas
        sse = fold_errors(W, intercept_of(W, center_z, center_y), held_out)
        scores[a] = target_scores(sse, held_out, scoring)
    return scores
