"""Jobs over Parquet datasets (issue 30, section 2): real datasets written with pandas, real CLI runs.

A dataset's files are its blocks (in path order, row counts from the footers), its file listing
its identity (as a Zarr input's chunk listing is: ARCHITECTURE.md invariant 12), and its schema
is checked before any compute. The run on object storage is in tests/cli/test_object_storage.py.
"""

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest
from _rounding import transform_by_blocks

from dkapprox import io, models
from dkapprox.cli import main
from dkapprox.kernel_approximation import RBFSampler

ENV = dict(os.environ, PYTHONUNBUFFERED="1", DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="1")
FEATURES = ["a", "b", "c"]


def cli(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "dkapprox", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def cli_many(*argvs):
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda argv: cli(*argv), argvs))


def in_process(capsys, *args):
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, captured.out, captured.err)


def assert_ok(result):
    assert result.returncode == 0, (result.args, result.stdout, result.stderr)


def assert_one_line_error(result, code, *fragments):
    assert result.returncode == code, (result.args, result.returncode, result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])


def table(rows, seed, start=0, dtype="f4"):
    """A frame with a key, a timestamp, a label and three feature columns."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"id": np.arange(start, start + rows), "ts": pd.Timestamp("2026-01-01")
                          + pd.to_timedelta(np.arange(rows), unit="s"), "label": ["x"] * rows})
    for name in FEATURES:
        frame[name] = rng.standard_normal(rows).astype(dtype)
    return frame


def write_dataset(folder, sizes, seed=0):
    folder.mkdir(parents=True, exist_ok=True)
    frames = [table(n, seed + i, start=sum(sizes[:i])) for i, n in enumerate(sizes)]
    for i, frame in enumerate(frames):
        frame.to_parquet(folder / f"part.{i:03d}.parquet", index=False)
    (folder / "_SUCCESS").write_text("")  # a writer's marker, not data
    return frames


def values(folder, columns=FEATURES):
    """The dataset's rows as one array, files in path order (what a job reads)."""
    files = sorted(p for p in folder.iterdir() if p.suffix == ".parquet")
    return pd.concat([pd.read_parquet(p, columns=columns) for p in files]).to_numpy()


def parquet_base(tmp_path_factory, name):
    """A folder for a module's datasets, with the in-process cluster config its jobs run on (local.yaml)."""
    base = tmp_path_factory.mktemp(name)
    (base / "local.yaml").write_text("kind: local\nn_workers: 1\nthreads_per_worker: 2\n"
                                     "processes: false\ndashboard_address: null\n")
    return base


def write_s3_dataset(fs, seed, path="data/in.parquet"):
    """Three 100-row files (id, a, b) on the suite's S3 server; the frames written."""
    rng = np.random.default_rng(seed)
    frames = [pd.DataFrame({"id": np.arange(i * 100, (i + 1) * 100), "a": rng.standard_normal(100),
                            "b": rng.standard_normal(100)}) for i in range(3)]
    for i, frame in enumerate(frames):
        with fs.open(f"{path}/part.{i}.parquet", "wb") as f:
            frame.to_parquet(f, index=False)
    return frames


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return parquet_base(tmp_path_factory, "parquet")


def test_fit_transform_featurize_read_the_files_as_blocks_and_equal_the_library(base):
    data = base / "sales.parquet"
    write_dataset(data, [300, 300, 200])
    X = values(data)
    assert X.dtype == np.float32
    c = ("--cluster", base / "local.yaml")
    job = ("--method", "rbf", "--n-components", 64, "--gamma", 0.5)
    featurize, fit = cli_many(("featurize", data, "--columns", "a,b,c", *job, "--out", base / "f.zarr", *c),
                              ("fit", f"{data}/", "--columns", "a,b,c", *job, "--out", base / "model", *c))
    assert_ok(featurize)
    assert_ok(fit)
    assert "3 blocks written, 0 already there, of 3" in featurize.stdout
    assert "reading" in featurize.stderr and "3 files, 800 rows, columns a, b, c" in featurize.stderr
    assert "(800 x 3)" in fit.stdout
    transform, again = cli_many(
        ("transform", data, "--columns", "a,b,c", "--model", base / "model", "--out", base / "t.zarr", *c),
        ("featurize", data, "--columns", "a,b,c", *job, "--out", base / "f.zarr", *c))
    assert_ok(transform)
    assert_ok(again)
    assert "already complete for this job; nothing to do" in again.stdout
    expected = transform_by_blocks(RBFSampler(n_components=64, gamma=0.5, random_state=0).fit(X), X, 300)
    for out in ("f.zarr", "t.zarr"):  # the files' 300-row blocks give the library's bits, float32 kept
        got = io.open_features(base / out).compute()
        assert got.dtype == np.float32 and got.tobytes() == expected.tobytes(), out
    assert models.load(base / "model").n_features_in_ == 3
    plan = io.describe(base / "f.zarr")["plan"]["input"]
    assert plan["format"] == "parquet" and plan["column_names"] == FEATURES
    other_order = cli("featurize", data, "--columns", "c,b,a", *job, "--out", base / "f.zarr", *c)
    assert_one_line_error(other_order, 73, "its columns changed", "--overwrite")  # never resumed into


def test_every_column_by_default_a_single_file_and_more_blocks_than_files(base):
    """Without --columns every column is a feature; --block-rows splits files (each file is read whole)."""
    single = base / "one.parquet"
    frame = table(250, 5)[FEATURES]
    frame.to_parquet(single, index=False)
    c = ("--cluster", base / "local.yaml")
    result = cli("featurize", single, "--method", "rbf", "--n-components", 16, "--block-rows", 100,
                 "--out", base / "one.zarr", *c)
    assert_ok(result)
    assert "3 blocks written" in result.stdout
    X = frame.to_numpy()
    expected = transform_by_blocks(RBFSampler(n_components=16, random_state=0).fit(X), X, 100)
    assert io.open_features(base / "one.zarr").compute().tobytes() == expected.tobytes()


def _blocks_done(out):
    try:
        return io.describe(out)["blocks_done"]
    except Exception:  # not created yet
        return -1


def test_a_killed_job_resumes_like_a_zarr_input_s(tmp_path):
    data = tmp_path / "many.parquet"
    data.mkdir()
    rng = np.random.default_rng(2)
    for i in range(300):  # 300 files of 100 rows: 300 blocks
        pd.DataFrame(rng.standard_normal((100, 4)), columns=list("abcd")).to_parquet(data / f"p{i:04d}.parquet")
    (tmp_path / "one.yaml").write_text("kind: local\nn_workers: 1\nthreads_per_worker: 1\n"
                                       "processes: false\ndashboard_address: null\n")
    job = ("featurize", data, "--method", "rbf", "--n-components", 256, "--cluster", tmp_path / "one.yaml")
    reference = cli(*job, "--out", tmp_path / "ref.zarr")
    assert_ok(reference)
    out = tmp_path / "z.zarr"
    proc = subprocess.Popen([sys.executable, "-m", "dkapprox", *map(str, job), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:  # the job is killed on every way out, a failed assertion too: the test bed leaves no process behind
        deadline = time.monotonic() + 300  # bounded; the cluster's start alone took over a minute on a loaded CI
        while _blocks_done(out) < 20:
            assert proc.poll() is None, f"the job ended before block 20: {proc.communicate()}"
            assert time.monotonic() < deadline, f"{_blocks_done(out)} blocks after 300 s"
            time.sleep(0.01)
    finally:
        proc.kill()
        proc.communicate()
    done = _blocks_done(out)
    assert 20 <= done < 300 and io.describe(out)["status"] == "writing"
    final = cli(*job, "--out", out)
    assert_ok(final)
    assert f"{300 - done} blocks written, {done} already there, of 300" in final.stdout
    assert io.open_features(out).compute().tobytes() == io.open_features(tmp_path / "ref.zarr").compute().tobytes()


def test_a_changed_dataset_is_never_resumed_and_refresh_rewrites_the_blocks_of_changed_files(tmp_path):
    data = tmp_path / "daily.parquet"
    write_dataset(data, [100, 100, 100, 100])
    (tmp_path / "local.yaml").write_text("kind: local\nn_workers: 1\nthreads_per_worker: 2\n"
                                         "processes: false\ndashboard_address: null\n")
    job = ("featurize", data, "--columns", "a,b,c", "--method", "rbf", "--n-components", 16, "--block-rows", 100,
           "--cluster", tmp_path / "local.yaml")
    out = tmp_path / "f.zarr"
    assert_ok(cli(*job, "--out", out))

    table(100, 99, start=200).to_parquet(data / "part.002.parquet", index=False)  # rewritten: same rows
    rerun, verify = cli_many((*job, "--out", out), ("verify", out))
    assert_one_line_error(rerun, 73, "1 files changed, 0 added, 0 removed", "rows 200-300", "--refresh")
    assert verify.returncode == 65 and "1 files changed" in verify.stdout, verify.stdout
    refreshed = cli(*job, "--out", out, "--refresh")
    assert_ok(refreshed)
    assert "1 blocks written, 3 already there, of 4" in refreshed.stdout

    table(50, 98, start=400).to_parquet(data / "part.004.parquet", index=False)  # a file added: rows appended
    appended = cli(*job, "--out", out, "--refresh")
    assert_ok(appended)
    assert "1 blocks written, 4 already there, of 5" in appended.stdout

    table(130, 97, start=100).to_parquet(data / "part.001.parquet", index=False)  # longer: later rows shift
    shifted = cli(*job, "--out", out, "--refresh")
    assert_ok(shifted)
    assert "4 blocks written, 1 already there, of 5" in shifted.stdout

    fresh, again = cli_many((*job, "--out", tmp_path / "fresh.zarr"), (*job, "--out", out))
    assert_ok(fresh)
    assert "already complete for this job" in again.stdout
    got = io.open_features(out).compute()
    assert got.shape == (480, 16) and got.tobytes() == io.open_features(tmp_path / "fresh.zarr").compute().tobytes()

    (data / "part.004.parquet").unlink()  # rows removed: a refresh cannot follow
    shrunk = cli(*job, "--out", out, "--refresh")
    assert_one_line_error(shrunk, 73, "it shrank from 480 to 430 rows", "--overwrite")


@pytest.fixture(scope="module")
def bad(base):
    """Datasets each broken in one way."""
    made = {}
    for name in ("text", "nulls", "types", "lacks", "ok"):
        write_dataset(base / f"{name}.parquet", [100, 100])
        made[name] = base / f"{name}.parquet"
    frame = table(100, 1, start=100)
    frame.loc[[17, 40], "b"] = None
    frame.to_parquet(made["nulls"] / "part.001.parquet", index=False)
    frame = table(100, 1, start=100)
    frame["b"] = np.arange(100)  # int64 where the first file has float
    frame.to_parquet(made["types"] / "part.001.parquet", index=False)
    table(100, 1, start=100).drop(columns="b").to_parquet(made["lacks"] / "part.001.parquet", index=False)
    import zarr

    zarr.create_array(str(base / "x.zarr"), shape=(10, 2), chunks=(5, 2), dtype="f4")[:] = 1.0
    (base / "empty.parquet").mkdir()
    (base / "empty.parquet" / "_SUCCESS").write_text("")
    return made


def test_bad_parquet_input_gets_one_line_the_right_code_and_writes_nothing(base, bad, capsys):
    c = ("--cluster", base / "local.yaml")
    job = ("--method", "rbf", "--n-components", 8)
    never = base / "never.zarr"
    for args, code, fragments in [
        (("featurize", bad["text"], *job, "--out", never), 65,
         ("columns 'ts' (timestamp[", "'label' (", "are not numeric", "pass --columns naming the numeric")),
        (("fit", bad["text"], "--columns", "a,label", *job, "--out", base / "m"), 65,
         ("column 'label' (", "is not numeric")),
        (("featurize", bad["ok"], "--columns", "a,z", *job, "--out", never), 2,
         ("--columns", "no column 'z' in the dataset (its columns: id, ts, label, a, b, c)")),
        (("featurize", bad["types"], "--columns", "a,b", *job, "--out", never), 65,
         ("the schema changed between files: column 'b' is int64 in part.001.parquet but float in "
          "part.000.parquet",)),
        (("fit", bad["lacks"], "--columns", "a,b", *job, "--out", base / "m"), 65,
         ("the schema changed between files: part.001.parquet has no column 'b'",)),
        (("featurize", base / "nothing.parquet", *job, "--out", never), 66, ("no such file or directory",)),
        (("featurize", base / "empty.parquet", *job, "--out", never), 66, ("no Parquet data files",)),
        (("featurize", bad["ok"], "--columns", "a,b", "--component", "x", *job, "--out", never), 2,
         ("--component", "Parquet dataset")),
        (("featurize", bad["ok"], "--columns", "a,,b", *job, "--out", never), 2, ("--columns",)),
        (("featurize", base / "x.zarr", "--columns", "a", *job, "--out", never), 2,
         ("--columns", "is a Zarr store, not a Parquet dataset")),
    ]:
        assert_one_line_error(in_process(capsys, *args, *c), code, *fragments)
    assert not never.exists() and not (base / "m").exists()
    # nulls are found in the footers' statistics, before anything is read or written
    nulls = cli("featurize", bad["nulls"], "--columns", "a,b,c", *job, "--out", base / "nulls.zarr", *c)
    assert_one_line_error(nulls, 65, "nulls.parquet/part.001.parquet: column 'b' holds 2 null values",
                          "footer's statistics")
    assert not (base / "nulls.zarr").exists()
    fit_nulls = cli("fit", bad["nulls"], "--columns", "a,b,c", "--method", "nystroem", "--n-components", 8,
                    "--out", base / "m", *c)
    assert_one_line_error(fit_nulls, 65, "column 'b' holds 2 null values")
    assert not (base / "m").exists()
    # a file written without statistics: its nulls are found when it is read, naming the row
    import pyarrow.parquet as pq

    no_stats = base / "nostats.parquet"
    write_dataset(no_stats, [100, 100])
    pq.write_table(pq.read_table(bad["nulls"] / "part.001.parquet"), no_stats / "part.001.parquet",
                   write_statistics=False)
    late = cli("featurize", no_stats, "--columns", "a,b,c", *job, "--out", base / "late.zarr", *c)
    assert_one_line_error(late, 65, "nostats.parquet/part.001.parquet: column 'b' holds 2 null or NaN values",
                          "row 17")
