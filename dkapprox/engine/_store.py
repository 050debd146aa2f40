"""Writes of chosen blocks: one task a block, its read and map nested into its write.

:func:`store_blocks` builds the graph a resumable writer (``dkapprox.io``) computes: only the
blocks still to write, each a single task; :func:`written_keys` names those tasks, so that a
runner can release each result as soon as it is done.
"""

from __future__ import annotations

import dask.array as da

from ._dask_compat import block_key, nested_blocks, optimized, ref


def store_blocks(X: da.Array, write_block, blocks, *, name, gather=False):
    """Call ``write_block(block, index)`` on chosen blocks of ``X``; a delayed count of calls
    (with ``gather``, the list of what the calls returned, in the order listed).

    Only the listed blocks of ``X`` (and what they depend on) are computed when
    the result is computed, so a resumed job recomputes nothing already
    stored. ``write_block`` (a small picklable object that knows the output
    store) enters the graph once, as a state does; it must write exactly its
    block's region and then record it, so that no two tasks share an output
    chunk and a record never precedes its data. Building the graph costs one
    optimization of ``X`` and a dict entry per block (no per-block delayed
    objects, which would make it quadratic).

    Each write is **one task** with the tasks that make its block and serve no
    other block (read, map): a block never waits in a worker's memory for a
    separate write task, and the scheduler handles one task per block instead
    of two or three, which at 10^4 blocks cost more than the blocks' own work
    (:func:`dkapprox.engine._dask_compat.nested_blocks`). What blocks share
    (the state, the source array, the writer) stays one key each.

    Parameters
    ----------
    X : dask.array.Array
    write_block : callable
        ``write_block(block, index)`` with ``index`` a tuple of block indices.
    blocks : iterable of tuple of int
        Indices into ``X.numblocks`` to write, in the order tasks are listed.
    name : str
        Key prefix, unique to this write (tasks have side effects).
    """
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph

    graph, (keys,) = optimized([X])  # fuse the array's own tasks as compute would
    writer = f"{name}-writer"
    writes = {}
    for index in blocks:
        index = tuple(int(i) for i in index)
        writes[(name, *index)] = (_write_one, (ref(writer), list(index)), [block_key(keys, index)])
    count = f"{name}-count"
    # one layer: the fused writes and what they share (state, source array), nothing else
    layer = {**nested_blocks(graph, writes), writer: write_block, count: (list if gather else len, list(writes))}
    return Delayed(count, HighLevelGraph.from_collections(name, layer, dependencies=[]), layer=name)


def written_keys(count) -> list:
    """The keys of the write tasks under a :func:`store_blocks` count, in the order they were listed.

    Computed on their own (``client.get(count.dask, keys, sync=False)``), each
    result can be released as soon as it finishes: a worker lost later then
    takes no finished write with it, and no block already written is written
    again. The count itself holds every result until the last one is there.
    """
    layer = count.dask.layers.get(str(count.key).removesuffix("-count"), {})
    task = layer.get(count.key) if hasattr(layer, "get") else None
    if not (isinstance(task, tuple) and len(task) == 2 and task[0] in (len, list)):
        raise ValueError(f"{count.key} is not the count of a store_blocks write")
    return list(task[1])


def _write_one(write_block, index, block):
    return write_block(block, tuple(index))
    return 1
