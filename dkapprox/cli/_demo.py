"""``dkapprox demo``: the main job end to end on a synthetic data set larger than a worker's memory.

Makes a Zarr data set on a LocalCluster (block by block on the workers, never
on the driver), fits and featurizes it, checks the stored features against
the in-memory transform, and says what happened and how long it took.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import click
import numpy as np
from dask.utils import parse_bytes

from .. import engine, io
from ..cluster import LOOPBACK_DASHBOARD, ClusterConfig, WorkerWatch, connect, dashboard_link
from ..utils import format_size
from ._jobs import describe_model, make_estimator, plan_of, write


def synthetic_block(index, start, stop, n_features, seed):
    """Rows ``start:stop`` of the demo data: 8 Gaussian blobs, float32, fixed by (seed, start)."""
    centers = np.random.default_rng(seed).normal(scale=3.0, size=(8, n_features)).astype(np.float32)
    rng = np.random.default_rng([seed, start])
    block = rng.standard_normal((stop - start, n_features), dtype=np.float32)
    block += centers[rng.integers(0, len(centers), stop - start)]
    return block


def make_data(rows, features, block_rows, seed=0):
    """The demo's synthetic data: a lazy float32 array made block by block on the workers."""
    return engine.generate_rows(synthetic_block, rows, features, chunk_rows=block_rows, dtype=np.float32,
                                name="demo-data", args=(features, seed))


def run(*, rows, features, method, n_components, workers, memory_limit, block_rows, directory, small, progress,
        worker_log_level, echo=click.echo):
    """Run the demo; ``echo`` says each step (the command line's stdout)."""
    try:
        limit = parse_bytes(memory_limit)
    except ValueError:
        raise click.BadParameter(f"expected a size such as 768MiB, got {memory_limit!r}",
                                 param_hint="--memory-limit") from None
    if small:
        rows, block_rows = min(rows, 20_000), min(block_rows, 2_000)
    keep, begun = directory is not None, time.perf_counter()
    directory = directory or tempfile.mkdtemp(prefix="dkapprox-demo-")
    os.makedirs(directory, exist_ok=True)
    input_path, out_path = os.path.join(directory, "input.zarr"), os.path.join(directory, "features.zarr")
    config = ClusterConfig("local", {"n_workers": workers, "threads_per_worker": 1,
                                     "memory_limit": memory_limit, "dashboard_address": LOOPBACK_DASHBOARD}, "demo")
    try:
        with connect(config, worker_log_level=worker_log_level) as client, WorkerWatch(client) as watch:
            nbytes = rows * features * 4
            echo(f"cluster: LocalCluster, {workers} workers x {format_size(limit)} "
                 f"(dashboard {dashboard_link(client, config)})")
            lazy = make_data(rows, features, block_rows)
            made = write(client, lazy, input_path, progress=progress, overwrite=False,
                         plan={"command": "demo-data", "rows": rows, "features": features, "seed": 0})
            took = "kept from an earlier run" if made is None else f"in {made.seconds:.1f} s"
            echo(f"made   {input_path}: {rows:,} x {features} float32, {format_size(nbytes)} "
                 f"({nbytes / limit:.1f}x one worker's memory limit) {took}")
            X = io.open_array(input_path)
            est = make_estimator(method, n_components=n_components, gamma="scale" if method == "rbf" else None)
            started = time.perf_counter()
            est.fit(X)
            echo(f"fit    {describe_model(est)} in {time.perf_counter() - started:.1f} s")
            plan = plan_of("demo", input_path, None, X, est)
            report = write(client, est.transform(X), out_path, plan=plan, overwrite=False, progress=progress)
            Z = io.open_features(out_path)
            took = ("kept from an earlier run" if report is None else
                    f"{report.seconds:.1f} s ({rows / report.seconds:,.0f} rows/s)")
            size = rows * Z.shape[1] * Z.dtype.itemsize  # from the shape: array expressions have no Array.nbytes
            echo(f"wrote  {out_path}: {rows:,} x {Z.shape[1]} {Z.dtype}, {format_size(size)} in "
                 f"{Z.numblocks[0] * Z.numblocks[1]} blocks, {took}")
            head = min(rows, 1000)
            stored = Z[:head].compute()
            expected = est.transform(X[:head].compute())
            difference = float(np.abs(stored - expected).max())
            if not difference <= 1e-4:  # float32 features lie in [-0.09, 0.09]: this is a real error
                raise RuntimeError(f"check failed: stored features differ from the in-memory transform by {difference}")
            echo(f"check  first {head:,} rows equal the in-memory transform (max |difference| {difference:.1e})")
        w = watch.report
        peak = max(w.peak_rss.values(), default=0)
        echo(f"workers: peak memory {format_size(peak)} of {format_size(limit)}, restarts {w.restarts}, "
                   f"paused {len(w.paused)}, spilled {format_size(sum(w.spilled_bytes.values()))}")
        echo(f"done in {time.perf_counter() - begun:.1f} s" + ("" if keep else "; removed the demo data"))
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
