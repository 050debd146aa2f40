"""RBFSampler: random Fourier features for the Gaussian kernel (Rahimi & Recht 2007)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.kernel_approximation import RBFSampler as _SkRBFSampler
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils import check_random_state

from .. import backends, engine, inputs
from .._base import BlockwiseTransformer
from ..backends import combine_block_moments, moments
from ..engine import SizedState
from ..inputs import BlockCheck


@dataclass(frozen=True)
class FourierState(SizedState):
    """cos(X @ weights + offset) * sqrt(2 / n_components)."""

    weights: np.ndarray  # (n_features, n_components)
    offset: np.ndarray  # (n_components,)


def fourier_features(block, state):
    scale = math.sqrt(2.0 / state.offset.shape[0])
    xp = backends.namespace(block)
    if xp is None:
        return backends.fourier_map(block, state.weights, state.offset, scale)
    state = backends.state_on(state, block)
    return backends.fourier(xp, block @ state.weights, state.offset, scale)


def data_variance(X, estimator_name):
    """Variance of all entries, as scikit-learn's gamma='scale' needs it (one pass)."""
    if not inputs.as_input(X).lazy:
        if sp.issparse(X):
            return X.multiply(X).mean() - X.mean() ** 2
        return X.var()
    # each block is checked where it is read, so that NaN and infinity get their own messages
    n, _, m2, _ = inputs.compute(engine.tree_reduce(X, checked_moments, combine_block_moments,
                                                    args=(BlockCheck(estimator_name),)), arrays=[X])[0]
    return m2 / n if n else 0.0


def checked_moments(block, check):
    check(block)
    return moments(block)


class FourierSampler(BlockwiseTransformer):
    """What RBFSampler and SkewedChi2Sampler share: random_weights_, random_offset_ and their state."""

    def _set_fourier(self, weights, offset, dtype):
        # drawn in float64; stored as float32 after a float32 fit, as scikit-learn does
        cast = np.float32 if dtype == np.float32 else np.float64
        self.random_weights_ = weights.astype(cast, copy=False)
        self.random_offset_ = offset.astype(cast, copy=False)

    @property
    def _n_features_out(self):
        return self.n_components

    def _out_dtype(self, dtype):
        return np.result_type(dtype, self.random_weights_.dtype)

    def _state(self, dtype):
        dtype = self._out_dtype(dtype)
        return FourierState(self.random_weights_.astype(dtype, copy=False),
                            self.random_offset_.astype(dtype, copy=False))


class RBFSampler(FourierSampler):
    """Approximate the RBF kernel feature map with random Fourier features.

    Same parameters, fitted attributes and numbers as
    :class:`sklearn.kernel_approximation.RBFSampler`; also takes dask and zarr
    arrays, for which ``transform`` is lazy and ships the random matrix once.

    Parameters
    ----------
    gamma : 'scale' or float, default=1.0
        Parameter of the RBF kernel exp(-gamma * ||x - y||^2). ``'scale'``
        uses 1 / (n_features * X.var()), read in one pass over dask input.
    n_components : int, default=100
        Number of Monte Carlo samples per original feature.
    random_state : int, RandomState instance or None, default=None
        Seed of the random weights and offsets, drawn on the driver with NumPy
        exactly as scikit-learn draws them, so they never depend on chunking
        (the features of other row blocks are equal within the rounding
        bound of their dot products: see ``transform``).

    Attributes
    ----------
    random_offset_ : ndarray of shape (n_components,), dtype={np.float64, np.float32}
        Random offsets, uniform in ``[0, 2 pi)``, added to the projection
        before its cosine (float32 after a float32 fit, as scikit-learn's).
    random_weights_ : ndarray of shape (n_features, n_components), dtype={np.float64, np.float32}
        Random projection directions drawn from the Fourier transform of
        the RBF kernel, ``N(0, 2 gamma)`` (float32 after a float32 fit).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit. Defined only when ``X`` has
        feature names that are all strings.

    Examples
    --------
    >>> import dask.array as da
    >>> from dkapprox import RBFSampler
    >>> X = da.random.default_rng(0).random((10_000, 8), chunks=(1_000, 8))
    >>> Z = RBFSampler(n_components=64, random_state=0).fit(X).transform(X)
    >>> Z.numblocks, Z.dtype     # lazy: a dask array, nothing computed yet
    ((10, 1), dtype('float64'))
    >>> Z.compute().shape
    (10000, 64)
    """

    _cli_name = "rbf"

    def _exact_kernel(self):
        gamma = float(getattr(self, "_gamma", self.gamma))  # 'scale' is resolved at fit
        return lambda Xs: pairwise_kernels(Xs, metric="rbf", gamma=gamma)

    _parameter_constraints = dict(_SkRBFSampler._parameter_constraints)
    _block_fn = staticmethod(fourier_features)

    def __init__(self, *, gamma=1.0, n_components=100, random_state=None):
        self.gamma = gamma
        self.n_components = n_components
        self.random_state = random_state

    def _fit(self, X):
        rs = check_random_state(self.random_state)
        n_features = X.shape[1]
        if self.gamma == "scale":
            var = data_variance(X, type(self).__name__)
            self._gamma = 1.0 / (n_features * var) if var != 0 else 1.0
        else:
            self._gamma = self.gamma
        weights = (2.0 * self._gamma) ** 0.5 * rs.normal(size=(n_features, self.n_components))
        self._set_fourier(weights, rs.uniform(0, 2 * np.pi, size=self.n_components), X.dtype)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
