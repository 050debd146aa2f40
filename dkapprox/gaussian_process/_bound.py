"""Titsias' variational bound and its gradient from one pass's statistics: the m x m algebra on the driver.

With ``A = K_mm = L Lᵀ`` (plus jitter), ``S = Σ K_mb K_bm``, ``V = Σ K_mb Y_b``, ``yy = Σ ||Y_b||²`` over
the row blocks, t targets and noise σ² (the WhiteKernel's level plus ``alpha``), ``M = σ²A + S``, and
``C = L⁻¹SL⁻ᵀ``, ``B = I + C/σ²``:

    F = -tn/2 log 2πσ² - t/2 log|B| - (yy - tr(VᵀM⁻¹V))/(2σ²) - t(kd - tr C)/(2σ²)

(GPflow's SGPR, summed over targets as scikit-learn sums its log marginal likelihood). ``kd = n s²`` for a
stationary kernel. F reaches the data only through S and V, so ``∂F/∂S = L⁻ᵀĜL⁻¹`` and ``∂F/∂V`` on the
driver turn into each block's weight ``W_b = 2 K_bm ∂F/∂S + Y_b (∂F/∂V)ᵀ`` for a second pass (the length
scales' gradient); the signal variance's and the noise's gradients need no pass. The derivation is in
``shared/reference/gaussian-processes.md`` and the user guide.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

JITTER = 1e-6  # relative to the signal variance, on K_mm's diagonal: GPflow's default


@dataclass
class Statistics:
    """What a pass over (X, Y) gathers, in float64, whitened by the centers' factor ``A = L Lᵀ``: with
    ``Φ_b = K_bm L⁻ᵀ`` (the block's Nystroem features), ``C = Σ Φ_bᵀΦ_b = L⁻¹SL⁻ᵀ`` and ``U = Σ Φ_bᵀY_b = L⁻¹V``.
    Summing Φ's products keeps F's rounding of order ``eps · tr C``; whitening S after the pass multiplies
    it by K_mm's condition number, which long length scales push to 1/jitter."""

    C: np.ndarray  # (m, m)
    U: np.ndarray  # (m, t)
    yy: float
    n: int


@dataclass
class Bound:
    """F at one θ, and what its gradient and the predictions need."""

    value: float
    G_C: np.ndarray  # Ĝ (m, m): a block's weights are W_b = (2 Φ_b Ĝ + Y_b βᵀ/σ²) L⁻¹
    beta: np.ndarray  # β = B⁻¹U/σ² (m, t)
    G_A: np.ndarray  # ∂F/∂A (m, m), symmetric
    d_noise: float  # ∂F/∂σ²
    d_variance: float  # ∂F/∂log s², every term (no pass)
    coef: np.ndarray  # L⁻ᵀβ = (σ²A + S)⁻¹V (m, t): the predictive mean's weights
    L: np.ndarray  # chol(A)
    LB: np.ndarray  # chol(I + C/σ²): the predictive variance's


def center_factor(params, Z):
    """``L`` with ``L Lᵀ = K_mm + jitter``; a LinAlgError where it is not positive definite."""
    A = params.cross(Z, Z)
    A = 0.5 * (A + A.T)
    A[np.diag_indices_from(A)] += JITTER * params.variance
    return A, scipy.linalg.cholesky(A, lower=True)


def bound(stats: Statistics, A: np.ndarray, L: np.ndarray, sigma2: float, kd: float) -> Bound:
    """F and its gradient's parts; a LinAlgError if B is not positive definite."""
    C, U, n = stats.C, stats.U, stats.n
    m, t = U.shape
    eye = np.eye(m)
    B = eye + C / sigma2
    LB = scipy.linalg.cholesky(B, lower=True)
    c = scipy.linalg.solve_triangular(LB, U, lower=True)
    fit = stats.yy - (c * c).sum() / sigma2  # yy - tr(Vᵀ M⁻¹ V)
    trace_C = float(np.trace(C))
    value = (-0.5 * t * n * np.log(2.0 * np.pi * sigma2) - t * np.log(np.diag(LB)).sum()
             - fit / (2.0 * sigma2) - t * (kd - trace_C) / (2.0 * sigma2))
    LBi = scipy.linalg.solve_triangular(LB, eye, lower=True)
    B_inv = LBi.T @ LBi
    beta = B_inv @ U / sigma2
    outer = beta @ beta.T
    G_C = 0.5 * t * (eye - B_inv) / sigma2 - outer / (2.0 * sigma2)
    G_hat_A = 0.5 * t * (eye - B_inv) - 0.5 * outer - t * C / (2.0 * sigma2)
    Li = scipy.linalg.solve_triangular(L, eye, lower=True)
    G_A = Li.T @ G_hat_A @ Li
    d_noise = (-t * (n - m) / (2.0 * sigma2) - 0.5 * t * float(np.trace(B_inv)) / sigma2
               + fit / (2.0 * sigma2 ** 2) - float((beta * beta).sum()) / (2.0 * sigma2)
               + t * (kd - trace_C) / (2.0 * sigma2 ** 2))
    d_variance = (2.0 * float((G_C * C).sum()) + float((beta * U).sum()) / sigma2 + float(np.trace(G_hat_A))
                  - t * kd / (2.0 * sigma2))
    coef = scipy.linalg.solve_triangular(L, beta, lower=True, trans="T")
    return Bound(float(value), 0.5 * (G_C + G_C.T), beta, 0.5 * (G_A + G_A.T), float(d_noise), d_variance, coef,
                 L, LB)


class Profile:
    """F as a function of the signal variance u = s² and the noise v = σ² alone, for one pass's unit-variance
    sums: with ``C0 = Q Λ Qᵀ`` (one eigendecomposition) and ``w_i = ||(QᵀU0)_i||²``, ``r_i = u λ_i / v``,

        F = -tn/2 log 2πv - t/2 Σ log(1 + r_i) - yy/(2v) + u/(2v²) Σ w_i/(1 + r_i) - tu(n - Σλ)/(2v),

    O(m) an evaluation, so the driver can search u and v to convergence between two passes."""

    def __init__(self, stats: Statistics):
        lam, Q = np.linalg.eigh(0.5 * (stats.C + stats.C.T))
        self.lam = np.maximum(lam, 0.0)
        self.w = ((Q.T @ stats.U) ** 2).sum(axis=1)
        self.t, self.n, self.yy = stats.U.shape[1], stats.n, stats.yy
        self.rest = stats.n - self.lam.sum()  # n - tr C0: the trace term's share a unit of u

    def __call__(self, u, v):
        """``(F, ∂F/∂u, ∂F/∂v)``."""
        lam, w, t, n = self.lam, self.w, self.t, self.n
        one_r = 1.0 + u * lam / v
        r = one_r - 1.0
        value = (-0.5 * t * n * np.log(2.0 * np.pi * v) - 0.5 * t * np.log(one_r).sum() - self.yy / (2.0 * v)
                 + u / (2.0 * v * v) * (w / one_r).sum() - t * u * self.rest / (2.0 * v))
        d_u = (-0.5 * t * (lam / v / one_r).sum() + (w / one_r ** 2).sum() / (2.0 * v * v)
               - t * self.rest / (2.0 * v))
        d_v = (-0.5 * t * n / v + 0.5 * t * (r / v / one_r).sum() + self.yy / (2.0 * v * v)
               - u / (2.0 * v ** 3) * (w * (2.0 + r) / one_r ** 2).sum() + t * u * self.rest / (2.0 * v * v))
        return float(value), float(d_u), float(d_v)
