"""dkapprox across hosts, on the multi-host bed: S3 throughput, state shipping, a cut link.

Builds the bed of tests/cluster/test_multihost.py (tests/cluster/_netbed.py:
network namespaces on a bridge; an S3 host running moto's server, a scheduler
host, 2 worker hosts of 1 thread each; needs root), with every worker link
rate-shaped to ``--rate`` (default 1 Gbit/s, tc tbf; this kernel has no netem,
so no latency is added). It tears everything down at the end.

Printed:

1. **Featurize S3 to S3**: RBFSampler(256) float32 of an N(0, 1) float32 store
   of ``--rows`` x 256 on S3 (2,000,000 rows: 2 GiB), written to S3 through
   ``dkapprox.io.write_features``; rows/s beside the same path's I/O limit
   measured in the same run: a plain dask copy (``da.from_zarr`` ->
   ``da.to_zarr``) of an array as large as the output, S3 to S3. With 256
   input features the input itself is that array.
2. **State shipping**: bytes each worker host received on its link during a
   200-block Nystroem(1024) transform (each block's rows made inside its
   transform task, and reduced to one number, so that nothing but the
   state and a few bytes of results needs to move),
   against the state's size, and the same for
   ``X.map_blocks(sklearn_estimator.transform)``.
3. **Wait after a cut link**: seconds from ``ip link set ... down`` on one
   worker host, mid-featurize, to the job's completion (scheduler
   worker-ttl 5 s, connect timeout 3 s: distributed's default ttl is 5
   minutes, see docs/clusters.md, "Across hosts").

    sudo .venv/bin/python benchmarks/bench_multihost.py                 # 2 GiB: several minutes
    sudo .venv/bin/python benchmarks/bench_multihost.py --rows 200000   # a quick look
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "cluster"))
sys.path.insert(0, str(HERE.parent / "tests"))
from _common import print_table  # noqa: E402
from _netbed import NetBed  # noqa: E402

FEATURES, N_COMPONENTS = 256, 256


def s3_store(url, read_only=False):
    from zarr.storage import FsspecStore

    return FsspecStore.from_url(url, read_only=read_only)


def make_input(rows, block):
    import dask.array as da

    X = da.random.default_rng(0).standard_normal((rows, FEATURES), chunks=(block, FEATURES), dtype="float32")
    da.to_zarr(X, s3_store("s3://data/in.zarr"), overwrite=True)


def dask_copy(rows):
    import dask.array as da

    X = da.from_zarr(s3_store("s3://data/in.zarr", read_only=True))
    started = time.perf_counter()
    da.to_zarr(X, s3_store("s3://data/copy.zarr"), overwrite=True)
    return time.perf_counter() - started


def featurize(rows):
    from dkapprox import RBFSampler, io

    X = io.open_array("s3://data/in.zarr")
    est = RBFSampler(n_components=N_COMPONENTS, random_state=0).fit(X)
    started = time.perf_counter()
    report = io.write_features(est.transform(X), "s3://data/out.zarr", plan={"bench": "multihost"},
                               overwrite=True)
    assert report.blocks_written == X.numblocks[0]
    return time.perf_counter() - started


def _random_rows(block_rows, block_id=None):
    return np.random.default_rng(block_id[0]).standard_normal((block_rows, 64))


def state_shipping(bed, client, n_blocks, block_rows):
    import dask.array as da
    from sklearn.kernel_approximation import Nystroem as SkNystroem

    from dkapprox import Nystroem

    rng = np.random.default_rng(1)
    sample = rng.standard_normal((4096, 64))
    ours = Nystroem(n_components=1024, random_state=0).fit(sample)
    theirs = SkNystroem(n_components=1024, random_state=0).fit(sample)
    state_bytes = sum(getattr(ours, a).nbytes for a in ("components_", "normalization_", "component_indices_"))
    results = {}
    for name, transform in (("dkapprox", ours.transform),
                            ("X.map_blocks(sklearn.transform)",
                             lambda X: X.map_blocks(theirs.transform, chunks=(X.chunks[0], (1024,)),
                                                    dtype="float64"))):
        client.restart()  # nothing cached on the workers from the run before
        # rows made inside each transform task (a blockwise layer dask fuses): no input block ever moves
        X = da.map_blocks(_random_rows, block_rows, chunks=((block_rows,) * n_blocks, (64,)), dtype="float64",
                          meta=np.empty((0, 0)))
        before = {w.name: bed.bytes_received(w.name) for w in bed.workers}
        started = time.perf_counter()
        transform(X).sum().compute()
        seconds = time.perf_counter() - started
        got = {w.name: bed.bytes_received(w.name) - before[w.name] for w in bed.workers}
        results[name] = (got, seconds)
    return state_bytes, results


def cut_link(bed, client, rows, block):
    import threading

    from dkapprox import RBFSampler, io

    X = io.open_array("s3://data/in.zarr")
    est = RBFSampler(n_components=N_COMPONENTS, random_state=0).fit(X)
    pending = io.write_features(est.transform(X), "s3://data/cut.zarr", plan={"bench": "cut"}, overwrite=True,
                                compute=False)
    cut_at = {}

    def cut_when_started():
        import s3fs

        fs = s3fs.S3FileSystem(skip_instance_cache=True)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # bounded
            fs.invalidate_cache()
            try:
                done = sum(1 for k in fs.find("data/cut.zarr/blocks_done") if "/c/" in k)
            except FileNotFoundError:
                done = 0
            if done >= max(2, pending.blocks_total // 4):
                cut_at["t"] = time.monotonic()
                bed.cut("w1")
                break
            time.sleep(0.1)
        while "t" in cut_at and time.monotonic() < deadline:  # bounded: until the scheduler drops w1
            if len(client.scheduler_info()["workers"]) < 2:
                cut_at["removed"] = time.monotonic()
                return
            time.sleep(0.1)

    watcher = threading.Thread(target=cut_when_started, daemon=True)
    watcher.start()
    import dask

    dask.compute(pending.delayed)
    finished = time.monotonic()
    pending.finalize()
    watcher.join(5)
    bed.mend("w1")
    if "t" not in cut_at:
        return float("nan"), float("nan")
    return finished - cut_at["t"], cut_at.get("removed", float("nan")) - cut_at["t"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--block-rows", type=int, default=16_000)
    parser.add_argument("--rate", default="1gbit")
    parser.add_argument("--ship-blocks", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3, help="copy and featurize runs, alternating (median)")
    parser.add_argument("--nthreads", type=int, default=1, help="threads per worker (1 core per worker host)")
    args = parser.parse_args()
    import s3fs
    from distributed import Client

    with tempfile.TemporaryDirectory() as tmp, NetBed(tmp, n_workers=2, rate=args.rate, nthreads=args.nthreads,
                                                      memory_limit="4GiB") as bed:
        os.environ.update(bed.env())
        bed.moto.make_bucket("data")
        with Client(bed.scheduler_address) as client:
            gib = args.rows * FEATURES * 4 / 2**30
            started = time.perf_counter()
            make_input(args.rows, args.block_rows)
            print(f"input: {args.rows:,} x {FEATURES} float32 = {gib:.2f} GiB on S3, written by the workers in "
                  f"{time.perf_counter() - started:.1f} s; worker links shaped to {args.rate} (tbf); "
                  f"{args.nthreads} thread(s) per worker")
            fs = s3fs.S3FileSystem(skip_instance_cache=True)
            copies, feats = [], []
            for _ in range(args.repeats):  # alternating, so that both see the same machine
                copies.append(dask_copy(args.rows))
                fs.rm("data/copy.zarr", recursive=True)  # moto keeps every object in memory
                feats.append(featurize(args.rows))
                fs.rm("data/out.zarr", recursive=True)
            copy_s, feat_s = statistics.median(copies), statistics.median(feats)
            print("runs (s): copy " + ", ".join(f"{t:.1f}" for t in copies) + "; featurize "
                  + ", ".join(f"{t:.1f}" for t in feats) + "; ratios per pair "
                  + ", ".join(f"{c / f:.3f}" for c, f in zip(copies, feats)))
            print_table(f"1. S3 -> S3 on 2 worker hosts ({gib:.2f} GiB in and out; median of {args.repeats})",
                        ["path", "seconds", "rows/s", "MiB/s read+written", "of the I/O limit"],
                        [["dask copy (the I/O limit)", copy_s, args.rows / copy_s, 2 * gib * 1024 / copy_s, 1.0],
                         [f"featurize RBFSampler({N_COMPONENTS}) float32", feat_s, args.rows / feat_s,
                          2 * gib * 1024 / feat_s, copy_s / feat_s]])
            client.run(lambda: None)
            state_bytes, shipped = state_shipping(bed, client, args.ship_blocks, 1000)
            rows = []
            for name, (got, seconds) in shipped.items():
                for worker, n in sorted(got.items()):
                    rows.append([name, worker, n / 2**20, n / state_bytes, seconds])
            print_table(f"2. Nystroem(1024) transform, {args.ship_blocks} blocks of 1,000 x 64: bytes each worker "
                        f"host received (state: {state_bytes / 2**20:.2f} MiB)",
                        ["graph", "worker", "MiB received", "x state", "seconds"], rows)
            waited, removed = cut_link(bed, client, args.rows, args.block_rows)
            print(f"\n3. worker link cut a quarter into the featurize (undisturbed: {feat_s:.1f} s on 2 workers): "
                  f"{waited:.1f} s from the cut to the job's completion; the scheduler dropped the worker "
                  f"{removed:.1f} s after the cut, and the other worker did the remaining three quarters")


if __name__ == "__main__":
    main()
