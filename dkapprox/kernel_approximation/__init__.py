"""Kernel approximation: scikit-learn's samplers on NumPy, sparse, dask and zarr input."""

from .additive_chi2 import AdditiveChi2Sampler
from .polynomial_count_sketch import PolynomialCountSketch
from .rbf import RBFSampler, data_variance
from .skewed_chi2 import SkewedChi2Sampler

__all__ = ["AdditiveChi2Sampler", "PolynomialCountSketch", "RBFSampler", "SkewedChi2Sampler"]
