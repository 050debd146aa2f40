"""The fitted state in the graph: one key, weighed by its arrays, realigned where it lands, found again.

An estimator's block function needs a small frozen *state* (a few NumPy arrays). It enters a
graph once (:func:`ship`: ``dask.delayed(state, pure=True)``; with array expressions the one
block of a 0-d array, :func:`shipped_argument`), never as the estimator or a bound method, so
each worker deserializes it once. :class:`SizedState` makes dask's scheduler weigh it by the
arrays it holds; :func:`byte_aligned` realigns it (and a block) where a worker received it;
:func:`shipped_states` finds the large ones in a graph, so that a runner can spread them first.
"""

from __future__ import annotations

import dataclasses

import dask
import numpy as np
import scipy.sparse as sp

from ._dask_compat import block_argument, literal, materialized

#: the arrays a scipy.sparse matrix is made of, whatever its format
_SPARSE_PARTS = ("data", "indices", "indptr", "row", "col", "offsets")


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


def _sparse_parts(matrix) -> list:
    return [getattr(matrix, n) for n in _SPARSE_PARTS if hasattr(matrix, n)]


def nbytes(obj) -> int:
    """Bytes of the NumPy and scipy.sparse arrays in ``obj`` (dataclass fields, lists, tuples, dicts)."""
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if sp.issparse(obj):
        return sum(int(part.nbytes) for part in _sparse_parts(obj))
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


def shipped_argument(state):
    """The state as an argument of ``map_blocks``, one key whatever the graph mode: ``(argument, key)``."""
    return block_argument(ship(state), state)


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
        return obj if all(p.flags.aligned for p in _sparse_parts(obj)) else obj.copy()
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


def shipped_states(collection, *, min_bytes=2**20) -> list:
    """Keys of the fitted states of at least ``min_bytes`` shipped into ``collection``'s graph.

    A runner can spread these to every worker before the blocks need them
    (``dkapprox.cluster.run(..., spread=)``): left to the blocks, every worker
    fetches a state from the one worker that first holds it. Only materialized
    layers are looked at (an optimized graph is one: a pass over its values);
    a state always sits in one, as :func:`ship` makes it.
    """
    found = []
    for mapping in materialized(collection.__dask_graph__()):
        for key, value in mapping.items():
            value = literal(value)
            if isinstance(value, SizedState) and nbytes(value) >= min_bytes:
                found.append(key)
    return found


def graph_constants(X, predicate, *, max_layer_size=4):
    """Objects held as plain values in ``X``'s graph (e.g. the zarr array under ``from_array``).

    Only small materialized layers are looked at (the ones ``from_array`` and
    ``delayed`` make), so this costs nothing on large graphs. Array
    expressions give a plain dict, the whole graph materialized: each of its
    values is looked at.
    """
    return [value for mapping in materialized(X.__dask_graph__(), max_layer_size)
            for value in map(literal, mapping.values()) if predicate(value)]
