"""Nystroem kernel approximation for data far larger than memory.

:class:`Nystroem` is scikit-learn's estimator on the blockwise engine, with a
``landmarks`` parameter: uniform (scikit-learn's draw), k-means centroids,
ridge leverage score sampling, randomly pivoted Cholesky, or the user's
array; and an ``n_landmarks`` parameter: more landmarks than features, of
which the best rank-``n_components`` part is kept. The pieces are small:

* :mod:`.kernels`: scikit-learn's pairwise kernels with frozen parameters,
  their diagonals, and the transform block function;
* :mod:`.landmarks`: the selectors, each choosing by global row index;
* :mod:`.rpcholesky`: randomly pivoted Cholesky (accelerated) on rows in memory;
* :mod:`.normalization`: the landmark kernel's inverse square root;
* :mod:`.restriction`: the pass that sums ``Z^T Z`` and the rank-restricted normalization;
* :mod:`._rows`: how a selector reads in-memory or dask rows.
"""

from .estimator import Nystroem
from .landmarks import SELECTORS, Given, make_selector

__all__ = ["Nystroem"]
