"""xarray: a DataArray (as xarray.open_zarr gives) in, a DataArray of features out; xarray stays optional."""

import subprocess
import sys

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from _rounding import transform_by_blocks

from dkapprox.kernel_approximation import AdditiveChi2Sampler, RBFSampler
from dkapprox.nystroem import Nystroem
from dkapprox.random_projection import GaussianRandomProjection


@pytest.fixture
def dataset(tmp_path):
    rng = np.random.default_rng(0)
    ds = xr.Dataset(
        {"pixels": (("time", "band"), rng.random((400, 6)).astype(np.float32))},
        coords={"time": pd.date_range("2026-01-01", periods=400, freq="h"), "band": list("abcdef"),
                "station": ("time", np.arange(400) % 7), "wavelength": ("band", np.linspace(400, 900, 6)),
                "site": "north"},
    )
    # written from NumPy in chunks of 100 (xarray writes dask variables with da.store, which array
    # expressions lack); open_zarr reads it back as dask arrays of those chunks
    ds.to_zarr(tmp_path / "cube.zarr", zarr_format=2, encoding={"pixels": {"chunks": (100, 6)}})
    return xr.open_zarr(tmp_path / "cube.zarr")


def test_open_zarr_in_dataarray_out_lazily(dataset):
    pixels = dataset["pixels"]
    assert isinstance(pixels.data, da.Array)
    est = RBFSampler(n_components=16, random_state=0).fit(pixels)
    Z = est.transform(pixels)
    assert isinstance(Z, xr.DataArray) and isinstance(Z.data, da.Array)  # nothing computed
    assert Z.dims == ("time", "feature")
    assert Z.chunks == ((100,) * 4, (16,))
    assert list(Z.coords["feature"].values) == list(est.get_feature_names_out())
    np.testing.assert_array_equal(Z.coords["time"].values, pixels.coords["time"].values)
    station = Z.coords["station"].data  # dask from open_zarr (see below on .values)
    np.testing.assert_array_equal(station.compute() if isinstance(station, da.Array) else station, np.arange(400) % 7)
    assert Z.coords["site"].item() == "north"
    assert "band" not in Z.coords and "wavelength" not in Z.coords  # they ran along the input features
    # .data.compute(), not .values: xarray 2026.9's .values of an array-expression variable is an object array
    np.testing.assert_array_equal(Z.data.compute(), transform_by_blocks(est, pixels.data.compute(), 100))


def test_fit_on_a_dataarray_equals_fit_on_its_values(dataset):
    pixels = dataset["pixels"]
    a = RBFSampler(gamma="scale", n_components=8, random_state=0).fit(pixels)
    b = RBFSampler(gamma="scale", n_components=8, random_state=0).fit(pixels.data.compute())
    np.testing.assert_allclose(a.random_weights_, b.random_weights_, rtol=1e-6)
    assert a.n_features_in_ == 6 and not hasattr(a, "feature_names_in_")


@pytest.mark.parametrize("est", [
    Nystroem(n_components=10, random_state=0),
    AdditiveChi2Sampler(),
    GaussianRandomProjection(n_components=3, random_state=0),
], ids=["nystroem", "additive-chi2", "gaussian-projection"])
def test_in_memory_dataarrays_for_other_estimators(est):
    X = xr.DataArray(np.random.default_rng(1).random((30, 5)), dims=("sample", "feature"),
                     coords={"sample": np.arange(100, 130)})
    Z = est.fit(X).transform(X)
    assert isinstance(Z, xr.DataArray) and isinstance(Z.data, np.ndarray)
    assert Z.dims == ("sample", "feature")  # the input's feature dimension is replaced
    np.testing.assert_array_equal(Z.coords["sample"].values, np.arange(100, 130))
    np.testing.assert_array_equal(Z.values, est.transform(X.values))


def test_a_sample_dimension_called_feature():
    X = xr.DataArray(np.ones((4, 2)), dims=("feature", "x"))
    Z = RBFSampler(n_components=3, random_state=0).fit(X).transform(X)
    assert Z.dims == ("feature", "feature_out")


def test_set_output_pandas_wins_for_in_memory_results():
    X = xr.DataArray(np.ones((4, 2)), dims=("sample", "band"))
    out = RBFSampler(n_components=3, random_state=0).set_output(transform="pandas").fit(X).transform(X)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == ["rbfsampler0", "rbfsampler1", "rbfsampler2"]


def test_three_dimensional_dataarrays_are_refused():
    X = xr.DataArray(da.ones((4, 2, 3)), dims=("t", "y", "x"))
    with pytest.raises(ValueError, match="Expected 2D array, got 3D array"):
        RBFSampler().fit(X)


def test_dkapprox_works_where_xarray_cannot_be_imported(tmp_path):
    # dask itself imports xarray when it is installed (through entry points), so
    # "optional" is tested the hard way: with xarray made unimportable.
    code = ("import sys; sys.modules['xarray'] = None\n"
            "import numpy as np, dask.array as da\n"
            "from dkapprox.kernel_approximation import RBFSampler\n"
            "from dkapprox.io import open_features, write_features\n"
            "X = da.ones((10, 3), chunks=5); est = RBFSampler(n_components=4, random_state=0).fit(X)\n"
            "write_features(est.transform(X), sys.argv[1], plan={})\n"
            "print(open_features(sys.argv[1]).shape, est.transform(np.ones((2, 3))).shape, repr(est))\n")
    out = subprocess.run([sys.executable, "-W", "error", "-c", code, str(tmp_path / "o.zarr")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("(10, 4) (2, 4) RBFSampler(n_components=4, random_state=0)  # fitted")
