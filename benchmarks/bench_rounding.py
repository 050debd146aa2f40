"""How far other chunkings' features lie from the whole array's, beside the promised bound.

For every contract estimator, in float32 and float64: the largest |difference| between
``transform`` of a (2000, 64) array in one block and in blocks of 1, 7, 97 and 1999 rows
and in column splits, the largest bound of ``tests/_rounding.py`` there, and the largest
fraction of the bound any entry used. ``--core-types`` reruns it under each OpenBLAS core
type this CPU executes (``OPENBLAS_CORETYPE``), as the suite's host matrix does.

    python benchmarks/bench_rounding.py [--core-types]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import dask
import dask.array as da
import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))

from _common import print_table  # noqa: E402
from _estimators import CONTRACT_ESTIMATORS, ident  # noqa: E402
from _rounding import dense64, transform_bound  # noqa: E402
from sklearn.base import clone  # noqa: E402

CHUNKINGS = [(1, -1), (7, -1), (97, -1), (1999, -1), (256, 16)]


def measure(rows=2000, cols=64):
    found = []
    for dtype in (np.float32, np.float64):
        X = (np.random.default_rng(0).random((rows, cols)) + 0.01).astype(dtype)
        for template in CONTRACT_ESTIMATORS:
            est = clone(template).fit(X)
            whole = dense64(est.transform(X))
            bound = transform_bound(est, X)
            worst_diff, used = 0.0, 0.0
            for chunks in CHUNKINGS:
                got = dense64(est.transform(da.from_array(X, chunks=chunks)).compute(scheduler="synchronous"))
                diff = np.abs(got - whole)
                worst_diff = max(worst_diff, float(diff.max()))
                used = max(used, float(np.divide(diff, bound, out=np.zeros_like(diff), where=bound > 0).max()))
            assert used <= 1.0, (ident(est), dtype, used)
            found.append([ident(template)[:60], np.dtype(dtype).name, worst_diff, float(bound.max()), used])
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--core-types", action="store_true", help="rerun under each OpenBLAS core type")
    args = parser.parse_args()
    if args.core_types:
        sys.path.insert(0, str(TESTS))
        from test_host_matrix import cpu_flags, runnable_core_types

        for core in runnable_core_types(cpu_flags()):
            env = dict(os.environ, OPENBLAS_CORETYPE=core, OPENBLAS_NUM_THREADS="1")
            subprocess.run([sys.executable, __file__], env=env, check=True)
        return
    kernel = [i["architecture"] for i in threadpool_info() if i["internal_api"] == "openblas"]
    with threadpool_limits(1, user_api="blas"), dask.config.set(scheduler="synchronous"):
        rows = measure()
    print_table(f"Other chunkings against one block, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '-')} "
                f"(loaded: {kernel})", ["estimator", "dtype", "max |diff|", "max bound", "max diff/bound"], rows)
    for dtype in ("float32", "float64"):
        mine = [r for r in rows if r[1] == dtype]
        print(f"{dtype}: largest difference {max(r[2] for r in mine):.3g}, largest fraction of its bound used "
              f"{max(r[4] for r in mine):.3g}")


if __name__ == "__main__":
    main()
