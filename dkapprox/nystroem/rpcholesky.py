"""Randomly pivoted Cholesky (RPCholesky) on rows held in memory, accelerated by rejection sampling.

RPCholesky (Chen, Epperly, Tropp, Webber 2023, "Randomly pivoted Cholesky: practical
approximation of a kernel matrix with few entry evaluations") builds a partial Cholesky
factor ``F`` of the kernel matrix ``K`` of ``n`` rows, choosing each pivot with
probability proportional to the diagonal of the residual ``K - F F^T``: a point the
pivots chosen so far already explain is rarely chosen again. Its pivots are the best
known column selection for the trace norm: ``k >= r / eps + r log(1 / (eps eta))``
pivots give at most ``(1 + eps)`` times the best rank-``r`` trace-norm error in
expectation (``eta``: that best error relative to ``trace K``).

The accelerated version here (Epperly, Tropp, Webber 2024, "Embrace rejection: kernel
matrix approximation by accelerated randomly pivoted Cholesky") gives the same
distribution of pivots in rounds: draw ``b`` proposals from the residual diagonal (with
replacement), form their ``b x b`` residual submatrix, accept proposal ``j`` with
probability (its residual now) / (its residual when proposed) while a Cholesky
factorization of that small matrix runs along (a proposal drawn twice is rejected the
second time: its residual is then zero), then evaluate kernel columns only for the
accepted pivots and update ``F`` and the diagonal with one product. The rounds turn
``k`` thin kernel evaluations into a few wide ones.

Every random number is drawn from the ``random_state`` passed in (a NumPy
``RandomState``), so the pivots are a function of the seed and of the rows given, in
their order: :class:`dkapprox.nystroem.landmarks.RPCholesky` gives it a uniform
subsample chosen by global row index, which no chunking changes.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

#: A residual at most this times the largest kernel diagonal counts as zero: the rounding of
#: a Schur complement (a proposal drawn twice leaves ~eps of itself), not a direction to keep.
ZERO_RESIDUAL = 64 * float(np.finfo(np.float64).eps)
#: Proposals per round at most: the rejection step is a Python loop of ``b`` rank-one updates of
#: a ``b x b`` matrix (O(b^3) at worst), which past this size costs more than the round's kernel
#: columns it saves on the sizes Nystroem uses.
MAX_PROPOSALS = 512
#: Rounds in a row that accept no proposal before the residual counts as rounding noise (each round's
#: first proposal is accepted with probability 1 while the residual is above its rounding).
MAX_EMPTY_ROUNDS = 8
#: Proposals in the first round (at most; ``k`` when fewer pivots are wanted, and at least
#: MIN_PROPOSALS); later rounds ask for the pivots still missing divided by the acceptance rate
#: of the round before, between MIN_PROPOSALS and MAX_PROPOSALS.
FIRST_PROPOSALS, MIN_PROPOSALS = 64, 16


def rpcholesky(rows, k, kernel, random_state, *, max_proposals=MAX_PROPOSALS):
    """``k`` distinct pivots (positions in ``rows``, int64, in the order chosen) by accelerated RPCholesky.

    Parameters
    ----------
    rows : ndarray or sparse matrix of shape (n, n_features)
        The points; ``k <= n``.
    k : int
        Number of pivots.
    kernel : :class:`dkapprox.kernels.Kernel`
        Evaluated with ``kernel.between`` and ``kernel.diagonal`` (float64 arithmetic).
    random_state : numpy.random.RandomState
        The only source of randomness.
    max_proposals : int
        Largest number of proposals in one round.

    Notes
    -----
    Memory: the factor ``F``, ``n x k`` float64, plus one round's kernel columns
    (``n x b``). Work: ``k`` kernel columns (``n k`` kernel values) and ``O(n k^2)``
    arithmetic, as plain RPCholesky, in about ``k / b`` rounds.

    When the residual is zero to rounding (a kernel of rank below ``k`` on these rows, or
    duplicated rows), the remaining pivots are drawn uniformly without replacement from
    the rows not chosen yet, so that there are always ``k`` of them; Nystroem's
    normalization then treats the directions they do not add as zero.
    """
    n = rows.shape[0]
    if not 0 <= k <= n:
        raise ValueError(f"k={k} pivots from {n} rows")
    # float64 kernel values: float32 ones leave a residual of float32 rounding (1e-7 of the diagonal,
    # far above ZERO_RESIDUAL) once a low-rank kernel is exhausted, which no proposal is accepted on
    rows = rows.astype(np.float64) if rows.dtype != np.float64 else rows
    diagonal = np.clip(np.asarray(kernel.diagonal(rows), dtype=np.float64), 0.0, None)
    scale = float(diagonal.max()) if n else 0.0
    zero = ZERO_RESIDUAL * scale
    factor = np.zeros((n, k), dtype=np.float64)
    residual = diagonal.copy()
    pivots = np.empty(k, dtype=np.int64)
    done, proposals = 0, int(min(max_proposals, max(MIN_PROPOSALS, min(k, FIRST_PROPOSALS))))
    empty_rounds = 0
    while done < k:
        total = residual.sum()
        # nothing left to explain (rank exhausted), or only rounding noise: fill uniformly below
        if not total > zero * n or empty_rounds == MAX_EMPTY_ROUNDS:
            break
        # the proposals and the uniforms of their acceptance come from the seed, whatever happens next
        cumulative = np.cumsum(residual)
        draws = random_state.random_sample(proposals) * cumulative[-1]
        proposed = np.minimum(np.searchsorted(cumulative, draws, side="right"), n - 1)
        coins = random_state.random_sample(proposals)
        points = rows[proposed]
        prior = factor[proposed, :done]
        sub = np.asarray(kernel.between(points, points), dtype=np.float64) - prior @ prior.T
        accepted, chol = _accept(sub, residual[proposed], coins, k - done, zero)
        if accepted.size:
            chosen = proposed[accepted]
            columns = np.asarray(kernel.between(rows, rows[chosen]), dtype=np.float64)
            columns -= factor[:, :done] @ factor[chosen, :done].T
            # a C-ordered right-hand side: OpenBLAS's threaded solve on the transposed view is far slower
            block = linalg.solve_triangular(chol, np.ascontiguousarray(columns.T), lower=True,
                                            check_finite=False).T
            factor[:, done:done + chosen.size] = block
            residual -= np.einsum("ij,ij->i", block, block)
            np.clip(residual, 0.0, None, out=residual)
            residual[chosen] = 0.0
            pivots[done:done + chosen.size] = chosen
            done += chosen.size
        empty_rounds = 0 if accepted.size else empty_rounds + 1
        rate = max(accepted.size, 1) / proposals
        proposals = int(min(max_proposals, max(MIN_PROPOSALS, np.ceil((k - done) / rate))))
    if done < k:
        rest = np.setdiff1d(np.arange(n, dtype=np.int64), pivots[:done], assume_unique=True)
        pivots[done:] = rest[random_state.permutation(rest.size)[:k - done]]
    return pivots


def _accept(sub, proposed_residual, coins, limit, zero):
    """Rejection sampling on the proposals' residual submatrix, with its Cholesky factor along.

    Proposal ``j`` is accepted with probability ``sub[j, j] / proposed_residual[j]``, where
    ``sub`` has been replaced by its Schur complement on the pivots accepted before ``j``
    (Epperly, Tropp, Webber 2024, Algorithm 3). Returns the accepted positions and the lower
    Cholesky factor of ``sub`` restricted to them (at most ``limit`` of them).
    """
    b = sub.shape[0]
    H = sub.copy()
    accepted = []
    for j in range(b):
        pivot = H[j, j]
        if not pivot > zero or coins[j] * proposed_residual[j] > pivot:
            continue
        accepted.append(j)
        H[j:, j] /= np.sqrt(pivot)
        if j + 1 < b:
            column = H[j + 1:, j]
            H[j + 1:, j + 1:] -= np.outer(column, column)
        if len(accepted) == limit:
            break
    accepted = np.asarray(accepted, dtype=np.int64)
    return accepted, np.tril(H[np.ix_(accepted, accepted)])
