"""Blocks on a GPU against the CPU path of the same machine, and against the device's own limits (issue 22).

Needs CuPy and an NVIDIA GPU (``pip install 'dkapprox[gpu]'``); one run prints everything side by side:

- RBFSampler and Nystroem at ``--components`` (1024 and 4096), float32 and float64, on ``--rows`` x 64
  (default 10^7): rows/s of the dask graph over CuPy chunks (the state shipped once, output left on
  the device: each block reduced to one value there) against the same graph over NumPy chunks on
  the machine's CPU cores (threaded scheduler, one BLAS thread per core), and the ratio;
- the device limit per block: its matrix products alone (Nystroem: the kernel's and the
  normalization's) plus one write of the output to device memory, and the fraction of it reached;
- a Zarr-to-Zarr job (``dkapprox featurize --device cuda`` over ``--job-rows``) against the copy
  limit: each block's input to the device and its output back, at the copy rates measured here;
- Nystroem(16384) in float32 (a 1 GiB state): rows/s and the device memory in use.

    python benchmarks/bench_gpu.py [--rows 10000000] [--block-rows 250000] [--job-rows 1000000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import dask
import dask.array as da
import numpy as np
from threadpoolctl import threadpool_limits

import dkapprox

try:
    import cupy
except ImportError:
    sys.exit("bench_gpu.py needs CuPy and an NVIDIA GPU: pip install 'dkapprox[gpu]'")


def _sync():
    cupy.cuda.Device().synchronize()


def _seconds(fn, repeats=3):
    best = float("inf")
    for _ in range(repeats):
        _sync()
        started = time.perf_counter()
        fn()
        _sync()
        best = min(best, time.perf_counter() - started)
    return best


def _one_value_per_block(Z):
    """The graph's output reduced to one value per block where it lies: nothing crosses the bus but those."""
    return Z.map_blocks(lambda b: b[:1, :1], chunks=(tuple(1 for _ in Z.chunks[0]), (1,)), dtype=Z.dtype)


def _estimator(kind, n_components, X_fit):
    if kind == "rbf":
        return dkapprox.RBFSampler(n_components=n_components, gamma=0.05, random_state=0).fit(X_fit)
    return dkapprox.Nystroem(n_components=n_components, gamma=0.05, random_state=0).fit(X_fit)


def device_limit(est, kind, block, n_out):
    """Seconds per block: its matrix products alone, plus one write of its output, on the device."""
    dtype = block.dtype
    if kind == "rbf":
        W = cupy.asarray(est.random_weights_.astype(dtype))
        products = lambda: block @ W  # noqa: E731
    else:
        L = cupy.asarray(est.components_.astype(dtype))
        N = cupy.asarray(est.normalization_.T.astype(dtype))
        products = lambda: (block @ L.T) @ N  # noqa: E731
    out = cupy.empty((block.shape[0], n_out), dtype=dtype)
    return _seconds(products) + _seconds(lambda: out.fill(1))


def throughput_table(rows, block_rows, components):
    rng = np.random.default_rng(0)
    found = []
    for dtype in (np.float32, np.float64):
        X = rng.random((rows, 64), dtype=np.float64).astype(dtype)
        Xg = cupy.asarray(X)
        gpu_blocks = da.from_array(Xg, chunks=(block_rows, 64), asarray=False)
        cpu_blocks = da.from_array(X, chunks=(block_rows, 64))
        for kind in ("rbf", "nystroem"):
            for n in components:
                est = _estimator(kind, n, X[:20_000])
                gpu = _seconds(lambda: _one_value_per_block(est.transform(gpu_blocks)).compute(scheduler="sync"))
                with threadpool_limits(1, user_api="blas"):
                    started = time.perf_counter()
                    _one_value_per_block(est.transform(cpu_blocks)).compute(scheduler="threads",
                                                                            num_workers=os.cpu_count())
                    cpu = time.perf_counter() - started
                limit = device_limit(est, kind, Xg[:block_rows], n) * (-(-rows // block_rows))
                found.append([kind, n, np.dtype(dtype).name, rows / gpu, rows / cpu, cpu / gpu, limit / gpu])
                print(f"{kind:9s} {n:6d} {np.dtype(dtype).name:8s} GPU {rows / gpu:14,.0f} rows/s  "
                      f"CPU ({os.cpu_count()} cores) {rows / cpu:12,.0f} rows/s  GPU/CPU {cpu / gpu:6.1f}x  "
                      f"of the device limit {limit / gpu:5.2f}", flush=True)
        Xg = gpu_blocks = None  # this dtype's data off the device before the next
        cupy.get_default_memory_pool().free_all_blocks()
    return found


def job_table(job_rows, block_rows):
    """``dkapprox featurize --device cuda`` Zarr to Zarr, against the copy limit (input in, output out)."""
    import zarr

    n = 1024
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        src = os.path.join(tmp, "in.zarr")
        z = zarr.create_array(src, shape=(job_rows, 64), chunks=(block_rows, 64), dtype="f4")
        z[:] = np.random.default_rng(0).random((job_rows, 64), dtype=np.float32)
        config = os.path.join(tmp, "cuda.yaml")
        with open(config, "w") as f:
            f.write("kind: cuda\ndashboard_address: null\n")
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dkapprox", "featurize", src, "--method", "rbf", "--n-components",
                        str(n), "--out", os.path.join(tmp, "out.zarr"), "--device", "cuda", "--cluster", config],
                       check=True)
        job = time.perf_counter() - started
    host_in = np.ones((block_rows, 64), np.float32)
    dev_out = cupy.ones((block_rows, n), np.float32)
    copies = _seconds(lambda: cupy.asarray(host_in)) + _seconds(lambda: dev_out.get())
    limit = copies * (-(-job_rows // block_rows))
    print(f"job --device cuda, {job_rows:,} x 64 -> {n} float32: {job_rows / job:,.0f} rows/s (cluster start "
          f"included); copy limit {job_rows / limit:,.0f} rows/s; of the limit {limit / job:.2f}", flush=True)


def big_nystroem(rows, block_rows):
    """Nystroem(16384) float32: a 1 GiB state, which no CPU worker uses fast."""
    X = cupy.random.random((rows, 64), dtype=cupy.float32)
    est = dkapprox.Nystroem(n_components=16384, gamma=0.05, random_state=0).fit(cupy.asnumpy(X[:50_000]))
    blocks = da.from_array(X, chunks=(block_rows, 64), asarray=False)
    seconds = _seconds(lambda: _one_value_per_block(est.transform(blocks)).compute(scheduler="sync"), repeats=1)
    free, total = cupy.cuda.runtime.memGetInfo()
    pool = cupy.get_default_memory_pool().used_bytes()
    print(f"Nystroem(16384) float32 on {rows:,} x 64: {rows / seconds:,.0f} rows/s; device memory in use "
          f"{(total - free) / 2**30:.1f} of {total / 2**30:.0f} GiB; CuPy's pool {pool / 2**30:.1f} GiB", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--block-rows", type=int, default=250_000)
    parser.add_argument("--job-rows", type=int, default=1_000_000)
    parser.add_argument("--components", type=int, nargs="*", default=[1024, 4096])
    args = parser.parse_args()
    print(f"device: {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}; CPU cores: {os.cpu_count()}")
    with dask.config.set({"array.slicing.split_large_chunks": False}):
        throughput_table(args.rows, args.block_rows, args.components)
        big_nystroem(args.rows // 10, args.block_rows // 10)
    job_table(args.job_rows, args.block_rows)


if __name__ == "__main__":
    main()
