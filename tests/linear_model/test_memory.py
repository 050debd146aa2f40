"""Bounded memory and one pass: what every task returns and holds, measured while dask runs the fit.

The data and the features are made block by block by tasks (nothing row-sized
is in the graph), and a scheduler callback records the size of every task's
result and of everything held at each step.
"""

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from dask.callbacks import Callback
from dask.utils import key_split

from dkapprox import RBFSampler
from dkapprox.cluster._memory import _nested_keys
from dkapprox.learning._moments import Moments
from dkapprox.learning._streaming import SPLIT_EVERY
from dkapprox.linear_model import Ridge, RidgeClassifier, RidgeCV

ROWS, D_IN, D = 400, 6, 48  # rows per block, input features, features


def nbytes(obj):
    if isinstance(obj, (np.ndarray, Moments)):
        return obj.nbytes
    if sp.issparse(obj):
        return obj.data.nbytes + obj.indices.nbytes + obj.indptr.nbytes
    if isinstance(obj, (tuple, list)):
        return sum(nbytes(o) for o in obj)
    return 0


class Measure(Callback):
    """Largest task result, largest total held by the scheduler, and runs of each task."""

    def __init__(self):
        super().__init__()
        self.largest = {}
        self.peak_held = 0
        self.runs = {}
        self.graph = {}

    def _start(self, dsk):
        self.graph.update(dsk)

    def read_inside(self, key):
        """The keys of the tasks nested in task ``key``: the blocks it reads (dkapprox.engine)."""
        return set(_nested_keys(self.graph[key]))

    def _pretask(self, key, dsk, state):
        self.runs[key] = self.runs.get(key, 0) + 1

    def _posttask(self, key, result, dsk, state, worker_id):
        self.largest[key] = nbytes(result)
        self.peak_held = max(self.peak_held, sum(nbytes(v) for v in state["cache"].values()))


def lazy_data(n_blocks, seed=0):
    rng = da.random.default_rng(seed)
    X = rng.normal(size=(n_blocks * ROWS, D_IN), chunks=(ROWS, D_IN))
    y = rng.normal(size=n_blocks * ROWS, chunks=ROWS)
    return X, y


def measured_fit(model, n_blocks):
    X, y = lazy_data(n_blocks)
    Z = RBFSampler(gamma=0.5, n_components=D, random_state=0).fit(X).transform(X)  # lazy features
    if isinstance(model, RidgeClassifier):
        y = (y > 0).astype(int)
    with dask.config.set(scheduler="sync"), Measure() as measure:
        model.fit(Z, y)
    return measure, X


def moments_bytes(n_folds, n_targets=1):
    return 8 * n_folds * (2 + D + n_targets + D * D + D * n_targets + n_targets)  # count, weight, ...


@pytest.mark.parametrize("model, n_folds", [(Ridge(), 1), (RidgeCV(n_folds=5, random_state=0), 5),
                                            (RidgeClassifier(), 1)], ids=["ridge", "ridge_cv", "classifier"])
def test_no_task_returns_more_than_a_block_and_the_peak_does_not_grow_with_n(model, n_folds):
    block = ROWS * D * 8  # one block of features, float64
    stats = moments_bytes(n_folds)
    peaks = {}
    for n_blocks in (4, 64, 512):
        measure, X = measured_fit(model, n_blocks)
        # a task returns at most one block (of X, y or features) or one set of statistics: the
        # features Z (n x D) are never materialized, and neither is anything n-sized
        assert max(measure.largest.values()) <= max(block, stats)
        reductions = [size for key, size in measure.largest.items()
                      if str(key[0] if isinstance(key, tuple) else key).startswith(("block_moments", "combine"))]
        assert len(reductions) > n_blocks and all(size == stats for size in reductions)
        # the driver keeps only the solution
        kept = [v for v in vars(model).values() if isinstance(v, np.ndarray)]
        assert sum(a.nbytes for a in kept) <= 8 * (D + 2) * 2
        # held at once: a few blocks, the running total and one group of partials (SPLIT_EVERY),
        # whatever the number of blocks (a tree would hold up to 7 more partials per level)
        assert measure.peak_held <= 3 * block + (1 + SPLIT_EVERY) * stats
        peaks[n_blocks] = measure.peak_held
    assert peaks[512] == peaks[64]  # flat: 8x the blocks, not one byte more held
    assert measure.peak_held < 64 * block / 4  # far below the features' size


def runs(measure, prefix):
    """How many times each task named ``prefix`` ran."""
    return [count for key, count in measure.runs.items() if key_split(key) == prefix]


def blocks_read(measure, prefix, name):
    """Block keys of array ``name`` read inside the tasks named ``prefix``, one entry a reading task."""
    return [k for key in measure.runs if key_split(key) == prefix
            for k in measure.read_inside(key) if isinstance(k, tuple) and k[0] == name]


@pytest.mark.parametrize("model", [Ridge(), RidgeCV(n_folds=3, random_state=0)], ids=["ridge", "ridge_cv"])
def test_fit_reads_every_block_of_the_data_exactly_once(model):
    measure, X = measured_fit(model, 12)
    # each block is drawn inside the one pass task of its row (dkapprox.engine.reduce_aligned_rows),
    # which ran once, and never as a task of its own
    assert runs(measure, "block_moments") == [1] * X.numblocks[0]
    read = blocks_read(measure, "block_moments", X.name)
    assert len(read) == len(set(read)) == X.numblocks[0]
    assert not [key for key in measure.runs if isinstance(key, tuple) and key[0] == X.name]


def test_classifier_reads_the_features_once_and_the_labels_twice():
    X, y = lazy_data(10, seed=3)
    Z = RBFSampler(n_components=D, random_state=0).fit(X).transform(X)
    labels = (y > 0).astype(int)
    with dask.config.set(scheduler="sync"), Measure() as measure:
        RidgeClassifier().fit(Z, labels)

    # every block read inside a pass task that ran once: the features in the statistics' pass only,
    # the labels in both (distinct classes first, then the statistics)
    assert runs(measure, "unique_labels_block") == runs(measure, "block_moments") == [1] * 10
    assert not blocks_read(measure, "unique_labels_block", Z.name)
    for prefix, name in [("block_moments", Z.name), ("unique_labels_block", labels.name),
                         ("block_moments", labels.name)]:
        read = blocks_read(measure, prefix, name)
        assert len(read) == len(set(read)) == 10, (prefix, name)
    assert not [key for key in measure.runs if isinstance(key, tuple) and key[0] in (Z.name, labels.name)]
