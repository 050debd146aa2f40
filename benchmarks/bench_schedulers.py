"""dkapprox on every scheduler a user meets, against scikit-learn in memory (issue 30).

A notebook without a ``Client`` runs dask's threaded scheduler: several tasks in one process, each
of whose products asked NumPy's OpenBLAS for a thread per core. dkapprox runs each block task on
one BLAS thread, as a cluster's workers do (``dkapprox.engine._blas``); ``dkapprox.share-blas-threads: false`` (dask
config) is the "before". One run prints, for RBFSampler(1024) and Nystroem(1024) on ``--rows`` x 64
(float32 with ``--repeats``, float64 once), the median seconds of one transform whose output is
reduced to one column (the data already in the workers' memory), on:

- scikit-learn, in memory (its default BLAS threads);
- dask's default threaded scheduler (no Client), sharing on and off;
- the synchronous scheduler;
- LocalCluster(2 workers x 1 thread, processes), the cluster path;
- LocalCluster(processes=False) (one worker, a thread per core).

and each one's speed against scikit-learn and against the cluster path. Candidates run in turn
each repeat, so that load on a shared machine hits all alike.

    python benchmarks/bench_schedulers.py [--rows 1000000] [--block-rows 100000] [--repeats 3]
"""

from __future__ import annotations

import argparse

import dask
import dask.array as da
import numpy as np
from _common import consume, interleaved, print_table
from distributed import Client, LocalCluster
from sklearn.kernel_approximation import Nystroem as SkNystroem
from sklearn.kernel_approximation import RBFSampler as SkRBFSampler

import dkapprox

GAMMA = 0.05


def estimators(X):
    return {
        "RBFSampler(1024)": (dkapprox.RBFSampler(n_components=1024, gamma=GAMMA, random_state=0).fit(X),
                             SkRBFSampler(n_components=1024, gamma=GAMMA, random_state=0).fit(X)),
        "Nystroem(1024)": (dkapprox.Nystroem(n_components=1024, gamma=GAMMA, random_state=0).fit(X),
                           SkNystroem(n_components=1024, gamma=GAMMA, random_state=0).fit(X)),
    }


def candidates(est, sk, X, Xd, clients):
    def on(client, data):
        return lambda: client.compute(est.transform(data)[:, 0].sum()).result()

    def threads(share):
        def run():
            with dask.config.set({"dkapprox.share-blas-threads": share}):
                consume(est.transform(Xd), scheduler="threads")
        return run

    return {
        "scikit-learn (memory)": lambda: sk.transform(X)[:, 0].sum(),
        "threaded, no Client": threads(True),
        "threaded, no Client, sharing off (before)": threads(False),
        "synchronous": lambda: consume(est.transform(Xd), scheduler="sync"),
        "LocalCluster 2x1 (processes)": on(*clients["processes"]),
        "LocalCluster(processes=False)": on(*clients["threads"]),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--block-rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as procs, \
            Client(procs, set_as_default=False) as pclient, \
            LocalCluster(processes=False, dashboard_address=None) as threads, \
            Client(threads, set_as_default=False) as tclient:
        for dtype, repeats in ((np.float32, args.repeats), (np.float64, 1)):
            X = rng.random((args.rows, 64), dtype=np.float64).astype(dtype)
            Xd = da.from_array(X, chunks=(args.block_rows, 64))
            clients = {"processes": (pclient, pclient.persist(Xd)), "threads": (tclient, tclient.persist(Xd))}
            for name, (est, sk) in estimators(X[:20_000]).items():
                times = interleaved(candidates(est, sk, X, Xd, clients), repeats)
                sk_s, cluster_s = times["scikit-learn (memory)"], times["LocalCluster 2x1 (processes)"]
                print_table(f"{name} {np.dtype(dtype).name}, {args.rows:,} x 64 in blocks of {args.block_rows:,}, "
                            f"median of {repeats}", ["run", "seconds", "x scikit-learn", "x LocalCluster 2x1"],
                            [[k, v, sk_s / v, cluster_s / v] for k, v in times.items()])


if __name__ == "__main__":
    main()
