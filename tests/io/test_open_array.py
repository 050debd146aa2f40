"""open_array: Zarr v3/v2, groups, URLs and open nodes in; hostile or broken metadata refused early."""

import json
import os
import time
import tracemalloc

import dask.array as da
import numpy as np
import pytest
import zarr
from _io_helpers import make_store
from _rounding import transform_by_blocks

from dkapprox.errors import IncompleteStoreError, InputDataError, InputMissingError
from dkapprox.io import open_array, write_features
from dkapprox.kernel_approximation import RBFSampler


def _v3_json(**overrides):
    meta = {
        "zarr_format": 3, "node_type": "array", "shape": [1000, 10], "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [100, 10]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0.0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {},
    }
    meta.update(overrides)
    return meta


def _hand_written(tmp_path, meta, name="zarr.json"):
    path = tmp_path / "hand.zarr"
    path.mkdir()
    (path / name).write_text(json.dumps(meta) if not isinstance(meta, str) else meta)
    return str(path)


def test_v3_array_opens_lazily_aligned_to_its_chunks(input_store, data):
    X = open_array(input_store)
    assert isinstance(X, da.Array)
    assert X.chunks == ((100,) * 10, (12,))
    assert X.dtype == np.float32
    np.testing.assert_array_equal(X.compute(), data)


def test_v2_array_and_uneven_last_chunk(tmp_path, data):
    path = make_store(tmp_path / "v2.zarr", data[:950], (300, 5), zarr_format=2)
    X = open_array(path)
    assert X.chunks == ((300, 300, 300, 50), (5, 5, 2))
    np.testing.assert_array_equal(X.compute(), data[:950])


def test_group_needs_a_component_and_names_its_arrays(tmp_path, data):
    group = zarr.create_group(str(tmp_path / "g.zarr"))
    group.create_array("train", data=data, chunks=(250, 12))
    group.create_array("test", data=data[:10], chunks=(10, 12))
    with pytest.raises(InputDataError, match=r"g\.zarr: is a Zarr group.*test, train"):
        open_array(str(tmp_path / "g.zarr"))
    np.testing.assert_array_equal(open_array(str(tmp_path / "g.zarr"), "train").compute(), data)
    np.testing.assert_array_equal(open_array(group, "test").compute(), data[:10])
    with pytest.raises(InputMissingError, match="nope"):
        open_array(str(tmp_path / "g.zarr"), "nope")


def test_open_zarr_nodes_and_fsspec_urls(input_store, data):
    np.testing.assert_array_equal(open_array(zarr.open_array(input_store, mode="r")).compute(), data)
    np.testing.assert_array_equal(open_array("file://" + input_store).compute(), data)
    z = zarr.create_array("memory://dkapprox-tests/x.zarr", shape=(40, 3), chunks=(10, 3), dtype="f8",
                          overwrite=True)
    z[...] = np.arange(120.0).reshape(40, 3)
    X = open_array("memory://dkapprox-tests/x.zarr")
    assert X.chunks == ((10,) * 4, (3,))
    np.testing.assert_array_equal(X.compute(scheduler="threads"), np.arange(120.0).reshape(40, 3))


def test_missing_paths(tmp_path):
    with pytest.raises(InputMissingError, match="no such file") as info:
        open_array(str(tmp_path / "absent.zarr"))
    assert isinstance(info.value, FileNotFoundError)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputMissingError, match="empty"):
        open_array(str(tmp_path / "empty"))
    (tmp_path / "data.csv").write_text("1,2\n")
    with pytest.raises(InputDataError, match="is a file"):
        open_array(str(tmp_path / "data.csv"))


def test_a_trillion_chunks_fail_at_once_without_memory(tmp_path):
    meta = _v3_json(shape=[10**12, 10**12], chunk_grid={"name": "regular", "configuration": {"chunk_shape": [1, 1]}})
    path = _hand_written(tmp_path, meta)
    assert os.path.getsize(os.path.join(path, "zarr.json")) < 500
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(InputDataError, match=r"hand\.zarr: 1,000,000,000,000,000,000,000,000 chunks"):
        open_array(path)
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert seconds < 1.0
    assert peak < 20 * 2**20


def test_the_chunk_cap_is_configurable(input_store):
    with pytest.raises(InputDataError, match="10 chunks .* exceed max_chunks=9"):
        open_array(input_store, max_chunks=9)
    assert open_array(input_store, max_chunks=10).numblocks == (10, 1)


@pytest.mark.parametrize("meta, message", [
    (_v3_json(data_type="complex64", fill_value=[0.0, 0.0]), "complex64 is not numeric"),
    (_v3_json(data_type="string", fill_value="", codecs=[{"name": "vlen-utf8"}]), "is not numeric"),
    (_v3_json(shape=[10, 10, 10], chunk_grid={"name": "regular", "configuration": {"chunk_shape": [5, 5, 5]}}),
     "expected a 2-D array"),
    (_v3_json(shape=[-5, 10]), "broken Zarr metadata"),
    (_v3_json(chunk_grid={"name": "regular", "configuration": {"chunk_shape": [0, 10]}}),
     r"invalid shape \(1000, 10\) or chunks \(0, 10\)"),
    (_v3_json(codecs=[{"name": "no-such-codec"}]), "broken Zarr metadata"),
    (_v3_json(shape=[10**9, 10**9], chunk_grid={"name": "regular", "configuration": {"chunk_shape": [10**6, 10**6]}}),
     "max_chunk_bytes"),
    ('{"zarr_format": 3, "node_type": "array", "shape": [1', "broken Zarr metadata"),
], ids=["complex", "string", "3d", "negative-shape", "zero-chunk", "unknown-codec", "huge-chunk", "truncated"])
def test_hostile_or_broken_v3_metadata(tmp_path, meta, message):
    path = _hand_written(tmp_path, meta)
    with pytest.raises(InputDataError, match=message) as info:
        open_array(path)
    assert "hand.zarr" in str(info.value)


def test_v2_object_dtype_is_refused(tmp_path):
    meta = {"zarr_format": 2, "shape": [10, 3], "chunks": [5, 3], "dtype": "|O", "compressor": None,
            "fill_value": None, "filters": [{"id": "vlen-utf8"}], "order": "C"}
    path = _hand_written(tmp_path, meta, name=".zarray")
    with pytest.raises(InputDataError, match="not numeric"):
        open_array(path)


def test_oversized_metadata_is_refused_unread(tmp_path):
    path = tmp_path / "big.zarr"
    path.mkdir()
    with open(path / "zarr.json", "wb") as f:
        f.truncate(17 * 2**20)  # sparse file: nothing to read, but its size gives it away
    with pytest.raises(InputDataError, match="zarr.json is 17,825,792 bytes"):
        open_array(str(path))


def test_estimators_route_zarr_arrays_through_the_checks(tmp_path, input_store, data):
    est = RBFSampler(n_components=8, random_state=0)
    Z = est.fit(zarr.open_array(input_store, mode="r")).transform(zarr.open_array(input_store, mode="r"))
    np.testing.assert_array_equal(Z.compute(), transform_by_blocks(est, data, 100))  # the same blocks
    bad = zarr.create_array(str(tmp_path / "c.zarr"), shape=(10, 2), chunks=(5, 2), dtype="complex128")
    with pytest.raises(InputDataError, match=r"c\.zarr: data type complex128 is not numeric"):
        RBFSampler().fit(bad)


def test_dkapprox_outputs_open_only_when_complete(tmp_path):
    Z = da.ones((100, 4), chunks=(25, 4))
    out = str(tmp_path / "out.zarr")
    pending = write_features(Z, out, plan={"job": 1}, compute=False)
    with pytest.raises(IncompleteStoreError, match="0 of 4 blocks written"):
        open_array(out)
    with pytest.raises(IncompleteStoreError, match="0 of 4 blocks written"):
        open_array(out, component="features")
    with pytest.raises(IncompleteStoreError, match="0 of 4 blocks written"):
        RBFSampler().fit(zarr.open_group(out, mode="r")["features"])
    pending.delayed.compute()
    pending.finalize()
    np.testing.assert_array_equal(open_array(out).compute(), np.ones((100, 4)))
