"""Icechunk outputs against plain Zarr ones, in one run (issue 50): throughput, commit latency, metadata growth.

    python benchmarks/bench_icechunk.py [--rows 200000] [--nights 30] [--s3] [--repeats 3] [--root /dev/shm]

Prints, side by side, the seconds of the same featurization job (RBFSampler, 256 float32 features a row)
written to a plain Zarr store and to an Icechunk repository on local disk (and, with ``--s3``, on a moto S3
server on loopback), alternating, three runs each; Icechunk's speed over Zarr's (>= 0.9 is the target); the
time from the last block written to the branch showing the commit; the commits a job makes; and the size of
the repository's metadata (snapshots, manifests, transactions, refs) after ``--nights`` nightly runs.

Every run writes a new output (a new Zarr store; a new repository), deleted after it; before each, the disk
is flushed (``os.sync``) and, as root, the page cache dropped, and the order of the runs rotates: a run that
overwrote the last one's files would let the page cache drop that run's unflushed pages, which a nightly
job, whose last output reached the disk hours ago, never gets (an earlier version of this benchmark did that
for plain Zarr and measured 0.36x), and a run after gigabytes of writes pays for reclaiming their pages. On
local disk it prints the job's seconds and the job's plus the flush's (the features on the disk).
"""

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("ICECHUNK_LOG", "error")


def _job(source, out, *, overwrite=False, commit_every=None):
    from dkapprox.io import open_array, write_features
    from dkapprox.kernel_approximation import RBFSampler

    X = open_array(source)
    est = RBFSampler(n_components=256, gamma=0.1, random_state=0).fit(X[:1000])
    extra = {"commit_every": commit_every} if commit_every else {}
    started = time.perf_counter()
    report = write_features(est.transform(X), out, plan={"job": "bench"}, overwrite=overwrite, **extra)
    return time.perf_counter() - started, report


def _inputs(root, rows, block):
    import icechunk
    import zarr

    data = np.random.default_rng(0).random((rows, 32)).astype(np.float32)
    zarr.create_array(f"{root}/x.zarr", shape=data.shape, chunks=(block, 32), dtype="f4")[...] = data
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(f"{root}/repo"))
    session = repo.writable_session("main")
    zarr.create_array(session.store, name="X", shape=data.shape, chunks=(block, 32), dtype="f4")[...] = data
    session.commit("input")
    return data


def _settle():
    """Flush the disk and, as root, drop the page cache: every job starts from the same memory (a job run
    after gigabytes of writes otherwise pays for reclaiming their pages, 1.5-2.5x its time on a 24 GiB host)."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


def _timed(source, out, flush):
    """(job seconds, job + flush seconds, report) of one job writing a new output."""
    _settle()
    seconds, report = _job(source, out)
    if flush:
        started = time.perf_counter()
        os.sync()
        return seconds, seconds + time.perf_counter() - started, report
    return seconds, seconds, report


def _disk(root, k, nbytes, chunk):
    """(seconds, with the flush) to write ``nbytes`` as new files of ``chunk`` bytes: the disk's limit."""
    _settle()
    folder = Path(root) / f"disk{k}"
    folder.mkdir()
    payload = np.random.default_rng(k).bytes(chunk)
    started = time.perf_counter()
    for i in range(-(-nbytes // chunk)):
        (folder / str(i)).write_bytes(payload)
    seconds = time.perf_counter() - started
    os.sync()
    return seconds, time.perf_counter() - started


def _compare(name, plain_in, plain_out, ice_in, ice_out, repeats=3, flush=True, disk=None, cleanup=None):
    plain, ice, latency, commits, limit = [], [], [], set(), []
    def run_plain(k):
        seconds, durable, _ = _timed(plain_in, plain_out.format(k=k), flush)
        plain.append((seconds, durable))

    def run_ice(k):
        seconds, durable, report = _timed(ice_in, ice_out.format(k=k), flush)
        ice.append((seconds, durable))
        latency.append(report.commit_seconds)
        commits.add(report.commits)

    def run_disk(k):
        if disk is not None:
            limit.append(_disk(disk[0], k, *disk[1:]))

    runs = [run_plain, run_ice, run_disk]
    for k in range(repeats):  # a new output each run ({k} in the names), in a rotating order
        for run in runs[k % 3:] + runs[:k % 3]:
            run(k)
        if cleanup is not None:  # a memory filesystem must not fill up
            cleanup(k)
    (p, pd), (i, idur) = (np.median(np.array(x), axis=0) for x in (plain, ice))
    flushed = f"   with the flush: {pd:6.2f} s / {idur:6.2f} s = {pd / idur:5.2f}x" if flush else ""
    print(f"{name:<14} plain Zarr {p:7.2f} s   Icechunk {i:7.2f} s   Icechunk/Zarr speed {p / i:5.2f}x{flushed}   "
          f"last block -> branch shows it {min(latency) * 1e3:7.1f} ms (max {max(latency) * 1e3:.1f})   "
          f"commits/job {sorted(commits)}   (medians of {repeats})")
    each = sorted(a[1] / b[1] for a, b in zip(plain, ice, strict=True))
    what = " (with the flush)" if flush else ""
    print(f"{'':<14} the speed ratio run by run{what}: {each[0]:.2f}x to {each[-1]:.2f}x, median "
          f"{np.median(each):.2f}x (each Icechunk run against the plain run of its round: the disk's drift cancels)")
    if limit:
        d, dd = np.median(np.array(limit), axis=0)
        print(f"{'':<14} the disk's limit (the same bytes as new files, no Zarr) {d:6.2f} s, with the flush "
              f"{dd:6.2f} s: plain Zarr at {dd / pd:4.2f}, Icechunk at {dd / idur:4.2f} of it")


def _metadata_bytes(repo):
    return sum(f.stat().st_size for part in ("snapshots", "manifests", "transactions", "refs", "repo")
               for f in (Path(repo) / part).rglob("*") if f.is_file())


def _nights(root, nights, rows, block):
    import icechunk
    import zarr

    repo_path = f"{root}/nightly"
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(repo_path))
    rng = np.random.default_rng(1)
    sizes = []
    for night in range(nights):
        session = repo.writable_session("main")
        zarr.create_array(session.store, name="X", shape=(rows, 32), chunks=(block, 32), dtype="f4",
                          overwrite=True)[...] = rng.random((rows, 32)).astype(np.float32)
        session.commit(f"night {night} input")
        _, report = _job(f"icechunk+file://{repo_path}?branch=main&array=X",
                         f"icechunk+file://{repo_path}?branch=features&group=rbf", overwrite=True)
        sizes.append(_metadata_bytes(repo_path))
    snapshots = len(list(repo.ancestry(branch="features")))
    print(f"{nights} nights of {rows:,} rows ({rows // block} blocks a job, {report.commits} commits a job): "
          f"metadata {sizes[0] / 1024:.0f} KiB after one night, {sizes[-1] / 1024:.0f} KiB after {nights} "
          f"({sizes[-1] / nights / 1024:.0f} KiB a night); {snapshots} snapshots on the features branch")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--block", type=int, default=10_000)
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--s3", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--root", help="the folder to work in (default: the temporary folder); /dev/shm takes the "
                                       "disk out, leaving the software's own costs")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="bench-icechunk-", dir=args.root)
    try:
        _inputs(root, args.rows, args.block)
        print(f"{args.rows:,} rows x 32 -> 256 float32 features, blocks of {args.block:,} rows; "
              f"{os.cpu_count()} cores")
        def cleanup(k):
            for name in (f"out{k}.zarr", f"out{k}.repo", f"disk{k}"):
                shutil.rmtree(f"{root}/{name}", ignore_errors=True)

        _compare("local disk" if args.root is None else f"in {args.root}", f"{root}/x.zarr", f"{root}/out{{k}}.zarr", f"icechunk+file://{root}/repo?array=X",
                 f"icechunk+file://{root}/out{{k}}.repo?branch=main&group=rbf", repeats=args.repeats,
                 disk=(root, args.rows * 256 * 4, args.block * 256 * 4), cleanup=cleanup)
        if args.s3:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
            from _s3 import MotoServer

            with MotoServer(log=Path(root) / "moto.log") as server:
                server.make_bucket("data")
                with server.environment():
                    _compare("S3 (moto)", f"{root}/x.zarr", "s3://data/out{k}.zarr",
                             f"icechunk+file://{root}/repo?array=X", "icechunk+s3://data/repo?branch=main&group=rbf{k}",
                             repeats=args.repeats, flush=False)
        _nights(root, args.nights, args.rows // 10, args.block)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
