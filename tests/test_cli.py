"""The dkapprox command line, run as a real subprocess: exit codes, messages, round trips.

Most runs use an in-process LocalCluster (``processes: false``) to keep the
suite fast; the demo and the worker-death test use real worker processes.
"""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import zarr

from dkapprox import io
from dkapprox.kernel_approximation import RBFSampler
from dkapprox.nystroem import Nystroem

ENV = dict(os.environ, PYTHONUNBUFFERED="1", DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="1")


def cli(*args, timeout=180, env=None):
    """Run ``python -m dkapprox ARGS``; the CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "dkapprox", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env or ENV)


def cli_many(*argvs, timeout=180):
    """Run several independent commands at once (each pays the import time in parallel)."""
    procs = [subprocess.Popen([sys.executable, "-m", "dkapprox", *map(str, a)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=ENV) for a in argvs]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def assert_one_line_error(result, code, *fragments):
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])


def make_input(path, rows=2000, features=8, chunk=250, seed=0, fill=None):
    X = np.random.default_rng(seed).standard_normal((rows, features)).astype(np.float32)
    if fill is not None:
        X[fill] = np.nan
    z = zarr.create_array(str(path), shape=X.shape, chunks=(chunk, features), dtype=X.dtype)
    z[:] = X
    return X


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """An input store, a threads-only local cluster config, and a fitted model."""
    base = tmp_path_factory.mktemp("cli")
    X = make_input(base / "x.zarr")
    (base / "local.yaml").write_text("kind: local\nn_workers: 1\nthreads_per_worker: 2\n"
                                     "processes: false\ndashboard_address: null\n")
    result = cli("fit", base / "x.zarr", "--method", "rbf", "--n-components", 64, "--gamma", 0.5,
                 "--out", base / "model", "--cluster", base / "local.yaml")
    assert result.returncode == 0, result.stderr
    return {"dir": base, "X": X, "input": base / "x.zarr", "model": base / "model",
            "cluster": base / "local.yaml"}


# -- round trips -----------------------------------------------------------------------------


def test_fit_transform_info_round_trip_equals_the_library(work, tmp_path):
    out = tmp_path / "z.zarr"
    result = cli("transform", work["input"], "--model", work["model"], "--out", out, "--cluster", work["cluster"])
    assert result.returncode == 0, result.stderr
    assert "8 blocks written, 0 already there, of 8" in result.stdout
    expected = RBFSampler(n_components=64, gamma=0.5, random_state=0).fit(work["X"]).transform(work["X"])
    got = io.open_features(out).compute()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)

    model_info, out_info = cli_many(("info", work["model"], "--json"), ("info", out, "--json"))
    assert model_info.returncode == 0 and out_info.returncode == 0
    model_doc, out_doc = json.loads(model_info.stdout), json.loads(out_info.stdout)
    assert model_doc["kind"] == "model" and model_doc["class"] == "RBFSampler"
    assert model_doc["params"]["n_components"] == 64 and model_doc["n_features_in"] == 8
    assert out_doc["kind"] == "features" and out_doc["status"] == "complete"
    assert out_doc["shape"] == [2000, 64] and out_doc["blocks_done"] == out_doc["blocks_total"] == 8
    assert out_doc["plan"]["model"] == model_doc["fingerprint"]
    assert out_doc["plan"]["input"]["path"] == str(work["input"])


def test_info_prints_yaml_by_default(work):
    result = cli("info", work["model"])
    assert result.returncode == 0
    assert "kind: model" in result.stdout and "class: RBFSampler" in result.stdout


def test_featurize_is_fit_then_transform_and_saves_the_model(work, tmp_path):
    out, model = tmp_path / "f.zarr", tmp_path / "m"
    result = cli("featurize", work["input"], "--method", "rbf", "--n-components", 64, "--gamma", 0.5,
                 "--out", out, "--save-model", model, "--cluster", work["cluster"])
    assert result.returncode == 0, result.stderr
    assert io.fingerprint(io.load(model)) == io.fingerprint(io.load(work["model"]))
    expected = RBFSampler(n_components=64, gamma=0.5, random_state=0).fit(work["X"]).transform(work["X"])
    np.testing.assert_allclose(io.open_features(out).compute(), expected, rtol=1e-5, atol=1e-6)


def test_nystroem_samples_over_the_whole_store_like_the_library(work, tmp_path):
    out = tmp_path / "n.zarr"
    result = cli("featurize", work["input"], "--method", "nystroem", "--n-components", 50,
                 "--param", "kernel=rbf", "--gamma", 0.2, "--random-state", 3, "--out", out,
                 "--cluster", work["cluster"])
    assert result.returncode == 0, result.stderr
    est = Nystroem(n_components=50, kernel="rbf", gamma=0.2, random_state=3).fit(io.open_array(work["input"]))
    np.testing.assert_allclose(io.open_features(out).compute(), est.transform(work["X"]), rtol=1e-4, atol=1e-5)


def test_rerunning_a_finished_job_does_nothing_and_succeeds(work, tmp_path):
    out = tmp_path / "z.zarr"
    first = cli("transform", work["input"], "--model", work["model"], "--out", out, "--cluster", work["cluster"])
    assert first.returncode == 0, first.stderr
    again = cli("transform", work["input"], "--model", work["model"], "--out", out, "--cluster", work["cluster"])
    assert again.returncode == 0, again.stderr
    assert "already complete for this job; nothing to do" in again.stdout


# -- exit codes ------------------------------------------------------------------------------


def test_usage_errors_exit_2_in_one_line(work, tmp_path):
    m = tmp_path / "m"
    results = cli_many(
        ("fit", work["input"], "--method", "nope", "--out", m),
        ("fit", work["input"], "--method", "rbf", "--param", "n_components=0", "--out", m),
        ("fit", work["input"], "--method", "rbf", "--param", "colour=red", "--out", m),
        ("fit", work["input"], "--method", "additive_chi2", "--n-components", 5, "--out", m),
        ("transform", work["input"], "--model", work["model"], "--out", tmp_path / "o",
         "--cluster", work["cluster"], "--scheduler", "tcp://127.0.0.1:9"),
        ("frobnicate",),
    )
    fragments = ["'nope' is not one of", "The 'n_components' parameter of RBFSampler must be an int",
                 "--param colour: RBFSampler has no such parameter", "AdditiveChi2Sampler has no parameter",
                 "give --cluster or --scheduler, not both", "No such command 'frobnicate'"]
    for result, fragment in zip(results, fragments):
        assert_one_line_error(result, 2, fragment)
    assert not m.exists()


def test_missing_input_or_model_exits_66(work, tmp_path):
    missing_input, missing_model = cli_many(
        ("fit", tmp_path / "nothing.zarr", "--method", "rbf", "--out", tmp_path / "m"),
        ("transform", work["input"], "--model", tmp_path / "no-model", "--out", tmp_path / "o"),
    )
    assert_one_line_error(missing_input, 66, "nothing.zarr")
    assert_one_line_error(missing_model, 66, "no-model")


def _hostile_store(path, **changes):
    zarr.create_array(str(path), shape=(1000, 32), chunks=(1000, 32), dtype="f4")
    meta = json.loads((path / "zarr.json").read_text())
    meta.update(changes)
    (path / "zarr.json").write_text(json.dumps(meta))


def test_hostile_or_bad_input_exits_65(work, tmp_path):
    _hostile_store(tmp_path / "huge.zarr", shape=[10**15, 32])
    make_input(tmp_path / "nan.zarr", rows=500, fill=(123, 4))
    (tmp_path / "wide.zarr").mkdir()
    make_input(tmp_path / "wide.zarr" / "x", rows=100, features=5)
    huge, nan, wide = cli_many(
        ("fit", tmp_path / "huge.zarr", "--method", "rbf", "--out", tmp_path / "m1"),
        ("transform", tmp_path / "nan.zarr", "--model", work["model"], "--out", tmp_path / "o1",
         "--cluster", work["cluster"]),
        ("transform", tmp_path / "wide.zarr" / "x", "--model", work["model"], "--out", tmp_path / "o2"),
    )
    assert_one_line_error(huge, 65, "huge.zarr")
    assert_one_line_error(nan, 65, "NaN")
    assert_one_line_error(wide, 65, "X has 5 features, but RBFSampler is expecting 8 features")


def test_tampered_model_exits_65(work, tmp_path):
    import shutil

    array_file, json_file = tmp_path / "m1", tmp_path / "m2"
    shutil.copytree(work["model"], array_file)
    shutil.copytree(work["model"], json_file)
    npy = next((array_file / "arrays").glob("*.npy"))
    data = bytearray(npy.read_bytes())
    data[-1] ^= 0x01  # one bit of one weight
    npy.write_bytes(bytes(data))
    doc = json.loads((json_file / "model.json").read_text())
    doc["estimator"]["params"]["gamma"] = 5.0
    (json_file / "model.json").write_text(json.dumps(doc))
    results = cli_many(*[("transform", work["input"], "--model", m, "--out", tmp_path / f"o{i}")
                         for i, m in enumerate([array_file, json_file])])
    for result, path in zip(results, [array_file, json_file]):
        assert_one_line_error(result, 65, str(path))
        assert not (tmp_path / "o0").exists()


def test_bad_cluster_config_exits_78_and_never_runs_it(work, tmp_path):
    marker = tmp_path / "ran"
    evil, typo = tmp_path / "evil.yaml", tmp_path / "typo.yaml"
    evil.write_text(f"kind: local\nn_workers: !!python/object/apply:os.system ['touch {marker}']\n")
    typo.write_text("kind: local\nn_worker: 2\n")
    results = cli_many(*[("transform", work["input"], "--model", work["model"], "--out", tmp_path / "o",
                          "--cluster", c) for c in (evil, typo)])
    assert_one_line_error(results[0], 78, "not a plain YAML config")
    assert_one_line_error(results[1], 78, "unknown key 'n_worker' (did you mean 'n_workers'?)")
    assert not marker.exists()


def test_unreachable_scheduler_is_a_temporary_failure(work, tmp_path):
    config = tmp_path / "s.yaml"
    config.write_text("kind: scheduler\naddress: tcp://127.0.0.1:9\ntimeout: 1s\n")
    result = cli("transform", work["input"], "--model", work["model"], "--out", tmp_path / "o", "--cluster", config)
    assert_one_line_error(result, 75, "cannot reach the scheduler at tcp://127.0.0.1:9")


def test_no_overwrite_without_the_flag_and_never_inside_the_input(work, tmp_path):
    out = tmp_path / "z.zarr"
    other_model = tmp_path / "other"
    assert cli("fit", work["input"], "--method", "rbf", "--n-components", 64, "--random-state", 1,
               "--out", other_model, "--cluster", work["cluster"]).returncode == 0
    assert cli("transform", work["input"], "--model", work["model"], "--out", out,
               "--cluster", work["cluster"]).returncode == 0
    before = io.open_features(out).compute()
    refit, other_job, inside = cli_many(
        ("fit", work["input"], "--method", "rbf", "--out", work["model"], "--cluster", work["cluster"]),
        ("transform", work["input"], "--model", other_model, "--out", out, "--cluster", work["cluster"]),
        ("transform", work["input"], "--model", work["model"], "--out", work["input"] / "features.zarr",
         "--cluster", work["cluster"]),
    )
    assert_one_line_error(refit, 73, str(work["model"]))
    assert_one_line_error(other_job, 73, "finished dkapprox output")
    assert_one_line_error(inside, 65, "inside")
    np.testing.assert_array_equal(io.open_features(out).compute(), before)
    assert not (work["input"] / "features.zarr").exists()
    replaced = cli("transform", work["input"], "--model", other_model, "--out", out, "--overwrite",
                   "--cluster", work["cluster"])
    assert replaced.returncode == 0, replaced.stderr
    assert not np.array_equal(io.open_features(out).compute(), before)


def test_debug_shows_the_traceback(work, tmp_path):
    result = cli("--debug", "fit", tmp_path / "nothing.zarr", "--method", "rbf", "--out", tmp_path / "m")
    assert result.returncode == 66
    assert "Traceback (most recent call last)" in result.stderr
    assert "InputMissingError" in result.stderr


@pytest.mark.slow
def test_workers_killed_repeatedly_exit_75_with_advice(tmp_path):
    # Real worker processes with a small memory limit and blocks far too large for it:
    # the nanny kills the worker, the scheduler gives up (allowed-failures=1 in ENV).
    make_input(tmp_path / "x.zarr", rows=150_000, features=16, chunk=150_000)  # one 1.2 GB output block
    config = tmp_path / "small.yaml"
    config.write_text("kind: local\nn_workers: 1\nthreads_per_worker: 1\nmemory_limit: 600MiB\n"
                      "dashboard_address: null\n")
    result = cli("featurize", tmp_path / "x.zarr", "--method", "rbf", "--n-components", 2048,
                 "--out", tmp_path / "o.zarr", "--cluster", config, timeout=300)
    assert_one_line_error(result, 75, "workers died repeatedly", "nothing was written",
                          "smaller --block-rows (and --overwrite)")
    fine = cli("featurize", tmp_path / "x.zarr", "--method", "rbf", "--n-components", 2048,
               "--out", tmp_path / "o.zarr", "--cluster", config, "--block-rows", 10_000, "--overwrite",
               timeout=300)
    assert fine.returncode == 0, fine.stderr


# -- interrupt and resume --------------------------------------------------------------------


def _blocks_done(out):
    try:
        return io.describe(out)["blocks_done"]
    except Exception:  # not created yet, or caught between two files
        return -1


def _start(*args):
    return subprocess.Popen([sys.executable, "-m", "dkapprox", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)


def _kill_when(proc, out, at_least, *, sig=9, timeout=120):
    """Send ``sig`` once ``at_least`` blocks are recorded: (exit code, blocks recorded after, stderr)."""
    deadline = time.monotonic() + timeout
    while _blocks_done(out) < at_least:
        assert proc.poll() is None, f"the job ended before block {at_least}: {proc.communicate()}"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    return proc.returncode, _blocks_done(out), stderr


@pytest.fixture(scope="module")
def resumable(tmp_path_factory):
    """A job of 400 small blocks on one worker thread, and its undisturbed output."""
    base = tmp_path_factory.mktemp("resume")
    X = make_input(base / "x.zarr", rows=40_000, features=16, chunk=100)
    (base / "one.yaml").write_text("kind: local\nn_workers: 1\nthreads_per_worker: 1\n"
                                   "processes: false\ndashboard_address: null\n")
    assert cli("fit", base / "x.zarr", "--method", "rbf", "--n-components", 256,
               "--out", base / "model", "--cluster", base / "one.yaml").returncode == 0
    ref = cli("transform", base / "x.zarr", "--model", base / "model", "--out", base / "ref.zarr",
              "--cluster", base / "one.yaml")
    assert ref.returncode == 0, ref.stderr
    return {"dir": base, "X": X, "reference": io.open_features(base / "ref.zarr").compute(),
            "args": ("transform", base / "x.zarr", "--model", base / "model", "--cluster", base / "one.yaml")}


def test_sigkill_at_several_points_then_rerun_gives_the_undisturbed_output(resumable, tmp_path):
    out = tmp_path / "z.zarr"
    args = (*resumable["args"], "--out", out)
    # 1. killed while starting (before anything is written)
    early = _start(*args)
    time.sleep(0.3)
    early.kill()
    early.communicate()
    # 2., 3., 4. killed after some blocks, again later, and again near the end
    history = []
    for at_least in (20, 120, 250):
        code, done, _ = _kill_when(_start(*args), out, at_least)
        assert code == -9
        assert done >= max(at_least, history[-1] if history else 0)
        history.append(done)
    assert io.describe(out)["status"] == "writing"
    with pytest.raises(Exception, match="not finished|incomplete|unfinished"):
        io.open_features(out)
    # 5. the rerun writes only what is missing
    before = _blocks_done(out)
    final = cli(*args)
    assert final.returncode == 0, final.stderr
    assert f"{400 - before} blocks written, {before} already there, of 400" in final.stdout
    np.testing.assert_array_equal(io.open_features(out).compute(), resumable["reference"])


def test_sigterm_stops_cleanly_and_the_rerun_resumes(resumable, tmp_path):
    out = tmp_path / "z.zarr"
    args = (*resumable["args"], "--out", out)
    code, done, stderr = _kill_when(_start(*args), out, 50, sig=15)
    assert code == 143, stderr
    assert "dkapprox: SIGTERM: stopped; rerun the same command to resume" in stderr
    assert "Traceback" not in stderr
    final = cli(*args)
    assert final.returncode == 0, final.stderr
    assert f"{done} already there, of 400" in final.stdout
    np.testing.assert_array_equal(io.open_features(out).compute(), resumable["reference"])


def test_resume_with_a_changed_model_is_refused(resumable, tmp_path):
    out = tmp_path / "z.zarr"
    base = resumable["dir"]
    _kill_when(_start(*resumable["args"], "--out", out), out, 30)
    changed = tmp_path / "changed"
    assert cli("fit", base / "x.zarr", "--method", "rbf", "--n-components", 256, "--random-state", 7,
               "--out", changed, "--cluster", base / "one.yaml").returncode == 0
    done = _blocks_done(out)
    result = cli("transform", base / "x.zarr", "--model", changed, "--out", out, "--cluster", base / "one.yaml")
    assert_one_line_error(result, 73, "another job", "plan.model")
    assert _blocks_done(out) == done  # nothing written by the refused run
    finish = cli(*resumable["args"], "--out", out)
    assert finish.returncode == 0, finish.stderr
    np.testing.assert_array_equal(io.open_features(out).compute(), resumable["reference"])


# -- the demo --------------------------------------------------------------------------------


def test_demo_small_runs_on_real_worker_processes(tmp_path):
    result = cli("demo", "--small", "--workers", 1, "--progress", "--dir", tmp_path / "demo", timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("cluster: LocalCluster, 1 workers x 768.00 MiB (dashboard http")
    assert any(l.startswith("made") and "20,000 x 32 float32" in l for l in lines)
    assert any(l.startswith("fit    RBFSampler(") for l in lines)
    assert any(l.startswith("wrote") and "20,000 x 128 float32" in l and "10 blocks" in l for l in lines)
    assert any(l.startswith("check  first 1,000 rows equal") for l in lines)
    assert any(l.startswith("workers:") and "restarts 0" in l for l in lines)
    assert "100% Completed" in result.stderr  # distributed's progress bar, on stderr
    assert "dashboard" in result.stderr
    assert io.describe(tmp_path / "demo" / "features.zarr")["status"] == "complete"
    again = cli("demo", "--small", "--workers", 1, "--dir", tmp_path / "demo", timeout=300)
    assert again.returncode == 0, again.stderr
    assert "kept from an earlier run" in again.stdout
