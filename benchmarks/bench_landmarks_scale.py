"""Nystroem landmark methods at scale (issue 31): a 10^7 x 32 float32 Zarr input on LocalCluster(2x1).

Fits Nystroem(n_components=256) with each landmark method on a Zarr array of
10^7 x 32 float32 rows (1.28 GB, chunks of 250,000 rows; made once, chunk by
chunk, into a temporary directory or ``--dir``) on LocalCluster(n_workers=2,
threads_per_worker=1): uniform, kmeans with n_iter=1, leverage and rpcholesky
(plain, l = m), and the best options within 3 passes with n_landmarks l = 4m
(kmeans n_iter=1, rpcholesky). For each: fit seconds and passes, side by side
as a ratio to uniform, and the relative Frobenius error of the rbf kernel on
2,000 rows of the data (what the time bought).

Passes are counted as bench_nystroem.py's passes table counts them:
``landmark_passes_``, and the block reads themselves. The Zarr array is read
through dkapprox's own reader (``dkapprox.inputs._lazy.as_dask``, what ``fit`` does
with a Zarr array); each block then goes through a function that appends its
block index to a file in a shared directory (the workers are processes), and
the reads are counted from those files after each fit.

The data: a mixture of 30 Gaussian clusters in 32 dimensions with Zipf sizes
(1/k^1.5) whose widths shrink as they grow (0.1 to 2.0; bench_nystroem's
"blobs of uneven density"), each chunk drawn from its own seed; rbf kernel at
gamma = 1 / (n_features * X.var()) of the first chunk.

    python benchmarks/bench_landmarks_scale.py                 # 10^7 rows, temporary directory
    python benchmarks/bench_landmarks_scale.py --dir /data/x   # keep (or reuse) the Zarr array there
    python benchmarks/bench_landmarks_scale.py --rows 1000000  # smaller
    python benchmarks/bench_landmarks_scale.py --methods rpcholesky-4m   # uniform and one method
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time
from collections import Counter

import numpy as np
import zarr
from distributed import Client, LocalCluster
from sklearn.metrics.pairwise import rbf_kernel

sys.path.insert(0, os.path.dirname(__file__))
from _common import print_table  # noqa: E402

import dkapprox  # noqa: E402
from dkapprox.inputs import _lazy  # noqa: E402
from dkapprox.nystroem import Nystroem  # noqa: E402

N_FEATURES, N_CLUSTERS = 32, 30
#: key -> (label, landmarks, landmark_params, l / m)
METHODS = {"uniform": ("uniform", "uniform", None, 1), "kmeans": ("kmeans, n_iter=1", "kmeans", {"n_iter": 1}, 1),
           "leverage": ("leverage", "leverage", None, 1), "rpcholesky": ("rpcholesky", "rpcholesky", None, 1),
           "kmeans-4m": ("kmeans, n_iter=1, l=4m", "kmeans", {"n_iter": 1}, 4),
           "rpcholesky-4m": ("rpcholesky, l=4m", "rpcholesky", None, 4)}


def mixture_chunk(i, rows):
    """Chunk ``i``: rows of the mixture, from the seed ``i`` (the centers and widths from seed 0)."""
    layout = np.random.default_rng(0)
    centers = layout.uniform(-10, 10, (N_CLUSTERS, N_FEATURES))
    widths = np.geomspace(0.1, 2.0, N_CLUSTERS)
    sizes = 1.0 / np.arange(1, N_CLUSTERS + 1) ** 1.5
    rng = np.random.default_rng(1 + i)
    labels = rng.choice(N_CLUSTERS, rows, p=sizes / sizes.sum())
    X = centers[labels] + rng.standard_normal((rows, N_FEATURES)) * widths[labels, None]
    return X.astype(np.float32)


def make_zarr(path, n_rows, chunk):
    """The Zarr array at ``path``, made once (an existing array of this shape and chunking is reused)."""
    if os.path.exists(path):
        z = zarr.open_array(path, mode="r")
        if z.shape == (n_rows, N_FEATURES) and z.chunks == (chunk, N_FEATURES):
            return z, 0.0
        raise SystemExit(f"{path} holds another array {z.shape} in chunks {z.chunks}: choose another --dir")
    start = time.perf_counter()
    z = zarr.create_array(path, shape=(n_rows, N_FEATURES), chunks=(chunk, N_FEATURES), dtype=np.float32)
    for i, lo in enumerate(range(0, n_rows, chunk)):
        z[lo:lo + chunk] = mixture_chunk(i, min(chunk, n_rows - lo))
    return zarr.open_array(path, mode="r"), time.perf_counter() - start


def logged_block(block, log_dir, block_info=None):
    """The block, unchanged; its index appended to this process's file in ``log_dir`` (one line a read)."""
    with open(os.path.join(log_dir, f"reads-{os.getpid()}.txt"), "a") as f:
        f.write(f"{block_info[0]['chunk-location'][0]}\n")
    return block


def block_reads(log_dir):
    """Reads per block since the last call (the files are emptied)."""
    counts = Counter()
    for name in glob.glob(os.path.join(log_dir, "reads-*.txt")):
        with open(name) as f:
            counts.update(int(line) for line in f if line.strip())
        os.remove(name)
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--chunk", type=int, default=250_000)
    parser.add_argument("--m", type=int, default=256, help="n_components (256)")
    parser.add_argument("--dir", default=None, help="where the Zarr array is made (default: a temporary directory)")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated, of {', '.join(METHODS)} (uniform, the ratios' base, always runs first)")
    args = parser.parse_args()
    methods = ["uniform"] + [key for key in args.methods.split(",") if key != "uniform"]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(args.dir or tmp, f"mixture-{args.rows}x{N_FEATURES}.zarr")
        z, made_s = make_zarr(path, args.rows, args.chunk)
        log_dir = os.path.join(tmp, "reads")
        os.makedirs(log_dir)
        first = np.asarray(z[:args.chunk])
        gamma = 1.0 / (N_FEATURES * float(first.var()))
        E = first[np.random.default_rng(9).choice(len(first), 2_000, replace=False)]  # the error's rows
        K = rbf_kernel(E, gamma=gamma)
        print(f"dkapprox {dkapprox.__version__}, {os.cpu_count()} cores; X: Zarr ({args.rows:,}, {N_FEATURES}) "
              f"float32 in {args.chunk:,}-row chunks at {path} ({'made in %.0f s' % made_s if made_s else 'reused'}); "
              f"rbf gamma={gamma:.4g}; LocalCluster(2 workers x 1 thread)")
        lazy = _lazy.as_dask(z)  # dkapprox's reader of a Zarr array, as fit uses it
        counted = lazy.map_blocks(logged_block, log_dir, dtype=lazy.dtype, meta=np.empty((0, 0), lazy.dtype))
        n_blocks = counted.numblocks[0]
        rows, base = [], None
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
                Client(cluster) as client:
            client.run(lambda: __import__("dkapprox.nystroem"))  # imports outside the timings
            for label, method, params, factor in (METHODS[key] for key in methods):
                m = args.m
                block_reads(log_dir)
                est = Nystroem(gamma=gamma, n_components=m, n_landmarks=factor * m if factor > 1 else None,
                               landmarks=method, landmark_params=params, random_state=0)
                start = time.perf_counter()
                est.fit(counted)
                seconds = time.perf_counter() - start
                reads = block_reads(log_dir)
                per_block = [reads[i] for i in range(n_blocks)]
                Z = est.transform(E)
                error = float(np.linalg.norm(K - Z @ Z.T) / np.linalg.norm(K))
                base = base or (seconds, error)
                rows.append([label, factor * m, est.landmark_passes_, f"{min(per_block)}-{max(per_block)}",
                             f"{sum(per_block)}/{n_blocks}", seconds, seconds / base[0], f"{error:.5f}",
                             error / base[1]])
                print("  " + "  ".join(str(v) for v in rows[-1]), flush=True)  # a row as soon as it is known
        print_table(f"Nystroem(n_components={args.m}) fitted on a ({args.rows:,}, {N_FEATURES}) float32 Zarr array, "
                    f"{args.chunk:,}-row chunks, LocalCluster(2x1); error: relative Frobenius error of the rbf kernel "
                    "on 2,000 rows",
                    ["landmarks", "l", "passes", "reads per block", "block reads", "fit s", "x uniform", "error",
                     "x uniform"], rows)


if __name__ == "__main__":
    main()
