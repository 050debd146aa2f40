"""Foundation benchmark: RBFSampler(1024) and GaussianRandomProjection transform throughput.

Input: a (2_000_000, 64) dask array in 100_000-row chunks. Each method produces
every output block in full; dask runs keep one column of each block (so 8 GB
of features are not gathered into the driver), scikit-learn returns its whole
array as it does in memory (float64: in 500_000-row batches, as the whole
16 GB output would not fit beside the cluster).

The threaded scheduler is run twice: with NumPy's default BLAS threads (two
dask threads each running a 2-thread GEMM oversubscribe 2 cores) and inside
``threadpool_limits(1)``, which is what we advise. LocalCluster workers get
one BLAS thread from their nannies (OPENBLAS_NUM_THREADS=1).

Columns: seconds (median of 3), rows/s, ratio to the 2-core limit (the same
block function run serially on NumPy blocks with one BLAS thread, times 2),
ratio to scikit-learn's in-memory transform.

    python benchmarks/bench_foundation.py            # full size
    python benchmarks/bench_foundation.py --quick    # 200_000 rows
"""

from __future__ import annotations

import argparse
import os
import sys

import dask
import dask.array as da
import numpy as np
import sklearn.kernel_approximation as ska
import sklearn.random_projection as skr
from distributed import Client, LocalCluster, wait

sys.path.insert(0, os.path.dirname(__file__))
from _common import consume, median_seconds, print_table, threaded_seconds, two_core_limit_seconds  # noqa: E402

import dkapprox  # noqa: E402


def make_estimators(n_components):
    return {
        f"RBFSampler({n_components})": (dkapprox.RBFSampler(n_components=n_components, random_state=0),
                                        ska.RBFSampler(n_components=n_components, random_state=0)),
        "GaussianRandomProjection(32)": (dkapprox.GaussianRandomProjection(n_components=32, random_state=0),
                                         skr.GaussianRandomProjection(n_components=32, random_state=0)),
    }


def run(rows, chunk, features, n_components, dtypes, repeats):
    results = []
    for dtype in dtypes:
        X = np.random.default_rng(0).random((rows, features), dtype=np.float64).astype(dtype)
        blocks = [X[i:i + chunk] for i in range(0, rows, chunk)]
        for label, (ours, theirs) in make_estimators(n_components).items():
            ours.fit(X[:1000])
            theirs.fit(X[:1000])
            timings = {"2-core limit (serial x 2)": two_core_limit_seconds(ours, blocks, repeats)}

            def sklearn_in_memory():
                if dtype == np.float32:
                    theirs.transform(X)  # noqa: F821 (X is deleted after the loop, not before this runs)
                else:
                    for i in range(0, rows, 500_000):
                        theirs.transform(X[i:i + 500_000])  # noqa: F821

            timings["scikit-learn in memory"] = median_seconds(sklearn_in_memory, repeats)
            Xd = da.from_array(X, chunks=(chunk, -1))
            timings.update(threaded_seconds(ours, Xd, repeats))
            results.append((dtype, label, timings))
        del X, blocks
    return results


def run_cluster(rows, chunk, features, n_components, dtypes, repeats, results):
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      memory_limit="8GiB") as cluster, Client(cluster) as client:
        for dtype in dtypes:
            # made on the workers: a 0.5-1 GB NumPy array embedded in the graph is what dask warns against
            Xd = client.persist(da.random.default_rng(0).random((rows, features), chunks=(chunk, -1), dtype=dtype))
            wait(Xd)
            X = Xd[:1000].compute()
            for label, (ours, theirs) in make_estimators(n_components).items():
                ours.fit(X[:1000])
                theirs.fit(X[:1000])
                timings = next(t for d, lab, t in results if d == dtype and lab == label)
                timings["dkapprox, LocalCluster(2x1)"] = median_seconds(lambda: consume(ours.transform(Xd)), repeats)  # noqa: F821
                try:
                    from dask_ml.wrappers import ParallelPostFit
                except ImportError:
                    timings["dask-ml ParallelPostFit, LocalCluster(2x1)"] = float("nan")
                else:
                    wrapped = ParallelPostFit(theirs)
                    timings["dask-ml ParallelPostFit, LocalCluster(2x1)"] = median_seconds(
                        lambda: consume(wrapped.transform(Xd)), repeats)  # noqa: F821 (deleted after use)
            del Xd


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200_000 rows in 20_000-row chunks")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--chunk", type=int, default=100_000)
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.quick:
        args.rows, args.chunk = 200_000, 20_000
    dtypes = [np.dtype(d).type for d in args.dtypes.split(",")]
    print(f"dkapprox {dkapprox.__version__}, dask {dask.__version__}, {os.cpu_count()} cores; "
          f"X: ({args.rows:,}, 64) in {args.chunk:,}-row chunks; median of {args.repeats}")
    results = run(args.rows, args.chunk, 64, 1024, dtypes, args.repeats)
    run_cluster(args.rows, args.chunk, 64, 1024, dtypes, args.repeats, results)
    for dtype, label, timings in results:
        limit = timings["2-core limit (serial x 2)"]
        sk = timings["scikit-learn in memory"]
        rows_ = [[name, t, args.rows / t, limit / t, sk / t] for name, t in timings.items()]
        print_table(f"{label}, {np.dtype(dtype).name}",
                    ["method", "seconds", "rows/s", "x 2-core limit", "x scikit-learn"], rows_)


if __name__ == "__main__":
    main()
