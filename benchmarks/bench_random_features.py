"""Random features benchmark: kernel approximation error by sampling, and structured vs dense speed.

Table 1, error: mean squared error of ``z(x) . z(y)`` against the exact kernel
over all pairs of a held-out sample (the estimators are fitted on the other
rows), averaged over seeds; for the digits set (scikit-learn, standardized)
and a synthetic Gaussian set; every kernel (parameters by the median
heuristic), cos vs sincos, n_components in {256, 1024, 4096}. Columns: the
iid error, then orthogonal / structured / qmc as ratios to iid at the same
n_components (target on rbf: orthogonal and structured <= 0.8), and random
binning (n_grids = n_components) as a ratio for the Laplacian kernel.

Table 2, speed: transform throughput of one float32 block on one core (BLAS
limited to one thread, as in a dask task), structured (fast Walsh-Hadamard)
vs dense (GEMM), projection alone and with the cos features, at n_features in
{64, 1024, 4096}. Target: structured faster at n_features >= 1024 and
n_components >= 4096 (ratio dense / structured > 1).

    python benchmarks/bench_random_features.py            # full size
    python benchmarks/bench_random_features.py --quick    # small sizes, about a minute
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(__file__))
from _common import median_seconds, print_table  # noqa: E402

from dkapprox.random_features import RandomBinningFeatures, RandomFourierFeatures  # noqa: E402
from dkapprox.random_features.fourier import random_fourier_features  # noqa: E402
from dkapprox.random_features.hadamard import structured_project  # noqa: E402
from dkapprox.random_features.spectra import Spectrum  # noqa: E402

SAMPLINGS = ("iid", "orthogonal", "structured", "qmc")


def datasets(n_holdout, rng):
    digits = StandardScaler().fit_transform(load_digits().data)
    digits = digits[:, digits.std(axis=0) > 0]  # constant pixels carry nothing
    gaussian = rng.normal(size=(2000, 32))
    out = {}
    for name, X in (("digits", digits), ("gaussian", gaussian)):
        perm = rng.permutation(len(X))
        out[name] = (X[perm[n_holdout:]], X[perm[:n_holdout]])
    return out


def kernel_params(X):
    """Median heuristic: every kernel's typical value on the data is about exp(-1)."""
    diff = X[:, None, :] - X[None, :, :]
    iu = np.triu_indices(len(X), 1)
    sq = (diff ** 2).sum(-1)[iu]
    l1 = np.abs(diff).sum(-1)[iu]
    l2 = np.sqrt(sq)
    return {
        "rbf": dict(kernel="rbf", gamma=1.0 / np.median(sq)),
        "laplacian": dict(kernel="laplacian", gamma=1.0 / np.median(l1)),
        "cauchy": dict(kernel="cauchy", gamma=1.0 / np.median(sq)),
        "matern0.5": dict(kernel="matern", nu=0.5, length_scale=np.median(l2)),
        "matern1.5": dict(kernel="matern", nu=1.5, length_scale=np.median(l2)),
        "matern2.5": dict(kernel="matern", nu=2.5, length_scale=np.median(l2)),
    }


def pair_mse(Z, K):
    G = Z @ Z.T
    if hasattr(G, "toarray"):
        G = G.toarray()
    iu = np.triu_indices(len(K), 1)
    return float(((G[iu] - K[iu]) ** 2).mean())


def error_table(sizes, n_seeds, n_holdout, rng):
    rows = []
    targets = []
    for data_name, (train, test) in datasets(n_holdout, rng).items():
        for kernel_name, params in kernel_params(test).items():
            spectrum = Spectrum(params["kernel"], params.get("gamma", 1.0), params.get("nu", 1.5),
                                params.get("length_scale", 1.0))
            K = spectrum.kernel_matrix(test)
            for features in ("cos", "sincos"):
                for n in sizes:
                    mse = {}
                    for sampling in SAMPLINGS:
                        mse[sampling] = np.mean([
                            pair_mse(RandomFourierFeatures(n, features=features, sampling=sampling,
                                                           random_state=seed, **params).fit(train).transform(test), K)
                            for seed in range(n_seeds)])
                    binning = float("nan")
                    if kernel_name == "laplacian":
                        binning = np.mean([
                            pair_mse(RandomBinningFeatures(2**24, gamma=params["gamma"], n_grids=n, random_state=seed)
                                     .fit(train).transform(test), K) for seed in range(n_seeds)]) / mse["iid"]
                    ratios = [mse[s] / mse["iid"] for s in SAMPLINGS[1:]]
                    rows.append([data_name, kernel_name, features, n, f"{mse['iid']:.2e}", *ratios, binning])
                    if kernel_name == "rbf":
                        targets.append(ratios[:2])
    print_table("Kernel approximation error: iid MSE over held-out pairs, others as ratio to iid (lower is better)",
                ["data", "kernel", "features", "n_components", "iid MSE", "orthogonal/iid", "structured/iid",
                 "qmc/iid", "binning/iid"], rows)
    worst = np.max(targets, axis=0)
    print(f"rbf target (<= 0.8), {n_seeds} seed(s), {n_holdout} held-out rows: worst orthogonal/iid "
          f"{worst[0]:.3f}, worst structured/iid {worst[1]:.3f} -> {'met' if worst.max() <= 0.8 else 'NOT met'}")


def speed_table(n_rows, feature_sizes, component_sizes, repeats):
    rows = []
    rng = np.random.default_rng(0)
    with threadpool_limits(1):
        for d in feature_sizes:
            X = rng.normal(size=(n_rows, d)).astype(np.float32)
            for D in component_sizes:
                times = {}
                for sampling in ("iid", "structured"):
                    state = RandomFourierFeatures(D, sampling=sampling, gamma=1.0 / d, random_state=0).fit(X)._state(
                        np.float32)
                    if sampling == "iid":
                        project = (lambda s: (lambda: X @ s.weights))(state)
                    else:
                        project = (lambda s: (lambda: structured_project(X, s.weights)))(state)
                    times[sampling, "projection"] = median_seconds(project, repeats)
                    times[sampling, "features"] = median_seconds(lambda: random_fourier_features(X, state), repeats)
                for part in ("projection", "features"):
                    dense, fast = times["iid", part], times["structured", part]
                    rows.append([d, D, part, n_rows / dense, n_rows / fast, dense / fast])
    print_table(f"Transform throughput, float32, one core, {n_rows} rows per block "
                "(rows/s; ratio > 1: structured faster)",
                ["n_features", "n_components", "part", "dense GEMM rows/s", "structured rows/s",
                 "dense/structured"], rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, to check that it runs")
    args = parser.parse_args()
    # the table shows what that warning says (structured sampling of laplacian and cauchy)
    warnings.filterwarnings("ignore", message="sampling='structured' shares")
    rng = np.random.default_rng(0)
    if args.quick:
        error_table(sizes=(256, 1024), n_seeds=1, n_holdout=80, rng=rng)
        speed_table(n_rows=512, feature_sizes=(64, 1024, 4096), component_sizes=(4096,), repeats=3)
    else:
        error_table(sizes=(256, 1024, 4096), n_seeds=5, n_holdout=300, rng=rng)
        speed_table(n_rows=4096, feature_sizes=(64, 1024, 4096), component_sizes=(1024, 4096, 16384), repeats=5)


if __name__ == "__main__":
    main()
