"""Helpers of the storage tests (importable by name: pytest puts this folder on sys.path)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import zarr

JOB = str(Path(__file__).with_name("_featurize_job.py"))


def make_store(path, data, chunks, **kwargs):
    """A real Zarr array on disk holding ``data``; returns its path."""
    z = zarr.create_array(str(path), shape=data.shape, chunks=chunks, dtype=data.dtype, **kwargs)
    z[...] = data
    return str(path)


def kill_job_when(source, out, seconds_per_block, ready, what="the job never got there", **env):
    """Run the featurization job (``_featurize_job.py``) on ``source`` into ``out`` with ``env`` added to
    its environment, and SIGKILL it once ``ready()`` holds (polled every 2 ms, for 120 s at most)."""
    proc = subprocess.Popen([sys.executable, JOB, str(source), str(out), str(seconds_per_block)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, **env})
    deadline = time.monotonic() + 120
    while not ready():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, what
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    proc.stderr.close()
