"""GaussianProcessRegressor against scikit-learn's exact GP: parity, calibration and scale, side by side.

``--part parity``: Friedman #1 (300 rows, ARD RBF + WhiteKernel, normalize_y). Every row a center
(``n_centers=None``, scikit-learn's fit) with the optimizer on, and the sparse bound with every row a
center at fixed hyperparameters: the largest differences of mean and standard deviation (relative to
their scale) and of the log marginal likelihood, beside the bound ``n ε / σ²`` the jitter allows.

``--part calibration``: three data sets (Friedman #1 with noise 1; a noisy 2-D field as in kriging; diabetes,
which scikit-learn ships), each split train/test: the sparse GP (m centers by k-means) and the exact GP,
each with the optimizer on from the same start: R², the share of held-out rows inside the 95% interval,
and the negative log predictive density (nats a row), with the fit's seconds and passes.

``--part scale``: Friedman #1 of ``--rows`` rows as a dask array in blocks of 50,000, m = ``--centers``
with ARD, the threaded scheduler, against scikit-learn's exact GP on ``--exact-rows`` rows: seconds, passes,
R² and coverage on the same 5,000 held-out rows. With ``--subsample N`` the hyperparameters are learned on the
first N rows (blocks of 10,000) and kept for the fit on all rows (``optimizer=None``), the recipe for 10^6 rows.

    python benchmarks/bench_gaussian_process.py --part parity
    python benchmarks/bench_gaussian_process.py --part calibration
    python benchmarks/bench_gaussian_process.py --part scale [--rows 200000] [--centers 256] [--exact-rows 1000] \
        [--subsample 0]
    python benchmarks/bench_gaussian_process.py --part out-of-core [--ooc-rows 10000000] [--ooc-centers 64]
    python benchmarks/bench_gaussian_process.py --part grid [--rows 200000] [--centers 256] [--candidates 8]
    python benchmarks/bench_gaussian_process.py --part numpy [--rows 200000] [--centers 256]

``--part out-of-core``: Friedman #1 as a Zarr store of ``--ooc-rows`` x 10 float32 (0.37 GiB at 10^7 rows)
with its targets, fitted with ARD on LocalCluster(2 workers x 1 thread) of 1 GiB each (and a store larger
than what they may persist, with ``--ooc-worker-bytes``): the passes, whether the input was persisted, the
bytes each worker spilled, R² and coverage on 5,000 held-out rows.

``--part grid``: Friedman #1 of ``--rows`` rows as a dask array in blocks of 50,000 (the threaded scheduler),
``--candidates`` length scales of ``ConstantKernel() * RBF() + WhiteKernel()`` scored by one fit with
``length_scale_grid`` (``optimizer=None``) against one fit a candidate with that length scale fixed (its signal
variance and noise learned from its one pass, the score each grid candidate gets), the same ``--centers``
centers for all: seconds, passes, their ratio, and the largest relative difference of the bounds.

``--part numpy``: Friedman #1 as NumPy arrays against the same rows as a dask array (blocks of 50,000, the
threaded scheduler) and against the in-memory blocks one after another on BLAS's own threads (before they
were mapped on the cores): one evaluation of the bound on ``--rows`` rows, L-BFGS-B on a quarter of them,
and ``predict`` with the standard deviation; seconds and ratios.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import dask.array as da
import numpy as np
from sklearn.datasets import load_diabetes, make_friedman1
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGP
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

sys.path.insert(0, os.path.dirname(__file__))
from _common import print_table  # noqa: E402

from dkapprox.gaussian_process import GaussianProcessRegressor  # noqa: E402


def kernel(d):
    return C(1.0) * RBF(np.ones(d)) + WhiteKernel(0.1)


def scores(y, mean, std):
    r2 = 1.0 - np.sum((y - mean) ** 2) / np.sum((y - y.mean()) ** 2)
    covered = np.mean(np.abs(y - mean) <= 1.959964 * std)
    nlpd = np.mean(0.5 * np.log(2 * np.pi * std ** 2) + 0.5 * ((y - mean) / std) ** 2)
    return r2, covered, nlpd


def parity():
    X, y = make_friedman1(300, noise=1.0, random_state=0)
    k = kernel(10)
    t0 = time.perf_counter()
    theirs = SklearnGP(k, normalize_y=True, random_state=0).fit(X, y)
    t1 = time.perf_counter()
    ours = GaussianProcessRegressor(k, normalize_y=True, random_state=0).fit(X, y)
    t2 = time.perf_counter()
    Xt = make_friedman1(200, noise=0.0, random_state=1)[0]
    m1, s1 = theirs.predict(Xt, return_std=True)
    m2, s2 = ours.predict(Xt, return_std=True)
    rows = [["exact (n_centers=None), optimizer on", f"{np.abs(m1 - m2).max() / np.abs(m1).max():.1e}",
             f"{np.abs(s1 - s2).max() / s1.max():.1e}",
             f"{abs(ours.log_marginal_likelihood_value_ / theirs.log_marginal_likelihood_value_ - 1):.1e}",
             str(ours.kernel_ == theirs.kernel_), f"{(t2 - t1) / (t1 - t0):.2f}"]]
    fixed = theirs.kernel_
    exact = SklearnGP(fixed, optimizer=None, normalize_y=True).fit(X, y)
    sparse = GaussianProcessRegressor(fixed, optimizer=None, normalize_y=True, centers=X).fit(X, y)
    m1, s1 = exact.predict(Xt, return_std=True)
    m2, s2 = sparse.predict(Xt, return_std=True)
    sigma2 = sparse.noise_variance_
    variance = fixed.k1.k1.constant_value
    allowed = X.shape[0] * 1e-6 * variance / sigma2
    gap = exact.log_marginal_likelihood_value_ - sparse.log_marginal_likelihood_value_
    rows.append(["bound, every row a center, kernel fixed", f"{np.abs(m1 - m2).max() / np.abs(m1).max():.1e}",
                 f"{np.abs(s1 - s2).max() / s1.max():.1e}",
                 f"gap {gap:.1e} (bound n eps / sigma2 = {allowed:.1e})", "(fixed)", ""])
    print_table("Parity with scikit-learn's exact GP (Friedman #1, 300 rows)",
                ["fit", "mean diff / scale", "std diff / scale", "log marginal likelihood", "same kernel",
                 "time ours / sklearn"], rows)


def field(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 10, (n, 2))
    return X, np.sin(X[:, 0]) * np.cos(0.7 * X[:, 1]) + 0.3 * X[:, 0] + 0.2 * rng.standard_normal(n)


def calibration():
    diabetes = load_diabetes()
    sets = {"friedman1 (1000 / 1000)": (make_friedman1(2000, noise=1.0, random_state=0), 1000, 200),
            "2-D field (2000 / 1000)": (field(3000, 0), 2000, 150),
            "diabetes (300 / 142)": ((diabetes.data, diabetes.target), 300, 60)}
    rows = []
    for name, ((X, y), n_train, m) in sets.items():
        k = kernel(X.shape[1])
        for label, est in (("exact (scikit-learn)", SklearnGP(k, normalize_y=True, random_state=0)),
                           (f"sparse, m = {m}", GaussianProcessRegressor(k, normalize_y=True, n_centers=m,
                                                                         centers="kmeans", random_state=0))):
            t0 = time.perf_counter()
            est.fit(X[:n_train], y[:n_train])
            seconds = time.perf_counter() - t0
            mean, std = est.predict(X[n_train:], return_std=True)
            r2, covered, nlpd = scores(y[n_train:], mean, std)
            rows.append([name, label, f"{r2:.3f}", f"{covered:.3f}", f"{nlpd:.3f}", f"{seconds:.1f}",
                         str(getattr(est, "n_passes_", "-"))])
    print_table("Calibration on held-out rows",
                ["data", "model", "R2", "95% coverage", "NLPD", "fit s", "passes"], rows)


def scale(n_rows, m, exact_rows, subsample=0):
    X, y = make_friedman1(n_rows + 5000, noise=1.0, random_state=0)
    Xt, yt = X[n_rows:], y[n_rows:]
    rows = []
    t0 = time.perf_counter()
    exact = SklearnGP(kernel(10), normalize_y=True, random_state=0).fit(X[:exact_rows], y[:exact_rows])
    seconds = time.perf_counter() - t0
    r2, covered, nlpd = scores(yt, *exact.predict(Xt, return_std=True))
    rows.append([f"exact, {exact_rows:,} rows", f"{seconds:.1f}", "-", f"{r2:.3f}", f"{covered:.3f}", f"{nlpd:.3f}"])
    Xd, yd = da.from_array(X[:n_rows], chunks=(50_000, 10)), da.from_array(y[:n_rows], chunks=50_000)
    t0 = time.perf_counter()
    start, label, optimizer = kernel(10), f"sparse, {n_rows:,} rows, m = {m}", "fmin_l_bfgs_b"
    if subsample:
        sub = GaussianProcessRegressor(start, normalize_y=True, n_centers=m, random_state=0).fit(
            Xd[:subsample].rechunk((10_000, 10)), yd[:subsample].rechunk(10_000))
        start, optimizer = sub.kernel_, None
        label += f", kernel from {subsample:,} rows ({sub.n_passes_} passes, {time.perf_counter() - t0:.1f} s)"
    gp = GaussianProcessRegressor(start, normalize_y=True, n_centers=m, random_state=0, optimizer=optimizer).fit(Xd, yd)
    seconds = time.perf_counter() - t0
    mean, std = da.compute(*gp.predict(da.from_array(Xt, chunks=2500), return_std=True))
    r2, covered, nlpd = scores(yt, mean, std)
    rows.append([label, f"{seconds:.1f}", str(gp.n_passes_), f"{r2:.3f}",
                 f"{covered:.3f}", f"{nlpd:.3f}"])
    print_table("Scale: Friedman #1, ARD, threaded scheduler",
                ["fit", "seconds", "passes", "R2", "95% coverage", "NLPD"], rows)
    print(f"learned: {gp.kernel_}")


def out_of_core(rows, m, limit):
    import tempfile

    import zarr
    from distributed import Client, LocalCluster

    from dkapprox import io

    chunk, d = 250_000, 10
    with tempfile.TemporaryDirectory() as tmp:
        X = zarr.create_array(f"{tmp}/x.zarr", shape=(rows, d), chunks=(chunk, d), dtype="float32")
        y = zarr.create_array(f"{tmp}/y.zarr", shape=(rows,), chunks=(chunk,), dtype="float32")
        for i, start in enumerate(range(0, rows, chunk)):
            block, target = make_friedman1(min(chunk, rows - start), noise=1.0, random_state=i)
            X[start:start + block.shape[0]] = block.astype(np.float32)
            y[start:start + block.shape[0]] = target.astype(np.float32)
        Xt, yt = make_friedman1(5000, noise=1.0, random_state=10**6)
        with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=limit, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            started = time.perf_counter()
            gp = GaussianProcessRegressor(kernel(d), normalize_y=True, n_centers=m, random_state=0)
            gp.fit(io.open_array(f"{tmp}/x.zarr"), da.from_zarr(f"{tmp}/y.zarr"))
            seconds = time.perf_counter() - started
            spilled = client.run(lambda dask_worker: getattr(dask_worker.data, "spilled_total", None))
        r2, covered, nlpd = scores(yt, *gp.predict(Xt, return_std=True))
    print_table(f"out of core: Friedman #1 as a Zarr store of {rows:,} x {d} float32 ({rows * d * 4 / 2**30:.2f} GiB) "
                f"in blocks of {chunk:,}, LocalCluster(2x1) at {limit / 2**20:.0f} MiB a worker, m = {m}, ARD",
                ["s", "passes", "s a pass", "input persisted", "spilled (memory, disk) bytes a worker", "R2",
                 "95% coverage", "NLPD"],
                [[f"{seconds:.0f}", gp.n_passes_, f"{seconds / gp.n_passes_:.1f}", gp.input_persisted_,
                  "; ".join(str(v) for v in spilled.values()), f"{r2:.3f}", f"{covered:.3f}", f"{nlpd:.3f}"]])
    print(f"learned: {gp.kernel_}")


def grid(n_rows, m, n_candidates):
    X, y = make_friedman1(n_rows, noise=1.0, random_state=0)
    Xd, yd = da.from_array(X, chunks=(50_000, 10)), da.from_array(y, chunks=50_000)
    centers = X[np.random.default_rng(0).choice(n_rows, m, replace=False)]
    scales = np.geomspace(0.3, 10.0, n_candidates)
    t0 = time.perf_counter()
    gp = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), optimizer=None, normalize_y=True,
                                  centers=centers, length_scale_grid=scales).fit(Xd, yd)
    one = time.perf_counter() - t0
    t0 = time.perf_counter()
    alone = [GaussianProcessRegressor(C(1.0) * RBF(s, "fixed") + WhiteKernel(0.1), normalize_y=True,
                                      centers=centers).fit(Xd, yd) for s in scales]
    apart = time.perf_counter() - t0
    values = np.array([a.log_marginal_likelihood_value_ for a in alone])
    gap = np.max(np.abs(gp.grid_scores_ / values - 1))
    passes = sum(a.n_passes_ for a in alone)
    print_table(f"A grid of {n_candidates} length scales: Friedman #1, {n_rows:,} rows in blocks of 50,000, m = {m}, "
                "threaded scheduler", ["fit", "seconds", "passes", "best length scale", "largest bound difference"],
                [["length_scale_grid, one pass", f"{one:.1f}", gp.n_passes_, f"{gp.best_length_scale_:.3g}",
                  f"{gap:.1e} (relative)"],
                 [f"{n_candidates} fits, length scale fixed", f"{apart:.1f}", passes,
                  f"{scales[int(np.argmax(values))]:.3g}", ""]])
    print(f"ratio (separate / grid): {apart / one:.2f}")


def in_memory(n_rows, m):
    """NumPy input against the same rows as a dask array (threaded scheduler), and against NumPy's blocks one
    after another on BLAS's own threads (how in-memory passes ran before they were mapped on the cores)."""
    import dask

    from dkapprox import utils

    X, y = make_friedman1(n_rows, noise=1.0, random_state=0)
    cores = utils.available_cpus

    def run(X, y, optimizer, rows, order):
        kind = {"numpy": lambda a, chunks: a, "dask": lambda a, chunks: da.from_array(a, chunks=chunks)}[order]
        Xs, ys = kind(X[:rows], (50_000, 10)), kind(y[:rows], 50_000)
        t0 = time.perf_counter()
        gp = GaussianProcessRegressor(kernel(10), normalize_y=True, n_centers=m, random_state=0,
                                      optimizer=optimizer).fit(Xs, ys)
        fit = time.perf_counter() - t0
        t0 = time.perf_counter()
        dask.compute(gp.predict(kind(X[:rows], (50_000, 10)), return_std=True))
        return fit, time.perf_counter() - t0, gp.n_passes_

    table = []
    for label, optimizer, rows in ((f"{n_rows:,} rows, one evaluation", None, n_rows),
                                   (f"{n_rows // 4:,} rows, L-BFGS-B", "fmin_l_bfgs_b", n_rows // 4)):
        got = {"dask": run(X, y, optimizer, rows, "dask"), "numpy": run(X, y, optimizer, rows, "numpy")}
        utils.available_cpus = lambda: 1
        try:
            with dask.config.set({"dkapprox.share-blas-threads": False}):
                got["before"] = run(X, y, optimizer, rows, "numpy")
        finally:
            utils.available_cpus = cores
        for what, i in (("fit", 0), ("predict, with std", 1)):
            table.append([f"{label}: {what}", f"{got['dask'][i]:.2f}", f"{got['numpy'][i]:.2f}",
                          f"{got['before'][i]:.2f}", f"{got['dask'][i] / got['numpy'][i]:.2f}x",
                          f"{got['before'][i] / got['numpy'][i]:.2f}x", got["numpy"][2]])
    print_table(f"NumPy input: Friedman #1, ARD, m = {m}, {cores()} cores",
                ["", "dask s", "NumPy s", "before s", "NumPy's speed / dask's", "speed-up", "passes"], table)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", required=True,
                        choices=["parity", "calibration", "scale", "out-of-core", "grid", "numpy"])
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--ooc-rows", type=int, default=10_000_000)
    parser.add_argument("--ooc-centers", type=int, default=64)
    parser.add_argument("--ooc-worker-bytes", type=int, default=2**30)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--centers", type=int, default=256)
    parser.add_argument("--exact-rows", type=int, default=1000)
    parser.add_argument("--subsample", type=int, default=0)
    args = parser.parse_args()
    if args.part == "parity":
        parity()
    elif args.part == "calibration":
        calibration()
    elif args.part == "scale":
        scale(args.rows, args.centers, args.exact_rows, args.subsample)
    elif args.part == "grid":
        grid(args.rows, args.centers, args.candidates)
    elif args.part == "numpy":
        in_memory(args.rows, args.centers)
    else:
        out_of_core(args.ooc_rows, args.ooc_centers, args.ooc_worker_bytes)


if __name__ == "__main__":
    main()
