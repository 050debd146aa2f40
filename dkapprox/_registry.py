"""Every public estimator of dkapprox, listed once; everything else that lists them derives from here.

An estimator class declares, on itself:

- ``_cli_name``: its ``--method`` on the command line. Every transformer
  declares its own (not inherited), so the jobs offer every feature map
  (``tests/test_registry.py`` fails otherwise); learners have none;
- ``_exact_kernel(self)``: for a fitted transformer, the exact kernel its
  features approximate, as a function of a sample ``Xs -> (n, n) matrix``
  (:func:`dkapprox.metrics.kernel_approximation_error` compares with it).

Derived from :data:`ESTIMATORS`: the CLI's methods (:func:`cli_methods`), the
classes model files may rebuild (:func:`by_name`) and the tests' lists of
estimators (``tests/_estimators.py``).
Adding an estimator: see ARCHITECTURE.md.
"""

from __future__ import annotations

from .gaussian_process import GaussianProcessRegressor
from .kernel_approximation import AdditiveChi2Sampler, PolynomialCountSketch, RBFSampler, SkewedChi2Sampler
from .linear_model import (
    FeatureMapRidgeCV,
    Incremental,
    KernelRidge,
    KernelRidgeClassifier,
    KernelRidgeClassifierCV,
    KernelRidgeCV,
    Ridge,
    RidgeClassifier,
    RidgeCV,
)
from .nystroem import Nystroem
from .random_features import RandomBinningFeatures, RandomFourierFeatures
from .random_projection import GaussianRandomProjection, SparseRandomProjection

__all__ = ["ESTIMATORS", "LEARNERS", "TRANSFORMERS", "by_name", "cli_methods"]

#: The feature maps: kernel approximations and random projections.
TRANSFORMERS = (
    RBFSampler, SkewedChi2Sampler, AdditiveChi2Sampler, PolynomialCountSketch,
    GaussianRandomProjection, SparseRandomProjection,
    RandomFourierFeatures, RandomBinningFeatures,
    Nystroem,
)
#: The learners that stream over the features.
LEARNERS = (Ridge, RidgeCV, RidgeClassifier, Incremental, KernelRidge, KernelRidgeClassifier, KernelRidgeCV,
            KernelRidgeClassifierCV, FeatureMapRidgeCV, GaussianProcessRegressor)
ESTIMATORS = TRANSFORMERS + LEARNERS


def by_name() -> dict:
    """Class name -> class, for every public estimator (what a model file may name)."""
    return {cls.__name__: cls for cls in ESTIMATORS}


def cli_methods() -> dict:
    """``--method`` name -> class, for every transformer (``fit``, ``featurize``)."""
    return {cls._cli_name: cls for cls in TRANSFORMERS if getattr(cls, "_cli_name", None)}
