"""A kernel ridge grid search by CG: every (gamma, alpha, fold) candidate advances in the same passes.

The statistics route (:mod:`._cv_stats`) costs ``2 n m^2`` multiply-adds per gamma in one pass; Falkon's
CG (:mod:`._falkon`) costs about ``4 n m`` per column and iteration. At m = 2,048 with 5 folds and 6
alphas, 20 iterations of every column cost about as much as the statistics; with candidates dropped
early, a fraction of it. Here, for each gamma, the columns of every alpha and fold (and of the model on
every row) are one ``m x k`` block of right-hand sides, so a block of rows is read once a pass for the
whole grid, the kernel slice of each gamma is formed once for all its columns, and two GEMMs serve them.
The rbf gammas share one product per slice (:func:`grid_kernel_parts`); a block's rows are taken fold by
fold, so a slice's GEMMs skip the columns its rows are held out of (:class:`_FoldProducts`).

Per candidate (gamma, alpha) the columns are each fold's training problem and the all-rows problem
(the refit, advanced alongside: the chosen model is the search's own column, CG continued to ``tol``):

    (K^T W_-f K + alpha K_CC) a = K^T W_-f y,     W_-f: the weights of the rows outside fold f,

preconditioned as Falkon does (``B = T^-1 A^-1``, ``A^T A = (s / m) T T^T + alpha I``), with ``s`` the
training weight (the all-rows column: all of it; a fold's: the mean over folds, since a fold only moves
the approximation the preconditioner already is).

Each pass also scores the iterates of the pass before: a held-out row of fold ``f`` meets only the
columns of fold ``f``, so the predictions cost ``rows x m`` per alpha and target, a fifth of a fold
column's products at 5 folds. Successive halving (:data:`HALVING_PASSES`) keeps the best
``1 / halving_factor`` of the candidates still running; a gamma with no candidate left costs nothing more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.utils.extmath import row_norms

from ..engine import SizedState
from ..learning import check_weights
from ._cv_stats import block_folds, fold_sums, regression_scores
from ._falkon import (
    FACTORED64_SLICE_ELEMENTS,
    FACTORED_EXPONENT_LIMIT,
    RBF32_SLICE_ELEMENTS,
    _cholesky,
    _factor_threads,
    _solve_upper,
    centers_kernel,
)

#: successive halving after these passes (the scores then are of the iterates after one pass fewer)
HALVING_PASSES = (4, 8, 16, 32, 64, 128)
#: a candidate may be dropped once the iterates it was scored by have reached this relative residual
JUDGED_RESIDUAL = 0.05
#: a CG pass's cost, as a fraction of a pass with every candidate running, on average over a search: halving
#: drops candidates, but each gamma's exponentials and the shared product are paid while any of its runs
#: (benchmarks/bench_kernel_ridge_cv.py --part cost measures it; docs/performance.md, "The search's routes")
RUNNING_COST = 0.75
#: a block's products pad each fold's columns with zeros to a multiple of this: GEMM kernels run whole
#: column panels faster than ragged ones (docs/performance.md, "The search's routes", has the measurement)
GEMM_COLUMNS = 8
#: CG iterations the route choice expects, capped by max_iter: Falkon's usual count at tol 1e-3 to 1e-4
#: (benchmarks/bench_kernel_ridge_cv.py --part cost measures this)
EXPECTED_ITERATIONS = 20


@dataclass(frozen=True, eq=False)
class CGPass(SizedState):
    """One pass of the CG search: for each live gamma its data products and the scores of its iterates."""

    centers: tuple  # per live gamma: ._falkon.Centers (its kernel, the points in the blocks' dtype)
    V: tuple  # per live gamma: (m, c) float64 dual directions ``B p``, or None: the right-hand sides
    colfold: tuple  # per live gamma: (c,) fold of each column (n_folds: every row)
    coltarget: tuple  # per live gamma: (c,) target of each column
    S: tuple  # per live gamma: (n_folds, m, k * t) dual iterates to score, or None
    n_folds: int
    fold_key: int
    labels: np.ndarray | None
    targets: object
    weighted: bool
    classify: bool
    first: bool = False  # gather each fold's sums too
    check: object = None


def cg_partial(row_start, state, X, *others):
    """``(products, scores, sums)`` of one row block.

    ``products[g]``: ``K^T W_-f K v`` (or ``K^T W_-f y``) per column (m, c); ``scores[g]``: per fold the
    held-out squared errors (n_folds, k * t), or weighted correct counts (n_folds, k) for a classifier;
    ``sums``: :func:`._cv_stats.fold_sums` (first pass) or None.

    The block's rows are taken fold by fold (a stable sort of their folds), so each kernel slice lies in
    one fold ``f``: its products skip the columns of fold ``f`` (those rows are held out of them: a
    sixth of the products at 5 folds), and its held-out predictions are one GEMM with the other
    columns' (``[B v | S_f]``), with no gather of the fold's rows.
    """
    others = list(others)
    y = others.pop(0)
    label_block = others.pop(0) if state.labels is not None else None
    rows = X.shape[0]
    w = check_weights(others.pop(0), rows) if state.weighted else np.ones(rows)
    if state.check is not None:
        state.check(X)
    dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
    Y = np.asarray(state.targets.encode(y, np.float64), dtype=np.float64)
    folds = block_folds(row_start, state, rows, label_block)
    sums = fold_sums(Y, w, folds, state.n_folds) if state.first else None
    order = np.argsort(folds, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(folds, minlength=state.n_folds))])
    X, Y, w = X[order], Y[order], w[order]
    bs, slices = grid_kernel_parts(state.centers, X, dtype, bounds)
    work = [_FoldProducts(state, i, b, dtype, Y.shape[1]) for i, b in enumerate(bs)]
    for f, s, i, E, a in slices:
        work[i].add(f, E, a, Y[s], w[s])
    products = [job.products() for job in work]
    return products, [job.out for job in work], sums


class _FoldProducts:
    """One gamma's products and held-out scores in a block, a fold's slices at a time."""

    def __init__(self, state, i, b, dtype, t):
        V, S, colfold = state.V[i], state.S[i], np.asarray(state.colfold[i])
        self.m, self.F, self.classify = state.centers[i].points.shape[0], state.n_folds, state.classify
        self.coltarget, self.dtype, self.b, self.colfold = np.asarray(state.coltarget[i]), dtype, b, colfold
        self.first = V is None
        Vb = None if V is None else (V if b is None else V * b[:, None])
        Sb = None if S is None else (S if b is None else S * b[None, :, None])
        self.train = [np.flatnonzero(colfold != f) for f in range(self.F)]  # the columns fold f's rows train
        # B v's width in W[f], padded with zero columns
        self.lead = [0 if V is None else _padded(self.train[f].size) for f in range(self.F)]
        self.W = [None] * self.F  # per fold: [B v (its training columns, padded) | S_f], in the blocks' dtype
        for f in range(self.F):
            parts = [] if Vb is None else [Vb[:, self.train[f]], np.zeros((self.m, self.lead[f] - self.train[f].size))]
            parts += [] if Sb is None else [Sb[f]]
            self.W[f] = np.ascontiguousarray(np.hstack(parts), dtype=dtype) if parts else None
        self.acc = [np.zeros((self.m, self.lead[f] if self.lead[f] else self.train[f].size)) for f in range(self.F)]
        self.out = None if S is None else np.zeros((self.F, S.shape[2] // (t if self.classify else 1)))

    def add(self, f, E, a, Y, w):
        c, lead = self.train[f].size, self.lead[f]
        out = None if self.W[f] is None else E @ self.W[f]
        if c:
            if self.first:  # the right-hand sides K^T W_-f y
                U = (Y[:, self.coltarget[self.train[f]]] * (w if a is None else w * a)[:, None]).astype(self.dtype)
            else:  # the padding's zero columns stay zero
                U = out[:, :lead] * (w if a is None else w * a * a)[:, None].astype(self.dtype)
            self.acc[f] += E.T @ U
        if self.out is not None:
            P = out[:, lead:].astype(np.float64)
            if a is not None:
                P *= a[:, None]
            self.out[f] += _held_out(P, Y, w, self.classify)

    def products(self):
        g = np.zeros((self.m, self.colfold.size))
        for f in range(self.F):
            if self.train[f].size:
                g[:, self.train[f]] += self.acc[f][:, : self.train[f].size]
        if self.b is not None:
            g *= self.b[:, None]
        return g


def _padded(c):
    """``c`` columns padded to a multiple of :data:`GEMM_COLUMNS` (fewer than that: as they are)."""
    return c if c < GEMM_COLUMNS else -(-c // GEMM_COLUMNS) * GEMM_COLUMNS


def _held_out(P, Y, w, classify):
    """A fold's slice's held-out errors (or correct counts) of its iterates ``P`` (rows, k * t)."""
    rows, t = Y.shape
    P = P.reshape(rows, -1, t)
    if classify:
        got = P.argmax(axis=2) if t > 1 else (P[:, :, 0] > 0).astype(np.intp)
        truth = Y.argmax(axis=1) if t > 1 else (Y[:, 0] > 0).astype(np.intp)
        return w @ (got == truth[:, None])
    err = P - Y[:, None, :]
    return w @ (err * err).reshape(rows, -1)


def grid_kernel_parts(centers, X, dtype, bounds):
    """``(bs, slices)``: each candidate's ``b`` (or None) and the slices ``(f, s, i, E, a)`` with
    ``k_i(X[s], C) = diag(a) E diag(b_i)``, each ``s`` inside ``bounds[f]:bounds[f + 1]``.

    Candidates of the rbf kernel on dense rows share one product per slice, ``D = x'.c'`` (``x' = x - mu``,
    ``c' = c - mu``, ``mu`` the centers' mean): the distances computed once for all gammas. A
    candidate is factored (:class:`._falkon._RBFFactors`: ``E = exp(2 gamma D)``) where its exponents stay
    in range, else ``E = exp(-gamma max(|x'|^2 + |c'|^2 - 2 D, 0))``: the distances of
    :func:`._falkon._rbf32_slices`, centered. The product costs more than an exponential, so each
    further gamma's slice costs an exponential, not a product as well. Other kernels (and sparse rows)
    are each formed as KernelRidge forms them.
    """
    points = centers[0].points
    shared = (not sp.issparse(X) and not sp.issparse(points) and X.shape[0] > 0
              and all(isinstance(c.kernel.metric, str) and c.kernel.metric == "rbf"
                      and (c.points is points or np.array_equal(c.points, points))
                      for c in centers))
    if not shared:
        return [None] * len(centers), _each_kernel(centers, X, dtype, bounds)
    C = np.asarray(points, dtype=np.float64)
    mu = C.mean(axis=0)
    c_norms = row_norms(C - mu, squared=True)
    x_norms = row_norms(np.asarray(X, dtype=np.float64) - mu, squared=True)
    gammas = [dict(c.kernel.params).get("gamma") for c in centers]
    gammas = [1.0 / C.shape[1] if g is None else float(g) for g in gammas]
    factored = [g * (x_norms.max() + c_norms.max()) <= FACTORED_EXPONENT_LIMIT for g in gammas]
    bs = [np.exp(-g * c_norms) if ok else None for g, ok in zip(gammas, factored)]
    return bs, _rbf_slices(X, (C - mu).astype(dtype), mu, x_norms, c_norms, gammas, factored, dtype, bounds)


def _rbf_slices(X, Cc, mu, x_norms, c_norms, gammas, factored, dtype, bounds):
    m = Cc.shape[0]
    elements = RBF32_SLICE_ELEMENTS if dtype == np.float32 else FACTORED64_SLICE_ELEMENTS
    rows = max(1, min(X.shape[0], elements // m))
    D, E = np.empty((rows, m), dtype=dtype), np.empty((rows, m), dtype=dtype)
    x = np.empty((rows, Cc.shape[1]), dtype=dtype)
    a = [np.exp(-g * x_norms).astype(dtype) if ok else None for g, ok in zip(gammas, factored)]
    ref = 2 * gammas[0]  # x' is scaled by it before the product: a lone gamma's slice is one GEMM and one exp
    for f in range(len(bounds) - 1):
        for lo in range(bounds[f], bounds[f + 1], rows):
            hi = min(lo + rows, bounds[f + 1])
            d, e, xs = D[: hi - lo], E[: hi - lo], x[: hi - lo]
            np.subtract(X[lo:hi], mu, out=xs, casting="unsafe")
            xs *= ref
            np.matmul(xs, Cc.T, out=d)  # 2 gamma_0 x'.c'
            s = slice(lo, hi)
            for i, g in enumerate(gammas):
                if g * 2 == ref:
                    np.copyto(e, d)
                else:
                    np.multiply(d, g * 2 / ref, out=e)
                if not factored[i]:  # -gamma |x' - c'|^2 = 2 gamma x'.c' - gamma |x'|^2 - gamma |c'|^2, at most 0
                    e -= (g * x_norms[s]).astype(dtype)[:, None]
                    e -= (g * c_norms).astype(dtype)[None, :]
                    np.minimum(e, 0, out=e)
                np.exp(e, out=e)
                yield f, s, i, e, None if a[i] is None else a[i][s]


def _each_kernel(centers, X, dtype, bounds):
    for f in range(len(bounds) - 1):
        if bounds[f + 1] == bounds[f]:
            continue
        part = X[bounds[f]: bounds[f + 1]]
        for i, c in enumerate(centers):
            for s, K in centers_kernel(c, part, dtype):
                yield f, slice(bounds[f] + s.start, bounds[f] + s.stop), i, K, None


def combine_cg(parts):
    first = parts[0]
    products = [sum(p[0][i] for p in parts) for i in range(len(first[0]))]
    scores = [None if first[1][i] is None else sum(p[1][i] for p in parts) for i in range(len(first[1]))]
    sums = None if first[2] is None else tuple(sum(p[2][j] for p in parts) for j in range(3))
    return products, scores, sums


class GammaColumns:
    """One gamma's CG: the columns of every live alpha (each fold's and the all-rows problem, per target),
    their preconditioners, and the scores of their iterates."""

    def __init__(self, T, alphas, n_folds, n_targets, weight_total, fold_weight):
        self.T, self.alphas, self.n_folds, self.t = T, np.asarray(alphas, dtype=np.float64), n_folds, n_targets
        m, n_a = T.shape[0], len(alphas)
        width = (n_folds + 1) * n_targets
        self.colalpha = np.repeat(np.arange(n_a), width)
        self.colfold = np.tile(np.repeat(np.arange(n_folds + 1), n_targets), n_a)
        self.coltarget = np.tile(np.arange(n_targets), n_a * (n_folds + 1))
        with _factor_threads(m):
            TTt = T @ T.T
        self.A = {}
        for a, alpha in enumerate(self.alphas):
            for kind, total in (("fold", fold_weight), ("all", weight_total)):
                M = TTt * (total / m)
                M[np.diag_indices(m)] += alpha
                with _factor_threads(m):
                    self.A[a, kind] = _cholesky(M, what="Falkon's preconditioner")
        C = self.colalpha.size
        self.x, self.r, self.p = np.zeros((m, C)), np.zeros((m, C)), np.zeros((m, C))
        self.rr, self.r0 = np.zeros(C), np.zeros(C)
        self.active = np.ones(C, dtype=bool)
        self.live = np.ones(n_a, dtype=bool)  # candidates not dropped
        self.iterations = np.zeros(n_a, dtype=int)
        self.dirty = np.zeros(n_a, dtype=bool)  # iterates moved since they were last scored
        self.relative = np.ones(C)  # each column's relative residual
        self.scored_residual = np.full(n_a, np.inf)  # the largest fold residual of the iterates last scored

    def _groups(self, cols):
        kinds = np.where(self.colfold[cols] == self.n_folds, 1, 0)
        for key in np.unique(self.colalpha[cols] * 2 + kinds):
            yield (int(key // 2), "all" if key % 2 else "fold"), np.flatnonzero(self.colalpha[cols] * 2 + kinds == key)

    def apply(self, v, cols):
        """``B v = T^-1 A^-1 v`` for the columns ``cols`` (one solve with ``T`` for all of them)."""
        out = np.empty_like(v)
        for key, idx in self._groups(cols):
            out[:, idx] = _solve_upper(self.A[key], v[:, idx])
        return _solve_upper(self.T, out)

    def apply_t(self, v, cols):
        """``B^T v = A^-T T^-T v``."""
        v = _solve_upper(self.T, v, trans=True)
        for key, idx in self._groups(cols):
            v[:, idx] = _solve_upper(self.A[key], v[:, idx], trans=True)
        return v

    def penalty(self, v, cols):
        """``alpha A^-T A^-1 v``."""
        out = np.empty_like(v)
        for key, idx in self._groups(cols):
            out[:, idx] = self.alphas[key[0]] * _solve_upper(self.A[key], _solve_upper(self.A[key], v[:, idx]),
                                                             trans=True)
        return out

    # -- the columns a pass carries ---------------------------------------------------------------
    def running(self):
        """The columns CG still advances: live candidates' active columns."""
        return np.flatnonzero(self.active & self.live[self.colalpha])

    def start(self, rhs_data, cols):
        """The right-hand sides ``B^T K^T W_-f y`` from the first pass's products."""
        rhs = self.apply_t(rhs_data, cols)
        self.r[:, cols] = rhs
        self.p[:, cols] = rhs
        self.r0[cols] = np.linalg.norm(rhs, axis=0)
        self.rr[cols] = np.einsum("ij,ij->j", rhs, rhs)
        self.active[cols] = self.r0[cols] > 0
        held_out = self.colfold < self.n_folds
        for a in range(self.live.size):  # a candidate whose folds start solved (y = 0) is scored as it is
            self.dirty[a] = not self.active[held_out & (self.colalpha == a)].any()

    def directions(self, cols):
        return self.apply(self.p[:, cols], cols)

    def step(self, data, cols, tol):
        """One CG iteration of the columns ``cols``, given their data products ``K^T W_-f K B p``."""
        p = self.p[:, cols]
        q = self.apply_t(data, cols) + self.penalty(p, cols)
        pq = np.einsum("ij,ij->j", p, q)
        rr = self.rr[cols]
        stepsize = np.where(pq > 0, rr / np.where(pq > 0, pq, 1.0), 0.0)
        self.x[:, cols] += stepsize * p
        r = self.r[:, cols] - stepsize * q
        rr_new = np.einsum("ij,ij->j", r, r)
        relative = np.sqrt(rr_new) / np.where(self.r0[cols] > 0, self.r0[cols], 1.0)
        still = (relative > tol) & (pq > 0)
        self.r[:, cols] = r
        self.p[:, cols] = np.where(still, r + (rr_new / np.where(rr > 0, rr, 1.0)) * p, 0.0)
        self.rr[cols] = rr_new
        self.active[cols] = still
        self.relative[cols] = relative
        moved = np.unique(self.colalpha[cols][self.colfold[cols] < self.n_folds])
        self.iterations[moved] += 1
        self.dirty[moved] = True  # their held-out predictions changed
        return float(relative.max()) if relative.size else 0.0

    def held_out_running(self):
        cols = self.running()
        return cols[self.colfold[cols] < self.n_folds]

    def to_score(self):
        """Live candidates whose held-out iterates moved, and their duals ``(n_folds, m, k * t)``."""
        cands = np.flatnonzero(self.live & self.dirty)
        if cands.size == 0:
            return cands, None
        held_out = self.colfold < self.n_folds
        for c in cands:
            self.scored_residual[c] = self.relative[held_out & (self.colalpha == c)].max()
        m, F, t = self.T.shape[0], self.n_folds, self.t
        S = np.empty((F, m, cands.size * t))
        for f in range(F):
            cols = np.array([(c * (F + 1) + f) * t + j for c in cands for j in range(t)])
            S[f] = self.apply(self.x[:, cols], cols)
        return cands, S

    def dual(self, alpha_index):
        """The all-rows column(s) of a candidate as ``a = B x`` (m, t)."""
        F, t = self.n_folds, self.t
        cols = np.arange((alpha_index * (F + 1) + F) * t, (alpha_index * (F + 1) + F + 1) * t)
        return self.apply(self.x[:, cols], cols), cols


def fold_scores(raw, cands, sums, constant, classify, scoring, fold_weights, t):
    """(len(cands), n_folds) scores from a pass's summed held-out errors or correct counts."""
    F = raw.shape[0]
    out = np.empty((cands.size, F))
    for k in range(cands.size):
        for f in range(F):
            if classify:
                out[k, f] = raw[f, k] * constant / fold_weights[f]
            else:
                out[k, f] = regression_scores(raw[f, k * t:(k + 1) * t] * constant, sums[f], scoring)
    return out


def keep_best(scores, live, judged, factor):
    """The live candidates (flat gamma-major indices) kept at a halving.

    Only a *judged* candidate may be dropped: one whose scored iterates have every fold's relative
    residual at most :data:`JUDGED_RESIDUAL`. An early iterate of a small alpha scores far below its
    solution, so an unjudged candidate runs on. Of the judged, the best ``1 / factor`` stay.
    """
    live_idx = np.flatnonzero(live)
    judged_idx = live_idx[judged[live_idx]]
    keep = max(1, math.ceil(judged_idx.size / factor))
    mean = scores[judged_idx].mean(axis=1)
    order = np.argsort(-mean, kind="stable")
    return np.union1d(live_idx[~judged[live_idx]], judged_idx[order[:keep]])


def expected_passes(max_iter):
    """Full-grid passes' worth of work the CG route expects: the first pass, :data:`EXPECTED_ITERATIONS`
    (capped by max_iter) at :data:`RUNNING_COST` of a full pass each, and the last scoring pass."""
    return 1.0 + min(max_iter, EXPECTED_ITERATIONS) * RUNNING_COST + 1.0
