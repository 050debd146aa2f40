"""KernelRidge (Falkon's CG over dask blocks) against Nystroem + RidgeClassifier, the exact SVC and KernelRidge.

Sections (``--sections``, comma separated):

* ``learning``: the learning study's synthetic classification (examples/learning_study.py:
  1,000,000 training rows, 100,000 test rows, 20 features, blocks of 50,000 rows) on
  LocalCluster(2 workers x 1 thread): KernelRidgeClassifier at ``--centers`` (2,048, 8,192,
  16,384) against Nystroem(2048) + RidgeClassifier(alpha=1e-2) and the exact RBF SVC on
  ``--svc-rows`` (100,000) rows in a child process; accuracy, time, CG iterations, passes.
* ``exactness``: predictions against scikit-learn's exact ``KernelRidge`` (same alpha) on 5,000
  and 10,000 rows, at m = n and m = n / 10, and the dense solve of the same Nystroem problem.
* ``cost``: one pass's time per block against its limit, the block's three products alone
  (``X C^T``, ``K v``, ``K^T u``) and the exponential, one thread.
* ``numpy``: KernelRidge and KernelRidgeCV fitted on NumPy arrays of ``--numpy-rows`` rows, and KernelRidge's
  predict on them, against the same rows as a dask array, and on NumPy's blocks one after another on BLAS's own
  threads (as before they were mapped on the cores): seconds and ratios.
* ``out_of_core``: a 16,000,000 x 20 float32 Zarr input (1.19 GiB) on LocalCluster(2 workers x 1
  thread, 600 MiB each): not persisted, read once a pass; peak RSS, spilled bytes, pauses, restarts.

    python benchmarks/bench_kernel_ridge.py                          # everything (about 25 minutes)
    python benchmarks/bench_kernel_ridge.py --quick                  # 50,000 rows, small m (about 2 minutes)
    python benchmarks/bench_kernel_ridge.py --sections learning --centers 8192 --no-svc
    python benchmarks/bench_kernel_ridge.py --sections numpy                    # about 2 minutes
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from _common import print_table  # noqa: E402


def learning(args):
    import dask.array as da
    from distributed import Client, LocalCluster
    from learning_study import run_exact, synthetic
    from sklearn.pipeline import make_pipeline

    from dkapprox import Nystroem
    from dkapprox.linear_model import KernelRidgeClassifier, RidgeClassifier

    data = synthetic(args.rows, args.rows // 10, chunk_rows=args.chunk)
    X = da.from_array(data["X_train"], chunks=(args.chunk, -1))
    y = da.from_array(data["y_train"], chunks=args.chunk)
    X_test = da.from_array(data["X_test"], chunks=(args.chunk, -1))
    rows = []

    def timed(name, model, facts):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a CG stopped at max_iter still predicts; its residual is shown
            model.fit(X, y)
        fit = time.perf_counter() - start
        accuracy = float(np.mean(model.predict(X_test).compute() == data["y_test"]))
        total = time.perf_counter() - start
        rows.append([name, accuracy, total, fit, *facts(model)])
        print(f"{name}: accuracy {accuracy:.4f} in {total:.1f} s", flush=True)

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster):
        if not args.no_nystroem:
            timed("Nystroem(2048)+RidgeClassifier",
                  make_pipeline(Nystroem(gamma=data["gamma"], n_components=2048, random_state=0),
                                RidgeClassifier(alpha=1e-2)),
                  lambda p: ["-", "-", p[0].landmark_passes_ + 1, "-"])
        for m in args.centers:
            for alpha in args.alphas:
                for max_iter in args.max_iter:
                    clf = KernelRidgeClassifier(alpha=alpha, kernel="rbf", gamma=data["gamma"], n_centers=m,
                                                tol=args.tol, max_iter=max_iter, random_state=0)
                    timed(f"KernelRidge m={m} alpha={alpha:g} max_iter={max_iter}", clf,
                          lambda c: [c.n_iter_, f"{c.residuals_[-1]:.1e}", c.passes_, c.input_persisted_])
    svc = None
    if not args.no_svc:
        result = run_exact(data, [args.svc_rows], args.svc_budget, log=print)
        svc = result["svc"][0] if result["svc"] else None
        rows.append([f"exact SVC on {args.svc_rows:,} rows", svc[1] if svc else float("nan"),
                     svc[2] if svc else float("nan"), "-", "-", "-", "-", "-"])
    if svc:
        for row in rows[:-1]:
            row.append(f"{row[1] - svc[1]:+.4f} / {row[2] / svc[2]:.2f}")
        rows[-1].append("0 / 1")
    print_table(f"learning study: {args.rows:,} training rows, {args.rows // 10:,} test rows, LocalCluster(2x1), "
                f"blocks of {args.chunk:,}; KernelRidge tol={args.tol:g}",
                ["model", "accuracy", "s (fit+predict)", "fit s", "CG iters", "residual", "passes", "persisted"]
                + (["acc - SVC / time / SVC"] if svc else []), rows)


def exactness(args):
    from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
    from sklearn.metrics.pairwise import rbf_kernel

    from dkapprox.linear_model import KernelRidge

    rng = np.random.default_rng(0)
    rows = []
    for n in args.exact_rows:
        X = rng.normal(size=(n, 8))
        y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.normal(size=n)
        Xt = rng.normal(size=(2000, 8))
        start = time.perf_counter()
        sk = SkKernelRidge(alpha=1.0, kernel="rbf", gamma=0.1).fit(X, y)
        sk_s = time.perf_counter() - start
        exact = sk.predict(Xt)
        for m in (n, n // 10):
            start = time.perf_counter()
            model = KernelRidge(alpha=1.0, kernel="rbf", gamma=0.1, n_centers=m, tol=1e-10, max_iter=500,
                                random_state=0).fit(X, y)
            s = time.perf_counter() - start
            ours = model.predict(Xt)
            C = model.centers_
            K = rbf_kernel(X, C, gamma=0.1)
            a = np.linalg.solve(K.T @ K + 1.0 * rbf_kernel(C, gamma=0.1), K.T @ y)
            dense = rbf_kernel(Xt, C, gamma=0.1) @ a
            scale = np.abs(exact).max()
            rows.append([n, m, model.n_iter_, np.abs(ours - exact).max() / scale,
                         np.abs(ours - dense).max() / scale, s, sk_s, s / sk_s])
    print_table("exactness: rbf, alpha=1, tol=1e-10; max |difference| / max |exact prediction| on 2,000 new rows",
                ["n", "m", "CG iters", "vs sklearn KernelRidge", "vs dense Nystroem solve", "fit s", "sklearn s",
                 "ratio"], rows)


def cost(args):
    from threadpoolctl import threadpool_limits

    from dkapprox.kernel_ridge._falkon import RBF32_SLICE_ELEMENTS, SLICE_ELEMENTS, Centers, PassState, normal_partial
    from dkapprox.kernels import Kernel

    rng = np.random.default_rng(0)
    rows = []
    for dtype in (np.float32, np.float64):
        X = rng.normal(size=(args.cost_rows, 20)).astype(dtype)
        for m in args.cost_centers:
            C = X[:m].copy()
            state = PassState(Centers(Kernel("rbf", (("gamma", 0.05),)), C), rng.normal(size=(m, 1)))
            # the pass's slice of rows, and its distances' dtype (float32 rows: a float32 product)
            elements = RBF32_SLICE_ELEMENTS if dtype == np.float32 else SLICE_ELEMENTS
            r = max(1, elements // m)
            x, c = X[:r].astype(dtype), C.astype(dtype)
            D, K, v = np.empty((r, m), dtype=dtype), np.empty((r, m), dtype=dtype), state.v.astype(dtype)
            exponents = np.full((r, m), -0.5, dtype=dtype)
            u = K[:, :1].copy()
            reps = args.cost_rows // r
            parts = {"gemm": lambda: np.matmul(x, c.T, out=D), "exp": lambda: np.exp(exponents, out=K),
                     "Kv": lambda: K @ v, "KTu": lambda: K.T @ u}
            seconds = {}
            with threadpool_limits(1):
                normal_partial(0, state, X[:2000])
                start = time.perf_counter()
                normal_partial(0, state, X)
                total = time.perf_counter() - start
                for name, fn in parts.items():
                    fn()
                    start = time.perf_counter()
                    for _ in range(reps):
                        fn()
                    seconds[name] = (time.perf_counter() - start) * args.cost_rows / (reps * r)
            limit = seconds["gemm"] + seconds["Kv"] + seconds["KTu"]
            rows.append([np.dtype(dtype).name, m, total, limit, limit / total, seconds["exp"],
                         (limit + seconds["exp"]) / total, total / (args.cost_rows * m) * 1e9])
    print_table(f"cost of one pass over {args.cost_rows:,} x 20 rows, one thread, slices as the pass cuts them: "
                "limit = the kernel block's GEMM (in the rows' dtype, as the pass makes it) + K v + K^T u",
                ["dtype", "m", "pass s", "limit s", "limit / pass", "exp s", "(limit+exp) / pass",
                 "ns per k(x,c)"], rows)


def out_of_core(args):
    """A Zarr input larger than the workers' memory limits together: read once a pass, nothing spilled."""
    import tempfile

    import zarr
    from distributed import Client, LocalCluster

    from dkapprox import io
    from dkapprox.cluster import WorkerWatch
    from dkapprox.linear_model import KernelRidge

    rows, chunk = args.ooc_rows, 250_000
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        store = zarr.create_array(f"{tmp}/X.zarr", shape=(rows, 20), chunks=(chunk, 20), dtype=np.float32)
        rng = np.random.default_rng(0)
        y = np.empty(rows)
        for lo in range(0, rows, chunk):
            block = rng.normal(size=(min(chunk, rows - lo), 20)).astype(np.float32)
            store[lo : lo + len(block)] = block
            y[lo : lo + len(block)] = np.sin(block[:, 0]) + 0.1 * rng.normal(size=len(block))
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=args.ooc_limit,
                          dashboard_address=":0") as cluster, Client(cluster) as client:
            X = io.open_array(f"{tmp}/X.zarr")
            model = KernelRidge(alpha=1.0, kernel="rbf", gamma=0.05, n_centers=args.ooc_centers, tol=1e-12,
                                max_iter=args.ooc_iter, random_state=0)
            start = time.perf_counter()
            with WorkerWatch(client, interval=0.2) as watch, warnings.catch_warnings():
                warnings.simplefilter("ignore")  # max_iter is the point here, not convergence
                model.fit(X, y)
            seconds = time.perf_counter() - start
            report = watch.report
    limit = sum(report.memory_limit.values())
    print_table(f"out of core: {rows:,} x 20 float32 Zarr ({X.nbytes / 2**30:.2f} GiB) on LocalCluster(2x1, "
                f"memory_limit={args.ooc_limit} each: {limit / 2**30:.2f} GiB together), m={args.ooc_centers}",
                ["fit s", "passes", "s a pass", "persisted", "peak worker RSS MiB", "spilled MiB", "paused",
                 "restarts"],
                [[seconds, model.passes_, seconds / model.passes_, model.input_persisted_,
                  max(report.peak_rss.values()) / 2**20, sum(report.spilled_bytes.values()) / 2**20,
                  len(report.paused), report.restarts]])


def in_memory(args):
    """NumPy input against the same rows as a dask array (threaded scheduler), and against the in-memory blocks
    one after another on BLAS's own threads (how in-memory passes ran before they were mapped on the cores)."""
    import dask
    import dask.array as da
    from sklearn.datasets import make_friedman1

    from dkapprox import utils
    from dkapprox.linear_model import KernelRidge, KernelRidgeCV

    X, y = make_friedman1(args.numpy_rows, n_features=20, noise=1.0, random_state=0)
    cores = utils.available_cpus
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # three CG iterations: a model to predict with, not to judge
        fitted = KernelRidge(alpha=1e-3, kernel="rbf", gamma=0.05, n_centers=1024, max_iter=3, random_state=0).fit(
            X[:20_000], y[:20_000])
    fits = {f"KernelRidge, m = 1024, {args.numpy_rows:,} rows": lambda X, y: KernelRidge(
                alpha=1e-3, kernel="rbf", gamma=0.05, n_centers=1024, random_state=0).fit(X, y),
            f"KernelRidgeCV, m = 512, 3 x 3 candidates, {args.numpy_rows // 2:,} rows": lambda X, y: KernelRidgeCV(
                alphas=[1e-4, 1e-3, 1e-2], gammas=[0.05, 0.1, 0.2], n_centers=512, random_state=0).fit(
                X[:args.numpy_rows // 2], y[:args.numpy_rows // 2]),
            f"KernelRidge predict, m = 1024, {args.numpy_rows:,} rows": lambda X, y: dask.compute(
                fitted.predict(X))}
    rows = []
    for label, fit in fits.items():
        seconds = {}
        for kind in ("dask", "numpy", "before"):
            data = (X, y) if kind != "dask" else (da.from_array(X, chunks=(args.chunk, 20)),
                                                  da.from_array(y, chunks=args.chunk))
            if kind == "before":
                utils.available_cpus = lambda: 1
            try:
                with warnings.catch_warnings(), dask.config.set({"dkapprox.share-blas-threads": kind != "before"}):
                    warnings.simplefilter("ignore")
                    start = time.perf_counter()
                    fit(*data)
                    seconds[kind] = time.perf_counter() - start
            finally:
                utils.available_cpus = cores
        rows.append([label, f"{seconds['dask']:.2f}", f"{seconds['numpy']:.2f}", f"{seconds['before']:.2f}",
                     f"{seconds['dask'] / seconds['numpy']:.2f}x", f"{seconds['before'] / seconds['numpy']:.2f}x"])
    print_table(f"NumPy input: Friedman #1 (20 features), seconds, {cores()} cores; dask in blocks of "
                f"{args.chunk:,}; before: NumPy's blocks one after another on BLAS's own threads",
                ["call", "dask s", "NumPy s", "before s", "NumPy's speed / dask's", "speed-up"], rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", default="exactness,cost,out_of_core,learning")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk", type=int, default=50_000)
    parser.add_argument("--centers", default="2048,8192,16384")
    parser.add_argument("--alphas", default="0.1")
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--max-iter", default="20", help="CG iterations at most; a comma list runs each")
    parser.add_argument("--svc-rows", type=int, default=100_000)
    parser.add_argument("--svc-budget", type=float, default=600.0)
    parser.add_argument("--no-svc", action="store_true")
    parser.add_argument("--no-nystroem", action="store_true", help="leave out Nystroem(2048) + RidgeClassifier")
    parser.add_argument("--ooc-rows", type=int, default=16_000_000)
    parser.add_argument("--ooc-limit", default="600MiB")
    parser.add_argument("--ooc-centers", type=int, default=512)
    parser.add_argument("--ooc-iter", type=int, default=5)
    parser.add_argument("--numpy-rows", type=int, default=200_000, help="rows of the numpy section")
    parser.add_argument("--dir", default=None, help="where the out-of-core section writes its Zarr input")
    args = parser.parse_args()
    args.centers = [int(c) for c in args.centers.split(",")]
    args.alphas = [float(a) for a in args.alphas.split(",")]
    args.max_iter = [int(i) for i in args.max_iter.split(",")]
    args.exact_rows, args.cost_rows, args.cost_centers = [5_000, 10_000], 100_000, [2048, 8192]
    if args.quick:
        args.rows, args.chunk, args.svc_rows = 50_000, 10_000, 10_000
        args.centers = [256, 1024]
        args.exact_rows, args.cost_rows, args.cost_centers = [2_000], 20_000, [1024]
        args.ooc_rows, args.ooc_limit = 1_000_000, "1GiB"
    for section in args.sections.split(","):
        sections = {"learning": learning, "exactness": exactness, "cost": cost, "out_of_core": out_of_core,
                    "numpy": in_memory}
        sections[section](args)


if __name__ == "__main__":
    main()
