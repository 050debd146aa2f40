"""What depends on dask's graph mode and its private task spec, in one place.

dask.array has two implementations: the legacy graph of layers and array expressions ("query
planning", ``array.query-planning``). The engine builds the same graphs in both, and only this
module asks which one is on (:func:`expression_mode`) or imports dask's private names
(``dask._task_spec``, ``dask.array._array_expr``, ``collections_to_expr``): when dask changes
them, this is the one module to change. The rest of the engine reads keys and graphs through it.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np


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


def from_zarr(z) -> da.Array:
    """A Zarr array as a dask array, one block a chunk, lazily read.

    Array expressions have no ``from_zarr``: there it is ``from_array`` of the
    zarr array, aligned to its chunks, as ``from_zarr`` does.
    """
    return da.from_array(z, chunks=z.chunks) if expression_mode() else da.from_zarr(z)


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


def graph_of_blocks(X: da.Array):
    """``X``'s graph and the name of its block keys, for :func:`array_from_graph` to wrap again.

    Legacy: ``X.dask`` and ``X.name``. Array expressions: the graph as compute
    runs it, named by the keys of its blocks (an expression's name is not its
    lowered keys' name).
    """
    if not expression_mode():
        return X.dask, X.name
    graph, (keys,) = optimized([X])
    return graph, flat_keys(keys)[0][0]


def block_key(keys, index):
    """The key of block ``index`` (a tuple of block indices) in nested ``__dask_keys__()`` lists."""
    for i in index:
        keys = keys[i]
    return keys


def flat_keys(keys) -> list:
    """Nested ``__dask_keys__()`` lists as one list, in row-major order."""
    return [k for sub in keys for k in flat_keys(sub)] if isinstance(keys, list) else [keys]


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
    return [Delayed(key, graph, layer=layer) for key in flat_keys(keys)]


def block_argument(shipped, value):
    """The delayed ``shipped`` (of ``value``) as an argument of ``map_blocks``, one key: ``(argument, key)``.

    Array expressions' ``map_blocks`` refers to a delayed argument's key but
    leaves its graph out (the key is then missing at compute); an array
    argument's graph it keeps. So there the value is a 0-d array whose one
    block is the value (:func:`array_from_graph`): ``map_blocks`` gives it,
    unconcatenated, to every block's task, as it gives a delayed object's value.
    """
    if not expression_mode():
        return shipped, shipped.key
    from dask._task_spec import DataNode

    # a plain value (a state dataclass, a number) is moved to the array's key as it is, and wrapped by dask;
    # a container would be read as a task or keys, so it goes wrapped (its node then keeps the key it was made with)
    node = DataNode((shipped.key,), value) if isinstance(value, (tuple, list, set, frozenset, dict, str)) else value
    block = array_from_graph({(shipped.key,): node}, shipped.key, (), np.empty(()))
    return block, block.name


def materialized(graph, max_layer_size=None) -> list:
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


def literal(value):
    """``value`` itself where the graph holds it wrapped (a task spec ``DataNode`` wraps literal values)."""
    return getattr(value, "value", value)


def ref(key):
    """A reference to ``key`` as an argument of a task of :func:`nested_blocks` (its value at run time)."""
    from dask._task_spec import TaskRef

    return TaskRef(key)


def combine_task(key, fn, keys):
    """The task ``key``: ``fn`` of the list of the values of ``keys``."""
    from dask._task_spec import List, Task, TaskRef

    return Task(key, fn, List(*(TaskRef(k) for k in keys)))


def nested_blocks(graph, tasks):
    """``graph``'s tasks and ``tasks``, each with its blocks' own tasks nested into it.

    ``tasks`` maps a new key to ``(fn, args, blocks)``: the task
    ``fn(*args, *blocks)``, with ``args`` values or :func:`ref` s to keys that
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
