"""Features to a Parquet dataset with key columns passed through (issue 30, section 2: "Output the ETL can
join back"): real datasets, real CLI runs, a job killed with SIGKILL and resumed.

The output is a folder of one ``part-NNNNNN.parquet`` a block (features named by
``get_feature_names_out()``, then the kept columns, in input row order), job state under a hidden
``_dkapprox/``, parts renamed into place only when whole, ``_SUCCESS`` last
(:mod:`dkapprox.io._parquet_output`).
"""

import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
from _rounding import transform_by_blocks
from cli.test_parquet import (
    ENV,
    assert_ok,
    assert_one_line_error,
    cli,
    in_process,
    parquet_base,
    table,
    write_dataset,
    write_s3_dataset,
)

from dkapprox import models
from dkapprox.kernel_approximation import RBFSampler

FEATURES = ["a", "b", "c"]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return parquet_base(tmp_path_factory, "parquet_out")


def parts(out):
    """The part files a Parquet reader sees (no path part starting with _ or .), sorted."""
    return sorted(p.name for p in out.iterdir() if not p.name.startswith(("_", ".")))


def test_featurize_and_transform_write_features_and_kept_keys_in_input_row_order(base):
    data = base / "sales.parquet"
    frames = write_dataset(data, [300, 300, 200])
    source = pd.concat(frames, ignore_index=True)
    X = source[FEATURES].to_numpy()
    c = ("--cluster", base / "local.yaml")
    job = ("--method", "rbf", "--n-components", 8, "--gamma", 0.5)
    out = base / "features.parquet"
    featurize = cli("featurize", data, "--columns", "a,b,c", "--keep-columns", "id,ts,label", *job,
                    "--save-model", base / "model", "--out", out, *c)
    assert_ok(featurize)
    assert "3 blocks written, 0 already there, of 3" in featurize.stdout
    assert parts(out) == ["part-000000.parquet", "part-000001.parquet", "part-000002.parquet"]
    assert (out / "_SUCCESS").exists() and (out / "_dkapprox" / "job.json").exists()

    got = pd.read_parquet(out)  # the readers skip _SUCCESS and _dkapprox/: exactly the rows
    names = [f"rbfsampler{i}" for i in range(8)]
    assert list(got.columns) == [*names, "id", "ts", "label"] and len(got) == 800
    est = RBFSampler(n_components=8, gamma=0.5, random_state=0).fit(X)
    expected = transform_by_blocks(est, X, 300)
    assert got[names].to_numpy().dtype == np.float32
    assert got[names].to_numpy().tobytes() == expected.tobytes()
    pd.testing.assert_frame_equal(got[["id", "ts", "label"]], source[["id", "ts", "label"]], check_dtype=False)
    assert got["ts"].tolist() == source["ts"].tolist() and got["id"].tolist() == source["id"].tolist()
    assert pads.dataset(out, format="parquet").count_rows() == 800
    assert [pq.ParquetFile(out / p).metadata.num_rows for p in parts(out)] == [300, 300, 200]

    t_out = base / "t.parquet"  # transform likewise, with blocks that cross files: keys still row for row
    transform = cli("transform", data, "--columns", "a,b,c", "--keep-columns", "id", "--model", base / "model",
                    "--block-rows", 250, "--out", t_out, *c)
    assert_ok(transform)
    assert "4 blocks written" in transform.stdout
    t = pd.read_parquet(t_out)
    assert list(t.columns) == [*names, "id"] and t["id"].tolist() == list(range(800))
    expected = transform_by_blocks(models.load(base / "model"), X, 250)
    assert t[names].to_numpy().tobytes() == expected.tobytes()

    again = cli("featurize", data, "--columns", "a,b,c", "--keep-columns", "id,ts,label", *job, "--out", out, *c)
    assert_ok(again)
    assert "already complete for this job; nothing to do" in again.stdout
    other = cli("featurize", data, "--columns", "a,b,c", "--keep-columns", "id", *job, "--out", out, *c)
    assert_one_line_error(other, 73, "another job", "--overwrite")
    replaced = cli("featurize", data, "--columns", "a,b,c", "--keep-columns", "id", *job, "--out", out,
                   "--overwrite", *c)
    assert_ok(replaced)
    assert list(pd.read_parquet(out).columns) == [*names, "id"]

    table(300, 77, start=300).to_parquet(data / "part.001.parquet", index=False)  # the input changed
    changed = cli("featurize", data, "--columns", "a,b,c", "--keep-columns", "id", *job, "--out", out, *c)
    assert_one_line_error(changed, 73, "the input changed", "--overwrite")


def _done(out):
    """Blocks recorded done: a record is written beside its name as ``<name>.<uuid>.tmp`` and renamed, so a
    temporary there is no record yet (one counted at the kill once made the rerun's count look one short)."""
    try:
        return sum(not name.endswith(".tmp") for name in os.listdir(out / "_dkapprox" / "done"))
    except FileNotFoundError:
        return -1


def test_a_job_killed_mid_run_leaves_only_whole_parts_and_a_rerun_gives_the_same_bytes(tmp_path):
    data = tmp_path / "many.parquet"
    data.mkdir()
    rng = np.random.default_rng(3)
    for i in range(300):  # 300 files of 100 rows: 300 parts
        frame = pd.DataFrame(rng.standard_normal((100, 3)), columns=FEATURES)
        frame.insert(0, "id", np.arange(i * 100, (i + 1) * 100))
        frame.to_parquet(data / f"p{i:04d}.parquet", index=False)
    (tmp_path / "one.yaml").write_text("kind: local\nn_workers: 1\nthreads_per_worker: 1\n"
                                       "processes: false\ndashboard_address: null\n")
    job = ("featurize", data, "--columns", "a,b,c", "--keep-columns", "id", "--method", "rbf", "--n-components", 64,
           "--cluster", tmp_path / "one.yaml")
    reference = tmp_path / "ref.parquet"
    assert_ok(cli(*job, "--out", reference))
    out = tmp_path / "out.parquet"
    proc = subprocess.Popen([sys.executable, "-m", "dkapprox", *map(str, job), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:  # killed on every way out, a failed assertion too: the test bed leaves no process behind
        deadline = time.monotonic() + 300  # bounded; a loaded CI machine took over a minute to start the cluster
        while _done(out) < 20:
            assert proc.poll() is None, f"the job ended before part 20: {proc.communicate()}"
            assert time.monotonic() < deadline, f"{_done(out)} parts after 300 s"
            time.sleep(0.005)
    finally:
        proc.kill()  # SIGKILL: no cleanup runs
        proc.communicate()
    done = _done(out)
    assert 20 <= done < 300
    assert not (out / "_SUCCESS").exists()
    visible = parts(out)
    assert done <= len(visible) <= done + 1  # at most one part renamed whose record the kill stopped
    for name in visible:  # every part a reader sees is whole: the uninterrupted run's very bytes
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    assert len(pd.read_parquet(out)) == 100 * len(visible)  # readers skip the hidden temporaries

    final = cli(*job, "--out", out)
    assert_ok(final)
    assert f"{300 - done} blocks written, {done} already there, of 300" in final.stdout
    assert parts(out) == parts(reference) and len(parts(out)) == 300
    for name in parts(out):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    assert (out / "_SUCCESS").exists()
    assert not [p for p in out.iterdir() if p.name.startswith("_tmp-")]
    got = pd.read_parquet(out)
    assert got["id"].tolist() == list(range(30_000))


def test_bad_uses_of_parquet_output_exit_2_before_any_compute(base, capsys):
    data = base / "keys.parquet"
    write_dataset(data, [50, 50])
    import zarr

    zarr.create_array(str(base / "x.zarr"), shape=(10, 2), chunks=(5, 2), dtype="f4")[:] = 1.0
    (base / "foreign.parquet").mkdir()
    (base / "foreign.parquet" / "notes.txt").write_text("not ours")
    c = ("--cluster", base / "local.yaml")
    job = ("--method", "rbf", "--n-components", 4)
    never = base / "never.parquet"
    for args, code, fragments in [
        (("featurize", data, "--columns", "a,b", "--keep-columns", "id", *job, "--out", base / "never.zarr"), 2,
         ("--keep-columns", "no Parquet dataset")),
        (("featurize", base / "x.zarr", "--keep-columns", "id", *job, "--out", never), 2,
         ("--keep-columns needs a Parquet INPUT", "is a Zarr store")),
        (("featurize", base / "x.zarr", *job, "--out", never), 2, ("a Parquet --out is written from a Parquet INPUT",)),
        (("featurize", data, "--columns", "a,b", "--keep-columns", "id,zz", *job, "--out", never), 2,
         ("--keep-columns", "no column 'zz' in the dataset (its columns: id, ts, label, a, b, c)")),
        (("featurize", data, "--columns", "a,b", "--keep-columns", "id,,ts", *job, "--out", never), 2,
         ("--keep-columns",)),
        (("featurize", data, "--columns", "a,b", "--keep-columns", "id,id", *job, "--out", never), 2,
         ("--keep-columns", "named twice")),
        (("featurize", data, "--columns", "a,b", "--keep-columns", "id", *job, "--out", never, "--refresh"), 2,
         ("--refresh", "not refreshed")),
        (("featurize", data, "--columns", "a,b", "--keep-columns", "rbfsampler0", *job, "--out", never), 2,
         ("--keep-columns", "no column 'rbfsampler0'")),
    ]:
        assert_one_line_error(in_process(capsys, *args, *c), code, *fragments)
    assert not never.exists() and not (base / "never.zarr").exists()
    clash = base / "clash.parquet"  # a kept column named as a feature: known once the model is fitted
    clash.mkdir()
    table(40, 4).rename(columns={"label": "rbfsampler0"}).to_parquet(clash / "part.0.parquet", index=False)
    named = in_process(capsys, "featurize", clash, "--columns", "a,b", "--keep-columns", "id,rbfsampler0", *job,
                       "--out", never, *c)
    assert_one_line_error(named, 2, "--keep-columns", "column 'rbfsampler0' is also a feature's name")
    assert not never.exists()
    foreign = in_process(capsys, "featurize", data, "--columns", "a,b", *job, "--out", base / "foreign.parquet",
                         "--overwrite", *c)
    assert_one_line_error(foreign, 73, "not a dkapprox Parquet output", "refusing to touch it")
    assert sorted(os.listdir(base / "foreign.parquet")) == ["notes.txt"]


def test_a_parquet_output_on_s3_writes_each_part_s_key_once_and_resumes(s3, tmp_path):
    """On S3 a part's key is written directly (an object appears whole); the lease and records are objects."""
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    frames = write_s3_dataset(fs, 5)
    env = {k: v for k, v in ENV.items() if not k.startswith("AWS_")}
    env.update(s3.env(), AWS_EC2_METADATA_DISABLED="true")
    (tmp_path / "threads.yaml").write_text("kind: local\nn_workers: 1\nthreads_per_worker: 2\n"
                                           "processes: false\ndashboard_address: null\n")
    job = ("featurize", "s3://data/in.parquet/", "--columns", "a,b", "--keep-columns", "id", "--method", "rbf",
           "--n-components", 8, "--out", "s3://data/f.parquet", "--cluster", tmp_path / "threads.yaml")
    run = subprocess.run([sys.executable, "-m", "dkapprox", *map(str, job)], capture_output=True, text=True,
                         timeout=240, env=env)
    assert_ok(run)
    assert "3 blocks written" in run.stdout
    fs.invalidate_cache()
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls("data/f.parquet")) == [
        "_SUCCESS", "_dkapprox", "part-000000.parquet", "part-000001.parquet", "part-000002.parquet"]
    assert not fs.exists("data/f.parquet/_dkapprox/dkapprox-lease.json")  # given back
    with fs.open("data/f.parquet/part-000001.parquet", "rb") as f:
        part = pd.read_parquet(f)
    X = pd.concat(frames)[["a", "b"]].to_numpy()
    expected = transform_by_blocks(RBFSampler(n_components=8, random_state=0).fit(X), X, 100)
    assert part["id"].tolist() == list(range(100, 200))
    assert part.drop(columns="id").to_numpy().tobytes() == expected[100:200].tobytes()

    fs.rm("data/f.parquet/_SUCCESS")  # as a run killed before its end leaves it: a part without its record
    fs.rm("data/f.parquet/_dkapprox/done/part-000002.parquet.json")
    resumed = subprocess.run([sys.executable, "-m", "dkapprox", *map(str, job)], capture_output=True, text=True,
                             timeout=240, env=env)
    assert_ok(resumed)
    assert "1 blocks written, 2 already there, of 3" in resumed.stdout
    fs.invalidate_cache()
    assert fs.exists("data/f.parquet/_SUCCESS")
