"""run(): results, a progress bar on stderr, worker deaths as TemporaryFailure; WorkerWatch's report."""

import os
import time

import dask
import numpy as np
import pytest
from distributed import Client, LocalCluster

from dkapprox.cluster import WorkerWatch, run
from dkapprox.cluster._run import _probe
from dkapprox.errors import TemporaryFailure


def _die():
    os._exit(1)


def _hold(nbytes, seconds):
    block = np.ones(nbytes // 8)  # touched: resident
    time.sleep(seconds)
    return float(block[-1])


@pytest.fixture(scope="module")
def client():
    # One real worker process, restarted by its nanny when it dies; no retries, so a death fails fast.
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            LocalCluster(n_workers=1, threads_per_worker=1, memory_limit="1GiB", dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        yield client


def test_run_returns_the_result_and_draws_the_progress_bar_on_stderr(client, capsys):
    assert run(client, dask.delayed(sum)([1, 2, 3]), progress=True) == 6
    captured = capsys.readouterr()
    assert "100% Completed" in captured.err and captured.out == ""


def test_a_worker_killed_during_a_task_is_a_temporary_failure_and_seen_as_a_restart(client):
    with WorkerWatch(client, interval=0.05) as watch:
        with pytest.raises(TemporaryFailure, match="workers died repeatedly while running .*_die"):
            run(client, dask.delayed(_die, pure=False)())
        client.wait_for_workers(1, timeout=60)
    assert watch.report.restarts >= 1
    assert run(client, dask.delayed(sum)([2, 2])) == 4  # the restarted worker works


def test_watch_reports_peak_memory_and_a_pause(client):
    limit = 2**30
    baseline = next(iter(client.run(_probe).values()))["peak_rss"]
    target = int(0.875 * limit) - baseline  # above the 80% pause line, below the 95% kill line
    with WorkerWatch(client, interval=0.05) as watch:
        run(client, dask.delayed(_hold, pure=False)(target, 1.5))
    report = watch.report
    [name] = report.peak_rss
    assert report.memory_limit[name] == limit
    assert baseline + target * 0.95 < report.peak_rss[name] < limit
    assert report.paused == {name}
    assert report.restarts == 0 and report.spilled_bytes[name] == 0
    deadline = time.monotonic() + 30
    while next(iter(client.run(_probe).values()))["status"] != "running":  # unpauses once memory is freed
        assert time.monotonic() < deadline
        time.sleep(0.05)
    with WorkerWatch(client) as quiet:  # the peak is reset when a watch starts
        run(client, dask.delayed(sum)([1]))
    assert quiet.report.peak_rss[name] < report.peak_rss[name] - target / 2
    assert not quiet.report.paused


def test_watch_is_quiet_after_a_broadcast_scatter(client, caplog):
    # distributed logs WorkerState objects in its "all" event topic on a broadcast scatter, which
    # cannot be sent to a client: the watch reads each worker's own topic instead.
    with WorkerWatch(client) as watch:
        [held] = client.scatter([np.ones(10)], broadcast=True)
        assert run(client, dask.delayed(np.sum)(held)) == 10.0
    assert watch.report.restarts == 0
    assert "Failed to serialize" not in caplog.text and "Failed to Serialize" not in caplog.text
