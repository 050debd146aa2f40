"""Nystroem benchmark: kernel approximation error per landmark method, fit cost, transform throughput.

1. Error: relative Frobenius error ||K - Z Z^T|| / ||K|| of the rbf kernel on
   held-out rows, for n_components in {64, 256, 1024} and landmarks uniform /
   kmeans / leverage (mean over seeds), on
   - digits (scikit-learn's, standardized; gamma = 1/64; 1397 rows to fit,
     400 held out; n_components=1024 is then 73% of the rows),
   - blobs of uneven density: 30 Gaussian clusters with Zipf sizes (1/k^1.5)
     whose widths shrink as they grow (0.1 to 2.0), 8 features, gamma = 0.1,
   - blobs of random widths (widths independent of sizes), the same otherwise:
     where density differs less, and the methods differ less.
2. Fit: seconds and passes over a (2_000_000, 32) float32 dask array in
   100_000-row chunks (threaded scheduler, 2 threads, one BLAS thread each).
   Passes are counted for real: the blocks come from a function that counts
   its calls; "reads per block" is min-max over the blocks.
3. Transform: Nystroem(n_components=1024) on the same array, every output
   block produced in full and one column of each kept (8 GB of features are
   not gathered). Columns as in bench_foundation: seconds (median of 3),
   rows/s, ratio to the 2-core limit (our block function run serially on the
   NumPy blocks with one BLAS thread, times 2), ratio to scikit-learn's
   Nystroem in memory (in 250_000-row batches: its whole float32 output and
   kernel matrix would be 16 GB).

4. Quality against the optimum (issue 31): on the fitted rows themselves,
   ||K - Z Z^T|| / ||K|| as a ratio to the best rank-m error (the
   eigendecomposition of K truncated to m), in the Frobenius and the trace
   norm, mean of 3 seeds, for every landmark method, plain (l = m) and rank
   restricted (``n_landmarks`` l = 2m, 4m, and 8m where l <= n), on three real
   data sets scikit-learn ships, standardized: digits (1797 x 64; m = 64, 256),
   breast cancer (569 x 30; m = 16, 64), diabetes (442 x 10; m = 16, 64); rbf
   at gamma = 1/(n_features * X.var()) and 4x that. "kmeans, n_iter=1" is
   'kmeans' with one Lloyd step: with l > m, 3 passes, the issue's bound.
5. Passes over a dask input at m = 1024 for each method, plain and
   restricted: ``landmark_passes_`` and the block reads counted.
6. What rank restriction costs: fit seconds and transform microseconds per row
   of restricted Nystroem(m, l) against plain Nystroem(m) and Nystroem(l).
7. RPCholesky's and recursive leverage's subsample: the error of rank-restricted
   landmarks from a uniform subsample of s rows, as a ratio to the same method on
   all the rows (the choice of ``landmark_params={'sample_size': ...}``'s default).
8. Learning at the same output width m (section "learning"): on the learning
   study's synthetic data (examples/learning_study.py ``synthetic()``; 200,000
   training rows in 50,000-row chunks, ``--learning-rows 1000000`` for 10^6),
   Nystroem(m) + RidgeClassifier(alpha=1e-2) on LocalCluster(2 workers x 1
   thread), m = 256 and 1024: test accuracy and fit / predict seconds of the
   best options (kmeans with n_iter=1 and rpcholesky, both with l = 4m) against
   uniform landmarks, side by side.

9. Where leverage landmarks beat uniform ones (section "leverage"): the
   Frobenius error on the fitted rows as a ratio to the optimum for uniform,
   'leverage' and sampling by the exact ridge leverage scores (from the kernel's
   eigendecomposition, at the same ridge: the most such scores can give), on
   digits (two gammas) and 3,000 rows of blobs of uneven density; and on
   40,000 such rows, the relative error on 3,000 of them, plain m = 64 over 10
   seeds.

The scale of the landmark methods (a 10^7 x 32 float32 Zarr input) is
benchmarks/bench_landmarks_scale.py.

    python benchmarks/bench_nystroem.py            # full size
    python benchmarks/bench_nystroem.py --quick    # 200_000 rows, fewer sizes and seeds
    python benchmarks/bench_nystroem.py --sections quality,passes,cost,sample,learning,leverage   # issue 31
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import Counter

import dask
import dask.array as da
import numpy as np
from distributed import Client, LocalCluster, wait
from scipy import linalg
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, make_blobs
from sklearn.kernel_approximation import Nystroem as SkNystroem
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from _common import consume, median_seconds, print_table, threaded_seconds, two_core_limit_seconds  # noqa: E402
from learning_study import ALPHA, synthetic  # noqa: E402

import dkapprox  # noqa: E402
from dkapprox.linear_model import RidgeClassifier  # noqa: E402
from dkapprox.nystroem import Nystroem  # noqa: E402

METHODS = ["uniform", "kmeans", "leverage"]  # sections 1 and 2 (today's table in docs/choosing.rst)
CALLS = Counter()
LOCK = threading.Lock()


# -- 1. error ------------------------------------------------------------------
def blobs(n, *, uneven, seed=0):
    rng = np.random.default_rng(seed)
    sizes = 1.0 / np.arange(1, 31) ** 1.5
    sizes = np.maximum(1, np.round(n * sizes / sizes.sum())).astype(int)
    widths = np.geomspace(0.1, 2.0, 30) if uneven else rng.uniform(0.1, 2.0, 30)
    X, _ = make_blobs(n_samples=sizes, n_features=8, cluster_std=widths, center_box=(-10, 10), random_state=seed)
    return X[rng.permutation(len(X))]


def datasets(quick):
    digits = StandardScaler().fit_transform(load_digits().data)
    n = 6_000 if quick else 22_000
    out = {"digits, standardized": (digits[400:], digits[:400], 1 / 64)}
    for label, uneven in (("blobs, uneven density", True), ("blobs, random widths", False)):
        X = blobs(n, uneven=uneven)
        out[label] = (X[2000:], X[:2000], 0.1)
    return out


def kernel_error(est, X_fit, X_test, gamma):
    Z = est.fit(X_fit).transform(X_test)
    K = rbf_kernel(X_test, gamma=gamma)
    return float(np.linalg.norm(K - Z @ Z.T) / np.linalg.norm(K))


def error_table(sizes, seeds):
    rows = []
    ratios = {}
    for label, (X_fit, X_test, gamma) in datasets(len(seeds) == 1).items():
        for m in sizes:
            errors = {}
            for method in METHODS:
                values = [kernel_error(Nystroem(gamma=gamma, n_components=m, landmarks=method, random_state=s),
                                       X_fit, X_test, gamma) for s in seeds]
                errors[method] = (float(np.mean(values)), float(np.min(values)), float(np.max(values)))
            base = errors["uniform"][0]
            for method in METHODS:
                mean, lo, hi = errors[method]
                rows.append([label, m, method, f"{mean:.4f}", f"{lo:.4f}-{hi:.4f}", mean / base])
            ratios[(label, m)] = min(errors["kmeans"][0], errors["leverage"][0]) / base
    return rows, ratios


# -- 4. quality against the optimal rank-m approximation ------------------------------
#: (label, landmarks, landmark_params): every method, and k-means with one Lloyd step (3 passes restricted)
VARIANTS = [("uniform", "uniform", None), ("kmeans", "kmeans", None),
            ("kmeans, n_iter=1", "kmeans", {"n_iter": 1}), ("leverage", "leverage", None),
            ("rpcholesky", "rpcholesky", None)]
FACTORS = [1, 2, 4, 8]  # l = factor * m; 1 is plain Nystroem
#: the passes of each variant on dask input, restricted (l > m): the selection's, plus one
RESTRICTED_PASSES = {"uniform": 2, "kmeans": 6, "kmeans, n_iter=1": 3, "leverage": 3, "rpcholesky": 2}


def real_datasets():
    """Three data sets scikit-learn ships, standardized, with the values of m to try on each."""
    return {"digits": (load_digits().data, (64, 256)),
            "breast cancer": (load_breast_cancer().data, (16, 64)),
            "diabetes": (load_diabetes().data, (16, 64))}


def optimum(K, m):
    """The best rank-m errors of the PSD matrix K: Frobenius and trace norm."""
    with threadpool_limits(1):  # two BLAS threads on a busy 2-core machine are slower than one
        w = np.clip(linalg.eigvalsh(K), 0, None)[::-1]
    return float(np.sqrt(np.sum(w[m:] ** 2))), float(np.sum(w[m:]))


def quality_table(seeds):
    rows, best = [], []
    for name, (raw, sizes) in real_datasets().items():
        X = StandardScaler().fit_transform(raw)
        for scale in (1, 4):
            gamma = scale / (X.shape[1] * X.var())
            K = rbf_kernel(X, gamma=gamma)
            for m in sizes:
                frobenius_opt, trace_opt = optimum(K, m)
                results = {}
                for label, method, params in VARIANTS:
                    cells = []
                    for factor in FACTORS:
                        if factor * m > len(X):
                            cells.append("-")
                            continue
                        ratios = []
                        for s in seeds:
                            est = Nystroem(gamma=gamma, n_components=m, n_landmarks=factor * m, landmarks=method,
                                           landmark_params=params, random_state=s)
                            Z = est.fit(X).transform(X)
                            R = K - Z @ Z.T
                            ratios.append((np.linalg.norm(R) / frobenius_opt, np.trace(R) / trace_opt))
                        frobenius, trace = np.mean(ratios, axis=0)
                        results[(label, factor)] = frobenius
                        cells.append(f"{frobenius:.3f} / {trace:.3f}")
                    rows.append([name, f"{scale}/(d var)", m, label, *cells])
                # the grid: l <= 4m (l = 8m is shown above, not chosen from here)
                grid = {k: v for k, v in results.items() if k[1] <= 4}
                (label, factor), value = min(grid.items(), key=lambda kv: kv[1])
                within3 = {k: v for k, v in grid.items()
                           if (RESTRICTED_PASSES[k[0]] if k[1] > 1 else PASSES_PLAIN[k[0]]) <= 3}
                (label3, factor3), value3 = min(within3.items(), key=lambda kv: kv[1])
                best.append([name, f"{scale}/(d var)", m, results[("uniform", 1)], results[("rpcholesky", 4)],
                             f"{label}, l={factor}m", value, f"{label3}, l={factor3}m", value3,
                             "yes" if value3 <= 1.2 else "NO"])
    return rows, best


PASSES_PLAIN = {"uniform": 1, "kmeans": 5, "kmeans, n_iter=1": 2, "leverage": 2, "rpcholesky": 1}


# -- 5. passes at m = 1024 ----------------------------------------------------------
def passes_table(n_rows, chunk, m=1024):
    X = np.random.default_rng(1).random((n_rows, 8))
    base = da.from_array(X, chunks=(chunk, -1))
    lazy = base.map_blocks(counted_block, dtype=X.dtype, meta=np.empty((0, 0), X.dtype))
    n_blocks = lazy.numblocks[0]
    rows = []
    for label, method, params in VARIANTS:
        for factor in (1, 2, 4):
            CALLS.clear()
            start = time.perf_counter()
            with dask.config.set(scheduler="threads", num_workers=2):
                est = Nystroem(n_components=m, n_landmarks=factor * m, landmarks=method, landmark_params=params,
                               random_state=0).fit(lazy)
            seconds = time.perf_counter() - start
            reads = [CALLS[i] for i in range(n_blocks)]
            rows.append([label, f"{factor * m}", est.landmark_passes_, f"{min(reads)}-{max(reads)}",
                         f"{sum(reads)}/{n_blocks}", seconds])
    return rows


# -- 6. what rank restriction costs ---------------------------------------------------
def cost_table(n_rows, chunk, m, factor, repeats):
    X = np.random.default_rng(0).random((n_rows, 32), dtype=np.float32)
    Xd = da.from_array(X, chunks=(chunk, -1))
    wide = factor * m
    rows = []
    for method in ("uniform", "rpcholesky"):
        for label, n_components, n_landmarks in ((f"plain Nystroem({m})", m, None),
                                                 (f"plain Nystroem({wide})", wide, None),
                                                 (f"restricted Nystroem({m}, l={wide})", m, wide)):
            fitted = []

            def fit():
                with threadpool_limits(1, user_api="blas"), dask.config.set(scheduler="threads", num_workers=2):
                    fitted[:] = [Nystroem(n_components=n_components, n_landmarks=n_landmarks, landmarks=method,
                                          random_state=0).fit(Xd)]

            fit_s = median_seconds(fit, repeats)
            est = fitted[0]

            def transform():
                with threadpool_limits(1, user_api="blas"):
                    consume(est.transform(Xd), scheduler="threads", num_workers=2)

            transform_s = median_seconds(transform, repeats)
            rows.append([method, label, est._n_features_out, fit_s, est.landmark_passes_, transform_s,
                         transform_s / n_rows * 1e6])
    return rows


# -- 7. RPCholesky's subsample size ---------------------------------------------------
def sample_table(n_rows, sizes, seeds, n_eval=3000):
    rows = []
    for label, uneven in (("blobs, uneven density", True), ("blobs, random widths", False)):
        X = blobs(n_rows, uneven=uneven)
        E = X[np.random.default_rng(9).choice(len(X), n_eval, replace=False)]  # rows to measure the error on
        K = rbf_kernel(E, gamma=0.1)
        for method in ("rpcholesky", "leverage"):
            for m in sizes:
                wide = 4 * m
                errors = {}
                for sample in sorted({s for s in (2 * wide, 4 * wide, 8 * wide, 16 * wide) if s < n_rows} | {n_rows}):
                    values = []
                    for s in seeds:
                        est = Nystroem(gamma=0.1, n_components=m, n_landmarks=wide, landmarks=method,
                                       landmark_params={"sample_size": sample}, random_state=s).fit(X)
                        Z = est.transform(E)
                        values.append(np.linalg.norm(K - Z @ Z.T) / np.linalg.norm(K))
                    errors[sample] = float(np.mean(values))
                for sample, error in errors.items():
                    rows.append([label, method, m, wide, sample,
                                 f"{sample / wide:.0f} l" if sample < n_rows else "all rows",
                                 f"{error:.5f}", error / errors[n_rows]])
    return rows


# -- 8. learning at the same output width ------------------------------------------------
#: (label, landmarks, landmark_params, l / m): uniform against the best options within 3 passes
LEARNING = [("uniform", "uniform", None, 1), ("kmeans, n_iter=1, l=4m", "kmeans", {"n_iter": 1}, 4),
            ("rpcholesky, l=4m", "rpcholesky", None, 4)]


def learning_table(n_train, chunk, sizes):
    """Accuracy and seconds of Nystroem(m) + RidgeClassifier on the learning study's synthetic data."""
    data = synthetic(n_train, max(n_train // 10, 1_000), chunk)
    rows = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        # on the workers once, outside the timings (as the learning study's data would be)
        X_train, y_train, X_test = client.persist([da.from_array(data["X_train"], chunks=(chunk, -1)),
                                                   da.from_array(data["y_train"], chunks=chunk),
                                                   da.from_array(data["X_test"], chunks=(chunk, -1))])
        wait([X_train, y_train, X_test])
        for m in sizes:
            base = None
            for label, method, params, factor in LEARNING:
                model = make_pipeline(
                    Nystroem(gamma=data["gamma"], n_components=m, n_landmarks=factor * m if factor > 1 else None,
                             landmarks=method, landmark_params=params, random_state=0),
                    RidgeClassifier(alpha=ALPHA))
                start = time.perf_counter()
                model.fit(X_train, y_train)
                fit_s = time.perf_counter() - start
                start = time.perf_counter()
                predicted = model.predict(X_test).compute()
                predict_s = time.perf_counter() - start
                accuracy = float(np.mean(predicted == data["y_test"]))
                base = base or (accuracy, fit_s, predict_s)
                rows.append([m, label, factor * m, model[0].landmark_passes_, f"{accuracy:.4f}",
                             f"{accuracy - base[0]:+.4f}", fit_s, fit_s / base[1], predict_s, predict_s / base[2]])
    return rows


# -- 9. where leverage landmarks pay ------------------------------------------------------
def small_nystroem(K, indices, m):
    """Features of the Nystroem approximation of K from the landmark columns ``indices``, best rank m kept."""
    w, Q = linalg.eigh(K[np.ix_(indices, indices)])
    keep = w > len(indices) * np.finfo(np.float64).eps * w.max()
    Z = K[:, indices] @ (Q[:, keep] / np.sqrt(w[keep]))
    if Z.shape[1] > m:
        Z = Z @ linalg.eigh(Z.T @ Z)[1][:, ::-1][:, :m]
    return Z


def leverage_table(seeds):
    X = StandardScaler().fit_transform(load_digits().data)
    cases = [("digits", X, 1 / (X.shape[1] * X.var()), "1/(d var)"),
             ("digits", X, 4 / (X.shape[1] * X.var()), "4/(d var)"),
             ("blobs, uneven density, 3,000", blobs(3000, uneven=True), 0.1, "0.1")]
    rows = []
    for name, data, gamma, label in cases:
        K = rbf_kernel(data, gamma=gamma)
        with threadpool_limits(1):
            w, Q = linalg.eigh(K)
        w, Q = np.clip(w[::-1], 0, None), Q[:, ::-1]
        for m in (64, 256):
            optimum = np.sqrt(np.sum(w[m:] ** 2))
            for wide in (m, 4 * m):
                ratios = {}
                for method in ("uniform", "leverage"):
                    ratios[method] = np.mean([np.linalg.norm(K - Z @ Z.T) / optimum for Z in (
                        Nystroem(gamma=gamma, n_components=m, n_landmarks=wide, landmarks=method, random_state=s)
                        .fit(data).transform(data) for s in seeds)])
                rank = max(1, wide // 16)  # 'leverage''s default: the same ridge
                ridge = w[rank:].sum() / rank
                exact = np.einsum("ij,j,ij->i", Q, w / (w + ridge), Q)
                errors = []
                for s in seeds:  # Efraimidis-Spirakis keys, as 'leverage' draws
                    keys = np.log(np.random.default_rng(s).random(len(data))) / exact
                    Z = small_nystroem(K, np.argsort(-keys)[:wide], m)
                    errors.append(np.linalg.norm(K - Z @ Z.T) / optimum)
                rows.append([name, label, m, wide, ratios["uniform"], ratios["leverage"],
                             ratios["leverage"] / ratios["uniform"], float(np.mean(errors)) / ratios["uniform"]])
    return rows


def leverage_held_out_table(n_rows=40_000, n_eval=3_000):
    X = blobs(n_rows, uneven=True)
    E = X[np.random.default_rng(9).choice(len(X), n_eval, replace=False)]
    K = rbf_kernel(E, gamma=0.1)
    rows = []
    for m, wide, seeds in ((64, 64, range(10)), (256, 256, range(3)), (256, 1024, range(3))):
        errors = {method: [np.linalg.norm(K - Z @ Z.T) / np.linalg.norm(K) for Z in (
            Nystroem(gamma=0.1, n_components=m, n_landmarks=wide, landmarks=method, random_state=s)
            .fit(X).transform(E) for s in seeds)] for method in ("uniform", "leverage")}
        for method, values in errors.items():
            rows.append([m, wide, len(seeds), method, f"{np.mean(values):.5f}",
                         f"{np.min(values):.4f}-{np.max(values):.4f}",
                         float(np.mean(values) / np.mean(errors["uniform"]))])
    return rows


# -- 2. fit ----------------------------------------------------------------------
def counted_block(block, block_info=None):
    with LOCK:
        CALLS[block_info[0]["chunk-location"][0]] += 1
    return block


def fit_table(X, chunk, sizes, repeats):
    base = da.from_array(X, chunks=(chunk, -1))
    lazy = base.map_blocks(counted_block, dtype=X.dtype, meta=np.empty((0, 0), X.dtype))
    n_blocks = lazy.numblocks[0]
    rows = []
    for m in sizes:
        for method in METHODS:
            fitted = []

            def fit():
                CALLS.clear()
                with threadpool_limits(1, user_api="blas"), dask.config.set(scheduler="threads", num_workers=2):
                    fitted[:] = [Nystroem(n_components=m, landmarks=method, random_state=0).fit(lazy)]

            seconds = median_seconds(fit, repeats)
            reads = [CALLS[i] for i in range(n_blocks)]  # of the last run
            est = fitted[0]
            rows.append([f"dkapprox landmarks={method!r}", m, seconds, est.landmark_passes_,
                         f"{min(reads)}-{max(reads)}", f"{sum(reads)}/{n_blocks}"])
        start = time.perf_counter()
        SkNystroem(n_components=m, random_state=0).fit(X)
        rows.append(["scikit-learn, in memory", m, time.perf_counter() - start, "-", "-", "-"])
    return rows


# -- 3. transform -----------------------------------------------------------------
def transform_table(X, chunk, n_components, repeats):
    ours = Nystroem(n_components=n_components, random_state=0).fit(X)
    theirs = SkNystroem(n_components=n_components, random_state=0).fit(X)
    blocks = [X[i:i + chunk] for i in range(0, len(X), chunk)]
    timings = {"2-core limit (serial x 2)": two_core_limit_seconds(ours, blocks, repeats)}

    def sklearn_in_memory():
        for i in range(0, len(X), 250_000):
            theirs.transform(X[i:i + 250_000])

    timings["scikit-learn in memory"] = median_seconds(sklearn_in_memory, repeats)
    Xd = da.from_array(X, chunks=(chunk, -1))
    timings.update(threaded_seconds(ours, Xd, repeats))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      memory_limit="8GiB") as cluster, Client(cluster) as client:
        # made on the workers (other values, same distribution): a 256 MB array embedded in the
        # graph is what dask warns against
        on_workers = client.persist(da.random.default_rng(0).random(X.shape, chunks=(chunk, -1), dtype=X.dtype))
        wait(on_workers)
        consume(ours.transform(on_workers[:chunk]))  # workers import scikit-learn once, outside the timings
        timings["dkapprox, LocalCluster(2x1)"] = median_seconds(lambda: consume(ours.transform(on_workers)), repeats)
        meta = np.empty((0, 0), X.dtype)
        timings["scikit-learn via map_blocks, LocalCluster(2x1)"] = median_seconds(
            lambda: consume(on_workers.map_blocks(theirs.transform, chunks=(on_workers.chunks[0], (n_components,)),
                                                  meta=meta)), repeats)
    limit_s, sk_s = timings["2-core limit (serial x 2)"], timings["scikit-learn in memory"]
    return [[name, t, len(X) / t, limit_s / t, sk_s / t] for name, t in timings.items()], timings


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="200_000 rows in 20_000-row chunks, n_components 64 and 256, one seed")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--chunk", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sections", default="error,fit,transform,quality,passes,cost,sample,learning,leverage",
                        help="comma-separated: error (1), fit (2), transform (3), quality (4), passes (5), "
                             "cost (6), sample (7), learning (8), leverage (9)")
    parser.add_argument("--learning-rows", type=int, default=200_000,
                        help="training rows of section 8 (the learning study's: 1000000)")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    sizes, seeds, fit_sizes, n_transform = [64, 256, 1024], [0, 1, 2], [256, 1024], 1024
    if args.quick:
        args.rows, args.chunk, args.repeats = 200_000, 20_000, 1
        sizes, seeds, fit_sizes, n_transform = [64, 256], [0], [256], 256
    print(f"dkapprox {dkapprox.__version__}, dask {dask.__version__}, {os.cpu_count()} cores; "
          f"X: ({args.rows:,}, 32) float32 in {args.chunk:,}-row chunks; median of {args.repeats}")

    ratios, timings, best = {}, None, None
    if "error" in sections:
        rows, ratios = error_table(sizes, seeds)
        print_table(f"1. relative Frobenius error of the rbf kernel on held-out rows (mean of {len(seeds)} seeds)",
                    ["data set", "n_components", "landmarks", "error", "min-max", "x uniform"], rows)

    X = np.random.default_rng(0).random((args.rows, 32), dtype=np.float32)
    if "fit" in sections:
        print_table(f"2. fit on a ({args.rows:,}, 32) float32 dask array, {args.chunk:,}-row chunks "
                    "(threaded, 2 threads x 1 BLAS thread)",
                    ["method", "n_components", "seconds", "passes", "reads per block", "block reads"],
                    fit_table(X, args.chunk, fit_sizes, args.repeats))

    if "transform" in sections:
        rows, timings = transform_table(X, args.chunk, n_transform, args.repeats)
        print_table(f"3. transform, Nystroem(n_components={n_transform}), rbf, float32",
                    ["method", "seconds", "rows/s", "x 2-core limit", "x scikit-learn"], rows)

    if "quality" in sections:
        rows, best = quality_table(seeds)
        print_table(f"4. ||K - Z Z^T|| / best rank-m error on the fitted rows, Frobenius / trace norm, rbf, "
                    f"mean of {len(seeds)} seeds (1 is the optimum); columns: n_landmarks l",
                    ["data set", "gamma", "m", "landmarks", *[f"l = {f}m" if f > 1 else "plain (l = m)"
                                                              for f in FACTORS]], rows)
        print_table("4b. Frobenius ratio to the optimum: plain uniform, rpcholesky at l = 4m, the best option "
                    "with l <= 4m, and the best with l <= 4m in at most 3 passes over a dask input",
                    ["data set", "gamma", "m", "plain uniform", "rpcholesky l=4m", "best", "ratio",
                     "best in <= 3 passes", "ratio", "<= 1.2"], best)

    if "passes" in sections:
        n_pass_rows = 20_000 if args.quick else 40_000
        print_table(f"5. passes over a ({n_pass_rows:,}, 8) float64 dask array in 4,000-row blocks, "
                    "n_components=1024 (threaded, 2 threads)",
                    ["landmarks", "n_landmarks", "passes", "reads per block", "block reads", "fit seconds"],
                    passes_table(n_pass_rows, 4_000))

    if "cost" in sections:
        n_cost, m_cost = (100_000, 128) if args.quick else (400_000, 256)
        print_table(f"6. what rank restriction costs: ({n_cost:,}, 32) float32 dask array in 20,000-row blocks, "
                    f"rbf, threaded (2 threads x 1 BLAS thread), median of {args.repeats}",
                    ["landmarks", "estimator", "features", "fit s", "passes", "transform s", "us/row"],
                    cost_table(n_cost, 20_000, m_cost, 4, args.repeats))

    if "sample" in sections:
        n_sample = 20_000 if args.quick else 40_000
        print_table(f"7. RPCholesky and leverage on a subsample of s of {n_sample:,} rows, n_landmarks l = 4m, "
                    f"rank m: relative Frobenius error on 3,000 of the rows, mean of {len(seeds)} seeds",
                    ["data set", "landmarks", "m", "l", "s", "s", "error", "x all rows"],
                    sample_table(n_sample, [64] if args.quick else [64, 256], seeds))

    if "learning" in sections:
        n_learn = 20_000 if args.quick else args.learning_rows
        chunk = max(1_000, min(50_000, n_learn // 4))
        print_table(f"8. accuracy at the same output width m: Nystroem(m) + RidgeClassifier(alpha={ALPHA}) on the "
                    f"learning study's synthetic data, {n_learn:,} training rows in {chunk:,}-row chunks, "
                    f"{max(n_learn // 10, 1_000):,} test rows, LocalCluster(2x1)",
                    ["m", "landmarks", "l", "passes", "accuracy", "- uniform", "fit s", "x uniform", "predict s",
                     "x uniform"], learning_table(n_learn, chunk, [256] if args.quick else [256, 1024]))

    if "leverage" in sections:
        print_table(f"9. where leverage landmarks pay: Frobenius error on the fitted rows / the optimal rank-m "
                    f"error, rbf, mean of {len(seeds)} seeds; 'exact': sampled by the exact ridge leverage scores",
                    ["data set", "gamma", "m", "l", "uniform", "leverage", "leverage / uniform", "exact / uniform"],
                    leverage_table(seeds))
        print_table("9b. 40,000 rows of blobs of uneven density, gamma 0.1: relative Frobenius error on 3,000 of them",
                    ["m", "l", "seeds", "landmarks", "error", "min-max", "x uniform"], leverage_held_out_table())

    print("\ntargets:")
    key = ("blobs, uneven density", 256)
    if key in ratios:
        print(f"  blobs of uneven density, n_components=256: best of kmeans/leverage = "
              f"{ratios[key]:.2f} x uniform's error (target <= 0.7)")
    if timings is not None:
        limit_s = timings["2-core limit (serial x 2)"]
        print(f"  transform on LocalCluster(2x1): {limit_s / timings['dkapprox, LocalCluster(2x1)']:.2f} "
              f"of the 2-core limit (target >= 0.85)")
    if best is not None:
        worst = max(row[8] for row in best)
        print(f"  quality: the best option within 3 passes is at most {worst:.3f} x the optimal rank-m error "
              f"(Frobenius) over every case (target <= 1.2)")


if __name__ == "__main__":
    main()
