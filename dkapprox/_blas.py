"""BLAS threads inside dask tasks: the cores shared among the tasks that run at once in this process.

A dask worker *process* of a cluster runs BLAS on one thread: distributed's nanny starts it with
``OMP_NUM_THREADS=1`` and its kin, and dkapprox's clusters give each worker one thread. dask's
default scheduler in a notebook (threads, no ``Client``) and ``LocalCluster(processes=False)``
run several tasks in one process instead, and each task's product asks NumPy's OpenBLAS for a
thread per core: two tasks on two cores ran four BLAS threads, and RBFSampler and Nystroem ran
at scikit-learn's speed instead of the cluster's (issue 30; benchmarks/bench_schedulers.py).

So every block task runs inside :func:`task_threads`. While ``k > 1`` of them run at once in this
process, each BLAS library of the process is limited to ``max(1, cores // k)`` threads, and never
raised above what it had; when at most one runs, the libraries have their own settings again,
so the synchronous scheduler (one task at a time) keeps every core for its products. The
limits are process-wide (BLAS has no per-thread setting), so they are reference-counted: the
first task that needs them saves the user's settings, the last one out restores them. A user's
own setting is never changed outside a compute, and a lower one is never raised.

This module is part of the engine: it imports nothing of dkapprox.

>>> with task_threads():
...     pass
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

_lock = threading.Lock()
#: active: block tasks running now in this process; limit: the BLAS threads set for them (None:
#: the libraries' own settings); saved: each library's own setting before the first limit
_state = {"active": 0, "limit": None, "saved": None, "libraries": None}


def _cores() -> int:
    from dask.system import CPU_COUNT  # the cores this process may use (affinity, cgroup quota)

    return max(1, int(CPU_COUNT))


def _libraries():
    """The BLAS libraries loaded in this process (threadpoolctl), found once."""
    if _state["libraries"] is None:
        from threadpoolctl import ThreadpoolController

        _state["libraries"] = ThreadpoolController().select(user_api="blas").lib_controllers
    return _state["libraries"]


def _adjust():
    """Set the limit for the number of tasks active now (called with the lock held)."""
    active = _state["active"]
    want = max(1, _cores() // active) if active > 1 else None
    if want == _state["limit"]:
        return
    libraries = _libraries()
    if want is None:  # at most one task: the libraries' own settings again
        for lib in libraries:
            _set(lib, _state["saved"][lib.filepath])
        _state["saved"] = _state["limit"] = None
        return
    if _state["saved"] is None:
        saved = {lib.filepath: lib.num_threads for lib in libraries}
        if max(saved.values(), default=1) <= want:  # a cluster's worker process (1 thread): nothing to do
            return
        _state["saved"] = saved
    for lib in libraries:  # never more than the library had
        _set(lib, min(want, _state["saved"][lib.filepath]))
    _state["limit"] = want


def _set(lib, n):
    """Set ``lib``'s threads from whichever thread runs the task.

    OpenBLAS's ``openblas_set_num_threads`` (what threadpoolctl calls) did not raise the count
    when called from a thread other than the main one (OpenBLAS 0.3.31 here: a worker thread
    set 2 after 1 and it stayed 1), so a task ending in a scheduler thread could not give the
    user's setting back. ``openblas_set_num_threads_local`` (OpenBLAS 0.3.27 and newer) sets
    the same global count and does raise it from any thread; it is used where it exists.
    """
    local = _openblas_local(lib)
    if local is not None:
        local(int(n))
    else:
        lib.set_num_threads(int(n))


def _openblas_local(lib):
    if getattr(lib, "internal_api", None) != "openblas":
        return None
    found = getattr(lib, "_dkapprox_local", False)
    if found is False:
        import ctypes

        try:
            found = lib.dynlib.openblas_set_num_threads_local
            found.argtypes, found.restype = [ctypes.c_int], ctypes.c_int
        except AttributeError:  # an OpenBLAS older than 0.3.27
            found = None
        lib._dkapprox_local = found
    return found


@contextmanager
def task_threads():
    """Run a block task with BLAS threads shared among the tasks that run at once (see the module).

    dask config ``dkapprox.share-blas-threads: false`` turns the sharing off (the benchmark's
    "before"; or for a BLAS whose own threads you manage).
    """
    import dask

    if not dask.config.get("dkapprox.share-blas-threads", True):
        yield
        return
    with _lock:
        _state["active"] += 1
        _adjust()
    try:
        yield
    finally:
        with _lock:
            _state["active"] -= 1
            _adjust()


def limit():
    """The BLAS threads each running block task has now, or None: the libraries' own settings."""
    return _state["limit"]
