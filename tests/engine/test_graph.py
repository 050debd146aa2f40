"""The graph module: state shipped once, graph size, tree reductions (invariants 4 and 5)."""

import inspect
import io
import os
import pickle

import cloudpickle
import dask
import dask.array as da
import numpy as np
import pytest
from _arrays import rows_where
from _rounding import transform_by_blocks
from _shipping import CountingRBFSampler
from distributed import Client, LocalCluster
from sklearn.base import BaseEstimator

import dkapprox
from dkapprox import engine
from dkapprox.backends._stats import combine_block_moments, moments
from dkapprox.engine import _blocks, _state


def graph_bytes(arr):
    return len(cloudpickle.dumps(dict(arr.__dask_graph__())))


def test_state_is_deserialized_at_most_once_per_worker(tmp_path):
    log = tmp_path / "unpickled.log"
    X = np.random.default_rng(0).random((800, 16))
    est = CountingRBFSampler(n_components=4000, random_state=0, log_path=str(log)).fit(X)  # 0.5 MB state
    Xd = da.from_array(X, chunks=(4, -1))
    assert Xd.numblocks[0] == 200
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      worker_dashboard_address=None) as cluster, Client(cluster) as client:
        worker_pids = set(client.run(os.getpid).values())
        log.write_text("")
        Z = est.transform(Xd)
        result = client.compute(Z).result()
        lines = log.read_text().split()
    np.testing.assert_array_equal(result, transform_by_blocks(est, X, 4))  # the same blocks, bit for bit
    in_workers = [int(pid) for pid in lines if int(pid) in worker_pids]
    assert 1 <= len(in_workers) <= len(worker_pids), lines
    # the scheduler (in this process for a LocalCluster) unpickles the graph once at most
    assert len(lines) - len(in_workers) <= 1, lines


def test_graph_holds_the_state_once_whatever_the_number_of_blocks():
    X = np.random.default_rng(0).random((2000, 32))
    small = dkapprox.RBFSampler(n_components=10, random_state=0).fit(X)
    big = dkapprox.RBFSampler(n_components=20_000, random_state=0).fit(X)  # 5.1 MB of weights
    state_bytes = big.random_weights_.nbytes + big.random_offset_.nbytes
    for blocks in (10, 200):
        Xd = da.from_array(X, chunks=(2000 // blocks, -1))
        grown = graph_bytes(big.transform(Xd)) - graph_bytes(small.transform(Xd))
        assert state_bytes * 0.99 < grown < state_bytes * 1.02, (blocks, grown, state_bytes)
    per_block = (graph_bytes(big.transform(da.from_array(X, chunks=(10, -1))))
                 - graph_bytes(big.transform(da.from_array(X, chunks=(20, -1))))) / 100
    assert per_block < 2_000  # a task is a few hundred bytes, never the state


def test_graph_never_carries_the_estimator():
    X = np.random.default_rng(0).random((100, 4))
    est = dkapprox.RBFSampler(n_components=5, random_state=0).fit(X)

    def estimators_in(graph):
        """Keys of the tasks whose own pickle holds an estimator (distributed pickles task by task)."""
        holding = []
        for key, task in dict(graph).items():
            found = []

            class Spy(pickle.Pickler):
                def persistent_id(self, obj):
                    if isinstance(obj, BaseEstimator) or inspect.ismethod(obj):
                        found.append(obj)
                    return None

            Spy(io.BytesIO()).dump(task)
            if found:
                holding.append(key)
        return holding

    Xd = da.from_array(X, chunks=10)
    assert estimators_in(est.transform(Xd).__dask_graph__()) == []
    # what a dask user writes today ships the estimator in every task: the spy sees it
    naive = Xd.map_blocks(est.transform, chunks=(10, 5), meta=np.empty((0, 0)))
    assert len(estimators_in(naive.__dask_graph__())) == Xd.numblocks[0]


def test_map_rows_merges_column_chunks_and_keeps_unknown_rows():
    X = da.ones((100, 10), chunks=(30, 3))
    out = engine.map_rows(X, lambda b, s: b[:, :2] * s, 2.0, n_out=2, dtype=np.float64, name="t")
    assert out.chunks == ((30, 30, 30, 10), (2,))
    assert (out.compute() == 2.0).all()


@pytest.mark.parametrize("blocks", [1, 7, 64, 65])
def test_tree_reduce_fan_in_and_result(blocks):
    X = np.random.default_rng(blocks).normal(size=(blocks * 5, 3))
    lazy = engine.tree_reduce(da.from_array(X, chunks=(5, 2)), moments, combine_block_moments, split_every=8)
    graph = dict(lazy.__dask_graph__())
    n, mean, m2, bad = dask.compute(lazy)[0]
    assert n == X.size and bad == 0
    assert mean == pytest.approx(X.mean(), rel=1e-12, abs=1e-15)
    assert m2 / n == pytest.approx(X.var(), rel=1e-12)
    combines = [k for k in graph if "combine_block_moments" in str(k)]
    assert len(combines) <= blocks  # a tree, not one task per pair


def _rows_seen(row_start, state, block):
    return [(row_start, block.shape[0])]


def _in_order(parts):
    return [seen for part in parts for seen in part]


@pytest.mark.parametrize("blocks", [1, 8, 9, 15, 16, 100])
def test_running_reduction_folds_every_block_once_in_order_in_a_chain(blocks):
    X = da.ones((blocks * 3, 2), chunks=(3, 1))
    lazy = engine.reduce_aligned_rows([X], _rows_seen, _in_order, None, split_every=8, running=True)
    graph = dict(lazy.__dask_graph__())
    assert dask.compute(lazy, scheduler="sync")[0] == [(3 * i, 3) for i in range(blocks)]
    combines = [k for k in graph if "_in_order" in str(k)]
    assert len(combines) == 1 + max(0, -(-(blocks - 8) // 7))  # the first 8, then 7 more per step
    # each combine takes the running total and at most 7 new partials: a chain, not a tree
    assert max(len(graph[k].dependencies) for k in combines) <= 8


def test_row_count_of_unknown_chunks():
    X = da.ones((100, 2), chunks=50)
    masked = rows_where(X, X[:, 0] > 0)
    assert np.isnan(masked.shape[0]) and sum(engine.row_sizes(masked)) == 100


def test_dask_weighs_a_shipped_state_by_the_arrays_it_holds():
    # priced at sys.getsizeof's 56 bytes, the state looked free to move and blocks were moved to it instead
    from dask.sizeof import sizeof

    import dkapprox

    X = np.random.default_rng(0).standard_normal((600, 16))
    for est in (dkapprox.Nystroem(n_components=256, random_state=0), dkapprox.RBFSampler(random_state=0),
                dkapprox.GaussianRandomProjection(n_components=8, random_state=0)):
        state = est.fit(X)._state(np.float64)
        arrays = sum(v.nbytes for v in vars(est).values() if isinstance(v, np.ndarray))
        assert sizeof(state) >= 0.9 * arrays > 0, type(est).__name__


def _write_graph(Z, tmp_path):
    from dkapprox.io import write_features

    pending = write_features(Z, str(tmp_path / "out.zarr"), plan={}, compute=False)
    return pending, dict(pending.delayed.__dask_graph__())


def test_a_write_is_one_task_per_block_with_its_read_and_map(tmp_path):
    # read (from_array) and map (the transform) fused into the write: one task a block,
    # plus the keys every block shares (state, source array, writer) and the count
    X = np.random.default_rng(0).random((300, 8))
    est = dkapprox.RBFSampler(n_components=16, random_state=0).fit(X)
    Z = est.transform(da.from_array(X, chunks=(10, -1)))
    pending, graph = _write_graph(Z, tmp_path)
    writes = set(pending.parts)
    assert len(writes) == 30 and len(graph) - len(writes) <= 5, len(graph)
    block_keys = set(dict(dask.optimize(Z)[0].__dask_graph__()))
    assert not any(dep[0] == Z.name for w in writes for dep in graph[w].dependencies if isinstance(dep, tuple))
    assert not block_keys & writes
    assert pending.delayed.compute() == 30
    pending.finalize()
    np.testing.assert_array_equal(dkapprox.io.open_features(str(tmp_path / "out.zarr")).compute(),
                                  transform_by_blocks(est, X, 10))


def test_a_chunk_two_blocks_share_stays_one_task(tmp_path):
    # rows rechunked from 15 to 10: source chunk 1 (rows 15-29) feeds blocks 1 and 2, so it is
    # computed once, as its own key, not once inside each write
    X = np.random.default_rng(1).random((60, 4))
    est = dkapprox.RBFSampler(n_components=8, random_state=0).fit(X)
    source = da.from_array(X, chunks=(15, -1)).map_blocks(lambda b: b + 0.0)
    Z = est.transform(source.rechunk((10, 4)))
    pending, graph = _write_graph(Z, tmp_path)
    source_keys = [k for k in graph if isinstance(k, tuple) and k[0] == source.name]
    assert len(source_keys) == 4, "the source chunks were fused into the writes, or lost"
    assert pending.delayed.compute() == 6
    pending.finalize()
    np.testing.assert_array_equal(dkapprox.io.open_features(str(tmp_path / "out.zarr")).compute(),
                                  transform_by_blocks(est, X, 10))


def test_a_block_made_by_several_tasks_is_fused_into_its_write_whole(tmp_path):
    # dask's random arrays are not blockwise: each block's draw stays a task of its own next to
    # its transform, and both go into the write (GraphNode.fuse), leaving one task a block
    X = da.random.default_rng(0).standard_normal((120, 6), chunks=(20, 6))
    est = dkapprox.RBFSampler(n_components=8, random_state=0).fit(X[:20].compute())
    Z = est.transform(X)
    optimized = dict(dask.optimize(Z)[0].__dask_graph__())
    assert len(optimized) > 2 * Z.numblocks[0], "the draws were fused by dask: this test no longer tests the fuse"
    pending, graph = _write_graph(Z, tmp_path)
    assert len(graph) - len(pending.parts) <= 5, len(graph)
    assert pending.delayed.compute() == 6
    pending.finalize()
    np.testing.assert_array_equal(dkapprox.io.open_features(str(tmp_path / "out.zarr")).compute(),
                                  transform_by_blocks(est, X.compute(), 20))


def _weighted_sums(row_start, scale, X, y, w):
    X = X.toarray() if hasattr(X, "toarray") else np.asarray(X)
    head = [-1.0 if row_start is None else row_start, X.shape[0]]
    return np.concatenate([head, (X * (scale * w)[:, None]).sum(axis=0), [(y * w).sum()]])


def _sum_parts(parts):
    return np.sum(parts, axis=0)  # float64 sums in the fold's order: other bits in another order


def _numpy_fold(blocks, starts, split_every, running):
    """The same partials and the same fold, on NumPy blocks with plain delayed combines."""
    parts = [_weighted_sums(s, 0.5, *row) for s, row in zip(starts, blocks)]
    return dask.compute(_blocks.fold(parts, _sum_parts, split_every=split_every, running=running))[0]


@pytest.mark.parametrize("running", [False, True])
def test_a_pass_reads_each_row_block_inside_its_own_task(tmp_path, running):
    # a block read (the Zarr getter, the slice of a NumPy y, a lazy map and its source) nested into
    # the pass task of its row: no read task of its own runs ahead and leaves its block waiting
    import zarr

    rng = np.random.default_rng(0)
    X = rng.standard_normal((90, 3)).astype(np.float32)
    y, w = rng.standard_normal(90), rng.random(90)
    zarr.create_array(str(tmp_path / "x.zarr"), shape=X.shape, chunks=(10, 3), dtype=X.dtype)[:] = X
    Xz = dkapprox.io.open_array(tmp_path / "x.zarr")
    # a map over a NumPy source: two tasks a block, fused (a map, not `** 1.0`: array expressions make the
    # scalar a 0-d array, a key all blocks share)
    wd = da.from_array(w, chunks=10).map_blocks(np.positive)
    lazy = engine.reduce_aligned_rows([Xz, y, wd], _weighted_sums, _sum_parts, 0.5, split_every=4, running=running)
    graph = dict(lazy.__dask_graph__())
    passes = [k for k in graph if isinstance(k, tuple) and k[0].startswith("_weighted_sums-")]
    combines = [k for k in graph if isinstance(k, tuple) and k[0].startswith("_sum_parts-")]
    assert len(passes) == 9 and len(combines) == (3 if running else 4)  # 4, 3, 2 partials; or 9 -> 3 -> 1
    shared = set(graph) - set(passes) - set(combines)
    # the state and the Zarr array every read opens; no block of X, y or w is a key of its own
    assert len(shared) == 2 and _state.ship(0.5).key in shared, shared
    assert all(len(graph[k].dependencies) <= 2 for k in passes)  # the state and the Zarr array, nothing else
    got = dask.compute(lazy, scheduler="sync")[0]
    blocks = [(X[s : s + 10], y[s : s + 10], w[s : s + 10]) for s in range(0, 90, 10)]
    expected = _numpy_fold(blocks, list(range(0, 90, 10)), 4, running)
    np.testing.assert_array_equal(got, expected)


def test_a_pass_over_unknown_row_sizes_and_sparse_blocks_nests_them_too():
    import scipy.sparse as sp

    rng = np.random.default_rng(1)
    dense = rng.standard_normal((60, 4))
    keep = dense[:, 0] > -0.5
    Xd, wd = da.from_array(dense, chunks=(12, 2)), da.from_array(rng.random(60), chunks=12)
    Xm, ym, wm = (rows_where(a, Xd[:, 0] > -0.5) for a in (Xd, Xd[:, 1], wd))
    assert np.isnan(Xm.chunks[0][0])
    got = dask.compute(engine.reduce_aligned_rows([Xm, ym, wm], _weighted_sums, _sum_parts, 0.5), scheduler="sync")[0]
    w = wd.compute()
    rows = [slice(s, s + 12) for s in range(0, 60, 12)]
    blocks = [(dense[r][keep[r]], dense[r, 1][keep[r]], w[r][keep[r]]) for r in rows]
    np.testing.assert_array_equal(got, _numpy_fold(blocks, [None] * 5, 8, False))

    S = sp.random(60, 5, density=0.3, format="csr", random_state=0)
    y, w = rng.standard_normal(60), rng.random(60)
    lazy = engine.reduce_aligned_rows([da.from_array(S, chunks=(15, 5), asarray=False), y, w], _weighted_sums,
                                      _sum_parts, 0.5)
    assert len(dict(lazy.__dask_graph__())) == 4 + 3  # the passes; the state, the sparse source, the combine
    blocks = [(S[s : s + 15], y[s : s + 15], w[s : s + 15]) for s in range(0, 60, 15)]
    np.testing.assert_array_equal(dask.compute(lazy, scheduler="sync")[0],
                                  _numpy_fold(blocks, list(range(0, 60, 15)), 8, False))


def test_a_pass_graph_of_ten_thousand_blocks_is_one_layer_of_a_task_a_block():
    # one layer of tasks, not a delayed object a block, whose merged graphs made the build quadratic: the shape
    X = da.ones((20_000, 2), chunks=(2, 2))
    lazy = engine.reduce_aligned_rows([X, np.zeros(20_000)], _rows_seen_y, _in_order, None, running=True)
    graph = lazy.__dask_graph__()
    assert len(graph.layers) == 1 and len(dict(graph)) < 1.2 * 10_000


def _rows_seen_y(row_start, state, block, y):
    return [(row_start, block.shape[0])]
