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


def test_parts_are_released_as_they_finish_and_a_spread_state_reaches_every_worker_first(tmp_path):
    """run(parts=, spread=) on 3 in-process workers: every part's result forgotten once done, the bytes
    those of a plain run; a spread state is on every worker before any block asks for it."""
    import dask.array as da

    from dkapprox import Nystroem, engine
    from dkapprox.io import open_features, write_features

    X = np.random.default_rng(0).standard_normal((1200, 16)).astype(np.float32)
    est = Nystroem(n_components=600, random_state=0).fit(X)  # a 1.4 MiB state: spread
    features = est.transform(da.from_array(X, chunks=(100, 16)))
    with LocalCluster(n_workers=3, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        pending = write_features(features, str(tmp_path / "f.zarr"), plan={}, compute=False)
        assert len(pending.parts) == 12 and pending.spread == tuple(engine.shipped_states(features))
        (key,) = pending.spread
        assert run(client, pending.delayed, parts=pending.parts, spread=pending.spread) == 12
        pending.finalize()
        deadline = time.monotonic() + 10  # releases reach the scheduler asynchronously
        while (left := client.run_on_scheduler(lambda dask_scheduler: sorted(map(str, dask_scheduler.tasks)))):
            assert time.monotonic() < deadline, left  # no write result, no state, nothing held after the run
            time.sleep(0.01)
        from dkapprox.cluster._run import _spread

        states = _spread(client, features.__dask_graph__(), [key])
        holders = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks[key].who_has))
        assert holders == 3  # before any block asked for it
        for s in states:
            s.release()
    from _rounding import transform_by_blocks
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):  # block tasks run on one BLAS thread (dkapprox.engine._blas), as here
        expected = transform_by_blocks(est, X, 100)
    np.testing.assert_array_equal(open_features(tmp_path / "f.zarr").compute(), expected)


def test_a_bar_over_parts_released_before_it_could_start_still_ends(capsys):
    """distributed's bars wait until every key is known to the scheduler; parts released as they
    finish are forgotten first (the demo hung at 0% under load). The bar over parts is told their count."""
    import threading

    with LocalCluster(n_workers=1, threads_per_worker=2, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        parts = [dask.delayed(int, pure=False)(i) for i in range(300)]
        whole = dask.delayed(list)(parts)
        keys = [p.key for p in parts]
        outcome = []
        worker = threading.Thread(target=lambda: outcome.append(run(client, whole, parts=keys, progress=True)),
                                  daemon=True)
        worker.start()
        worker.join(timeout=60)
        assert outcome == [300], "the bar waited for parts already released"
    err = capsys.readouterr().err
    assert err.rstrip().endswith("100% Completed |" + err.rstrip().rsplit("|", 1)[1])
    assert "100% Completed" in err and err.endswith("\n")
