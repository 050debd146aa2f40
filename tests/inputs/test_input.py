"""The one door (``dkapprox.inputs._lazy.as_input``): every kind of input in one canonical form, nothing computed.

NumPy, scipy.sparse, dask, dask DataFrame, Zarr, xarray (over NumPy and over dask) and an
array-API array (array-api-strict on its second device, the stand-in for CuPy on a GPU) each
become one frozen ``Input``: the data in exactly one of three forms, and what the output side
needs back. Validation checks that form and tells no kinds apart itself.
"""

import dataclasses

import array_api_strict as xs
import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import xarray as xr
import zarr

import dkapprox
from dkapprox.inputs import _lazy
from dkapprox.inputs._lazy import Input, as_input
from dkapprox.inputs._validation import check_input
from dkapprox.linear_model import Ridge

X = np.arange(24, dtype=np.float64).reshape(8, 3)


def refuse(*args, **kwargs):
    raise AssertionError("the door computed something")


@pytest.fixture
def nothing_computed():
    with dask.config.set(scheduler=refuse):
        yield


def frame(**columns):
    return dd.from_pandas(pd.DataFrame(columns or {"a": X[:, 0], "b": X[:, 1], "c": X[:, 2]}), npartitions=2)


def assert_form(given, form, data=None):
    assert isinstance(given, Input)
    assert given.form == form
    assert given.lazy is (form == "lazy") and given.device is (form == "device")
    if data is not None:
        assert given.data is data


@pytest.mark.parametrize("make", [lambda: X, lambda: sp.csr_matrix(X), lambda: X.tolist(), lambda: pd.DataFrame(X),
                                  lambda: xr.Variable(("time", "band"), X)],
                         ids=["numpy", "csr", "list", "pandas", "xarray-variable"])
def test_in_memory_input_is_kept_as_scikit_learn_takes_it(make):
    given = as_input(original := make())
    assert_form(given, "memory", data=original)  # scikit-learn converts it, with its messages and names
    assert given.frame is None and given.dataarray is None and given.namespace is None


def test_a_dask_array_is_its_own_lazy_form(nothing_computed):
    Xd = da.from_array(X, chunks=(3, 3))
    given = as_input(Xd)
    assert_form(given, "lazy", data=Xd)
    assert given.frame is None and given.dataarray is None and given.namespace is None


@pytest.mark.parametrize("columns, dtype, expected", [
    (dict(a=np.arange(8), b=np.ones(8)), _lazy.FLOAT_DTYPES, np.float64),  # int + float: float64
    (dict(a=np.arange(8)), _lazy.FLOAT_DTYPES, np.float64),  # ints are read as float64, as check_array does
    (dict(a=np.ones(8, np.float32)), _lazy.FLOAT_DTYPES, np.float32),  # float32 is kept
    (dict(a=np.arange(8)), None, np.int64),  # dtype=None: pandas' own
    (dict(a=pd.array(np.arange(8), dtype="Int64")), _lazy.FLOAT_DTYPES, np.float64),  # nullable: NaN float
])
def test_a_dask_dataframe_is_read_once_lazily_in_the_dtype_check_array_picks(nothing_computed, columns, dtype,
                                                                             expected):
    ddf = frame(**columns)
    given = as_input(ddf, dtype=dtype)
    assert_form(given, "lazy")
    assert given.frame is ddf and given.dataarray is None
    assert isinstance(given.data, da.Array) and given.data.dtype == expected
    assert given.data.numblocks == (2, 1) and all(np.isnan(c) for c in given.data.chunks[0])
    assert given.data.name.startswith("frame-values-")  # what as_frame needs to put features back into a frame


def test_validation_checks_the_frame_the_door_read_without_reading_it_again(nothing_computed, monkeypatch):
    ddf = frame()
    given = as_input(ddf)
    reads = []
    monkeypatch.setattr(_lazy, "frame_as_dask", lambda *a, **k: reads.append(a))
    est = dkapprox.RBFSampler()
    assert check_input(est, given, reset=True) is given.data
    assert not reads
    assert list(est.feature_names_in_) == ["a", "b", "c"] and est.n_features_in_ == 3


def test_a_fit_and_a_predict_each_go_through_the_door_once(monkeypatch):
    reads = []
    read = _lazy.frame_as_dask
    monkeypatch.setattr(_lazy, "frame_as_dask", lambda *a, **k: reads.append(1) or read(*a, **k))
    ddf = frame()
    model = Ridge().fit(ddf, da.from_array(X[:, 0], chunks=4))
    assert len(reads) == 1
    model.predict(ddf)
    assert len(reads) == 2


def test_a_zarr_array_is_opened_and_checked_by_dkapprox_io(tmp_path, nothing_computed):
    z = zarr.create_array(tmp_path / "x.zarr", shape=X.shape, chunks=(3, 3), dtype=X.dtype)
    given = as_input(z)
    assert_form(given, "lazy")
    assert isinstance(given.data, da.Array) and given.data.chunks == ((3, 3, 2), (3,))
    assert given.frame is None and given.dataarray is None
    v = zarr.create_array(tmp_path / "y.zarr", shape=(8,), chunks=(3,), dtype=X.dtype)
    with pytest.raises(ValueError, match="expected a 2-D array"):  # dkapprox.io: samples x features
        as_input(v)
    assert as_input(v, targets=True).data.chunks == ((3, 3, 2),)  # a target vector is opened as it is


def test_the_zarr_array_reads_the_stored_values(tmp_path):
    z = zarr.create_array(tmp_path / "x.zarr", shape=X.shape, chunks=(3, 3), dtype=X.dtype)
    z[:] = X
    np.testing.assert_array_equal(as_input(z).data.compute(), X)


def test_a_dataarray_gives_its_data_and_is_kept_for_the_output(nothing_computed):
    over_numpy = xr.DataArray(X, dims=("time", "band"))
    given = as_input(over_numpy)
    assert_form(given, "memory", data=over_numpy.data)
    assert given.dataarray is over_numpy and given.frame is None
    over_dask = xr.DataArray(da.from_array(X, chunks=4), dims=("time", "band"))
    given = as_input(over_dask)
    assert_form(given, "lazy", data=over_dask.data)
    assert given.dataarray is over_dask


def test_an_array_api_array_stays_on_its_device():
    on_device = xs.asarray(X, device=xs.Device("device1"))
    given = as_input(on_device)
    assert_form(given, "device", data=on_device)
    assert given.namespace is not None and given.frame is None and given.dataarray is None


def test_an_input_passes_through_and_is_frozen():
    given = as_input(X)
    assert as_input(given) is given
    with pytest.raises(dataclasses.FrozenInstanceError):
        given.data = None


@pytest.mark.parametrize("make", [lambda tmp: xr.Dataset({"pixels": (("time", "band"), X)}),
                                  lambda tmp: dask.delayed(X),
                                  lambda tmp: zarr.open_group(tmp / "g.zarr", mode="w")],
                         ids=["xarray-dataset", "dask-delayed", "zarr-group"])
def test_a_kind_nobody_knows_is_refused_by_name(tmp_path, make):
    unknown = make(tmp_path)
    with pytest.raises(TypeError, match=f"dkapprox does not read a {type(unknown).__module__}"):
        as_input(unknown)
    with pytest.raises(TypeError, match="does not read"):  # the estimators' door is the same one
        dkapprox.RBFSampler().fit(unknown)
