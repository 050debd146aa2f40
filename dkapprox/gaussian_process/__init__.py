"""Gaussian processes for data far larger than memory: scikit-learn's GaussianProcessRegressor, sparse out of core.

:class:`GaussianProcessRegressor` is the exact GP in memory (``n_centers=None``) and Titsias' sparse variational
GP with ``n_centers`` inducing points otherwise: one pass over the rows for the bound, one more for its
length-scale gradient, the m x m algebra on the driver, predictions (mean and standard deviation) mapped
over the row blocks.
"""

from ._gpr import GaussianProcessRegressor

__all__ = ["GaussianProcessRegressor"]
