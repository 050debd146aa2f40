"""Kernel ridge with Nystroem centers, solved by Falkon out of core, and its cross-validated searches."""

from ._kernel_ridge import KernelRidge, KernelRidgeClassifier
from ._kernel_ridge_cv import KernelRidgeClassifierCV, KernelRidgeCV
