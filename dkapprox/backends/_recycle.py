"""Large block outputs whose memory is taken again once nothing refers to it.

A block's output in fresh memory costs the kernel's zeroing of every page before the block writes
it, a large share of a fast block's time (docs/performance.md, "Recycled outputs"). In a job, and
wherever a block's features are written or reduced and then dropped, the next block can write into
the same pages instead.

Each output of at least :data:`MIN_BYTES` is a NumPy view of a private anonymous ``mmap`` that
this module holds (private: after a fork, parent and child write their own copies, as with any
array). NumPy keeps a buffer export of the mmap for as long as any array or view of it
lives, and CPython's mmap counts those exports exactly: a mmap with none is taken for the next
output (the probe is ``resize`` to its own size, which raises ``BufferError`` while an export
exists, and otherwise changes nothing). So an array a caller, dask, or a serializer still holds is
never written; the values of a reused output are arbitrary, as ``np.empty``'s are.

Free mmaps are unmapped (their memory returns to the system) once they have been free for
``dkapprox.recycle.idle-seconds`` (2 s; a daemon timer sweeps), or when more than
``dkapprox.recycle.max-free`` (one a core, at least 4) are free. One a core, not 4: dask's threaded
scheduler on 16 cores frees 16 outputs a wave, and with 4 kept the next wave would touch 12 outputs'
pages afresh. A cluster's worker, one task at a time, never has more than a few.
``dkapprox.recycle.max-free: 0`` turns recycling off: every output is then fresh memory, its pages
touched first (:func:`touched_empty`).
"""

from __future__ import annotations

import math
import mmap
import os
import threading
import time

import numpy as np

from ..utils import touched_empty

#: outputs smaller than this are plain arrays: their zeroing is cheap beside a mmap's system calls
MIN_BYTES = 16 * 2**20
#: at most this many mmaps are held, busy or free; beyond, outputs are plain arrays
MAX_HELD = 64
_HUGE = 2 * 2**20


def _settings():
    import dask

    max_free = dask.config.get("dkapprox.recycle.max-free", None)
    if max_free is None:  # one a core: the outputs of a wave of the threaded scheduler's tasks
        max_free = max(4, os.cpu_count() or 1)
    idle = dask.config.get("dkapprox.recycle.idle-seconds", 2.0)
    if isinstance(max_free, bool) or not isinstance(max_free, int) or max_free < 0:
        raise ValueError(f"dkapprox.recycle.max-free must be an integer >= 0, got {max_free!r}")
    if isinstance(idle, bool) or not isinstance(idle, (int, float)) or not idle >= 0:
        raise ValueError(f"dkapprox.recycle.idle-seconds must be a number >= 0, got {idle!r}")
    return max_free, float(idle)


def _free(buf: mmap.mmap) -> bool:
    """True when no array or view of ``buf`` lives (see the module's docstring)."""
    try:
        buf.resize(len(buf))
    except BufferError:
        return False
    return True


def _anonymous(size):
    """Fresh anonymous memory, private: a forked child's writes are its own (copy on write), as with
    any array's memory. ``mmap``'s default (MAP_SHARED) would share them with the parent, and Linux
    gives shared memory transparent huge pages only where ``shmem_enabled`` allows (often never)."""
    if hasattr(mmap, "MAP_PRIVATE"):
        return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
    return mmap.mmap(-1, size)


def _probe_works():
    """Whether this platform's mmap resizes in place (Linux: mremap), so that :func:`_free` can ask."""
    try:
        buf = _anonymous(mmap.PAGESIZE)
        view = memoryview(buf)
        try:
            buf.resize(len(buf))
            return False  # an export did not stop it: the probe would say every buffer is free
        except BufferError:
            pass
        view.release()
        buf.resize(len(buf))
        buf.close()
        return True
    except (OSError, SystemError, ValueError, TypeError):
        return False


_PROBE_WORKS = _probe_works()


class Recycler:
    """The process's held mmaps, behind one lock; :func:`empty` is its entry point."""

    def __init__(self):
        self._lock = threading.Lock()
        self._held: list[list] = []  # [mmap, monotonic time it was last handed out]
        self._timer = None
        self.reused = 0  # outputs that took memory already held: for tests and benchmarks

    def empty(self, shape, dtype):
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes < MIN_BYTES:
            return touched_empty(shape, dtype)
        max_free, idle = _settings()
        if max_free == 0 or not _PROBE_WORKS:
            return touched_empty(shape, dtype)
        with self._lock:  # the array (the mmap's export) is made under the lock: no other thread takes it
            now = time.monotonic()
            entry = self._take(nbytes, now)
            if entry is not None:
                out = self._export(entry, shape, dtype, max_free, idle)
            elif len(self._held) >= MAX_HELD:
                return touched_empty(shape, dtype)
        if entry is not None:
            return out
        # mapped and touched outside the lock: no other thread's output waits for this one's page faults
        buf = self._new(nbytes)
        with self._lock:
            entry = [buf, time.monotonic()]
            self._held.append(entry)
            return self._export(entry, shape, dtype, max_free, idle)

    def _export(self, entry, shape, dtype, max_free, idle):
        """The output array on ``entry``'s mmap (lock held: its export marks it busy before the lock goes)."""
        out = np.frombuffer(entry[0], dtype=dtype, count=math.prod(shape)).reshape(shape)
        self._trim(max_free)
        self._arm(idle)
        return out

    def _take(self, nbytes, now):
        """The smallest free mmap of at least ``nbytes`` (at most twice that), its time updated, or None."""
        best = None
        for entry in self._held:
            size = len(entry[0])
            if nbytes <= size <= 2 * nbytes + _HUGE and (best is None or size < len(best[0])) and _free(entry[0]):
                best = entry
        if best is not None:
            best[1] = now
            self.reused += 1
        return best

    @staticmethod
    def _new(nbytes):
        size = -(-nbytes // _HUGE) * _HUGE
        buf = _anonymous(size)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            try:
                buf.madvise(mmap.MADV_HUGEPAGE)
            except OSError:  # a kernel without transparent huge pages
                pass
        view = np.frombuffer(buf, dtype=np.uint8)
        view[:: 4096] = 0  # touch each page once, in one pass (see touched_empty)
        del view
        return buf

    def _trim(self, max_free, idle=None, now=None):
        """Unmap free mmaps beyond ``max_free`` (the oldest first), or those free for ``idle`` seconds."""
        free = sorted((e for e in self._held if _free(e[0])), key=lambda e: e[1])
        drop = free[: max(0, len(free) - max_free)]
        if idle is not None:
            drop += [e for e in free[len(drop):] if now - e[1] >= idle]
        for entry in drop:
            self._held.remove(entry)
            entry[0].close()

    def _arm(self, idle):
        if self._timer is None or not self._timer.is_alive():
            self._timer = threading.Timer(idle, self._sweep, args=(idle,))
            self._timer.daemon = True
            self._timer.start()

    def _sweep(self, idle):
        with self._lock:
            self._trim(len(self._held), idle=idle, now=time.monotonic())
            self._timer = None
            if self._held:
                self._arm(idle)

    def held_bytes(self):
        with self._lock:
            return sum(len(e[0]) for e in self._held)


_RECYCLER = Recycler()


def _after_fork():  # a child of fork has no timer thread, and the lock may have been held
    global _RECYCLER
    _RECYCLER = Recycler()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def empty(shape, dtype=np.float64):
    """``np.empty(shape, dtype)`` for a block's output: C-contiguous, its pages already touched.

    Large outputs reuse the memory of an earlier output that nothing refers to any more.

    >>> import numpy as np
    >>> from dkapprox.backends._recycle import empty
    >>> out = empty((5000, 1024), np.float32)  # 20 MB: held memory
    >>> out.shape, out.dtype, out.flags.c_contiguous
    ((5000, 1024), dtype('float32'), True)
    """
    return _RECYCLER.empty(shape, dtype)
