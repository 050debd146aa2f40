"""What Gaussian and sparse random projections share: n_components, fit, inverse."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy import linalg
from sklearn.exceptions import DataDimensionalityWarning
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.random_projection import BaseRandomProjection as _SkBase
from sklearn.random_projection import johnson_lindenstrauss_min_dim
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.validation import check_array, check_is_fitted

from .. import backends, engine, inputs
from .._base import BlockwiseTransformer
from ..engine import SizedState


@dataclass(frozen=True)
class ProjectionState(SizedState):
    matrix: object  # (n_out, n_in) ndarray or csr; the block is multiplied by its transpose
    dense_output: bool = True


def project(block, state):
    if backends.namespace(block) is not None:  # a sparse matrix is dense on a device (dkapprox.backends._xp)
        return block @ backends.state_on(state, block).matrix.T
    return safe_sparse_dot(block, state.matrix.T, dense_output=state.dense_output)


class BaseRandomProjection(BlockwiseTransformer):
    """Base of the random projections: subclasses only make their matrix."""

    def _exact_kernel(self):
        return lambda Xs: pairwise_kernels(Xs, metric="linear")  # a projection keeps inner products

    _parameter_constraints = dict(_SkBase._parameter_constraints)
    _block_fn = staticmethod(project)

    def _fit(self, X):
        n_features = X.shape[1]
        if self.n_components == "auto":
            n_samples = sum(engine.row_sizes(X)) if inputs.as_input(X).lazy else X.shape[0]
            self.n_components_ = int(johnson_lindenstrauss_min_dim(n_samples=n_samples, eps=self.eps))
            if self.n_components_ <= 0:
                raise ValueError(
                    "eps=%f and n_samples=%d lead to a target dimension of %d which is invalid"
                    % (self.eps, n_samples, self.n_components_))
            if self.n_components_ > n_features:
                raise ValueError(
                    "eps=%f and n_samples=%d lead to a target dimension of %d which is larger "
                    "than the original space with n_features=%d"
                    % (self.eps, n_samples, self.n_components_, n_features))
        else:
            if self.n_components > n_features:
                warnings.warn(
                    "The number of components is higher than the number of features: "
                    "n_features < n_components (%s < %s).The dimensionality of the problem "
                    "will not be reduced." % (n_features, self.n_components),
                    DataDimensionalityWarning,
                )
            self.n_components_ = self.n_components
        self.components_ = self._make_random_matrix(self.n_components_, n_features).astype(X.dtype, copy=False)
        if self.compute_inverse_components:
            self.inverse_components_ = self._compute_inverse_components()

    def _compute_inverse_components(self):
        """Pseudo-inverse of the dense components, on the driver, once."""
        components = self.components_
        if sp.issparse(components):
            components = components.toarray()
        return linalg.pinv(components, check_finite=False)

    @property
    def _n_features_out(self):
        # scikit-learn 1.9 uses n_components here, which breaks 'auto' (sk#34993)
        return self.n_components_

    def _out_dtype(self, dtype):
        return np.result_type(dtype, self.components_.dtype)

    def inverse_transform(self, X):
        """Project data back to its original space (always dense).

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_samples, n_components)

        Returns
        -------
        X_original : ndarray or dask array of shape (n_samples, n_features)
            A lazy dask array for dask input; the pseudo-inverse is computed
            once on the driver (at fit with ``compute_inverse_components=True``)
            and shipped to the graph as one key.
        """
        check_is_fitted(self)
        inverse = (self.inverse_components_ if self.compute_inverse_components
                   else self._compute_inverse_components())
        given = inputs.as_input(X, dtype=None)
        if not given.lazy:
            X = check_array(given.data, dtype=[np.float64, np.float32], accept_sparse=("csr", "csc"))
            return X @ inverse.T
        X = given.data
        if X.ndim != 2 or X.shape[1] != self.n_components_:
            raise ValueError(
                f"X has shape {X.shape}, but {type(self).__name__}.inverse_transform is expecting "
                f"{self.n_components_} features as input.")
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        dtype = np.result_type(X.dtype, inverse.dtype)
        return engine.map_rows(X, project, ProjectionState(inverse), n_out=inverse.shape[0],
                               dtype=dtype, name=f"{type(self).__name__.lower()}-inverse")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.input_tags.sparse = True
        return tags
