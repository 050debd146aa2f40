"""Every way dkapprox touches dask, in one place.

Estimator modules hold math only: a frozen *state* (a few NumPy arrays) and a
pure *block function* ``block_fn(block, state) -> ndarray``.  This module turns
those into graphs:

* :func:`map_rows` applies a block function to every row block; the state
  enters the graph as **one key** (``dask.delayed(state, pure=True)``; with
  dask's array expressions, the one block of a 0-d array), never as the
  estimator or a bound method, so each worker deserializes it once.
* :func:`tree_reduce` and :func:`reduce_aligned_rows` fold per-block
  statistics (:func:`fold`: a bounded fan-in tree or a running total), so a
  fit reads the data once whatever the number of blocks.

Like dask's ``map_blocks``, this module takes functions and dask arrays and
knows nothing above it: it imports nothing of dkapprox but :mod:`dkapprox.engine._blas`,
the engine's other module, which runs every block task with the BLAS threads
that the tasks running beside it leave free (tests/test_layers.py).
Opening a Zarr array and computing under a cluster, with worker deaths
explained, are done around it by :mod:`dkapprox.inputs._lazy`.
"""

from __future__ import annotations

import dataclasses

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp
from dask.array.utils import meta_from_array
from dask.base import tokenize

from . import _device_turns
from ._blas import task_threads

__all__ = ["SizedState", "map_rows", "reduce_aligned_rows", "row_sizes", "take_rows", "tree_reduce"]


def is_sparse_meta(X: da.Array) -> bool:
    return sp.issparse(getattr(X, "_meta", None))


def expression_mode() -> bool:
    """True where dask.array is its array expressions ("query planning", ``array.query-planning``)."""
    enabled = getattr(da, "array_expr_enabled", None)  # public in newer dask; 2024.12 (our lower bound) lacks it
    if enabled is not None:
        return enabled()
    return da.Array.__module__.startswith("dask.array._array_expr")


def array_from_graph(graph, name, chunks, meta):
    """A dask array whose blocks are the keys ``(name, i, j, ...)`` of ``graph`` (a mapping or HighLevelGraph).

    Legacy dask.array wraps the graph as it is (``dask.array.Array``); array
    expressions take it as a ``FromGraph`` expression, which names its blocks
    ``<name>-<token>`` and points them at ``graph``'s keys (the array's
    ``name`` is then not ``name``: read its keys with ``__dask_keys__()``).
    """
    chunks = tuple(tuple(axis) for axis in chunks)
    if not expression_mode():
        return da.Array(graph, name, chunks=chunks, meta=meta)
    from dask.array._array_expr._collection import from_graph

    keys = [(name, *index) for index in np.ndindex(*(len(axis) for axis in chunks))]
    return from_graph(dict(graph), meta, chunks, keys, name)


def optimized(arrays):
    """``arrays`` optimized together as compute would: one graph (a mapping) and each array's block keys.

    The keys are nested lists, as ``__dask_keys__()`` gives them. Legacy
    dask.array: ``dask.optimize`` (the keys are kept). Array expressions: the
    expressions optimized together, as ``dask.compute`` optimizes them
    (``collections_to_expr(...).optimize()``); ``dask.optimize`` of dask
    2026.8 materializes an array expression without lowering it, and fails on
    any that must be lowered (a rechunk: ``'Rechunk' object has no attribute
    'npartitions'``), and would alias every key through a ``FromGraph``.
    """
    if not expression_mode():
        arrays = dask.optimize(*arrays)
        graph = {}
        for a in arrays:
            graph.update(a.__dask_graph__())
        return graph, [a.__dask_keys__() for a in arrays]
    from dask.base import collections_to_expr

    expr = collections_to_expr(list(arrays)).optimize()
    return dict(expr.__dask_graph__()), list(expr.__dask_keys__())


def _block_key(keys, index):
    """The key of block ``index`` (a tuple of block indices) in nested ``__dask_keys__()`` lists."""
    for i in index:
        keys = keys[i]
    return keys


def _flat_keys(keys) -> list:
    return [k for sub in keys for k in _flat_keys(sub)] if isinstance(keys, list) else [keys]


class SizedState:
    """Base of the fitted states: their size, as dask weighs it, counts the arrays they hold.

    dask's scheduler prices moving a key by ``sizeof``, which for a plain
    object is ``sys.getsizeof``: 56 bytes for a dataclass holding 8 MiB of
    landmarks. Priced that low, the state looked free to move and the blocks
    around it did not, so blocks were moved between workers to where the
    state already was, instead of the state once to where the blocks were.
    """

    __slots__ = ()

    def __sizeof__(self):
        return object.__sizeof__(self) + nbytes(self)


def nbytes(obj) -> int:
    """Bytes of the NumPy and scipy.sparse arrays in ``obj`` (dataclass fields, lists, tuples, dicts)."""
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if sp.issparse(obj):
        return sum(int(getattr(obj, n).nbytes) for n in ("data", "indices", "indptr", "row", "col", "offsets")
                   if hasattr(obj, n))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return sum(nbytes(getattr(obj, f.name)) for f in dataclasses.fields(obj))
    if type(obj) in (list, tuple):
        return sum(nbytes(item) for item in obj)
    if type(obj) is dict:
        return sum(nbytes(item) for item in obj.values())
    return 0


def ship(state):
    """The fitted state as a single graph key, named by its content."""
    return dask.delayed(state, pure=True, traverse=False)


def _shipped_block(state):
    """The state as an argument of ``map_blocks``, one key: a delayed object, or a 0-d array of one block.

    Array expressions' ``map_blocks`` refers to a delayed argument's key but
    leaves its graph out (the key is then missing at compute); an array
    argument's graph it keeps. So there the state is a 0-d array whose one
    block is the state (:func:`array_from_graph`): ``map_blocks`` gives it,
    unconcatenated, to every block's task, as it gives a delayed object's value.
    """
    shipped = ship(state)
    if not expression_mode():
        return shipped, shipped.key
    from dask._task_spec import DataNode

    # a plain value (a state dataclass, a number) is moved to the array's key as it is, and wrapped by dask;
    # a container would be read as a task or keys, so it goes wrapped (its node then keeps the key it was made with)
    value = DataNode((shipped.key,), state) if isinstance(state, (tuple, list, set, frozenset, dict, str)) else state
    block = array_from_graph({(shipped.key,): value}, shipped.key, (), np.empty(()))
    return block, block.name


def _run_block(block, state, block_fn, check):
    if not (isinstance(block, np.ndarray) or sp.issparse(block)):
        # a block of another namespace (CuPy on a GPU) gets the state as shipped: the block function
        # copies it to the device once per process, keyed by this very object (dkapprox.backends._xp.state_on);
        # one thread at a time queues work on a device, and its check is waited for after that
        return _device_turns.run(block, state, block_fn, check, task_threads)
    block, state = byte_aligned(block), byte_aligned(state)
    if check is not None:
        check(block)
    with task_threads():  # BLAS threads shared with the tasks running beside it (dkapprox.engine._blas)
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


def byte_aligned(obj):
    """``obj`` with every NumPy array in it aligned: copies of those that are not, else ``obj`` itself.

    A worker receives arrays (the shipped state, a block made by another
    worker) as views into the message that carried them, at whatever offset
    they landed, often not a multiple of their item size. NumPy computes a
    product of such an array without BLAS, with other rounding: the same
    block gave other bits depending on which worker made it and how its
    inputs travelled (a Nystroem state whose landmarks landed 6 bytes off:
    two undisturbed runs on a LocalCluster differed in 4% of their bytes).
    Looks into dense arrays, scipy.sparse matrices, dataclasses (a state),
    lists and tuples; anything aligned is passed on as it is, not copied.
    """
    if isinstance(obj, np.ndarray):
        return obj if obj.flags.aligned else np.require(obj, requirements="A")
    if sp.issparse(obj):
        parts = [getattr(obj, n) for n in ("data", "indices", "indptr", "row", "col", "offsets") if hasattr(obj, n)]
        return obj if all(p.flags.aligned for p in parts) else obj.copy()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changed = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            new = byte_aligned(value)
            if new is not value:
                changed[f.name] = new
        if not changed:
            return obj
        # a field-for-field copy, not copy.copy: a state's own __reduce__ (if any) is not run again
        clone = object.__new__(type(obj))
        if hasattr(obj, "__dict__"):
            clone.__dict__.update(obj.__dict__)
        for f in dataclasses.fields(obj):
            object.__setattr__(clone, f.name, changed.get(f.name, getattr(obj, f.name)))
        return clone
    if type(obj) in (list, tuple):
        items = [byte_aligned(item) for item in obj]
        return obj if all(a is b for a, b in zip(items, obj)) else type(obj)(items)
    return obj


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
    shipped, state_key = _shipped_block(state)
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


def delayed_blocks(X: da.Array):
    """One delayed object per block of ``X``, in row-major order, over ``X``'s optimized graph.

    What legacy ``to_delayed()`` gives; array expressions have no
    ``to_delayed``, so there the delayed objects are made as it makes them:
    ``X``'s graph optimized (:func:`optimized`) and a ``Delayed`` a block key.
    """
    if not expression_mode():
        return list(X.to_delayed().ravel())
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph

    graph, (keys,) = optimized([X])
    layer = f"delayed-{X.name}"
    graph = HighLevelGraph.from_collections(layer, graph, dependencies=())
    return [Delayed(key, graph, layer=layer) for key in _flat_keys(keys)]


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
    write's (:func:`_nested_blocks`): no block is read ahead of its pass and
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
    from dask._task_spec import List, Task, TaskRef
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
        blocks = [_block_key(k, (i,) + (0,) * (a.ndim - 1)) for a, k in zip(cut, keys)]
        passes[(name, i)] = (chunk, (start, TaskRef(shipped.key)), blocks)
    layer = _nested_blocks(graph, passes)
    layer.update(shipped.__dask_graph__())
    combine_name, combines = f"{funcname(combine_fn)}-{tokenize(token, 'combine')}", []

    def combine(group):
        key = (combine_name, len(combines))
        combines.append(key)
        layer[key] = Task(key, combine_fn, List(*(TaskRef(k) for k in group)))
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
    if expression_mode():  # the graph as compute runs it, named by the keys of its blocks (not X.name)
        graph, (keys,) = optimized([X])
        name = _flat_keys(keys)[0][0]
    else:
        graph, name = X.dask, X.name
    return array_from_graph(graph, name, (sizes,) + X.chunks[1:], X._meta)


def store_blocks(X: da.Array, write_block, blocks, *, name):
    """Call ``write_block(block, index)`` on chosen blocks of ``X``; a delayed count of calls.

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
    (:func:`_nested_blocks`). What blocks share (the state, the source array,
    the writer) stays one key each.

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
    from dask._task_spec import TaskRef
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph

    graph, (keys,) = optimized([X])  # fuse the array's own tasks as compute would
    writer = f"{name}-writer"
    writes = {}
    for index in blocks:
        index = tuple(int(i) for i in index)
        writes[(name, *index)] = (_write_one, (TaskRef(writer), list(index)), [_block_key(keys, index)])
    count = f"{name}-count"
    # one layer: the fused writes and what they share (state, source array), nothing else
    layer = {**_nested_blocks(graph, writes), writer: write_block, count: (len, list(writes))}
    return Delayed(count, HighLevelGraph.from_collections(name, layer, dependencies=[]), layer=name)


def _nested_blocks(graph, tasks):
    """``graph``'s tasks and ``tasks``, each with its blocks' own tasks nested into it.

    ``tasks`` maps a new key to ``(fn, args, blocks)``: the task
    ``fn(*args, *blocks)``, with ``args`` values or ``TaskRef`` s to keys that
    stay their own (a state, a writer) and ``blocks`` keys of ``graph``.
    A block's own tasks are its key's task and, up the dependencies, every
    task whose only dependent is one of them (a row block read, then mapped):
    one such task is nested into the new task as an argument, several are
    fused with it (``GraphNode.fuse``, twice the cost a block). A task two
    blocks need (the shipped state, the source array, a chunk a rechunk
    splits), or that two arrays' blocks share, stays a key of its own, as
    does a block held in memory (a persisted one: a future). Built on dask's
    task spec (dask 2024.12 on; a layer of legacy tuples is converted first).
    """
    from dask._task_spec import Alias, DataNode, GraphNode, Task, TaskRef, convert_legacy_graph

    raw = dict(graph)
    graph = convert_legacy_graph(raw)
    users: dict = {}
    for deps in [task.dependencies for task in graph.values()] + [blocks for _, _, blocks in tasks.values()]:
        for dep in deps:
            users[dep] = users.get(dep, 0) + 1
    absorbed: set = set()

    def own(block):
        """The tasks of ``block`` that serve nothing else, its own first (none if shared or held)."""
        if block not in graph or users.get(block) != 1 or graph[block].block_fusion:
            return []
        found, stack = [block], [block]
        while stack:
            for dep in graph[stack.pop()].dependencies:
                if dep in graph and users.get(dep) == 1 and dep not in absorbed and not graph[dep].block_fusion:
                    found.append(dep)
                    stack.append(dep)
        absorbed.update(found)  # the graph's keys (a value moved to another key keeps its node's old key)
        return [graph[key] for key in found]

    def named(block):
        """The key ``block`` aliases where it is only another name (a block of ``array_from_graph``'s arrays)."""
        while isinstance(graph.get(block), Alias) and users.get(block) == 1 and graph[block].target in graph:
            absorbed.add(block)
            block = graph[block].target
        return block

    nested = {}
    for key, (fn, args, blocks) in tasks.items():
        inputs, fused = [], []
        for block in map(named, blocks):
            tasks_of = own(block)
            if len(tasks_of) == 1 and isinstance(tasks_of[0], (Task, DataNode)):  # the usual case: an argument,
                inputs.append(tasks_of[0])  # a tenth of what a fuse costs
            else:
                inputs.append(TaskRef(block))
                fused += tasks_of
        task = Task(key, fn, *args, *inputs)
        nested[key] = GraphNode.fuse(*fused, task, key=key) if fused else task
    nested.update((key, task) for key, task in graph.items() if key not in absorbed)
    # a persisted block is a future, which the conversion drops (an alias of itself): it stays as it was
    nested.update((key, value) for key, value in raw.items() if key not in graph)
    return nested


def written_keys(count) -> list:
    """The keys of the write tasks under a :func:`store_blocks` count, in the order they were listed.

    Computed on their own (``client.get(count.dask, keys, sync=False)``), each
    result can be released as soon as it finishes: a worker lost later then
    takes no finished write with it, and no block already written is written
    again. The count itself holds every result until the last one is there.
    """
    layer = count.dask.layers.get(str(count.key).removesuffix("-count"), {})
    task = layer.get(count.key) if hasattr(layer, "get") else None
    if not (isinstance(task, tuple) and len(task) == 2 and task[0] is len):
        raise ValueError(f"{count.key} is not the count of a store_blocks write")
    return list(task[1])


def _write_one(write_block, index, block):
    write_block(block, tuple(index))
    return 1


def shipped_states(collection, *, min_bytes=2**20) -> list:
    """Keys of the fitted states of at least ``min_bytes`` shipped into ``collection``'s graph.

    A runner can spread these to every worker before the blocks need them
    (``dkapprox.cluster.run(..., spread=)``): left to the blocks, every worker
    fetches a state from the one worker that first holds it. Only materialized
    layers are looked at (an optimized graph is one: a pass over its values,
    about 0.1 us each); a state always sits in one, as :func:`ship` makes it.
    """
    found = []
    for mapping in _materialized(collection.__dask_graph__()):
        for key, value in mapping.items():
            value = getattr(value, "value", value)  # a DataNode wraps literal values
            if isinstance(value, SizedState) and nbytes(value) >= min_bytes:
                found.append(key)
    return found


def graph_constants(X: da.Array, predicate, *, max_layer_size=4):
    """Objects held as plain values in ``X``'s graph (e.g. the zarr array under ``from_array``).

    Only small materialized layers are looked at (the ones ``from_array`` and
    ``delayed`` make), so this costs nothing on large graphs. Array
    expressions give a plain dict, the whole graph materialized: each of its
    values is looked at (about 0.1 us each).
    """
    found = []
    for mapping in _materialized(X.__dask_graph__(), max_layer_size):
        for value in mapping.values():
            value = getattr(value, "value", value)  # a DataNode wraps literal values
            if predicate(value):
                found.append(value)
    return found


def _materialized(graph, max_layer_size=None) -> list:
    """The mappings of ``graph`` whose values can be looked at without materializing anything.

    A HighLevelGraph (legacy dask.array, delayed): its materialized layers,
    of at most ``max_layer_size`` keys if given. A plain dict (array
    expressions' ``__dask_graph__()``, already materialized): the whole of it.
    """
    layers = getattr(graph, "layers", None)
    if layers is None:
        return [graph]
    mappings = [getattr(layer, "mapping", None) for layer in layers.values()]
    return [m for m in mappings if isinstance(m, dict) and (max_layer_size is None or len(m) <= max_layer_size)]
