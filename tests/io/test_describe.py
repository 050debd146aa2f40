"""describe: JSON-safe facts about output stores, plain Zarr arrays and groups, from metadata only."""

import json

import dask.array as da
import pytest
import zarr

from dkapprox.errors import InputDataError, InputMissingError
from dkapprox.io import describe, verify, write_features


def test_describe_an_output_store_while_and_after_writing(tmp_path):
    out = str(tmp_path / "o.zarr")
    plan = {"input": {"path": "/data/x.zarr", "shape": [100, 3]}, "model": "sha256:abc"}
    pending = write_features(da.ones((100, 3), chunks=(30, 3), dtype="f4"), out, plan=plan, compute=False)
    writing = describe(out)
    json.dumps(writing)
    assert writing["kind"] == "features" and writing["status"] == "writing"
    assert (writing["blocks_total"], writing["blocks_done"]) == (4, 0)
    assert writing["shape"] == [100, 3] and writing["chunks"] == [30, 3] and writing["dtype"] == "float32"
    assert writing["plan"] == plan and writing["package_version"] and writing["completed"] is None
    pending.delayed.compute()
    pending.finalize()
    done = describe(out)
    assert done["status"] == "complete" and done["blocks_done"] == 4 and done["completed"]


def test_a_complete_stores_count_comes_from_its_status_and_verify_lists_the_markers_again(tmp_path):
    out = tmp_path / "o.zarr"
    write_features(da.ones((100, 3), chunks=(25, 3), dtype="f4"), str(out), plan={})
    (out / "blocks_done" / "c" / "2" / "0").unlink()  # damage after completion: a lost marker object
    d = describe(str(out))  # no listing of 10^5 markers to say a finished store is finished
    assert d["status"] == "complete" and d["blocks_done"] == d["blocks_total"] == 4
    report = verify(str(out))
    assert not report.ok and report.missing == [[50, 75]]


def test_describe_plain_zarr(tmp_path, input_store):
    d = describe(input_store)
    assert d == {"kind": "array", "path": input_store, "shape": [1000, 12], "chunks": [100, 12],
                 "dtype": "float32", "zarr_format": 3}
    group = zarr.create_group(str(tmp_path / "g.zarr"), zarr_format=2)
    group.create_array("a", shape=(4, 2), chunks=(2, 2), dtype="i4")
    g = describe(str(tmp_path / "g.zarr"))
    json.dumps(g)
    assert g["kind"] == "group" and g["zarr_format"] == 2 and g["arrays"]["a"]["shape"] == [4, 2]


def test_describe_missing_or_broken(tmp_path):
    with pytest.raises(InputMissingError):
        describe(str(tmp_path / "absent"))
    (tmp_path / "bad.zarr").mkdir()
    (tmp_path / "bad.zarr" / "zarr.json").write_text("{")
    with pytest.raises(InputDataError, match=r"bad\.zarr: broken Zarr metadata"):
        describe(str(tmp_path / "bad.zarr"))
