"""Issue 7, scenario 2: worker churn. Workers die again and again while long jobs run; the answer is known.

The cluster (2 worker processes x 1 thread, each under a nanny that restarts
it) starts with ``distributed.scheduler.allowed-failures`` raised to 1000: the
scheduler reads it when it starts, and a task caught by many deaths is then
retried instead of failing as KilledWorker. Two kinds of churn:

* a loop here SIGKILLs a running worker each time the job has done another
  seventh of its blocks: 6 kills per job, every one while blocks are still
  outstanding (so none can miss the job), often the only worker left while
  the other restarts;
* distributed's chaos plugin ``KillWorker`` (mode "segfault": the worker
  process dies of SIGSEGV after an exponentially distributed lifetime, its
  nanny starts a new one, which gets the plugin again): a crash by a real
  signal. Of its other modes, "graceful" is a clean close (its nanny restarts
  the worker), and "sys.exit" does not churn under a nanny at all: it ends the
  worker's ``async with`` block, which closes the nanny too (measured: no
  worker left after 4 s).

The pass criterion is a known answer, computed undisturbed in NumPy on the
driver with the same fitted estimator, block by block on one BLAS thread like
the workers: the sha256 of the output's bytes (of coef_ and intercept_ for a
Ridge fit, whose known answer comes from dask's synchronous scheduler).
"""

import resource
import time
from concurrent.futures import ThreadPoolExecutor

import dask
import numpy as np
import pytest
from _faults import (
    OUTSTANDING,
    Removals,
    checksum,
    input_blocks,
    input_rows,
    removed_workers,
    restore,
    running_workers,
    sigkill,
    slow_input,
    slow_target,
    task_states,
    wait_for_running,
)
from distributed import as_completed
from distributed.chaos import KillWorker
from distributed.comm.core import CommClosedError
from sklearn.pipeline import make_pipeline
from threadpoolctl import threadpool_limits

import dkapprox
from dkapprox.linear_model import Ridge

pytestmark = pytest.mark.slow

N_BLOCKS, BLOCK_ROWS, N_FEATURES = 200, 400, 16
ALLOWED_FAILURES = 1000
KILLS = 6  # per job of the SIGKILL loop: one after every seventh of the blocks
MIN_CHAOS_KILLS = 5
TIMEOUT = 300


@pytest.fixture(scope="module")
def churn_cluster(make_cluster):
    # segfaulting workers write no core files (nanny-spawned processes inherit this limit)
    core = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, core[1]))
    try:
        cluster, client = make_cluster(config={"distributed.scheduler.allowed-failures": ALLOWED_FAILURES})
        assert client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.allowed_failures) == ALLOWED_FAILURES
        client.register_plugin(Removals())
        yield cluster, client
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, core)


@pytest.fixture
def churn(churn_cluster):
    cluster, client = churn_cluster
    restore(cluster, client, 2)
    return cluster, client


def estimator():
    return dkapprox.RandomFourierFeatures(n_components=64, kernel="rbf", sampling="orthogonal",
                                          random_state=1).fit(input_rows(0, 0, 300, N_FEATURES, 1, 0))


def known_transform(est):
    """sha256 of the transform of every block, made here in NumPy on one BLAS thread."""
    with threadpool_limits(1):
        return checksum(est.transform(block) for block in input_blocks(N_BLOCKS, BLOCK_ROWS, N_FEATURES))


def stream_blocks(client, Z, on_block=None):
    """Every row block of ``Z`` computed on the cluster and fetched as soon as it is done; in block order.

    A block fetched is released on the cluster, so a death loses only blocks
    not yet fetched (the scheduler computes them again). ``on_block(n)``
    runs after the n-th block arrived.
    """
    futures = client.compute(list(Z.to_delayed().ravel()))
    index = {future.key: i for i, future in enumerate(futures)}
    blocks = [None] * len(futures)
    for n, future in enumerate(as_completed(futures), 1):
        blocks[index[future.key]] = future.result(timeout=TIMEOUT)
        future.release()
        if on_block is not None:
            on_block(n)
    return blocks


class KillLoop:
    """SIGKILLs a running worker (the busiest, never a process already killed) each time it is called."""

    def __init__(self, client):
        self.client, self.kills, self.killed = client, [], set()

    def __call__(self, **context):
        deadline = time.monotonic() + TIMEOUT
        while True:  # both workers may be restarting: wait for one to kill
            candidates = {a: w for a, w in running_workers(self.client).items() if w["pid"] not in self.killed}
            if candidates:
                break
            assert time.monotonic() < deadline, "no worker came back to be killed"
            time.sleep(0.02)
        address, info = max(candidates.items(), key=lambda item: (item[1]["processing"], item[1]["in_memory"]))
        sigkill(info["pid"])
        self.killed.add(info["pid"])
        self.kills.append({**context, "pid": info["pid"], "processing": info["processing"],
                           "in_memory": info["in_memory"], "alive": len(candidates)})


def thresholds(total):
    return [round(total * k / (KILLS + 1)) for k in range(1, KILLS + 1)]


def test_sigkill_loop_during_a_streamed_transform_gives_the_known_checksum(churn):
    cluster, client = churn
    est = estimator()
    known = known_transform(est)
    loop = KillLoop(client)
    marks = thresholds(N_BLOCKS)

    def on_block(n):
        if len(loop.kills) < KILLS and n >= marks[len(loop.kills)]:
            loop(fetched=n, outstanding=N_BLOCKS - n)

    started = time.monotonic()
    blocks = stream_blocks(client, est.transform(slow_input(N_BLOCKS, BLOCK_ROWS, N_FEATURES)), on_block)
    seconds = time.monotonic() - started
    wait_for_running(client, 2, exclude_pids=loop.killed, timeout=TIMEOUT)  # every killed process replaced
    print(f"\nSIGKILL loop, streamed transform: {len(loop.kills)} kills in {seconds:.1f} s; "
          f"sum {float(sum(b.sum() for b in blocks))!r}; kills {loop.kills}")
    assert len(loop.kills) == KILLS and len(loop.killed) == KILLS
    assert all(k["outstanding"] > 0 for k in loop.kills)
    assert checksum(blocks) == known


def fit_ridge(X, y):
    model = make_pipeline(dkapprox.RBFSampler(gamma=0.5, n_components=64, random_state=0), Ridge(alpha=0.1))
    model.fit(X, y)
    return checksum([model[-1].coef_, np.atleast_1d(model[-1].intercept_)])


def test_sigkill_loop_during_a_ridge_fit_gives_the_known_checksum(churn):
    cluster, client = churn
    X = slow_input(N_BLOCKS, BLOCK_ROWS, N_FEATURES)
    y = slow_target(N_BLOCKS, BLOCK_ROWS, N_FEATURES)
    with dask.config.set(scheduler="sync"), threadpool_limits(1):
        known = fit_ridge(slow_input(N_BLOCKS, BLOCK_ROWS, N_FEATURES, pause=0), y)
    loop = KillLoop(client)
    marks = thresholds(N_BLOCKS)
    started = time.monotonic()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(fit_ridge, X, y)
        while len(loop.kills) < KILLS:
            # the statistics of a block are "done" once in memory or folded into the running total; a
            # death can undo them (the total is recomputed from the first block), so marks may be met late
            states = task_states(client, "block_moments")
            outstanding = sum(states.get(s, 0) for s in OUTSTANDING)
            assert not pending.done(), f"the fit ended after {len(loop.kills)} kills: {pending.exception()}"
            if outstanding and N_BLOCKS - outstanding >= marks[len(loop.kills)]:
                loop(done=N_BLOCKS - outstanding, outstanding=outstanding)
            time.sleep(0.005)
        got = pending.result(timeout=TIMEOUT)
    seconds = time.monotonic() - started
    wait_for_running(client, 2, exclude_pids=loop.killed, timeout=TIMEOUT)
    print(f"\nSIGKILL loop, Ridge fit: {len(loop.kills)} kills in {seconds:.1f} s; kills {loop.kills}")
    assert len(loop.killed) == KILLS and all(k["outstanding"] > 0 for k in loop.kills)
    assert got == known


def test_chaos_killworker_plugin_churn_gives_the_known_checksum_every_time(churn):
    cluster, client = churn
    est = estimator()
    known = known_transform(est)
    X = slow_input(N_BLOCKS, BLOCK_ROWS, N_FEATURES)
    client.register_plugin(KillWorker(delay="3s", mode="segfault"), name="dkapprox-chaos")
    runs, during, started = 0, 0, time.monotonic()
    try:
        while during < MIN_CHAOS_KILLS:  # whole transforms, each checked, until enough deaths fell inside them
            before = len(removed_workers(client))
            blocks = stream_blocks(client, est.transform(X))
            during += len(removed_workers(client)) - before
            runs += 1
            assert checksum(blocks) == known, f"run {runs}"
            assert time.monotonic() - started < TIMEOUT, f"{during} kills during {runs} runs"
    finally:
        try:
            client.unregister_worker_plugin("dkapprox-chaos")
        except (CommClosedError, OSError):
            # the scheduler drops the plugin before it tells the workers, and a worker the plugin kills
            # during that broadcast breaks it (seen once in CI): the restart below replaces every process
            pass
        client.restart()  # processes that still carry the plugin's timer are replaced
    assert "dkapprox-chaos" not in client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.worker_plugins))
    seconds = time.monotonic() - started
    print(f"\nKillWorker(segfault) churn: {during} workers killed during {runs} runs in {seconds:.1f} s, "
          f"each run's checksum the known one")
