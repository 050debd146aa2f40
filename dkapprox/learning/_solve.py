"""The driver's part of a ridge fit: solve from the statistics, score folds from them.

Everything here is O(n_features^2 * n_targets) or O(n_features^3) and never
touches a row of data.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
from scipy.linalg import lapack


def normal_equations(m, fit_intercept):
    """(A, B, center_z, center_y) of the ridge problem of one-fold Moments ``m``.

    With an intercept the problem is on centered data (A = Czz, B = Czy);
    without, on raw data (A = Z^T Z, B = Z^T Y rebuilt from the centered form).
    """
    n = float(m.weight[0])
    mz, my = m.mean_z[0], m.mean_y[0]
    if fit_intercept:
        return m.zz[0], m.zy[0], mz, my
    A = m.zz[0] + n * np.outer(mz, mz)
    B = m.zy[0] + n * np.outer(mz, my)
    return A, B, np.zeros_like(mz), np.zeros_like(my)


def penalties(alpha, n_targets):
    """``alpha`` as a 1-D float64 array of one penalty, or of one a target; another count is refused."""
    alpha = np.asarray(alpha, dtype=np.float64).ravel()
    if alpha.size not in (1, n_targets):
        raise ValueError(
            "Number of targets and number of penalties do not correspond: "
            f"{alpha.size} != {n_targets}"
        )
    return alpha


def solve_ridge(A, B, alpha):
    """W = (A + alpha I)^-1 B: Cholesky, or eigh when A + alpha I is singular.

    ``alpha`` is a scalar or one penalty per column of B. Returns (W, solver),
    solver being 'cholesky' or 'eigh' (a minimum-norm solution, as
    scikit-learn falls back to an SVD).
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim == 0 or np.all(alpha == alpha.flat[0]):
        return _solve_one(A, B, float(alpha.flat[0]))
    W = np.empty_like(B)
    solvers = set()
    for value in np.unique(alpha):
        cols = alpha == value
        W[:, cols], solver = _solve_one(A, B[:, cols], float(value))
        solvers.add(solver)
    return W, "eigh" if "eigh" in solvers else "cholesky"


def _solve_one(A, B, alpha):
    M = A + alpha * np.eye(A.shape[0])
    try:
        factor = scipy.linalg.cho_factor(M, lower=False, overwrite_a=True, check_finite=False)
        pivots = np.abs(np.diag(factor[0]))
        # a factor can "succeed" on a numerically singular matrix; its pivots tell
        if pivots.min() ** 2 > pivots.max() ** 2 * A.shape[0] * np.finfo(np.float64).eps:
            W = scipy.linalg.cho_solve(factor, B, check_finite=False)
            if np.all(np.isfinite(W)):
                return W, "cholesky"
    except np.linalg.LinAlgError:
        pass
    s, V = scipy.linalg.eigh(A, check_finite=False)
    s = s + alpha
    keep = s > max(abs(s).max(), 1.0) * A.shape[0] * np.finfo(np.float64).eps
    return V[:, keep] @ ((V[:, keep].T @ B) / s[keep, None]), "eigh"


def solve_ridge_path(A, B, alphas):
    """W[a] = (A + alphas[a] I)^-1 B for a grid of scalar alphas: shape (n_alphas, d, t).

    One tridiagonal reduction A = Q T Q^T (LAPACK sytrd, 4/3 d^3 flops) serves
    every alpha: each is then a tridiagonal solve (T + alpha I) x = Q^T B, and
    Q is applied to all the solutions at once.  Ten Cholesky factorizations
    cost 10/3 d^3, so the path takes about half their time
    (benchmarks/bench_blas_threads.py), which is most of what a
    cross-validation adds to a fit on the driver.  An alpha for which
    T + alpha I fails the pivot test of :func:`solve_ridge` (numerically
    singular) is solved by :func:`solve_ridge` itself (eigh).
    """
    d = A.shape[0]
    alphas = np.asarray(alphas, dtype=np.float64).ravel()
    if d < 3:
        return np.stack([solve_ridge(A, B, alpha)[0] for alpha in alphas])
    packed, diag, off, tau, info = lapack.dsytrd(A, lower=1)
    if info != 0:  # pragma: no cover - sytrd reports only illegal arguments
        raise np.linalg.LinAlgError(f"LAPACK dsytrd failed with info={info}")
    rotated = _apply_reflectors(packed, tau, np.array(B, dtype=np.float64), transpose=True)
    X = np.empty((alphas.size, d, B.shape[1]))
    fallback = []
    for a, alpha in enumerate(alphas):
        pivots, _, x, info = lapack.dptsv(diag + alpha, off, rotated)
        if info == 0 and pivots.min() > pivots.max() * d * np.finfo(np.float64).eps and np.all(np.isfinite(x)):
            X[a] = x
        else:
            fallback.append(a)
            X[a] = 0.0
    W = _apply_reflectors(packed, tau, X.transpose(1, 0, 2).reshape(d, -1), transpose=False)
    W = W.reshape(d, alphas.size, B.shape[1]).transpose(1, 0, 2).copy()
    for a in fallback:
        W[a] = solve_ridge(A, B, alphas[a])[0]
    return W


def _apply_reflectors(packed, tau, M, *, transpose):
    """Q^T M (``transpose``) or Q M, Q = H(1) ... H(d-1) as dsytrd(lower) leaves it; M is overwritten.

    O(d^2 * columns): a loop of rank-one updates, cheap next to the reduction.
    """
    d = packed.shape[0]
    steps = range(d - 1) if transpose else range(d - 2, -1, -1)
    for i in steps:
        v = packed[i + 1 :, i].copy()
        v[0] = 1.0
        M[i + 1 :] -= tau[i] * np.outer(v, v @ M[i + 1 :])
    return M


def intercept_of(W, center_z, center_y):
    return center_y - center_z @ W


def fold_errors(W, b, fold):
    """Sum of squared errors of ``Z W + b`` on the rows of one-fold Moments ``fold``, per target.

    With c = y - my and e = z - mz (centered on the fold's own means):
    ||y - z W - b||^2 summed = Cyy - 2 diag(W^T Czy) + diag(W^T Czz W) + n (my - mz W - b)^2,
    the cross terms vanishing because centered rows sum to zero.
    """
    n = float(fold.weight[0])
    zz, zy, yy = fold.zz[0], fold.zy[0], fold.yy[0]
    quad = np.einsum("it,it->t", W, zz @ W)
    cross = np.einsum("it,it->t", W, zy)
    offset = fold.mean_y[0] - fold.mean_z[0] @ W - b
    return np.maximum(yy - 2.0 * cross + quad + n * offset**2, 0.0)


def target_scores(sse, fold, scoring):
    """Per-target score of a fold from its errors (scikit-learn's r2 / negated errors)."""
    n = float(fold.weight[0])
    if scoring == "r2":
        total = fold.yy[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            r2 = 1.0 - sse / total
        # scikit-learn's force_finite: a constant target scores 1 if predicted exactly, else 0
        return np.where(total > 0, r2, np.where(sse == 0, 1.0, 0.0))
    if scoring == "neg_mean_squared_error":
        return -sse / n
    if scoring == "neg_root_mean_squared_error":
        return -np.sqrt(sse / n)
    raise ValueError(f"unknown scoring {scoring!r}")

