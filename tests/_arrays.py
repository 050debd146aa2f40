"""Dask arrays of unknown row sizes and their blocks, made and computed alike in both dask.array modes.

Legacy dask.array and its array expressions (``DASK_ARRAY__QUERY_PLANNING=True``) both run the
tests; array expressions have no boolean indexing by a dask array, no ``to_delayed``, and cannot
compute an array of unknown (NaN) row sizes whole (``compute`` rechunks it, which needs the sizes).
"""

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp

from dkapprox import engine
from dkapprox.engine import _dask_compat


def _take_flagged(block, flags):
    return block[flags]


def rows_where(a, flags):
    """``a[flags]`` for a 1-D boolean dask array ``flags`` with ``a``'s row chunks: unknown (NaN) row sizes.

    What boolean indexing gives in legacy dask.array, taken block by block in both modes.
    """
    index = "ij"[: a.ndim]
    return da.blockwise(_take_flagged, index, a, index, flags, "i", adjust_chunks={"i": lambda n: np.nan},
                        dtype=a.dtype, meta=np.empty((0,) * a.ndim, a.dtype))


def computed_whole(lazy):
    """``lazy`` computed as a user computes it: whole in legacy dask.array; block by block under array expressions.

    Array expressions cannot compute an array of unknown row sizes whole (their finalize rechunks it to one
    chunk, which needs the sizes; dask's own ``ddf.to_dask_array()`` and ``ddf.values`` fail there before
    that), so there a user reads the blocks, or asks for a lazy dask DataFrame (``set_output``).
    """
    if engine.expression_mode() and any(np.isnan(n) for n in lazy.chunks[0]):
        return computed_blocks(lazy)
    return lazy.compute()


def computed_blocks(lazy):
    """``lazy`` computed block by block; each block has the declared columns, dtype and kind (rows: NaN)."""
    blocks = dask.compute(*_dask_compat.delayed_blocks(lazy))
    for block in blocks:
        assert block.shape[1:] == lazy.shape[1:], (block.shape, lazy.shape)
        assert block.dtype == lazy.dtype, (block.dtype, lazy.dtype)
        assert sp.issparse(block) == sp.issparse(lazy._meta), (type(block), type(lazy._meta))
    return sp.vstack(blocks, format="csr") if sp.issparse(lazy._meta) else np.concatenate(blocks)
