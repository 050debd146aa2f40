"""Run a lazy job on a Client: a progress bar, worker deaths as WorkerMemoryError, memory watch."""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import threading
from concurrent.futures import CancelledError
from dataclasses import dataclass, field

from ..errors import ClusterConnectError


def run(client, lazy, *, progress=False, memory=None, parts=None, spread=()):
    """Compute ``lazy`` (a dask collection or delayed) on ``client`` and return its result.

    ``progress`` draws distributed's text progress bar on stderr (dask's own
    ProgressBar prints nothing under a distributed client), or its widget
    when it is ``"notebook"`` (:func:`dkapprox.utils._progress.where` says which);
    with ``parts``, a bar of the parts counted as they finish
    (:class:`dkapprox.utils._progress.CountBar`). Work still queued
    when this returns by an exception (Ctrl-C, a failure) is cancelled.
    ``memory`` is the check of a planned write (``PendingWrite.memory``), so
    that a worker death names the block and the rows per block that fit.

    ``parts`` (a planned write's ``PendingWrite.parts``): keys of ``lazy``'s
    graph to compute instead of ``lazy`` itself, each released as soon as it
    finishes, so that a worker lost later takes no finished part with it and
    none is computed again (a block already written is never written again);
    returns how many parts there were.

    ``spread`` (``PendingWrite.spread``): keys of large fitted states in the
    graph, computed first and copied to every worker in a tree (distributed's
    ``replicate``: each round, every holder serves two more) before the blocks
    run; left to the blocks, all workers fetch the state from the one worker
    that computed it, whose egress then grows with the number of workers.

    Raises
    ------
    WorkerMemoryError
        A task's workers died too often (distributed's KilledWorker) and
        their nanny killed them for memory: the message says what to lower.
    TemporaryFailure
        A task's workers died too often some other way (killed, crashed).
    ClusterConnectError
        The connection to the scheduler was lost mid-job (its host died or
        the network failed); what was finished is kept, a rerun resumes.
    """
    from distributed import as_completed
    from distributed import progress as progress_bar

    from .. import utils
    from ._memory import explain_worker_deaths

    states = []
    if parts is None:
        futures = [client.compute(lazy)]
    else:
        if spread and len(client.scheduler_info().get("workers", ())) > 2:
            states = _spread(client, lazy.__dask_graph__(), spread)
        parts = list(parts)
        futures = client.get(lazy.__dask_graph__(), parts, sync=False) if parts else []
        released = set()
        for future in futures:
            future.add_done_callback(functools.partial(_release_finished, released=released))
    try:
        with explain_worker_deaths(memory, objs=(lazy,), client=client):
            place = "notebook" if progress == "notebook" else "terminal"
            if parts is None:
                if progress:  # "notebook": distributed's widget; else its text bar on stderr
                    utils.show_distributed(progress_bar, futures, place)
                return futures[0].result()
            # distributed's bars wait for every key to be known to the scheduler: a part released
            # before they start would keep them waiting forever. A bar told the count instead.
            bar = utils.CountBar(len(futures), place) if progress and futures else None
            for done, future in enumerate(as_completed(futures), 1):
                if future.status != "finished" and future.key not in released:  # a released one reads cancelled
                    if bar is not None:
                        bar.update(done - 1, finished=True, errored=True)
                    future.result()  # raises its error (a cancelled one: CancelledError)
                if bar is not None:
                    bar.update(done, finished=done == len(futures))
            return len(parts)
    except CancelledError as exc:
        if getattr(exc, "reason", None) != "scheduler-connection-lost" and client.status == "running":
            raise
        raise ClusterConnectError(
            f"lost the connection to the scheduler at {_address(client)} mid-job (its host or the network "
            "failed); finished blocks are kept: rerun the same command to resume") from None
    finally:
        unfinished = [f for f in futures if not f.done()]
        if unfinished:
            client.cancel(unfinished)
        for state in states:
            state.release()


def _spread(client, graph, keys):
    """The states computed once and copied to every running worker: their futures, held while blocks run."""
    from distributed import wait

    states = client.get(graph, list(keys), sync=False)
    wait(states)
    if all(s.status == "finished" for s in states):  # else the blocks meet the error and report it
        client.replicate(states)
    return states


def _release_finished(future, released):
    """Done callback of a part: a finished one is forgotten by the scheduler at once (errors are kept).

    Releasing a future cancels it on the client: ``released`` says which finished first."""
    if future.status == "finished":
        released.add(future.key)
        future.release()


def _address(client) -> str:
    try:
        return client.scheduler.address
    except AttributeError:
        return "(unknown)"


def _peak_rss():
    """The kernel's high-water mark of this process's RSS (resettable on Linux)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _reset_peak_rss():
    with contextlib.suppress(OSError):  # Linux >= 4.0; elsewhere the peak is since the worker started
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")


def _probe(dask_worker):
    """One worker's memory facts, run on the worker by Client.run."""
    metrics = getattr(dask_worker.data, "cumulative_metrics", {})
    return {
        "pid": os.getpid(),
        "peak_rss": _peak_rss(),
        "status": dask_worker.status.name,
        "spilled_bytes": int(metrics.get(("disk-write", "bytes"), 0)),
        "memory_limit": dask_worker.memory_manager.memory_limit,
        "name": str(dask_worker.name),
    }


@dataclass
class WorkerReport:
    """Per worker name: peak RSS and memory limit (bytes), bytes spilled; restarts and pauses.

    ``restarts`` counts worker processes replaced while watching (a nanny
    restart after an out-of-memory kill shows as one; two within one sample
    interval show as one); ``paused`` names the workers that paused (memory
    above the pause fraction of their limit).
    """

    peak_rss: dict = field(default_factory=dict)
    memory_limit: dict = field(default_factory=dict)
    spilled_bytes: dict = field(default_factory=dict)
    paused: set = field(default_factory=set)
    _pids: dict = field(default_factory=dict)
    _addresses: dict = field(default_factory=dict)
    _spill_start: dict = field(default_factory=dict)

    @property
    def restarts(self) -> int:
        return sum(len(p) - 1 for p in self._pids.values())

    def add(self, info, address=None):
        name, pid = info["name"], info["pid"]
        if address is not None:
            self._addresses[address] = name
        self.peak_rss[name] = max(self.peak_rss.get(name, 0), info["peak_rss"])
        self.memory_limit[name] = info["memory_limit"]
        self._pids.setdefault(name, set()).add(pid)
        start = self._spill_start.setdefault(pid, info["spilled_bytes"])
        self.spilled_bytes[name] = max(self.spilled_bytes.get(name, 0), info["spilled_bytes"] - start)
        if info["status"] == "paused":
            self.paused.add(name)


class WorkerWatch:
    """Watches every worker while a job runs: peak RSS, pauses, spills and restarts.

    Peak RSS is the kernel's high-water mark of each worker process, reset
    when the watch starts (exact, not sampled); pauses come from the
    scheduler's event log of each worker; spilled bytes from each worker's
    spill buffer; a restart is a new process under a worker's name. Samples
    every ``interval`` seconds, so that a restarted worker is seen too.

    Examples
    --------
    >>> with WorkerWatch(client) as watch:  # doctest: +SKIP
    ...     run(client, job)
    >>> watch.report.restarts, sorted(watch.report.paused)  # doctest: +SKIP
    (0, [])
    """

    def __init__(self, client, interval=0.2):
        self.client, self.interval = client, interval
        self.report = WorkerReport()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="dkapprox-worker-watch")

    def sample(self):
        with contextlib.suppress(Exception):  # a worker dying mid-sample is what we watch for
            for address, info in self.client.run(_probe, on_error="return").items():
                if isinstance(info, dict):
                    self.report.add(info, address)

    def _loop(self):
        while not self._stop.wait(self.interval):
            self.sample()

    def _read_pauses(self):
        # Per worker topic only: the scheduler's "all" topic can hold events it cannot serialize
        # (a broadcast scatter logs WorkerState objects there).
        for address, name in list(self.report._addresses.items()):
            for stamp, event in self.client.get_events(address):
                if (stamp >= self._started and isinstance(event, dict)
                        and event.get("action") == "worker-status-change" and event.get("status") == "paused"):
                    self.report.paused.add(name)

    def __enter__(self):
        import time

        self._started = time.time()
        with contextlib.suppress(Exception):
            self.client.run(_reset_peak_rss, on_error="return")
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.sample()
        with contextlib.suppress(Exception):
            self._read_pauses()
        return False
