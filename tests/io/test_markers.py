"""Block records packed into logs (dkapprox.io._markers): read, cleared and checked as single ones are,
on disk and on the S3 server, written by a real LocalCluster's workers."""

import os

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

from dkapprox.errors import InputDataError
from dkapprox.io import describe, open_features, verify, write_features
from dkapprox.io._location import locate
from dkapprox.io._markers import LOG, clear_rows, encode, read
from dkapprox.io._output_store import begin_refresh

BLOCKS = 20


@pytest.fixture(params=["local", "s3"])
def base(request, tmp_path):
    if request.param == "s3":
        request.getfixturevalue("s3")
        return f"s3://data/{request.node.name.replace('[', '-').rstrip(']')}"
    return str(tmp_path)


def _features():
    return da.random.default_rng(1).standard_normal((BLOCKS * 10, 6), chunks=(10, 6)).astype(np.float32)


def _objects(out, part):
    fs, path = locate(out).filesystem()
    fs.invalidate_cache()
    return [p for p in fs.find(f"{path}/blocks_done/{part}")]


def _group(out):
    return zarr.open_group(locate(out).store(read_only=False), mode="r+")


def test_workers_pack_their_records_and_every_reader_counts_them(base):
    from distributed import Client, LocalCluster

    out, fresh = f"{base}/packed.zarr", f"{base}/single.zarr"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster), dask.config.set({"dkapprox.io.markers-per-log": 3}):
        report = write_features(_features(), out, plan={})
    assert report.blocks_written == BLOCKS
    logs, singles = _objects(out, LOG), _objects(out, "c")
    assert len(logs) >= 4 and len(singles) <= 2 * 2  # each worker keeps fewer than 3 unpacked
    assert 3 * len(logs) + len(singles) == BLOCKS  # a block packed is deleted as a single object
    with dask.config.set({"dkapprox.io.markers-per-log": 0}):
        write_features(_features(), fresh, plan={})
    assert not _objects(fresh, LOG) and len(_objects(fresh, "c")) == BLOCKS
    packed, single = (read(_group(path), (BLOCKS, 1), values=True) for path in (out, fresh))
    np.testing.assert_array_equal(packed, single)
    assert verify(out).ok and describe(out)["blocks_done"] == BLOCKS

    group = _group(out)  # a refresh of rows 2, 7 and 19: unrecorded wherever they were recorded
    begin_refresh(group, group.attrs["dkapprox"], group.attrs["dkapprox"], (2, 7, 19))
    left = read(_group(out), (BLOCKS, 1)) != 0
    assert sorted(np.flatnonzero(~left[:, 0])) == [2, 7, 19] and describe(out)["blocks_done"] == BLOCKS - 3
    with pytest.raises(Exception, match="17 of 20 blocks written"):
        open_features(out)
    assert write_features(_features(), out, plan={}).blocks_written == 3
    assert verify(out).ok
    np.testing.assert_array_equal(open_features(out).compute(), open_features(fresh).compute())


def test_a_block_in_a_log_and_as_a_single_record_reads_once_and_a_foreign_log_is_named(tmp_path):
    out = str(tmp_path / "z.zarr")
    with dask.config.set({"dkapprox.io.markers-per-log": 0}):  # a crash between a log and its deletes
        pending = write_features(_features(), out, plan={}, compute=False)
    pending.delayed.compute()
    group = _group(out)
    values = read(group, (BLOCKS, 1), values=True)
    entries = [(i, 0, int(values[i, 0])) for i in range(0, BLOCKS, 2)]
    os.makedirs(os.path.join(out, "blocks_done", LOG))
    with open(os.path.join(out, "blocks_done", LOG, "a"), "wb") as f:
        f.write(encode(entries))
    np.testing.assert_array_equal(read(group, (BLOCKS, 1), values=True), values)
    pending.finalize()
    assert verify(out).ok
    clear_rows(group, range(0, BLOCKS, 4))  # the log is stored again without them, single records go
    assert (read(group, (BLOCKS, 1)) != 0)[:, 0].tolist() == [i % 4 != 0 for i in range(BLOCKS)]
    assert len(os.listdir(os.path.join(out, "blocks_done", LOG))) == 1

    with open(os.path.join(out, "blocks_done", LOG, "b"), "wb") as f:
        f.write(b"not a log")
    with pytest.raises(InputDataError, match=r"blocks_done/log/b: not a dkapprox block log"):
        read(group, (BLOCKS, 1))
    with open(os.path.join(out, "blocks_done", LOG, "b"), "wb") as f:
        f.write(encode([(BLOCKS, 0, 5)]))
    with pytest.raises(InputDataError, match=r"record of block \(20, 0\); the layout has \(20, 1\)"):
        read(group, (BLOCKS, 1))


@pytest.mark.parametrize("value", [-1, 2.5, "10", True])
def test_a_bad_markers_per_log_is_a_value_error_before_anything_is_written(tmp_path, value):
    out = tmp_path / "z.zarr"
    with dask.config.set({"dkapprox.io.markers-per-log": value}), \
            pytest.raises(ValueError, match="markers-per-log must be an int >= 0"):
        write_features(_features(), str(out), plan={})
    assert not out.exists()
