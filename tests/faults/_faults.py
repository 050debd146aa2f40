"""What the fault tests share: seeded slow input, byte-exact comparison, real kills, progress of a run.

Importable by name from the tests of this folder and from LocalCluster worker
processes (tests/faults/conftest.py puts this folder on ``sys.path``, which
workers inherit when they are spawned): worker-side functions (the input
blocks) live here, not in test modules.

Progress and worker facts are read from the scheduler's own state
(``Client.run_on_scheduler``), never guessed from the clock: a fault is
injected when a known fraction of a run's tasks is done, and a test asserts
that the run was still outstanding then.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from dask.utils import key_split
from distributed.core import Status
from distributed.diagnostics.plugin import SchedulerPlugin

from dkapprox import engine

# Scheduler task states of a task that still has to run (again). A task that
# ran is "memory" (kept) or "released"/forgotten (consumed by its dependents).
OUTSTANDING = ("waiting", "queued", "processing", "no-worker")


# -- input ----------------------------------------------------------------------------------------

def input_rows(i, start, stop, n_cols, seed, pause):
    """Row block ``i`` of the input: seeded by the block index, so any worker remakes it exactly.

    ``pause`` seconds stand for a read from storage: they make a run last long
    enough for a fault to land in its middle, whatever the estimator costs.
    """
    if pause:
        time.sleep(pause)
    return np.random.default_rng([seed, i]).random((stop - start, n_cols))


def target_rows(i, start, stop, n_cols, seed):
    """A regression target for :func:`input_rows`'s block ``i`` (same rows, no pause), shape (rows, 1)."""
    X = input_rows(i, start, stop, n_cols, seed, 0)
    return (X[:, 0] ** 2 + np.sin(3 * X[:, 1]) - X[:, 2])[:, None]


def slow_input(n_blocks, block_rows, n_cols, *, seed=0, pause=0.005):
    """A lazy ``(n_blocks * block_rows, n_cols)`` float64 array made on the workers, block by block."""
    return engine.generate_rows(input_rows, n_blocks * block_rows, n_cols, chunk_rows=block_rows,
                                dtype=np.float64, name="fault-input", args=(n_cols, seed, pause))


def input_blocks(n_blocks, block_rows, n_cols, *, seed=0):
    """The same blocks as :func:`slow_input`, made here in NumPy (for known answers)."""
    for i in range(n_blocks):
        yield input_rows(i, i * block_rows, (i + 1) * block_rows, n_cols, seed, 0)


def slow_target(n_blocks, block_rows, n_cols, *, seed=0):
    """The lazy 1-D target matching :func:`slow_input` (same seed and blocks)."""
    y = engine.generate_rows(target_rows, n_blocks * block_rows, 1, chunk_rows=block_rows, dtype=np.float64,
                             name="fault-target", args=(n_cols, seed))
    return y[:, 0]


# -- bytes ----------------------------------------------------------------------------------------

def _buffers(a):
    """The buffers that make an array: shape, then values (data, indices, indptr of a CSR matrix)."""
    if sp.issparse(a):
        a = a.tocsr()
        return [np.asarray(a.shape, dtype=np.int64), a.data, a.indices, a.indptr]
    a = np.asarray(a)
    return [np.asarray(a.shape, dtype=np.int64), a]


def _raw(buffer):
    return np.frombuffer(np.ascontiguousarray(buffer).tobytes(), dtype=np.uint8)


def differing_bytes(a, b) -> int:
    """How many bytes differ between two arrays (dense or scipy.sparse), position by position.

    Shape, dtype and (for sparse matrices) the index arrays count too: a
    different dtype makes every byte differ, bytes past the end of the
    shorter buffer differ, a dense array against a sparse one differs in all
    its bytes. 0 means the two are the same bytes.
    """
    first, second = _buffers(a), _buffers(b)
    if len(first) != len(second):
        return max(sum(x.nbytes for x in first), sum(y.nbytes for y in second))
    total = 0
    for x, y in zip(first, second):
        if x.dtype != y.dtype:
            total += max(x.nbytes, y.nbytes)
            continue
        rx, ry = _raw(x), _raw(y)
        n = min(rx.size, ry.size)
        total += int(np.count_nonzero(rx[:n] != ry[:n])) + abs(rx.size - ry.size)
    return total


def checksum(blocks) -> str:
    """sha256 of the bytes of a sequence of arrays (dense or sparse), in order, dtypes and shapes included."""
    digest = hashlib.sha256()
    for block in blocks:
        for buffer in _buffers(block):
            digest.update(buffer.dtype.str.encode())
            digest.update(_raw(buffer).tobytes())
    return digest.hexdigest()


# -- the scheduler's view ---------------------------------------------------------------------------

def _task_states(dask_scheduler, prefixes):
    counts = Counter()
    for ts in dask_scheduler.tasks.values():
        if ts.prefix.name in prefixes:
            counts[ts.state] += 1
    return dict(counts)


def task_states(client, *prefixes) -> dict:
    """How many of the scheduler's tasks named ``prefix-...`` are in each state."""
    return client.run_on_scheduler(_task_states, prefixes=prefixes)


def _workers(dask_scheduler):
    return {ws.address: {"pid": ws.pid, "name": ws.name, "processing": len(ws.processing),
                         "in_memory": len(ws.has_what)}
            for ws in dask_scheduler.workers.values() if ws.status.name == "running"}


def running_workers(client) -> dict:
    """``{address: {pid, name, processing, in_memory}}`` of the workers the scheduler has running."""
    return client.run_on_scheduler(_workers)


def _n_tasks(dask_scheduler):
    return len(dask_scheduler.tasks)


def wait_until_idle(client, timeout=120):
    """Until the scheduler holds no task: a run's keys are forgotten, so a rerun computes them again."""
    deadline = time.monotonic() + timeout
    while (n := client.run_on_scheduler(_n_tasks)):
        assert time.monotonic() < deadline, f"the scheduler still holds {n} tasks after {timeout} s"
        time.sleep(0.01)


def wait_for_running(client, n, *, exclude_pids=(), timeout=120):
    """Until ``n`` workers run, none of them one of ``exclude_pids`` (killed processes); their info."""
    deadline = time.monotonic() + timeout
    while True:
        workers = running_workers(client)
        if len(workers) == n and not {w["pid"] for w in workers.values()} & set(exclude_pids):
            return workers
        assert time.monotonic() < deadline, f"{len(workers)} of {n} workers back after {timeout} s: {workers}"
        time.sleep(0.02)


@dataclass
class Progress:
    """A run seen from the scheduler: tasks of one prefix done and still to run."""

    total: int
    done: int
    outstanding: int
    states: dict


def wait_for_progress(client, prefix, total, fraction=0.5, *, timeout=120, poll=0.005) -> Progress:
    """Block until ``fraction`` of a run's ``total`` tasks named ``prefix`` are done, the run still going.

    "Done" is the scheduler's count: tasks in memory or released after use
    (``total`` minus those waiting, queued, processing or without a worker).
    Fails if the run is never seen with outstanding tasks, or is seen
    finished: a fault injected then would not land in the middle of it.
    """
    deadline = time.monotonic() + timeout
    seen = False
    while True:
        states = task_states(client, prefix)
        outstanding = sum(states.get(s, 0) for s in OUTSTANDING)
        assert sum(states.values()) <= total, (prefix, total, states)
        if outstanding:
            seen = True
            if total - outstanding >= fraction * total:
                return Progress(total, total - outstanding, outstanding, states)
        elif seen:
            raise AssertionError(f"the run of {prefix} finished before {fraction:.0%} was seen: {states}")
        assert time.monotonic() < deadline, f"{prefix}: not {fraction:.0%} done after {timeout} s: {states}"
        time.sleep(poll)


def recomputed(stream, *prefixes) -> int:
    """Task executions beyond one per key (tasks run again after their result was lost), from a task stream."""
    runs = Counter(str(t["key"]) for t in stream if key_split(t["key"]) in prefixes)
    return sum(n - 1 for n in runs.values())


def executed_keys(stream, *prefixes) -> int:
    """Distinct keys of the given prefixes that finished at least once, from a task stream."""
    return len({str(t["key"]) for t in stream if key_split(t["key"]) in prefixes})


# a retired worker's nanny: closing for a few seconds after retire_workers returns, then closed
GONE = (Status.closing_gracefully, Status.closing, Status.closed, Status.failed)


def restore(cluster, client, n_workers, timeout=120):
    """Back to ``n_workers`` running workers and an idle scheduler.

    A killed worker comes back by itself (its nanny restarts it); a retired
    one's nanny is closed for good: its entry is dropped from the cluster's
    spec (so that it is forgotten) and a new worker is started in its place.
    """
    if len(cluster.workers) < len(cluster.worker_spec):  # a nanny the cluster closed: started again
        cluster.scale(len(cluster.worker_spec))
    closed = [name for name, w in cluster.workers.items() if w.status in GONE]
    if closed:
        for name in closed:
            cluster.worker_spec.pop(name, None)
        cluster.scale(len(cluster.worker_spec))  # the spec is kept; the closed nannies are dropped
        deadline = time.monotonic() + timeout
        while set(closed) & set(cluster.workers):
            assert time.monotonic() < deadline, f"the retired workers {closed} were never dropped"
            time.sleep(0.02)
        cluster.scale(n_workers)
    deadline = time.monotonic() + timeout
    while len(running_workers(client)) != n_workers:
        assert time.monotonic() < deadline, f"not {n_workers} workers after {timeout} s"
        time.sleep(0.02)
    wait_until_idle(client, timeout)


# -- faults -----------------------------------------------------------------------------------------

def sigkill(pid):
    """SIGKILL a worker process (its nanny, in this process, notices and starts a new one)."""
    os.kill(pid, signal.SIGKILL)


def busiest_worker(client) -> tuple[str, dict]:
    """The running worker holding the most results (then: running the most tasks): killing it loses work."""
    workers = running_workers(client)
    assert workers, "no worker is running"
    return max(workers.items(), key=lambda item: (item[1]["in_memory"], item[1]["processing"]))


def _kill_sole_holder(prefix, dask_scheduler=None):
    """SIGKILL the worker that alone holds a result named ``prefix-...`` which a waiting task still needs.

    Runs in the scheduler's event loop, so the choice and the kill see one state: no task that
    needs the result has been sent to a worker yet (a task is sent once all it needs is done,
    and only then does its worker fetch copies), so no other worker holds a copy, and the
    death loses work that must be computed again. Returns None when no such result exists now.
    """
    for ts in dask_scheduler.tasks.values():
        if (ts.state == "memory" and key_split(ts.key) == prefix and len(ts.who_has) == 1 and ts.dependents
                and all(dep.state == "waiting" for dep in ts.dependents)):
            (ws,) = ts.who_has
            if ws.status.name == "running":
                os.kill(ws.pid, signal.SIGKILL)
                return {"address": ws.address, "pid": ws.pid, "in_memory": len(ws.has_what), "key": str(ts.key)}
    return None


def sigkill_sole_holder(client, prefix, *, timeout=60, poll=0.002) -> dict:
    """SIGKILL a worker whose death loses a needed result named ``prefix-...`` (see :func:`_kill_sole_holder`).

    A choice made from the client and a kill after it race the run: in between, the task that
    needs a running total can start on the other worker, which then holds a copy, and the death
    loses nothing (a CI run saw exactly that). Polls until such a result exists; its info.
    """
    deadline = time.monotonic() + timeout
    while (victim := client.run_on_scheduler(_kill_sole_holder, prefix)) is None:
        assert time.monotonic() < deadline, f"no worker held a needed {prefix} result alone for {timeout} s"
        time.sleep(poll)
    return victim


class Removals(SchedulerPlugin):
    """Counts the workers the scheduler removed (each death of a worker process is one)."""

    name = "dkapprox-removals"

    def __init__(self):
        self.removed = []

    def remove_worker(self, scheduler, worker, **kwargs):
        self.removed.append(worker)


def _removed(dask_scheduler, name):
    return list(dask_scheduler.plugins[name].removed)


def removed_workers(client) -> list:
    """Addresses of the workers removed since :class:`Removals` was registered."""
    return client.run_on_scheduler(_removed, name=Removals.name)
