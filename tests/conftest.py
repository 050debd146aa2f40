"""Shared fixtures: seeds (sweep many with DKAPPROX_SEEDS=n), dtypes, a small data set."""

import os

import numpy as np
import pytest

N_SEEDS = int(os.environ.get("DKAPPROX_SEEDS", "3"))


@pytest.fixture(params=range(N_SEEDS))
def seed(request):
    return request.param


@pytest.fixture(params=[np.float64, np.float32], ids=["float64", "float32"])
def dtype(request):
    return request.param


# Test helper modules (e.g. _shipping.py) must be importable by name in
# LocalCluster worker processes, which inherit sys.path when they are spawned.
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """One moto S3 server on loopback for the session (tests/_s3.py); reset it per test with s3."""
    from _s3 import MotoServer

    with MotoServer(log=tmp_path_factory.mktemp("moto") / "moto.log") as server:
        yield server


@pytest.fixture
def s3(s3_server):
    """An empty S3 (moto) with a bucket ``data``, and the AWS_* variables set for this test."""
    s3_server.reset()
    s3_server.make_bucket("data")
    with s3_server.environment():
        yield s3_server
