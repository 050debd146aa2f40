"""What both routes of a kernel ridge search share: the grid, the folds, a pass over the data, the folds' checks.

The search (:mod:`._kernel_ridge_cv`) builds one :class:`SearchGrid`; a route (:mod:`._cv_stats_route`,
:mod:`._cv_cg_route`) turns it into the states its passes ship and gives back the candidates' scores
(:class:`Found`), then the chosen candidate's model.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

import numpy as np

from .. import backends, engine, inputs, utils
from ..learning import NumericTargets, distinct_labels, target_input
from . import _cv_cg as cg
from . import _cv_stats as cv
from ._falkon import Centers


@dataclass(frozen=True, kw_only=True)
class SearchGrid:
    """What both routes need: the grid, the centers and their factors, the folds, the targets."""

    kernels: tuple  # (n_kernels,) Kernel: each kernel candidate's full parameters
    candidates: tuple  # (n_kernels,) dicts: each one's searched parameters (gamma and kernel_params' names)
    alphas: np.ndarray
    points: np.ndarray  # (m, n_features) float64
    factors: np.ndarray  # (n_kernels, m, m)
    n_folds: int
    fold_key: int
    labels: np.ndarray | None
    targets: object
    weighted: bool
    constant: float  # a scalar sample_weight, 1 otherwise
    scoring: str
    classes: object
    dtype: object

    def _as(self, probe):
        """``(targets, labels, weighted)`` of a data pass, or of the probe (numeric zeros, hashed folds)."""
        if probe:
            return NumericTargets(self.targets.n_targets), None, False
        return self.targets, self.labels, self.weighted

    def statistics_state(self, check, coefs=None, probe=False):
        targets, labels, weighted = self._as(probe)
        return cv.GridState(kernels=self.kernels, centers=self.points, factors=self.factors, n_folds=self.n_folds,
                            fold_key=self.fold_key, labels=labels, targets=targets, weighted=weighted, check=check,
                            coefs=coefs)

    def centers(self, g):
        """Kernel candidate ``g``'s centers: its kernel, the points in the blocks' dtype."""
        return Centers(self.kernels[g], self.points.astype(self.dtype))

    def cg_state(self, live, V, colfold, coltarget, S, first=False, check=None, probe=False):
        targets, labels, weighted = self._as(probe)
        return cg.CGPass(centers=tuple(self.centers(g) for g in live), V=tuple(V), colfold=tuple(colfold),
                         coltarget=tuple(coltarget), S=tuple(S), n_folds=self.n_folds, fold_key=self.fold_key,
                         labels=labels, targets=targets, weighted=weighted, classify=self.classes is not None,
                         first=first, check=check)

    def probe_pass(self):
        """A CG pass at its widest: every column of every kernel candidate, every candidate scored."""
        n_a, F, t, n_g = self.alphas.size, self.n_folds, self.targets.n_targets, len(self.kernels)
        m = self.points.shape[0]
        rng = np.random.default_rng(0)
        return self.cg_state(range(n_g), [rng.standard_normal((m, n_a * (F + 1) * t)) for _ in range(n_g)],
                             [np.tile(np.repeat(np.arange(F + 1), t), n_a)] * n_g,
                             [np.tile(np.arange(t), n_a * (F + 1))] * n_g,
                             [rng.standard_normal((F, m, n_a * t)) for _ in range(n_g)], probe=True)


@dataclass(frozen=True)
class Found:
    """A route's search: every candidate's scores, and what ``cv_results_`` says of them besides."""

    scores: np.ndarray  # (n_kernels, n_alphas, n_folds)
    fold_weights: np.ndarray  # (n_folds,)
    dropped: np.ndarray | None = None  # (n_kernels, n_alphas): the iteration after which halving dropped each
    iterations: np.ndarray | None = None  # (n_kernels, n_alphas): the CG iterations each one's fold columns ran


#: rows a block of in-memory (NumPy or sparse) input: a core each, as dask's threaded scheduler runs a dask array
IN_MEMORY_ROWS = 8192


def data_pass(arrays, state, lazy, chunk_fn, combine_fn):
    """One pass over the rows: ``chunk_fn`` of each block, the partials summed by ``combine_fn``.

    In-memory host input runs in blocks of :data:`IN_MEMORY_ROWS` on every core, folded in row order (the same
    bits whatever the cores); an in-memory device array is one block, its products already parallel.
    """
    if not lazy:
        if backends.namespace(arrays[0]) is not None:
            return chunk_fn(0, state, *arrays)
        return engine.reduce_in_threads(arrays, chunk_fn, combine_fn, state, rows=IN_MEMORY_ROWS,
                                        threads=utils.available_cpus())
    reduced = engine.reduce_aligned_rows(arrays, chunk_fn, combine_fn, state, running=True)
    return inputs.compute(reduced, arrays=arrays[:1])[0]


def check_folds(sums, positives, counts, n_samples, n_folds, classes):
    """Every fold holds weight; for a classifier, every fold's training rows hold two classes."""
    empty = np.flatnonzero(sums[:, 0, 0] <= 0)
    if empty.size:
        raise ValueError(f"Cannot cross-validate n_samples={n_samples} in {n_folds} folds: fold(s) "
                         f"{empty.tolist()} received no rows (or no weight); use fewer folds.")
    if classes is not None:
        _check_classes(positives, counts, classes)


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


def search_folds(splits, X, lazy, n_samples):
    """``(n_folds, labels or None, label array or None)`` of the search's ``cv``: hashed folds for an int,
    else each row's fold label (given, or read from a splitter's or a list's splits)."""
    if isinstance(splits, Integral):
        if splits > n_samples:
            raise ValueError(f"Cannot have number of folds n_folds={splits} greater than the number of "
                             f"samples: n_samples={n_samples}.")
        return int(splits), None, None
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
            labels = np.asarray(inputs.compute(labels)[0])
    else:
        labels = np.asarray(labels)
        distinct = np.unique(labels)
        if lazy:
            import dask.array as da

            labels = da.from_array(labels, chunks=(X.chunks[0],))
    if distinct.size < 2:
        raise ValueError(f"cv as fold labels needs at least 2 distinct folds; got {distinct.size}.")
    return int(distinct.size), distinct, labels


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
