"""KernelRidgeCV / KernelRidgeClassifierCV against the exhaustive search and against one fit (issue 40).

``--part choice``: on four data sets (diabetes and digits, which scikit-learn ships; Friedman #1 and
a two-moons-like classification, synthetic), the same (gamma, alpha) grid and the same folds
(:class:`~dkapprox.linear_model.HashedKFold`) through scikit-learn's ``GridSearchCV`` over its exact
``KernelRidge`` (one-vs-rest on +1/-1 for classes) and through ours, with every training row a
center and with ``m`` = a quarter of them. Printed: each search's choice and the held-out test
score of its refitted model, side by side, and the difference (target: within 0.01).

``--part cost``: the learning study's data (``--rows`` 10^6 training rows of 20 float32 features,
make_classification as examples/learning_study.py), LocalCluster(2 workers x 1 thread), blocks of
50,000 rows: a 5 gamma x 6 alpha x 5 fold KernelRidgeClassifierCV at m = 2,048 against one
KernelRidgeClassifier fit at the same m (``--max-iter`` 20 iterations, tol 1e-3, as docs/learning.rst
measures it). Printed: seconds, passes, test accuracy, the search's time over the fit's, and the
grid run as whole fits estimated as the one fit's time x 150 (not run: said so).

    python benchmarks/bench_kernel_ridge_cv.py --part choice [--routes statistics,cg]
    python benchmarks/bench_kernel_ridge_cv.py --part cost [--rows 1000000] [--routes auto,statistics,cg]
    python benchmarks/bench_kernel_ridge_cv.py --part out-of-core [--ooc-rows 20000000] [--ooc-route cg]

``--part out-of-core``: the search on a Zarr store larger than the workers' memory (2 x 10^7 x 20 float32,
1.5 GiB, two workers of 600 MiB): whether the input was persisted, the passes, and the bytes each
worker spilled.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import dask.array as da
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _common import print_table  # noqa: E402

GAMMA_FACTORS = np.array([0.1, 0.3, 1.0, 3.0, 10.0])
ALPHAS = [1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0]


def _datasets():
    from sklearn.datasets import load_diabetes, load_digits, make_friedman1, make_moons
    from sklearn.preprocessing import StandardScaler

    X, y = load_diabetes(return_X_y=True)
    yield "diabetes (scikit-learn, real)", StandardScaler().fit_transform(X), (y - y.mean()) / y.std(), False
    X, y = make_friedman1(n_samples=1500, n_features=10, noise=1.0, random_state=0)
    yield "Friedman #1 (1,500 rows)", StandardScaler().fit_transform(X), y - y.mean(), False
    X, y = load_digits(return_X_y=True)
    yield "digits (scikit-learn, real)", X / 16.0, y, True
    X, y = make_moons(n_samples=1500, noise=0.3, random_state=0)
    yield "moons (1,500 rows, noise 0.3)", X, y, True


class _OneVsRest:
    """scikit-learn's exact KernelRidge on +1/-1 targets, one column a class (GridSearchCV's candidate)."""

    @staticmethod
    def make():
        from sklearn.base import BaseEstimator, ClassifierMixin
        from sklearn.kernel_ridge import KernelRidge
        from sklearn.preprocessing import LabelBinarizer

        class OneVsRestKernelRidge(ClassifierMixin, BaseEstimator):
            def __init__(self, alpha=1.0, gamma=None):
                self.alpha, self.gamma = alpha, gamma

            def fit(self, X, y):
                self.binarizer_ = LabelBinarizer(pos_label=1, neg_label=-1).fit(y)
                self.classes_ = self.binarizer_.classes_
                self.model_ = KernelRidge(alpha=self.alpha, kernel="rbf", gamma=self.gamma).fit(
                    X, self.binarizer_.transform(y).astype(float))
                return self

            def predict(self, X):
                s = self.model_.predict(X)
                return self.classes_[s.argmax(axis=1)] if s.ndim > 1 and s.shape[1] > 1 \
                    else self.classes_[(s.ravel() > 0).astype(int)]

        return OneVsRestKernelRidge()


def choice(args):
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.model_selection import GridSearchCV, train_test_split

    from dkapprox.linear_model import HashedKFold, KernelRidgeClassifierCV, KernelRidgeCV

    rows = []
    for name, X, y, classify in _datasets():
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=0,
                                                  stratify=y if classify else None)
        scale = 1.0 / (X_tr.shape[1] * X_tr.var())
        gammas = list(scale * GAMMA_FACTORS)
        base = _OneVsRest.make() if classify else KernelRidge(kernel="rbf")
        started = time.perf_counter()
        theirs = GridSearchCV(base, {"alpha": ALPHAS, "gamma": gammas}, cv=HashedKFold(5, random_state=0),
                              scoring="accuracy" if classify else "r2").fit(X_tr, y_tr)
        their_s = time.perf_counter() - started
        their_test = theirs.score(X_te, y_te)
        Search = KernelRidgeClassifierCV if classify else KernelRidgeCV
        for m, route in [(m, route) for m in (X_tr.shape[0], X_tr.shape[0] // 4) for route in args.routes.split(",")]:
            started = time.perf_counter()
            ours = Search(alphas=ALPHAS, gammas=gammas, n_centers=m, cv=5, route=route, random_state=0)
            ours.fit(da.from_array(X_tr, chunks=(max(100, X_tr.shape[0] // 4), -1)),
                     da.from_array(y_tr, chunks=max(100, X_tr.shape[0] // 4)))
            our_s = time.perf_counter() - started
            our_test = ours.score(X_te, y_te)
            sklearn_choice = f"{theirs.best_params_['gamma'] / scale:g} / {theirs.best_params_['alpha']:g}"
            rows.append([name, m, ours.route_, sklearn_choice,
                         f"{ours.gamma_ / scale:g} / {ours.alpha_:g}", their_test, our_test, our_test - their_test,
                         their_s, our_s, ours.passes_])
    print_table("the same choice as the exhaustive search: GridSearchCV over scikit-learn's exact KernelRidge "
                "(one-vs-rest for classes), 5 gammas (x gamma='scale') x 6 alphas x 5 hashed folds, held-out 25%; "
                "scores: R^2 (regression), accuracy (classes)",
                ["data", "m", "route", "sklearn gamma/scale, alpha", "ours", "sklearn test", "ours test",
                 "ours - sklearn", "sklearn s", "ours s", "our passes"], rows)


def cost(args):
    from distributed import Client, LocalCluster

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    from learning_study import synthetic

    from dkapprox.linear_model import KernelRidgeClassifier, KernelRidgeClassifierCV

    data = synthetic(args.rows, args.rows // 10, chunk_rows=args.chunk)
    gamma = data["gamma"]
    gammas = [gamma * f for f in GAMMA_FACTORS]
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster):
        X = da.from_array(data["X_train"], chunks=(args.chunk, -1)).persist()
        y = da.from_array(data["y_train"], chunks=args.chunk).persist()
        X_test = data["X_test"]
        rows = []
        started = time.perf_counter()
        fit = KernelRidgeClassifier(alpha=0.1, kernel="rbf", gamma=gamma, n_centers=args.centers, tol=1e-3,
                                    max_iter=args.max_iter, random_state=0).fit(X, y)
        fit_s = time.perf_counter() - started
        fit_acc = float(np.mean(fit.predict(X_test) == data["y_test"]))
        rows.append([f"KernelRidgeClassifier, gamma={gamma:g}, alpha=0.1", fit_s, fit.passes_, fit_acc, 1.0, "-"])
        search = None
        for route in args.routes.split(","):
            started = time.perf_counter()
            search = KernelRidgeClassifierCV(alphas=ALPHAS, gammas=gammas, n_centers=args.centers, cv=5, route=route,
                                             tol=1e-3, max_iter=args.max_iter, random_state=0).fit(X, y)
            search_s = time.perf_counter() - started
            search_acc = float(np.mean(search.predict(X_test) == data["y_test"]))
            phases = ", ".join(f"{k} {v:.0f}" for k, v in search.phase_seconds_.items() if k != "total")
            estimate = ", ".join(f"{k} {v:.0f} s" for k, v in search.route_seconds_.items())
            rows.append([f"KernelRidgeClassifierCV 5 x 6 x 5, route={route} -> {search.route_} "
                         f"({estimate or 'not estimated'}): gamma={search.gamma_:g}, alpha={search.alpha_:g}",
                         search_s, search.passes_, search_acc, search_s / fit_s, phases])
            if search.route_ == "cg":
                kept = int((search.cv_results_["dropped_at_iteration"] == 0).sum())
                rows[-1][0] += (f"; {kept} of 30 kept to the end, CG iterations "
                                f"{int(search.cv_results_['n_iterations'].sum())} in all")
        chosen = KernelRidgeClassifier(alpha=search.alpha_, kernel="rbf", gamma=search.gamma_,
                                       n_centers=args.centers, tol=1e-3, max_iter=args.max_iter,
                                       random_state=0).fit(X, y)
        chosen_acc = float(np.mean(chosen.predict(X_test) == data["y_test"]))
        rows.append(["KernelRidgeClassifier (CG) at the chosen gamma, alpha", float("nan"), chosen.passes_,
                     chosen_acc, float("nan"), "-"])
    print_table(f"cost of the search: {args.rows:,} training rows x 20 float32, m = {args.centers:,}, "
                f"LocalCluster(2x1), blocks of {args.chunk:,}; one fit: {args.max_iter} CG iterations at most, "
                "tol 1e-3", ["model", "s", "passes", "test accuracy", "time / one fit", "search phases (s)"], rows)


def out_of_core(args):
    """The search on a Zarr store larger than the workers' memory: no persist, one read a block a pass, no spill."""
    import tempfile

    import zarr
    from distributed import Client, LocalCluster

    from dkapprox import io
    from dkapprox.linear_model import KernelRidgeCV

    rows, d, chunk = args.ooc_rows, 20, 100_000
    limit = args.ooc_worker_bytes
    with tempfile.TemporaryDirectory() as tmp:
        X = zarr.create_array(f"{tmp}/x.zarr", shape=(rows, d), chunks=(chunk, d), dtype="float32")
        y = zarr.create_array(f"{tmp}/y.zarr", shape=(rows,), chunks=(chunk,), dtype="float32")
        rng = np.random.default_rng(0)
        for start in range(0, rows, chunk):
            block = rng.standard_normal((min(chunk, rows - start), d), dtype=np.float32)
            X[start:start + block.shape[0]] = block
            y[start:start + block.shape[0]] = np.sin(2 * block[:, 0]) + 0.5 * block[:, 1] * block[:, 2]
        data_bytes = rows * d * 4
        with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=limit, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            started = time.perf_counter()
            search = KernelRidgeCV(alphas=ALPHAS, gammas=[0.005, 0.015, 0.05, 0.15, 0.5], n_centers=args.ooc_centers,
                                   cv=5, random_state=0, route=args.ooc_route, tol=1e-3, max_iter=args.max_iter)
            search.fit(io.open_array(f"{tmp}/x.zarr"), da.from_zarr(f"{tmp}/y.zarr"))
            seconds = time.perf_counter() - started
            spilled = client.run(lambda dask_worker: getattr(dask_worker.data, "spilled_total", None))
    print_table(f"out of core: a Zarr store of {rows:,} x {d} float32 ({data_bytes / 2**30:.2f} GiB) in "
                f"{rows // chunk} blocks, LocalCluster(2x1) at memory_limit {limit / 2**20:.0f} MiB a worker, "
                f"m = {args.ooc_centers}, 5 gammas x 6 alphas x 5 folds, route {search.route_} (asked: "
                f"{args.ooc_route}), tol 1e-3, max_iter {args.max_iter}",
                ["s", "passes", "input persisted", "spilled (memory, disk) bytes a worker", "best gamma / alpha",
                 "best r2"],
                [[seconds, search.passes_, search.input_persisted_, "; ".join(str(v) for v in spilled.values()),
                  f"{search.gamma_:g} / {search.alpha_:g}", search.best_score_]])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("choice", "cost", "out-of-core", "all"), default="all")
    parser.add_argument("--ooc-rows", type=int, default=20_000_000)
    parser.add_argument("--ooc-centers", type=int, default=256)
    parser.add_argument("--ooc-worker-bytes", type=int, default=600 * 2**20)
    parser.add_argument("--ooc-route", default="auto", choices=("auto", "statistics", "cg"))
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk", type=int, default=50_000)
    parser.add_argument("--centers", type=int, default=2048)
    parser.add_argument("--max-iter", type=int, default=20)
    parser.add_argument("--routes", default="auto,statistics,cg", help="the search's routes to time, in turn")
    args = parser.parse_args()
    if args.part in ("choice", "all"):
        choice(args)
    if args.part in ("cost", "all"):
        cost(args)
    if args.part in ("out-of-core", "all"):
        out_of_core(args)


if __name__ == "__main__":
    main()
