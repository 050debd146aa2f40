"""scikit-learn's GP kernels read as ``s² k0(r) + noise``: the cross-kernel and its length-scale gradient by block.

The sparse bound needs ``k(X_b, Z)`` of every row block and, for its gradient, the contraction of a block's
weights with ``∂k(X_b, Z)/∂ log ℓ_j`` for every length scale: both are written here for the stationary kernels
whose derivative in ``r²`` is closed-form (RBF and Matern with nu in 0.5, 1.5, 2.5, inf), times a
ConstantKernel, plus a WhiteKernel for the noise. Any other scikit-learn kernel fits exactly
(``n_centers=None``), where scikit-learn's own gradients apply.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.gaussian_process import kernels as gpk

SUPPORTED = "RBF or Matern(nu in 0.5, 1.5, 2.5, inf), optionally times a ConstantKernel, optionally plus a WhiteKernel"
_ROOT3, _ROOT5 = np.sqrt(3.0), np.sqrt(5.0)
#: r² below which two points are one: r² by expansion carries an absolute error of order 1e-16 (|x|² + |z|²)
COINCIDENT = 1e-12


@dataclass(frozen=True)
class Stationary:
    """``variance * k0(r)`` with ``r² = Σ_j (x_j - z_j)² / ℓ_j²``; ``noise`` is the WhiteKernel's level (0: none).

    ``names`` maps each part (``variance``, ``length_scale``, ``noise``) to the scikit-learn hyperparameter that
    holds it, so a gradient in these parts lands in ``kernel.theta``'s order.
    """

    variance: float
    length_scale: np.ndarray
    nu: float  # np.inf: RBF
    noise: float
    names: tuple  # ((part, hyperparameter name), ...)

    def cross(self, X, Z):
        """``k(X, Z)`` without the noise, float64 (a WhiteKernel is 0 between distinct sets of points)."""
        return self.variance * _k0(self.nu, _sqdist(X / self.length_scale, Z / self.length_scale))

    def cross_and_slope(self, X, Z):
        """``k(X, Z)`` and ``variance * dk0/d(r²)`` beside it, and the scaled points, for the gradient."""
        xs, zs = X / self.length_scale, Z / self.length_scale
        r2 = _sqdist(xs, zs)
        return self.variance * _k0(self.nu, r2), self.variance * _slope(self.nu, r2), xs, zs

    def length_scale_gradient(self, H, xs, zs):
        """``Σ_im H_im ∂r²_im/∂log ℓ_j`` for each j, ``-2 Σ_im H_im (x̃_ij - z̃_mj)²``; H already holds dk/dr²."""
        rows, cols = H.sum(axis=1), H.sum(axis=0)
        per_dim = (xs * xs * rows[:, None]).sum(axis=0) - 2.0 * (xs * (H @ zs)).sum(axis=0) + (
            zs * zs * cols[:, None]).sum(axis=0)
        per_dim = -2.0 * per_dim
        return per_dim if np.ndim(self.length_scale) and np.size(self.length_scale) > 1 else per_dim.sum(keepdims=True)

    def gradient_in_theta(self, kernel, parts):
        """``parts`` (``variance``, ``length_scale``, ``noise``: gradients in log parameters) in theta's order."""
        where = dict(self.names)
        out = []
        for hp in kernel.hyperparameters:
            if hp.fixed:
                continue
            part = next((p for p, name in where.items() if name == hp.name), None)
            if part is None:
                raise ValueError(f"hyperparameter {hp.name} is not one of the bound's")
            out.extend(np.atleast_1d(parts[part]).tolist())
        return np.asarray(out, dtype=np.float64)


def read_kernel(kernel, n_features: int) -> Stationary:
    """The :class:`Stationary` form of a scikit-learn kernel, or a ValueError naming what is supported."""
    constant, base, white = _split(kernel, "")
    if base is None:
        raise ValueError(f"The sparse Gaussian process takes a kernel of the form {SUPPORTED}; got {kernel!r}. "
                         "Use n_centers=None (the exact GP) for any other scikit-learn kernel.")
    (base_kernel, base_prefix) = base
    nu = np.inf if type(base_kernel) is gpk.RBF else float(base_kernel.nu)
    if nu not in (0.5, 1.5, 2.5, np.inf):
        raise ValueError(f"Matern(nu={base_kernel.nu}) has no closed-form gradient here: use nu in 0.5, 1.5, 2.5 or "
                         "inf, or n_centers=None (the exact GP).")
    length_scale = np.asarray(base_kernel.length_scale, dtype=np.float64)
    if length_scale.ndim and length_scale.size != n_features:
        raise ValueError(f"The kernel has {length_scale.size} length scales, but X has {n_features} features.")
    names = [("length_scale", base_prefix + "length_scale")]
    variance = 1.0
    if constant is not None:
        variance = float(constant[0].constant_value)
        names.append(("variance", constant[1] + "constant_value"))
    noise = 0.0
    if white is not None:
        noise = float(white[0].noise_level)
        names.append(("noise", white[1] + "noise_level"))
    return Stationary(variance, length_scale, nu, noise, tuple(names))


def _split(kernel, prefix):
    """(constant, base, white), each ``(kernel, name prefix)`` or None; base None where the form is other."""
    if isinstance(kernel, gpk.Sum):
        left, right = (kernel.k1, prefix + "k1__"), (kernel.k2, prefix + "k2__")
        for white, other in ((right, left), (left, right)):
            if type(white[0]) is gpk.WhiteKernel:
                constant, base, inner_white = _split(other[0], other[1])
                return (constant, base, white) if inner_white is None else (None, None, None)
        return None, None, None
    if isinstance(kernel, gpk.Product):
        left, right = (kernel.k1, prefix + "k1__"), (kernel.k2, prefix + "k2__")
        for constant, other in ((left, right), (right, left)):
            if type(constant[0]) is gpk.ConstantKernel and type(other[0]) in (gpk.RBF, gpk.Matern):
                return constant, other, None
        return None, None, None
    if type(kernel) in (gpk.RBF, gpk.Matern):
        return None, (kernel, prefix), None
    return None, None, None


def crosses(kernels, X, Z):
    """``k(X, Z)`` of each kernel in turn (a generator: one alive at a time). Those with one length scale share
    the raw points' squared distances, each scaled by its ℓ², as KernelRidgeCV's gammas share theirs."""
    raw = None
    for kernel in kernels:
        scale = np.unique(kernel.length_scale)
        if scale.size != 1:
            yield kernel.cross(X, Z)
            continue
        if raw is None:
            raw = _expansion(X, Z)
        r2 = raw / float(scale[0]) ** 2
        yield kernel.variance * _k0(kernel.nu, np.where(r2 > COINCIDENT, r2, 0.0))


def _expansion(A, B):
    return (A * A).sum(axis=1)[:, None] - 2.0 * (A @ B.T) + (B * B).sum(axis=1)[None, :]


def _sqdist(A, B):
    """r² by expansion (one GEMM); below ``COINCIDENT`` it is rounding: 0, so that sqrt(r²) is no noise's root."""
    d = _expansion(A, B)
    return np.where(d > COINCIDENT, d, 0.0)


def _k0(nu, r2):
    if nu == np.inf:
        return np.exp(-0.5 * r2)
    r = np.sqrt(r2)
    if nu == 0.5:
        return np.exp(-r)
    if nu == 1.5:
        return (1.0 + _ROOT3 * r) * np.exp(-_ROOT3 * r)
    return (1.0 + _ROOT5 * r + (5.0 / 3.0) * r2) * np.exp(-_ROOT5 * r)


def _slope(nu, r2):
    """``dk0/d(r²)``. Matern 1/2's is infinite at r = 0, where it multiplies (x - z)² = 0: 0 below ``COINCIDENT``."""
    if nu == np.inf:
        return -0.5 * np.exp(-0.5 * r2)
    r = np.sqrt(r2)
    if nu == 0.5:
        apart = r2 > COINCIDENT
        return np.where(apart, -np.exp(-r) / (2.0 * np.where(apart, r, 1.0)), 0.0)
    if nu == 1.5:
        return -1.5 * np.exp(-_ROOT3 * r)
    return -(5.0 / 6.0) * (1.0 + _ROOT5 * r) * np.exp(-_ROOT5 * r)
