"""GaussianRandomProjection: entries drawn from N(0, 1 / n_components)."""

from __future__ import annotations

import numpy as np
from sklearn.random_projection import GaussianRandomProjection as _SkGaussian
from sklearn.utils import check_random_state

from ._base import BaseRandomProjection, ProjectionState


def gaussian_random_matrix(n_components, n_features, random_state=None):
    """(n_components, n_features) matrix of N(0, 1/n_components), drawn as scikit-learn does."""
    rs = check_random_state(random_state)
    return rs.normal(loc=0.0, scale=1.0 / np.sqrt(n_components), size=(n_components, n_features))


class GaussianRandomProjection(BaseRandomProjection):
    """Reduce dimensionality through Gaussian random projection.

    Same parameters, attributes and numbers as
    :class:`sklearn.random_projection.GaussianRandomProjection`, plus dask and zarr
    input; ``get_feature_names_out`` works with ``n_components='auto'``.

    Parameters
    ----------
    n_components : int or 'auto', default='auto'
        Target dimension; 'auto' follows the Johnson-Lindenstrauss bound
        (counting the rows of a dask array, which is free unless its chunk
        sizes are unknown).
    eps : float, default=0.1
    compute_inverse_components : bool, default=False
    random_state : int, RandomState instance or None, default=None

    Attributes
    ----------
    n_components_ : int
        Number of components: ``n_components``, or the Johnson-Lindenstrauss
        bound's when ``n_components='auto'``.
    components_ : ndarray of shape (n_components, n_features)
        Random matrix used for the projection, in the training data's dtype.
    inverse_components_ : ndarray of shape (n_features, n_components)
        Pseudo-inverse of the components; only with
        ``compute_inverse_components=True``.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit. Defined only when ``X`` has
        feature names that are all strings.

    Examples
    --------
    >>> import dask.array as da
    >>> from dkapprox import GaussianRandomProjection
    >>> X = da.random.default_rng(0).random((1_000, 500), chunks=(100, 500))
    >>> GaussianRandomProjection(n_components=20, random_state=0).fit_transform(X).shape
    (1000, 20)
    """

    _cli_name = "gaussian"
    _parameter_constraints = dict(_SkGaussian._parameter_constraints)

    def __init__(self, n_components="auto", *, eps=0.1, compute_inverse_components=False, random_state=None):
        self.n_components = n_components
        self.eps = eps
        self.compute_inverse_components = compute_inverse_components
        self.random_state = random_state

    def _make_random_matrix(self, n_components, n_features):
        return gaussian_random_matrix(n_components, n_features, self.random_state)

    def _state(self, dtype):
        return ProjectionState(self.components_.astype(self._out_dtype(dtype), copy=False))
