"""Row blocks: a block function mapped over them, folds of their statistics, rows taken and made.

Estimator modules hold math only: a frozen *state* and a pure *block function*
``block_fn(block, state) -> ndarray``. This module turns those into graphs:

* :func:`map_rows` applies a block function to every row block, the state
  shipped as one key (:mod:`dkapprox.engine._state`), each block task run with
  one BLAS thread (:mod:`dkapprox.engine._blas`) or, on a device, in its turn
  (:mod:`dkapprox.engine._device_turns`);
* :func:`tree_reduce` and :func:`reduce_aligned_rows` fold per-block
  statistics (:func:`fold`: a bounded fan-in tree or a running total), so a
  fit reads the data once whatever the number of blocks;
* :func:`take_rows`, :func:`row_sizes`, :func:`with_row_sizes`,
  :func:`generate_rows` and :func:`iter_row_blocks` read, count, declare, make
  and stream rows.

Like dask's ``map_blocks``, it takes functions and dask arrays and knows
nothing above it. Opening a Zarr array and computing under a cluster, with
worker deaths explained, are done around it by :mod:`dkapprox.inputs`.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp
from dask.array.utils import meta_from_array
from dask.base import tokenize

from . import _device_turns
from ._blas import task_threads
from ._dask_compat import (
    array_from_graph,
    block_key,
    combine_task,
    delayed_blocks,
    graph_of_blocks,
    nested_blocks,
    optimized,
    ref,
)
from ._state import byte_aligned, ship, shipped_argument


def is_sparse_meta(X: da.Array) -> bool:
    return sp.issparse(getattr(X, "_meta", None))


def _run_block(block, state, block_fn, check):
    if not (isinstance(block, np.ndarray) or sp.issparse(block)):
        # a block of another namespace (CuPy on a GPU) gets the state as shipped: the block function
        # copies it to the device once per process, keyed by this very object (dkapprox.backends._xp.state_on);
        # one thread at a time queues work on a device, and its check is waited for after that
        return _device_turns.run(block, state, block_fn, check, task_threads)
    block, state = byte_aligned(block), byte_aligned(state)
    if check is not None:
        check(block)
    with task_threads():  # one BLAS thread, as on a cluster's workers, whatever the scheduler
        return block_fn(block, state)


class InTask:
    """``fn`` run inside :func:`dkapprox.engine._blas.task_threads`; dask names its keys after ``fn`` still."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, *args):
        with task_threads():
            return self.fn(*args)

    def __dask_tokenize__(self):
        return ("dkapprox-in-task", tokenize(self.fn))

    def __reduce__(self):
        return (InTask, (self.fn,))


def whole_rows(X: da.Array) -> da.Array:
    """``X`` with its column chunks merged: a row's values must all be in one block."""
    return X.rechunk({1: -1}) if X.ndim == 2 and X.numblocks[1] > 1 else X


def map_rows(X, block_fn, state, *, n_out, dtype, name, check=None, sparse=False):
    """Apply ``block_fn(block, state)`` to every row block of ``X``.

    Every block function dkapprox maps goes through here, so every one gets
    the same treatment: the state shipped once, blocks and state realigned in
    memory (:func:`byte_aligned`), the optional value check run first.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        Any chunking: column chunks are merged first (a row's features must
        all be in one block); unknown row counts (NaN chunks) stay unknown.
    block_fn : callable
        Module-level function, pickled by reference.
    state : object
        Small, picklable fitted state. It enters the graph once.
    n_out : int or tuple of int
        Output columns of every block (an int: 2-D output), or the output's
        shape after its rows (a tuple: ``()`` gives one value per row, as
        predictions and labels are).
    dtype : numpy dtype
        Output dtype; must be what ``block_fn`` returns.
    name : str
        Prefix of the output keys (a content token is appended).
    check : callable or None
        Validates a block before ``block_fn`` runs (NaN, sign, ...), so that
        bad data fails at compute time with scikit-learn's message.
    sparse : bool
        Blocks are scipy.sparse matrices (declared in the output meta).
    """
    X = whole_rows(X)
    tail = (int(n_out),) if np.ndim(n_out) == 0 else tuple(int(t) for t in n_out)
    shipped, state_key = shipped_argument(state)
    token = tokenize(X.name, state_key, block_fn, check, tail, np.dtype(dtype).str, sparse)
    if sparse:
        meta = sp.csr_matrix((0,) + tail, dtype=dtype)
    elif isinstance(X._meta, np.ndarray) or sp.issparse(X._meta):  # NumPy (masked too) or scipy in: ndarray out
        meta = np.empty((0,) + tail, dtype=dtype)
    else:  # CuPy chunks give CuPy blocks out: the meta says so (dask infers it wrongly at times, dask #6493)
        meta = meta_from_array(X._meta, ndim=1 + len(tail), dtype=dtype)
    extra = {"drop_axis": 1} if not tail else {}
    return da.map_blocks(
        _run_block,
        X,
        shipped,
        block_fn,
        check,
        chunks=(X.chunks[0],) + tuple((t,) for t in tail),
        dtype=dtype,
        meta=meta,
        name=f"{name}-{token}",
        **extra,
    )


def row_blocks(X: da.Array):
    """One delayed object per row block (columns merged)."""
    return delayed_blocks(whole_rows(X))


def fold(parts, combine_fn, *, split_every=8, running=False):
    """Fold delayed ``parts`` with ``combine_fn(list)``: a tree of fan-in ``split_every``, or a running total.

    At least one combine runs, so one part gives the same type as many. The
    folding order is fixed by the graph, so the result does not depend on
    scheduling. See :func:`reduce_aligned_rows` for when to use ``running``.
    """
    return _fold_order(parts, dask.delayed(combine_fn, pure=True), split_every, running)


def _fold_order(parts, combine, split_every, running):
    """The order of :func:`fold`, whatever ``parts`` are: ``combine(group)`` makes a part of a group of parts."""
    if running:
        total = combine(parts[:split_every])
        for i in range(split_every, len(parts), split_every - 1):
            total = combine([total, *parts[i : i + split_every - 1]])
        return total
    while True:
        parts = [combine(parts[i : i + split_every]) for i in range(0, len(parts), split_every)]
        if len(parts) == 1:
            return parts[0]


def tree_reduce(X, chunk_fn, combine_fn, *, split_every=8, args=()):
    """Fold ``chunk_fn(block, *args)`` over row blocks with ``combine_fn(list)``.

    Returns a delayed object; compute it together with anything else the fit
    needs (``dask.compute(a, b)``), so that the data is read once.
    """
    parts = [dask.delayed(InTask(chunk_fn), pure=True)(b, *args) for b in row_blocks(X)]
    return fold(parts, combine_fn, split_every=split_every)


def align_rows(arrays):
    """Row block ``i`` of several arrays that share their rows (features ``Z``, targets ``y``).

    The first array (dask) sets the row blocks; its column chunks are merged.
    Every other array (dask or NumPy, 1-D or 2-D) is cut to the same row
    blocks: a NumPy array enters the graph once (``from_array``), a dask
    array is rechunked along rows only if its blocks differ.  When the first
    array's row sizes are unknown (NaN chunks), the others must be dask arrays
    with the same number of row blocks, and the row starts are ``None``.

    Returns
    -------
    blocks : list of tuple of Delayed
        ``blocks[i][j]`` is row block ``i`` of ``arrays[j]``.
    starts : list of int or None
        Global index of the first row of each block.
    """
    cut, starts = _cut_rows(arrays)
    return list(zip(*[delayed_blocks(a) for a in cut])), starts


def _cut_rows(arrays):
    """The arrays of :func:`align_rows` cut to the same row blocks (one block across), and the row starts."""
    first = whole_rows(arrays[0])
    rows = first.chunks[0]
    known = not any(np.isnan(c) for c in rows)
    cut = [first]
    for other in arrays[1:]:
        # other.ndim: NumPy functions refuse array expressions (their __array_function__ raises NotImplementedError)
        whole = {axis: -1 for axis in range(1, other.ndim if isinstance(other, da.Array) else np.ndim(other))}
        if not isinstance(other, da.Array):
            if not known:
                raise ValueError(
                    "The row block sizes of X are unknown, so an in-memory y cannot be aligned to "
                    "them. Call X.compute_chunk_sizes() first, or pass y as a dask array with the "
                    "same row blocks as X."
                )
            other = da.from_array(np.asarray(other), chunks=(rows,) + tuple(np.shape(other)[1:]))
        elif known and not any(np.isnan(c) for c in other.chunks[0]):
            other = other.rechunk({0: rows, **whole})
        elif other.numblocks[0] != first.numblocks[0]:
            raise ValueError(
                f"X and y have unknown row block sizes and different numbers of row blocks "
                f"({first.numblocks[0]} and {other.numblocks[0]}); call compute_chunk_sizes() on both."
            )
        else:
            other = other.rechunk(whole) if whole else other
        cut.append(other)
    if known:
        starts = [int(s) for s in np.concatenate([[0], np.cumsum(rows, dtype=np.int64)[:-1]])]
    else:
        starts = [None] * first.numblocks[0]
    return cut, starts


def reduce_aligned_rows(arrays, chunk_fn, combine_fn, state, *, split_every=8, running=False):
    """Fold ``chunk_fn(row_start, state, *blocks)`` over row-aligned blocks of several arrays.

    One pass: block ``i`` of every array (see :func:`align_rows`) meets in one
    task, which returns a small partial (sufficient statistics, counts); the
    partials are folded with ``combine_fn(list)`` in a tree of fan-in
    ``split_every``.  ``state`` enters the graph as one key; ``row_start`` is
    the global index of the block's first row (``None`` if unknown), so a
    per-row choice (a CV fold) depends on the row, never on the chunking.
    Nothing row-sized is ever an output of the tree: a lazily transformed
    ``arrays[0]`` is consumed block by block and never stored.

    Each pass task holds its row's blocks' own tasks (a Zarr read, a map, the
    slice of an in-memory ``y``), nested as :func:`store_blocks` nests a
    write's (:func:`~dkapprox.engine._dask_compat.nested_blocks`): no block is read ahead of its pass and
    left waiting in a worker's memory for it (as tasks of their own, reads
    ran ahead of the passes and filled workers near their limit until they
    spilled). What several blocks share (the state, a source array, a chunk
    a rechunk splits, a persisted block) stays a key of its own. Building
    the graph costs one optimization of the arrays and a few dict entries a
    block: no per-block delayed objects, whose merged graphs made it
    quadratic in the number of blocks.

    ``running=True`` folds into a running total instead of a tree: each
    combine takes the total so far and the next ``split_every - 1`` partials.
    A tree holds up to ``split_every - 1`` partials waiting at each of its
    log(n_blocks) levels, so its peak grows with the data (a 5-fold RidgeCV
    at 1024 features holds 40 MB of statistics per partial); a running
    total holds one total and one group, whatever the number of blocks. The
    price: combines run one after another (cheap next to the blocks that
    feed them), and a total lost with its worker is recomputed from the
    first block.  Either way the folding order is fixed by the graph (that
    of :func:`fold`), so the result does not depend on scheduling.

    Returns a delayed object; compute it with :func:`dkapprox.inputs._lazy.compute`.
    """
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph
    from dask.utils import funcname

    cut, starts = _cut_rows(arrays)
    # the arrays' own tasks fused as compute would (shared keys merged once)
    graph, keys = optimized(cut)
    shipped = ship(state)
    chunk = InTask(chunk_fn)
    token = tokenize(chunk, shipped.key, combine_fn, [a.name for a in cut], starts, split_every, running)
    name = f"{funcname(chunk)}-{token}"
    passes = {}
    for i, start in enumerate(starts):
        blocks = [block_key(k, (i,) + (0,) * (a.ndim - 1)) for a, k in zip(cut, keys)]
        passes[(name, i)] = (chunk, (start, ref(shipped.key)), blocks)
    layer = nested_blocks(graph, passes)
    layer.update(shipped.__dask_graph__())
    combine_name, combines = f"{funcname(combine_fn)}-{tokenize(token, 'combine')}", []

    def combine(group):
        key = (combine_name, len(combines))
        combines.append(key)
        layer[key] = combine_task(key, combine_fn, group)
        return key

    total = _fold_order(list(passes), combine, split_every, running)
    # one layer: the pass tasks, what they share (state, source arrays) and the fold, nothing else
    return Delayed(total, HighLevelGraph.from_collections(name, layer, dependencies=[]), layer=name)


def iter_row_blocks(arrays, order, *, prefetch=1):
    """Yield row blocks of row-aligned arrays, computed, in the given block order.

    Each block (e.g. features made from X on the workers, and its targets) is
    computed where the scheduler runs tasks (a distributed cluster if one is
    the default) and brought to the driver as NumPy, ``prefetch`` blocks
    ahead of the consumer, so that the driver holds at most ``prefetch + 1``
    blocks besides its model.  This is the loop of an incremental
    (``partial_fit``) fit.
    """
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    blocks, _ = align_rows(arrays)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dkapprox-prefetch") as pool:
        pending = deque()
        for i in order:
            pending.append(pool.submit(dask.compute, *blocks[int(i)]))
            if len(pending) > prefetch:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def generate_rows(block_fn, n_rows, n_cols, *, chunk_rows, dtype, name, args=()):
    """A lazy ``(n_rows, n_cols)`` array made block by block on the workers.

    Row block ``i`` is ``block_fn(i, start, stop, *args)`` for its global rows
    ``start:stop``; nothing is held on the driver, so the array may be far
    larger than any memory (the demo's synthetic data set is made this way).
    ``block_fn`` must be a module-level function, pickled by reference.
    """
    chunks = da.core.normalize_chunks((chunk_rows, n_cols), (n_rows, n_cols))
    token = tokenize(block_fn, n_rows, n_cols, chunk_rows, np.dtype(dtype).str, args)
    return da.map_blocks(
        _generate_block, block_fn, args, chunks=chunks, dtype=dtype,
        meta=np.empty((0, 0), dtype), name=f"{name}-{token}",
    )


def _generate_block(block_fn, args, block_info=None):
    (start, stop), _ = block_info[None]["array-location"]
    return block_fn(block_info[None]["chunk-location"][0], start, stop, *args)


def row_sizes(X: da.Array) -> tuple:
    """Rows in every row block of ``X``, as Python ints.

    Known chunk sizes cost nothing. Unknown ones (NaN, e.g. after boolean
    indexing) are found in **one pass** over the data, each block computed
    once: call this once per fit and pass the result on (``sizes=``), so that
    later passes do not pay it again.
    """
    chunks = X.chunks[0]
    if not any(np.isnan(c) for c in chunks):
        return tuple(int(c) for c in chunks)
    sizes = dask.compute(*[dask.delayed(_nrows, pure=True)(b) for b in row_blocks(X)])
    return tuple(int(s) for s in sizes)


def _nrows(block):
    return block.shape[0]


def take_rows(X: da.Array, indices, *, sizes=None):
    """The rows ``X[indices]`` (global row indices, in that order) as one delayed object.

    One pass at most: only the row blocks holding a wanted row are read, each
    once, and each gives just its wanted rows to the final assembly, so the
    driver receives ``len(indices)`` rows and nothing else. Blocks may be
    NumPy or scipy.sparse (the result is then CSR). Compute it together with
    anything else the fit needs (``dkapprox.inputs._lazy.compute(a, b)``).

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
    indices : array of int
        Global row indices in ``[0, n_samples)``.
    sizes : tuple of int, optional
        Rows per block, from :func:`row_sizes` (computed here when omitted).
    """
    sizes = row_sizes(X) if sizes is None else tuple(sizes)
    starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    indices = np.asarray(indices, dtype=np.int64).ravel()
    if indices.size and (indices.min() < 0 or indices.max() >= starts[-1]):
        raise IndexError(f"row indices must lie in [0, {int(starts[-1])}) for this array")
    if indices.size == 0:
        return dask.delayed(np.empty((0, X.shape[1]), dtype=X.dtype))
    owner = np.searchsorted(starts, indices, side="right") - 1  # the row block holding each index
    order = np.argsort(owner, kind="stable")  # positions in `indices`, grouped by block
    hit, first = np.unique(owner[order], return_index=True)
    groups = np.split(order, first[1:])
    blocks = row_blocks(X)
    take = dask.delayed(_take_local, pure=True)
    parts = [take(blocks[b], indices[g] - starts[b]) for b, g in zip(hit, groups)]
    return dask.delayed(_assemble_rows, pure=True)(parts, np.concatenate(groups))


def _take_local(block, local):
    return block[local]


def _assemble_rows(parts, positions):
    rows = sp.vstack(parts, format="csr") if sp.issparse(parts[0]) else np.concatenate(parts)
    return rows[np.argsort(positions, kind="stable")]


def with_row_sizes(X: da.Array, sizes) -> da.Array:
    """``X`` with its row chunk sizes declared (same graph, same keys, nothing computed).

    For an array whose row sizes were unknown (NaN) and have been found by
    :func:`row_sizes`: later passes then know every block's global row offset
    (e.g. :func:`reduce_aligned_rows`) without counting rows again.
    """
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) != X.numblocks[0]:
        raise ValueError(f"{len(sizes)} row sizes for an array of {X.numblocks[0]} row blocks")
    graph, name = graph_of_blocks(X)
    return array_from_graph(graph, name, (sizes,) + X.chunks[1:], X._meta)
