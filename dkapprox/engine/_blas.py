"""BLAS threads inside dask tasks: one each, as on a cluster, whatever the scheduler.

A dask worker *process* of a cluster runs BLAS on one thread: distributed's nanny starts it with
``OMP_NUM_THREADS=1`` and its kin, and dkapprox's clusters give each worker one thread. dask's
default scheduler in a notebook (threads, no ``Client``) and ``LocalCluster(processes=False)``
run several tasks in one process instead, and each task's product would ask NumPy's OpenBLAS for a
thread per core: two tasks on two cores would run four BLAS threads, oversubscribing the cores
(benchmarks/bench_schedulers.py measures it).

So every block task runs inside :func:`task_threads`, which gives the process's BLAS libraries
one thread while any block task runs, and the user's own settings back when none does. One, and
not ``cores // (tasks running now)``: a count that followed the tasks running at the moment made
the same block's bits depend on what ran beside it (OpenBLAS rounds a product differently on one
thread and on two), and promise 1 of docs/precision.md is that a block computed again gives the
same bits. One thread is what a cluster's workers use, so every dask path now gives a cluster's
bits (NumPy on the same block under ``threadpool_limits(1)``). The synchronous scheduler, one
task at a time, gives up its BLAS threads for that.

The limit is process-wide (BLAS has no per-thread setting), so it is reference-counted: the first
task in saves the user's settings, the last one out restores them. A user's own setting is never
changed outside a compute. dask config ``dkapprox.share-blas-threads: false`` turns it off.

This module is part of the engine: it imports nothing of dkapprox.

>>> with task_threads():
...     pass
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from itertools import islice

import numpy as np

_lock = threading.Lock()
#: active: block tasks running now in this process; limit: the BLAS threads set for them (None:
#: the libraries' own settings); saved: each library's own setting before the first limit
_state = {"active": 0, "limit": None, "saved": None, "libraries": None}


def _libraries():
    """The BLAS libraries loaded in this process (threadpoolctl), found once."""
    if _state["libraries"] is None:
        from threadpoolctl import ThreadpoolController

        _state["libraries"] = ThreadpoolController().select(user_api="blas").lib_controllers
    return _state["libraries"]


def _adjust():
    """One BLAS thread while any block task runs, the user's settings when none does (lock held)."""
    want = 1 if _state["active"] > 0 else None
    if want == _state["limit"]:
        return
    libraries = _libraries()
    if want is None:  # no block task: the libraries' own settings again
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

    For OpenBLAS, OpenBLAS's own setter is called, not threadpoolctl's ``set_num_threads``:
    threadpoolctl 3.6 and newer let only one "controlling" thread of a process change OpenBLAS's
    (process-wide) count and silently do nothing in every other thread, so a task running in a
    scheduler thread could neither lower the count nor give the user's back. dkapprox first
    called ``openblas_set_num_threads_local`` for this (it bypasses threadpoolctl too), but the
    OpenBLAS of numpy 2.5's wheels (0.3.34) no longer exports it; the plain setter, under the
    prefix and suffix of the build (``scipy_openblas_set_num_threads64_`` in numpy's wheels),
    is in every OpenBLAS and sets the same global count from any thread. Under OpenBLAS's OpenMP
    threading layer the count is per thread, and threadpoolctl's call (``omp_set_num_threads``)
    is the right one; any other library (MKL, BLIS) is set through threadpoolctl as well.
    """
    setter = _openblas_setter(lib)
    if setter is not None:
        setter(int(n))
    else:
        lib.set_num_threads(int(n))


def _openblas_setter(lib):
    """OpenBLAS's own ``openblas_set_num_threads`` in ``lib`` (any affix), or None if not OpenBLAS on pthreads."""
    if getattr(lib, "internal_api", None) != "openblas" or getattr(lib, "threading_layer", None) == "openmp":
        return None
    found = getattr(lib, "_dkapprox_setter", False)
    if found is False:
        import ctypes

        found = None
        for prefix in ("", "scipy_"):
            for suffix in ("", "64_", "_64"):
                found = getattr(lib.dynlib, f"{prefix}openblas_set_num_threads{suffix}", None)
                if found is not None:
                    break
            if found is not None:
                break
        if found is not None:
            found.argtypes, found.restype = [ctypes.c_int], None
        lib._dkapprox_setter = found
    return found


@contextmanager
def task_threads():
    """Run a block task on one BLAS thread, the user's settings restored after the last (see the module).

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
    """The BLAS threads the running block tasks have (1), or None: the libraries' own settings."""
    return _state["limit"]


def map_in_threads(fn, items, threads):
    """``[fn(item) for item in items]``, in order, ``threads`` calls at a time, each a block task.

    In-memory input's blocks: each core gets a block, as dask's threaded scheduler gives it, and each
    block one BLAS thread, so the results are the bits a dask pass gets for the same blocks, whatever
    ``threads`` is. (One thread with BLAS's own threads left the elementwise work on one core and ran
    small products on threads that mostly waited.) A call of one block is a plain call in the caller's
    thread, on BLAS's own threads: a pool's start would cost a small call more than its work, and one
    BLAS thread would slow a mid-sized block's products (docs/changelog.rst has the figures).

    >>> map_in_threads(lambda i: i * i, range(4), threads=2)
    [0, 1, 4, 9]
    """
    return list(_in_order(fn, items, threads))


def map_rows_in_threads(X, block_fn, state, *, rows, threads):
    """``block_fn(block, state)`` of the blocks of ``rows`` rows of in-memory ``X``, run as
    :func:`map_in_threads` runs them: :func:`map_rows` of a NumPy ``X``. Each block's output (a NumPy
    array; every block's of one dtype) is copied into the one output by the thread that made it.

    >>> import numpy as np
    >>> map_rows_in_threads(np.arange(5.0), lambda x, state: x * state, 10.0, rows=2, threads=2)
    array([ 0., 10., 20., 30., 40.])
    """
    n = X.shape[0]
    starts = range(0, max(n, 1), rows)
    if len(starts) == 1:
        return map_in_threads(lambda _: block_fn(X, state), starts, threads)[0]
    made, lock = [], threading.Lock()

    def block(start):
        part = block_fn(X[start:start + rows], state)
        with lock:  # the first block done gives the output its columns and dtype
            if not made:
                made.append(np.empty((n,) + part.shape[1:], dtype=part.dtype))
        out = made[0]
        if part.dtype != out.dtype or part.shape[1:] != out.shape[1:]:
            raise ValueError(f"a block of {part.dtype} {part.shape[1:]} where another gave {out.dtype} "
                             f"{out.shape[1:]}: block_fn must give every block one dtype and width")
        out[start:start + part.shape[0]] = part

    for _ in _in_order(block, starts, threads):
        pass
    return made[0]


def reduce_in_threads(arrays, chunk_fn, combine_fn, state, *, rows, threads):
    """``chunk_fn(start, state, *blocks)`` of the in-memory row blocks of ``rows`` rows of ``arrays`` (aligned
    on their rows), on ``threads`` threads as :func:`map_in_threads` runs them, folded in row order by
    ``combine_fn([total, partial])`` as they come: no more than ``threads`` partials held at once.

    >>> import numpy as np
    >>> int(reduce_in_threads([np.arange(10)], lambda start, state, x: x.sum(), sum, None, rows=3, threads=2))
    45
    """
    n = arrays[0].shape[0]
    starts = range(0, max(n, 1), rows)
    total = None
    for part in _in_order(lambda s: chunk_fn(s, state, *(a[s:s + rows] for a in arrays)), starts, threads):
        total = part if total is None else combine_fn([total, part])
    return total


def _room(threads):
    """The threads in-memory blocks may take now: ``threads``, but one off the main thread (inside a dask task,
    a server's pool, our own blocks) and no more than BLAS's own setting, which ``threadpool_limits``,
    ``OMP_NUM_THREADS``, a dask worker process (one) and joblib's workers (their share) all set."""
    if threads <= 1 or threading.current_thread() is not threading.main_thread():
        return 1
    with _lock:
        blas = [lib.num_threads for lib in _libraries()]
    return max(1, min(threads, max(blas, default=threads)))


def _in_order(fn, items, threads):
    """``fn`` of each item, a block task each, yielded in order; at most ``threads`` running or waiting
    (:func:`_room`'s count of them)."""
    def one(item):
        with task_threads():
            return fn(item)

    threads = _room(threads)
    items = iter(items)
    first = list(islice(items, max(threads, 2)))
    if len(first) == 1:  # the whole call is one block: a NumPy call on BLAS's threads, no pool to start
        yield fn(first[0])
        return
    if threads <= 1:
        yield from map(one, first)
        yield from map(one, items)
        return
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="dkapprox-block") as pool:
        pending = deque(pool.submit(one, item) for item in first)
        while pending:
            done = pending.popleft().result()
            pending.extend(pool.submit(one, item) for item in islice(items, 1))
            yield done
