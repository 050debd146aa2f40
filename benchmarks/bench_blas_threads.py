"""Driver-side linear algebra with NumPy's default BLAS threads and inside ``threadpool_limits(1)``.

The fits solve small dense systems on the driver right after NumPy work: a
ridge fit's Cholesky, RidgeCV's solves per fold (run in parallel threads),
the spectral norms of ``kernel_approximation_error``. NumPy and SciPy each
load their own OpenBLAS, and each spins a thread per core: on a small machine
the two pools fight, and a solve that takes a millisecond can take hundreds.
dkapprox runs these solves inside ``threadpool_limits(1)``; this benchmark
shows why, on the machine it runs on. Columns: the task, seconds with the
default BLAS threads, seconds with one BLAS thread, and their ratio.

Measured on a busy 2-core host when the limits were introduced: a 200-feature
ridge Cholesky 400 ms against 1 ms; the 50 solves of a 1024-feature RidgeCV
grid 14 s against 0.9 s; the two eigvalsh of a 1,000-row kernel sample 1.2 s
against 0.35 s. And on one BLAS thread, RidgeCV's tridiagonal path for ten
alphas at d = 1024: 0.11 + 0.03 s against 0.22 s for ten Cholesky solves.

    python benchmarks/bench_blas_threads.py             # d = 200 and 1024, a 1,000-row kernel sample
    python benchmarks/bench_blas_threads.py --quick     # smaller systems, one repeat
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.linalg
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(__file__))
from _common import median_seconds, print_table  # noqa: E402

from dkapprox.learning._solve import solve_ridge, solve_ridge_path  # noqa: E402


def spd(d, seed=0):
    """A well-conditioned symmetric positive definite d x d matrix, made with a NumPy GEMM."""
    Z = np.random.default_rng(seed).normal(size=(4 * d, d))
    return Z.T @ Z / (4 * d) + np.eye(d)


def tasks(d_small, d_large, n_kernel):
    A_small, B_small = spd(d_small), np.ones((d_small, 1))
    A_large, B_large = spd(d_large), np.ones((d_large, 1))
    alphas = np.logspace(-3, 3, 10)
    K = spd(n_kernel, seed=1)

    def ridge_cholesky():
        solve_ridge(A_small, B_small, 1.0)

    def ridge_cv_grid():  # five folds in parallel threads, each a path of ten alphas
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            list(pool.map(lambda _: solve_ridge_path(A_large, B_large, alphas), range(5)))

    def kernel_error_norms():
        scipy.linalg.eigvalsh(K)
        scipy.linalg.eigvalsh(K - np.eye(n_kernel))

    def ten_choleskys():
        for alpha in alphas:
            solve_ridge(A_large, B_large, alpha)

    def one_path():
        solve_ridge_path(A_large, B_large, alphas)

    return {
        f"ridge Cholesky, d = {d_small}": ridge_cholesky,
        f"RidgeCV grid (5 folds x 10 alphas), d = {d_large}": ridge_cv_grid,
        f"kernel error spectral norms, {n_kernel} rows": kernel_error_norms,
        f"10 Cholesky solves, d = {d_large}": ten_choleskys,
        f"tridiagonal path of 10 alphas, d = {d_large}": one_path,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = (100, 256, 300) if args.quick else (200, 1024, 1000)
    repeats = 1 if args.quick else args.repeats
    rows = []
    for name, fn in tasks(*sizes).items():
        default = median_seconds(fn, repeats)
        with threadpool_limits(1):
            single = median_seconds(fn, repeats)
        rows.append([name, default, single, default / single])
    print_table(f"Driver-side solves on {os.cpu_count()} CPUs (seconds)",
                ["task", "default BLAS threads", "one BLAS thread", "ratio"], rows)


if __name__ == "__main__":
    main()
