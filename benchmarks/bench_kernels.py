"""Compiled float64 Fourier features beside NumPy's path, scikit-learn and the hardware limit.

One run, everything side by side, with interleaved repeats (medians):

- ns per element of the compiled cos and sincos kernels against ``np.cos``/``np.sin`` on
  the same array;
- float64 ``RBFSampler(1024)`` on N x 64 (default N = 2,000,000; ``--rows``) on dask's
  threaded scheduler (2 threads, one BLAS thread each) and on a LocalCluster of 2 worker
  processes with 1 thread: compiled, NumPy path (``DKAPPROX_JIT=0``) and scikit-learn
  (its transform of the same blocks, one after another on one core, halved for two);
- the limit: 2 x (one block's matrix product alone + one write of its output), halved for
  two cores, times the number of blocks;
- float32, same shape: compiled build against NumPy's path (float32 keeps NumPy's SIMD cos);
- RandomFourierFeatures(1024, features='sincos') in float64: compiled against NumPy's path;
- the first call's time (compile, or load from numba's cache) in a fresh process.

    python benchmarks/bench_kernels.py [--rows 2000000] [--block-rows 100000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager

import dask
import dask.array as da
import numpy as np
from _common import consume, print_table
from sklearn.kernel_approximation import RBFSampler as SkRBFSampler
from threadpoolctl import threadpool_limits

import dkapprox
from dkapprox import _jit


@contextmanager
def jit(on):
    old = os.environ.get("DKAPPROX_JIT")
    os.environ["DKAPPROX_JIT"] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["DKAPPROX_JIT"]
        else:
            os.environ["DKAPPROX_JIT"] = old


def _set_jit(on):
    """Run on each worker: the compiled path on or off there (read at every block)."""
    os.environ["DKAPPROX_JIT"] = "1" if on else "0"
    return os.environ["DKAPPROX_JIT"]


def interleaved(fns, repeats):
    """{name: median seconds}, running the candidates in turn each repeat (load hits all alike)."""
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def kernel_table(repeats):
    k = _jit._kernels()
    a = np.random.default_rng(0).normal(size=(2000, 1024)) * 3
    out, both, zero = np.empty_like(a), np.empty((2000, 2048)), np.zeros(1024)
    a32 = a.astype(np.float32)
    out32 = np.empty_like(a32)
    t = interleaved({
        "compiled cos (fused offset, scale)": lambda: k.cos_rows(a, zero, 1.0, out),
        "np.cos": lambda: np.cos(a, out=out),
        "compiled cos and sin": lambda: k.sincos_rows(a, 1.0, both),
        "np.cos + np.sin": lambda: (np.cos(a, out=both[:, :1024]), np.sin(a, out=both[:, 1024:])),
        "np.cos float32": lambda: np.cos(a32, out=out32),
    }, repeats)
    rows = [[name, seconds / a.size * 1e9] for name, seconds in t.items()]
    print_table("ns per element, (2000, 1024) float64 arguments in [-9, 9] (float32 for the last)",
                ["kernel", "ns/element"], rows)


def limit_seconds(X, est, block_rows, rows):
    """(seconds, per block): 2 x (one block's product alone + one write of its output) per pair of blocks."""
    block = X[:block_rows]
    W = est.random_weights_

    def product():
        with threadpool_limits(1):
            block @ W

    def write():
        np.empty((block_rows, W.shape[1])).fill(1.0)

    per_block = interleaved({"product": product, "write": write}, 3)
    n_blocks = -(-rows // block_rows)
    # the limit: each pair of blocks (one per core) costs 2 x (product + write)
    return (n_blocks / 2) * 2 * (per_block["product"] + per_block["write"]), per_block


def rbf_table(rows, block_rows, repeats, cluster_client):
    # made on the workers (a NumPy array in the graph would travel to the cluster every run)
    Xd = da.random.default_rng(0).random((rows, 64), chunks=(block_rows, 64))
    X = Xd[:block_rows].compute()
    est = dkapprox.RBFSampler(n_components=1024, random_state=0).fit(X)
    sk = SkRBFSampler(n_components=1024, random_state=0).fit(X)
    def threaded(on):
        def run():
            with jit(on), threadpool_limits(1, user_api="blas"):
                consume(est.transform(Xd), scheduler="threads", num_workers=2)
        return run

    def cluster(on):
        def run():
            cluster_client.run(_set_jit, on)  # os.environ.__setitem__ would set a pickled copy's item
            consume(est.transform(Xd), scheduler=cluster_client)
        return run

    def sklearn_threaded(model, data):  # X.map_blocks(sklearn_estimator.transform), as a user would
        def run():
            with threadpool_limits(1, user_api="blas"):
                consume(data.map_blocks(model.transform, chunks=(data.chunks[0], (1024,)), dtype=np.float64),
                        scheduler="threads", num_workers=2)
        return run

    t = interleaved({
        "compiled, threaded": threaded(True), "NumPy path, threaded": threaded(False),
        "scikit-learn map_blocks, threaded": sklearn_threaded(sk, Xd),
        "compiled, LocalCluster 2x1": cluster(True), "NumPy path, LocalCluster 2x1": cluster(False),
    }, repeats)
    limit, per_block = limit_seconds(X, est, block_rows, rows)
    print(f"one block alone, one BLAS thread: product {per_block['product']:.3f} s, write {per_block['write']:.3f} s; "
          f"two cores doing nothing else would take {limit / 2:.2f} s")
    rows_out = [[name, seconds, rows / seconds, t["scikit-learn map_blocks, threaded"] / seconds,
                 t["NumPy path, threaded"] / seconds, limit / seconds] for name, seconds in t.items()]
    print_table(f"float64 RBFSampler(1024) on {rows:,} x 64, blocks of {block_rows:,} rows; limit "
                f"{limit:.2f} s", ["run", "seconds", "rows/s", "x scikit-learn", "x NumPy path (threads)",
                                   "of the limit"], rows_out)

    X32, Xd32 = X.astype(np.float32), Xd.astype(np.float32)
    est32 = dkapprox.RBFSampler(n_components=1024, random_state=0).fit(X32)

    def threaded32(on):
        def run():
            with jit(on), threadpool_limits(1, user_api="blas"):
                consume(est32.transform(Xd32), scheduler="threads", num_workers=2)
        return run

    sk32 = SkRBFSampler(n_components=1024, random_state=0).fit(X32)
    t32 = interleaved({"float32, compiled build": threaded32(True), "float32, NumPy path": threaded32(False),
                       "scikit-learn float32 map_blocks": sklearn_threaded(sk32, Xd32)}, repeats)
    print_table("float32, same shape, threaded", ["run", "seconds", "x scikit-learn", "x NumPy path"],
                [[n, s, t32["scikit-learn float32 map_blocks"] / s, t32["float32, NumPy path"] / s]
                 for n, s in t32.items()])

    rff = dkapprox.RandomFourierFeatures(1024, features="sincos", random_state=0).fit(X)

    def rff_run(on):
        def run():
            with jit(on), threadpool_limits(1, user_api="blas"):
                consume(rff.transform(Xd), scheduler="threads", num_workers=2)
        return run

    tr = interleaved({"sincos, compiled": rff_run(True), "sincos, NumPy path": rff_run(False)}, repeats)
    print_table("float64 RandomFourierFeatures(1024, features='sincos'), threaded", ["run", "seconds",
                                                                                     "x NumPy path"],
                [[n, s, tr["sincos, NumPy path"] / s] for n, s in tr.items()])


def nystroem_table(rows, block_rows, repeats):
    """Nystroem(1024) float64 transforms, threaded, against scikit-learn's transform in map_blocks."""
    from sklearn.kernel_approximation import Nystroem as SkNystroem

    Xd = da.random.default_rng(1).random((rows, 64), chunks=(block_rows, 64))
    X = Xd[:20_000].compute()
    found = []
    for kernel in ("rbf", "laplacian"):
        ours = dkapprox.Nystroem(kernel=kernel, gamma=0.05, n_components=1024, random_state=0).fit(X)
        theirs = SkNystroem(kernel=kernel, gamma=0.05, n_components=1024, random_state=0).fit(X)

        def run(model, on=True):
            def go():
                with jit(on), threadpool_limits(1, user_api="blas"):
                    Z = Xd.map_blocks(model.transform, chunks=(Xd.chunks[0], (1024,)), dtype=np.float64) \
                        if model is theirs else model.transform(Xd)
                    consume(Z, scheduler="threads", num_workers=2)
            return go

        t = interleaved({"dkapprox compiled": run(ours), "dkapprox NumPy path": run(ours, False),
                         "scikit-learn map_blocks": run(theirs)}, repeats)
        found += [[kernel, name, s, t["scikit-learn map_blocks"] / s] for name, s in t.items()]
    print_table(f"float64 Nystroem(1024) on {rows:,} x 64, threaded", ["kernel", "run", "seconds", "x scikit-learn"],
                found)


def first_call_seconds():
    # dkapprox (scikit-learn, dask) is imported first: not ours to count; then numba and the cos kernel
    code = ("import time, dkapprox; from dkapprox import _jit; t = time.perf_counter(); "
            "assert _jit._kernels('cos_rows'); print(time.perf_counter() - t)")
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--block-rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    first = [first_call_seconds() for _ in range(3)]
    print(f"first call in a fresh process after import dkapprox (numba import + cache load): "
          f"{min(first):.2f}-{max(first):.2f} s")
    kernel_table(args.repeats)
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.worker.memory.target": False, "distributed.worker.memory.spill": False}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.run(lambda: __import__("dkapprox")._jit.enabled())  # warm: load the kernels once per worker
        rbf_table(args.rows, args.block_rows, args.repeats, client)
    nystroem_table(args.rows // 10, args.block_rows // 10, args.repeats)


if __name__ == "__main__":
    main()
