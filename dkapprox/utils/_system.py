"""What the machine offers this process."""

from __future__ import annotations

import os

import numpy as np


def available_cpus() -> int:
    """CPUs this process may run on (its affinity on Linux, under taskset or a cgroup), at least 1."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


#: bytes between the values :func:`touched_empty` writes: the smallest page size on common systems
_PAGE_BYTES = 4096


def touched_empty(shape, dtype=np.float64):
    """``np.empty(shape, dtype)`` with each memory page written once, in one sequential pass.

    A block function that fills a large fresh output slice by slice takes the page faults inside
    its loop. With two threads of one process doing that at once (dask's threaded scheduler), a
    pair of blocks took several times as long in most runs; touching the pages first in one pass
    made every run as fast as the best (docs/performance.md, "Tiles";
    benchmarks/bench_kernels.py measures it). The values stay arbitrary.
    """
    out = np.empty(shape, dtype=dtype)
    flat = out.reshape(-1)
    flat[:: max(1, _PAGE_BYTES // out.itemsize)] = 0
    return out
