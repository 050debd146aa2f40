"""Icechunk outputs against plain Zarr ones, in one run (issue 50): throughput, commit latency, metadata growth.

    python benchmarks/bench_icechunk.py [--rows 200000] [--nights 30] [--s3]

Prints, side by side, the seconds of the same featurization job (RBFSampler, 256 float32 features a row)
written to a plain Zarr store and to an Icechunk repository on local disk (and, with ``--s3``, on a moto S3
server on loopback), alternating, three runs each; Icechunk's speed over Zarr's (>= 0.9 is the target); the
time from the last block written to the branch showing the commit; the commits a job makes; and the size of
the repository's metadata (snapshots, manifests, transactions, refs) after ``--nights`` nightly runs.
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


def _compare(name, plain_in, plain_out, ice_in, ice_out, repeats=3):
    plain, ice, latency, commits = [], [], [], set()
    for _ in range(repeats):
        seconds, _ = _job(plain_in, plain_out, overwrite=True)
        plain.append(seconds)
        seconds, report = _job(ice_in, ice_out, overwrite=True)
        ice.append(seconds)
        latency.append(report.commit_seconds)
        commits.add(report.commits)
    p, i = min(plain), min(ice)
    print(f"{name:<14} plain Zarr {p:7.2f} s   Icechunk {i:7.2f} s   Icechunk/Zarr speed {p / i:5.2f}x   "
          f"last block -> branch shows it {min(latency) * 1e3:7.1f} ms (max {max(latency) * 1e3:.1f})   "
          f"commits/job {sorted(commits)}")


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
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="bench-icechunk-")
    try:
        _inputs(root, args.rows, args.block)
        print(f"{args.rows:,} rows x 32 -> 256 float32 features, blocks of {args.block:,} rows; "
              f"{os.cpu_count()} cores")
        _compare("local disk", f"{root}/x.zarr", f"{root}/out.zarr", f"icechunk+file://{root}/repo?array=X",
                 f"icechunk+file://{root}/repo?branch=main&group=rbf")
        if args.s3:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
            from _s3 import MotoServer

            with MotoServer(log=Path(root) / "moto.log") as server:
                server.make_bucket("data")
                with server.environment():
                    _compare("S3 (moto)", f"{root}/x.zarr", "s3://data/out.zarr", f"icechunk+file://{root}/repo?array=X",
                             "icechunk+s3://data/repo?branch=main&group=rbf")
        _nights(root, args.nights, args.rows // 10, args.block)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
