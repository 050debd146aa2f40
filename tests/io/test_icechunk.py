"""Icechunk repositories in and out (issue 50): real repositories on disk and on the suite's S3 server,
real processes killed with SIGKILL, a real distributed cluster writing through forked sessions."""

import json
import os
import subprocess
import sys

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from _io_helpers import JOB, kill_job_when

from dkapprox.errors import InputChangedError, InputDataError, InputMissingError, OutputExistsError, StoreBusyError
from dkapprox.io import describe, open_array, open_features, verify, write_features
from dkapprox.io._icechunk import parse

icechunk = pytest.importorskip("icechunk") if os.environ.get("CI") != "true" else __import__("icechunk")

N_BLOCKS = 12


def _repo(path, data, *, chunks=(100, 12), name="X"):
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))
    return repo, _commit(repo, data, chunks=chunks, name=name)


def _commit(repo, data, *, chunks=(100, 12), name="X", branch="main"):
    session = repo.writable_session(branch)
    zarr.create_array(session.store, name=name, shape=data.shape, chunks=chunks, dtype=data.dtype,
                      overwrite=True)[...] = data
    return session.commit(f"data {name}")


@pytest.fixture
def repo(tmp_path):
    data = np.random.default_rng(5).random((N_BLOCKS * 100, 12))  # float64: X * 2 keeps it in both graph modes
    repo, snapshot = _repo(tmp_path / "repo", data)
    return repo, f"icechunk+file://{tmp_path}/repo", data, snapshot


def test_an_address_reads_a_branch_a_tag_a_snapshot_or_a_session_as_numpy_does(repo):
    repo_, url, data, snapshot = repo
    repo_.create_tag("v1", snapshot)
    for selector in ("branch=main", "tag=v1", f"snapshot={snapshot}"):
        X = open_array(f"{url}?{selector}&array=X")
        assert X.chunks[0] == (100,) * N_BLOCKS
        np.testing.assert_array_equal(X.compute(), data)
    np.testing.assert_array_equal(open_array(repo_.readonly_session(branch="main"), "X").compute(), data)


def test_features_become_one_commit_of_the_branch_named_by_their_input_snapshot(repo):
    repo_, url, data, snapshot = repo
    X = open_array(f"{url}?branch=main&array=X")
    out = f"{url}?branch=main&group=feats"
    report = write_features(X * 2, out, plan={"job": "double"}, commit_every=5)
    assert (report.blocks_written, report.commits, report.snapshot) == (N_BLOCKS, 5, repo_.lookup_branch("main"))
    np.testing.assert_array_equal(open_features(out).compute(), data * 2)
    assert repo_.list_branches() == {"main"}  # the work branch is gone
    log = list(repo_.ancestry(branch="main"))
    steps = [(c.metadata.get("dkapprox") or {}).get("step") for c in log]
    assert steps[:5] == ["complete", "blocks", "blocks", "blocks", "plan"] and log[5].id == snapshot
    last = log[0].metadata["dkapprox"]
    assert last["input_snapshots"] == [snapshot] and snapshot in log[0].message
    recorded = describe(out, check_input=True)
    assert recorded["status"] == "complete" and recorded["inputs"][0]["matches"]
    assert f"snapshot={snapshot}" in recorded["inputs"][0]["path"]
    assert verify(out).ok
    with pytest.raises(OutputExistsError, match="on the branch already"):
        write_features(X * 2, out, plan={"job": "double"})
    with pytest.raises(OutputExistsError, match="another job"):
        write_features(X * 3, out, plan={"job": "triple"})
    again = write_features(X * 3, out, plan={"job": "triple"}, overwrite=True)
    np.testing.assert_array_equal(open_features(out).compute(), data * 3)
    # last night's features stay a snapshot one can go back to
    np.testing.assert_array_equal(open_features(f"{url}?snapshot={report.snapshot}&group=feats").compute(), data * 2)
    assert again.snapshot != report.snapshot


def _fail_after(block, block_info=None, limit=None):
    if block_info[0]["chunk-location"][0] >= limit:
        raise RuntimeError("the job's worker died")
    return block


def test_a_failed_job_keeps_its_commits_the_branch_shows_nothing_and_a_moved_input_is_refused(repo):
    repo_, url, data, snapshot = repo
    X = open_array(f"{url}?branch=main&array=X")
    out = f"{url}?branch=main&group=feats"
    broken = X.map_blocks(_fail_after, limit=6, dtype=X.dtype) * 2
    with dask.config.set(scheduler="synchronous"), pytest.raises(RuntimeError, match="worker died"):
        write_features(broken, out, plan={"job": "double"}, commit_every=3)
    assert "feats" not in zarr.open_group(repo_.readonly_session(branch="main").store, mode="r")
    assert len(repo_.list_branches()) == 2  # main and the job's work branch with two batches
    status = describe(out)  # `dkapprox info`: the branch shows nothing, the job's work branch holds 6 blocks
    assert (status["visible"], status["status"], status["blocks_done"], status["blocks_total"]) == (
        False, "writing", 6, N_BLOCKS)
    assert status["job"]["work_branch"] == "dkapprox.main.feats"
    # the rerun of the same job continues: 6 blocks were committed
    report = write_features(X * 2, out, plan={"job": "double"}, commit_every=3)
    assert (report.resumed, report.blocks_skipped) == (True, 6)
    np.testing.assert_array_equal(open_features(out).compute(), data * 2)
    assert "job" not in describe(out) and describe(out)["status"] == "complete"
    # fail again on another group, then move the input branch: the resume is refused, a refresh starts over
    out2 = f"{url}?branch=main&group=other"
    with dask.config.set(scheduler="synchronous"), pytest.raises(RuntimeError):
        write_features(broken, out2, plan={"job": "double"}, commit_every=3)
    moved = data + 1
    _commit(repo_, moved)
    X = open_array(f"{url}?branch=main&array=X")
    with pytest.raises(InputChangedError, match="changed"):
        write_features(X * 2, out2, plan={"job": "double"}, commit_every=3)
    report = write_features(X * 2, out2, plan={"job": "double"}, commit_every=3, refresh=True)
    assert (report.resumed, report.refreshed, report.blocks_written) == (False, True, N_BLOCKS)
    np.testing.assert_array_equal(open_features(out2).compute(), moved * 2)


def test_sigkill_mid_job_then_rerun_gives_the_undisturbed_bytes_and_a_second_job_is_refused(repo, tmp_path):
    repo_, url, data, snapshot = repo
    source = f"{url}?branch=main&array=X"
    out, reference = f"{url}?branch=main&group=feats", f"{url}?branch=main&group=reference"
    env = {**os.environ, "DKAPPROX_COMMIT_EVERY": "2"}
    undisturbed = subprocess.run([sys.executable, JOB, source, reference, "0"], capture_output=True, text=True,
                                 timeout=300, env=env)
    assert undisturbed.returncode == 0, undisturbed.stderr
    work = "dkapprox.main.feats"

    def committed():
        if work not in repo_.list_branches():
            return 0
        group = zarr.open_group(repo_.readonly_session(branch=work).store, mode="r")
        return int((group["feats/blocks_done"][...] != 0).sum()) if "feats" in group else 0

    def two_batches_committed():
        if committed() < 4:
            return False
        with pytest.raises(StoreBusyError, match="holds its lease"):  # the live job's lease
            write_features(open_array(source) * 1, out, plan={"job": "other"})
        return True

    kill_job_when(source, out, 0.15, two_batches_committed, DKAPPROX_COMMIT_EVERY="2")
    assert "feats" not in zarr.open_group(repo_.readonly_session(branch="main").store, mode="r")
    kept = committed()
    status = describe(out)  # the killed job: its blocks committed, its lease left behind
    assert (status["visible"], status["blocks_done"], status["lease"]["pid"] is not None) == (False, kept, True)
    rerun = subprocess.run([sys.executable, JOB, source, out, "0"], capture_output=True, text=True, timeout=300,
                           env=env)
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert report["resumed"] and report["blocks_skipped"] == kept >= 4
    a, b = open_features(out).compute(), open_features(reference).compute()
    assert a.tobytes() == b.tobytes()


def test_a_distributed_cluster_writes_through_forked_sessions(repo):
    from distributed import Client, LocalCluster

    repo_, url, data, _ = repo
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster):
        X = open_array(f"{url}?branch=main&array=X")
        report = write_features(X + 1, f"{url}?branch=main&group=feats", plan={}, commit_every=7)
        session = repo_.writable_session("main")
        write_features(X - 1, session, plan={}, group="minus")  # the caller's session: forks merged into it
    assert report.commits == 4
    np.testing.assert_array_equal(open_features(f"{url}?group=feats").compute(), data + 1)
    np.testing.assert_array_equal(open_features(session, group="minus").compute(), data - 1)


def test_a_writable_session_gets_the_group_uncommitted_and_the_caller_commits(repo):
    repo_, url, data, _ = repo
    X = open_array(f"{url}?branch=main&array=X")
    session = repo_.writable_session("main")
    report = write_features(X * 2, session, plan={"job": "double"}, group="rbf")
    assert (report.blocks_written, report.commits, report.snapshot) == (N_BLOCKS, 0, None)
    assert session.has_uncommitted_changes and "rbf" not in zarr.open_group(
        repo_.readonly_session(branch="main").store, mode="r")
    np.testing.assert_array_equal(open_features(session, group="rbf").compute(), data * 2)
    session.commit("features")
    np.testing.assert_array_equal(open_features(f"{url}?group=rbf").compute(), data * 2)
    assert verify(f"{url}?group=rbf").ok and describe(f"{url}?group=rbf")["status"] == "complete"
    session = repo_.writable_session("main")
    with pytest.raises(OutputExistsError, match="on the branch already"):
        write_features(X * 2, session, plan={"job": "double"}, group="rbf")
    with pytest.raises(OutputExistsError, match="another job"):
        write_features(X * 3, session, plan={"job": "triple"}, group="rbf")
    assert not session.has_uncommitted_changes  # a refused job changed nothing
    write_features(X * 3, session, plan={"job": "triple"}, group="rbf", overwrite=True)
    np.testing.assert_array_equal(open_features(session, group="rbf").compute(), data * 3)
    with pytest.raises(ValueError, match="uncommitted changes"):
        write_features(X, session, plan={}, group="again")
    session.commit("triple")
    with pytest.raises(OutputExistsError, match="another layout"):
        write_features(X[:, :6], repo_.writable_session("main"), plan={}, group="rbf", overwrite=True)
    with pytest.raises(ValueError, match="read-only"):
        write_features(X, repo_.readonly_session(branch="main"), plan={})
    with pytest.raises(ValueError, match="group= names"):
        write_features(X, f"{url}?group=g", plan={}, group="g")


def test_hostile_repositories_are_named_with_the_right_error(repo, tmp_path):
    repo_, url, data, _ = repo
    session = repo_.writable_session("main")
    zarr.create_array(session.store, name="v", shape=(10,), dtype="f4")
    session.commit("a 1-D array")
    with pytest.raises(InputMissingError, match="branches: main"):
        open_array(f"{url}?branch=nightly&array=X")
    with pytest.raises(InputMissingError, match="snapshot"):
        open_array(f"{url}?snapshot=AAAAAAAAAAAAAAAAAAAA&array=X")
    with pytest.raises(InputMissingError, match="no Icechunk repository"):
        open_array(f"icechunk+file://{tmp_path}/nothing?array=X")
    with pytest.raises(InputMissingError, match="no Zarr array or group at Y"):
        open_array(f"{url}?array=Y")
    with pytest.raises(InputDataError, match="2-D"):
        open_array(f"{url}?array=v")
    for bad, why in [("?tag=a&branch=b", "name one version"), ("?array=X&array=Y", "given twice"),
                     ("?branch=", "empty"), ("?colour=red", "colour= is not for an input address")]:
        with pytest.raises(InputDataError, match=why):
            open_array(url + bad)
    with pytest.raises(InputDataError, match="array= is not for an output"):
        write_features(da.ones((4, 2), chunks=2), f"{url}?array=X", plan={})
    with pytest.raises(InputDataError, match="icechunk\\+file:// or icechunk\\+s3://"):
        parse("icechunk+gs://bucket/repo")


def test_credentials_in_an_s3_address_are_never_shown():
    address = parse("icechunk+s3://AKIA:s3cr3t@bucket/prefix?branch=main&array=X")
    assert str(address) == "icechunk+s3://bucket/prefix?branch=main&array=X"
    assert address.storage_options == {"key": "AKIA", "secret": "s3cr3t"}
    assert "s3cr3t" not in repr(address)


def test_a_repository_on_the_suites_s3_server(s3):
    data = np.random.default_rng(2).random((600, 5))
    url = "icechunk+s3://data/repos/nightly"
    X = da.from_array(data, chunks=(100, 5))
    report = write_features(X * 2, f"{url}?branch=main&group=feats", plan={}, commit_every=4)
    assert report.blocks_written == 6
    np.testing.assert_array_equal(open_features(f"{url}?group=feats").compute(), data * 2)
    again = open_array(f"{url}?branch=main&array=feats/features")
    np.testing.assert_array_equal(again.compute(), data * 2)
    assert verify(f"{url}?group=feats").ok


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "dkapprox", *args], capture_output=True, text=True, timeout=240)


def test_the_command_line_takes_addresses_for_input_and_out(repo):
    repo_, url, data, _ = repo
    out = f"{url}?branch=nightly&group=rbf"
    done = _cli("featurize", f"{url}?branch=main&array=X", "--method", "rbf", "--n-components", "16", "--out", out)
    assert done.returncode == 0, done.stderr
    assert "nightly" in repo_.list_branches() and open_features(out).shape == (N_BLOCKS * 100, 16)
    checked = _cli("verify", out)
    assert checked.returncode == 0 and checked.stdout.startswith("ok: "), checked.stderr
    missing = _cli("featurize", f"{url}?branch=nope&array=X", "--method", "rbf", "--out", out)
    assert missing.returncode == 66 and "ref not found" in missing.stderr and "Traceback" not in missing.stderr


def test_virtual_chunks_are_read_from_the_containers_the_user_trusts(tmp_path):
    raw = np.random.default_rng(4).random((100, 4))
    (tmp_path / "raw.bin").write_bytes(raw.tobytes())
    prefix = f"file://{tmp_path}/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(
        str(tmp_path))))
    repo_ = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")), config=config)
    session = repo_.writable_session("main")
    zarr.create_array(session.store, name="X", shape=(100, 4), chunks=(50, 4), dtype="f8", compressors=None)
    for i in range(2):  # each chunk is 50 rows of the raw file, read where it lies
        session.store.set_virtual_ref(f"X/c/{i}/0", f"{prefix}raw.bin", offset=i * 1600, length=1600)
    session.commit("virtual chunks")
    url = f"icechunk+file://{tmp_path}/repo?array=X"
    with pytest.raises(Exception, match="authorize the\\s+(\\| )?virtual chunk container"):
        open_array(url).compute()
    np.testing.assert_array_equal(open_array(url, storage_options={"virtual_chunks": [prefix]}).compute(), raw)
    with pytest.raises(InputDataError, match="list of URL prefixes"):
        open_array(url, storage_options={"virtual_chunks": prefix})
