"""What the machine offers this process."""

from __future__ import annotations

import os


def available_cpus() -> int:
    """CPUs this process may run on (its affinity on Linux, under taskset or a cgroup), at least 1."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
