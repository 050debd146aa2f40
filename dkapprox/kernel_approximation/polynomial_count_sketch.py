"""PolynomialCountSketch: Tensor Sketch of the polynomial kernel (Pham & Pagh 2013)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.fft
import scipy.sparse as sp
from sklearn.kernel_approximation import PolynomialCountSketch as _SkPolynomialCountSketch
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils import check_random_state

from .. import backends
from .._base import BlockwiseTransformer
from ..engine import SizedState

_TILE_BYTES = 8 * 2**20  # bound on the complex intermediate of one row tile


@dataclass(frozen=True)
class SketchState(SizedState):
    sketches: tuple  # degree x csc (n_features', n_components) of +-1 at the hashed column
    gamma: float
    coef0: float


def count_sketch_features(block, state):
    xp = backends.namespace(block)
    if xp is not None:
        return _count_sketch_xp(xp, block, backends.state_on(state, block))
    n, m = block.shape[0], state.sketches[0].shape[1]
    dtype = block.dtype
    out = np.empty((n, m), dtype=dtype)
    tile = max(1, _TILE_BYTES // (8 * (m // 2 + 1)))
    for start in range(0, n, tile):
        rows = block[start : start + tile]
        xg = rows * dtype.type(math.sqrt(state.gamma))
        if state.coef0 != 0:
            column = np.full((xg.shape[0], 1), math.sqrt(state.coef0), dtype=dtype)
            xg = sp.hstack([xg, column], format="csr") if sp.issparse(xg) else np.hstack([xg, column])
        product = None
        for sketch in state.sketches:
            counts = xg @ sketch
            counts = counts.toarray() if sp.issparse(counts) else counts
            spectrum = scipy.fft.rfft(counts, axis=1)
            product = spectrum if product is None else np.multiply(product, spectrum, out=product)
        out[start : start + tile] = scipy.fft.irfft(product, n=m, axis=1)
    return out


def _count_sketch_xp(xp, block, state):
    """:func:`count_sketch_features` in the block's namespace: dense sketches, the namespace's FFT (cuFFT)."""
    n, m = block.shape[0], state.sketches[0].shape[1]
    tile = max(1, _TILE_BYTES // (8 * (m // 2 + 1)))
    parts = []
    for start in range(0, n, tile):
        xg = block[start:min(start + tile, n), :] * math.sqrt(state.gamma)
        if state.coef0 != 0:
            column = xp.full((xg.shape[0], 1), math.sqrt(state.coef0), dtype=xg.dtype, device=backends.device_of(xg))
            xg = xp.concat([xg, column], axis=1)
        product = None
        for sketch in state.sketches:
            spectrum = xp.fft.rfft(xg @ sketch, axis=1)
            product = spectrum if product is None else product * spectrum
        parts.append(xp.fft.irfft(product, n=m, axis=1))
    return parts[0] if len(parts) == 1 else xp.concat(parts, axis=0)


class PolynomialCountSketch(BlockwiseTransformer):
    """Polynomial kernel approximation via Tensor Sketch.

    Same parameters, fitted attributes (``indexHash_``, ``bitHash_``) and numbers
    as :class:`sklearn.kernel_approximation.PolynomialCountSketch`, plus dask and
    zarr input. Unlike scikit-learn, float32 input gives float32 output (scikit-
    learn returns float64), and the sketch is computed through real FFTs in row
    tiles, so memory stays near the output size (scikit-learn builds a complex128
    array of n_samples x degree x n_components).

    Parameters
    ----------
    gamma : float, default=1.0
    degree : int, default=2
    coef0 : int, default=0
    n_components : int, default=100
    random_state : int, RandomState instance or None, default=None

    Attributes
    ----------
    indexHash_ : ndarray of shape (degree, n_features), dtype=int64
        Output columns in ``[0, n_components)``: one 2-wise independent
        hash of the input features for each of the ``degree`` count sketches.
    bitHash_ : ndarray of shape (degree, n_features), dtype=float32
        Random signs in ``{+1, -1}``: the sign hash of each count sketch.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit. Defined only when ``X`` has
        feature names that are all strings.

    Examples
    --------
    >>> import numpy as np
    >>> from dkapprox import PolynomialCountSketch
    >>> X = np.ones((3, 4), dtype=np.float32)
    >>> PolynomialCountSketch(n_components=16, random_state=0).fit_transform(X).dtype
    dtype('float32')
    """

    _cli_name = "poly"

    def _exact_kernel(self):
        params = {"gamma": self.gamma, "degree": self.degree, "coef0": self.coef0}
        return lambda Xs: pairwise_kernels(Xs, metric="polynomial", **params)

    _parameter_constraints = dict(_SkPolynomialCountSketch._parameter_constraints)
    _accept_sparse = ("csc", "csr")
    _block_fn = staticmethod(count_sketch_features)

    def __init__(self, *, gamma=1.0, degree=2, coef0=0, n_components=100, random_state=None):
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.n_components = n_components
        self.random_state = random_state

    def _fit(self, X):
        rs = check_random_state(self.random_state)
        n_features = X.shape[1] + (1 if self.coef0 != 0 else 0)
        self.indexHash_ = rs.randint(0, high=self.n_components, size=(self.degree, n_features))
        self.bitHash_ = rs.choice(a=[-1, 1], size=(self.degree, n_features))

    @property
    def _n_features_out(self):
        return self.n_components

    def _state(self, dtype):
        n_features = self.indexHash_.shape[1]
        rows = np.arange(n_features)
        sketches = tuple(
            sp.csc_matrix((self.bitHash_[d].astype(dtype), (rows, self.indexHash_[d])),
                          shape=(n_features, self.n_components))
            for d in range(self.degree)
        )
        return SketchState(sketches, float(self.gamma), float(self.coef0))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
