"""Row access for landmark selection: the same three questions of in-memory and dask data.

A landmark selector only asks how many rows there are, for some rows by
global index, and for a fold of ``chunk_fn(row_start, state, block)`` over the
row blocks. :class:`InMemoryRows` answers on the array at hand;
:class:`DaskRows` answers with :mod:`dkapprox.engine` (each ``take`` and each
``reduce`` is one pass over the data, each block read at most once; unknown
chunk sizes cost one more pass, once per fit). ``passes`` counts the passes,
the same for both kinds of input (dask input with unknown chunk sizes: +1).
"""

from __future__ import annotations

import numpy as np

from .. import backends, engine
from . import _lazy


class InMemoryRows:
    """NumPy or scipy.sparse rows: one block holding every row."""

    def __init__(self, X):
        self.X = X
        self.passes = 0

    @property
    def n_rows(self) -> int:
        return self.X.shape[0]

    def take(self, indices):
        self.passes += 1
        return self.X[indices]

    def reduce(self, chunk_fn, combine_fn, state, *, running=False):
        self.passes += 1
        return combine_fn([chunk_fn(0, state, self.X)])


class DaskRows:
    """Rows of a dask array, addressed by global row index whatever the chunking.

    ``check`` (a :class:`~dkapprox.inputs._validation.BlockCheck`) runs on every block
    a pass reads, so NaN or infinity in the rows read fails with scikit-learn's
    message (``Input X contains NaN``) instead of an error from deep in a kernel.
    """

    def __init__(self, X, check=None):
        if check is not None:
            X = X.map_blocks(_checked, check, dtype=X.dtype, meta=X._meta)
        self.X = X
        self.passes = 0
        self._sizes = None

    @property
    def sizes(self) -> tuple:
        """Rows per block; unknown sizes are counted once (a pass) and then declared on ``X``."""
        if self._sizes is None:
            if any(c != c for c in self.X.chunks[0]):  # NaN: unknown chunk sizes
                self.passes += 1
                self._sizes = engine.row_sizes(self.X)
                self.X = engine.with_row_sizes(self.X, self._sizes)
            else:
                self._sizes = engine.row_sizes(self.X)
        return self._sizes

    @property
    def n_rows(self) -> int:
        return sum(self.sizes)

    def take(self, indices):
        # device blocks (CuPy) are copied to the host for the rows taken: the landmarks and the
        # pilot are NumPy state, drawn on the driver (only the blocks holding a wanted row are read)
        host = self.X.map_blocks(backends.to_numpy, dtype=self.X.dtype, meta=_host_meta(self.X))
        lazy = engine.take_rows(host, indices, sizes=self.sizes)
        self.passes += 1
        return _lazy.compute(lazy, arrays=[self.X])[0]

    def reduce(self, chunk_fn, combine_fn, state, *, running=False):
        """One pass: ``combine_fn`` over ``chunk_fn(row_start, state, block)``; ``running``: a running
        total (one total and one group of partials held at a time, for large partials) instead of a tree."""
        if self._sizes is None:  # every block must know its global row offset
            self._sizes = self.sizes
        lazy = engine.reduce_aligned_rows([self.X], chunk_fn, combine_fn, state, running=running)
        self.passes += 1
        return _lazy.compute(lazy, arrays=[self.X])[0]


def _host_meta(X):
    meta = X._meta
    return meta if backends.namespace(meta) is None else np.empty((0,) * X.ndim, dtype=X.dtype)


def _checked(block, check):
    check(block)
    return block


def row_source(X, check=None):
    """Rows of ``X``; ``check`` runs on the blocks of dask input (NumPy input is validated whole)."""
    return DaskRows(X, check) if _lazy.as_input(X).lazy else InMemoryRows(X)
