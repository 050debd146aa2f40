"""Overlapping runs of one job: the output store's lease, with real processes, on local disk and on S3.

Two runs started together: one writes, the other exits 75 naming the holder
(or waits with --wait); a SIGKILLed holder on this host is taken over at
once; a lease of another host is refused until it expires; the heartbeat
renews it; a run that loses its lease stops writing; overwrite never deletes
a leased store. Short TTLs (DKAPPROX_LEASE_TTL / lease_ttl=) keep it fast;
every loop is bounded in count and time.
"""

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

from dkapprox.errors import LeaseLostError, OutputExistsError, StoreBusyError
from dkapprox.io import describe, open_features, write_features
from dkapprox.io._lease import LEASE_NAME, acquire, read_lease
from dkapprox.io._location import locate
from dkapprox.kernel_approximation import RBFSampler

ROWS, BLOCK, FEATURES, COMPONENTS = {"local": 40_000, "s3": 6_000}, 100, 16, 256
FOREIGN = "build-07.elsewhere.example"


@pytest.fixture(params=["local", "s3"])
def where(request, tmp_path):
    """(kind, URL or path of a not yet existing output store)."""
    if request.param == "s3":
        request.getfixturevalue("s3")
        return "s3", f"s3://data/{request.node.name.replace('[', '-').rstrip(']')}/out.zarr"
    return "local", str(tmp_path / "out.zarr")


def _env(**extra):
    return dict(os.environ, PYTHONUNBUFFERED="1", **extra)  # AWS_* of the s3 fixture included


def _cluster(tmp_path):
    path = tmp_path / "one.yaml"
    path.write_text("kind: local\nn_workers: 1\nthreads_per_worker: 1\nprocesses: false\ndashboard_address: null\n")
    return str(path)


def _input(tmp_path, rows):
    X = np.random.default_rng(0).standard_normal((rows, FEATURES)).astype(np.float32)
    path = str(tmp_path / "x.zarr")
    zarr.create_array(path, shape=X.shape, chunks=(BLOCK, FEATURES), dtype=X.dtype)[:] = X
    return path, X


def _featurize(source, out, cluster, *extra):
    return [sys.executable, "-m", "dkapprox", "featurize", source, "--method", "rbf", "--n-components",
            str(COMPONENTS), "--gamma", "0.5", "--out", out, "--cluster", cluster, *extra]


def _expected(X):
    est = RBFSampler(n_components=COMPONENTS, gamma=0.5, random_state=0).fit(X)
    return np.concatenate([est.transform(X[i:i + BLOCK]) for i in range(0, len(X), BLOCK)])


def _both(argv_a, argv_b, env, timeout=150):
    """Start two commands at the same moment; [(code, stdout, stderr)] of each."""
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for argv in (argv_a, argv_b)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        results.append((proc.returncode, out, err))
    return results


def _doc(where_kind, out):
    return read_lease(locate(out))


def _write_doc(out, doc):
    loc = locate(out)
    fs, path = loc.filesystem()
    fs.makedirs(path, exist_ok=True)
    fs.pipe_file(f"{path}/{LEASE_NAME}", json.dumps(doc).encode())


def _foreign_doc(seconds):
    now = datetime.now(timezone.utc)
    stamp = lambda t: t.isoformat(timespec="milliseconds")  # noqa: E731
    return {"kind": "dkapprox-lease", "format": 1, "token": "f" * 32, "host": FOREIGN, "host_id": "other-boot",
            "pid": 4242, "pid_start": "1", "started": stamp(now - timedelta(hours=1)), "heartbeat": stamp(now),
            "expires": stamp(now + timedelta(seconds=seconds)), "ttl": seconds}


# -- the command line, two runs at once ---------------------------------------------------


def test_two_runs_at_once_one_writes_the_other_exits_75_naming_the_holder(where, tmp_path):
    kind, out = where
    source, X = _input(tmp_path, ROWS[kind])
    cluster = _cluster(tmp_path)
    results = _both(_featurize(source, out, cluster), _featurize(source, out, cluster), _env())
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 75], results
    (_, wrote, _), = [r for r in results if r[0] == 0]
    (_, _, refused), = [r for r in results if r[0] == 75]
    blocks = ROWS[kind] // BLOCK
    assert f"{blocks} blocks written, 0 already there" in wrote
    error = [line for line in refused.splitlines() if "error" in line]
    assert len(error) == 1 and "Traceback" not in refused, refused
    assert f"host {socket.gethostname()}, pid " in error[0] and "last heartbeat" in error[0], error[0]
    assert "pass --wait" in error[0]
    d = describe(out)
    assert d["status"] == "complete" and d["blocks_done"] == blocks
    np.testing.assert_array_equal(open_features(out).compute(), _expected(X))  # what one run alone writes
    assert _doc(kind, out) is None  # released at finalize


def test_with_wait_the_second_run_waits_then_has_nothing_to_do(tmp_path):
    source, X = _input(tmp_path, ROWS["local"])
    out, cluster = str(tmp_path / "out.zarr"), _cluster(tmp_path)
    env = _env(DKAPPROX_LEASE_TTL="8")  # the waiting run looks every second
    results = _both(_featurize(source, out, cluster, "--wait"), _featurize(source, out, cluster, "--wait"), env)
    assert [code for code, _, _ in results] == [0, 0], results
    wrote = [r for r in results if "blocks written" in r[1]]
    waited = [r for r in results if "nothing to do" in r[1]]
    assert len(wrote) == len(waited) == 1, results
    assert "waiting for the run holding the store" in waited[0][2], waited[0][2]
    assert describe(out)["status"] == "complete"
    np.testing.assert_array_equal(open_features(out).compute(), _expected(X))


def _put(out, name, raw):
    fs, path = locate(out).filesystem()
    fs.pipe_file(f"{path}/{name}", raw)


def _wait_for_line(proc, text, seconds=90):
    """Lines of ``proc``'s stderr up to the first holding ``text`` (bounded: the process must say it)."""
    seen = []
    deadline = time.monotonic() + seconds
    for line in proc.stderr:  # ends when the process closes stderr
        seen.append(line)
        if text in line:
            return seen
        assert time.monotonic() < deadline, seen
    raise AssertionError(f"never said {text!r}: {seen} (exit {proc.wait(30)})")


def test_a_run_arriving_while_the_first_creates_the_store_is_busy_never_foreign(where, tmp_path):
    """The creation window, opened on purpose: the first run holds the lease and the group's zarr.json
    is not written yet. On local disk zarr's LocalStore is then writing ``zarr.<uuid>.partial`` and a
    worker probe of the other run may sit there too; on S3 only the lease is there."""
    kind, out = where
    source, X = _input(tmp_path, ROWS["s3"])
    cluster = _cluster(tmp_path)
    first = acquire(locate(out), ttl=120.0)  # this process is the first run, mid-creation
    try:
        if kind == "local":
            _put(out, "zarr.0123456789abcdef0123456789abcdef.partial", b'{"zarr_format": 3, "node_t')
            _put(out, ".dkapprox-probe-0123456789abcdef", b"nonce")
        busy = subprocess.run(_featurize(source, out, cluster), capture_output=True, text=True, env=_env(),
                              timeout=150)
        assert busy.returncode == 75, busy.stderr
        assert f"pid {os.getpid()}" in busy.stderr and "pass --wait" in busy.stderr, busy.stderr
        assert "not a Zarr store" not in busy.stderr
        waiting = subprocess.Popen(_featurize(source, out, cluster, "--wait"), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=_env(DKAPPROX_LEASE_TTL="4"))
        try:
            _wait_for_line(waiting, "waiting for the run holding the store")
            first.release()  # the first run dies here, before any metadata: the waiting run takes over
            wrote, rest = waiting.communicate(timeout=150)
        finally:
            waiting.kill()
        assert waiting.returncode == 0, rest
        assert f"{ROWS['s3'] // BLOCK} blocks written, 0 already there" in wrote
    finally:
        first.release()
    assert describe(out)["status"] == "complete"
    np.testing.assert_array_equal(open_features(out).compute(), _expected(X))
    if kind == "local":
        assert not [n for n in os.listdir(out) if n.endswith(".partial")]


def test_a_sigkilled_holder_on_this_host_is_taken_over_at_once(tmp_path):
    source, X = _input(tmp_path, ROWS["local"])
    out, cluster = str(tmp_path / "out.zarr"), _cluster(tmp_path)
    env = _env(DKAPPROX_LEASE_TTL="120")  # only the dead pid can let the rerun in quickly
    proc = subprocess.Popen(_featurize(source, out, cluster), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=env)
    blocks = ROWS["local"] // BLOCK
    done = os.path.join(out, "blocks_done", "c")
    deadline = time.monotonic() + 120
    while not (os.path.isdir(done) and len(os.listdir(done)) >= blocks // 4):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the job never got a quarter of the way"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    proc.stderr.close()
    left = read_lease(locate(out))
    assert left is not None and left["pid"] == proc.pid  # a SIGKILLed run leaves its lease behind
    before = describe(out)["blocks_done"]
    assert before < blocks

    started = time.monotonic()
    rerun = subprocess.run(_featurize(source, out, cluster), capture_output=True, text=True, env=env, timeout=150)
    assert rerun.returncode == 0, rerun.stderr
    assert time.monotonic() - started < 60, "the rerun waited for the dead holder's lease to expire"
    assert f"{blocks - before} blocks written, {before} already there" in rerun.stdout
    assert "took over the lease of an earlier run (holder gone)" in rerun.stderr
    np.testing.assert_array_equal(open_features(out).compute(), _expected(X))
    assert read_lease(locate(out)) is None


# -- the library ----------------------------------------------------------------------------


def _hold(out, ttl, ready, stop):
    """A holder process: takes the lease, says so, keeps it until told (or killed)."""
    lease = acquire(locate(out), ttl=ttl)
    ready.put(lease.doc["pid"])
    stop.wait(60)
    lease.release()


def test_a_killed_holders_lease_is_taken_over_at_once_on_this_host(where):
    kind, out = where
    ctx = multiprocessing.get_context("spawn")
    ready, stop = ctx.Queue(), ctx.Event()
    holder = ctx.Process(target=_hold, args=(out, 120.0, ready, stop))
    holder.start()
    try:
        assert ready.get(timeout=60) == holder.pid
        with pytest.raises(StoreBusyError, match=f"pid {holder.pid}"):  # alive: refused
            acquire(locate(out), ttl=120.0)
        os.kill(holder.pid, signal.SIGKILL)
        holder.join(30)
        started = time.monotonic()
        lease = acquire(locate(out), ttl=120.0)
        assert time.monotonic() - started < 5
        assert read_lease(locate(out))["pid"] == os.getpid()
        lease.release()
    finally:
        holder.kill()
        holder.join(30)


def test_a_lease_of_another_host_is_refused_until_it_expires_then_taken_over(where):
    kind, out = where
    Z = da.ones((40, 4), chunks=(10, 4))
    # 6 s: both refusals below must come before it expires (on S3 under load each call took over 1 s)
    _write_doc(out, _foreign_doc(seconds=6.0))
    with pytest.raises(StoreBusyError) as caught:
        write_features(Z, out, plan={"job": 1})
    message = str(caught.value)
    assert f"host {FOREIGN}, pid 4242" in message and "expires" in message and "wait=True" in message
    assert caught.value.holder["host"] == FOREIGN
    with pytest.raises(StoreBusyError):
        write_features(Z, out, plan={"job": 1}, wait=0.5)  # a bounded wait that runs out
    started = time.monotonic()
    report = write_features(Z, out, plan={"job": 1}, wait=30, lease_ttl=2.0)
    assert 0.5 < time.monotonic() - started < 20
    assert report.blocks_written == 4
    assert describe(out)["status"] == "complete" and read_lease(locate(out)) is None


def _race(out, barrier, results, looked):
    barrier.wait(30)
    try:
        lease = acquire(locate(out), ttl=30.0)
    except StoreBusyError:
        results.put("busy")
        return
    results.put("won")
    looked.wait(60)  # hold it until every other process has looked, however late the machine let it start
    lease.release()


def test_of_several_processes_taking_the_lease_at_once_exactly_one_wins(where):
    kind, out = where
    ctx = multiprocessing.get_context("fork")
    n = 4
    barrier, results, looked = ctx.Barrier(n), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_race, args=(out, barrier, results, looked)) for _ in range(n)]
    for p in procs:
        p.start()
    got = sorted(results.get(timeout=60) for _ in procs)
    looked.set()
    for p in procs:
        p.join(30)
    assert got == ["busy"] * (n - 1) + ["won"]
    assert read_lease(locate(out)) is None


def _slow(block, seconds=0.05):
    time.sleep(seconds)
    return block


def test_the_heartbeat_renews_the_lease_during_a_slow_job(where):
    kind, out = where
    # 30 blocks, about 3 s; renewed every 0.5 s. The TTL leaves 1.5 s for a renewal's two requests: with
    # 0.6 s (0.45 s of slack) a loaded CI host's moto server once let the lease expire mid-job.
    Z = da.ones((300, 4), chunks=(10, 4)).map_blocks(_slow, 0.1)
    pending = write_features(Z, out, plan={}, compute=False, lease_ttl=2.0)
    thread = threading.Thread(target=lambda: dask.compute(pending.delayed, scheduler="synchronous"))
    thread.start()
    seen = []
    deadline = time.monotonic() + 30
    while thread.is_alive() and time.monotonic() < deadline:
        doc = read_lease(locate(out))
        if doc and (not seen or seen[-1]["heartbeat"] != doc["heartbeat"]):
            seen.append(doc)
        time.sleep(0.05)
    thread.join(30)
    assert len(seen) >= 4, seen
    assert len({d["token"] for d in seen}) == 1 and len({d["started"] for d in seen}) == 1
    assert [d["expires"] for d in seen] == sorted(d["expires"] for d in seen)
    assert pending.finalize().blocks_written == 30
    assert read_lease(locate(out)) is None


def test_a_run_whose_lease_is_taken_over_stops_writing(tmp_path):
    out = str(tmp_path / "out.zarr")
    Z = da.ones((400, 4), chunks=(10, 4)).map_blocks(_slow, 0.05)
    pending = write_features(Z, out, plan={}, compute=False, lease_ttl=30)
    failure = []

    def run():
        try:
            dask.compute(pending.delayed, scheduler="synchronous")
        except LeaseLostError as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 30
    while describe(out)["blocks_done"] < 5:
        assert thread.is_alive() and time.monotonic() < deadline
        time.sleep(0.02)
    _write_doc(out, _foreign_doc(seconds=60))  # another host took the store over
    thread.join(30)
    assert failure and FOREIGN in str(failure[0]), failure
    stopped = describe(out)["blocks_done"]
    assert stopped < 40
    time.sleep(0.3)
    assert describe(out)["blocks_done"] == stopped  # nothing written after the loss
    with pytest.raises(LeaseLostError):
        pending.finalize()
    pending.release()
    assert read_lease(locate(out))["host"] == FOREIGN  # the new holder's lease is left alone


def test_overwrite_never_deletes_a_store_a_live_run_holds(tmp_path):
    out = str(tmp_path / "out.zarr")
    Z = da.ones((40, 4), chunks=(10, 4))
    write_features(Z, out, plan={"job": 1}, compute=False)  # unfinished, lease dropped by this process...
    _write_doc(out, _foreign_doc(seconds=60))  # ...and now held by a run elsewhere
    with pytest.raises(StoreBusyError, match=FOREIGN):
        write_features(Z * 2, out, plan={"job": 2}, overwrite=True)
    assert describe(out)["plan"] == {"job": 1}
    with pytest.raises(OutputExistsError):  # a finished store is refused before any lease is taken
        other = str(tmp_path / "done.zarr")
        write_features(Z, other, plan={})
        write_features(Z, other, plan={})
    assert not os.path.exists(os.path.join(other, LEASE_NAME))


def _outage(out, seconds):
    """The lease document unreadable for ``seconds`` (a directory in its place), then back."""
    path = os.path.join(out, LEASE_NAME)
    os.replace(path, path + ".away")
    os.mkdir(path)
    time.sleep(seconds)
    os.rmdir(path)
    os.replace(path + ".away", path)


def test_a_heartbeat_that_fails_briefly_retries_and_one_that_fails_too_long_stops_the_run(tmp_path):
    Z = da.ones((40, 4), chunks=(10, 4))
    brief = str(tmp_path / "brief.zarr")
    pending = write_features(Z, brief, plan={}, compute=False, lease_ttl=1.6)  # renewed every 0.4 s
    _outage(brief, 0.5)  # one or two renewals fail, well before the lease would expire
    time.sleep(0.5)
    assert pending.lease.lost is None
    pending.delayed.compute(scheduler="synchronous")
    assert pending.finalize().blocks_written == 4

    long = str(tmp_path / "long.zarr")
    pending = write_features(Z, long, plan={}, compute=False, lease_ttl=0.8)
    _outage(long, 1.2)  # longer than the lease lasts: the run must not go on under it
    assert pending.lease.lost and "could not be renewed" in pending.lease.lost
    with pytest.raises(LeaseLostError):
        pending.delayed.compute(scheduler="synchronous")  # the block writers see the expired lease
    with pytest.raises(LeaseLostError):
        pending.finalize()
    assert describe(long)["blocks_done"] == 0 and describe(long)["status"] == "writing"
