"""KernelRidge (Falkon's CG) on a GPU against the same fit on the machine's CPU cores (issue 41, item 5).

A Friedman-like smooth target (``10 sin(pi x0 x1) + 20 (x2 - 1/2)^2 + 10 x3 + 5 x4`` plus noise, the
other features noise) on uniform float32 rows, ``--rows`` x ``--features`` (10^7 x 20), ``--centers``
(16,384) uniform centers, rbf (``--gamma 0.6``, ``--alpha 0.1``), a fixed number of CG iterations
(``--max-iter``, tol tiny so none stops early). Both legs fit ``dkapprox.KernelRidge`` on a persisted
dask array:

* GPU: blocks of CuPy chunks, dask's default scheduler (``--gpu-scheduler synchronous`` to compare);
  the passes' slices and products and the preconditioner's factorizations run on the GPU.
* CPU: blocks of NumPy chunks, the threaded scheduler on every core. To fit the time budget the CPU
  leg runs ``--cpu-rows`` rows (default a tenth); its speed is reported per row and pass, so the
  ratio compares like with like: rows/s a pass. It first times one pass with the GPU fit's centers,
  then fits where the budget leaves time; its m x m factorizations run on the host (one BLAS thread
  above m = 8,192: ``_falkon.ONE_THREAD_ABOVE``), shown apart.

Printed side by side: fit seconds, preconditioner seconds, one extra pass timed alone (rows/s per
pass), the ratio GPU / CPU, and the held-out R^2 of both (``--test-rows`` rows). ``--budget``
seconds: stages that would not fit are skipped (the CPU leg shrinks its rows first) and an alarm
stops whatever runs at the budget, printing what was measured.

    python benchmarks/bench_kernel_ridge_gpu.py                        # on a GPU machine (CuPy)
    python benchmarks/bench_kernel_ridge_gpu.py --rows 2000000 --centers 8192 --budget 300
    python benchmarks/bench_kernel_ridge_gpu.py --fake-numpy           # no GPU: NumPy stands in, tiny

Measured on an NVIDIA H200 (issue 41; one run, CuPy 14.2, dask 2026.7.1, 16 cores), the defaults:
GPU fit 26.4 s (12 passes, preconditioner 0.4 s), one pass 2.25 s on dask's default scheduler and
1.75 s on the synchronous one (4.4 M and 5.7 M rows/s), held-out R^2 0.9016. The CPU leg of that run
timed one pass over 10^6 rows at 17.3 s, but in 2 blocks of 500,000 rows, so 2 of the 16 cores
worked: that 77x is no fair ratio, and the blocks of the CPU leg are now at least two a core.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _common import print_table  # noqa: E402


class TimeUp(Exception):
    pass


def friedman_block(block_id, rows, features, dtype, seed):
    """One row block of the data, a function of its index alone (the same rows on both legs)."""
    rng = np.random.default_rng([seed, block_id])
    X = rng.random((rows, features), dtype=np.float32).astype(dtype)
    x = X.astype(np.float64)
    y = (10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]
         + rng.normal(scale=1.0, size=rows))
    return X, y


def make_data(n, features, chunk, dtype, seed, to_device=None):
    """(X, y) as dask arrays of ``chunk`` rows, persisted (NumPy chunks, or the device's with ``to_device``)."""
    import dask
    import dask.array as da

    sizes = [min(chunk, n - lo) for lo in range(0, n, chunk)]
    parts = [dask.delayed(friedman_block, nout=2)(i, r, features, dtype, seed) for i, r in enumerate(sizes)]
    X = da.concatenate([da.from_delayed(p[0], (r, features), dtype=dtype) for p, r in zip(parts, sizes)])
    y = da.concatenate([da.from_delayed(p[1], (r,), dtype=np.float64) for p, r in zip(parts, sizes)])
    if to_device is not None:
        X = X.map_blocks(to_device[0], dtype=dtype, meta=to_device[1])
    X, y = dask.persist(X, y)
    dask.compute(X.sum(), y.sum())  # materialized before any clock starts
    return X, y


def one_pass_seconds(model, X):
    """A pass of the CG alone (``K^T K v`` over every block), timed: what each iteration costs."""
    from dkapprox import engine
    from dkapprox.inputs import _lazy
    from dkapprox.kernel_ridge._falkon import Centers, PassState, combine_normal
    from dkapprox.kernel_ridge._falkon_device import block_partial

    v = np.random.default_rng(0).normal(size=(model.centers_.shape[0], 1))
    state = PassState(Centers(model._kernel(), model.centers_), v, None)
    reduced = engine.reduce_aligned_rows([X], block_partial, combine_normal, state)
    start = time.perf_counter()
    _lazy.compute(reduced)
    return time.perf_counter() - start


def leg(name, args, n, to_device, scheduler, test, record, centers_of=None):
    """One leg: a pass alone (with ``centers_of``'s centers, before any fit, where given), then the fit,
    a timed pass and the held-out R^2. Each figure goes into ``record`` (a dict) as soon as it is measured,
    so that a leg the budget stops still reports what it measured."""
    import dask

    from dkapprox.kernel_ridge import _falkon, _falkon_device
    from dkapprox.linear_model import KernelRidge

    # the CPU leg's blocks: at least two a core (blocks of --chunk rows would leave cores idle on its
    # fewer rows: the first H200 run gave 2 blocks to 16 cores); the GPU's: --chunk
    chunk = args.chunk if to_device is not None else min(args.chunk, max(1, -(-n // (2 * os.cpu_count()))))
    record.update(name=name, rows=n, chunk=chunk)
    X, y = make_data(n, args.features, chunk, np.dtype(args.dtype), args.seed, to_device)
    config = dask.config.set(scheduler) if scheduler else _nothing()
    with config:
        if centers_of is not None:
            record["pass_s"] = one_pass_seconds(centers_of, X)
            record["rate"] = n / record["pass_s"]
            print(f"{name}: one pass over {n:,} rows in blocks of {chunk:,} {record['pass_s']:.2f} s", flush=True)
    timings = {}
    originals = {(cls, method): getattr(cls, method)
                 for cls in (_falkon.Preconditioner, _falkon_device.DevicePreconditioner)
                 for method in ("__init__", "set_weight_total")}
    for (cls, method), original in originals.items():  # the m x m factorizations, timed apart

        def timed(self, *a, _original=original, **k):
            start = time.perf_counter()
            try:
                return _original(self, *a, **k)
            finally:
                timings["pre"] = timings.get("pre", 0.0) + time.perf_counter() - start
        setattr(cls, method, timed)
    model = KernelRidge(alpha=args.alpha, kernel="rbf", gamma=args.gamma, n_centers=args.centers,
                        tol=1e-12, max_iter=args.max_iter, random_state=0)
    try:
        with config, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # max_iter is reached on purpose
            start = time.perf_counter()
            model.fit(X, y)
            fit = time.perf_counter() - start
            record.update(fit=fit, pre=timings.get("pre", 0.0), passes=model.passes_,
                          fit_rate=n * model.passes_ / max(fit - timings.get("pre", 0.0), 1e-9))
            print(f"{name}: fit {fit:.1f} s ({model.n_iter_} iterations, {model.passes_} passes, residual "
                  f"{model.residuals_[-1]:.2g}), preconditioner {timings.get('pre', 0):.1f} s", flush=True)
            if "pass_s" not in record:
                record["pass_s"] = one_pass_seconds(model, X)
                record["rate"] = n / record["pass_s"]
                print(f"{name}: one pass {record['pass_s']:.2f} s", flush=True)
            if to_device is not None:
                with dask.config.set(scheduler="synchronous"):
                    record["sync_pass_s"] = one_pass_seconds(model, X)
                print(f"{name}: one pass on the synchronous scheduler {record['sync_pass_s']:.2f} s", flush=True)
            X_test, y_test = test
            if to_device is not None:
                X_test = X_test.map_blocks(to_device[0], dtype=X_test.dtype, meta=to_device[1])
            pred = to_host(model.predict(X_test).compute())
    finally:
        for (cls, method), original in originals.items():
            setattr(cls, method, original)
    y_test = np.asarray(y_test.compute())
    record["r2"] = 1 - np.sum((y_test - pred) ** 2) / np.sum((y_test - y_test.mean()) ** 2)
    print(f"{name}: held-out R^2 {record['r2']:.4f}", flush=True)
    return model


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def to_host(a):
    if type(a).__module__.startswith("cupy"):
        return a.get()
    return np.asarray(a)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--cpu-rows", type=int, default=None, help="rows of the CPU leg (default: rows / 10)")
    p.add_argument("--test-rows", type=int, default=200_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--centers", type=int, default=16_384)
    p.add_argument("--max-iter", type=int, default=10)
    p.add_argument("--alpha", type=float, default=0.1)
    p.add_argument("--gamma", type=float, default=0.6,
                   help="rbf gamma: 0.6 on uniform [0, 1] features (variance 1/12) is the learning study's 0.05 on "
                        "standardized ones")
    p.add_argument("--chunk", type=int, default=500_000, help="rows per block")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget", type=float, default=540.0, help="seconds; stops cleanly within it")
    p.add_argument("--gpu-scheduler", default="default", choices=["default", "synchronous", "threads"])
    p.add_argument("--no-cpu", action="store_true")
    p.add_argument("--fake-numpy", action="store_true",
                   help="no GPU here: NumPy chunks stand in for CuPy at tiny size (a smoke test of the script)")
    args = p.parse_args(argv)
    started = time.perf_counter()
    if args.fake_numpy:
        args.rows, args.centers, args.test_rows = min(args.rows, 20_000), min(args.centers, 256), 5_000
        args.chunk = min(args.chunk, 5_000)
        device, label = None, "NumPy standing in for the GPU"
    else:
        try:
            import cupy
        except ImportError:
            sys.exit("bench_kernel_ridge_gpu.py needs CuPy and a GPU (or --fake-numpy to smoke-test it on NumPy)")
        device = (cupy.asarray, cupy.empty((0, 0), dtype=args.dtype))
        label = f"GPU ({cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()})"
    cpu_rows = args.cpu_rows or max(args.rows // 10, min(args.chunk, args.rows))
    cores = os.cpu_count()

    def alarm(signum, frame):
        raise TimeUp()

    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(max(1, int(args.budget)))
    print(f"KernelRidge rbf, {args.features} features {args.dtype}, m = {args.centers:,}, {args.max_iter} CG "
          f"iterations, blocks of {args.chunk:,} rows; {label}; CPU: {cores} cores, threaded scheduler", flush=True)
    gpu, cpu = {}, {}
    try:
        test = make_data(args.test_rows, args.features, args.chunk, np.dtype(args.dtype), args.seed + 1)
        scheduler = None if args.gpu_scheduler == "default" else {"scheduler": args.gpu_scheduler}
        model = leg(label, args, args.rows, device, scheduler, test, gpu)
        if not args.no_cpu:
            # the CPU's pass first (the GPU fit's centers), then its fit where the budget leaves time
            leg(f"CPU ({cores} cores)", args, cpu_rows, None, {"scheduler": "threads", "num_workers": cores}, test,
                cpu, centers_of=model)
    except TimeUp:
        print(f"budget of {args.budget:.0f} s reached: stopped; what was measured follows", flush=True)
    finally:
        signal.alarm(0)
    nan = float("nan")
    rows = [[r["name"], r["rows"], r.get("fit", nan), r.get("pre", nan), r.get("passes", "-"), r.get("pass_s", nan),
             r.get("rate", nan), r.get("fit_rate", nan), r.get("r2", nan)] for r in (gpu, cpu) if r]
    print_table("side by side", ["leg", "rows", "fit s", "precond s", "passes", "one pass s", "rows/s a pass",
                                 "rows*passes/s in fit", "held-out R^2"], rows)
    if "rate" in gpu and "rate" in cpu:
        print(f"\nratio {gpu['name']} / {cpu['name']}: {gpu['rate'] / cpu['rate']:.1f}x rows/s a pass "
              f"(the CPU leg on {cpu['rows']:,} rows, the GPU's on {gpu['rows']:,})")
        if "sync_pass_s" in gpu:
            print(f"GPU pass on dask's synchronous scheduler: {gpu['sync_pass_s']:.2f} s "
                  f"({gpu['rows'] / gpu['sync_pass_s'] / cpu['rate']:.1f}x the CPU)")
        if "fit_rate" in cpu:
            print(f"over the fits' passes: {gpu['fit_rate'] / cpu['fit_rate']:.1f}x rows*passes/s; preconditioner "
                  f"{cpu['pre']:.1f} s on the host, {gpu['pre']:.1f} s on the GPU; held-out R^2 {gpu['r2']:.4f} "
                  f"vs {cpu.get('r2', nan):.4f}")
    print(f"total {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
