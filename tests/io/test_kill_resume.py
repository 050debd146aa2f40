"""Kill a real featurization process with SIGKILL part-way, rerun it: same bytes, only missing blocks written."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import zarr
from _io_helpers import JOB, kill_job_when, make_store

from dkapprox.io import describe, open_features

N_BLOCKS = 80
SLOW = 0.03  # seconds per input block in the run that gets killed: about 1.2 s of writing on 2 threads


def _run(source, out, seconds=0.0):
    proc = subprocess.run([sys.executable, JOB, source, str(out), str(seconds)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _recorded(out):
    root = os.path.join(out, "blocks_done", "c")
    return sum(len([f for f in files if not f.endswith(".partial")]) for _, _, files in os.walk(root))


def _files(root):
    return {os.path.relpath(os.path.join(d, f), root): os.path.join(d, f)
            for d, _, files in os.walk(root) for f in files}


@pytest.fixture(scope="module")
def job_input(tmp_path_factory):
    data = np.random.default_rng(3).random((N_BLOCKS * 100, 16)).astype(np.float32)
    return make_store(tmp_path_factory.mktemp("job") / "input.zarr", data, (100, 16))


@pytest.fixture(scope="module")
def undisturbed(job_input, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("reference") / "features.zarr")
    report = _run(job_input, out)
    assert report["blocks_written"] == N_BLOCKS
    return out


@pytest.mark.parametrize("kill_at", [
    pytest.param("plan", marks=pytest.mark.slow, id="after-plan"),
    pytest.param(0.3, id="30%"),
    pytest.param(0.9, marks=pytest.mark.slow, id="90%"),
])
def test_sigkill_then_rerun_gives_the_undisturbed_bytes(job_input, undisturbed, tmp_path, kill_at):
    out = str(tmp_path / "features.zarr")
    target = 0 if kill_at == "plan" else int(kill_at * N_BLOCKS)
    kill_job_when(job_input, out, SLOW,
                  lambda: os.path.exists(os.path.join(out, "zarr.json")) and _recorded(out) >= target)

    killed = describe(out)
    assert killed["status"] == "writing", "the job finished before the kill landed"
    done_before = killed["blocks_done"]
    assert target <= done_before < N_BLOCKS
    chunks = os.path.join(out, "features", "c")
    inodes_before = {k: os.stat(p).st_ino for k, p in _files(chunks).items()} if os.path.isdir(chunks) else {}

    report = _run(job_input, out)
    assert report["resumed"] is True
    assert report["blocks_written"] == N_BLOCKS - done_before
    assert report["blocks_skipped"] == done_before
    after = _files(chunks)
    rewritten = sum(1 for k, p in after.items() if inodes_before.get(k) != os.stat(p).st_ino)
    assert rewritten == report["blocks_written"]  # finished blocks were left alone, every other one written

    reference = _files(undisturbed)
    resumed = _files(out)
    assert sorted(resumed) == sorted(reference)  # no leftover temporary files either
    for name, path in reference.items():
        if name != "zarr.json":  # the group's own metadata holds the creation times
            with open(path, "rb") as a, open(resumed[name], "rb") as b:
                assert a.read() == b.read(), name
    ours, theirs = (zarr.open_group(p, mode="r").attrs["dkapprox"] for p in (out, undisturbed))
    assert ours["plan"] == theirs["plan"] and ours["layout"] == theirs["layout"]
    assert ours["status"] == theirs["status"] == "complete"
    np.testing.assert_array_equal(open_features(out).compute(), open_features(undisturbed).compute())


def test_a_job_killed_while_its_records_are_packed_resumes_to_the_same_features(job_input, undisturbed, tmp_path):
    """Records packed every 8 blocks (dask config through the environment, as a job sets it): the kill
    lands half way, the rerun writes exactly the blocks neither a log nor a single record holds."""
    from dkapprox.io._markers import read

    out = str(tmp_path / "features.zarr")
    logs = os.path.join(out, "blocks_done", "log")
    kill_job_when(job_input, out, SLOW, lambda: os.path.isdir(logs) and len(os.listdir(logs)) >= 4,  # 32 packed
                  "the job never packed its records", DASK_DKAPPROX__IO__MARKERS_PER_LOG="8")

    killed = describe(out)
    assert killed["status"] == "writing", "the job finished before the kill landed"
    done_before = killed["blocks_done"]
    assert 32 <= done_before < N_BLOCKS and _recorded(out) < done_before  # most records are in logs
    recorded = read(zarr.open_group(out, mode="r"), (N_BLOCKS, 1)) != 0
    assert int(recorded.sum()) == done_before

    report = _run(job_input, out)
    assert (report["resumed"], report["blocks_written"]) == (True, N_BLOCKS - done_before)
    reference = _files(os.path.join(undisturbed, "features"))
    resumed = _files(os.path.join(out, "features"))
    assert sorted(resumed) == sorted(reference)
    for name, path in reference.items():
        with open(path, "rb") as a, open(resumed[name], "rb") as b:
            assert a.read() == b.read(), name
    from dkapprox.io import verify

    assert verify(out).ok
