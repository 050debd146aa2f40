"""Nystroem kernel approximation for data far larger than memory.

:class:`Nystroem` is scikit-learn's estimator on the blockwise engine, with a
``landmarks`` parameter: uniform (scikit-learn's draw), k-means centroids,
ridge leverage score sampling, or the user's array. The pieces are small:

* :mod:`.kernels`: scikit-learn's pairwise kernels with frozen parameters,
  their diagonals, and the transform block function;
* :mod:`.landmarks`: the selectors, each choosing by global row index;
* :mod:`.normalization`: the landmark kernel's inverse square root;
* :mod:`.rows`: how a selector reads in-memory or dask rows.
"""

from .estimator import Nystroem

__all__ = ["Nystroem"]
