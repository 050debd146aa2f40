"""Featurize a Zarr store on a LocalCluster
========================================

Featurize a Zarr store on a LocalCluster: the notebook version of `dkapprox featurize`.

Random Fourier features (RBFSampler) of a Zarr array, written to a new Zarr
store block by block: the data never has to fit in memory, a rerun after a
crash writes only the missing blocks, and the stored numbers are those of an
in-memory ``transform``.

Run it by hand::

    python examples/featurize_zarr_store.py                       # 2,000,000 x 32 rows in /tmp
    python examples/featurize_zarr_store.py --rows 20000 --dir /tmp/demo
"""

import argparse
import os
import tempfile
import time

import dask.array as da
import numpy as np
from distributed import Client, LocalCluster, progress

from dkapprox import RBFSampler
from dkapprox.io import describe, open_array, open_features, write_features

# argparse's description (sphinx-gallery runs the script without its docstring)
DESCRIPTION = 'Featurize a Zarr store on a LocalCluster: the notebook version of `dkapprox featurize`.'


def make_input(path, rows, features, chunk_rows):
    """A Zarr array of Gaussian blobs: stands in for your own store."""
    rng = da.random.default_rng(0)
    centers = np.random.default_rng(0).normal(scale=3.0, size=(8, features)).astype(np.float32)
    labels = rng.integers(0, len(centers), size=rows, chunks=chunk_rows)
    X = rng.standard_normal((rows, features), chunks=(chunk_rows, features), dtype=np.float32)
    X = X + labels.map_blocks(lambda i: centers[i], new_axis=1, chunks=(X.chunks[0], (features,)),
                              dtype=np.float32)
    da.to_zarr(X, path, overwrite=True)


def main():
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--n-components", type=int, default=256)
    parser.add_argument("--chunk-rows", type=int, default=100_000)
    parser.add_argument("--dir", default=None, help="where the stores go (default: a new temporary directory)")
    args = parser.parse_args()
    directory = args.dir or tempfile.mkdtemp(prefix="dkapprox-example-")
    source, target = os.path.join(directory, "input.zarr"), os.path.join(directory, "features.zarr")
    chunk_rows = min(args.chunk_rows, args.rows)

    # One single-threaded worker per core is fastest for these blocks (BLAS gets the core).
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="2GiB") as cluster, Client(cluster) as client:
        print(f"dashboard: {client.dashboard_link}")
        if not os.path.exists(source):
            make_input(source, args.rows, args.features, chunk_rows)

        X = open_array(source)  # lazy; blocks are the Zarr chunks
        rbf = RBFSampler(gamma="scale", n_components=args.n_components, random_state=0).fit(X)  # one pass
        Z = rbf.transform(X)  # lazy too: nothing is computed yet
        print(f"input {X.shape[0]:,} x {X.shape[1]} {X.dtype}; features {Z.shape} in {Z.numblocks[0]} blocks")

        # Plan the write, run it under the client with a progress bar, then mark it complete.
        plan = {"input": source, "model": "RBFSampler", "n_components": args.n_components, "random_state": 0}
        started = time.perf_counter()
        pending = write_features(Z, target, plan=plan, overwrite=True, compute=False)
        future = client.compute(pending.delayed)
        progress(future, notebook=False)
        print()
        report = pending.finalize(future.result())  # the count of blocks written: no listing of their markers
        seconds = time.perf_counter() - started
        print(f"wrote {report.blocks_written} of {report.blocks_total} blocks in {seconds:.2f} s "
              f"({X.shape[0] / seconds:,.0f} rows/s)")

        stored = open_features(target)
        head = min(1000, X.shape[0])
        difference = float(np.abs(stored[:head].compute() - rbf.transform(X[:head].compute())).max())
        print(f"max |stored - in-memory transform| on the first {head} rows: {difference:.2e}")
        info = describe(target)
        print(f"store: {info['path']} status={info['status']} shape={info['shape']} chunks={info['chunks']}")


if __name__ == "__main__":
    main()
