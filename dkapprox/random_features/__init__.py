"""Random features beyond scikit-learn: more kernels, better frequencies, random binning."""

from .binning import RandomBinningFeatures
from .fourier import RandomFourierFeatures
from .spectra import cauchy_kernel

__all__ = ["RandomBinningFeatures", "RandomFourierFeatures", "cauchy_kernel"]
