"""The two passes of the sparse bound and the predictive block function: pure NumPy, one row block each."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from .. import engine, inputs, utils
from ..kernels import row_slices
from ._kernels import crosses

IN_MEMORY_ROWS = 8192  # rows a block when the data is in memory: K_bm stays 8192 x m


@dataclass(frozen=True)
class PassState:
    """What a pass task needs: the kernel, the centers, the normalization of y, the gradient's weights."""

    params: object  # _kernels.Stationary
    centers: np.ndarray
    y_mean: np.ndarray
    y_std: np.ndarray
    L: np.ndarray  # chol(K_mm + jitter)
    check: object = None  # BlockCheck of dask blocks (NumPy input was checked whole)
    G_C: np.ndarray | None = None  # the gradient pass's weights (_bound.Bound)
    beta_over_noise: np.ndarray | None = None


def _targets(state, y):
    y = np.asarray(y, dtype=np.float64).reshape(y.shape[0], -1)
    if not np.isfinite(y).all():
        kind = "NaN" if np.isnan(y).any() else "infinity or a value too large for dtype('float64')"
        raise ValueError(f"Input y contains {kind}.")
    return (y - state.y_mean) / state.y_std


def whiten(L, K):
    """``Φ = K L⁻ᵀ``: the block's Nystroem features."""
    return scipy.linalg.solve_triangular(L, K.T, lower=True, check_finite=False).T


def _slices(X, state):
    """Row slices of a block whose (rows x m) temporaries stay small beside it (a pass holds several)."""
    return row_slices(X.shape[0], state.centers.shape[0])


def statistics_partial(row_start, state, X, y):
    """``(Φ_bᵀΦ_b, Φ_bᵀY_b, ||Y_b||², rows)`` of one block, summed over its row slices."""
    if state.check is not None:
        state.check(X)
    Y = _targets(state, y)
    m = state.centers.shape[0]
    C, U = np.zeros((m, m)), np.zeros((m, Y.shape[1]))
    for s in _slices(X, state):
        Phi = whiten(state.L, state.params.cross(np.asarray(X[s], dtype=np.float64), state.centers))
        C += Phi.T @ Phi
        U += Phi.T @ Y[s]
    return C, U, float((Y * Y).sum()), X.shape[0]


@dataclass(frozen=True)
class GridState:
    """A grid pass's task state: every candidate's kernel at unit signal variance and its centers' factor."""

    params: tuple  # (n_candidates,) _kernels.Stationary
    centers: np.ndarray
    y_mean: np.ndarray
    y_std: np.ndarray
    L: np.ndarray  # (n_candidates, m, m): chol(K_mm + jitter) of each
    check: object = None


def grid_statistics_partial(row_start, state, X, y):
    """:func:`statistics_partial` of every candidate at once: ``(C (k, m, m), U (k, m, t), ||Y_b||², rows)``."""
    if state.check is not None:
        state.check(X)
    Y = _targets(state, y)
    k, m = len(state.params), state.centers.shape[0]
    C, U = np.zeros((k, m, m)), np.zeros((k, m, Y.shape[1]))
    for s in _slices(X, state):
        for g, K in enumerate(crosses(state.params, np.asarray(X[s], dtype=np.float64), state.centers)):
            Phi = whiten(state.L[g], K)
            C[g] += Phi.T @ Phi
            U[g] += Phi.T @ Y[s]
    return C, U, float((Y * Y).sum()), X.shape[0]


def gradient_partial(row_start, state, X, y):
    """The block's share of ``∂F/∂log ℓ``: ``W_b = (2 Φ_b Ĝ + Y_b βᵀ/σ²) L⁻¹`` against ``∂K_b/∂log ℓ``."""
    Y = _targets(state, y)
    total = 0.0
    for s in _slices(X, state):
        K, slope, xs, zs = state.params.cross_and_slope(np.asarray(X[s], dtype=np.float64), state.centers)
        W_hat = 2.0 * (whiten(state.L, K) @ state.G_C) + Y[s] @ state.beta_over_noise.T
        W = scipy.linalg.solve_triangular(state.L, W_hat.T, lower=True, trans="T", check_finite=False).T
        total = total + state.params.length_scale_gradient(W * slope, xs, zs)
    return total


def target_moments(row_start, state, y):
    """``(rows, mean, M2, 0)`` of a block of targets, a column each (folded by Chan et al.'s update)."""
    Y = np.asarray(y, dtype=np.float64).reshape(y.shape[0], -1)
    if Y.shape[0] == 0:
        return 0, np.zeros(Y.shape[1]), np.zeros(Y.shape[1]), 0
    mean = Y.mean(axis=0)
    return Y.shape[0], mean, ((Y - mean) ** 2).sum(axis=0), 0


def combine_sums(parts):
    """Sum partials that are arrays, floats or tuples of them."""
    first = parts[0]
    if isinstance(first, tuple):
        return tuple(sum(p[i] for p in parts) for i in range(len(first)))
    return sum(parts)


def data_pass(X, y, state, chunk_fn, lazy):
    """One pass over (X, y): ``chunk_fn`` of every row block, summed; dask input through the engine."""
    if lazy:
        reduced = engine.reduce_aligned_rows([X, y], chunk_fn, combine_sums, state, running=True)
        return inputs.compute(reduced, arrays=[X])[0]
    return engine.reduce_in_threads([X, y], chunk_fn, combine_sums, state, rows=IN_MEMORY_ROWS,
                                    threads=utils.available_cpus())


@dataclass(frozen=True)
class PredictState:
    """The predictive distribution's weights: mean ``K_*m coef``, variance ``k** - ||Φ_*||² + ||L_B⁻¹Φ_*ᵀ||²``
    (GPflow's SGPR, each row's norms, with no subtraction of two near-equal m x m products)."""

    params: object
    centers: np.ndarray
    coef: np.ndarray  # (m, t)
    L: np.ndarray  # chol(K_mm + jitter)
    LB: np.ndarray  # chol(I + C/σ²)
    y_mean: np.ndarray
    y_std: np.ndarray
    with_std: bool


def predict_block(X, state):
    """Mean, and with ``with_std`` the standard deviations after it: ``(rows, t)`` or ``(rows, 2t)``, float64."""
    parts = [_predict_slice(X[s], state) for s in _slices(X, state)]
    return np.concatenate(parts) if parts else _predict_slice(X, state)


def predict_in_memory(X, state):
    """:func:`predict_block` of in-memory rows, in blocks mapped on the cores as :func:`data_pass` maps them."""
    return engine.map_rows_in_threads(X, predict_block, state, rows=IN_MEMORY_ROWS, threads=utils.available_cpus())


def _predict_slice(X, state):
    K = state.params.cross(np.asarray(X, dtype=np.float64), state.centers)
    mean = K @ state.coef * state.y_std + state.y_mean
    if not state.with_std:
        return mean
    Phi = whiten(state.L, K)
    inner = scipy.linalg.solve_triangular(state.LB, Phi.T, lower=True, check_finite=False)
    var = state.params.variance + state.params.noise - (Phi * Phi).sum(axis=1) + (inner * inner).sum(axis=0)
    std = np.sqrt(np.maximum(var, 0.0))[:, None] * state.y_std
    return np.concatenate([mean, std], axis=1)


def predict_mean_block(X, state):
    """The mean alone, one column a target (``score``'s block function)."""
    out = predict_block(X, state)
    return out[:, 0] if out.shape[1] == 1 else out
