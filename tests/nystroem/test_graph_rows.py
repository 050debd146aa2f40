"""The graph primitives landmark selection stands on: row sizes, gathering rows, folding with row offsets."""

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from _arrays import rows_where

from dkapprox import engine
from dkapprox.engine import _dask_compat
from dkapprox.inputs import _lazy


def offsets_and_rows(row_start, state, block):
    return [(row_start, block.shape[0], float(block[:, 0].sum()) * state["scale"])]


def concatenate(parts):
    return sorted(p for part in parts for p in part)


def test_row_sizes_known_and_unknown():
    X = da.from_array(np.arange(100.0).reshape(50, 2), chunks=(7, 1))
    assert engine.row_sizes(X) == (7,) * 7 + (1,)
    unknown = rows_where(X, X[:, 0] % 4 == 0)
    assert np.isnan(unknown.chunks[0][0])
    assert sum(engine.row_sizes(unknown)) == 25


@pytest.mark.parametrize("chunks", [(1, -1), (7, 2), (60, -1)])
def test_take_rows_in_the_requested_order(chunks):
    X = np.random.default_rng(0).random((60, 3))
    indices = np.array([59, 0, 13, 14, 7, 13, 58])
    got = _lazy.compute(engine.take_rows(da.from_array(X, chunks=chunks), indices))[0]
    np.testing.assert_array_equal(got, X[indices])


def test_take_rows_of_sparse_blocks_and_unknown_sizes():
    X = sp.random(40, 6, density=0.3, format="csr", random_state=0)
    lazy = da.from_array(X, chunks=(9, 6), asarray=False)
    got = _lazy.compute(engine.take_rows(lazy, [3, 39, 10]))[0]
    assert sp.isspmatrix_csr(got) or isinstance(got, sp.csr_array)
    np.testing.assert_array_equal(got.toarray(), X[[3, 39, 10]].toarray())
    dense = da.from_array(X.toarray(), chunks=9)
    unknown = rows_where(dense, dense[:, 0] >= 0)
    np.testing.assert_array_equal(_lazy.compute(engine.take_rows(unknown, [5, 1]))[0], X[[5, 1]].toarray())
    with pytest.raises(IndexError):
        engine.take_rows(dense, [40])


def test_declared_row_sizes_give_every_block_its_global_offset():
    X = np.random.default_rng(0).random((103, 2))
    lazy = da.from_array(X, chunks=(10, 1))
    unknown = rows_where(lazy, lazy[:, 0] >= 0)
    declared = engine.with_row_sizes(unknown, engine.row_sizes(unknown))
    assert declared.chunks == ((10,) * 10 + (3,), (1, 1))
    if engine.expression_mode():  # an array of a graph is named anew (FromGraph): its graph holds the same tasks
        assert set(_dask_compat.optimized([unknown])[0]) <= set(declared.__dask_graph__())
    else:
        assert declared.name == unknown.name
    got = _lazy.compute(engine.reduce_aligned_rows([declared], offsets_and_rows, concatenate, {"scale": 2.0}))[0]
    assert [(s, n) for s, n, _ in got] == [(s, min(10, 103 - s)) for s in range(0, 103, 10)]
    np.testing.assert_allclose([v for *_, v in got], [2 * X[s:s + 10, 0].sum() for s in range(0, 103, 10)])
    with pytest.raises(ValueError, match="3 row sizes for an array of 11 row blocks"):
        engine.with_row_sizes(unknown, (1, 2, 3))
