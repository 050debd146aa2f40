"""Features to a Parquet dataset (dkapprox.io._parquet_output), below the CLI: a retried part write."""

import os

import numpy as np
import pandas as pd

from dkapprox.inputs import _lazy
from dkapprox.io import open_parquet, write_parquet_features


def test_a_retried_part_write_leaves_a_part_its_first_try_recorded_alone(tmp_path):
    # a worker killed after a part's record was stored, before the scheduler heard its task finish: the
    # task runs again. Computing the writes twice opens that window on purpose; one record removed in
    # between stands for a first try killed between its part and its record.
    (tmp_path / "in").mkdir()
    frame = pd.DataFrame({"id": np.arange(90), "x": np.linspace(0, 1, 90)})
    for i in range(3):
        frame.iloc[30 * i:30 * (i + 1)].to_parquet(tmp_path / "in" / f"f{i}.parquet", index=False)
    dataset = open_parquet(tmp_path / "in", ["x"])
    X = _lazy.frame_as_dask(dataset.frame(), dtype=dataset.dtype, rows=dataset.rows)
    out = tmp_path / "out.parquet"
    seen = {}

    def twice(total):
        first = total.compute()
        seen["before"] = {p.name: p.stat().st_ino for p in out.glob("part-*")}
        os.remove(out / "_dkapprox" / "done" / "part-000001.parquet.json")
        seen["counts"] = (first, total.compute())  # every part's write again, as retries
        return seen["counts"][1]

    report = write_parquet_features(X * 2.0, str(out), dataset, names=["f"], keep=("id",), plan={}, run=twice)
    assert seen["counts"] == (3, 3) and report.blocks_written == 3
    after = {p.name: p.stat().st_ino for p in out.glob("part-*")}
    assert {k for k in after if after[k] != seen["before"][k]} == {"part-000001.parquet"}
    back = pd.read_parquet(out)
    np.testing.assert_array_equal(back["f"], frame["x"] * 2.0)
    np.testing.assert_array_equal(back["id"], frame["id"])
