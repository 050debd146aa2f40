"""A Parquet dataset as a job's input (dkapprox.io._parquet): files as blocks, read lazily, its listing as identity."""

import os

import dask
import numpy as np
import pandas as pd
import pytest

from dkapprox.errors import InputDataError, InputMissingError
from dkapprox.inputs import _lazy
from dkapprox.io._identity import InputIdentity, compare
from dkapprox.io._parquet import is_parquet, open_parquet


def _dataset(folder, sizes, seed=0):
    folder.mkdir()
    rng = np.random.default_rng(seed)
    frames = [pd.DataFrame({"key": [f"k{i}"] * n, "x": rng.random(n), "y": rng.random(n).astype("f4")})
              for i, n in enumerate(sizes)]
    for i, frame in enumerate(frames):
        frame.to_parquet(folder / f"part-{i}.parquet", index=False)
    return frames


def _refuse_compute(*args, **kwargs):
    raise AssertionError("something was computed")


def test_files_are_the_blocks_their_sizes_from_the_footers_and_nothing_is_computed(tmp_path):
    frames = _dataset(tmp_path / "d", [30, 70, 5])
    (tmp_path / "d" / "_common_metadata").write_text("not data")
    with dask.config.set(scheduler=_refuse_compute):
        dataset = open_parquet(tmp_path / "d", ["x", "y"])
        X = _lazy.frame_as_dask(dataset.frame(), dtype=dataset.dtype, rows=dataset.rows)
    assert X.chunks == ((30, 70, 5), (2,)) and X.dtype == np.float64
    assert dataset.keys == ("part-0.parquet", "part-1.parquet", "part-2.parquet")
    expected = pd.concat(frames)[["x", "y"]].to_numpy(dtype="f8")
    np.testing.assert_array_equal(X.compute(), expected)
    assert is_parquet(tmp_path / "d") and not is_parquet(tmp_path / "in.zarr")


def test_bad_datasets_are_refused_from_their_footers(tmp_path):
    _dataset(tmp_path / "d", [3, 3])
    with pytest.raises(InputDataError, match="column 'key' .* is not numeric"):
        open_parquet(tmp_path / "d")
    with pytest.raises(InputDataError, match="no column 'z'") as info:
        open_parquet(tmp_path / "d", ["x", "z"])
    assert info.value.absent_columns == ["z"]
    with pytest.raises(InputMissingError, match="no such file"):
        open_parquet(tmp_path / "nothing")
    os.mkdir(tmp_path / "e")
    with pytest.raises(InputMissingError, match="no Parquet data files"):
        open_parquet(tmp_path / "e")


def _identity(files):
    """An identity of files ``{key: (rows, stamp)}``."""
    keys = tuple(sorted(files))
    rows = tuple(files[k][0] for k in keys)
    metadata = {"format": "parquet", "shape": [sum(rows), 2], "columns": ["x", "y"], "types": ["double"] * 2,
                "dtype": "<f8"}
    return InputIdentity("/d", metadata, "mtime_ns", keys, (100,) * len(keys), tuple(files[k][1] for k in keys),
                         rows)


@pytest.mark.parametrize("now, rows, unchanged", [
    ({"a": (10, 1), "b": (10, 9), "c": (10, 1)}, ((10, 20),), False),  # b rewritten, same rows
    ({"a": (10, 1), "b": (15, 9), "c": (10, 1)}, ((10, 35),), False),  # b longer: c's rows moved
    ({"a": (10, 1), "b": (10, 1), "c": (10, 1), "d": (4, 1)}, ((30, 34),), False),  # a file added last
    ({"a": (10, 1), "ab": (4, 1), "b": (10, 1), "c": (10, 1)}, ((10, 34),), False),  # one added between
    ({"a": (10, 1), "b": (10, 1), "c": (10, 1)}, (), True),
])
def test_changed_files_name_the_rows_they_feed(now, rows, unchanged):
    before = _identity({"a": (10, 1), "b": (10, 1), "c": (10, 1)})
    change = compare(before, _identity(now))
    assert change.same is unchanged and change.rows == rows and not change.refusals
    assert unchanged or "files changed" in change.describe()
    assert compare(before.summary(), _identity(now)).same is unchanged  # a header's digest alone


def test_a_zarr_identity_keeps_its_digest():
    """Rows are in a Parquet identity's digest only: stores written before keep matching their inputs."""
    zarr_like = InputIdentity("/z", {"shape": [4, 2]}, "mtime_ns", ("c/0/0",), (8,), (1,))
    assert "rows" not in zarr_like.to_dict()
    assert InputIdentity.from_dict(zarr_like.to_dict()).digest == zarr_like.digest
    parquet = _identity({"a": (10, 1)})
    assert InputIdentity.from_dict(parquet.to_dict()) == parquet
