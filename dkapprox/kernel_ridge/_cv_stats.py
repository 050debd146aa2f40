"""A kernel ridge grid search's statistics: one pass for every (kernel, alpha, fold), solved on the driver.

With ``m`` centers ``C``, kernel ridge restricted to their span (the model of :mod:`._falkon`) solves

    (K_nC^T W K_nC + alpha K_CC) a = K_nC^T W y,   K_CC + jitter I = T^T T (upper Cholesky factor).

With the Nystroem features ``Phi = K_nC T^-1`` and ``z = T a`` this is a ridge regression,
``(Phi^T W Phi + alpha I) z = Phi^T W y``. Split the rows into folds. For each kernel candidate (a
gamma, with a point of ``kernel_params``'s grid) and fold ``f`` one pass gathers ``Q_f = Phi_f^T W_f
Phi_f`` (``m x m``) and ``r_f = Phi_f^T W_f y_f``, with the fold's ``sum w``, ``sum w y`` and ``sum w
y^2``. The model trained without fold ``f`` solves
``(Q - Q_f + alpha I) z = r - r_f`` (``Q``, ``r``: the sums over folds), for every alpha at once from
one eigendecomposition, on the driver; its weighted squared error on fold ``f`` is

    SSE_f(z) = sum_f w y^2 - 2 z^T r_f + z^T Q_f z,

exactly, so regression scores (R^2, mean squared error) need no second pass. The final model solves
``(Q + alpha I) z = r`` with the chosen kernel and alpha, and ``a = T^-1 z``: the refit costs no pass
either. The classifier's accuracy needs each held-out row's predicted class, so it reads the data once
more (:func:`fold_predictions_partial`).

Why the features and not ``G_f = K^T W K``: the statistics of ``K`` (the normal equations with
``alpha K_CC``) square the center kernel's condition number, and at a small alpha two summation
orders of the same rows gave predictions 1e-3 apart. ``Phi``'s entries are bounded (``|Phi_i|^2 <=
k(x_i, x_i)``) and ``Q + alpha I`` is conditioned by alpha alone.

A block's cost: the distances to the centers once (rbf, laplacian), an exponential, a triangular
solve (``rows x m^2 / 2``) and ``rows x m^2`` multiply-adds per kernel candidate (each row lands in one
fold).
Every kernel value and product is float64, whatever the data's dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from sklearn.metrics.pairwise import euclidean_distances, manhattan_distances

from ..engine import SizedState
from ..learning import check_weights, hashed_folds

#: kernel values per slice of rows (32 MiB of float64)
SLICE_ELEMENTS = 2**22
#: kernels whose gamma multiplies a distance computed once for the whole grid: exp(-gamma D)
SHARED_DISTANCE = {"rbf": lambda a, b: euclidean_distances(a, b, squared=True),
                   "laplacian": manhattan_distances}


@dataclass(frozen=True, eq=False)
class GridState(SizedState):
    """What each block of a search pass needs (shipped once)."""

    kernels: tuple  # (n_kernels,) Kernel: each kernel candidate's full parameters (gamma, degree, coef0)
    centers: np.ndarray  # (m, n_features), float64
    factors: np.ndarray  # (n_kernels, m, m): each kernel's upper Cholesky factor T of K_CC + jitter I
    n_folds: int
    fold_key: int  # hashed folds; unused when labels is not None
    labels: np.ndarray | None  # the sorted distinct fold labels, when the user gave them
    targets: object  # .encode(y_block, dtype) -> (rows, n_targets)
    weighted: bool
    check: object = None  # a BlockCheck of X
    coefs: np.ndarray | None = None  # (n_kernels, n_folds, m, n_alphas * n_targets): the scoring pass


def kernels(state, part):
    """``k(part, centers)`` for each kernel candidate in turn (a generator: one slice's kernel alive at a
    time), float64; rbf's and laplacian's distances computed once for all their gammas."""
    part = part.toarray() if sp.issparse(part) else np.asarray(part)
    part = part.astype(np.float64, copy=False)
    shared = {}  # a metric's distances, for the candidates that differ from each other in gamma alone
    for kernel in state.kernels:
        distance = SHARED_DISTANCE.get(kernel.metric)
        if distance is None:
            yield kernel.between(part, state.centers)
            continue
        if kernel.metric not in shared:
            shared[kernel.metric] = distance(part, state.centers)
        yield np.exp(-dict(kernel.params)["gamma"] * shared[kernel.metric])


def block_folds(row_start, state, rows, label_block):
    """Fold index of each row of a block: the user's labels, else the hash of the global row index."""
    if state.labels is not None:
        labels = np.asarray(label_block).reshape(-1)
        if labels.shape[0] != rows:
            raise ValueError(f"cv holds {labels.shape[0]} fold labels in a block of {rows} rows of X.")
        return np.searchsorted(state.labels, labels)
    if row_start is None:
        raise ValueError("Cross-validation folds need the global row index of every block, but the row "
                         "block sizes of X are unknown. Call X.compute_chunk_sizes() first.")
    return hashed_folds(np.arange(row_start, row_start + rows), state.n_folds, state.fold_key)


def _unpack(state, others):
    """``(y, fold labels or None, w or None)`` of a pass task's extra blocks."""
    others = list(others)
    y = others.pop(0)
    labels = others.pop(0) if state.labels is not None else None
    w = others.pop(0) if state.weighted else None
    return y, labels, w


def statistics_partial(row_start, state, X, *others):
    """``(Q, r, sums, positives, counts)`` of one row block: ``Q`` (n_kernels, n_folds, m, m) and ``r``
    (n_kernels, n_folds, m, t) of the features ``Phi = K T^-1``;
    ``sums`` (n_folds, 3, t): each fold's sum w, sum w y, sum w y^2; ``positives`` (n_folds, t): rows whose
    target is positive (the classifier's classes a fold holds), and ``counts`` (n_folds,): rows."""
    y, label_block, w = _unpack(state, others)
    rows = X.shape[0]
    if state.check is not None:
        state.check(X)
    Y = np.asarray(state.targets.encode(y, np.float64), dtype=np.float64)
    w = np.ones(rows) if w is None else check_weights(w, rows)
    folds = block_folds(row_start, state, rows, label_block)
    n_g, n_f, m, t = len(state.kernels), state.n_folds, state.centers.shape[0], Y.shape[1]
    G, r = np.zeros((n_g, n_f, m, m)), np.zeros((n_g, n_f, m, t))
    sums, positives, counts = fold_sums(Y, w, folds, n_f)
    for f in range(n_f):
        mine = np.flatnonzero(folds == f)
        if mine.size == 0:
            continue
        step = max(1, SLICE_ELEMENTS // max(1, m))
        for lo in range(0, mine.size, step):
            rows_of = mine[lo: lo + step]
            root = np.sqrt(w[rows_of])
            Yw = Y[rows_of] * root[:, None]
            for g, K in enumerate(kernels(state, X[rows_of])):
                # Phi^T = T^-T K^T (m x rows), each row's column scaled by sqrt(w): its Gram is Phi^T W Phi
                B = scipy.linalg.solve_triangular(state.factors[g], K.T, trans="T", check_finite=False)
                B *= root[None, :]
                G[g, f] += scipy.linalg.blas.dsyrk(1.0, B, lower=0)  # the upper triangle: half a GEMM's work
                r[g, f] += B @ Yw
    return G, r, sums, positives, counts


def fold_sums(Y, w, folds, n_folds):
    """``(sums, positives, counts)`` of a block: each fold's sum w, sum w y, sum w y^2 ``(n_folds, 3, t)``,
    its rows whose target is positive ``(n_folds, t)`` (the classes a fold holds) and its rows ``(n_folds,)``."""
    t = Y.shape[1]
    sums, positives, counts = np.zeros((n_folds, 3, t)), np.zeros((n_folds, t)), np.zeros(n_folds)
    for f in range(n_folds):
        mine = np.flatnonzero(folds == f)
        if mine.size == 0:
            continue
        wf, Yf = w[mine], Y[mine]
        sums[f, 0] = wf.sum()
        sums[f, 1] = wf @ Yf
        sums[f, 2] = wf @ (Yf * Yf)
        positives[f] = (Yf > 0).sum(axis=0)
        counts[f] = mine.size
    return sums, positives, counts


def combine_statistics(parts):
    """The sum of :func:`statistics_partial`'s partials (``Q``: upper triangles; :func:`symmetric` fills them)."""
    first = parts[0]
    return tuple(sum(p[i] for p in parts) for i in range(len(first)))


def symmetric(Q):
    """``Q`` (..., m, m) whose upper triangles hold the sums, made whole."""
    lower = np.tril(np.ones(Q.shape[-2:], dtype=bool), -1)
    out = Q.copy()
    out[..., lower] = np.swapaxes(Q, -1, -2)[..., lower]
    return out


def fold_predictions_partial(row_start, state, X, *others):
    """Weighted correct counts ``(n_kernels, n_folds, n_alphas)`` and each fold's weight, of one block:
    each held-out row's class under every candidate model trained without its fold (``state.coefs``)."""
    y, label_block, w = _unpack(state, others)
    rows = X.shape[0]
    Y = np.asarray(state.targets.encode(y, np.float64), dtype=np.float64)
    w = np.ones(rows) if w is None else check_weights(w, rows)
    folds = block_folds(row_start, state, rows, label_block)
    n_g, n_f = len(state.kernels), state.n_folds
    t = Y.shape[1]
    n_alphas = state.coefs.shape[3] // t
    correct, weight = np.zeros((n_g, n_f, n_alphas)), np.zeros(n_f)
    truth = Y.argmax(axis=1) if t > 1 else (Y[:, 0] > 0).astype(np.intp)
    for f in range(n_f):
        mine = np.flatnonzero(folds == f)
        if mine.size == 0:
            continue
        weight[f] = w[mine].sum()
        for g, K in enumerate(kernels(state, X[mine])):
            scores = (K @ state.coefs[g, f]).reshape(mine.size, n_alphas, t)
            got = scores.argmax(axis=2) if t > 1 else (scores[:, :, 0] > 0).astype(np.intp)
            correct[g, f] = w[mine] @ (got == truth[mine, None])
    return correct, weight


def combine_predictions(parts):
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def center_factor(kernel, centers):
    """``T``, upper, with ``T^T T = K_CC + jitter I``: Falkon's jitter (:class:`._falkon.Preconditioner`)."""
    from ._falkon import Preconditioner

    K = kernel.between(centers, centers)
    return Preconditioner(0.5 * (K + K.T), [1.0]).T


def ridge_path(Q, c, alphas):
    """``(Q + alpha I)^-1 c`` for every alpha, ``(n_alphas, m, t)``, from one eigendecomposition of ``Q``."""
    lam, V = np.linalg.eigh(Q)
    lam = np.maximum(lam, 0.0)  # Q is a Gram matrix: a negative eigenvalue is rounding
    Vc = V.T @ c
    return np.stack([V @ (Vc / (lam + alpha)[:, None]) for alpha in alphas])


def regression_scores(sse, sums, scoring):
    """A fold's score from its weighted squared errors ``sse`` (t,) and its sums (3, t), averaged over targets,
    as scikit-learn's metrics with ``sample_weight`` (``multioutput='uniform_average'``)."""
    weight, wy, wyy = sums[0, 0], sums[1], sums[2]
    mse = sse / weight
    if scoring == "neg_mean_squared_error":
        return -float(np.mean(mse))
    if scoring == "neg_root_mean_squared_error":
        return -float(np.mean(np.sqrt(np.maximum(mse, 0.0))))
    total = wyy - wy * wy / weight  # the fold's own centered sum of squares, as r2_score computes it
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(total > 0, 1.0 - sse / np.where(total > 0, total, 1.0), np.where(sse <= 0, 1.0, 0.0))
    return float(np.mean(r2))
