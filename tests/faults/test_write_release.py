"""A worker SIGKILLed after 90% of a write's blocks: no block already marked done is written again.

``write_features`` under a distributed client computes each block's write as
its own future and releases it as soon as it finishes. Were the writes' results
held for a final count (as computing ``PendingWrite.delayed`` does), the killed
worker would take its finished writes with it, and the scheduler would compute
and write those blocks again. Rewrites are counted twice, from the task stream
(write tasks executed more than once) and from the store's files: zarr's local
store writes a chunk to a temporary file and renames it into place, so a
rewritten block's chunk file and marker file get new inodes.
"""

import os
import threading
import time

import numpy as np
import pytest
from _faults import busiest_worker, recomputed, sigkill, slow_input, wait_for_running
from distributed import get_task_stream

from dkapprox.io import open_features, write_features

pytestmark = pytest.mark.slow

N_BLOCKS, BLOCK_ROWS, N_COLS = 120, 200, 8
PAUSE = 0.03  # seconds per block on 2 workers: about 2 s of writing, time to see 90% and kill
TIMEOUT = 120


def _inodes(out):
    """{block row: (inode of its chunk, inode of its marker)} for every block marked done."""
    found = {}
    markers = os.path.join(out, "blocks_done", "c")
    for name in os.listdir(markers) if os.path.isdir(markers) else ():
        marker = os.path.join(markers, name, "0")
        chunk = os.path.join(out, "features", "c", name, "0")
        try:
            found[int(name)] = (os.stat(chunk).st_ino, os.stat(marker).st_ino)
        except FileNotFoundError:  # the marker is being renamed into place
            continue
    return found


def test_worker_killed_after_90_percent_rewrites_no_block_already_marked_done(make_cluster, tmp_path):
    cluster, client = make_cluster()
    X = slow_input(N_BLOCKS, BLOCK_ROWS, N_COLS, seed=0, pause=PAUSE)
    features = X * 2.0
    reference = features.compute(scheduler="threads")
    out = str(tmp_path / "features.zarr")
    result = {}

    def job():
        try:
            with get_task_stream(client) as stream:
                result["report"] = write_features(features, out, plan={"job": "release"})
            result["stream"] = stream.data
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            result["error"] = exc

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    deadline = time.monotonic() + TIMEOUT
    while len(_inodes(out)) < 0.9 * N_BLOCKS:
        assert thread.is_alive(), f"the write ended before 90% was seen: {result}"
        assert time.monotonic() < deadline, f"not 90% written after {TIMEOUT} s"
        time.sleep(0.005)
    _, victim = busiest_worker(client)
    before = _inodes(out)
    sigkill(victim["pid"])
    assert len(before) < N_BLOCKS, "every block was written before the kill: it landed on nothing"
    thread.join(TIMEOUT)
    assert not thread.is_alive(), "the write did not finish after the kill"
    if "error" in result:
        raise result["error"]
    wait_for_running(client, 2, exclude_pids=(victim["pid"],))

    after = _inodes(out)
    rewritten = sorted(i for i, ids in before.items() if after[i] != ids)
    assert rewritten == [], f"{len(rewritten)} blocks marked done before the kill were written again"
    assert recomputed(result["stream"], "dkapprox-write") == 0
    report = result["report"]
    assert (report.blocks_written, report.blocks_total) == (N_BLOCKS, N_BLOCKS)
    np.testing.assert_array_equal(open_features(out).compute(), reference)
