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
R² and coverage on the same 5,000 held-out rows.

    python benchmarks/bench_gaussian_process.py --part parity
    python benchmarks/bench_gaussian_process.py --part calibration
    python benchmarks/bench_gaussian_process.py --part scale [--rows 200000] [--centers 256] [--exact-rows 1000]
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


def scale(n_rows, m, exact_rows):
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
    gp = GaussianProcessRegressor(kernel(10), normalize_y=True, n_centers=m, random_state=0).fit(Xd, yd)
    seconds = time.perf_counter() - t0
    mean, std = da.compute(*gp.predict(da.from_array(Xt, chunks=2500), return_std=True))
    r2, covered, nlpd = scores(yt, mean, std)
    rows.append([f"sparse, {n_rows:,} rows, m = {m}", f"{seconds:.1f}", str(gp.n_passes_), f"{r2:.3f}",
                 f"{covered:.3f}", f"{nlpd:.3f}"])
    print_table("Scale: Friedman #1, ARD, threaded scheduler",
                ["fit", "seconds", "passes", "R2", "95% coverage", "NLPD"], rows)
    print(f"learned: {gp.kernel_}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["parity", "calibration", "scale"], required=True)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--centers", type=int, default=256)
    parser.add_argument("--exact-rows", type=int, default=1000)
    args = parser.parse_args()
    if args.part == "parity":
        parity()
    elif args.part == "calibration":
        calibration()
    else:
        scale(args.rows, args.centers, args.exact_rows)


if __name__ == "__main__":
    main()
