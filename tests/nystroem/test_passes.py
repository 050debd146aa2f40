"""A fit on a 200-block dask array computes each block at most the documented number of times.

The blocks are produced by a function that counts its own calls in a
process-wide counter, so what is counted is real work done by the scheduler,
not a graph we inspect.
"""

import threading
from collections import Counter

import dask
import dask.array as da
import numpy as np
import pytest
from _arrays import rows_where
from _rounding import assert_chunking_promise

from dkapprox.nystroem import Nystroem

N_BLOCKS, ROWS = 200, 20
CALLS = Counter()
LOCK = threading.Lock()

#: The documented passes per landmark method (Nystroem's docstring); +1 for unknown chunk sizes.
PASSES = {"uniform": 1, "kmeans": 5, "leverage": 2, "rpcholesky": 1}


def counted_block(block, block_info=None):
    with LOCK:
        CALLS[block_info[0]["chunk-location"][0]] += 1
    return block


def counting_array():
    X = np.random.default_rng(0).random((N_BLOCKS * ROWS, 4))
    base = da.from_array(X, chunks=(ROWS, -1))
    return X, base.map_blocks(counted_block, dtype=X.dtype, meta=np.empty((0, 0), dtype=X.dtype))


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
@pytest.mark.parametrize("method", sorted(PASSES))
def test_fit_reads_each_block_at_most_the_documented_times(method, scheduler):
    X, lazy = counting_array()
    CALLS.clear()
    with dask.config.set(scheduler=scheduler):
        est = Nystroem(n_components=30, landmarks=method, random_state=0).fit(lazy)
    assert est.landmark_passes_ == PASSES[method]
    if method == "uniform":  # only the blocks holding a landmark, each once
        assert set(CALLS) == set(est.component_indices_ // ROWS)
        assert max(CALLS.values()) == 1
    else:  # the first pass gathers a sample (only blocks holding one), every later pass reads all
        assert len(CALLS) == N_BLOCKS
        assert PASSES[method] - 1 <= min(CALLS.values()) <= max(CALLS.values()) <= PASSES[method]
    in_memory = Nystroem(n_components=30, landmarks=method, random_state=0).fit(X)
    np.testing.assert_array_equal(est.component_indices_, in_memory.component_indices_)


@pytest.mark.parametrize("method", sorted(PASSES))
def test_unknown_chunk_sizes_cost_exactly_one_more_pass(method):
    _, lazy = counting_array()
    unknown = rows_where(lazy, lazy[:, 0] >= 0)  # as boolean indexing: the row counts are unknown (NaN)
    CALLS.clear()
    with dask.config.set(scheduler="synchronous"):
        est = Nystroem(n_components=30, landmarks=method, random_state=0).fit(unknown)
    # the mask reads the block too, inside the same task graph: still one computation per pass
    assert est.landmark_passes_ == PASSES[method] + 1
    assert len(CALLS) == N_BLOCKS
    assert PASSES[method] <= min(CALLS.values()) <= max(CALLS.values()) <= PASSES[method] + 1


def test_transform_computes_each_block_once_and_nothing_before_compute():
    X, lazy = counting_array()
    est = Nystroem(n_components=30, random_state=0).fit(X)
    CALLS.clear()
    Z = est.transform(lazy)
    assert not CALLS
    with dask.config.set(scheduler="threads"):
        out = Z.compute()
    assert len(CALLS) == N_BLOCKS and set(CALLS.values()) == {1}
    assert_chunking_promise(est, X, out)


@pytest.mark.parametrize("method", sorted(PASSES))
def test_rank_restriction_costs_exactly_one_more_pass(method):
    X, lazy = counting_array()
    CALLS.clear()
    params = dict(n_components=10, n_landmarks=30, landmarks=method, random_state=0)
    with dask.config.set(scheduler="threads"):
        est = Nystroem(**params).fit(lazy)
    assert est.landmark_passes_ == PASSES[method] + 1
    assert len(CALLS) == N_BLOCKS  # the sum of Z^T Z reads every block, once
    assert PASSES[method] <= min(CALLS.values()) <= max(CALLS.values()) <= PASSES[method] + 1
    in_memory = Nystroem(**params).fit(X)
    assert in_memory.landmark_passes_ == est.landmark_passes_
    np.testing.assert_array_equal(est.component_indices_, in_memory.component_indices_)


@pytest.mark.parametrize("method, params", [("rpcholesky", None), ("leverage", {"pilot_size": 256})])
def test_rank_restricted_fits_read_the_data_at_most_three_times_at_m_1024(method, params):
    """The issue's bound (at most 3 passes for m <= 4096): the passes of RPCholesky and of recursive
    leverage scores do not grow with m (their recursions run in memory, on the subsample; a smaller
    dictionary keeps leverage's in-memory work cheap, not its passes)."""
    X = np.random.default_rng(0).random((4000, 4))
    base = da.from_array(X, chunks=(400, -1))  # blocks of 400 rows: each adds an l x l sum
    lazy = base.map_blocks(counted_block, dtype=X.dtype, meta=np.empty((0, 0), dtype=X.dtype))
    CALLS.clear()
    with dask.config.set(scheduler="threads"):
        est = Nystroem(n_components=1024, n_landmarks=1280, landmarks=method, landmark_params=params,
                       random_state=0).fit(lazy)
    assert est.landmark_passes_ == PASSES[method] + 1 <= 3
    assert len(CALLS) == 10 and set(CALLS.values()) == {PASSES[method] + 1}
    assert est.normalization_.shape == (1024, 1280)
