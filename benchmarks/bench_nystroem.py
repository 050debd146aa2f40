"""Nystroem benchmark: kernel approximation error per landmark method, fit cost, transform throughput.

1. Error: relative Frobenius error ||K - Z Z^T|| / ||K|| of the rbf kernel on
   held-out rows, for n_components in {64, 256, 1024} and landmarks uniform /
   kmeans / leverage (mean over seeds), on
   - digits (scikit-learn's, standardized; gamma = 1/64; 1397 rows to fit,
     400 held out; n_components=1024 is then 73% of the rows),
   - blobs of uneven density: 30 Gaussian clusters with Zipf sizes (1/k^1.5)
     whose widths shrink as they grow (0.1 to 2.0), 8 features, gamma = 0.1,
   - blobs of random widths (widths independent of sizes), the same otherwise:
     where density differs less, and the methods differ less.
2. Fit: seconds and passes over a (2_000_000, 32) float32 dask array in
   100_000-row chunks (threaded scheduler, 2 threads, one BLAS thread each).
   Passes are counted for real: the blocks come from a function that counts
   its calls; "reads per block" is min-max over the blocks.
3. Transform: Nystroem(n_components=1024) on the same array, every output
   block produced in full and one column of each kept (8 GB of features are
   not gathered). Columns as in bench_foundation: seconds (median of 3),
   rows/s, ratio to the 2-core limit (our block function run serially on the
   NumPy blocks with one BLAS thread, times 2), ratio to scikit-learn's
   Nystroem in memory (in 250_000-row batches: its whole float32 output and
   kernel matrix would be 16 GB).

    python benchmarks/bench_nystroem.py            # full size
    python benchmarks/bench_nystroem.py --quick    # 200_000 rows, fewer sizes and seeds
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import Counter

import dask
import dask.array as da
import numpy as np
from distributed import Client, LocalCluster, wait
from sklearn.datasets import load_digits, make_blobs
from sklearn.kernel_approximation import Nystroem as SkNystroem
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(__file__))
from _common import consume, median_seconds, print_table, threaded_seconds, two_core_limit_seconds  # noqa: E402

import dkapprox  # noqa: E402
from dkapprox.nystroem import Nystroem  # noqa: E402

METHODS = ["uniform", "kmeans", "leverage"]
CALLS = Counter()
LOCK = threading.Lock()


# -- 1. error ------------------------------------------------------------------
def blobs(n, *, uneven, seed=0):
    rng = np.random.default_rng(seed)
    sizes = 1.0 / np.arange(1, 31) ** 1.5
    sizes = np.maximum(1, np.round(n * sizes / sizes.sum())).astype(int)
    widths = np.geomspace(0.1, 2.0, 30) if uneven else rng.uniform(0.1, 2.0, 30)
    X, _ = make_blobs(n_samples=sizes, n_features=8, cluster_std=widths, center_box=(-10, 10), random_state=seed)
    return X[rng.permutation(len(X))]


def datasets(quick):
    digits = StandardScaler().fit_transform(load_digits().data)
    n = 6_000 if quick else 22_000
    out = {"digits, standardized": (digits[400:], digits[:400], 1 / 64)}
    for label, uneven in (("blobs, uneven density", True), ("blobs, random widths", False)):
        X = blobs(n, uneven=uneven)
        out[label] = (X[2000:], X[:2000], 0.1)
    return out


def kernel_error(est, X_fit, X_test, gamma):
    Z = est.fit(X_fit).transform(X_test)
    K = rbf_kernel(X_test, gamma=gamma)
    return float(np.linalg.norm(K - Z @ Z.T) / np.linalg.norm(K))


def error_table(sizes, seeds):
    rows = []
    ratios = {}
    for label, (X_fit, X_test, gamma) in datasets(len(seeds) == 1).items():
        for m in sizes:
            errors = {}
            for method in METHODS:
                values = [kernel_error(Nystroem(gamma=gamma, n_components=m, landmarks=method, random_state=s),
                                       X_fit, X_test, gamma) for s in seeds]
                errors[method] = (float(np.mean(values)), float(np.min(values)), float(np.max(values)))
            base = errors["uniform"][0]
            for method in METHODS:
                mean, lo, hi = errors[method]
                rows.append([label, m, method, f"{mean:.4f}", f"{lo:.4f}-{hi:.4f}", mean / base])
            ratios[(label, m)] = min(errors["kmeans"][0], errors["leverage"][0]) / base
    return rows, ratios


# -- 2. fit ----------------------------------------------------------------------
def counted_block(block, block_info=None):
    with LOCK:
        CALLS[block_info[0]["chunk-location"][0]] += 1
    return block


def fit_table(X, chunk, sizes, repeats):
    base = da.from_array(X, chunks=(chunk, -1))
    lazy = base.map_blocks(counted_block, dtype=X.dtype, meta=np.empty((0, 0), X.dtype))
    n_blocks = lazy.numblocks[0]
    rows = []
    for m in sizes:
        for method in METHODS:
            fitted = []

            def fit():
                CALLS.clear()
                with threadpool_limits(1, user_api="blas"), dask.config.set(scheduler="threads", num_workers=2):
                    fitted[:] = [Nystroem(n_components=m, landmarks=method, random_state=0).fit(lazy)]

            seconds = median_seconds(fit, repeats)
            reads = [CALLS[i] for i in range(n_blocks)]  # of the last run
            est = fitted[0]
            rows.append([f"dkapprox landmarks={method!r}", m, seconds, est.landmark_passes_,
                         f"{min(reads)}-{max(reads)}", f"{sum(reads)}/{n_blocks}"])
        start = time.perf_counter()
        SkNystroem(n_components=m, random_state=0).fit(X)
        rows.append(["scikit-learn, in memory", m, time.perf_counter() - start, "-", "-", "-"])
    return rows


# -- 3. transform -----------------------------------------------------------------
def transform_table(X, chunk, n_components, repeats):
    ours = Nystroem(n_components=n_components, random_state=0).fit(X)
    theirs = SkNystroem(n_components=n_components, random_state=0).fit(X)
    blocks = [X[i:i + chunk] for i in range(0, len(X), chunk)]
    timings = {"2-core limit (serial x 2)": two_core_limit_seconds(ours, blocks, repeats)}

    def sklearn_in_memory():
        for i in range(0, len(X), 250_000):
            theirs.transform(X[i:i + 250_000])

    timings["scikit-learn in memory"] = median_seconds(sklearn_in_memory, repeats)
    Xd = da.from_array(X, chunks=(chunk, -1))
    timings.update(threaded_seconds(ours, Xd, repeats))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      memory_limit="8GiB") as cluster, Client(cluster) as client:
        # made on the workers (other values, same distribution): a 256 MB array embedded in the
        # graph is what dask warns against
        on_workers = client.persist(da.random.default_rng(0).random(X.shape, chunks=(chunk, -1), dtype=X.dtype))
        wait(on_workers)
        consume(ours.transform(on_workers[:chunk]))  # workers import scikit-learn once, outside the timings
        timings["dkapprox, LocalCluster(2x1)"] = median_seconds(lambda: consume(ours.transform(on_workers)), repeats)
        meta = np.empty((0, 0), X.dtype)
        timings["scikit-learn via map_blocks, LocalCluster(2x1)"] = median_seconds(
            lambda: consume(on_workers.map_blocks(theirs.transform, chunks=(on_workers.chunks[0], (n_components,)),
                                                  meta=meta)), repeats)
    limit_s, sk_s = timings["2-core limit (serial x 2)"], timings["scikit-learn in memory"]
    return [[name, t, len(X) / t, limit_s / t, sk_s / t] for name, t in timings.items()], timings


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="200_000 rows in 20_000-row chunks, n_components 64 and 256, one seed")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--chunk", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sizes, seeds, fit_sizes, n_transform = [64, 256, 1024], [0, 1, 2], [256, 1024], 1024
    if args.quick:
        args.rows, args.chunk, args.repeats = 200_000, 20_000, 1
        sizes, seeds, fit_sizes, n_transform = [64, 256], [0], [256], 256
    print(f"dkapprox {dkapprox.__version__}, dask {dask.__version__}, {os.cpu_count()} cores; "
          f"X: ({args.rows:,}, 32) float32 in {args.chunk:,}-row chunks; median of {args.repeats}")

    rows, ratios = error_table(sizes, seeds)
    print_table(f"1. relative Frobenius error of the rbf kernel on held-out rows (mean of {len(seeds)} seeds)",
                ["data set", "n_components", "landmarks", "error", "min-max", "x uniform"], rows)

    X = np.random.default_rng(0).random((args.rows, 32), dtype=np.float32)
    print_table(f"2. fit on a ({args.rows:,}, 32) float32 dask array, {args.chunk:,}-row chunks "
                "(threaded, 2 threads x 1 BLAS thread)",
                ["method", "n_components", "seconds", "passes", "reads per block", "block reads"],
                fit_table(X, args.chunk, fit_sizes, args.repeats))

    rows, timings = transform_table(X, args.chunk, n_transform, args.repeats)
    print_table(f"3. transform, Nystroem(n_components={n_transform}), rbf, float32",
                ["method", "seconds", "rows/s", "x 2-core limit", "x scikit-learn"], rows)

    key = ("blobs, uneven density", 256)
    print("\ntargets:")
    if key in ratios:
        print(f"  blobs of uneven density, n_components=256: best of kmeans/leverage = "
              f"{ratios[key]:.2f} x uniform's error (target <= 0.7)")
    limit_s = timings["2-core limit (serial x 2)"]
    print(f"  transform on LocalCluster(2x1): {limit_s / timings['dkapprox, LocalCluster(2x1)']:.2f} "
          f"of the 2-core limit (target >= 0.85)")


if __name__ == "__main__":
    main()
