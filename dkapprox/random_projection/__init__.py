"""Random projections: scikit-learn's on NumPy, sparse, dask and zarr input."""

from sklearn.random_projection import johnson_lindenstrauss_min_dim

from .gaussian import GaussianRandomProjection
from .sparse import SparseRandomProjection

__all__ = ["GaussianRandomProjection", "SparseRandomProjection", "johnson_lindenstrauss_min_dim"]
