"""Input stores for the storage tests: real Zarr arrays on disk, made from a seeded generator."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the tests here import _io_helpers by name
from _io_helpers import make_store  # noqa: E402


@pytest.fixture
def data():
    return np.random.default_rng(7).random((1000, 12)).astype(np.float32)


@pytest.fixture
def input_store(tmp_path, data):
    return make_store(tmp_path / "input.zarr", data, (100, 12))
