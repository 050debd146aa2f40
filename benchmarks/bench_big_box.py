"""The big box (issue 41): every core and the GPU on dask's default scheduler, against their limits.

One run prints, side by side, as ratios measured in the same run:

CPU (NumPy, any machine; ``--cpu-rows`` x 64 float32 in ``--cpu-blocks`` blocks, RBFSampler(1024)):

- the machine's limit for this block function: ``--workers`` processes (default: every core), no
  dask, each mapping its own block again and again (``limit, block``: a block of the run's size, its
  output written to memory; ``limit, in cache``: 512 rows, output within a core's cache), and one
  process alone: the scaling the hardware gives, whatever dask does;
- dask's threaded scheduler (no Client) on ``--workers`` threads: dkapprox's block at float32 tiles
  of 2**16 values (the old default), 2**18 (the default now), 2**20 and 2**22, and plain dask
  ``map_blocks(cos(b @ W + bias) * s)``;
- LocalCluster(workers x 1): dkapprox and the plain block;
- one thread beside a pure-Python thread that holds the GIL (``gil``): the block's seconds against
  its seconds alone. Each return to Python in a block's loop waits up to the switch interval there.

GPU (CuPy, where one is seen; ``--gpu-rows`` x 64 float32 in ``--gpu-block`` row blocks, 1024 features):

- the limit: the products at the card's measured float32 rate plus one write of the output;
- Nystroem and RBFSampler on the default threaded scheduler with device turns on (the default) and
  off (``dkapprox.device-turns: false``: every thread queues at once, each check waits for the stream),
  on one thread and on the synchronous scheduler; against PyTorch eager where torch is importable.

    python benchmarks/bench_big_box.py [--part cpu|gpu|all] [--budget 300]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import sys
import threading
import time
import traceback
from collections import Counter

import dask
import dask.array as da
import numpy as np
from threadpoolctl import threadpool_limits

import dkapprox
from dkapprox.backends import _jit

D, M = 64, 1024
T0 = time.perf_counter()


def say(*args):
    print(*args, flush=True)


def best(fn, repeats=2, sync=lambda: None):
    found = float("inf")
    for _ in range(repeats):
        sync()
        started = time.perf_counter()
        fn()
        sync()
        found = min(found, time.perf_counter() - started)
    return found


def one_value_per_block(Z):
    """Each block's output reduced to one value where it lies (a copy: a view would keep the block alive)."""
    return Z.map_blocks(lambda b: b[:1, :1].copy(), chunks=(tuple(1 for _ in Z.chunks[0]), (1,)), dtype=Z.dtype)


def table(title, rows, unit="rows/s"):
    say(f"\n{title}")
    base = rows[0][1]
    for name, value in rows:
        say(f"  {name:62s} {value / 1e6:9.3f} M {unit}   x{value / base:6.2f} of first")


def physical_cores():
    try:
        pairs = set()
        core = socket = None
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("physical id"):
                    socket = line.split(":")[1].strip()
                elif line.startswith("core id"):
                    core = line.split(":")[1].strip()
                    pairs.add((socket, core))
        return len(pairs) or None
    except OSError:
        return None


# -------------------------------------------------------------------------------- CPU
def _rbf_state(seed=0):
    rng = np.random.default_rng(seed)
    est = dkapprox.RBFSampler(gamma=0.1, n_components=M, random_state=0).fit(rng.random((2000, D), dtype=np.float32))
    return est, est.random_weights_.astype(np.float32), est.random_offset_.astype(np.float32)


def plain_block(W, bias, scale):
    def fn(b):
        with threadpool_limits(1, user_api="blas"):
            z = b @ W
            z += bias
            np.cos(z, out=z)
            z *= scale
            return z
    return fn


def _process_loop(rows, seconds, barrier, results, index):
    """One process of the limit: its own block mapped again and again for ``seconds``."""
    with threadpool_limits(1, user_api="blas"):
        _, W, bias = _rbf_state()
        scale = math.sqrt(2.0 / M)
        block = np.random.default_rng(index).random((rows, D), dtype=np.float32)
        _jit.fourier_map(block, W, bias, scale)  # warm: the recycled output's pages exist
        barrier.wait()
        done, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            out = _jit.fourier_map(block, W, bias, scale)
            del out
            done += rows
        results[index] = done / (time.perf_counter() - started)


def process_limit(workers, rows, seconds):
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(workers)
    results = ctx.Array("d", workers)
    procs = [ctx.Process(target=_process_loop, args=(rows, seconds, barrier, results, i)) for i in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=seconds + 120)
    return float(sum(results[:]))


def gil_probe(rows=62_500):
    """A block's seconds beside a thread that holds the GIL, over its seconds alone (one BLAS thread)."""
    _, W, bias = _rbf_state()
    scale = math.sqrt(2.0 / M)
    block = np.random.default_rng(0).random((rows, D), dtype=np.float32)
    stop = [False]

    def hog():
        x = 0
        while not stop[0]:
            x += 1

    found = {}
    with threadpool_limits(1, user_api="blas"):
        variants = (("plain", plain_block(W, bias, scale)), ("dkapprox", lambda b: _jit.fourier_map(b, W, bias, scale)))
        for name, fn in variants:
            alone = best(lambda: fn(block), 3)
            thread = threading.Thread(target=hog)
            thread.start()
            try:
                beside = best(lambda: fn(block), 2)
            finally:
                stop[0] = True
                thread.join()
            stop[0] = False
            found[name] = (alone, beside)
    for name, (alone, beside) in found.items():
        say(f"  gil: {name:10s} alone {alone * 1e3:8.1f} ms, beside a GIL-holding thread {beside * 1e3:9.1f} ms "
            f"(x{beside / alone:.2f})")


def cpu_part(args):
    workers = args.workers
    say(f"== CPU: {os.cpu_count()} logical CPUs, {physical_cores()} physical cores; {workers} workers; "
        f"{args.cpu_rows} x {D} float32 in {args.cpu_blocks} blocks, RBFSampler({M})")
    gil_probe()
    rows = args.cpu_rows
    block_rows = rows // args.cpu_blocks
    if args.limit_seconds <= 0:
        limits = None
    else:
        limits = [("limit, block: 1 process", process_limit(1, block_rows, args.limit_seconds)),
              (f"limit, block: {workers} processes", process_limit(workers, block_rows, args.limit_seconds)),
                  ("limit, in cache (512 rows): 1 process", process_limit(1, 512, args.limit_seconds))]
        limits.append((f"limit, in cache (512 rows): {workers} processes",
                       process_limit(workers, 512, args.limit_seconds)))
        table("the machine's limit for this block function (no dask)", limits)
    est, W, bias = _rbf_state()
    scale = math.sqrt(2.0 / M)
    Xn = np.random.default_rng(0).random((rows, D), dtype=np.float32)
    X = da.from_array(Xn, chunks=(block_rows, D), name=False)
    found = []
    old = _jit.TILE_VALUES_32
    try:
        for tile in args.tiles:
            _jit.TILE_VALUES_32 = tile
            Z = one_value_per_block(est.transform(X))
            Z.compute(scheduler="threads", num_workers=workers)
            found.append((f"dkapprox, threads {workers}, float32 tiles 2**{int(math.log2(tile))}"
                          + (" (default)" if tile == old else ""),
                          rows / best(lambda: Z.compute(scheduler="threads", num_workers=workers))))
    finally:
        _jit.TILE_VALUES_32 = old
    Zp = one_value_per_block(X.map_blocks(plain_block(W, bias, scale), chunks=(X.chunks[0], (M,)), dtype=np.float32))
    found.append((f"plain dask cos(XW+b)*s, threads {workers}",
                  rows / best(lambda: Zp.compute(scheduler="threads", num_workers=workers))))
    Z1 = one_value_per_block(est.transform(X))
    found.append(("dkapprox, threads 1", rows / best(lambda: Z1.compute(scheduler="threads", num_workers=1), 1)))
    from distributed import Client, LocalCluster, wait

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        Xc = da.random.default_rng(0).random((rows, D), chunks=(block_rows, D), dtype=np.float32).persist()
        wait(Xc)
        Zc = one_value_per_block(est.transform(Xc))
        Zc.compute()
        found.append((f"dkapprox, LocalCluster({workers}x1)", rows / best(lambda: Zc.compute())))
        # where the persisted blocks landed: a task runs where its block is, so the busiest worker sets the time
        counts = sorted(Counter(w for ws in client.who_has(Xc).values() for w in ws).values())
        say(f"  blocks a worker after persist: fewest {counts[0]}, most {counts[-1]} "
            f"(mean {len(Xc.chunks[0]) / workers:.1f})")
        client.rebalance(Xc)
        counts = sorted(Counter(w for ws in client.who_has(Xc).values() for w in ws).values())
        say(f"  after client.rebalance: fewest {counts[0]}, most {counts[-1]}")
        Zc.compute()
        found.append((f"dkapprox, LocalCluster({workers}x1), blocks rebalanced", rows / best(lambda: Zc.compute())))
        Zpc = one_value_per_block(Xc.map_blocks(plain_block(W, bias, scale), chunks=(Xc.chunks[0], (M,)),
                                                dtype=np.float32))
        found.append((f"plain dask, LocalCluster({workers}x1)", rows / best(lambda: Zpc.compute())))
    table("dask on this machine", found)
    by = dict(found)
    default = next(v for k, v in found if k.endswith("(default)"))
    cluster = by[f"dkapprox, LocalCluster({workers}x1)"]
    line = f"\nSUMMARY cpu: threads {workers} (default tiles) / LocalCluster({workers}x1) = {default / cluster:.2f}"
    if limits:
        limit = limits[1][1]
        line += (f"; LocalCluster / limit ({workers} processes, no dask) = {cluster / limit:.2f}; threads / limit = "
                 f"{default / limit:.2f}; limit scaling {limits[1][1] / limits[0][1]:.2f}x of one process "
                 f"(in cache {limits[3][1] / limits[2][1]:.2f}x)")
    say(line)


# -------------------------------------------------------------------------------- GPU
def card_rates(cupy, sync):
    """The card's float32 product rate (8192^3, no TF32) and its copy bandwidth (bytes read plus written)."""
    n = 8192
    a = cupy.random.random((n, n), dtype=cupy.float32)
    rate = 2 * n**3 / best(lambda: a @ a, 3, sync)
    # a 4 GiB device-to-device copy, as the limit was measured (CuPy's fill(1) of 4 GiB gave
    # 843 GB/s on an H200: a write-only kernel of its own, far below the memory's rate)
    src = cupy.ones(2**30, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    write = 2 * src.nbytes / best(lambda: dst.data.copy_from_device_async(src.data, src.nbytes), 3, sync)
    return rate, write


def gpu_part(args):
    try:
        import cupy
    except ImportError:
        say("== GPU: no CuPy here; skipped")
        return
    sync = cupy.cuda.Device().synchronize
    props = cupy.cuda.runtime.getDeviceProperties(0)
    rate, write = card_rates(cupy, sync)
    say(f"== GPU: {props['name'].decode()}; CuPy {cupy.__version__}; float32 products {rate / 1e12:.1f} TFLOP/s; "
        f"write {write / 1e9:.0f} GB/s")
    rows, block = args.gpu_rows, args.gpu_block
    Xg = cupy.random.default_rng(0).random((rows, D), dtype=cupy.float32)
    Xd = da.from_array(Xg, chunks=(block, D), asarray=False, name=False)
    fit = Xg[:20_000].get()
    ests = {"Nystroem": dkapprox.Nystroem(gamma=0.1, n_components=M, random_state=0).fit(fit),
            "RBFSampler": dkapprox.RBFSampler(gamma=0.1, n_components=M, random_state=0).fit(fit)}
    limit = {"Nystroem": rows / ((2 * rows * D * M + 2 * rows * M * M) / rate + rows * M * 4 / write),
             "RBFSampler": rows / (2 * rows * D * M / rate + rows * M * 4 / write)}
    workers = args.workers
    summary = []
    for name, est in ests.items():
        found = []
        Z = one_value_per_block(est.transform(Xd))

        def timed(label, scheduler, n_workers=None, turns=True):
            if time.perf_counter() - T0 > args.budget - 15:
                say(f"  {label}: skipped (budget)")
                return
            try:
                with dask.config.set({"dkapprox.device-turns": turns}):
                    run = (lambda: Z.compute(scheduler=scheduler, num_workers=n_workers)) if n_workers \
                        else (lambda: Z.compute(scheduler=scheduler))
                    run()
                    sync()
                    found.append((label, rows / best(run, 2, sync)))
            except Exception:  # noqa: BLE001 - one variant's failure leaves the others' figures
                say(f"  {label}: FAILED\n{traceback.format_exc()}")

        if name == "RBFSampler":
            found += products_alone(est, Xg, block, sync)
        timed(f"dkapprox, threads {workers}, device turns (default)", "threads", workers)
        timed(f"dkapprox, threads {workers}, no turns (before)", "threads", workers, turns=False)
        timed("dkapprox, threads 1, device turns", "threads", 1)
        timed("dkapprox, synchronous", "sync")
        found += torch_eager(name, est, Xg, block, sync)
        say(f"\n{name}({M}) on {rows} x {D} float32, blocks of {block}: limit {limit[name] / 1e6:.1f} M rows/s")
        for label, value in found:
            say(f"  {label:62s} {value / 1e6:9.2f} M rows/s  {value / limit[name]:5.2f} of limit")
        default = [v for k, v in found if k.endswith("(default)")]
        if default:
            summary.append(f"{name} default {default[0] / limit[name]:.2f} of limit")
            torch = [v for k, v in found if k.startswith("PyTorch")]
            if torch:
                summary[-1] += f" ({default[0] / torch[0]:.2f}x PyTorch eager)"
    say("\nSUMMARY gpu: " + "; ".join(summary))


def products_alone(est, Xg, block, sync):
    """The RBF block's product alone, block by block, in CuPy and in PyTorch: where a block's time goes."""
    import cupy

    W = cupy.asarray(est.random_weights_.astype(np.float32))
    out = cupy.empty((block, W.shape[1]), dtype=cupy.float32)

    def cupy_products():
        for start in range(0, Xg.shape[0], block):
            cupy.matmul(Xg[start:start + block], W, out=out[: min(block, Xg.shape[0] - start)])

    found = [("CuPy matmul alone (no cos), one loop", Xg.shape[0] / best(cupy_products, 2, sync))]
    try:
        import torch
    except ImportError:
        return found
    X, Wt = torch.as_tensor(Xg, device="cuda"), torch.as_tensor(W, device="cuda")
    tout = torch.empty((block, W.shape[1]), device="cuda")

    def torch_products():
        for start in range(0, X.shape[0], block):
            torch.mm(X[start:start + block], Wt, out=tout[: min(block, X.shape[0] - start)])

    found.append(("PyTorch mm alone (no cos), one loop", Xg.shape[0] / best(torch_products, 2, sync)))
    return found


def torch_eager(name, est, Xg, block, sync):
    try:
        import torch
    except ImportError:
        return []
    torch.backends.cuda.matmul.allow_tf32 = False
    X = torch.as_tensor(Xg, device="cuda")
    if name == "RBFSampler":
        W = torch.as_tensor(est.random_weights_.astype(np.float32), device="cuda")
        b = torch.as_tensor(est.random_offset_.astype(np.float32), device="cuda")
        s = math.sqrt(2.0 / M)

        def run():
            for start in range(0, X.shape[0], block):
                z = torch.addmm(b, X[start:start + block], W).cos_().mul_(s)
                z[:1, :1].clone()
    else:
        C = torch.as_tensor(est.components_.astype(np.float32), device="cuda")
        N = torch.as_tensor(est.normalization_.astype(np.float32), device="cuda")
        cc = (C * C).sum(1)
        g = 0.1

        def run():
            for start in range(0, X.shape[0], block):
                x = X[start:start + block]
                k = torch.addmm(cc[None, :] + (x * x).sum(1)[:, None], x, C.T, alpha=-2.0).clamp_(min=0)
                k.mul_(-g).exp_()
                (k @ N.T)[:1, :1].clone()

    run()
    torch.cuda.synchronize()
    return [("PyTorch eager, one loop", Xg.shape[0] / best(run, 2, torch.cuda.synchronize))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("cpu", "gpu", "all"), default="all")
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--cpu-rows", type=int, default=4_096_000)
    parser.add_argument("--cpu-blocks", type=int, default=64)
    parser.add_argument("--limit-seconds", type=float, default=6.0, help="each limit's run; 0: no limit runs")
    parser.add_argument("--gpu-rows", type=int, default=10_000_000)
    parser.add_argument("--gpu-block", type=int, default=250_000)
    parser.add_argument("--tiles", type=lambda t: [2**int(v) for v in t.split(",")], default=[2**16, 2**18, 2**20],
                        help="float32 tile sizes to try, as powers of two: 16,18,20")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds this run plans within")
    args = parser.parse_args()
    if args.part in ("gpu", "all"):
        gpu_part(args)
    if args.part in ("cpu", "all"):
        cpu_part(args)
    say(f"total {time.perf_counter() - T0:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
