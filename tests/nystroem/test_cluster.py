"""Fit and transform on a real LocalCluster (worker processes: everything must pickle) and from Zarr."""

import dask.array as da
import numpy as np
import pytest
import zarr
from _rounding import transform_by_blocks
from distributed import Client, LocalCluster

from dkapprox.nystroem import Nystroem


def laplace_like(x, y, scale=1.0):
    return np.exp(-np.abs(x - y).sum() / scale)


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as c:
        yield c


@pytest.mark.parametrize("method", ["uniform", "kmeans", "leverage"])
def test_fit_and_transform_on_worker_processes_equal_in_memory(client, method):
    X = np.random.default_rng(0).random((600, 5))
    lazy = da.from_array(X, chunks=(70, -1))
    expected = Nystroem(n_components=25, landmarks=method, random_state=1).fit(X)
    est = Nystroem(n_components=25, landmarks=method, random_state=1).fit(lazy)
    np.testing.assert_array_equal(est.component_indices_, expected.component_indices_)
    # the fits' states: k-means centroids fold block sums in another order
    np.testing.assert_allclose(est.normalization_, expected.normalization_, rtol=1e-9, atol=1e-12)
    # the transform on worker processes: NumPy's numbers for the same blocks, bit for bit
    np.testing.assert_array_equal(est.transform(lazy).compute(), transform_by_blocks(est, X, 70))


def test_callable_kernel_travels_to_worker_processes(client):
    X = np.random.default_rng(0).random((90, 3))
    est = Nystroem(kernel=laplace_like, kernel_params={"scale": 2.0}, n_components=10, landmarks="leverage",
                   random_state=0).fit(da.from_array(X, chunks=30))
    reference = Nystroem(kernel=laplace_like, kernel_params={"scale": 2.0}, n_components=10, landmarks="leverage",
                         random_state=0).fit(X)
    np.testing.assert_array_equal(est.component_indices_, reference.component_indices_)
    np.testing.assert_allclose(est.normalization_, reference.normalization_, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(est.transform(da.from_array(X, chunks=30)).compute(), transform_by_blocks(est, X, 30))


def test_zarr_input(tmp_path):
    X = np.random.default_rng(0).random((300, 4)).astype(np.float32)
    store = zarr.open_array(tmp_path / "x.zarr", mode="w", shape=X.shape, chunks=(64, 4), dtype=X.dtype)
    store[:] = X
    opened = zarr.open_array(tmp_path / "x.zarr", mode="r")
    est = Nystroem(n_components=20, landmarks="kmeans", random_state=0).fit(opened)
    expected = Nystroem(n_components=20, landmarks="kmeans", random_state=0).fit(X)
    np.testing.assert_allclose(est.components_, expected.components_, rtol=1e-6)
    out = est.transform(opened)
    assert isinstance(out, da.Array) and out.dtype == np.float32
    np.testing.assert_array_equal(out.compute(), transform_by_blocks(est, X, 64))  # the same blocks
