"""Fault tests: real LocalClusters (worker processes under nannies), real signals, byte-exact answers.

Fixtures (none autouse):

* ``make_cluster(n_workers=2, config=None, **options)``: starts a LocalCluster
  of ``n_workers`` processes with one thread each, each under a nanny that
  restarts it when it dies, and a Client; returns ``(cluster, client)``; both
  are closed at the end of the module. ``config`` is set with
  ``dask.config.set`` while the cluster starts (the scheduler reads e.g.
  ``distributed.scheduler.allowed-failures`` then). While the module runs,
  a lost worker's nanny is never closed by the cluster (``KEEP_NANNIES``).
* ``faults_cluster``: one such 2-worker cluster per module.
* ``ready_cluster``: ``faults_cluster`` checked before a test: 2 workers
  running (a retired worker's slot is refilled, killed ones are waited for)
  and no task left on the scheduler, so a rerun of a graph computes it again.

Helpers (byte comparison, kills, progress of a run, ``restore`` of a
cluster's workers) are plain functions in ``_faults.py``:
``from _faults import differing_bytes, wait_for_progress``.
"""

import contextlib
import sys
from pathlib import Path

import dask
import pytest
from distributed import Client, LocalCluster, Nanny

sys.path.insert(0, str(Path(__file__).parent))  # _faults by name, in tests and in worker processes
from _faults import restore  # noqa: E402

N_WORKERS = 2


#: Held while a module's clusters live. A LocalCluster (SpecCluster) closes a worker's nanny for good
#: when, this long after the worker was lost, no worker of its name is connected: under repeated
#: kills that moment can fall in the middle of the same worker's next restart (seen after ~14
#: SIGKILLs 2 s apart with the default 15 s), and the cluster is left a worker short.
KEEP_NANNIES = {"distributed.deploy.lost-worker-timeout": "1 hour"}


@pytest.fixture(scope="module")
def make_cluster():
    with contextlib.ExitStack() as stack:
        stack.enter_context(dask.config.set(KEEP_NANNIES))

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


@pytest.fixture
def ready_cluster(faults_cluster):
    cluster, client = faults_cluster
    restore(cluster, client, N_WORKERS)
    return cluster, client
