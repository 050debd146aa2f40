"""Too big for memory (issue 7, scenario 3): blocks that cannot fit a worker's memory limit.

Real worker processes with nannies and a 600 MiB limit each (an idle worker
with dkapprox imported holds about 310 MiB of it), allowed-failures=1 (a task
is tried twice). RBF features of 2,048 float32 columns are 8 KiB a row:

- 150,000 rows in one block (1.14 GiB) cannot fit any worker: refused before
  anything runs, no worker killed;
- 51,200 rows (400 MiB) fit the limit on paper but not beside the idle worker:
  both workers die, and the error says so within the allowed retries;

each time naming the block, the limit and the rows per block that fit, and
the cluster then runs the job with those rows, no worker lost. Each test
prints the time from submit to the error.
"""

import logging
import os
import re
import subprocess
import time

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from _rounding import assert_chunking_promise
from cli.test_commands import _start, assert_one_line_error, cli
from distributed import Client, KilledWorker, LocalCluster
from sklearn.pipeline import make_pipeline

from dkapprox import io
from dkapprox.cluster import WorkerWatch
from dkapprox.errors import TemporaryFailure, WorkerMemoryError
from dkapprox.kernel_approximation import RBFSampler
from dkapprox.linear_model import Ridge

LIMIT = "600MiB"
WIDE = dict(n_components=2048, gamma=0.5, random_state=0)  # 8 KiB of float32 features a row
WORKERS = 2


@pytest.fixture(scope="module")
def client(make_cluster):  # tests/faults/conftest.py: nannied 1-thread worker processes
    return make_cluster(WORKERS, config={"distributed.scheduler.allowed-failures": 1}, memory_limit=LIMIT)[1]


def _input(path, rows):
    X = np.random.default_rng(rows).standard_normal((rows, 16)).astype(np.float32)
    zarr.create_array(str(path), shape=X.shape, chunks=X.shape, dtype=X.dtype)[:] = X
    return X


def _healthy_then_right_sized(client, path, X, rows, out, *, n_rows=None, overwrite=False):
    """All workers back and running; the job's first ``n_rows`` (all) in blocks of ``rows`` then run,
    no worker lost, with the numbers of the in-memory transform."""
    client.wait_for_workers(WORKERS, timeout=60)
    statuses = [w["status"] for w in client.scheduler_info()["workers"].values()]
    assert statuses == ["running"] * WORKERS, statuses
    n_rows = n_rows or X.shape[0]
    est = RBFSampler(**WIDE).fit(X)
    with WorkerWatch(client, interval=0.05) as watch:
        report = io.write_features(est.transform(io.open_array(path)[:n_rows].rechunk({0: rows})), out, plan={},
                                   overwrite=overwrite)
    assert report.blocks_written == -(-n_rows // rows) and report.chunks == (rows, 2048)
    assert watch.report.restarts == 0
    tail = X[n_rows - 100:n_rows]
    assert_chunking_promise(est, tail, io.open_features(out)[n_rows - 100:].compute(), est.transform(tail))
    return watch.report


def _advice_rows(message):
    rows = int(re.search(r"at most ([\d,]+) rows per block", message).group(1).replace(",", ""))
    assert f"X.rechunk({{0: {rows}}})" in message
    return rows


def test_a_block_larger_than_any_worker_is_refused_before_anything_runs(client, tmp_path):
    X = _input(tmp_path / "x.zarr", 150_000)
    features = RBFSampler(**WIDE).fit(X).transform(io.open_array(tmp_path / "x.zarr"))
    out = tmp_path / "z.zarr"
    with WorkerWatch(client, interval=0.05) as watch:
        started = time.perf_counter()
        with pytest.raises(WorkerMemoryError) as caught:
            io.write_features(features, out, plan={})
        seconds = time.perf_counter() - started
    print(f"\nscenario 3, library, block larger than any worker: error {seconds * 1000:.0f} ms after submit, "
          f"{watch.report.restarts} workers killed\n  {caught.value}")
    exc, message = caught.value, str(caught.value)
    assert isinstance(exc, TemporaryFailure) and isinstance(exc, MemoryError)
    for fragment in ("150,000 x 2,048 float32 (1.14 GiB", "cannot fit any worker", "600.00 MiB",
                     "nothing was computed"):
        assert fragment in message, (fragment, message)
    rows = _advice_rows(message)
    assert exc.suggested_rows == rows and 1_000 <= rows < 30_000  # 8 KiB rows in ~170 MiB beside ~310 MiB idle
    assert exc.attempts is None and exc.block_shape == (150_000, 2048) and exc.memory_limit == 600 * 2**20
    assert seconds < 5 and watch.report.restarts == 0  # no worker was sacrificed to find out
    assert not out.exists()
    # two blocks of the suggested size (the whole job would write 1.2 GB to prove no more)
    peak = _healthy_then_right_sized(client, tmp_path / "x.zarr", X, rows, out, n_rows=2 * rows).peak_rss
    assert max(peak.values()) < 0.95 * 600 * 2**20


def test_a_block_that_kills_its_workers_is_a_clear_error_within_the_allowed_retries(client, tmp_path, caplog):
    X = _input(tmp_path / "x.zarr", 51_200)
    features = RBFSampler(**WIDE).fit(X).transform(io.open_array(tmp_path / "x.zarr"))
    out = tmp_path / "z.zarr"
    with WorkerWatch(client, interval=0.05) as watch, caplog.at_level(logging.WARNING, "dkapprox.cluster"):
        started = time.perf_counter()
        with pytest.raises(WorkerMemoryError) as caught:
            io.write_features(features, out, plan={})
        seconds = time.perf_counter() - started
        client.wait_for_workers(WORKERS, timeout=60)
    exc, message = caught.value, str(caught.value)
    print(f"\nscenario 3, library, block that kills its workers: error {seconds:.2f} s after submit, "
          f"{exc.attempts} attempts, {watch.report.restarts} workers restarted\n  {message}")
    assert "workers may run out of memory" in caplog.text  # said before the workers died
    assert isinstance(exc.killed, KilledWorker) and exc.attempts == 2  # allowed-failures=1: tried twice
    assert watch.report.restarts == exc.attempts  # each attempt cost one worker, no more
    for fragment in ("workers died repeatedly", "(2 attempts; out of memory: its nanny killed the last one at",
                     "51,200 x 2,048 float32 (400.00 MiB", "memory limit is 600.00 MiB"):
        assert fragment in message, (fragment, message)
    rows = _advice_rows(message)
    assert seconds < 60
    assert io.describe(out)["blocks_done"] == 0
    _healthy_then_right_sized(client, tmp_path / "x.zarr", X, rows, out, overwrite=True)


def test_a_fit_whose_blocks_kill_workers_names_the_block_to_lower(client, tmp_path):
    # A learner's fit computes through dkapprox's own compute: the same error, naming the input block.
    X = _input(tmp_path / "x.zarr", 51_200)
    y = X[:, 0].astype(np.float64)
    model = make_pipeline(RBFSampler(**WIDE), Ridge())
    started = time.perf_counter()
    with pytest.raises(WorkerMemoryError) as caught:
        model.fit(io.open_array(tmp_path / "x.zarr"), y)
    seconds = time.perf_counter() - started
    print(f"\nscenario 3, library, Ridge pipeline fit: error {seconds:.2f} s after submit")
    message = str(caught.value)
    assert "workers died repeatedly" in message and "51,200 x 2,048 float32 (400.00 MiB)" in message, message
    assert "lower the rows per block of the input (now 51,200)" in message and "600.00 MiB" in message
    client.wait_for_workers(WORKERS, timeout=60)


def test_workers_lost_some_other_way_are_not_reported_as_memory(client, tmp_path):
    # A task whose process exits (as a crash or a kill by an operator would end it): distributed's
    # KilledWorker too, but smaller blocks would not help, so it is a plain TemporaryFailure.
    dying = da.from_delayed(dask.delayed(os._exit, pure=False)(1), shape=(10, 2), dtype=np.float64)
    with pytest.raises(TemporaryFailure) as caught:
        io.write_features(dying, tmp_path / "z.zarr", plan={})
    assert not isinstance(caught.value, WorkerMemoryError)
    assert "(2 attempts), not for memory" in str(caught.value) and "finished blocks are kept" in str(caught.value)
    client.wait_for_workers(WORKERS, timeout=60)


@pytest.mark.slow
def test_cli_exits_75_within_the_allowed_retries_and_its_block_rows_then_run(tmp_path):
    _input(tmp_path / "x.zarr", 51_200)
    config = tmp_path / "two.yaml"
    config.write_text(f"kind: local\nn_workers: {WORKERS}\nthreads_per_worker: 1\nmemory_limit: {LIMIT}\n"
                      "dashboard_address: null\n")
    args = ("featurize", tmp_path / "x.zarr", "--method", "rbf", "--n-components", 2048, "--gamma", 0.5,
            "--out", tmp_path / "z.zarr", "--cluster", config)
    started = time.perf_counter()
    proc = _start(*args)  # allowed-failures=1 in the CLI tests' environment
    lines = []
    for line in proc.stderr:  # the warning is logged just before the job is submitted
        lines.append((time.perf_counter(), line))
    stdout = proc.stdout.read()
    code, ended = proc.wait(timeout=300), time.perf_counter()
    result = subprocess.CompletedProcess(args, code, stdout, "".join(line for _, line in lines))
    submitted = next(t for t, line in lines if "workers may run out of memory" in line)
    print(f"\nscenario 3, CLI, block that kills its workers: exit {code} {ended - submitted:.1f} s after submit "
          f"({ended - started:.1f} s from process start)\n  {result.stderr.strip().splitlines()[-1]}")
    assert_one_line_error(result, 75, "workers died repeatedly", "(2 attempts; out of memory: its nanny killed",
                          "51,200 x 2,048 float32 (400.00 MiB", "memory limit is 600.00 MiB",
                          "nothing was written: rerun with --block-rows")
    rows = int(re.search(r"--block-rows (\d+) and --overwrite", result.stderr).group(1))
    fine = cli(*args, "--block-rows", rows, "--overwrite", timeout=300)
    assert fine.returncode == 0, fine.stderr
    assert f"{-(-51_200 // rows)} blocks written, 0 already there" in fine.stdout
    assert "may run out of memory" not in fine.stderr


def _hold_until(fraction_of_limit, dask_worker):
    """Hold memory in the worker process until its RSS is ``fraction_of_limit`` of its limit."""
    import psutil

    need = int(fraction_of_limit * dask_worker.memory_manager.memory_limit - psutil.Process().memory_info().rss)
    dask_worker._dkapprox_idle_footprint = np.ones(max(need, 0) // 8)  # touched pages, held by the worker
    return psutil.Process().memory_info().rss / dask_worker.memory_manager.memory_limit


def test_a_memory_limit_below_an_idle_worker_is_refused_instead_of_waiting_forever(tmp_path):
    # An idle worker whose own footprint is above dask's pause line (80% of its limit) and below its
    # nanny's kill line (95%) stays paused and never starts a task. With dkapprox imported a worker
    # holds about 300 MiB, so a 360 MiB limit does it on some installs and not on others (fewer
    # packages, smaller footprint): the footprint is brought to 87% of the limit here, whatever the
    # install, by memory the worker holds.
    X = _input(tmp_path / "x.zarr", 1_000)
    est = RBFSampler(n_components=64, gamma=0.5, random_state=0).fit(X)
    features = est.transform(io.open_array(tmp_path / "x.zarr"))
    out = tmp_path / "z.zarr"
    with LocalCluster(n_workers=1, threads_per_worker=1, memory_limit="360MiB", dashboard_address=":0",
                      silence_logs=logging.CRITICAL) as cluster, Client(cluster) as client:
        client.run(__import__, "dkapprox")  # what the first task of any dkapprox job loads
        (footprint,) = client.run(_hold_until, 0.87).values()
        assert 0.8 < footprint < 0.95
        waiting = client.compute(features.sum())
        with pytest.raises(TimeoutError):  # without the check: a job that waits forever
            waiting.result(timeout=3)
        waiting.cancel()
        started = time.perf_counter()
        with pytest.raises(WorkerMemoryError, match="every worker is idle above dask's pause line") as caught:
            io.write_features(features, out, plan={})
        seconds = time.perf_counter() - started
    print(f"\nscenario 3, library, memory limit below an idle worker: error {seconds:.2f} s after submit")
    assert "360.00 MiB memory limit" in str(caught.value)
    assert "give workers a memory limit of at least" in str(caught.value) and caught.value.suggested_rows is None
    assert seconds < 10 and not out.exists()


def test_the_block_model_counts_each_row_aligned_array_plus_one_output_row(tmp_path):
    # What check_memory compares with the workers' budget (no cluster needed): an RBF transform of
    # Zarr input, aligned and rechunked; the input's own chunk counts whole when it is not aligned.
    from dkapprox.cluster._memory import BlockMemory

    X = _input(tmp_path / "x.zarr", 40_000)
    est = RBFSampler(**WIDE).fit(X)
    aligned = BlockMemory.of(est.transform(io.open_array(tmp_path / "x.zarr")))
    assert aligned.shape == (40_000, 2048) and aligned.nbytes == 40_000 * 2048 * 4
    assert aligned.row_bytes == 16 * 4 + 2 * 2048 * 4 and aligned.fixed_bytes == 0
    assert aligned.rows_within(100 * 2**20) == 6_300  # 104857600 // 16448 = 6375, two digits kept
    rechunked = BlockMemory.of(est.transform(io.open_array(tmp_path / "x.zarr").rechunk({0: 10_000})))
    assert rechunked.shape == (10_000, 2048) and rechunked.fixed_bytes == 40_000 * 16 * 4
    assert rechunked.need == 10_000 * rechunked.row_bytes + 40_000 * 16 * 4


def test_a_pass_task_is_named_by_the_block_read_inside_it(tmp_path):
    # A fit's pass task holds its row's read and transform (dkapprox.engine.reduce_aligned_rows): a
    # worker dying on it names the features' block nested in it, the largest thing it makes.
    from dkapprox import engine
    from dkapprox.cluster._memory import _task_block
    from dkapprox.learning._streaming import block_moments

    X = _input(tmp_path / "x.zarr", 4_000)
    Z = RBFSampler(**WIDE).fit(X).transform(io.open_array(tmp_path / "x.zarr").rechunk({0: 1_000}))
    y = X[:, 0].astype(np.float64)
    lazy = engine.reduce_aligned_rows([Z, y], block_moments, len, None)
    passes = [k for k in dict(lazy.__dask_graph__()) if isinstance(k, tuple) and k[0].startswith("block_moments-")]
    assert len(passes) == 4
    assert _task_block(passes[1], (lazy, Z, y)) == ((1_000, 2048), "float32")
    assert _task_block(passes[1], (lazy,)) is None  # the arrays' chunks are not in the pass's own graph
