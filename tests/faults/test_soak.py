"""Soak (issue 7, scenario 6): 100 fits and transforms in one long-lived distributed client.

One LocalCluster (two worker processes, one thread each) serves 100
consecutive iterations, each a fit and a computed transform of a Zarr-backed
dask array, rotating through six estimator families (RBF with a data pass
for gamma='scale', Nystroem, Gaussian and sparse projections, count sketch,
and an RBF + Ridge pipeline whose fit streams the features), each iteration
with a new random_state. After a warm-up the baseline is taken: keys held by
the scheduler, tasks and data held by the workers, worker RSS. Pass: every
key is released after every iteration (none held by the client, the
scheduler or the workers), worker RSS ends within 64 MiB of the baseline,
and each family's transform graph is the same size every time.

Why 64 MiB: leaking one transform's output an iteration would add 2 GiB,
one block an iteration 200 MiB. What RSS does move by is distributed's own:
its workers keep fine-grained metrics per computation (``digests_total``,
about 15 entries each, never dropped), so a worker grows by 12-17 KB per
compute whatever runs (measured over 660 iterations: +27 MiB with dkapprox,
+17 MiB for a plain dask loop of 700 iterations of two computes), about
5 MiB over this test.
"""
import gc
import logging
import pickle
import time

import dask
import numpy as np
import pytest
import zarr
from dask._task_spec import DataNode
from distributed import Client, LocalCluster
from sklearn.base import clone
from sklearn.pipeline import make_pipeline

from dkapprox import io
from dkapprox.kernel_approximation import PolynomialCountSketch, RBFSampler
from dkapprox.linear_model import Ridge
from dkapprox.nystroem import Nystroem
from dkapprox.random_projection import GaussianRandomProjection, SparseRandomProjection

ITERATIONS, WARM_UP = 100, 12
ROWS, BLOCK = 20_000, 2_000  # 10 blocks; 256 float32 features make a 2 MiB output block
RSS_SLACK = 64 * 2**20
FAMILIES = [
    RBFSampler(n_components=256, gamma="scale"),
    Nystroem(n_components=100, gamma=0.1),
    GaussianRandomProjection(n_components=8),
    PolynomialCountSketch(n_components=256),
    SparseRandomProjection(n_components=8, dense_output=True),
    make_pipeline(RBFSampler(n_components=256, gamma=0.5), Ridge(alpha=1.0)),
]


def _rss():
    import psutil

    return psutil.Process().memory_info().rss


def _held(dask_worker):
    """Tasks a worker knows of, values it keeps, and their bytes (its managed memory)."""
    return len(dask_worker.state.tasks), len(dask_worker.data), dask_worker.state.nbytes


def _scheduler_keys(dask_scheduler):
    return len(dask_scheduler.tasks)


def _graph_size(lazy):
    """(layers, tasks, pickled bytes besides shipped constants), and the pickled bytes of the whole graph.

    The shipped constants are the fitted state and the zarr array: a sparse projection's state
    holds a seed-dependent number of nonzeros, so only the rest of its graph can be the same size.
    """
    graph = lazy.__dask_graph__()
    tasks = dict(graph)
    whole = len(pickle.dumps(tasks))
    constants = sum(len(pickle.dumps(v.value)) for v in tasks.values() if isinstance(v, DataNode))
    return (len(graph.layers), len(tasks), whole - constants), whole


def _iteration(i, X, y):
    est = clone(FAMILIES[i % len(FAMILIES)])
    est.set_params(**{"rbfsampler__random_state" if hasattr(est, "steps") else "random_state": i})
    if hasattr(est, "steps"):
        lazy = est.fit(X, y).predict(X)
    else:
        lazy = est.fit(X).transform(X)
    size = _graph_size(lazy)
    total = dask.compute(lazy.sum(axis=0))[0]
    assert np.all(np.isfinite(total))
    return i % len(FAMILIES), size


def _released(client, timeout=10):
    """Seconds until the scheduler holds no key (it forgets released keys a moment after the client)."""
    started = time.monotonic()
    while client.run_on_scheduler(_scheduler_keys):
        assert time.monotonic() - started < timeout, "keys are still held"
        time.sleep(0.01)
    return time.monotonic() - started


def _state(client):
    client.run(gc.collect)  # the same footing for baseline and end: no garbage waiting for a collection
    _released(client)
    return {"keys": client.run_on_scheduler(_scheduler_keys), "held": client.run(_held), "rss": client.run(_rss),
            "futures": len(client.futures), "driver": _rss()}


@pytest.mark.slow
def test_100_fits_and_transforms_leave_no_keys_no_memory_and_graphs_of_one_size(tmp_path):
    X_np = np.random.default_rng(0).standard_normal((ROWS, 16)).astype(np.float32)
    zarr.create_array(str(tmp_path / "x.zarr"), shape=X_np.shape, chunks=(BLOCK, 16), dtype=X_np.dtype)[:] = X_np
    X = io.open_array(tmp_path / "x.zarr")
    y = X_np[:, 0] - 2 * X_np[:, 1]
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0",
                      silence_logs=logging.CRITICAL) as cluster, Client(cluster) as client:
        for i in range(WARM_UP):
            _iteration(i, X, y)
        baseline = _state(client)
        sizes, wholes, peak_keys, slowest_release = {}, {}, 0, 0.0
        peak_rss = dict.fromkeys(baseline["rss"], 0)
        started = time.perf_counter()
        for i in range(WARM_UP, WARM_UP + ITERATIONS):
            family, (size, whole) = _iteration(i, X, y)
            sizes.setdefault(family, set()).add(size)
            wholes.setdefault(family, set()).add(whole)
            peak_keys = max(peak_keys, client.run_on_scheduler(_scheduler_keys))
            slowest_release = max(slowest_release, _released(client))  # after every iteration, not only the last
            for worker, rss in client.run(_rss).items():
                peak_rss[worker] = max(peak_rss[worker], rss)
            assert not client.futures
        seconds = time.perf_counter() - started
        final = _state(client)
    mib = lambda values: {w: round(v / 2**20, 1) for w, v in values.items()}  # noqa: E731
    print(f"\nscenario 6: {ITERATIONS} iterations in {seconds:.1f} s; scheduler keys baseline {baseline['keys']}, "
          f"final {final['keys']}, most right after an iteration {peak_keys} (all released within "
          f"{slowest_release * 1000:.0f} ms); worker RSS MiB baseline {mib(baseline['rss'])}, final "
          f"{mib(final['rss'])}, max {mib(peak_rss)}; driver (client and scheduler) RSS MiB "
          f"{baseline['driver'] / 2**20:.1f} -> {final['driver'] / 2**20:.1f}; graph per family (layers, tasks, "
          f"bytes besides the shipped state): {[sorted(sizes[f]) for f in sorted(sizes)]}, whole pickled bytes: "
          f"{[sorted(wholes[f]) for f in sorted(wholes)]}")
    assert baseline["keys"] == final["keys"] == 0 and final["futures"] == 0
    assert all(h == (0, 0, 0) for h in final["held"].values()), final["held"]
    for worker, rss in final["rss"].items():
        assert rss < baseline["rss"][worker] + RSS_SLACK, (worker, rss, baseline["rss"][worker])
    assert len(sizes) == len(FAMILIES) and all(len(found) == 1 for found in sizes.values()), sizes
    sparse = next(f for f, est in enumerate(FAMILIES) if isinstance(est, SparseRandomProjection))
    assert all(len(found) == 1 for f, found in wholes.items() if f != sparse), wholes
