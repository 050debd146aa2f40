"""The kernels' spectral distributions, each as a Gaussian scale mixture.

Bochner: a shift-invariant kernel with k(0) = 1 is the characteristic function
of a probability distribution p(w), so k(x - y) = E cos(w . (x - y)). Every
spectrum here is a *Gaussian scale mixture*, ``w = g * s`` with ``g`` standard
Gaussian, which is what lets orthogonal and structured sampling couple the
Gaussian part ``g`` while each frequency keeps its exact distribution:

========== =========================================== ========================================= ==========
kernel     k(x, y)                                     p(w)                                      scale s
========== =========================================== ========================================= ==========
rbf        exp(-gamma ||x - y||_2^2)                   N(0, 2 gamma I)                           sqrt(2 gamma), a constant
laplacian  exp(-gamma ||x - y||_1)                     prod_j Cauchy(0, gamma)                   gamma / sqrt(chi2_1), one per coordinate
cauchy     prod_j 1 / (1 + gamma (x_j - y_j)^2)        prod_j Laplace(0, sqrt(gamma))            sqrt(gamma) sqrt(2 Exp(1)), one per coordinate
matern     sklearn's Matern(length_scale, nu)          multivariate Student-t, 2 nu dof,         sqrt(2 nu / chi2_{2 nu}) / length_scale,
                                                       scale 1 / length_scale                    one per frequency
========== =========================================== ========================================= ==========

``rbf`` and ``laplacian`` are :func:`sklearn.metrics.pairwise.rbf_kernel` and
:func:`~sklearn.metrics.pairwise.laplacian_kernel`; ``matern`` is
:class:`sklearn.gaussian_process.kernels.Matern` (nu = 1/2 is exp(-||x - y||_2 / l),
an L2 distance: the multivariate Cauchy spectrum, unlike the L1 Laplacian,
whose spectrum is the product of 1-D Cauchy densities). ``cauchy`` is the
product kernel of Rahimi and Recht's table, normalized so k(0) = 1 (the
``2 / (1 + d^2)`` sometimes quoted is 2^n_features at zero).

``rbf`` and ``matern`` are *radial*: ||w|| = ||g|| * s with a scale per
frequency, so a frequency is a uniform direction times a radial draw.
``laplacian`` and ``cauchy`` are products of 1-D spectra, not radial: their
scales are per coordinate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats
from sklearn.gaussian_process.kernels import Matern
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel

KERNELS = ("rbf", "laplacian", "cauchy", "matern")


@dataclass(frozen=True)
class Spectrum:
    """The spectral distribution of one kernel with its parameters fixed."""

    kernel: str
    gamma: float = 1.0
    nu: float = 1.5
    length_scale: float = 1.0

    @property
    def radial(self):
        """True when the scale multiplies a whole frequency (a radial density)."""
        return self.kernel in ("rbf", "matern")

    @property
    def n_extra_uniforms(self):
        """Uniforms beyond one per coordinate that :meth:`from_uniform` consumes per frequency."""
        return 1 if self.kernel == "matern" else 0

    def scales(self, rs, n_frequencies, n_features):
        """Scales ``s`` so that ``g * s`` has the spectral distribution (``g`` standard Gaussian).

        Returns shape ``(n_frequencies,)`` for radial kernels and
        ``(n_features, n_frequencies)`` for product kernels, drawn in float64.
        """
        if self.kernel == "rbf":
            return np.full(n_frequencies, np.sqrt(2.0 * self.gamma))
        if self.kernel == "matern":
            dof = 2.0 * self.nu
            return np.sqrt(dof / rs.chisquare(dof, size=n_frequencies)) / self.length_scale
        if self.kernel == "laplacian":
            return self.gamma / np.sqrt(rs.chisquare(1.0, size=(n_features, n_frequencies)))
        return np.sqrt(self.gamma) * np.sqrt(2.0 * rs.standard_exponential(size=(n_features, n_frequencies)))

    def from_uniform(self, U):
        """Frequencies ``(n_features, n_frequencies)`` from uniforms by the inverse CDF.

        ``U`` has shape ``(n_frequencies, n_features + n_extra_uniforms)``,
        entries in (0, 1): the radial part of ``matern`` uses the last column.
        """
        n_features = U.shape[1] - self.n_extra_uniforms
        C = U[:, :n_features].T
        if self.kernel == "laplacian":
            return stats.cauchy.ppf(C, scale=self.gamma)
        if self.kernel == "cauchy":
            return stats.laplace.ppf(C, scale=np.sqrt(self.gamma))
        g = stats.norm.ppf(C)
        if self.kernel == "rbf":
            return np.sqrt(2.0 * self.gamma) * g
        dof = 2.0 * self.nu
        return g * (np.sqrt(dof / stats.chi2.ppf(U[:, n_features], dof)) / self.length_scale)

    def kernel_matrix(self, X, Y=None):
        """The exact kernel the random features approximate, ``(len(X), len(Y))``."""
        if self.kernel == "rbf":
            return rbf_kernel(X, Y, gamma=self.gamma)
        if self.kernel == "laplacian":
            return laplacian_kernel(X, Y, gamma=self.gamma)
        if self.kernel == "matern":
            return Matern(length_scale=self.length_scale, nu=self.nu)(X, Y)
        return cauchy_kernel(X, Y, gamma=self.gamma)


def cauchy_kernel(X, Y=None, gamma=1.0):
    """The Cauchy product kernel ``prod_j 1 / (1 + gamma (x_j - y_j)^2)``.

    Parameters
    ----------
    X : ndarray of shape (n_samples_X, n_features)
    Y : ndarray of shape (n_samples_Y, n_features), default=None
        ``X`` when None.
    gamma : float, default=1.0

    Returns
    -------
    K : ndarray of shape (n_samples_X, n_samples_Y)

    Examples
    --------
    >>> import numpy as np
    >>> from dkapprox.random_features import cauchy_kernel
    >>> cauchy_kernel(np.array([[0.0, 0.0]]), np.array([[1.0, 2.0]]), gamma=1.0)
    array([[0.1]])
    """
    X = np.asarray(X, dtype=np.float64)
    Y = X if Y is None else np.asarray(Y, dtype=np.float64)
    K = np.ones((X.shape[0], Y.shape[0]))
    for j in range(X.shape[1]):  # one coordinate at a time: memory stays n_X x n_Y
        diff = X[:, j, None] - Y[None, :, j]
        K /= 1.0 + gamma * diff * diff
    return K
