"""Helpers shared by the benchmarks: timing, tables, clusters. Not part of the package."""

from __future__ import annotations

import os
import statistics
import time
from contextlib import contextmanager

import numpy as np
from threadpoolctl import threadpool_limits


def median_seconds(fn, repeats=3):
    """Median wall time of ``fn()`` over ``repeats`` runs (fresh memory is noisy here)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def print_table(title, columns, rows):
    """A plain text table: columns is a list of names, rows a list of lists."""
    cells = [[str(c) for c in columns]] + [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    print(f"\n{title}")
    for i, row in enumerate(cells):
        print("  ".join(c.rjust(w) if j else c.ljust(w) for j, (c, w) in enumerate(zip(row, widths))))
        if i == 0:
            print("  ".join("-" * w for w in widths))


def _fmt(value):
    if isinstance(value, float):
        if np.isnan(value):
            return "-"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return str(value)


def first_column(block):
    return block[:, :1].copy()


def consume(Z, **compute_kwargs):
    """Compute every block of the dask array Z in full, keeping one column of each."""
    return Z.map_blocks(first_column, chunks=(Z.chunks[0], (1,)), meta=np.empty((0, 0), Z.dtype)).compute(
        **compute_kwargs)


def two_core_limit_seconds(estimator, blocks, repeats):
    """The estimator's own block function run serially on NumPy blocks with one BLAS thread, halved.

    Two cores can at best run two such blocks at once: this is the time to beat.
    """
    state = estimator._state(blocks[0].dtype)
    block_fn = type(estimator)._block_fn

    def serial():
        with threadpool_limits(1):
            for block in blocks:
                block_fn(block, state)

    return median_seconds(serial, repeats) / 2


def threaded_seconds(estimator, Xd, repeats):
    """dkapprox on dask's threaded scheduler, with default BLAS threads and with one per task."""

    def one_blas_thread():
        with threadpool_limits(1, user_api="blas"):
            consume(estimator.transform(Xd), scheduler="threads", num_workers=2)

    return {
        "dkapprox, threaded (2 threads), default BLAS threads": median_seconds(
            lambda: consume(estimator.transform(Xd), scheduler="threads", num_workers=2), repeats),
        "dkapprox, threaded (2 threads), threadpool_limits(1)": median_seconds(one_blas_thread, repeats),
    }


@contextmanager
def jit(on):
    """DKAPPROX_JIT set on (1) or off (0) in this process for the block, restored after."""
    old = os.environ.get("DKAPPROX_JIT")
    os.environ["DKAPPROX_JIT"] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["DKAPPROX_JIT"]
        else:
            os.environ["DKAPPROX_JIT"] = old


def set_jit(on):
    """Run on each worker: the compiled path on or off there (read at every block)."""
    os.environ["DKAPPROX_JIT"] = "1" if on else "0"
    return os.environ["DKAPPROX_JIT"]


def interleaved(fns, repeats):
    """{name: median seconds}, running the candidates in turn each repeat (load hits all alike)."""
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


@contextmanager
def s3_bucket(name="bench"):
    """A bucket on the tests' S3 server (moto on loopback, tests/_s3.py) with its credentials in the environment."""
    from _s3 import MotoServer

    with MotoServer() as server:
        server.make_bucket(name)
        with server.environment():
            yield f"s3://{name}"
