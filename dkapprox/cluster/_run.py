"""Run a lazy job on a Client: a progress bar, worker deaths as TemporaryFailure, memory watch."""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import threading
from dataclasses import dataclass, field

from ..errors import TemporaryFailure


def run(client, lazy, *, progress=False):
    """Compute ``lazy`` (a dask collection or delayed) on ``client`` and return its result.

    ``progress`` draws distributed's text progress bar on stderr (dask's own
    ProgressBar prints nothing under a distributed client). Work still queued
    when this returns by an exception (Ctrl-C, a failure) is cancelled.

    Raises
    ------
    TemporaryFailure
        A task's workers died too often (distributed's KilledWorker): nearly
        always memory; the message says what to lower.
    """
    from distributed import KilledWorker, progress as progress_bar

    future = client.compute(lazy)
    try:
        if progress:
            with contextlib.redirect_stdout(sys.stderr):
                progress_bar(future, notebook=False)
            sys.stderr.write("\n")
        return future.result()
    except KilledWorker as exc:
        task = getattr(exc, "task", None) or (exc.args[0] if exc.args else "a task")
        raise TemporaryFailure(
            f"workers died repeatedly while running {task!r} (usually out of memory): "
            "lower the chunk size or give workers more memory, then rerun"
        ) from exc
    finally:
        if not future.done():
            future.cancel()


def _probe(dask_worker):
    """One worker's memory facts, run on the worker by Client.run."""
    metrics = getattr(dask_worker.data, "cumulative_metrics", {})
    return {
        "pid": os.getpid(),
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,  # kernel's high-water mark
        "status": dask_worker.status.name,
        "spilled_bytes": int(metrics.get(("disk-write", "bytes"), 0)),
        "memory_limit": dask_worker.memory_manager.memory_limit,
        "name": str(dask_worker.name),
    }


@dataclass
class WorkerReport:
    """Per worker name: peak RSS (bytes), memory limit, restarts, spilled bytes, paused ever."""

    peak_rss: dict = field(default_factory=dict)
    memory_limit: dict = field(default_factory=dict)
    pids: dict = field(default_factory=dict)
    spilled_bytes: dict = field(default_factory=dict)
    paused: set = field(default_factory=set)

    @property
    def restarts(self) -> int:
        return sum(len(p) - 1 for p in self.pids.values())

    def add(self, info):
        name = info["name"]
        self.peak_rss[name] = max(self.peak_rss.get(name, 0), info["peak_rss"])
        self.memory_limit[name] = info["memory_limit"]
        self.pids.setdefault(name, set()).add(info["pid"])
        self.spilled_bytes[name] = max(self.spilled_bytes.get(name, 0), info["spilled_bytes"])
        if info["status"] == "paused":
            self.paused.add(name)


class WorkerWatch:
    """Samples every worker while a job runs: peak RSS, pauses, spills and restarts.

    Peak RSS is the kernel's high-water mark of each worker process (exact,
    not sampled); pauses are seen only if a sample falls inside one; a
    restart shows as a new process under the same worker name.

    Examples
    --------
    >>> with WorkerWatch(client) as watch:  # doctest: +SKIP
    ...     run(client, job)
    >>> watch.report.restarts  # doctest: +SKIP
    0
    """

    def __init__(self, client, interval=0.2):
        self.client, self.interval = client, interval
        self.report = WorkerReport()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="dkapprox-worker-watch")

    def sample(self):
        with contextlib.suppress(Exception):  # a worker dying mid-sample is what we watch for
            for info in self.client.run(_probe, on_error="return").values():
                if isinstance(info, dict):
                    self.report.add(info)

    def _loop(self):
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self):
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.sample()
        return False
