"""Out-of-core featurization to Zarr beside its I/O limit and its compute rate, in one run.

Setup: LocalCluster(2 workers x 1 thread, 1 GiB each). Input: a Zarr array
of float32 N(0, 1) rows, uncompressed, 65,536-row chunks; full size
33,554,432 x 64 = 8 GiB, 4x the workers' total memory limit. The outputs are
33,554,432 x 256 float32 = 32 GiB each (one at a time on disk: about 40 GiB
at peak). 64 input features rather than 32: with 32, an 8 GiB input makes
64 GiB outputs, more than this machine's free disk; ``--features 32 --rows
16777216`` runs that shape with a 2 GiB input.

Rows of the table (each phase starts with the stores it reads dropped from
the page cache and ends when its output is fsync'ed to disk):

* ``I/O limit``: a plain dask copy (``da.store(da.from_zarr(a), a)``) of a
  Zarr array as large as the output, with the output's codec and chunks:
  the RBF output itself, read and rewritten in place (a second 32 GiB
  store would not fit beside the others on this disk);
* ``RBF(256) to Zarr``: RBFSampler fit (no data pass) + transform written by
  ``dkapprox.io.write_features`` (no codec, the library's default: random
  features barely compress);
* ``Nystroem(256) to Zarr``: the same, fit included: its landmarks are
  sampled over the whole store (one more read pass); the fit's own time is
  a separate row;
* ``... in memory``: the same transforms on in-memory blocks on the same
  cluster (no Zarr): the compute rate.

Columns: seconds, rows/s, GB moved per second (read + write), the time as
a multiple of the I/O limit's (target <= 1.25 for the rows that write
features; at full size the copy moves 64 GiB, RBF 40 GiB, Nystroem 48 GiB
with its landmark pass), peak RSS of each
worker (kernel high-water mark, reset per phase) against the limit, and
whether any worker spilled, paused or restarted (target: none).

Input and outputs use no codec on purpose: random data does not compress
(zstd saves about 8% of the bytes at 2.5x the write time here), so a codec
would only move the I/O limit.

    python benchmarks/bench_out_of_core.py --dir /work/bench-ooc    # full size: ~40 GiB of disk, ~10 minutes
    python benchmarks/bench_out_of_core.py --quick                   # 1,048,576 rows, about a minute
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import dask
import dask.array as da
import numpy as np
import zarr
from distributed import Client, LocalCluster

sys.path.insert(0, os.path.dirname(__file__))
from _common import print_table  # noqa: E402

from dkapprox import RBFSampler  # noqa: E402
from dkapprox.cluster import WorkerWatch  # noqa: E402
from dkapprox.io import open_array, open_features, write_features  # noqa: E402
from dkapprox.nystroem import Nystroem  # noqa: E402

GiB = 2**30
CHUNK_ROWS = 65_536
MEMORY_LIMIT = GiB
N_WORKERS = 2


# -- page cache and disk ----------------------------------------------------------------------


def _files(path):
    for root, _, names in os.walk(path):
        for name in names:
            yield os.path.join(root, name)


def drop_from_page_cache(path):
    """Flush, then evict the store's files from the page cache (only these files: others are untouched)."""
    for file in _files(path):
        fd = os.open(file, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def fsync_store(path):
    for file in _files(path):
        fd = os.open(file, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def make_input(client, path, rows, features):
    """Random float32 rows, uncompressed, CHUNK_ROWS-row chunks, made on the workers (not timed)."""
    if os.path.exists(path):
        z = zarr.open_array(path, mode="r")
        if z.shape == (rows, features) and z.chunks == (CHUNK_ROWS, features):
            return 0.0
        shutil.rmtree(path)
    started = time.perf_counter()
    target = zarr.create_array(path, shape=(rows, features), chunks=(CHUNK_ROWS, features), dtype="float32",
                               compressors=None)
    X = da.random.default_rng(0).standard_normal((rows, features), chunks=(CHUNK_ROWS, features),
                                                  dtype=np.float32)
    client.compute(da.store(X, target, lock=False, compute=False)).result()
    return time.perf_counter() - started


# -- phases ---------------------------------------------------------------------------------


class Phase:
    """A timed phase under a WorkerWatch: seconds, bytes moved, and the workers' memory story."""

    def __init__(self, name, rows, read_bytes, written_bytes):
        self.name, self.rows, self.read, self.written = name, rows, read_bytes, written_bytes
        self.seconds, self.watch = float("nan"), None

    def run(self, client, fn):
        with WorkerWatch(client) as watch:
            started = time.perf_counter()
            fn()
            self.seconds = time.perf_counter() - started
        self.watch = watch.report
        return self

    def row(self, io_limit):
        w = self.watch
        peaks = " / ".join(f"{w.peak_rss[n] / GiB:.2f}" for n in sorted(w.peak_rss))
        spilled = sum(w.spilled_bytes.values())
        moved = self.read + self.written
        return [self.name, self.rows, round(self.seconds, 2), self.rows / self.seconds,
                moved / self.seconds / 1e9 if moved else float("nan"),
                self.seconds / io_limit.seconds if self.written else float("nan"),
                peaks, f"{spilled / 2**20:.0f} MiB" if spilled else "no", "yes" if w.paused else "no",
                w.restarts]

    def healthy(self):
        w = self.watch
        return (w.restarts == 0 and not w.paused and not any(w.spilled_bytes.values())
                and all(w.peak_rss[n] < w.memory_limit[n] for n in w.peak_rss))


def featurize(client, estimator, X, out, plan):
    """What `dkapprox featurize` does: fit, then the storage layer's planned write, then fsync."""
    estimator.fit(X)
    pending = write_features(estimator.transform(X), out, plan=plan, compute=False)
    client.compute(pending.delayed).result()
    pending.finalize()
    fsync_store(out)


def copy_in_place(client, out):
    """A plain dask copy of a Zarr array onto itself: every chunk read, then written back."""
    target = zarr.open_array(os.path.join(out, "features"), mode="r+")
    client.compute(da.store(da.from_zarr(target), target, lock=False, compute=False)).result()
    fsync_store(out)


def compute_in_memory(client, estimator, features, blocks):
    """The transform's rate with no Zarr: one random block, held by the workers, used ``blocks`` times."""
    block = np.random.default_rng(1).standard_normal((CHUNK_ROWS, features), dtype=np.float32)
    [held] = client.scatter([block], broadcast=True)  # on every worker, outside the graph
    X = da.concatenate([da.from_delayed(held, block.shape, dtype=block.dtype)] * blocks)
    client.compute(estimator.transform(X).sum(axis=1)).result()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,048,576 rows (256 MiB input): a minute")
    parser.add_argument("--rows", type=int, default=None, help="input rows (default 33,554,432: 8 GiB)")
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--n-components", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1, help="threads per worker")
    parser.add_argument("--dir", default=None, help="where the stores go (default: a temporary directory)")
    parser.add_argument("--keep-input", action="store_true", help="keep the input store for the next run")
    args = parser.parse_args()
    rows = args.rows or (1_048_576 if args.quick else 33_554_432)
    d, k = args.features, args.n_components
    base = args.dir or tempfile.mkdtemp(prefix="dkapprox-bench-ooc-")
    os.makedirs(base, exist_ok=True)
    source, out = os.path.join(base, "input.zarr"), os.path.join(base, "features.zarr")
    in_bytes, out_bytes = rows * d * 4, rows * k * 4
    free = shutil.disk_usage(base).free + (in_bytes if os.path.exists(source) else 0)
    if free < 1.1 * (in_bytes + out_bytes):
        sys.exit(f"{base}: {free / GiB:.1f} GiB free, this run needs {1.1 * (in_bytes + out_bytes) / GiB:.1f} GiB "
                 "(choose --dir elsewhere, or fewer --rows)")

    with dask.config.set({"distributed.scheduler.worker-saturation": 1.0}), \
            LocalCluster(n_workers=N_WORKERS, threads_per_worker=args.threads, memory_limit=MEMORY_LIMIT,
                         dashboard_address=":0") as cluster, Client(cluster) as client:
        made = make_input(client, source, rows, d)
        print(f"input {rows:,} x {d} float32 = {in_bytes / GiB:.2f} GiB "
              f"({in_bytes / (N_WORKERS * MEMORY_LIMIT):.1f}x the workers' total memory limit of "
              f"{N_WORKERS} x {MEMORY_LIMIT / GiB:.0f} GiB); made in {made:.1f} s; outputs {out_bytes / GiB:.2f} GiB")
        X = open_array(source)
        plan = {"benchmark": "out_of_core", "input": source}

        drop_from_page_cache(source)
        rbf = RBFSampler(gamma=1.0 / d, n_components=k, random_state=0)
        rbf_phase = Phase(f"RBF({k}) to Zarr", rows, in_bytes, out_bytes).run(
            client, lambda: featurize(client, rbf, X, out, dict(plan, method="rbf")))
        assert np.allclose(open_features(out)[:1000].compute(), rbf.transform(X[:1000].compute()), atol=1e-5)

        drop_from_page_cache(out)
        io_limit = Phase("I/O limit: copy of the output", rows, out_bytes, out_bytes).run(
            client, lambda: copy_in_place(client, out))
        shutil.rmtree(out)

        drop_from_page_cache(source)
        nystroem = Nystroem(kernel="rbf", gamma=1.0 / d, n_components=k, random_state=0)
        fit_phase = Phase(f"  Nystroem({k}) fit (landmarks)", rows, in_bytes, 0).run(
            client, lambda: nystroem.fit(X))
        drop_from_page_cache(source)
        nys_phase = Phase(f"Nystroem({k}) to Zarr (fit incl.)", rows, 2 * in_bytes, out_bytes).run(
            client, lambda: featurize(client, Nystroem(**nystroem.get_params()), X, out,
                                      dict(plan, method="nystroem")))
        shutil.rmtree(out)

        blocks = max(4, min(64, rows // CHUNK_ROWS))
        memory_phases = [
            Phase(f"RBF({k}) in memory", blocks * CHUNK_ROWS, 0, 0).run(
                client, lambda: compute_in_memory(client, rbf, d, blocks)),
            Phase(f"Nystroem({k}) in memory", blocks * CHUNK_ROWS, 0, 0).run(
                client, lambda: compute_in_memory(client, nystroem, d, blocks)),
        ]

    phases = [io_limit, rbf_phase, nys_phase, fit_phase, *memory_phases]
    print_table(
        f"Out-of-core featurization, LocalCluster({N_WORKERS} x 1 thread, {MEMORY_LIMIT / GiB:.0f} GiB), "
        f"{rows:,} rows, {d} -> {k} features",
        ["phase", "rows", "seconds", "rows/s", "GB/s moved", "x I/O limit", "peak RSS GiB (per worker)",
         "spilled", "paused", "restarts"],
        [p.row(io_limit) for p in phases],
    )
    for phase in (rbf_phase, nys_phase):
        ratio = phase.row(io_limit)[5]
        compute = memory_phases[0 if phase is rbf_phase else 1]
        print(f"{phase.name}: {ratio:.2f}x the I/O limit (target <= 1.25: "
              f"{'met' if ratio <= 1.25 else 'NOT met'}); workers healthy (no restart, pause or spill, peak "
              f"RSS under the limit): {'yes' if phase.healthy() else 'NO'}; in-memory compute is "
              f"{compute.rows / compute.seconds / (phase.rows / phase.seconds):.1f}x faster than to Zarr")
    if not args.keep_input and args.dir is None:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
