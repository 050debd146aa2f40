"""Block tasks on a device (a GPU): one thread at a time queues its work there, and none waits inside.

Why: a device runs the kernels of its default stream one after another whatever the number of
threads that queue them, so dask's threads (a task per core) gain nothing by queueing at once; and
a value check that waits for its flag on the host stalls the launches queued behind it
(docs/performance.md, "Device turns"; benchmarks/bench_gpu.py measures it). So a task on a device
block (:func:`dkapprox.engine.map_rows`) does two things differently:

- it queues its work (the check's reductions, the block function's kernels) inside
  :func:`turn`, a lock per device: one thread launches at a time, and a block's kernels sit
  together in the stream, so at most a few blocks' buffers are alive on the device at once;
- its check does not wait there: a check with a ``start`` method (:class:`dkapprox.inputs.BlockCheck`)
  queues its reductions and returns a function that waits for their flag only, after the turn
  (the block's own work, queued behind the flag, keeps the device busy meanwhile), and raises for
  a bad block. The block's output is then dropped, as it would have been.

NumPy blocks never come here. dask config ``dkapprox.device-turns: false`` turns both off (every
thread queues at once, and each check waits for the stream). Part of the engine: imports nothing
of dkapprox.

>>> with turn(object()):
...     pass
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

_locks: dict = {}
_guard = threading.Lock()


def _key(block):
    """The device a block lives on, as a hashable key (the array API's ``.device``; its repr if unhashable)."""
    device = getattr(block, "device", None)
    key = (type(block).__module__.partition(".")[0], getattr(device, "id", None))
    if key[1] is None:
        try:
            hash(device)
            key = (key[0], device)
        except TypeError:
            key = (key[0], repr(device))
    return key


@contextmanager
def turn(block):
    """Hold ``block``'s device: the only thread queueing work there until the ``with`` ends."""
    key = _key(block)
    lock = _locks.get(key)
    if lock is None:
        with _guard:
            lock = _locks.setdefault(key, threading.Lock())
    with lock:
        yield


def run(block, state, block_fn, check, task_threads):
    """``block_fn(block, state)`` for a device block, its ``check`` waited for after the turn (see the module)."""
    import dask

    if not dask.config.get("dkapprox.device-turns", True):  # as before: no lock, the check waited for first
        if check is not None:
            check(block)
        with task_threads():
            return block_fn(block, state)
    with turn(block):
        pending = None
        if check is not None:
            start = getattr(check, "start", None)
            if start is None:
                check(block)
            else:
                pending = start(block)
        with task_threads():
            out = block_fn(block, state)
    if pending is not None:
        pending()
    return out
