"""Compiled float64 Fourier features beside NumPy's path, scikit-learn and the hardware limit.

One run, everything side by side, with interleaved repeats (medians):

- ns per element of the compiled cos and sincos kernels against ``np.cos``/``np.sin`` on
  the same array;
- float64 ``RBFSampler(1024)`` on N x 64 (default N = 2,000,000; ``--rows``) on dask's
  threaded scheduler (2 threads, one BLAS thread each) and on a LocalCluster of 2 worker
  processes with 1 thread: compiled, NumPy path (``DKAPPROX_JIT=0``) and scikit-learn
  (its transform of the same blocks, one after another on one core, halved for two);
- the limit: two cores each doing, per block, its matrix product alone (one BLAS thread, into
  memory already touched) and one write of its output (fresh memory, as scikit-learn's output is):
  (number of blocks / 2) x (product + write); for float32 also measured on both cores at once, and
  with the write into pages mapped already (as dkapprox's recycled outputs are: the strict limit);
- float32, same shape, on the LocalCluster: dkapprox's tiles (NumPy's SIMD cos on each tile's product
  while it is in cache) against the whole-block map it replaced, scikit-learn, and the float32 limit;
- RandomFourierFeatures(1024, features='sincos') in float64: compiled against NumPy's path;
- Nystroem(1024) float64, rbf and laplacian, on 64 and 784 features, with the ceiling any
  kernel could reach: scikit-learn's time over the time of the product with the normalization
  alone, which both share;
- the first call's time in a fresh process: compiling into an empty numba cache, and loading
  from the cache.

    python benchmarks/bench_kernels.py [--rows 2000000] [--block-rows 100000] [--float32-only]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import dask
import dask.array as da
import numpy as np
from _common import consume, interleaved, jit, print_table, set_jit
from sklearn.kernel_approximation import RBFSampler as SkRBFSampler
from threadpoolctl import threadpool_limits

import dkapprox
from dkapprox.backends import _jit


def kernel_table(repeats):
    """ns per output value of each compiled kernel beside NumPy's ufunc and scikit-learn's function."""
    from sklearn.metrics.pairwise import additive_chi2_kernel, manhattan_distances, rbf_kernel

    k = _jit._kernels("cos_rows", "sincos_rows", "l1_distances", "chi2_distances", "rbf_exponents")
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2000, 1024)) * 3
    out, both, zero = np.empty_like(a), np.empty((2000, 2048)), np.zeros(1024)
    a32 = a.astype(np.float32)
    out32 = np.empty_like(a32)
    X, L = rng.random((2000, 64)), rng.random((1024, 64))
    Lt = np.ascontiguousarray(L.T)
    D, norms_x, norms_l = X @ L.T, (X * X).sum(1), (L * L).sum(1)

    def compiled_rbf():
        np.matmul(X, Lt, out=out)
        k.rbf_exponents(out, norms_x, norms_l, 0.05, out)
        np.exp(out, out=out)

    t = interleaved({
        "compiled cos (fused offset, scale)": lambda: k.cos_rows(a, zero, 1.0, out),
        "np.cos": lambda: np.cos(a, out=out),
        "compiled cos and sin (per input)": lambda: k.sincos_rows(a, 1.0, both),
        "np.cos + np.sin (per input)": lambda: (np.cos(a, out=both[:, :1024]), np.sin(a, out=both[:, 1024:])),
        "np.cos float32": lambda: np.cos(a32, out=out32),
        "np.exp": lambda: np.exp(a, out=out),
        "compiled rbf exponent (one pass)": lambda: k.rbf_exponents(D, norms_x, norms_l, 0.05, out),
        "compiled rbf kernel (product, exponent, np.exp)": compiled_rbf,
        "scikit-learn rbf_kernel": lambda: rbf_kernel(X, L, gamma=0.05),
        "compiled L1 distances, 64 features": lambda: k.l1_distances(X, Lt, out),
        "scikit-learn manhattan_distances": lambda: manhattan_distances(X, L),
        "compiled chi2 distances, 64 features": lambda: k.chi2_distances(X, Lt, out),
        "scikit-learn additive_chi2_kernel": lambda: additive_chi2_kernel(X, L),
    }, repeats)
    rows = [[name, seconds / a.size * 1e9] for name, seconds in t.items()]
    print_table("ns per output value, one thread: (2000, 1024) float64 arguments in [-9, 9] for the maps (float32 for "
                "np.cos float32); 2000 rows x 1024 landmarks of 64 features for the kernels",
                ["kernel", "ns/value"], rows)


def whole_block_map(block, weights, offset):
    """float32's map before the tiles: the whole product, then the offset, cos and scale, each a pass over it."""
    product = block @ weights
    product += offset
    np.cos(product, out=product)
    product *= (2.0 / weights.shape[1]) ** 0.5
    return product


def limit_seconds(X, est, block_rows, rows):
    """(seconds, per block): two cores, each doing per block its product alone and one write of its output."""
    block = X[:block_rows]
    W = est.random_weights_
    product_out = np.ones((block_rows, W.shape[1]), dtype=X.dtype)  # touched: the product alone, no page faults

    def product():
        with threadpool_limits(1):
            np.matmul(block, W, out=product_out)

    def write():  # fresh memory, as each block's output is
        np.empty((block_rows, W.shape[1]), dtype=X.dtype).fill(1.0)

    from concurrent.futures import ThreadPoolExecutor

    outs = [product_out, np.ones_like(product_out)]  # touched, as product_out is
    mapped = [np.ones_like(product_out), np.ones_like(product_out)]  # a recycled output's pages: mapped already

    def on_both_cores(write_into):  # the same on two threads at once: what two cores of this machine really give
        def one(i):
            with threadpool_limits(1):
                np.matmul(block, W, out=outs[i])
                write_into(i).fill(1.0)

        def run():
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(one, range(2)))
        return run

    per_block = interleaved({"product": product, "write": write,
                             "pair, both cores at once": on_both_cores(
                                 lambda i: np.empty((block_rows, W.shape[1]), dtype=X.dtype)),
                             "pair, both cores, output pages mapped": on_both_cores(lambda i: mapped[i])}, 3)
    n_blocks = -(-rows // block_rows)
    per_block["limit, both cores at once"] = (n_blocks / 2) * per_block["pair, both cores at once"]
    per_block["limit, both cores, pages mapped"] = (n_blocks / 2) * per_block["pair, both cores, output pages mapped"]
    return (n_blocks / 2) * (per_block["product"] + per_block["write"]), per_block


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
            cluster_client.run(set_jit, on)  # os.environ.__setitem__ would set a pickled copy's item
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
          f"two cores doing only that would take {limit:.2f} s")
    rows_out = [[name, seconds, rows / seconds, t["scikit-learn map_blocks, threaded"] / seconds,
                 t["NumPy path, threaded"] / seconds, limit / seconds] for name, seconds in t.items()]
    print_table(f"float64 RBFSampler(1024) on {rows:,} x 64, blocks of {block_rows:,} rows; limit "
                f"{limit:.2f} s", ["run", "seconds", "rows/s", "x scikit-learn", "x NumPy path (threads)",
                                   "of the limit"], rows_out)

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


def float32_table(rows, block_rows, repeats, client):
    """float32 RBFSampler(1024) on the LocalCluster: dkapprox's tiles, the map they replaced, scikit-learn, limits."""
    Xd = da.random.default_rng(0).random((rows, 64), chunks=(block_rows, 64))
    X = Xd[:block_rows].compute()
    X32, Xd32 = X.astype(np.float32), Xd.astype(np.float32)
    est32 = dkapprox.RBFSampler(n_components=1024, random_state=0).fit(X32)
    sk32 = SkRBFSampler(n_components=1024, random_state=0).fit(X32)
    W32, b32 = est32.random_weights_, est32.random_offset_

    def on_cluster(make):
        return lambda: consume(make(), scheduler=client)

    t32 = interleaved({
        "float32 dkapprox (tiles), LocalCluster 2x1": on_cluster(lambda: est32.transform(Xd32)),
        "float32 whole-block NumPy map (before), LocalCluster 2x1": on_cluster(
            lambda: Xd32.map_blocks(whole_block_map, W32, b32, chunks=(Xd32.chunks[0], (1024,)), dtype=np.float32)),
        "scikit-learn float32 map_blocks, LocalCluster 2x1": on_cluster(
            lambda: Xd32.map_blocks(sk32.transform, chunks=(Xd32.chunks[0], (1024,)), dtype=np.float32)),
    }, repeats)
    limit32, per32 = limit_seconds(X32, est32, block_rows, rows)
    both, mapped = per32["limit, both cores at once"], per32["limit, both cores, pages mapped"]
    print(f"float32, one block alone, one BLAS thread: product {per32['product']:.3f} s, write {per32['write']:.3f} s; "
          f"two cores doing only that would take {limit32:.2f} s; measured on both cores at once: {both:.2f} s, "
          f"{mapped:.2f} s writing into pages mapped already (as a recycled output's are)")
    sk = t32["scikit-learn float32 map_blocks, LocalCluster 2x1"]
    print_table(f"float32 RBFSampler(1024) on {rows:,} x 64, blocks of {block_rows:,} rows; limit {limit32:.2f} s "
                f"(one core's times, doubled), {both:.2f} s (both cores at once), {mapped:.2f} s (both, pages mapped)",
                ["run", "seconds", "rows/s", "x scikit-learn", "of the limit", "of the limit, both cores at once",
                 "of the limit, both, pages mapped"],
                [[n, sec, rows / sec, sk / sec, limit32 / sec, both / sec, mapped / sec] for n, sec in t32.items()])


def nystroem_table(shapes, repeats):
    """Nystroem(1024) float64 transforms, threaded, against scikit-learn's transform in map_blocks.

    ``shapes`` is a list of (rows, features, block_rows). The ceiling is what a kernel computed in
    no time at all would give: scikit-learn's time over that of the product with the normalization
    (block_rows x 1024 by 1024 x 1024), which dkapprox and scikit-learn both run, per pair of blocks.
    """
    from sklearn.kernel_approximation import Nystroem as SkNystroem

    found = []
    for rows, features, block_rows in shapes:
        Xd = da.random.default_rng(1).random((rows, features), chunks=(block_rows, features))
        X = Xd[:20_000].compute()
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

            K, N = np.ones((block_rows, 1024)), np.ascontiguousarray(theirs.normalization_.T)

            def normalization():
                with threadpool_limits(1):
                    for _ in range(-(-rows // block_rows) // 2):
                        K @ N

            t = interleaved({"dkapprox compiled": run(ours), "dkapprox NumPy path": run(ours, False),
                             "scikit-learn map_blocks": run(theirs), "normalization product alone": normalization},
                            repeats)
            ceiling = t["scikit-learn map_blocks"] / t["normalization product alone"]
            found += [[f"{features}", kernel, name, s, t["scikit-learn map_blocks"] / s, ceiling]
                      for name, s in t.items()]
    print_table("float64 Nystroem(1024), threaded (2 threads x 1 BLAS thread); ceiling: scikit-learn / normalization "
                "product alone", ["features", "kernel", "run", "seconds", "x scikit-learn", "ceiling"], found)


def first_call_seconds(cache_dir):
    """The first compiled call in a fresh process, after ``import dkapprox``: numba's import and the cos kernel."""
    code = ("import time, dkapprox; from dkapprox.backends import _jit; t = time.perf_counter(); "
            "assert _jit._kernels('cos_rows'); print(time.perf_counter() - t)")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                check=True).stdout)


def first_call_table():
    """Compiling into an empty cache folder, then loading from it; three times each."""
    import shutil
    import tempfile

    cold, warm = [], []
    for _ in range(3):
        folder = tempfile.mkdtemp(prefix="dkapprox-numba-")
        try:
            cold.append(first_call_seconds(folder))
            warm.append(first_call_seconds(folder))
        finally:
            shutil.rmtree(folder)
    print_table("first compiled call in a fresh process, after import dkapprox (numba's import included)",
                ["numba cache", "min s", "max s"], [["empty: compiles", min(cold), max(cold)],
                                                   ["filled: loads", min(warm), max(warm)]])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--block-rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--float32-only", action="store_true", help="only the float32 table (about 2 minutes)")
    args = parser.parse_args()
    if not args.float32_only:
        first_call_table()
        kernel_table(args.repeats)
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.worker.memory.target": False, "distributed.worker.memory.spill": False}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.run(lambda: __import__("dkapprox")._jit.enabled())  # warm: load the kernels once per worker
        if not args.float32_only:
            rbf_table(args.rows, args.block_rows, args.repeats, client)
        float32_table(args.rows, args.block_rows, args.repeats, client)
    if args.float32_only:
        return
    nystroem_table([(args.rows // 10, 64, args.block_rows // 10), (args.rows // 50, 784, args.block_rows // 10)],
                   args.repeats)


if __name__ == "__main__":
    main()
