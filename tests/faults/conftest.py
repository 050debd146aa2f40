"""Fault tests: real LocalClusters (worker processes under nannies), real signals, byte-exact answers.

Fixtures (none autouse):

* ``make_cluster(n_workers=2, config=None, **options)``: starts a LocalCluster
  of ``n_workers`` processes with one thread each, each under a nanny that
  restarts it when it dies, and a Client; returns ``(cluster, client)``; both
  are closed at the end of the module. ``config`` is set with
  ``dask.config.set`` while the cluster starts (the scheduler reads e.g.
  ``distributed.scheduler.allowed-failures`` then).
* ``faults_cluster``: one such 2-worker cluster per module.
* ``ready_cluster``: ``faults_cluster`` checked before a test: 2 workers
  running (a retired worker's slot is refilled, killed ones are waited for)
  and no task left on the scheduler, so a rerun of a graph computes it again.

Helpers (byte comparison, kills, progress of a run) are plain functions in
``_faults.py``: ``from _faults import differing_bytes, wait_for_progress``.
"""

import contextlib
import sys
import time
from pathlib import Path

import dask
import pytest
from distributed import Client, LocalCluster, Nanny
from distributed.core import Status

sys.path.insert(0, str(Path(__file__).parent))  # _faults by name, in tests and in worker processes
from _faults import running_workers, wait_until_idle  # noqa: E402

N_WORKERS = 2
# a retired worker's nanny: closing for a few seconds after retire_workers returns, then closed
GONE = (Status.closing_gracefully, Status.closing, Status.closed, Status.failed)


@pytest.fixture(scope="module")
def make_cluster():
    with contextlib.ExitStack() as stack:
        def start(n_workers=N_WORKERS, config=None, **options):
            options = {"threads_per_worker": 1, "processes": True, "memory_limit": "1GiB",
                       "dashboard_address": None, "worker_dashboard_address": None, **options}
            with dask.config.set(config or {}):
                cluster = stack.enter_context(LocalCluster(n_workers=n_workers, **options))
            client = stack.enter_context(Client(cluster))
            assert all(isinstance(w, Nanny) for w in cluster.workers.values())
            client.wait_for_workers(n_workers, timeout=120)
            return cluster, client

        yield start


@pytest.fixture(scope="module")
def faults_cluster(make_cluster):
    return make_cluster()


def restore(cluster, client, n_workers=N_WORKERS, timeout=120):
    """Back to ``n_workers`` running workers and an idle scheduler.

    A killed worker comes back by itself (its nanny restarts it); a retired
    one's nanny is closed for good: its entry is dropped from the cluster's
    spec (so that it is forgotten) and a new worker is started in its place.
    """
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


@pytest.fixture
def ready_cluster(faults_cluster):
    cluster, client = faults_cluster
    restore(cluster, client)
    return cluster, client
