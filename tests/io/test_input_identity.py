"""A nightly job that never lies: a changed input is never resumed into nor called done; --refresh
rewrites only what changed; verify finds real damage. Real Zarr stores, real S3 (moto), real kills."""

import json
import os
import subprocess
import sys

import dask.array as da
import numpy as np
import pytest
import zarr
from _io_helpers import JOB, kill_job_when

from dkapprox.cli import main
from dkapprox.errors import IncompleteStoreError, InputChangedError
from dkapprox.io import describe, open_array, open_features, verify, write_features
from dkapprox.io._identity import identify
from dkapprox.io._location import locate
from dkapprox.kernel_approximation import RBFSampler

ROWS, BLOCK, COLS = 2_000, 100, 8


@pytest.fixture(params=["local", "s3"])
def where(request, tmp_path):
    """(kind, a folder path or URL to make stores in)."""
    if request.param == "s3":
        request.getfixturevalue("s3")
        return "s3", f"s3://data/{request.node.name.replace('[', '-').rstrip(']')}"
    return "local", str(tmp_path)


def _make(path, data, chunks=(BLOCK, COLS)):
    z = zarr.create_array(locate(path).store(read_only=False), shape=data.shape, chunks=chunks,
                          dtype=data.dtype, overwrite=True)
    z[...] = data
    return path


def _data(seed, rows=ROWS, cols=COLS, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal((rows, cols)).astype(dtype)


def _features(source):
    X = open_array(source)
    return RBFSampler(n_components=32, gamma=0.5, random_state=0).fit(X).transform(X)


def _write(source, out, **kwargs):
    return write_features(_features(source), out, plan={"job": "nightly"}, **kwargs)


def _snapshot(out):
    """Every object of a store with its bytes (what 'untouched' means)."""
    fs, path = locate(out).filesystem()
    fs.invalidate_cache()
    return {p: fs.cat_file(p) for p in sorted(fs.find(path))}


def test_a_rewritten_input_is_refused_then_refreshed_bit_for_bit(where):
    kind, base = where
    source, out, fresh = f"{base}/in.zarr", f"{base}/out.zarr", f"{base}/fresh.zarr"
    _make(source, _data(0))
    assert _write(source, out).blocks_written == ROWS // BLOCK
    with pytest.raises(Exception, match="finished dkapprox output is there"):  # same input: done, as before
        _write(source, out)
    new = _data(0)
    new[250:420] = _data(1)[250:420]  # rows of chunks 2, 3 and 4 rewritten in place, same shape
    z = zarr.open_array(locate(source).store(read_only=False), mode="r+")
    z[250:420] = new[250:420]
    before = _snapshot(out)
    with pytest.raises(InputChangedError) as caught:
        _write(source, out)
    message = str(caught.value)
    assert "3 chunks changed, 0 added, 0 removed" in message and "rows 200-500" in message, message
    assert "refresh=True" in message and "overwrite=True" in message
    assert _snapshot(out) == before  # refused: nothing touched
    assert not describe(out, check_input=True)["inputs"][0]["matches"]

    report = _write(source, out, refresh=True)
    assert (report.blocks_written, report.refreshed) == (3, True)
    assert describe(out, check_input=True)["inputs"][0]["matches"]
    _write(source, fresh)
    np.testing.assert_array_equal(open_features(out).compute(), open_features(fresh).compute())
    assert verify(out).ok
    assert _write(source, out, refresh=True).blocks_written == 0  # nothing changed since


def test_appended_rows_are_refreshed_alone_and_equal_a_fresh_run(where):
    kind, base = where
    source, out, fresh = f"{base}/in.zarr", f"{base}/out.zarr", f"{base}/fresh.zarr"
    _make(source, _data(0, rows=1_950))  # the last block is partial: it grows
    _write(source, out)
    z = zarr.open_array(locate(source).store(read_only=False), mode="r+")
    z.append(_data(2, rows=200))  # as xarray's to_zarr(append_dim=...) does
    with pytest.raises(InputChangedError, match="200 rows appended"):
        _write(source, out)
    report = _write(source, out, refresh=True)
    assert report.shape == (2_150, 32) and report.blocks_written == 3  # 1,900-2,000 grew, two new blocks
    _write(source, fresh)
    np.testing.assert_array_equal(open_features(out).compute(), open_features(fresh).compute())


@pytest.mark.parametrize("change", ["shrunk", "columns", "dtype"])
def test_what_a_refresh_cannot_follow_is_refused_and_nothing_is_touched(tmp_path, change):
    source, out = str(tmp_path / "in.zarr"), str(tmp_path / "out.zarr")
    _make(source, _data(0))
    _write(source, out)
    before = _snapshot(out)
    replacement = {"shrunk": _data(0, rows=1_500), "columns": _data(0, cols=COLS + 1),
                   "dtype": _data(0, dtype=np.float64)}[change]
    _make(source, replacement)
    with pytest.raises(InputChangedError) as caught:
        write_features(_features(source), out, plan={"job": "nightly"}, refresh=True)
    assert caught.value.refusable and "cannot follow" in str(caught.value), str(caught.value)
    assert _snapshot(out) == before


def test_readers_never_see_a_half_refreshed_store_as_complete(tmp_path):
    source, out = str(tmp_path / "in.zarr"), str(tmp_path / "out.zarr")
    _make(source, _data(0))
    _write(source, out)
    zarr.open_array(source, mode="r+")[0:10] = 0.0
    pending = _write(source, out, refresh=True, compute=False)
    with pytest.raises(IncompleteStoreError):
        open_features(out)  # the refresh began: the store is unfinished until finalize
    assert describe(out)["blocks_done"] == ROWS // BLOCK - 1
    pending.delayed.compute()
    pending.finalize()
    assert describe(out)["status"] == "complete"


def test_an_input_changed_while_it_was_written_leaves_the_store_unfinished(tmp_path):
    source, out = str(tmp_path / "in.zarr"), str(tmp_path / "out.zarr")
    _make(source, _data(0))
    pending = _write(source, out, compute=False)
    pending.delayed.compute()
    zarr.open_array(source, mode="r+")[1_990:2_000] = 1.0  # upstream reran during the write
    with pytest.raises(InputChangedError, match="while this run wrote the store"):
        pending.finalize()
    pending.release()
    with pytest.raises(IncompleteStoreError):
        open_features(out)
    assert _write(source, out, refresh=True).blocks_written == 1


def test_a_killed_run_over_a_rewritten_input_is_refused_not_resumed(tmp_path, capsys):
    """The issue's first case, as it was found: SIGKILL after a few markers, the input rewritten in place."""
    source, out = str(tmp_path / "in.zarr"), str(tmp_path / "out.zarr")
    data = np.random.default_rng(3).random((40 * 100, 16)).astype(np.float32)
    _make(source, data, chunks=(100, 16))
    kill_job_when(source, out, 0.05, lambda: describe_done(out) >= 3, "the job never wrote 3 blocks")
    _make(source, np.random.default_rng(4).random(data.shape).astype(np.float32), chunks=(100, 16))
    rerun = subprocess.run([sys.executable, JOB, source, out, "0"], capture_output=True, text=True, timeout=300)
    assert rerun.returncode != 0 and "InputChangedError" in rerun.stderr, rerun.stderr
    assert "40 chunks changed" in rerun.stderr
    assert describe(out)["status"] == "writing"


def describe_done(out):
    try:
        return describe(out)["blocks_done"]
    except Exception:  # noqa: BLE001 - not created yet
        return 0


def _cli(capsys, *args):
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_command_line_refuses_a_changed_input_with_73_refreshes_and_info_says_it(where, tmp_path, capsys):
    kind, base = where
    source, out = f"{base}/in.zarr", f"{base}/out.zarr"
    _make(source, _data(0))
    cluster = tmp_path / "one.yaml"
    cluster.write_text("kind: local\nn_workers: 1\nthreads_per_worker: 1\nprocesses: false\n"
                       "dashboard_address: null\n")
    job = ("featurize", source, "--method", "rbf", "--n-components", 32, "--gamma", 0.5, "--out", out,
           "--cluster", cluster)
    assert _cli(capsys, *job)[0] == 0
    code, said, _ = _cli(capsys, *job)
    assert code == 0 and "nothing to do" in said
    z = zarr.open_array(locate(source).store(read_only=False), mode="r+")
    z[1_000:1_100] = 1.0
    code, said, err = _cli(capsys, *job)
    assert code == 73 and not said, err
    error = [line for line in err.splitlines() if "error" in line]
    assert len(error) == 1 and "1 chunks changed, 0 added, 0 removed; rows 1,000-1,100" in error[0], err
    assert "--refresh" in error[0] and "--overwrite" in error[0] and "refresh=True" not in error[0]
    code, said, _ = _cli(capsys, "info", out, "--json")
    shown = json.loads(said)["inputs"][0]
    assert code == 0 and shown["matches"] is False and shown["changes"]["rows"] == [[1_000, 1_100]]
    code, said, _ = _cli(capsys, *job, "--refresh")
    assert code == 0 and "1 blocks written, 19 already there, of 20" in said
    code, said, _ = _cli(capsys, "verify", out)
    assert code == 0 and said.splitlines()[-1].startswith("ok:"), said
    assert _cli(capsys, *job, "--refresh", "--overwrite")[0] == 2


# -- verify ------------------------------------------------------------------------------------


def _damage(kind, out, how):
    fs, path = locate(out).filesystem()
    chunk = f"{path}/features/c/4/0"
    if how == "truncated":
        fs.pipe_file(chunk, fs.cat_file(chunk)[:100])
    elif how == "flipped":
        raw = bytearray(fs.cat_file(chunk))
        raw[1_000] ^= 0x10
        fs.pipe_file(chunk, bytes(raw))
    elif how == "marker deleted":
        fs.rm_file(f"{path}/blocks_done/c/4/0")
    elif how == "object replaced":  # another object of the right size, as a bad copy would leave
        fs.pipe_file(chunk, fs.cat_file(f"{path}/features/c/5/0"))
    fs.invalidate_cache()


@pytest.mark.parametrize("kind, how", [("local", "truncated"), ("local", "flipped"), ("local", "marker deleted"),
                                       ("s3", "object replaced"), ("s3", "truncated")])
def test_verify_finds_real_damage_names_its_rows_and_changes_nothing(request, tmp_path, capsys, kind, how):
    if kind == "s3":
        request.getfixturevalue("s3")
    base = f"s3://data/verify-{how.replace(' ', '-')}" if kind == "s3" else str(tmp_path)
    source, out = f"{base}/in.zarr", f"{base}/out.zarr"
    _make(source, _data(0))
    _write(source, out)
    assert verify(out).ok
    _damage(kind, out, how)
    before = _snapshot(out)
    report = verify(out)
    assert not report.ok
    bad = report.missing if how == "marker deleted" else [d["rows"] for d in report.damaged]
    assert bad == [[400, 500]], report.to_dict()
    code, said, _ = _cli(capsys, "verify", out)
    assert code == 65 and "rows 400-500" in said and said.splitlines()[-1].startswith("FAILED"), said
    assert _snapshot(out) == before


def test_verify_says_when_the_input_changed(tmp_path, capsys):
    source, out = str(tmp_path / "in.zarr"), str(tmp_path / "out.zarr")
    _make(source, _data(0))
    _write(source, out)
    zarr.open_array(source, mode="r+")[0:1] = 5.0
    report = verify(out)
    assert not report.ok and not report.damaged and not report.missing
    assert report.inputs[0]["why"].startswith("1 chunks changed")
    assert verify(out, check_input=False).ok
    assert _cli(capsys, "verify", out)[0] == 65


def test_a_store_of_features_not_read_from_zarr_still_resumes_and_verifies(tmp_path):
    out = str(tmp_path / "out.zarr")
    report = write_features(da.ones((100, 4), chunks=(25, 4)), out, plan={})
    assert report.blocks_written == 4 and verify(out).ok and describe(out)["inputs"] == []


# -- a listing that fails half way ---------------------------------------------------------------


class _CutAfterFirstPage:
    """A real HTTP proxy on loopback in front of the moto server that answers every request but the
    second page of a listing (a ListObjectsV2 with a continuation token), whose connection it closes
    unanswered: the listing fails half way, as it does when the network drops mid-job."""

    def __init__(self, upstream):
        import http.client
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import urlsplit

        target = urlsplit(upstream)
        cut = self.cut = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if "list-type=2" in self.path and "continuation-token" in self.path:
                    cut.append(self.path)
                    self.close_connection = True
                    return
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
                try:
                    conn.request(self.command, self.path, body=body, headers=dict(self.headers))
                    reply = conn.getresponse()
                    data = reply.read()
                finally:
                    conn.close()
                self.send_response(reply.status)
                for key, value in reply.getheaders():
                    if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


def test_a_listing_that_fails_half_way_is_one_line_exit_75_and_leaves_the_store_untouched(s3, tmp_path):
    source, out, model = "s3://data/cut/in.zarr", str(tmp_path / "out.zarr"), str(tmp_path / "model")
    data = _data(0, rows=1_100, cols=4)
    _make(source, data, chunks=(1, 4))  # 1,100 chunk objects: two pages of a listing
    from dkapprox.models import save

    save(RBFSampler(n_components=16, gamma=0.5, random_state=0).fit(data), model)
    options = ["--storage-option", "config_kwargs.retries.max_attempts=1"]  # botocore gives up at once
    cluster = tmp_path / "threads.yaml"  # no worker processes to start: the listing is the client's
    cluster.write_text("kind: local\nn_workers: 1\nthreads_per_worker: 2\nprocesses: false\n"
                       "dashboard_address: null\n")
    job = [sys.executable, "-m", "dkapprox", "transform", source, "--model", model, "--out", out,
           "--block-rows", "100", "--cluster", str(cluster), *options]
    with _CutAfterFirstPage(s3.endpoint) as proxy:
        env = dict(os.environ, AWS_ENDPOINT_URL=proxy.endpoint)
        failed = subprocess.run(job, capture_output=True, text=True, env=env, timeout=120)
        assert proxy.cut, "the listing never asked for a second page"
    errors = [line for line in failed.stderr.splitlines() if "error" in line]
    assert failed.returncode == 75, failed.stderr
    assert len(errors) == 1 and "listing the input's chunks failed" in errors[0] and "Traceback" not in failed.stderr
    assert not os.path.exists(out)  # nothing was made
    z = zarr.open_array(locate(source).store(read_only=True), mode="r")  # straight to the server, it lists
    assert len(identify(z, locate(source)).keys) == 1_100
