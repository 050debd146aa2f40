"""The command line on object storage (a real S3 server: moto in server mode, tests/_s3.py).

Every data path is an s3:// URL; stderr stays free of aiohttp's "Unclosed client session"
(client and worker processes); credentials from the environment, a profile or
--storage-option never reach stdout, stderr, the stores or the model files, also with
--debug and on a failing run.
"""

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import click
import numpy as np
import pytest
import s3fs
import zarr
from _rounding import transform_by_blocks
from _s3 import ACCESS_KEY, REGION, SECRET_KEY

from dkapprox import io, models
from dkapprox.cli._jobs import parse_storage_options

ROWS, CHUNK = 2000, 250
BASE_ENV = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
BASE_ENV.update(PYTHONUNBUFFERED="1", DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="1",
                AWS_EC2_METADATA_DISABLED="true")  # no credentials found must never mean asking 169.254.169.254


def cli(env, *args, timeout=240):
    return subprocess.run([sys.executable, "-m", "dkapprox", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def cli_many(env, *argvs):
    with ThreadPoolExecutor(len(argvs)) as pool:
        return list(pool.map(lambda argv: cli(env, *argv), argvs))


def assert_quiet(result, code=0):
    assert result.returncode == code, (result.args, result.returncode, result.stdout, result.stderr)
    assert "Unclosed" not in result.stderr and "client_session" not in result.stderr, result.stderr


@pytest.fixture
def s3_input(s3):
    X = np.random.default_rng(0).standard_normal((ROWS, 8)).astype(np.float32)
    fs = s3fs.S3FileSystem(asynchronous=True, skip_instance_cache=True)
    zarr.create_array(zarr.storage.FsspecStore(fs, path="data/in.zarr"), shape=X.shape, chunks=(CHUNK, 8),
                      dtype=X.dtype)[:] = X
    return X


def test_every_path_on_s3_without_aiohttp_noise(s3, s3_input):
    """Also the "environment" route of the credentials test below: keys in AWS_* variables."""
    env = {**BASE_ENV, **s3.env()}
    featurize, fit = cli_many(
        env, ["--debug", "featurize", "s3://data/in.zarr", "--method", "rbf", "--n-components", 16, "--out", "s3://data/f.zarr"],
        ["fit", "s3://data/in.zarr", "--method", "nystroem", "--n-components", 16, "--out", "s3://data/model"])
    assert_quiet(featurize)
    assert_quiet(fit)
    assert "model: s3://data/model (sha256:" in fit.stdout
    transform, info_out, info_model, again = cli_many(
        env, ["transform", "s3://data/in.zarr", "--model", "s3://data/model", "--out", "s3://data/t.zarr"],
        ["info", "s3://data/f.zarr"], ["info", "s3://data/model", "--json"],
        ["featurize", "s3://data/in.zarr", "--method", "rbf", "--n-components", 16, "--out", "s3://data/f.zarr"])
    for result in (transform, info_out, info_model, again):
        assert_quiet(result)
    assert "status: complete" in info_out.stdout and '"kind": "model"' in info_model.stdout
    assert "already complete for this job; nothing to do" in again.stdout
    model = models.load("s3://data/model")
    assert io.open_features("s3://data/t.zarr").compute().tobytes() == \
        transform_by_blocks(model, s3_input, CHUNK).tobytes()  # the same blocks give the same bits
    failed = cli(env, "--debug", "info", "s3://nobucket/m")
    assert failed.returncode == 66
    for result in (featurize, fit, transform, info_out, info_model, again, failed):
        assert SECRET_KEY not in result.stdout + result.stderr, result.args
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    for path in fs.find("data"):
        assert SECRET_KEY.encode() not in fs.cat_file(path), path


def _route(route, s3, tmp_path):
    """(environment, extra CLI options) that give the credentials by ``route`` (for "url": in the URLs)."""
    nowhere = str(tmp_path / "no-such-aws-file")  # and never the user's ~/.aws
    env = {**BASE_ENV, "AWS_CONFIG_FILE": nowhere, "AWS_SHARED_CREDENTIALS_FILE": nowhere}
    if route == "profile":
        creds = tmp_path / "credentials"
        creds.write_text(f"[nightly]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n")
        return {**env, "AWS_SHARED_CREDENTIALS_FILE": str(creds), "AWS_PROFILE": "nightly",
                "AWS_ENDPOINT_URL": s3.endpoint, "AWS_DEFAULT_REGION": REGION}, []
    options = [f"key={ACCESS_KEY}", f"secret={SECRET_KEY}"] if route == "storage-option" else []
    options += [f"client_kwargs.endpoint_url={s3.endpoint}", f"client_kwargs.region_name={REGION}"]
    return env, [a for o in options for a in ("--storage-option", o)]


# the "environment" route is test_every_path_on_s3_without_aiohttp_noise (one fewer round of CLI runs)
@pytest.mark.parametrize("route", ["profile", "storage-option", "url"])
def test_credentials_are_never_printed_or_recorded(s3, s3_input, tmp_path, route):
    """The "url" route writes them into every URL (s3://KEY:SECRET@bucket/...), where only the URLs carry
    them; a missing output bucket is named before the fit starts."""
    env, opts = _route(route, s3, tmp_path)
    s3_ = f"s3://{ACCESS_KEY}:{SECRET_KEY}@" if route == "url" else "s3://"
    first = cli(env, "--debug", "featurize", f"{s3_}data/in.zarr", "--method", "rbf", "--n-components", 16,
                "--out", f"{s3_}data/f.zarr", "--save-model", f"{s3_}data/m", *opts)
    assert_quiet(first)
    commands = {
        "transform": ["transform", f"{s3_}data/in.zarr", "--model", f"{s3_}data/m", "--out", f"{s3_}data/t.zarr"],
        "info model": ["--debug", "info", f"{s3_}data/m"],
        "no model bucket": ["--debug", "transform", f"{s3_}data/in.zarr", "--model", f"{s3_}nobucket/m",
                            "--out", f"{s3_}data/u.zarr"],
        "info": ["info", f"{s3_}data/f.zarr"],
        "no output bucket": ["--debug", "featurize", f"{s3_}data/in.zarr", "--method", "rbf", "--n-components", 16,
                             "--out", f"{s3_}nobucket/f.zarr"],
        "verify": ["verify", f"{s3_}data/f.zarr"],
        "info json": ["--debug", "info", f"{s3_}data/f.zarr", "--json"],
    }
    if route != "url":  # the first three carry the route's credentials through a read, a write and a failure;
        commands = dict(list(commands.items())[:3])  # the rest reads and fails alike by every route (-20 s a route)
    results = dict(zip(commands, cli_many(env, *([*argv, *opts] for argv in commands.values()))))
    for name, result in results.items():
        assert_quiet(result, 66 if name.startswith("no ") else 0)
        assert not name.startswith("no ") or "nobucket" in result.stderr, result.stderr
    if route == "url":
        assert "checks out" in results["verify"].stdout or "ok" in results["verify"].stdout.lower()
        assert "fitted" not in results["no output bucket"].stderr, "the missing output bucket was found after the fit"
        assert '"path": "s3://data/in.zarr"' in results["info json"].stdout, results["info json"].stdout
    results = list(results.values())
    for result in [first, *results]:
        assert SECRET_KEY not in result.stdout + result.stderr, result.args
        if route == "url":
            assert ACCESS_KEY not in result.stdout + result.stderr, result.args
    fs = s3fs.S3FileSystem(key=ACCESS_KEY, secret=SECRET_KEY, skip_instance_cache=True,
                           client_kwargs={"endpoint_url": s3.endpoint, "region_name": REGION})
    written = fs.find("data")
    assert any(p.endswith("m/model.json") for p in written) and any(p.endswith("t.zarr/zarr.json") for p in written)
    for path in written:
        assert SECRET_KEY.encode() not in fs.cat_file(path), path
        assert route != "url" or ACCESS_KEY.encode() not in fs.cat_file(path), path
    if route != "environment":  # the route really carried the credentials: without them the same run fails
        bare = {k: v for k, v in env.items() if k not in ("AWS_PROFILE",)}
        refused = cli(bare, "info", "s3://data/m", *(opts if route == "url" else []))  # the endpoint, no keys
        assert refused.returncode != 0 and SECRET_KEY not in refused.stdout + refused.stderr


def test_storage_options_parse_like_params_and_nest():
    assert parse_storage_options(["anon=false", "client_kwargs.endpoint_url=http://h:9000",
                                  "client_kwargs.region_name=eu-west-1", "config_kwargs.max_pool_connections=50",
                                  "secret=123", "key=007"]) == {
        "anon": False, "client_kwargs": {"endpoint_url": "http://h:9000", "region_name": "eu-west-1"},
        "config_kwargs": {"max_pool_connections": 50}, "secret": "123", "key": "007"}
    for bad in ("s3cr3t", "=s3cr3t", "a..b=s3cr3t"):  # a value may be a secret: never echoed
        with pytest.raises(click.BadParameter) as info:
            parse_storage_options([bad])
        assert "s3cr3t" not in info.value.format_message()
    with pytest.raises(click.BadParameter, match="given both as a value and as a group"):
        parse_storage_options(["a=1", "a.b=2"])


def test_a_parquet_dataset_on_s3_is_read_identified_by_etag_and_refreshed(s3, tmp_path):
    """Jobs read Parquet (issue 30): the files of an s3:// dataset are the blocks, their ETags its identity."""
    import pandas as pd
    from cli.test_parquet import write_s3_dataset

    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    frames = write_s3_dataset(fs, 4)
    env = {**BASE_ENV, **s3.env()}
    (tmp_path / "threads.yaml").write_text("kind: local\nn_workers: 1\nthreads_per_worker: 2\n"
                                           "processes: false\ndashboard_address: null\n")
    job = ("featurize", "s3://data/in.parquet/", "--columns", "a,b", "--method", "rbf", "--n-components", 16,
           "--out", "s3://data/f.zarr", "--cluster", tmp_path / "threads.yaml")
    first = cli(env, *job)
    assert_quiet(first)
    assert "3 blocks written" in first.stdout
    X = pd.concat(frames)[["a", "b"]].to_numpy()
    from dkapprox.kernel_approximation import RBFSampler

    expected = transform_by_blocks(RBFSampler(n_components=16, random_state=0).fit(X), X, 100)
    assert io.open_features("s3://data/f.zarr").compute().tobytes() == expected.tobytes()
    frames[1]["a"] += 1.0
    with fs.open("data/in.parquet/part.1.parquet", "wb") as f:  # the same size, another ETag
        frames[1].to_parquet(f, index=False)
    rerun = cli(env, *job)
    assert_quiet(rerun, 73)
    assert "1 files changed" in rerun.stderr and "rows 100-200" in rerun.stderr, rerun.stderr
    refreshed = cli(env, *job, "--refresh")
    assert_quiet(refreshed)
    assert "1 blocks written, 2 already there, of 3" in refreshed.stdout
    verify = cli(env, "verify", "s3://data/f.zarr")
    assert_quiet(verify)
    X = pd.concat(frames)[["a", "b"]].to_numpy()
    expected = transform_by_blocks(RBFSampler(n_components=16, random_state=0).fit(X), X, 100)
    assert io.open_features("s3://data/f.zarr").compute().tobytes() == expected.tobytes()
