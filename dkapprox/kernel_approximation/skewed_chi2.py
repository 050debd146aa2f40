"""SkewedChi2Sampler: Fourier features of the skewed chi-squared kernel (Li et al. 2010)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.kernel_approximation import SkewedChi2Sampler as _SkSkewedChi2Sampler
from sklearn.utils import check_random_state

from .. import backends
from ..engine import SizedState
from ..inputs import BlockCheck
from ..kernels import skewed_chi2_kernel
from .rbf import FourierSampler, FourierState, fourier_features


@dataclass(frozen=True)
class SkewedChi2State(SizedState):
    skewedness: float
    fourier: FourierState


def skewed_chi2_features(block, state):
    xp = backends.namespace(block)
    if xp is not None:  # a new array too: log(block + c), on the block's device
        return fourier_features(xp.log(block + state.skewedness), state.fourier)
    shifted = block + np.asarray(state.skewedness, dtype=block.dtype)  # new array: blocks stay untouched
    np.log(shifted, out=shifted)
    return fourier_features(shifted, state.fourier)


class SkewedChi2Sampler(FourierSampler):
    """Approximate the skewed chi-squared kernel by Monte Carlo features.

    Same parameters, fitted attributes and numbers as
    :class:`sklearn.kernel_approximation.SkewedChi2Sampler`, plus dask and zarr input.

    Parameters
    ----------
    skewedness : float, default=1.0
        "Skewedness" c of the kernel; every entry of X must be > -c.
    n_components : int, default=100
    random_state : int, RandomState instance or None, default=None

    Attributes
    ----------
    random_weights_ : ndarray of shape (n_features, n_components), dtype={np.float64, np.float32}
        Weights drawn from the hyperbolic secant distribution, applied to
        ``log(X + skewedness)`` (float32 after a float32 fit).
    random_offset_ : ndarray of shape (n_components,), dtype={np.float64, np.float32}
        Random offsets, uniform in ``[0, 2 pi)``, added before the cosine.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit. Defined only when ``X`` has
        feature names that are all strings.

    Examples
    --------
    >>> import numpy as np
    >>> from dkapprox import SkewedChi2Sampler
    >>> X = np.array([[0.0, 1.0], [2.0, 3.0]])
    >>> SkewedChi2Sampler(n_components=4, random_state=0).fit_transform(X).shape
    (2, 4)
    """

    _cli_name = "skewed_chi2"

    def _exact_kernel(self):
        skewedness = self.skewedness
        return lambda Xs: skewed_chi2_kernel(Xs, skewedness=skewedness)

    _parameter_constraints = dict(_SkSkewedChi2Sampler._parameter_constraints)
    _accept_sparse = False
    _block_fn = staticmethod(skewed_chi2_features)

    def __init__(self, *, skewedness=1.0, n_components=100, random_state=None):
        self.skewedness = skewedness
        self.n_components = n_components
        self.random_state = random_state

    def _fit(self, X):
        rs = check_random_state(self.random_state)
        uniform = rs.uniform(size=(X.shape[1], self.n_components))
        weights = 1.0 / np.pi * np.log(np.tan(np.pi / 2.0 * uniform))  # inverse CDF of sech
        self._set_fourier(weights, rs.uniform(0, 2 * np.pi, size=self.n_components), X.dtype)

    def _state(self, dtype):
        return SkewedChi2State(float(self.skewedness), super()._state(dtype))

    def _block_check(self, finite=True):
        return BlockCheck(type(self).__name__, finite=finite, greater_than=-self.skewedness,
                          greater_than_message="X may not contain entries smaller than -skewedness.")

    def _transform(self, X, given, **kwargs):
        if not given.lazy:
            self._block_check(finite=False)(X)  # NumPy input: fail now, as scikit-learn does
        return super()._transform(X, given, **kwargs)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
