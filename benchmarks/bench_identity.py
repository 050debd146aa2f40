"""What a nightly job pays to never lie: the input's identity, --refresh, and verify, side by side.

    python benchmarks/bench_identity.py [--chunks 1000 10000 100000] [--s3-chunks 1000 10000]
                                        [--rows 2000000] [--quick]

1. **Identity** (one listing of the input's chunks, no data read) at each count of input chunks, on
   local disk and on the S3 test server (moto on loopback), against the write it guards:
   ``write_features`` of RBFSampler(64) over the same array on the threaded scheduler.
2. **Refresh** of a featurized store (``--rows`` x 32 float32 in 100,000-row chunks, RBFSampler(128),
   local disk and S3) after 1% of the input chunks were rewritten, and after 10% more rows were
   appended, against the full run.
3. **verify** of that store (checksums and the input listing) against one plain read of the store.

Ratios are printed beside the times; absolute times on a shared machine are noise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import dask
import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _common import s3_bucket  # noqa: E402

from dkapprox.io import open_array, open_features, verify, write_features  # noqa: E402
from dkapprox.io._identity import identify  # noqa: E402
from dkapprox.io._location import locate, location_of_node  # noqa: E402
from dkapprox.kernel_approximation import RBFSampler  # noqa: E402


def _timed(fn):
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def _array(url, rows, cols, chunk_rows, seed=0):
    store = locate(url).store(read_only=False)
    z = zarr.create_array(store, shape=(rows, cols), chunks=(chunk_rows, cols), dtype="f4", overwrite=True)
    step = max(chunk_rows, (2**24 // (cols * 4)) // chunk_rows * chunk_rows)
    rng = np.random.default_rng(seed)
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        z[start:stop] = rng.standard_normal((stop - start, cols), dtype=np.float32)
    return z


def _job(url, out, n_components, **kwargs):
    """One job, until its bytes are on disk: each timed run pays its own writeback (os.sync), not the
    previous run's (a refresh timed right after a 6 GiB full run waited on that run's dirty pages)."""
    X = open_array(url)
    features = RBFSampler(n_components=n_components, gamma=0.1, random_state=0).fit(X).transform(X)
    report = write_features(features, out, plan={"bench": "identity"}, **kwargs)
    os.sync()
    return report


def identity_costs(base, counts, label, job_limit):
    print(f"\n## identity: one listing of the input's chunks ({label})")
    print("| input chunks | identity (s) | write it guards (s) | identity / write |")
    print("|---:|---:|---:|---:|")
    for n in counts:
        url = f"{base}/id-{n}.zarr"
        z = _array(url, n * 50, 8, 50)
        seconds, ident = _timed(lambda: identify(z, location_of_node(z)))  # noqa: B023
        assert len(ident.keys) == n, (len(ident.keys), n)
        if n <= job_limit:
            with dask.config.set(scheduler="threads", num_workers=2):
                job, _ = _timed(lambda: _job(url, f"{base}/id-{n}-out.zarr", 64))  # noqa: B023
            print(f"| {n:,} | {seconds:.3f} | {job:.1f} | {seconds / job:.4f} |")
        else:
            print(f"| {n:,} | {seconds:.3f} | not run (over --job-limit) | |")


def refresh_costs(base, rows, label):
    print(f"\n## refresh and verify: {rows:,} x 32 float32, 100,000-row chunks, RBFSampler(128) ({label})")
    url, out = f"{base}/in.zarr", f"{base}/out.zarr"
    z = _array(url, rows, 32, 100_000)
    with dask.config.set(scheduler="threads", num_workers=2):
        full, report = _timed(lambda: _job(url, out, 128))
        n_chunks = report.blocks_total
        changed = max(1, n_chunks // 100)
        picks = np.linspace(0, n_chunks - 1, changed).astype(int)
        for i in picks:
            z[i * 100_000:(i + 1) * 100_000] = np.full((min(100_000, rows - i * 100_000), 32), 0.5, "f4")
        one_pct, r1 = _timed(lambda: _job(url, out, 128, refresh=True))
        appended = rows // 10
        z.append(np.random.default_rng(9).standard_normal((appended, 32), dtype=np.float32))
        ten_pct, r2 = _timed(lambda: _job(url, out, 128, refresh=True))
    check, vr = _timed(lambda: verify(out))
    assert vr.ok, vr.lines()
    plain, _ = _timed(lambda: open_features(out).sum().compute(scheduler="threads", num_workers=4))
    print("| what | seconds | of the full run | blocks written |")
    print("|---|---:|---:|---:|")
    print(f"| full run | {full:.2f} | 1.00 | {report.blocks_written} |")
    print(f"| --refresh after {changed} of {n_chunks} chunks rewritten (1%) | {one_pct:.2f} | "
          f"{one_pct / full:.3f} | {r1.blocks_written} |")
    print(f"| --refresh after {appended:,} rows appended (10%) | {ten_pct:.2f} | {ten_pct / full:.3f} | "
          f"{r2.blocks_written} |")
    print(f"\nverify: {check:.2f} s for {vr.bytes_read / 2**30:.2f} GiB; one plain read of the store "
          f"(dask sum, 4 threads): {plain:.2f} s; verify / read = {check / plain:.2f}")


class _Skip(Exception):
    pass


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    parser.add_argument("--s3-chunks", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    parser.add_argument("--job-limit", type=int, default=100_000, help="largest chunk count whose job is run")
    parser.add_argument("--s3-job-limit", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=12_000_000, help="the demo's size")
    parser.add_argument("--s3-rows", type=int, default=2_000_000)
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the script")
    parser.add_argument("--refresh-only", action="store_true", help="only part 2 and 3 (refresh and verify)")
    parser.add_argument("--no-local", action="store_true", help="only the S3 test server")
    args = parser.parse_args(argv)
    if args.quick:
        args.chunks, args.s3_chunks, args.rows, args.s3_rows = [1_000], [1_000], 400_000, 200_000
    print(f"# bench_identity on {os.cpu_count()} cores")
    local = tempfile.mkdtemp(prefix="bench-identity-")
    try:
        if args.no_local:
            raise _Skip
        if not args.refresh_only:
            identity_costs(local, args.chunks, "local disk", args.job_limit)
        refresh_costs(local + "/refresh", args.rows, "local disk")
    except _Skip:
        pass
    finally:
        shutil.rmtree(local, ignore_errors=True)
    with s3_bucket() as bucket:
        if not args.refresh_only:
            identity_costs(bucket, args.s3_chunks, "S3 test server", args.s3_job_limit)
        refresh_costs(bucket + "/refresh", args.s3_rows, "S3 test server")


if __name__ == "__main__":
    main()
