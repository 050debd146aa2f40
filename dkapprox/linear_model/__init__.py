"""Learners that stream over the row blocks of dask arrays of features.

* :class:`Ridge`, :class:`RidgeClassifier`: one pass that folds the
  sufficient statistics into a running total, then a solve on the driver; memory O(n_features^2)
  plus one block, whatever the number of rows.
* :class:`RidgeCV`: exact K-fold cross-validation of an alpha grid in that
  same single pass (folds by a seeded hash of the row index, :class:`HashedKFold`).
* :class:`KernelRidge`, :class:`KernelRidgeClassifier`: Nystroem kernel ridge with up to tens of
  thousands of centers, solved by Falkon's preconditioned conjugate gradient, one pass over the
  rows per iteration; the ``n x m`` kernel matrix is never stored.
* :class:`KernelRidgeCV`, :class:`KernelRidgeClassifierCV`: gamma and alpha chosen by K-fold
  cross-validation over a grid, every candidate from one pass of per-fold statistics.
* :class:`FeatureMapRidgeCV`: a feature map's parameters (RBFSampler's gamma, RandomFourierFeatures'
  kernel and length scale, ...) and ridge's alpha chosen by K-fold cross-validation, every candidate
  map applied to each block in the same single pass.
* :class:`Incremental`: any scikit-learn estimator with ``partial_fit``, fed
  the row blocks in a seeded order (the maintained replacement for dask-ml's
  ``Incremental`` for this use).

Put a dkapprox transformer in front of any of them with a scikit-learn
``Pipeline``: on dask input its features are computed block by block inside
the pass and never stored.
"""

from ..kernel_ridge import KernelRidge, KernelRidgeClassifier, KernelRidgeClassifierCV, KernelRidgeCV
from ._incremental import Incremental
from ._map_search import FeatureMapRidgeCV
from ._ridge import Ridge, RidgeClassifier
from ._ridge_cv import HashedKFold, RidgeCV

__all__ = ["FeatureMapRidgeCV", "HashedKFold", "Incremental", "KernelRidge", "KernelRidgeCV", "KernelRidgeClassifier",
           "KernelRidgeClassifierCV", "Ridge", "RidgeCV", "RidgeClassifier"]
