"""What dkapprox costs per block, from 10 to 10^5 blocks, against plain dask writing the same features.

    python benchmarks/bench_blocks.py [--rows 2000000] [--blocks 10 100 1000 10000 100000]
                                      [--s3-blocks 10 100 1000 10000] [--s3-rows 200000] [--quick]
                                      [--status-blocks 10000 100000] [--s3-status-blocks 10000]

The same total rows (``--rows`` x 64 float32 through RBFSampler(256), made in the graph so that no input
is read) cut into each count of blocks, on LocalCluster(2 workers x 1 thread), written:

- by ``dkapprox.io.write_features`` (one chunk per block, a marker per block, uncompressed);
- by plain dask: ``da.store`` of the same features into a Zarr array with the same chunks and the same
  compression (none), i.e. ``X.map_blocks(...).to_zarr(...)`` without dkapprox.

Each row: both writes and their ratio; the time to build dkapprox's write (plan, lease, store, graph;
``compute=False``); a rerun that finds the store complete (what ``dkapprox transform`` does first:
``describe`` with the input check); a rerun with half the markers present (the status read and plan of
the resume, before any block is written); ``dkapprox info`` (``describe(check_input=True)``); and the
client-and-scheduler process's CPU seconds per task of the write (LocalCluster's scheduler runs in this
process; the client waits meanwhile), from ``os.times`` around it, over the tasks of the write's graph.

On S3 (the test server, moto on loopback) the same for ``--s3-blocks`` over ``--s3-rows``. Then the
status side alone (:func:`status_row`) for ``--status-blocks`` and ``--s3-status-blocks``: a store's
records written directly (as workers leave them: packed into logs), so that 10^5 blocks need no
10^5-block write.
Ratios are printed beside the times; absolute times on a shared machine are noise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import dask.array as da
import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _common import s3_bucket  # noqa: E402

from dkapprox import io  # noqa: E402
from dkapprox.cli._jobs import _finished_same_job  # noqa: E402
from dkapprox.io._location import locate  # noqa: E402
from dkapprox.io._markers import EVERY, LOG, clear_rows, encode  # noqa: E402
from dkapprox.kernel_approximation import RBFSampler  # noqa: E402

COLS, N_COMPONENTS = 64, 256


def _timed(fn):
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def _features(rows, n_blocks):
    chunk = -(-rows // n_blocks)
    X = da.random.default_rng(0).standard_normal((rows, COLS), chunks=(chunk, COLS), dtype=np.float32)
    est = RBFSampler(n_components=N_COMPONENTS, gamma=0.05, random_state=0).fit(X[:1000].compute())
    return est.transform(X)


def _plain(features, url):
    store = locate(url).store(read_only=False)
    z = zarr.create_array(store, shape=features.shape, chunks=tuple(c[0] for c in features.chunks),
                          dtype=features.dtype, compressors=None, overwrite=True, config={"write_empty_chunks": True})
    da.store(features, z, lock=False)


def _cpu():
    t = os.times()
    return t.user + t.system


def _remove(url):
    fs, path = locate(url).filesystem()
    if fs.exists(path):
        fs.rm(path, recursive=True)


def _drop_half_the_markers(out, n_blocks):
    """Every second block unrecorded, wherever its record is (a log or its own object), as a refresh
    clears the blocks it rewrites."""
    clear_rows(zarr.open_group(locate(out).store(read_only=False), mode="r+"), range(0, n_blocks, 2))


def _record_as_workers_leave_it(out, n_blocks, workers=2):
    """The records of ``n_blocks`` written as a job's workers leave them: packed into logs of
    ``EVERY``, and the last ``EVERY - 1`` of each worker still one object each. Returns (logs, singles)."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    done = zarr.open_group(locate(out).store(read_only=False), mode="r+")["blocks_done"]
    tail = min(n_blocks, workers * (EVERY - 1))
    packed = n_blocks - tail
    buffer = default_buffer_prototype().buffer.from_bytes

    async def put():
        logs = [(done.store_path / f"{LOG}/{start}").set(buffer(encode(
            [(i, 0, 1) for i in range(start, min(start + EVERY, packed))]))) for start in range(0, packed, EVERY)]
        await asyncio.gather(*logs)
        gate = asyncio.Semaphore(32)

        async def single(i):
            async with gate:
                await (done.store_path / f"c/{i}/0").set(buffer(np.array([1], dtype="<u8").tobytes()))
        await asyncio.gather(*(single(i) for i in range(packed, n_blocks)))
        return len(logs)

    return sync(put()), tail


def _reruns(features, out, plan, n_blocks):
    """Seconds of (a rerun finding the store complete, ``dkapprox info``, a rerun's plan with half the markers)."""
    complete, finished = _timed(lambda: _finished_same_job(out, plan, io))
    assert finished, "the rerun did not find the store complete"
    info, described = _timed(lambda: io.describe(out, check_input=True))
    assert described["blocks_done"] == n_blocks, described["blocks_done"]
    _drop_half_the_markers(out, n_blocks)
    group = zarr.open_group(locate(out).store(read_only=False), mode="r+")
    attrs = group.attrs.asdict()
    group.attrs.update({**attrs, "dkapprox": {**attrs["dkapprox"], "status": "writing"}})
    half, resumed = _timed(lambda: io.write_features(features, out, plan=plan, compute=False))
    assert resumed.blocks_to_write == (n_blocks + 1) // 2, (resumed.blocks_to_write, n_blocks)
    resumed.release()
    return complete, info, half


def row(client, base, rows, n_blocks):
    features = _features(rows, n_blocks)
    out, plain_url = f"{base}/dk-{n_blocks}.zarr", f"{base}/plain-{n_blocks}.zarr"
    plan = {"bench": "blocks", "blocks": n_blocks}
    _remove(out)
    _remove(plain_url)
    plain, _ = _timed(lambda: _plain(features, plain_url))
    cpu_before = _cpu()
    build, pending = _timed(lambda: io.write_features(features, out, plan=plan, compute=False))
    run, _ = _timed(lambda: pending.finalize(__import__("dkapprox.cluster", fromlist=["run"]).run(
        client, pending.delayed, memory=pending.memory, parts=pending.parts)))  # as a job: given the count
    cpu, tasks = _cpu() - cpu_before, len(pending.delayed.__dask_graph__())  # a new store: every task runs
    write = build + run
    complete, info, half = _reruns(features, out, plan, n_blocks)
    _remove(out)
    _remove(plain_url)
    return [f"{n_blocks:,}", f"{rows // n_blocks:,}", f"{write:.2f}", f"{plain:.2f}", f"{write / plain:.2f}",
            f"{1000 * write / n_blocks:.2f}", f"{build:.2f}", f"{complete:.2f}", f"{half:.2f}", f"{info:.2f}",
            f"{1000 * cpu / max(tasks, 1):.2f} ({tasks:,})"]


def status_row(base, n_blocks):
    """The status side alone at ``n_blocks``: every record written directly, no block computed.

    A write of 10^5 blocks takes this machine's scheduler longer than a session; what a rerun reads
    does not depend on how the records got there. The store is made by ``write_features(compute=False)``
    (plan, lease, arrays), its records written as two workers leave them (:func:`_record_as_workers_leave_it`:
    logs of 1,000, and 999 single objects each), and the write finalized as a finished job's is: given
    the count of writes that returned, so without listing the records again.
    """
    out = f"{base}/status-{n_blocks}.zarr"
    plan = {"bench": "status", "blocks": n_blocks}
    _remove(out)
    features = da.zeros((2 * n_blocks, 8), chunks=(2, 8), dtype=np.float32)
    build, pending = _timed(lambda: io.write_features(features, out, plan=plan, compute=False))
    markers, (logs, singles) = _timed(lambda: _record_as_workers_leave_it(out, n_blocks))
    final, _ = _timed(lambda: pending.finalize(n_blocks))  # as a job does: given the count its writes returned
    complete, info, half = _reruns(features, out, plan, n_blocks)
    _remove(out)
    return [f"{n_blocks:,}", f"{build:.2f}", f"{markers:.1f} ({logs:,} logs, {singles:,} single)", f"{final:.2f}",
            f"{complete:.2f}", f"{info:.2f}", f"{half:.2f}"]


STATUS_HEADER = ("| blocks | build, new store (s) | records written directly (s) | finalize, given the count (s) "
                 "| rerun, complete: nothing to do (s) | info (s) | rerun, half the markers: plan (s) |")


def status_curve(base, counts, label):
    print(f"\n## The status of a store of N blocks (records written directly, no block computed), {label}")
    print(STATUS_HEADER)
    print("|---:" * (STATUS_HEADER.count("|") - 1) + "|")
    for n in counts:
        print("| " + " | ".join(status_row(base, n)) + " |", flush=True)


HEADER = ("| blocks | rows/block | dkapprox write (s) | plain dask (s) | dkapprox / plain | ms per block "
          "| build (s) | rerun, complete (s) | rerun, half the markers (s) | info (s) "
          "| client+scheduler CPU ms per task (tasks) |")


def curve(client, base, rows, counts, label):
    print(f"\n## {rows:,} x {COLS} float32 -> RBFSampler({N_COMPONENTS}), LocalCluster(2x1), {label}")
    print(HEADER)
    print("|---:" * (HEADER.count("|") - 1) + "|")
    for n in counts:
        print("| " + " | ".join(row(client, base, rows, n)) + " |", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--blocks", type=int, nargs="*", default=[10, 100, 1_000, 10_000, 100_000])
    parser.add_argument("--s3-rows", type=int, default=200_000)
    parser.add_argument("--s3-blocks", type=int, nargs="*", default=[10, 100, 1_000, 10_000])
    parser.add_argument("--status-blocks", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--s3-status-blocks", type=int, nargs="*", default=[10_000])
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the script")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.blocks, args.s3_rows, args.s3_blocks = 20_000, [10, 100], 20_000, [10]
        args.status_blocks, args.s3_status_blocks = [100], [100]
    from distributed import Client, LocalCluster

    # the S3 server first: the workers read its AWS_* variables when they start
    with s3_bucket() as bucket, LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        local = tempfile.mkdtemp(prefix="bench-blocks-")
        try:
            if args.blocks:
                curve(client, local, args.rows, args.blocks, "local disk")
            if args.status_blocks:
                status_curve(local, args.status_blocks, "local disk")
        finally:
            shutil.rmtree(local, ignore_errors=True)
        if args.s3_blocks:
            curve(client, bucket, args.s3_rows, args.s3_blocks, "S3 test server")
        if args.s3_status_blocks:
            status_curve(bucket, args.s3_status_blocks, "S3 test server")


if __name__ == "__main__":
    main()
