"""Ridge scaling: one-pass fit and one-pass 5-fold CV over 10 alphas, from a Zarr store.

Input: a Zarr store of X (n_rows x 16, float32, uncompressed, 25_000-row chunks)
and y (n_rows,), for n_rows = 10^5, 10^6, 10^7. The model is
``RBFSampler(n_components=1024)`` then ``dkapprox.linear_model.Ridge``: the
features are made block by block inside the fit's single pass and never
stored. Everything runs on LocalCluster(2 workers x 1 thread), a fresh one for
each size so that each peak is that size's own.

Columns: n_rows; runs per size (3, and 1 from 10^7 rows; ``--repeats``); fit
seconds (median); rows/s; RidgeCV (10 alphas x 5 folds, the same single pass)
seconds and its ratio to one fit (the target is < 1.3); peak memory of the two
worker processes together and of the driver (sampled every 0.1 s) during the
fit and during the CV fit; and, where the features fit in memory
(``--baseline-max``), what one does without dkapprox: compute the features
into the driver and fit scikit-learn's Ridge, with the ratio ours/baseline.
Below the table: the fitted time exponent
(log time = a + b log n; linear is b = 1) and the peak memory ratio between
the largest and the smallest size (flat is 1).

    python benchmarks/bench_ridge.py            # 10^5, 10^6, 10^7 rows (store: about 0.7 GB)
    python benchmarks/bench_ridge.py --quick    # 2*10^4, 5*10^4, 10^5 rows, 256 components
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time

import numpy as np
import psutil
import zarr
from distributed import Client, LocalCluster
from distributed.diagnostics import MemorySampler
from sklearn.linear_model import Ridge as SkRidge

sys.path.insert(0, os.path.dirname(__file__))
from _common import print_table  # noqa: E402

from dkapprox import RBFSampler  # noqa: E402
from dkapprox.linear_model import Ridge, RidgeCV  # noqa: E402

N_FEATURES = 16
CHUNK_ROWS = 25_000
ALPHAS = np.logspace(-3, 3, 10)


def write_store(path, n_rows):
    """X ~ N(0, 1) and a smooth non-linear y, written chunk by chunk (never whole in memory)."""
    X = zarr.create_array(store=os.path.join(path, "X"), shape=(n_rows, N_FEATURES),
                          chunks=(CHUNK_ROWS, N_FEATURES), dtype="float32", compressors=None)
    y = zarr.create_array(store=os.path.join(path, "y"), shape=(n_rows,), chunks=(CHUNK_ROWS,),
                          dtype="float32", compressors=None)
    for i, start in enumerate(range(0, n_rows, CHUNK_ROWS)):
        rng = np.random.default_rng([0, i])
        stop = min(start + CHUNK_ROWS, n_rows)
        block = rng.normal(size=(stop - start, N_FEATURES)).astype(np.float32)
        X[start:stop] = block
        y[start:stop] = (np.sin(block[:, 0]) + block[:, 1] * block[:, 2]
                         + 0.1 * rng.normal(size=stop - start)).astype(np.float32)
    return zarr.open_array(os.path.join(path, "X"), mode="r"), zarr.open_array(os.path.join(path, "y"), mode="r")


class DriverPeak:
    """Peak resident memory of this process, sampled in a thread."""

    def __enter__(self):
        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        proc = psutil.Process()
        while not self._stop.is_set():
            self.peak = max(self.peak, proc.memory_info().rss)
            time.sleep(0.1)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def measured(fn, sampler, label):
    """(seconds, peak worker bytes, peak driver bytes) of one call."""
    with DriverPeak() as driver, sampler.sample(label, measure="process", interval=0.1):
        start = time.perf_counter()
        fn()
        seconds = time.perf_counter() - start
    return seconds, sampler.to_pandas()[label].max(), driver.peak


def run(sizes, n_components, repeats, baseline_max, root):
    rows = []
    for n in sizes:
        n_repeats = repeats or (1 if n >= 10_000_000 else 3)
        X, y = write_store(os.path.join(root, f"n{n}"), n)
        features = RBFSampler(gamma=0.05, n_components=n_components, random_state=0).fit(X)
        # a fresh cluster per size, so that each peak is that size's own
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
                Client(cluster):
            # warm-up: workers import the libraries and see the state once before anything is timed
            Ridge().fit(features.transform(X)[:CHUNK_ROWS], y[:CHUNK_ROWS])
            sampler = MemorySampler()
            fits = [measured(lambda: Ridge(alpha=1.0).fit(features.transform(X), y), sampler, f"fit{r}")
                    for r in range(n_repeats)]
            cv = RidgeCV(ALPHAS, n_folds=5, random_state=0)
            cvs = [measured(lambda: cv.fit(features.transform(X), y), sampler, f"cv{r}")
                   for r in range(n_repeats)]
            base_s = ratio = float("nan")
            if n <= baseline_max:
                def baseline():
                    Z = features.transform(X).compute()  # the features, gathered into the driver
                    SkRidge(alpha=1.0).fit(Z, y[:])
                base_s = measured(baseline, sampler, "baseline")[0]
        fit_s = float(np.median([f[0] for f in fits]))
        cv_s = float(np.median([c[0] for c in cvs]))
        if n <= baseline_max:
            ratio = fit_s / base_s
        rows.append([n, n_repeats, fit_s, n / fit_s, cv_s, cv_s / fit_s,
                     max(f[1] for f in fits) / 2**20, max(f[2] for f in fits) / 2**20,
                     max(c[1] for c in cvs) / 2**20, max(c[2] for c in cvs) / 2**20,
                     base_s, ratio, f"{cv.alpha_:g}"])
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 256 components")
    parser.add_argument("--sizes", type=lambda s: [int(float(v)) for v in s.split(",")], default=None)
    parser.add_argument("--n-components", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None,
                        help="fits per size (median); default 3, and 1 from 10^7 rows")
    parser.add_argument("--baseline-max", type=float, default=None,
                        help="largest n for the in-memory scikit-learn baseline (default 10^5; 10^6 needs 8 GB)")
    parser.add_argument("--store", default=None, help="directory for the Zarr stores (default: a temporary one)")
    args = parser.parse_args()
    sizes = args.sizes or ([20_000, 50_000, 100_000] if args.quick else [100_000, 1_000_000, 10_000_000])
    n_components = args.n_components or (256 if args.quick else 1024)
    baseline_max = args.baseline_max if args.baseline_max is not None else 100_000
    with tempfile.TemporaryDirectory(dir=args.store) as root:
        rows = run(sizes, n_components, args.repeats, baseline_max, root)
    print_table(
        f"Ridge from Zarr: RBFSampler({n_components}) -> Ridge, LocalCluster(2 workers x 1 thread), "
        f"float32, {CHUNK_ROWS}-row chunks; times are medians of 'runs'",
        ["n_rows", "runs", "fit s", "rows/s", "CV s", "CV/fit", "fit peak workers MiB", "fit peak driver MiB",
         "CV peak workers MiB", "CV peak driver MiB", "in-memory sklearn s", "ours/sklearn", "CV alpha_"],
        rows)
    n = np.array([r[0] for r in rows], dtype=float)
    fit_exponent = np.polyfit(np.log(n), np.log([r[2] for r in rows]), 1)[0]
    cv_exponent = np.polyfit(np.log(n), np.log([r[4] for r in rows]), 1)[0]
    print(f"\nfitted time exponent (time ~ n^b): fit b = {fit_exponent:.3f}, CV b = {cv_exponent:.3f}")
    print(f"peak worker memory, largest n / smallest n: fit {rows[-1][6] / rows[0][6]:.2f}, "
          f"CV {rows[-1][8] / rows[0][8]:.2f}")
    print(f"CV/fit at each n: {', '.join(f'{r[5]:.2f}' for r in rows)} (target < 1.3)")


if __name__ == "__main__":
    main()
