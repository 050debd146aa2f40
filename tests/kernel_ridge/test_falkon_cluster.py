"""KernelRidge on a real LocalCluster: Zarr read once a pass when it does not fit, kept when it does."""

import dask
import numpy as np
import zarr
from dask.utils import key_split
from distributed import Client, LocalCluster, get_task_stream

from dkapprox import io
from dkapprox.cluster import WorkerWatch
from dkapprox.linear_model import KernelRidge


def _zarr_input(path, rows=60_000, chunk=6_000):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(rows, 8)).astype(np.float32)
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=rows)
    store = zarr.create_array(str(path), shape=X.shape, chunks=(chunk, 8), dtype=X.dtype)
    store[:] = X
    return X, y


def test_zarr_input_read_once_a_pass_when_it_does_not_fit_and_kept_when_it_does(tmp_path):
    X, y = _zarr_input(tmp_path / "X.zarr")
    kw = dict(alpha=1.0, kernel="rbf", gamma=0.3, n_centers=64, tol=1e-6, random_state=0)
    local = KernelRidge(**kw).fit(X, y)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit="1GiB",
                      dashboard_address=":0", worker_dashboard_address=None) as cluster, Client(cluster) as client:
        runs = {}
        for fraction in (1e-9, 0.25):  # the input (1.9 MB) is over 1e-9 of the workers' memory, under 0.25
            Xz = io.open_array(tmp_path / "X.zarr")
            with dask.config.set({"dkapprox.persist-fraction": fraction}), \
                    WorkerWatch(client, interval=0.05) as watch, get_task_stream(client) as stream:
                model = KernelRidge(**kw).fit(Xz, y)
            # a Zarr read run as a task of its own; a pass task, which holds the read of its row's block
            reads = [t for t in stream.data if str(t["key"][0] if isinstance(t["key"], tuple) else t["key"])
                     .startswith(Xz.name)]
            # a pass's task: _falkon_device.block_partial, which takes NumPy and device blocks
            passes = [t for t in stream.data if key_split(t["key"]) == "block_partial"]
            runs[fraction] = model, len(reads), len(passes), watch.report
        client.cancel(list(client.futures))
    streamed, reads, passes, report = runs[1e-9]
    assert not streamed.input_persisted_
    # uniform centers read only the blocks that hold one, each read a task; then every block once a pass,
    # inside the pass's task of its row (dkapprox.engine.reduce_aligned_rows): no read of its own
    assert reads <= 10 * streamed.center_passes_
    assert passes == 10 * (streamed.passes_ - streamed.center_passes_)
    assert report.restarts == 0 and not report.paused and not any(report.spilled_bytes.values())
    kept, reads, passes, report = runs[0.25]
    # read once to be kept (persisted), then the passes read what the workers keep
    assert kept.input_persisted_ and reads <= 10 * (kept.center_passes_ + 1)
    assert passes == 10 * (kept.passes_ - kept.center_passes_)
    for model in (streamed, kept):
        np.testing.assert_array_equal(model.center_indices_, local.center_indices_)
        np.testing.assert_allclose(model.predict(X), local.predict(X), atol=1e-4)  # float32 through CG
