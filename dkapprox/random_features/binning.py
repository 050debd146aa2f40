"""RandomBinningFeatures: random binning features of the Laplacian kernel (Rahimi and Recht 2007).

The 1-D hat kernel ``max(0, 1 - |d| / delta)`` is the probability that two
points a distance ``d`` apart fall in the same cell of a grid of pitch
``delta`` shifted uniformly at random. Mixing over pitches with density
``gamma^2 delta exp(-gamma delta)`` (a Gamma(2, 1/gamma) law) turns that
probability into ``exp(-gamma |d|)``; a grid per coordinate, drawn
independently, gives ``exp(-gamma ||x - y||_1)``. Each of ``n_grids`` grids
puts a row in one cell, so the fraction of grids where two rows share a cell
is an unbiased estimate of :func:`sklearn.metrics.pairwise.laplacian_kernel`.

Cells are hashed into ``n_components`` columns with a random sign (as feature
hashing does), so collisions of different cells cancel in expectation and
the estimate stays unbiased. The hash of a row's cell is a function of the
row's values and the fitted state only (multiply-shift of the cell's integer
coordinates with 64-bit multipliers drawn on the driver, then MurmurHash3's
64-bit finalizer): it never depends on chunking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils import check_random_state

from .. import backends
from .._base import BlockwiseTransformer
from ..engine import SizedState
from ..utils import FMIX_ONE as _ONE
from ..utils import FMIX_S32 as _S32
from ..utils import Interval
from ..utils import fmix64 as _fmix64


@dataclass(frozen=True)
class BinningState(SizedState):
    pitches: np.ndarray  # (n_grids, n_features), the data's dtype
    shifts: np.ndarray  # (n_grids, n_features), uniform in [0, pitch)
    multipliers: np.ndarray  # (n_grids, n_features) odd uint64
    increments: np.ndarray  # (n_grids,) uint64
    n_components: int
    dense_output: bool


def binning_features(block, state):
    """One signed entry ``+-1/sqrt(n_grids)`` per grid and row, hashed into ``n_components`` columns.

    The cells and their hashes are compiled where :mod:`dkapprox.backends._jit` runs (the same bits as
    :func:`_numpy_cells`, the reference: benchmarks/bench_epilogues.py measured 91% of a float64
    block in that loop); scipy then assembles the CSR matrix.
    """
    if sp.issparse(block):
        block = block.toarray()  # a zero coordinate falls in a cell like any value
    refuse_device(block)
    n_rows = block.shape[0]
    n_grids = state.pitches.shape[0]
    # scipy.sparse keeps int32 indices when they fit: build them so, not as an int64 copy
    columns = np.empty((n_rows, n_grids), dtype=np.int32 if state.n_components <= 2**31 else np.int64)
    values = np.empty((n_rows, n_grids), dtype=block.dtype)
    scale = 1.0 / math.sqrt(n_grids)
    if not backends.binning_cells(block, state, scale, columns, values):
        _numpy_cells(block, state, scale, columns, values)
    out = sp.csr_matrix((values.ravel(), columns.ravel(), np.arange(0, n_rows * n_grids + 1, n_grids)),
                        shape=(n_rows, state.n_components))
    out.sum_duplicates()
    return out.toarray() if state.dense_output else out


def refuse_device(X):
    """Random binning stays on the host: a clear error for an array (or dask meta) of another namespace.

    Its output is a scipy.sparse matrix (``dense_output=False``, the default) and its cells
    are scattered into hashed columns with duplicates summed: the array API has neither
    sparse arrays nor a scatter-add, and no GPU was at hand to profile CuPy's own
    (``cupyx.scipy.sparse``) against a host round trip. The user's copy to the host is one
    call, and saying so beats a silent one.
    """
    if backends.namespace(X) is not None:
        raise TypeError(
            f"RandomBinningFeatures runs on NumPy blocks only, got an array of {backends.namespace(X).__name__}: "
            "copy it to the host first (cupy.asnumpy(X), or X.map_blocks(cupy.asnumpy) for a dask array)")


def _numpy_cells(block, state, scale, columns, values):
    """The reference: each grid over the whole block, in NumPy (the compiled path gives its bits)."""
    n_grids = state.pitches.shape[0]
    width = np.uint64(state.n_components)
    for g in range(n_grids):
        scaled = block - state.shifts[g]
        scaled /= state.pitches[g]
        cells = np.floor(scaled, out=scaled).astype(np.int64).view(np.uint64)
        del scaled
        cells *= state.multipliers[g]  # wraps modulo 2**64, as the hash wants
        h = cells.sum(axis=1, dtype=np.uint64)
        h += state.increments[g]
        h = _fmix64(h)
        columns[:, g] = ((h >> _S32) * width) >> _S32  # high 32 bits mapped onto [0, n_components)
        values[:, g] = np.where(h & _ONE, scale, -scale)


class RandomBinningFeatures(BlockwiseTransformer):
    """Sparse random binning features of the Laplacian kernel (Rahimi and Recht 2007).

    Each of ``n_grids`` random grids (per coordinate: a Gamma(2, 1/gamma)
    pitch and a uniform shift, drawn on the driver) puts a row in one cell;
    the cell is hashed, with a random sign, into one of ``n_components``
    columns. ``transform(X) @ transform(Y).T`` estimates
    ``exp(-gamma ||x - y||_1)`` without bias
    (:func:`sklearn.metrics.pairwise.laplacian_kernel`). A row has at most
    ``n_grids`` non-zero entries.

    Parameters
    ----------
    n_components : int, default=4096
        Number of output columns the cells are hashed into (at most 2**32).
        Collisions add variance, not bias: keep it well above ``n_grids``.
    gamma : float, default=1.0
        Coefficient of the Laplacian kernel ``exp(-gamma ||x - y||_1)``.
    n_grids : int, default=64
        Number of random grids; the variance of the estimate falls as 1 / n_grids.
    dense_output : bool, default=False
        Return dense arrays (NumPy, or a dask array of NumPy blocks) instead
        of scipy.sparse CSR matrices (for dask input: a dask array of CSR
        blocks, declared in its meta).
    random_state : int, RandomState instance or None, default=None
        Seed of the grids and the hash, drawn on the driver with NumPy.

    Attributes
    ----------
    pitches_ : ndarray of shape (n_grids, n_features)
        Cell widths, float64.
    shifts_ : ndarray of shape (n_grids, n_features)
        Grid offsets, uniform in ``[0, pitch)``, float64.
    hash_multipliers_ : ndarray of shape (n_grids, n_features), dtype uint64
        Odd 64-bit multipliers of each grid's multiply-shift hash of a
        row's integer cell coordinates.
    hash_increments_ : ndarray of shape (n_grids,), dtype uint64
        Each grid's constant added to that hash before MurmurHash3's
        finalizer, whose bits give the row's column and sign.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit. Defined only when ``X`` has
        feature names that are all strings.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.metrics.pairwise import laplacian_kernel
    >>> from dkapprox.random_features import RandomBinningFeatures
    >>> X = np.random.default_rng(0).normal(size=(40, 3))
    >>> rbf = RandomBinningFeatures(n_components=2**20, n_grids=4096, gamma=0.5, random_state=0)
    >>> Z = rbf.fit_transform(X)
    >>> Z.format, Z.shape, Z[0].nnz <= 4096
    ('csr', (40, 1048576), True)
    >>> bool(np.abs((Z @ Z.T).toarray() - laplacian_kernel(X, gamma=0.5)).max() < 0.1)
    True
    """

    # --method binning: the technique's name (random binning); "laplacian" would not tell it from
    # --method fourier --param kernel=laplacian, which approximates the same kernel
    _cli_name = "binning"

    def _exact_kernel(self):
        gamma = self.gamma
        return lambda Xs: pairwise_kernels(Xs, metric="laplacian", gamma=gamma)

    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, 2**32, closed="both")],
        "gamma": [Interval(Real, 0.0, None, closed="neither")],
        "n_grids": [Interval(Integral, 1, None, closed="left")],
        "dense_output": ["boolean"],
        "random_state": ["random_state"],
    }
    _block_fn = staticmethod(binning_features)

    def __init__(self, n_components=4096, *, gamma=1.0, n_grids=64, dense_output=False, random_state=None):
        self.n_components = n_components
        self.gamma = gamma
        self.n_grids = n_grids
        self.dense_output = dense_output
        self.random_state = random_state

    def _fit(self, X):
        rs = check_random_state(self.random_state)
        shape = (self.n_grids, X.shape[1])
        self.pitches_ = rs.gamma(2.0, 1.0 / self.gamma, size=shape)
        self.shifts_ = rs.uniform(size=shape) * self.pitches_
        self.hash_multipliers_ = rs.randint(0, 2**64, size=shape, dtype=np.uint64) | _ONE
        self.hash_increments_ = rs.randint(0, 2**64, size=self.n_grids, dtype=np.uint64)

    @property
    def _n_features_out(self):
        return self.n_components

    def _sparse_out(self, sparse_in):
        return not self.dense_output

    def _transform(self, X, given, **kwargs):
        refuse_device(getattr(X, "_meta", X))  # a dask array of CuPy chunks fails here, not in a task
        return super()._transform(X, given, **kwargs)

    def _state(self, dtype):
        return BinningState(self.pitches_.astype(dtype, copy=False), self.shifts_.astype(dtype, copy=False),
                            self.hash_multipliers_, self.hash_increments_, int(self.n_components),
                            bool(self.dense_output))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
