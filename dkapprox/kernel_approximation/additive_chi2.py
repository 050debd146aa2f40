"""AdditiveChi2Sampler: deterministic feature map of the additive chi2 kernel (Vedaldi & Zisserman 2011)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.kernel_approximation import AdditiveChi2Sampler as _SkAdditiveChi2Sampler
from sklearn.utils.validation import check_is_fitted

from .. import backends, inputs
from .._base import BlockwiseTransformer
from ..engine import SizedState
from ..kernels import chi2_sum_kernel
from ..utils import check_feature_names_in

# Vedaldi & Zisserman 2011, figure 2 c)
_DEFAULT_INTERVAL = {1: 0.8, 2: 0.5, 3: 0.4}


@dataclass(frozen=True)
class Chi2State(SizedState):
    sample_steps: int
    sample_interval: float


def additive_chi2_features(block, state):
    if sp.issparse(block):
        return _sparse_features(sp.csr_matrix(block), state)
    xp = backends.namespace(block)
    if xp is not None:
        return _features_xp(xp, block, state)
    steps, interval = state.sample_steps, state.sample_interval
    non_zero = block != 0.0
    x_nz = block[non_zero]
    out = np.zeros((block.shape[0], block.shape[1] * (2 * steps - 1)), dtype=block.dtype)
    parts = np.split(out, 2 * steps - 1, axis=1) if steps > 1 else [out]
    parts[0][non_zero] = np.sqrt(x_nz * interval)
    log_step = interval * np.log(x_nz)
    step = 2 * x_nz * interval
    for j in range(1, steps):
        factor = np.sqrt(step / math.cosh(math.pi * j * interval))
        parts[2 * j - 1][non_zero] = factor * np.cos(j * log_step)
        parts[2 * j][non_zero] = factor * np.sin(j * log_step)
    return out


def _features_xp(xp, block, state):
    """The dense map in the block's namespace: zeros map to zeros (no masked assignment: ``where``)."""
    steps, interval = state.sample_steps, state.sample_interval
    non_zero = block != 0.0
    x = xp.where(non_zero, block, xp.ones_like(block))  # log(1) = 0: no log(0) computed
    zero = xp.zeros_like(block)
    parts = [xp.where(non_zero, xp.sqrt(x * interval), zero)]
    log_step = interval * xp.log(x)
    step = 2 * x * interval
    for j in range(1, steps):
        factor = xp.sqrt(step / math.cosh(math.pi * j * interval))
        parts += [xp.where(non_zero, factor * xp.cos(j * log_step), zero),
                  xp.where(non_zero, factor * xp.sin(j * log_step), zero)]
    return xp.concat(parts, axis=1)


def _sparse_features(X, state):
    steps, interval = state.sample_steps, state.sample_interval
    if (X.data == 0).any():
        # explicitly stored zeros map to 0 like the others (log(0) made them NaN, as in
        # scikit-learn 1.9's AdditiveChi2Sampler); a copy, the block stays untouched
        X = X.copy()
        X.eliminate_zeros()
    data = X.data

    def like(values):
        return sp.csr_matrix((values, X.indices.copy(), X.indptr.copy()), shape=X.shape, dtype=X.dtype)

    parts = [like(np.sqrt(data * interval))]
    log_step = interval * np.log(data)
    step = 2 * data * interval
    for j in range(1, steps):
        factor = np.sqrt(step / math.cosh(math.pi * j * interval))
        parts += [like(factor * np.cos(j * log_step)), like(factor * np.sin(j * log_step))]
    return sp.hstack(parts, format="csr")


class AdditiveChi2Sampler(BlockwiseTransformer):
    """Approximate feature map for the additive chi2 kernel.

    Same parameters, output and errors as
    :class:`sklearn.kernel_approximation.AdditiveChi2Sampler`; takes dask and
    zarr arrays too (negative values then raise when the block is computed).
    Sparse in gives sparse out; explicitly stored zeros give zeros, as the
    dense input does (scikit-learn gives NaN for them: log(0)). Integer, bool
    and float16 input is converted to float64 first (scikit-learn keeps the
    dtype, and truncates the features of integers).

    Parameters
    ----------
    sample_steps : int, default=2
        Number of sampling points.
    sample_interval : float, default=None
        Sampling interval; required when sample_steps is not 1, 2 or 3.

    Attributes
    ----------
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit. Defined only when ``X`` has
        feature names that are all strings.

    Examples
    --------
    >>> import numpy as np
    >>> from dkapprox import AdditiveChi2Sampler
    >>> AdditiveChi2Sampler(sample_steps=2).fit_transform(np.array([[1.0, 4.0]])).shape
    (1, 6)
    """

    _cli_name = "additive_chi2"

    def _exact_kernel(self):
        return chi2_sum_kernel

    _parameter_constraints = dict(_SkAdditiveChi2Sampler._parameter_constraints)
    _accept_sparse = ("csr",)
    _non_negative = True
    _block_fn = staticmethod(additive_chi2_features)

    def __init__(self, *, sample_steps=2, sample_interval=None):
        self.sample_steps = sample_steps
        self.sample_interval = sample_interval

    def _fit(self, X):
        self._interval()

    @property
    def _n_features_out(self):
        return self.n_features_in_ * (2 * self.sample_steps - 1)

    def _interval(self):
        if self.sample_interval is not None:
            return self.sample_interval
        if self.sample_steps not in _DEFAULT_INTERVAL:
            raise ValueError("If sample_steps is not in [1, 2, 3], you need to provide sample_interval")
        return _DEFAULT_INTERVAL[self.sample_steps]

    def transform(self, X):
        # stateless, as in scikit-learn: transform works without fit
        given = inputs.as_input(X)
        X_valid = self._check(given, reset=False)
        n_out = X_valid.shape[1] * (2 * self.sample_steps - 1)
        return self._transform(X_valid, given, state=self._state(X_valid.dtype), n_out=n_out)

    def _state(self, dtype):
        return Chi2State(int(self.sample_steps), float(self._interval()))

    def _sparse_out(self, sparse_in):
        return sparse_in

    def get_feature_names_out(self, input_features=None):
        """Output feature names: ``additivechi2sampler_{name}_sqrt``, ``_cos{j}``, ``_sin{j}``."""
        check_is_fitted(self, attributes="n_features_in_")
        input_features = check_feature_names_in(self, input_features, generate_names=True)
        prefix = type(self).__name__.lower()
        names = [f"{prefix}_{name}_sqrt" for name in input_features]
        for j in range(1, self.sample_steps):
            names += [f"{prefix}_{name}_cos{j}" for name in input_features]
            names += [f"{prefix}_{name}_sin{j}" for name in input_features]
        return np.asarray(names, dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False
        tags.input_tags.positive_only = True
        tags.input_tags.sparse = True
        return tags
