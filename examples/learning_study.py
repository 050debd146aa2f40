"""Learning study: Nystroem vs random Fourier features vs the exact RBF SVM
========================================================================

Nystroem vs random Fourier features vs the exact RBF SVM: test accuracy and cost vs n_components.

The study of the seed slides (nystroem_vs_rff_slides_it.Rmd), on data that
ships with scikit-learn (digits: 1,797 images, half for training) and on a
synthetic non-linear classification problem of 1,000,000 training rows (and
100,000 test rows) that lives in dask arrays:

* ``RBFSampler`` + ``RidgeClassifier`` and ``Nystroem`` + ``RidgeClassifier``
  (dkapprox; on dask input the features are made block by block inside the
  classifier's single pass and never stored), for a range of n_components;
* the exact kernel machine ``sklearn.svm.SVC(kernel='rbf')``, run in a child
  process with a time budget (default 10 minutes): on the large problem it is
  tried on growing training subsets and shown only where it finishes;
* a linear ``RidgeClassifier`` on the raw features, for reference.

Timings are fit + predict (the test set), wall clock (median of 5 on the small
data sets), on a ``LocalCluster(2 workers x 1 thread)`` for the dask runs. Two PNG files are
written (``learning_study_<dataset>.png``: accuracy and time vs n_components)
and a table is printed.

Run it by hand::

    python examples/learning_study.py --out plots                  # full size (about 30 min)
    python examples/learning_study.py --quick --out /tmp/study     # 20,000 rows, about a minute
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time

import dask.array as da
import numpy as np
from sklearn.base import clone
from sklearn.datasets import load_digits, make_classification
from sklearn.pipeline import make_pipeline
from sklearn.svm import SVC

from dkapprox import RBFSampler
from dkapprox.linear_model import RidgeClassifier
from dkapprox.nystroem import Nystroem

ALPHA = 1e-2  # RidgeClassifier's penalty on the features


# argparse's description (sphinx-gallery runs the script without its docstring)
DESCRIPTION = 'Nystroem vs random Fourier features vs the exact RBF SVM: test accuracy and cost vs n_components.'


def digits():
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    order = np.random.RandomState(0).permutation(len(X))
    half = len(X) // 2
    return dict(name="digits", gamma=0.2, X_train=X[order[:half]], y_train=y[order[:half]],
                X_test=X[order[half:]], y_test=y[order[half:]])


def synthetic(n_train, n_test, chunk_rows):
    """Eight clusters per class in 20 dimensions: a linear model gets ~0.68, a kernel ~0.9."""
    X, y = make_classification(n_samples=n_train + n_test, n_features=20, n_informative=10, n_redundant=4,
                               n_clusters_per_class=8, class_sep=1.5, flip_y=0.02, random_state=0)
    X = ((X - X.mean(axis=0)) / X.std(axis=0)).astype(np.float32)
    return dict(name="synthetic", gamma=0.05, X_train=X[:n_train], y_train=y[:n_train],
                X_test=X[n_train:], y_test=y[n_train:], chunk_rows=chunk_rows)


def feature_map(method, n_components, gamma):
    if method == "rff":
        return RBFSampler(gamma=gamma, n_components=n_components, random_state=0)
    return Nystroem(gamma=gamma, n_components=n_components, random_state=0)


def fit_predict(model, data, repeats=5):
    """(test accuracy, fit + predict seconds); dask arrays when the data set has a chunk size.

    Small data sets (under 100,000 training rows) take the median of ``repeats``
    fits (5): one fit of a few milliseconds is mostly noise.
    """
    X_train, y_train, X_test = data["X_train"], data["y_train"], data["X_test"]
    if data.get("chunk_rows"):
        rows = data["chunk_rows"]
        X_train, y_train = da.from_array(X_train, chunks=(rows, -1)), da.from_array(y_train, chunks=rows)
        X_test = da.from_array(X_test, chunks=(rows, -1))
    times = []
    for _ in range(repeats if len(y_train) < 100_000 else 1):
        start = time.perf_counter()
        fitted = clone(model).fit(X_train, y_train)
        predicted = fitted.predict(X_test)
        predicted = predicted.compute() if isinstance(predicted, da.Array) else predicted
        times.append(time.perf_counter() - start)
    return float(np.mean(predicted == data["y_test"])), float(np.median(times))


def _svc_child(paths, gamma, n_train, queue):
    X_train, y_train, X_test, y_test = (np.load(p, mmap_mode="r") for p in paths)
    start = time.perf_counter()
    predicted = SVC(kernel="rbf", gamma=gamma).fit(X_train[:n_train], y_train[:n_train]).predict(X_test)
    queue.put((float(np.mean(predicted == y_test)), time.perf_counter() - start))


def _run_by_gallery():
    """True when this script runs inside another program (sphinx-gallery), not as Python's __main__.

    A spawned child process then cannot import ``_svc_child``, and the figures
    are shown by that program, so they must stay open.
    """
    main = sys.modules.get(_svc_child.__module__)
    # spawn re-runs the parent's main file; sphinx-gallery's stand-in __main__ has none
    return not getattr(main, "__file__", None) or getattr(main, "_svc_child", None) is not _svc_child


def exact_svc(data, n_train, budget):
    """(accuracy, seconds) of SVC on the first n_train rows, or None if it exceeds the budget."""
    if _run_by_gallery():  # in this process, without the budget: the gallery runs small sizes only
        start = time.perf_counter()
        model = SVC(kernel="rbf", gamma=data["gamma"]).fit(data["X_train"][:n_train], data["y_train"][:n_train])
        return float(np.mean(model.predict(data["X_test"]) == data["y_test"])), time.perf_counter() - start
    context = multiprocessing.get_context("spawn")  # no fork of a process that runs a cluster
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for key in ("X_train", "y_train", "X_test", "y_test"):
            paths.append(os.path.join(tmp, f"{key}.npy"))
            np.save(paths[-1], data[key][:n_train] if key.endswith("train") else data[key])
        queue = context.Queue()
        child = context.Process(target=_svc_child, args=(paths, data["gamma"], n_train, queue))
        child.start()
        child.join(budget)
        if child.is_alive():
            child.terminate()
            child.join()
            return None
        if child.exitcode != 0:  # the child failed (its traceback is above): no result will come
            raise RuntimeError(f"the exact SVC's process failed with exit code {child.exitcode}")
        return queue.get()


def run_approximations(data, grid, log=print, repeats=5):
    """Accuracy and time of both feature maps over the grid, and of the linear reference."""
    result = dict(name=data["name"], n_train=len(data["y_train"]), grid=list(grid), rff=[], nystroem=[])
    result["linear"] = fit_predict(RidgeClassifier(alpha=ALPHA), data, repeats)
    log(f"{data['name']}: linear ridge accuracy {result['linear'][0]:.4f} in {result['linear'][1]:.2f} s")
    for n_components in grid:
        for method in ("rff", "nystroem"):
            model = make_pipeline(feature_map(method, n_components, data["gamma"]), RidgeClassifier(alpha=ALPHA))
            result[method].append(fit_predict(model, data, repeats))
            log(f"{data['name']}: {method} n_components={n_components}: accuracy {result[method][-1][0]:.4f} "
                f"in {result[method][-1][1]:.2f} s")
    return result


def run_exact(data, svc_sizes, budget, log=print):
    """The exact SVC on growing training sets, until one exceeds the budget."""
    result = dict(svc=[], svc_timeouts=[])
    for n_train in svc_sizes:
        n_train = min(n_train, len(data["y_train"]))
        measured = exact_svc(data, n_train, budget)
        if measured is None:
            result["svc_timeouts"].append(n_train)
            log(f"{data['name']}: exact SVC on {n_train} rows did not finish in {budget:.0f} s; larger "
                "training sets are not tried")
            break
        result["svc"].append((n_train,) + measured)
        log(f"{data['name']}: exact SVC on {n_train} rows: accuracy {measured[0]:.4f} in {measured[1]:.2f} s")
    return result


def plot(result, out_dir, budget):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    grid = result["grid"]
    for method, label, marker in (("rff", "RBFSampler + RidgeClassifier", "o"),
                                  ("nystroem", "Nystroem + RidgeClassifier", "s")):
        left.plot(grid, [a for a, _ in result[method]], marker=marker, label=label)
        right.plot(grid, [s for _, s in result[method]], marker=marker, label=label)
    for axis, index in ((left, 0), (right, 1)):
        axis.axhline(result["linear"][index], color="gray", linestyle=":", label="linear RidgeClassifier")
        for n_train, accuracy, seconds in result["svc"]:
            axis.axhline((accuracy, seconds)[index], color="black", alpha=0.3 + 0.7 * n_train / result["n_train"],
                         linestyle="--", label=f"exact RBF SVC, {n_train:,} training rows")
        axis.set_xscale("log")
        axis.set_xticks(grid, [str(n) for n in grid])
        axis.minorticks_off()
        axis.set_xlabel("n_components")
    right.set_yscale("log")
    left.set_ylabel("test accuracy")
    right.set_ylabel("fit + predict seconds")
    title = f"{result['name']}: {result['n_train']:,} training rows"
    if result["svc_timeouts"]:
        title += f" (exact SVC on {result['svc_timeouts'][0]:,} rows: over {budget / 60:.0f} min, not shown)"
    fig.suptitle(title)
    left.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out_dir, f"learning_study_{result['name']}.png")
    fig.savefig(path, dpi=110)
    if not _run_by_gallery():
        plt.close(fig)
    return path


def print_results(result):
    print(f"\n{result['name']} ({result['n_train']:,} training rows): accuracy / fit+predict seconds")
    print(f"{'n_components':>12}  {'RFF acc':>8}  {'Nys acc':>8}  {'RFF s':>8}  {'Nys s':>8}")
    for n, (ra, rs), (na, ns) in zip(result["grid"], result["rff"], result["nystroem"]):
        print(f"{n:>12}  {ra:>8.4f}  {na:>8.4f}  {rs:>8.3g}  {ns:>8.3g}")
    for n_train, accuracy, seconds in result["svc"]:
        print(f"exact SVC, {n_train:,} rows: {accuracy:.4f} in {seconds:.3g} s")
    for n_train in result["svc_timeouts"]:
        print(f"exact SVC, {n_train:,} rows: did not finish in the budget")
    print(f"linear RidgeClassifier: {result['linear'][0]:.4f} in {result['linear'][1]:.3g} s")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    parser.add_argument("--out", default=".", help="directory for the PNG files")
    parser.add_argument("--n-rows", type=int, default=None, help="synthetic training rows")
    parser.add_argument("--svc-budget", type=float, default=None, help="seconds an exact SVC may take")
    parser.add_argument("--no-cluster", action="store_true",
                        help="dask's threaded scheduler instead of LocalCluster(2 workers x 1 thread)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="fits timed per point on data sets under 100,000 rows (the median is shown)")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_rows = args.n_rows or 20_000
        args.svc_budget = args.svc_budget or 60.0
        args.grid = [32, 64, 128, 256]
        args.digits_grid = [25, 50, 100, 200]
    else:
        args.n_rows = args.n_rows or 1_000_000
        args.svc_budget = args.svc_budget or 600.0
        args.grid = [64, 128, 256, 512, 1024, 2048]
        args.digits_grid = [25, 50, 100, 200, 400, 800]
    args.svc_sizes = [s for s in (2_000, 10_000, 30_000, 100_000, 300_000, 1_000_000) if s < args.n_rows]
    args.svc_sizes.append(args.n_rows)
    return args


def run(args):
    """Both data sets: a list of result dicts (what the plots and tables show)."""
    small = digits()
    results = [{**run_approximations(small, args.digits_grid, repeats=args.repeats),
                **run_exact(small, [len(small["y_train"])], args.svc_budget)}]
    data = synthetic(args.n_rows, max(args.n_rows // 10, 1_000), chunk_rows=max(args.n_rows // 20, 1_000))
    if args.no_cluster:
        results.append(run_approximations(data, args.grid, repeats=args.repeats))
    else:
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
                Client(cluster):
            results.append(run_approximations(data, args.grid, repeats=args.repeats))
    # the exact SVC runs after the cluster is closed: it gets the machine to itself
    results[-1].update(run_exact(data, args.svc_sizes, args.svc_budget))
    return results


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    results = run(args)
    for result in results:
        print_results(result)
        print("wrote", plot(result, args.out, args.svc_budget))
    return results


if __name__ == "__main__":
    main()
