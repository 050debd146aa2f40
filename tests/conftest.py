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
