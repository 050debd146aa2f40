"""dkapprox: kernel approximation and random projection for data far larger than memory.

Every estimator draws a small random state on the driver at ``fit`` and maps a
pure NumPy block function over the row blocks of a dask array at
``transform``; NumPy input gives scikit-learn's numbers for the same seed.
"""

from ._version import __version__ as __version__
from .gaussian_process import GaussianProcessRegressor
from .kernel_approximation import AdditiveChi2Sampler, PolynomialCountSketch, RBFSampler, SkewedChi2Sampler
from .linear_model import (
    FeatureMapRidgeCV,
    KernelRidge,
    KernelRidgeClassifier,
    KernelRidgeClassifierCV,
    KernelRidgeCV,
)
from .models import load, save
from .nystroem import Nystroem
from .random_features import RandomBinningFeatures, RandomFourierFeatures, cauchy_kernel
from .random_projection import GaussianRandomProjection, SparseRandomProjection, johnson_lindenstrauss_min_dim
from .utils import compute

__all__ = [
    "AdditiveChi2Sampler",
    "FeatureMapRidgeCV",
    "GaussianProcessRegressor",
    "GaussianRandomProjection",
    "KernelRidge",
    "KernelRidgeClassifier",
    "KernelRidgeClassifierCV",
    "KernelRidgeCV",
    "Nystroem",
    "PolynomialCountSketch",
    "RandomBinningFeatures",
    "RandomFourierFeatures",
    "RBFSampler",
    "SkewedChi2Sampler",
    "SparseRandomProjection",
    "cauchy_kernel",
    "compute",
    "johnson_lindenstrauss_min_dim",
    "load",
    "save",
]
