"""A real S3-compatible server for the tests: moto in server mode, in its own process.

moto's server is what s3fs's own test suite runs against. It listens on
loopback (or, on the multi-host bed, on an address inside a network namespace
the tests made); nothing here talks to any other address.

    with MotoServer() as s3:
        s3.make_bucket("data")
        with s3.environment():          # AWS_* variables for s3fs / botocore
            dkapprox.io.write_features(..., "s3://data/out.zarr", ...)
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

# moto accepts any keys; these are obviously not real ones, and tests assert they never appear in output
ACCESS_KEY = "AKIADKAPPROXTESTKEY0"
SECRET_KEY = "dkapprox-test-secret-must-never-be-printed"
REGION = "eu-west-1"  # not us-east-1: s3fs sends its region as the LocationConstraint, which us-east-1 refuses
START_TIMEOUT = 30.0


@contextlib.contextmanager
def aws_environment(env):
    """Set these AWS_* variables for a while, and forget S3 filesystems made under other ones.

    fsspec caches filesystem instances by their arguments, not by the
    environment botocore read when it made them: one made for another
    endpoint would be handed out again, and talk to a server that is gone.
    """
    import s3fs

    saved = {k: os.environ.get(k) for k in env}
    s3fs.S3FileSystem.clear_instance_cache()
    os.environ.update(env)
    try:
        yield
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def free_port(host="127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class MotoServer:
    """moto_server on ``host:port`` in a child process (``prefix`` runs it elsewhere, e.g. ``ip netns exec``)."""

    def __init__(self, host="127.0.0.1", port=None, *, prefix=(), log=None):
        self.host = host
        self.port = port or free_port(host if not prefix else "127.0.0.1")
        self.prefix = list(prefix)
        self.log = log
        self.proc = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def env(self) -> dict:
        """The variables a user sets to reach this server (botocore reads AWS_ENDPOINT_URL)."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_DEFAULT_REGION": REGION, "AWS_ENDPOINT_URL": self.endpoint}

    def storage_options(self) -> dict:
        """The same, as fsspec/s3fs storage options (for tests that pass credentials explicitly)."""
        return {"key": ACCESS_KEY, "secret": SECRET_KEY, "client_kwargs": {"endpoint_url": self.endpoint,
                                                                          "region_name": REGION}}

    @contextlib.contextmanager
    def environment(self):
        with aws_environment(self.env()):
            yield self

    def start(self):
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL
        # moto's server, its object writes made atomic as S3's are (tests/_moto_atomic.py)
        cmd = [*self.prefix, sys.executable, str(Path(__file__).with_name("_moto_atomic.py")), "-H", self.host,
               "-p", str(self.port)]
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:  # bounded: about 300 polls at most
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto server exited with {self.proc.returncode}: {' '.join(cmd)}")
            if self.alive(timeout=0.5):
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto server did not answer on {self.endpoint} within {START_TIMEOUT:.0f} s")

    def alive(self, timeout=1.0) -> bool:
        try:
            urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=timeout).read(1)
            return True
        except (urllib.error.URLError, OSError):
            return False

    def reset(self):
        """Forget every bucket and object (moto's own reset endpoint)."""
        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST"),
                               timeout=10).read()

    def make_bucket(self, name):
        import s3fs

        fs = s3fs.S3FileSystem(**self.storage_options(), skip_instance_cache=True)
        fs.mkdir(name)
        return fs

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

