"""A large fitted state reaching N workers: fetched by the blocks from one holder, or spread in a tree.

    python benchmarks/bench_state_spread.py [--workers 24] [--n-components 4096] [--quick]

LocalCluster(N workers x 1 thread) on this machine; Nystroem(n_components) float32 fitted on the driver
(its state: the n x n normalization, 64 MiB at 4096, and the landmarks). Measured in one run, twice
each, alternating:

- **one copy**: the state computed on one worker, then ``replicate``d to one more: the time of one copy;
- **blocks fetch** (what a plain ``compute`` of ``transform`` does): 4 blocks per worker, each worker
  fetches the state when its first block needs it, from whoever holds it then; the time from submit
  until every worker holds it (polled on the scheduler every 5 ms);
- **spread** (what ``dkapprox.cluster.run(..., spread=)`` does for jobs): the state computed once and
  ``replicate``d to every worker (each round every holder serves two more), then the blocks;
  the time until every worker holds it.

Bytes: each worker's fetches logged in ``transfer_incoming_log`` / its ``transfer_outgoing_bytes_total``
(peer transfers; a replicate's copies count as egress only) over the run; the largest egress is the
holder's. The state reaches the first worker inside its task (client -> scheduler -> worker, once),
which these counters do not see. Target (issue 23):
every worker holds the state within 2 x one copy x log2(N).
"""

from __future__ import annotations

import argparse
import math
import time

import dask.array as da
import numpy as np


def _counters(client):
    # distributed keeps an outgoing total; incoming only as a log of the blocks' fetches (a replicate's
    # gather does not enter it: its bytes show as the holders' egress)
    return client.run(lambda dask_worker: (sum(e["total"] for e in dask_worker.transfer_incoming_log),
                                           dask_worker.transfer_outgoing_bytes_total))


def _holders(client, key):
    return client.run_on_scheduler(
        lambda dask_scheduler, key=key: (len(dask_scheduler.tasks[key].who_has or ())
                                         if key in dask_scheduler.tasks else 0))


def _until_all_hold(client, key, n, started, timeout=600, future=None):
    while _holders(client, key) < n:
        if future is not None and future.done():
            raise RuntimeError(f"the blocks finished before every worker held {key}: a worker ran no block")
        if time.perf_counter() - started > timeout:
            raise TimeoutError(f"{key}: not on {n} workers after {timeout} s")
        time.sleep(0.005)
    return time.perf_counter() - started


def _delta(before, after):
    incoming = [after[w][0] - before[w][0] for w in after]
    outgoing = [after[w][1] - before[w][1] for w in after]
    return sum(incoming), max(outgoing)


def one_copy(client, Z, key):
    from distributed import wait

    (state,) = client.get(Z.__dask_graph__(), [key], sync=False)
    wait(state)
    started = time.perf_counter()
    client.replicate([state], n=2)
    seconds = time.perf_counter() - started
    state.release()
    return seconds


def blocks_fetch(client, Z, key, n):
    from distributed import wait

    before = _counters(client)
    started = time.perf_counter()
    future = client.compute(Z.map_blocks(lambda b: b[:, :1], chunks=(Z.chunks[0], (1,))))
    seconds = _until_all_hold(client, key, n, started, future=future)
    wait(future)
    future.release()
    return seconds, _delta(before, _counters(client))


def spread(client, Z, key, n):
    from distributed import wait

    from dkapprox.cluster._run import _spread

    before = _counters(client)
    started = time.perf_counter()
    states = _spread(client, Z.__dask_graph__(), [key])
    seconds = _until_all_hold(client, key, n, started)
    future = client.compute(Z.map_blocks(lambda b: b[:, :1], chunks=(Z.chunks[0], (1,))))
    wait(future)
    future.release()
    for s in states:
        s.release()
    return seconds, _delta(before, _counters(client))


def _forgotten(client, key, timeout=60):
    deadline = time.monotonic() + timeout
    while _holders(client, key):
        assert time.monotonic() < deadline, f"{key} still held"
        time.sleep(0.05)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=24)
    parser.add_argument("--n-components", type=int, default=4096)
    parser.add_argument("--quick", action="store_true", help="4 workers, a 4 MiB state: to check the script")
    args = parser.parse_args(argv)
    if args.quick:
        args.workers, args.n_components = 4, 1024
    from distributed import Client, LocalCluster

    from dkapprox import Nystroem, engine

    rng = np.random.default_rng(0)
    est = Nystroem(n_components=args.n_components, random_state=0).fit(
        rng.standard_normal((args.n_components + 1000, 64)).astype(np.float32))
    X = da.random.default_rng(1).standard_normal((args.workers * 4 * 100, 64), chunks=(100, 64), dtype=np.float32)
    Z = est.transform(X)
    (key,) = engine.shipped_states(Z)
    state_mib = engine.nbytes(est._state(np.float32)) / 2**20
    n = args.workers
    with LocalCluster(n_workers=n, threads_per_worker=1, memory_limit="1GiB", dashboard_address=None,
                      worker_dashboard_address=None) as cluster, Client(cluster) as client:
        client.wait_for_workers(n, timeout=600)
        rows = []
        for _ in range(2):
            copy = one_copy(client, Z, key)
            _forgotten(client, key)
            fetched, (fetched_in, fetched_out) = blocks_fetch(client, Z, key, n)
            _forgotten(client, key)
            spreaded, (spread_in, spread_out) = spread(client, Z, key, n)
            _forgotten(client, key)
            rows.append((copy, fetched, fetched_in, fetched_out, spreaded, spread_in, spread_out))
    target_factor = 2 * math.log2(n)
    print(f"# state to {n} workers: Nystroem({args.n_components}) float32, state {state_mib:.1f} MiB, "
          f"LocalCluster({n}x1) on this machine")
    print("| run | one copy (s) | blocks fetch: all hold (s) | x one copy | holder egress (MiB) | spread: all hold (s) "
          f"| x one copy | holder egress (MiB) | target: x {target_factor:.1f} |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for i, (copy, fetched, fin, fout, spreaded, sin, sout) in enumerate(rows, 1):
        print(f"| {i} | {copy:.3f} | {fetched:.2f} | {fetched / copy:.1f} | {fout / 2**20:.0f} | {spreaded:.2f} "
              f"| {spreaded / copy:.1f} | {sout / 2**20:.0f} | "
              f"{'met' if spreaded <= target_factor * copy else 'not met'} |")
        print(f"|   | peer bytes in, all workers: blocks fetch {fin / 2**20:.0f} MiB, spread {sin / 2**20:.0f} MiB "
              "| | | | | | | |")


if __name__ == "__main__":
    main()
