"""SparseRandomProjection: Achlioptas / Li et al. very sparse projections."""

from __future__ import annotations

from sklearn.random_projection import SparseRandomProjection as _SkSparse

from ..utils import check_density, sparse_random_matrix
from ._base import BaseRandomProjection, ProjectionState


class SparseRandomProjection(BaseRandomProjection):
    """Reduce dimensionality through sparse random projection.

    Same parameters, attributes and numbers as
    :class:`sklearn.random_projection.SparseRandomProjection`, plus dask and
    zarr input (the sparse matrix ships to the graph once).

    Parameters
    ----------
    n_components : int or 'auto', default='auto'
    density : float or 'auto', default='auto'
        Ratio in (0, 1] of non-zero entries; 'auto' is 1 / sqrt(n_features).
    eps : float, default=0.1
    dense_output : bool, default=False
        Dense output even for sparse input.
    compute_inverse_components : bool, default=False
    random_state : int, RandomState instance or None, default=None

    Attributes
    ----------
    n_components_ : int
        Number of components: ``n_components``, or the Johnson-Lindenstrauss
        bound's when ``n_components='auto'``.
    components_ : sparse matrix of shape (n_components, n_features)
        Random matrix used for the projection, CSR, in the training data's dtype.
    inverse_components_ : ndarray of shape (n_features, n_components)
        Pseudo-inverse of the components; only with
        ``compute_inverse_components=True``.
    density_ : float in range 0.0 - 1.0
        Density of the components: ``density``, or ``1 / sqrt(n_features)``
        when ``density='auto'``.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit. Defined only when ``X`` has
        feature names that are all strings.

    Examples
    --------
    >>> import numpy as np
    >>> from dkapprox import SparseRandomProjection
    >>> X = np.random.default_rng(0).random((100, 1000))
    >>> SparseRandomProjection(n_components=30, random_state=0).fit_transform(X).shape
    (100, 30)
    """

    _cli_name = "sparse"
    _parameter_constraints = dict(_SkSparse._parameter_constraints)

    def __init__(self, n_components="auto", *, density="auto", eps=0.1, dense_output=False,
                 compute_inverse_components=False, random_state=None):
        self.n_components = n_components
        self.density = density
        self.eps = eps
        self.dense_output = dense_output
        self.compute_inverse_components = compute_inverse_components
        self.random_state = random_state

    def _make_random_matrix(self, n_components, n_features):
        self.density_ = check_density(self.density, n_features)
        return sparse_random_matrix(n_components, n_features, self.density_, self.random_state)

    def _sparse_out(self, sparse_in):
        return sparse_in and not self.dense_output

    def _state(self, dtype):
        matrix = self.components_.astype(self._out_dtype(dtype), copy=False)
        return ProjectionState(matrix, bool(self.dense_output))
