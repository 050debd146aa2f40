"""Whether a job's blocks fit its workers' memory, and a clear error when they do not.

What a featurization task holds, measured on worker processes: computing a
block of features took 1.02x (random projections, RBF) to 1.2x
(PolynomialCountSketch) of its output block above the idle worker (40,000 x
16 float32 in, 1,024 features out); writing to Zarr is a task of its own, so
a worker can hold one block's features waiting for their write while it
computes the next (78 MiB blocks of RBF features: 160 MiB above idle). So the
memory of a task is counted per row: each row-aligned array of its graph
(input and output, as declared by their chunks) plus one more output row;
blocks of arrays chunked otherwise (e.g. input chunks of other row counts)
are added whole.

Against that stands each worker's budget per thread: dask pauses a worker at
80% of its memory limit (``distributed.worker.memory.pause``) and its nanny
kills it at 95% (``terminate``); an idle worker with dkapprox imported already
holds about 300 MiB. Before anything is submitted:

- an output block larger than any worker's memory limit (up to the kill
  line) is refused with a :class:`~dkapprox.errors.WorkerMemoryError`, rather
  than killing workers that other jobs on a shared cluster may be using;
- so is a cluster whose every worker is idle above the pause line (a memory
  limit below what the worker itself holds): no task would ever start, and
  the job would wait forever;
- a block that needs more than the tightest worker's budget is a warning in
  the log: the estimate is conservative, so the job still runs.

If workers die anyway, distributed's ``KilledWorker`` becomes a
``WorkerMemoryError`` naming the block, the memory limit and the rows per block
that fit (85% of the budget: an idle worker's memory varies by 10-20 MiB
from one start to the next).
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import time
from dataclasses import dataclass

import numpy as np

from ..errors import TemporaryFailure, WorkerMemoryError
from ..utils import format_size

logger = logging.getLogger("dkapprox.cluster")
SUGGESTION_MARGIN = 0.85

__all__ = ["BlockMemory", "MemoryCheck", "WorkerMemory", "check_memory", "explain_worker_deaths"]



def _round_down(n: int) -> int:
    """Two significant digits, rounded down (10,832 -> 10,000; 734 -> 730): a number to type."""
    if n < 100:
        return max(int(n), 0)
    step = 10 ** (len(str(int(n))) - 2)
    return int(n) // step * step


@dataclass(frozen=True)
class BlockMemory:
    """What one task of a blockwise job holds: its largest output block and its bytes per row.

    ``row_bytes`` counts each row-aligned array of the graph (input, output)
    plus one more output row; ``fixed_bytes`` counts the largest block of every
    array chunked otherwise, which a task reads whatever its rows.
    """

    shape: tuple
    dtype: str
    row_bytes: int
    fixed_bytes: int = 0

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the largest output block."""
        return int(np.prod(self.shape)) * self.itemsize

    @property
    def need(self) -> int:
        """Bytes a task of the largest block is expected to hold."""
        return self.shape[0] * self.row_bytes + self.fixed_bytes

    def rows_within(self, budget: int) -> int:
        """Rows per block whose tasks fit ``budget`` bytes (0 if none do)."""
        return _round_down(max(budget - self.fixed_bytes, 0) // self.row_bytes)

    def describe(self) -> str:
        shape = " x ".join(f"{n:,}" for n in self.shape)
        return (f"{shape} {self.dtype} ({format_size(self.nbytes)}; a task holds about {format_size(self.need)} "
                "with its input)")

    @classmethod
    def of(cls, features) -> BlockMemory:
        """The block memory of a 2-D dask array with known chunks (the output of a job)."""
        rows, out_row = features.chunks[0], int(features.shape[1]) * features.dtype.itemsize
        row_bytes, fixed = 0, 0
        # legacy dask.array's layers declare their chunks; array expressions' graph is a plain dict, which declares none
        for layer in getattr(features.__dask_graph__(), "layers", {}).values():
            annotations = getattr(layer, "collection_annotations", None) or {}
            chunks, dtype = annotations.get("chunks"), annotations.get("dtype")
            if not chunks or dtype is None:
                continue
            itemsize = np.dtype(dtype).itemsize
            if tuple(chunks[0]) == tuple(rows):
                row_bytes += int(np.prod([sum(axis) for axis in chunks[1:]])) * itemsize
            else:
                fixed += int(np.prod([max(axis) for axis in chunks])) * itemsize
        row_bytes = max(row_bytes, out_row) + out_row
        shape = (int(max(rows)), int(features.shape[1]))
        return cls(shape, features.dtype.name, int(row_bytes), int(fixed))


@dataclass(frozen=True)
class WorkerMemory:
    """The memory of a cluster's workers that have a limit, as it matters for one task.

    ``limit``, ``in_use``, ``threads`` and ``pause`` are the tightest worker's
    (least budget); ``budget`` is what one task may hold there before dask
    pauses the worker: ``(limit * pause - in_use) / threads``, with ``in_use``
    the memory the worker holds that spilling cannot free. ``largest_limit``
    and ``terminate`` (the fraction at which a nanny kills its worker) bound
    what any task could ever hold. ``stuck`` of all ``workers`` are idle above
    their pause line: they start no task.
    """

    limit: int
    in_use: int
    threads: int
    pause: float
    budget: int
    largest_limit: int
    terminate: float
    workers: int
    stuck: int = 0

    def describe(self) -> str:
        return (f"the workers' memory limit is {format_size(self.limit)} with {format_size(self.in_use)} held by an "
                f"idle worker" + (f" ({self.threads} threads)" if self.threads > 1 else ""))

    @classmethod
    def of(cls, client) -> WorkerMemory | None:
        """Asks every worker (one ``Client.run``); None if no worker has a memory limit."""
        answers = [f for f in client.run(_worker_memory, on_error="return").values() if isinstance(f, dict)]
        facts = [f for f in answers if f["limit"]]
        if not facts:
            return None
        for f in facts:
            f["budget"] = (f["limit"] * f["pause"] - f["in_use"]) / f["threads"]
        tightest = min(facts, key=lambda f: f["budget"])
        stuck = sum(1 for f in facts if f["executing"] == 0 and f["in_use"] >= f["limit"] * f["pause"])
        return cls(limit=int(tightest["limit"]), in_use=int(tightest["in_use"]), threads=int(tightest["threads"]),
                   pause=float(tightest["pause"]), budget=int(tightest["budget"]),
                   largest_limit=int(max(f["limit"] for f in facts)),
                   terminate=float(max(f["terminate"] for f in facts)), workers=len(answers), stuck=stuck)


def _worker_memory(dask_worker):
    """One worker's memory facts, run there by ``Client.run`` (which also imports dkapprox there)."""
    import dask

    manager = dask_worker.memory_manager
    pause = manager.memory_pause_fraction or manager.memory_spill_fraction or 1.0
    terminate = dask.config.get("distributed.worker.memory.terminate") or 1.0
    process = dask_worker.monitor.get_process_memory()
    return {"limit": int(manager.memory_limit or 0), "pause": float(pause), "terminate": float(terminate),
            "in_use": int(max(process - dask_worker.state.nbytes, 0)), "threads": int(dask_worker.state.nthreads),
            "executing": int(dask_worker.state.executing_count)}


@dataclass(frozen=True)
class MemoryCheck:
    """A job's block memory and its cluster's worker memory, as checked when the job was planned."""

    blocks: BlockMemory
    workers: WorkerMemory | None

    @property
    def suggested_rows(self) -> int | None:
        """Rows per block within 85% of the tightest worker's budget (an idle worker's memory varies
        by 10-20 MiB from one cluster start to the next), rounded down to two digits."""
        if self.workers is None:
            return None
        return self.blocks.rows_within(int(self.workers.budget * SUGGESTION_MARGIN)) or None

    def error(self, facts: str, *, attempts=None, killed=None) -> WorkerMemoryError:
        rows = self.suggested_rows
        if rows:
            advice = (f"rechunk the input to at most {rows:,} rows per block (e.g. X.rechunk({{0: {rows}}})) "
                      "or give workers more memory")
        elif self.workers is not None:
            wanted = (self.workers.in_use + self.blocks.need * self.workers.threads) / self.workers.pause
            advice = (f"fewer rows per block do not help: give workers a memory limit of at least "
                      f"{format_size(wanted)} for blocks of {self.blocks.shape[0]:,} rows")
        else:
            advice = "rechunk the input to fewer rows per block or give workers more memory"
        return WorkerMemoryError(facts, advice, suggested_rows=rows, block_shape=self.blocks.shape,
                                 block_bytes=self.blocks.nbytes,
                                 memory_limit=None if self.workers is None else self.workers.limit, attempts=attempts,
                                 killed=killed)


def active_client():
    """The distributed Client dask would compute on now, or None (threads, processes, no client)."""
    if "distributed" not in sys.modules:
        return None
    import dask.base
    from distributed import Client

    client = getattr(dask.base.get_scheduler(), "__self__", None)
    if isinstance(client, Client) and not client.asynchronous and client.status == "running":
        return client
    return None


def check_memory(features, client=None) -> MemoryCheck | None:
    """Check a job's blocks against its workers before it runs (None without a distributed client).

    Raises
    ------
    WorkerMemoryError
        No worker's memory limit could hold one block's input and output, or
        every worker is paused while idle (a job would wait forever).
    """
    client = client or active_client()
    if client is None:
        return None
    blocks = BlockMemory.of(features)
    check = MemoryCheck(blocks, WorkerMemory.of(client))
    workers = check.workers
    if workers is None:
        return check
    if blocks.nbytes > workers.largest_limit * workers.terminate:
        raise check.error(
            f"blocks of {blocks.describe()} cannot fit any worker: the largest worker's memory limit is "
            f"{format_size(workers.largest_limit)} and its nanny kills it at {workers.terminate:.0%} of that; "
            "nothing was computed")
    if workers.stuck == workers.workers:
        time.sleep(1)  # memory freed a moment ago may still be returned: ask once more
        workers = WorkerMemory.of(client)
        if workers is not None and workers.stuck == workers.workers:
            raise MemoryCheck(blocks, workers).error(
                f"every worker is idle above dask's pause line ({format_size(workers.in_use)} of its "
                f"{format_size(workers.limit)} memory limit), so no task would ever start; nothing was computed")
    if blocks.need > workers.budget:
        rows = check.suggested_rows
        logger.warning("blocks of %s rows need about %s per task and the tightest worker has %s per thread: "
                       "workers may run out of memory%s", f"{blocks.shape[0]:,}", format_size(blocks.need),
                       format_size(max(workers.budget, 0)), f" ({rows:,} rows per block would fit)" if rows else "")
    return check


def worker_death_error(killed, check: MemoryCheck | None = None, objs=(), *, since=0.0, client=None):
    """The error for distributed's KilledWorker: which block, what limit, which rows fit.

    A WorkerMemoryError if a nanny killed the task's last worker for its
    memory (distributed's ``worker-restart-memory`` event, since ``since``);
    otherwise a plain TemporaryFailure that says the workers were lost some
    other way (killed, crashed), so smaller blocks are not the answer. With a
    ``check`` (a write planned by dkapprox.io) the block and the rows that fit
    are known; otherwise the block is looked up by the task's key.
    """
    attempts = killed.allowed_failures + 1
    head = f"workers died repeatedly while running {killed.task!r} ({attempts} attempts"
    kill = _memory_kill(killed, since, client)
    if kill is None:
        return TemporaryFailure(f"{head}), not for memory (no nanny killed the last one over its memory limit): "
                                "the cluster lost them; rerun when it is healthy (finished blocks are kept)")
    limit = int(getattr(killed.last_worker, "memory_limit", 0) or 0)
    head += f"; out of memory: its nanny killed the last one at {format_size(kill.get('rss', 0))})"
    if check is not None:
        where = check.workers.describe() if check.workers else (
            f"the workers' memory limit is {format_size(limit)}" if limit else "")
        return check.error(f"{head}: its blocks are {check.blocks.describe()}" + (f" and {where}" if where else ""),
                           attempts=attempts, killed=killed)
    block = _task_block(killed.task, objs)
    facts, advice, shape, nbytes = head, "lower the rows per block of the input", None, None
    if block is not None:
        shape, dtype = block
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        facts += f": it works on a block of {' x '.join(f'{n:,}' for n in shape)} {dtype} ({format_size(nbytes)})"
        advice += f" (now {shape[0]:,})"
    if limit:
        facts += f" on workers with a {format_size(limit)} memory limit"
    return WorkerMemoryError(facts, f"{advice} or give workers more memory", block_shape=shape, block_bytes=nbytes,
                             memory_limit=limit or None, attempts=attempts, killed=killed)


def _memory_kill(killed, since, client, wait=1.0):
    """The nanny's ``worker-restart-memory`` event for the task's last worker since ``since``, or None.

    The nanny logs it before it terminates the worker; it is waited for a
    moment in case it is still on its way to the scheduler.
    """
    client = client or active_client()
    address = getattr(killed.last_worker, "address", None)
    if client is None or address is None:
        return None
    deadline = time.monotonic() + wait
    while True:
        with contextlib.suppress(Exception):  # a lost scheduler answers nothing: not for memory, as far as we know
            for stamp, event in client.get_events("worker-restart-memory"):
                if stamp >= since and isinstance(event, dict) and event.get("worker") == address:
                    return event
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def _task_block(task, objs):
    """(shape, dtype) of the array block a task computes or reads, if the graphs of ``objs`` say.

    The block's shape travels with its array: every dask array layer carries
    its chunks as collection annotations. A graph cut into delayed blocks (a
    fit's reductions) has lost them, so whoever computes one passes the arrays
    it reads among ``objs`` (see :func:`dkapprox.inputs._lazy.compute`). The task
    itself is looked at first, then the tasks nested in it (a pass or a write
    holds its block's read and map, dkapprox.engine), then what it reads.
    """
    import dask

    arrays = {}  # key name -> (chunks, dtype) of the layers that declare their chunks
    nested, read = [], []
    for obj in objs:
        if not dask.is_dask_collection(obj):
            continue
        graph = obj.__dask_graph__()
        for name, layer in getattr(graph, "layers", {}).items():
            annotations = getattr(layer, "collection_annotations", None) or {}
            if annotations.get("chunks"):
                arrays.setdefault(annotations.get("name", name), (annotations["chunks"], annotations.get("dtype")))
        with contextlib.suppress(Exception):
            node = graph[task]
            nested += _nested_keys(node)
            read += sorted(getattr(node, "dependencies", ()), key=str)
    for key in [task, *nested, *read]:
        if not (isinstance(key, tuple) and key and key[0] in arrays):
            continue
        chunks, dtype = arrays[key[0]]
        if len(chunks) == len(key) - 1:
            shape = tuple(int(axis[i]) if not math.isnan(axis[i]) else math.nan for axis, i in zip(chunks, key[1:]))
            if not any(math.isnan(n) for n in shape):
                return shape, np.dtype(dtype or "f8").name
    return None


def _nested_keys(node) -> list:
    """Keys of the tasks nested in a task spec ``node`` (arguments, a fused subgraph), outermost first."""
    from dask._task_spec import GraphNode

    found, queue = [], [node]
    while queue:
        current = queue.pop(0)
        items = list(getattr(current, "args", ())) + list(getattr(current, "kwargs", {}).values())
        while items:
            item = items.pop(0)
            if isinstance(item, GraphNode):
                if item is not node and getattr(item, "key", None) is not None:
                    found.append(item.key)
                queue.append(item)
            elif isinstance(item, dict):  # GraphNode.fuse's subgraph, {key: task}
                items += list(item.values())
            elif isinstance(item, (list, tuple)):
                items += list(item)
    return found


@contextlib.contextmanager
def explain_worker_deaths(check: MemoryCheck | None = None, objs=(), client=None):
    """Turn distributed's KilledWorker raised inside into a WorkerMemoryError (with ``check``'s facts)
    if its workers went over their memory limit, else into a TemporaryFailure.

    An error already explained without a ``check`` (by a nested compute) is
    explained again with it.
    """
    since = time.time() - 1.0  # event times are the scheduler's clock
    try:
        yield
    except WorkerMemoryError as exc:
        if check is None or exc.killed is None:
            raise
        raise worker_death_error(exc.killed, check, since=since, client=client) from exc.killed
    except Exception as exc:
        killed_type = getattr(sys.modules.get("distributed"), "KilledWorker", None)
        if killed_type is None or not isinstance(exc, killed_type):
            raise
        raise worker_death_error(exc, check, objs, since=since, client=client) from exc
