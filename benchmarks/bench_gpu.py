"""Blocks on a GPU against the CPU path of the same machine, and against the device's own limits (issue 32).

Needs CuPy and an NVIDIA GPU (``pip install 'dkapprox[gpu-cuda13]'`` or ``[gpu-cuda12]``); one run prints
everything side by side:

- the card: CuPy and CUDA versions, its measured float32 and float64 matrix-product rates, its write
  bandwidth, host<->device copy rates, and whether float32 products ran in TF32 (their error says);
- RBFSampler and Nystroem at ``--components`` (1024 and 4096), float32 and float64, on ``--rows`` x 64
  (default 10^7): rows/s of the dask graph over CuPy chunks (the state shipped once, output left on
  the device: each block reduced to one value there) against the same graph over NumPy chunks on
  the machine's CPU cores (threaded scheduler, one BLAS thread per core). The CPU runs fewer rows
  (two blocks a core, each sized to about ``--cpu-block-seconds``): Nystroem(4096) on 10^7 rows
  would take the CPU tens of minutes, and rows/s does not depend on the row count at these sizes;
- the device limit per block: its matrix products at the card's measured rate for that dtype
  (Nystroem: the kernel's and the normalization's) plus one write of the output, and the fraction
  of it reached;
- Nystroem(16384) in float32 (a 1 GiB state), fitted on a CuPy array (its eigendecomposition on the
  device): fit seconds, rows/s and the peak of CuPy's memory pool;
- k-means and leverage landmark fits over dask arrays of CuPy chunks against NumPy chunks on the
  CPU cores: seconds and passes;
- a Zarr-to-Zarr job (``dkapprox featurize``) with ``--device cuda`` on a LocalCUDACluster and on a
  LocalCluster of the CPU cores, against plain dask reading the input and writing as many bytes.

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
    sys.exit("bench_gpu.py needs CuPy and an NVIDIA GPU: pip install 'dkapprox[gpu-cuda13]' (or gpu-cuda12)")

CORES = os.cpu_count()


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
    # a copy: a view would keep every block's whole output alive until the end of the graph
    return Z.map_blocks(lambda b: b[:1, :1].copy(), chunks=(tuple(1 for _ in Z.chunks[0]), (1,)), dtype=Z.dtype)


def card():
    """Versions, rates and the TF32 question; returns the rates the limits use."""
    props = cupy.cuda.runtime.getDeviceProperties(0)
    print(f"device: {props['name'].decode()}; CuPy {cupy.__version__}; CUDA runtime "
          f"{cupy.cuda.runtime.runtimeGetVersion()}, driver {cupy.cuda.runtime.driverGetVersion()}; "
          f"CUPY_TF32={os.environ.get('CUPY_TF32', '(unset)')}; CPU cores: {CORES}", flush=True)
    rates = {}
    n = 8192
    for dtype in (np.float32, np.float64):
        a = cupy.random.random((n, n), dtype=dtype)
        rates[np.dtype(dtype).name] = 2 * n**3 / _seconds(lambda: a @ a)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((1024, 4096)), rng.standard_normal((4096, 1024))
    got = cupy.asnumpy(cupy.asarray(x, dtype=cupy.float32) @ cupy.asarray(y, dtype=cupy.float32))
    error = float(np.max(np.abs(got - x @ y) / (np.abs(x) @ np.abs(y))))
    buf = cupy.empty(2**30, dtype=cupy.float32)
    buf.fill(0)  # first touch
    write = buf.nbytes / min(_seconds(lambda: buf.fill(1), repeats=5),
                             _seconds(lambda: buf.data.memset_async(0, buf.nbytes), repeats=5))
    host = np.ones(2**28, dtype=np.float32)
    h2d = host.nbytes / _seconds(lambda: cupy.asarray(host))
    d2h = host.nbytes / _seconds(lambda: buf[:2**28].get())
    rates["write"] = write
    print(f"matrix products (8192^3): float32 {rates['float32'] / 1e12:.1f} TFLOP/s, float64 "
          f"{rates['float64'] / 1e12:.1f} TFLOP/s; float32 product error {error:.1e} of sum|x y| "
          f"({'TF32' if error > 1e-4 else 'not TF32: float32 rounding'}); write {write / 1e9:.0f} GB/s; "
          f"copies (pageable host memory) to device {h2d / 1e9:.1f} GB/s, to host {d2h / 1e9:.1f} GB/s", flush=True)
    return rates


def _estimator(kind, n_components, X_fit):
    if kind == "rbf":
        return dkapprox.RBFSampler(n_components=n_components, gamma=0.05, random_state=0).fit(X_fit)
    return dkapprox.Nystroem(n_components=n_components, gamma=0.05, random_state=0).fit(X_fit)


def _limit_seconds(kind, rows, d, m, dtype, rates):
    """The block's matrix products at the card's rate plus one write of its output."""
    flops = 2 * rows * d * m + (2 * rows * m * m if kind == "nystroem" else 0)
    return flops / rates[np.dtype(dtype).name] + rows * m * np.dtype(dtype).itemsize / rates["write"]


def _cpu_rows_per_second(est, X_host, seconds_per_block):
    """The CPU path on every core: two blocks a core, each about ``seconds_per_block`` on one core."""
    with threadpool_limits(1, user_api="blas"):
        probe = X_host[:2048]
        started = time.perf_counter()
        est.transform(probe)
        per_row = (time.perf_counter() - started) / probe.shape[0]
        block = int(min(X_host.shape[0] // (2 * CORES), max(2048, seconds_per_block / per_row)))
        rows = block * 2 * CORES
        blocks = da.from_array(X_host[:rows], chunks=(block, -1))
        started = time.perf_counter()
        _one_value_per_block(est.transform(blocks)).compute(scheduler="threads", num_workers=CORES)
        return rows / (time.perf_counter() - started), rows


def throughput_table(rows, block_rows, components, rates, cpu_block_seconds, kinds=("rbf", "nystroem")):
    found = []
    for dtype in (np.float32, np.float64):
        Xg = cupy.random.random((rows, 64), dtype=dtype)
        X_host = cupy.asnumpy(Xg[: min(rows, 2_000_000)])
        gpu_blocks = da.from_array(Xg, chunks=(block_rows, 64), asarray=False)
        for kind in kinds:
            for n in components:
                est = _estimator(kind, n, X_host[:20_000])
                graph = _one_value_per_block(est.transform(gpu_blocks))
                graph.compute(scheduler="sync")  # compiles the fused kernels once
                gpu = _seconds(lambda: graph.compute(scheduler="sync"), repeats=2)
                cpu, cpu_rows = _cpu_rows_per_second(est, X_host, cpu_block_seconds)
                limit = sum(_limit_seconds(kind, r, 64, n, dtype, rates) for r in gpu_blocks.chunks[0])
                found.append([kind, n, np.dtype(dtype).name, rows / gpu, cpu, rows / gpu / cpu, limit / gpu])
                print(f"{kind:9s} {n:6d} {np.dtype(dtype).name:8s} GPU {rows / gpu:14,.0f} rows/s  CPU ({CORES} "
                      f"cores, {cpu_rows:,} rows) {cpu:12,.0f} rows/s  GPU/CPU {rows / gpu / cpu:6.1f}x  "
                      f"of the device limit {limit / gpu:5.2f}", flush=True)
        Xg = gpu_blocks = None  # this dtype's data off the device before the next
        cupy.get_default_memory_pool().free_all_blocks()
    return found


def big_nystroem(rows, block_rows):
    """Nystroem(16384) float32: a 1 GiB state, fitted on a CuPy array (eigendecomposition on the device)."""
    pool = cupy.get_default_memory_pool()
    X = cupy.random.random((rows, 64), dtype=cupy.float32)
    started = time.perf_counter()
    est = dkapprox.Nystroem(n_components=16384, gamma=0.05, random_state=0).fit(X[:50_000])
    fit = time.perf_counter() - started
    blocks = da.from_array(X, chunks=(block_rows, 64), asarray=False)
    pool.free_all_blocks()
    held = pool.total_bytes()
    seconds = _seconds(lambda: _one_value_per_block(est.transform(blocks)).compute(scheduler="sync"), repeats=1)
    print(f"Nystroem(16384) float32 on {rows:,} x 64 in blocks of {block_rows:,}: fit {fit:.1f} s (on a CuPy "
          f"array); {rows / seconds:,.0f} rows/s; CuPy's pool peaked at {pool.total_bytes() / 2**30:.1f} GiB "
          f"(the input {held / 2**30:.2f} GiB of it)", flush=True)


def landmark_table(rows, block_rows, n_components=1024):
    """k-means and leverage landmarks: passes over dask-of-CuPy blocks against NumPy blocks on the CPU."""
    Xg = cupy.random.random((rows, 64), dtype=cupy.float32)
    X = cupy.asnumpy(Xg)
    gpu_blocks = da.from_array(Xg, chunks=(block_rows, 64), asarray=False)
    cpu_blocks = da.from_array(X, chunks=(block_rows // 4, 64))
    for method in ("kmeans", "leverage"):
        params = dict(n_components=n_components, gamma=0.05, landmarks=method, random_state=0)
        dkapprox.Nystroem(**params).fit(gpu_blocks[:block_rows])  # CuPy compiles its kernels once a machine
        started = time.perf_counter()
        gpu_est = dkapprox.Nystroem(**params).fit(gpu_blocks)
        gpu = time.perf_counter() - started
        with threadpool_limits(1, user_api="blas"), dask.config.set(scheduler="threads", num_workers=CORES):
            started = time.perf_counter()
            cpu_est = dkapprox.Nystroem(**params).fit(cpu_blocks)
            cpu = time.perf_counter() - started
        same = np.array_equal(gpu_est.component_indices_, cpu_est.component_indices_)
        print(f"landmarks={method:8s} n_components={n_components} on {rows:,} x 64 float32: GPU blocks "
              f"{gpu:6.1f} s, CPU blocks ({CORES} cores) {cpu:6.1f} s, {cpu / gpu:5.1f}x; passes "
              f"{gpu_est.landmark_passes_} and {cpu_est.landmark_passes_}; same landmark rows: {same}", flush=True)


def job_table(job_rows, block_rows, n=1024):
    """``dkapprox featurize`` Zarr to Zarr, --device cuda against the CPU cores and plain dask's copy."""
    import zarr

    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        src = os.path.join(tmp, "in.zarr")
        z = zarr.create_array(src, shape=(job_rows, 64), chunks=(block_rows, 64), dtype="f4")
        z[:] = np.random.default_rng(0).random((job_rows, 64), dtype=np.float32)
        configs = {"cuda": "kind: cuda\ndashboard_address: null\n",
                   "cpu": f"kind: local\nn_workers: {CORES}\nthreads_per_worker: 1\nprocesses: true\n"
                          "dashboard_address: null\n"}
        seconds = {}
        for device, text in configs.items():
            config = os.path.join(tmp, f"{device}.yaml")
            with open(config, "w") as f:
                f.write(text)
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "dkapprox", "featurize", src, "--method", "rbf", "--n-components",
                            str(n), "--gamma", "0.05", "--out", os.path.join(tmp, f"{device}.zarr"), "--device",
                            device, "--cluster", config, "--no-progress"], check=True)
            seconds[device] = time.perf_counter() - started
        out = os.path.join(tmp, "copy.zarr")
        read = da.from_zarr(src)
        same_bytes = read.map_blocks(lambda b: np.tile(b, n // 64), chunks=(read.chunks[0], (n,)), dtype=read.dtype)
        started = time.perf_counter()
        with dask.config.set(scheduler="threads", num_workers=CORES):
            same_bytes.to_zarr(out, compute=True)
        copy = time.perf_counter() - started
    print(f"job featurize rbf {job_rows:,} x 64 -> {n} float32, blocks of {block_rows:,} (cluster start included): "
          f"--device cuda {job_rows / seconds['cuda']:,.0f} rows/s, CPU ({CORES} workers) "
          f"{job_rows / seconds['cpu']:,.0f} rows/s ({seconds['cpu'] / seconds['cuda']:.1f}x); plain dask "
          f"reading and writing the same bytes {job_rows / copy:,.0f} rows/s (of it: cuda "
          f"{copy / seconds['cuda']:.2f}, cpu {copy / seconds['cpu']:.2f})", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--block-rows", type=int, default=250_000)
    parser.add_argument("--job-rows", type=int, default=1_000_000)
    parser.add_argument("--components", type=int, nargs="*", default=[1024, 4096])
    parser.add_argument("--cpu-block-seconds", type=float, default=1.0)
    parser.add_argument("--kinds", nargs="*", default=["rbf", "nystroem"])
    parser.add_argument("--only", nargs="*", default=["card", "throughput", "big", "landmarks", "job"])
    args = parser.parse_args()
    rates = card()
    with dask.config.set({"array.slicing.split_large_chunks": False}):
        if "throughput" in args.only:
            throughput_table(args.rows, args.block_rows, args.components, rates, args.cpu_block_seconds, args.kinds)
        if "big" in args.only:
            big_nystroem(args.rows // 20, args.block_rows // 10)
        if "landmarks" in args.only:
            landmark_table(args.rows // 10, args.block_rows)
    if "job" in args.only:
        job_table(args.job_rows, args.block_rows)


if __name__ == "__main__":
    main()
