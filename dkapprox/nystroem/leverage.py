"""Ridge leverage scores: their state, the blockwise score, and the recursive dictionary (in memory).

The ridge leverage score of a row ``x`` among ``n`` rows, at ridge ``lambda``, is
``tau(x) = (K (K + lambda I)^-1)_xx``: how much of the kernel's span at scale ``lambda`` only
``x`` carries. Sampling landmarks with probability increasing in it is Musco & Musco's
"Recursive Sampling for the Nystrom Method" (2017), with ``lambda`` tied to a rank ``k``:
the mean of the kernel's eigenvalues beyond ``k``, ``lambda = sum_{i > k} sigma_i / k``.

A row's score is estimated against a *dictionary* ``D`` of rows with weights ``w``
(Alaoui & Mahoney 2015; Musco & Musco, eq. 3): up to the factor ``1 / lambda``,

    score(x) = k(x, x) - k(x, D) (K_DD + lambda W^-2)^-1 k(D, x),

which :func:`leverage_scores` computes as ``k(x, x) - ||k(x, D) F||^2`` with
``F F^T = (K_DD + lambda W^-2)^-1`` (:func:`dictionary_state`). A dictionary drawn from a
set of ``r`` rows with weights ``1 / sqrt(p)`` (``p``: each row's probability of being
drawn) represents those ``r`` rows: ``W K_DD W`` has about their kernel's eigenvalues, which
give ``lambda`` (the sum of the eigenvalues of ``W K_DD W`` beyond the ``k`` largest, over
``k``). The same matrix scores rows of a set
``N / r`` times larger, up to the constant factor ``N / r``: the score is a proportion.

:func:`recursive_state` is Musco & Musco's recursion (their Algorithm 3, "RLS-Nystrom"),
run on rows in memory whose order is uniformly random: the dictionary of the first ``r``
rows scores the first ``2 r``, which draw the next dictionary, until every row has been
scored. Each level draws each of its rows independently with probability ``min(1, c score)``,
``c`` set so that about ``size`` rows are drawn (Musco & Musco's oversampling, as a budget).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg

from .. import backends
from ..engine import SizedState
from ..kernels import DEVICE_SLICE_ELEMENTS, Kernel, device_between, device_diagonal, row_slices
from .normalization import symmetric_eig


@dataclass(frozen=True, eq=False)
class LeverageState(SizedState):
    kernel: Kernel
    pilot: object  # (p, n_features) rows: the dictionary
    whitening: np.ndarray  # (p, p): F with F F^T = (K_DD + ridge W^-2)^-1
    ridge: float  # on the scale of the rows the dictionary represents
    floor: float  # smallest score (indefinite kernels, rounding)
    key: int  # seed of the per-row uniforms (the sampling pass)
    n_select: int


def leverage_scores(block, state):
    """``k(x, x) - ||k(x, pilot) F||^2`` per row: ridge leverage scores up to a constant factor.

    Computed in the block's dtype (float32 stays float32), floored at
    ``state.floor`` (rounding, indefinite kernels).
    """
    xp = backends.namespace(block)
    if xp is not None:
        return _leverage_on_device(xp, block, state)
    W = state.whitening.astype(block.dtype, copy=False)
    scores = np.empty(block.shape[0])
    for s in row_slices(block.shape[0], W.shape[0]):
        T = state.kernel.between(block[s], state.pilot).astype(W.dtype, copy=False) @ W
        scores[s] = state.kernel.diagonal(block[s]) - np.einsum("ij,ij->i", T, T)
    return np.maximum(scores, state.floor, out=scores)


def _leverage_on_device(xp, block, state):
    """:func:`leverage_scores` of a device block, computed on its device; NumPy scores come back."""
    device = backends.device_of(block)
    pilot = xp.asarray(_dense(state.pilot).astype(backends.numpy_dtype(block), copy=False), device=device)
    W = xp.asarray(state.whitening.astype(backends.numpy_dtype(block), copy=False), device=device)
    scores = np.empty(block.shape[0])
    for s in row_slices(block.shape[0], W.shape[0], DEVICE_SLICE_ELEMENTS):
        part = block[s, :]
        T = xp.astype(device_between(xp, state.kernel, part, pilot), W.dtype, copy=False) @ W
        diagonal = device_diagonal(xp, state.kernel, part)
        scores[s] = backends.to_numpy(diagonal - xp.astype(xp.sum(T * T, axis=1), xp.float64))
    return np.maximum(scores, state.floor, out=scores)


def _dense(a):
    return a.toarray() if hasattr(a, "toarray") else np.asarray(a)


def tail_ridge(eigenvalues, rank):
    """``lambda``: the sum of the eigenvalues beyond ``rank`` over ``rank`` (Musco & Musco 2017).

    Of the weighted dictionary's kernel ``W K_DD W``, as Musco & Musco's code does: the trace of
    the represented rows' kernel less the dictionary's ``rank`` largest eigenvalues is a
    difference of two large estimates (off by 2x to 10^3x on clusters of uneven density, measured),
    the dictionary's own tail is not. Never below the rounding of the largest eigenvalue.
    """
    w = np.sort(np.clip(eigenvalues, 0.0, None))[::-1]
    tail = float(w[max(rank, 1):].sum())
    return max(tail / max(rank, 1), float(np.finfo(np.float64).eps) * max(w[0] if w.size else 0.0, 1e-300))


def dictionary_state(kernel, rows, weights, rank, key=0, n_select=0):
    """The :class:`LeverageState` scoring against dictionary ``rows`` with ``weights`` (float64).

    ``lambda`` is :func:`tail_ridge` of ``W K_DD W`` at ``rank``; ``F`` is the inverse transposed Cholesky
    factor of ``K_DD + lambda W^-2`` (its inverse square root where an indefinite kernel makes
    that matrix indefinite).
    """
    K = np.asarray(kernel.between(rows, rows), dtype=np.float64)
    K = (K + K.T) * 0.5
    w = np.asarray(weights, dtype=np.float64)
    ridge = tail_ridge(linalg.eigvalsh(K * w[:, None] * w[None, :], check_finite=False), rank)
    A = K + np.diag(ridge / w**2)
    try:
        L = linalg.cholesky(A, lower=True, check_finite=False)
        whitening = linalg.solve_triangular(L, np.eye(len(w)), lower=True, check_finite=False).T
    except linalg.LinAlgError:  # an indefinite kernel (sigmoid): clip the spectrum
        values, Q = symmetric_eig(A)
        whitening = Q / np.sqrt(np.clip(values, ridge / max(float(w.max()) ** 2, 1e-300), None))
    floor = 1e-10 * max(float(np.abs(K).max()) if K.size else 0.0, 1e-300)
    return LeverageState(kernel, rows, np.ascontiguousarray(whitening), ridge, floor, key, n_select)


def inclusion_probabilities(scores, size):
    """``min(1, c scores)`` with ``c`` such that they sum to ``size`` (all ones when fewer rows)."""
    scores = np.asarray(scores, dtype=np.float64)
    if size >= scores.size:
        return np.ones(scores.size)
    t = np.sort(scores)[::-1]
    rest = np.cumsum(t[::-1])[::-1]  # rest[j]: sum of t[j:]
    for j in range(int(size)):  # j rows capped at 1, the others scaled by c = (size - j) / rest[j]
        c = (size - j) / rest[j]
        if c * t[j] <= 1.0:
            return np.minimum(1.0, c * scores)
    return np.minimum(1.0, scores / t[int(size) - 1])


def recursive_state(rows, size, rank, kernel, random_state, *, key=0, n_select=0):
    """The state that scores rows against a dictionary of about ``size`` of ``rows``, drawn recursively.

    Parameters
    ----------
    rows : ndarray or sparse matrix of shape (n, n_features)
        Rows in uniformly random order (a uniform subsample as drawn): every prefix is a
        uniform subsample too.
    size : int
        Rows each level draws (in expectation); every row when ``n <= 2 size``.
    rank : int
        ``lambda`` of every level is the mean eigenvalue beyond ``rank`` (:func:`tail_ridge`).
    kernel : :class:`dkapprox.kernels.Kernel`
    random_state : numpy.random.RandomState
        The only source of randomness.
    key, n_select : int
        The returned state's (the sampling pass's seed and number of rows to choose).

    Returns
    -------
    :class:`LeverageState`
        Its dictionary (``pilot``) represents all ``n`` rows: ridge leverage scores among
        them, up to a constant factor, or among any larger set they are a uniform sample of.

    Notes
    -----
    The levels are the prefixes of ``n``, ``n / 2``, ... rows down to at most ``2 size``; the
    smallest is its own dictionary (weights 1). Each level scores its rows against the
    dictionary of the level below (``n_level x size`` kernel values and ``O(n_level size^2)``
    arithmetic: ``2 n size^2`` in all) and draws its own, each row independently with
    probability ``min(1, c score)`` and weight ``1 / sqrt`` of it.
    """
    n = rows.shape[0]
    levels = [n]
    while levels[-1] > 2 * size:
        levels.append(-(-levels[-1] // 2))
    positions, weights = np.arange(levels[-1], dtype=np.int64), np.ones(levels[-1])
    for level in levels[-2::-1]:
        state = dictionary_state(kernel, rows[positions], weights, rank)
        p = inclusion_probabilities(leverage_scores(rows[:level], state), size)
        drawn = random_state.random_sample(level) < p
        if not drawn.any():  # a budget below one row: keep the likeliest
            drawn[np.argmax(p)] = True
        positions = np.flatnonzero(drawn).astype(np.int64)
        weights = 1.0 / np.sqrt(p[positions])
    return dictionary_state(kernel, rows[positions], weights, rank, key, n_select)
