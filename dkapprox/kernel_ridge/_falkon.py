"""Falkon's solver: Nystroem kernel ridge by preconditioned conjugate gradient, one pass an iteration.

The model is ``f(x) = k(x, C) a`` with ``m`` centers ``C``. It minimizes

    sum_i w_i ||y_i - k(x_i, C) a||^2 + alpha a^T K_CC a

(scikit-learn's ``KernelRidge`` loss with the function restricted to the span of the centers), whose
normal equations are ``H a = b``, ``H = K_nC^T W K_nC + alpha K_CC``, ``b = K_nC^T W y``.

The preconditioner (Rudi, Carratino, Rosasco 2017) approximates ``K_nC^T W K_nC`` by
``(s / m) K_CC^2`` (``s`` the total weight: the centers stand in for the rows), so with
``T^T T = K_CC + jitter I`` and ``A^T A = (s / m) T T^T + alpha I`` (upper Cholesky factors, on the
driver, in float64), ``B = T^-1 A^-1`` gives ``B^T H B`` close to the identity. CG runs on
``B^T H B beta = B^T b`` and ``a = B beta``. As in Falkon, the penalty's ``K_CC`` is the jittered
``T^T T``, so its term is ``alpha A^-T A^-1 beta`` without a product with ``K_CC``; ``jitter`` is
``m * eps(float64) * mean(diag K_CC)``. With every row a center and unit weights the preconditioner
is ``H`` itself (up to the jitter) and CG converges in one iteration.

Each product with ``K_nC^T W K_nC`` is one pass over the row blocks (:func:`normal_partial`): a
task forms ``k(block, C)`` a slice of rows at a time, multiplies it twice (``K v``, then
``K^T (w K v)``) and returns an ``m x k`` float64 partial; the partials are summed in a tree. For
float32 blocks the kernel and both products are float32 within a slice (at most
:data:`SLICE_ELEMENTS` kernel values, a few hundred rows) and every slice's product is added in
float64. The ``n x m`` kernel matrix is never stored. The rbf kernel on dense rows is factored,
``k(x, c) = a_x exp(2 gamma x'.c') b_c`` (:class:`_RBFFactors`), so a slice costs one GEMM and one
exponential with no distance pass (benchmarks/bench_kernel_ridge.py, cost, measures the gain).

A block of another array-API namespace (CuPy) runs the same pass and prediction on its device, and
a fit on device data factors the preconditioner there: :mod:`._falkon_device`, whose
``block_partial`` and ``block_predict`` are what the estimators map (NumPy blocks: the functions here).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.linalg.lapack
import scipy.sparse as sp
from sklearn.utils.extmath import row_norms
from threadpoolctl import threadpool_limits

from .. import backends
from ..engine import SizedState
from ..kernels import kernel_slices
from ..learning import check_weights

#: kernel values per slice of rows in a pass (32 MiB of float64 distances: 512 rows at m = 8,192)
SLICE_ELEMENTS = 2**22
#: ... and for float32 rbf slices, which stay in cache from their product to the last use of the slice
RBF32_SLICE_ELEMENTS = 2**18
#: ... and float64 factored rbf slices. Measured at m = 8,192, one thread, ns per kernel value: float32
#: 2.30 / 1.64 / 1.48 / 1.58 / 1.68 at 2^16 ... 2^20 values a slice; float64 3.66 / 3.13 / 2.74 / 2.71 / 2.57
FACTORED64_SLICE_ELEMENTS = 2**20


@dataclass(frozen=True, eq=False)
class Centers(SizedState):
    """The centers and their kernel: what every block of a pass or a prediction needs."""

    kernel: object  # dkapprox.kernels.Kernel
    points: np.ndarray  # (m, n_features), in the blocks' dtype


@dataclass(frozen=True, eq=False)
class PassState(SizedState):
    """One pass: ``K^T W K v`` for ``v`` (m, k) float64, or, with ``v`` None, ``K^T W y`` and the checks."""

    centers: Centers
    v: np.ndarray | None
    targets: object = None  # NumericTargets or OneVsAllTargets: encodes a block of y (first pass)
    weighted: bool = False  # the last array of a block is its sample weights
    check: object = None  # a BlockCheck of X (first pass)


def normal_partial(row_start, state, X, *others):
    """``(K^T W u, total weight, rows)`` of one row block, ``u = K v`` or the block's encoded targets.

    With the kernel factored (:func:`kernel_parts`: ``K = diag(a) E diag(b)``), ``K v = a (E (b v))`` and
    ``K^T W u = b (E^T (a w u))``: ``b`` scales ``v`` once a block and ``g`` once at its end.
    """
    rows = X.shape[0]
    w = check_weights(others[-1], rows) if state.weighted else None
    if state.check is not None:
        state.check(X)
    dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
    b, slices = kernel_parts(state.centers, X, dtype)
    if state.v is None:
        u_all = state.targets.encode(others[0], dtype)
        width = u_all.shape[1]
    else:
        v = (state.v if b is None else state.v * b[:, None]).astype(dtype)
        width = v.shape[1]
    g = np.zeros((state.centers.points.shape[0], width))
    for s, E, a in slices:
        if state.v is None:
            u = u_all[s] if a is None else u_all[s] * a[:, None]
        else:
            u = E @ v
            if a is not None:
                u *= (a * a)[:, None]  # a (K v), then a again for K^T
        if w is not None:
            u = u * w[s, None].astype(dtype)
        g += E.T @ u
    if b is not None:
        g *= b[:, None]
    return g, float(rows if w is None else w.sum()), rows


def kernel_parts(centers, X, dtype):
    """``(b, slices)``: ``k(X[s], C) = diag(a) E diag(b)`` for each ``(s, E, a)`` that ``slices`` yields.

    The rbf kernel on dense rows is factored (:class:`_RBFFactors`) where its factors stay in range;
    every other kernel (and an rbf block outside that range) has ``b`` and every ``a`` None: ``E`` is
    the kernel itself, from :func:`centers_kernel`.
    """
    factors = _RBFFactors.of(centers, X, dtype)
    if factors is None:
        return None, ((s, K, None) for s, K in centers_kernel(centers, X, dtype))
    return factors.b, factors.slices()


#: the rbf kernel is factored where ``gamma (max |x - mu|^2 + max |c - mu|^2)`` is at most this: every
#: factor, ``a^2`` and ``E b`` then lie within exp(+-40), inside float32's normal range (exp(+-87))
FACTORED_EXPONENT_LIMIT = 40.0


class _RBFFactors:
    """``exp(-gamma |x - c|^2) = a_x E_xc b_c``: ``a_x = exp(-gamma |x'|^2)``, ``b_c = exp(-gamma |c'|^2)``,
    ``E_xc = exp(2 gamma x'.c')``, with ``x' = x - mu`` and ``c' = c - mu`` (``mu`` the centers' mean:
    distances do not move, the norms shrink).

    A slice then costs one GEMM (``2 gamma x'`` times ``c'``, in the rows' dtype) and one exponential in
    place, with no pass for the distances (a large share of a float32 slice's time:
    benchmarks/bench_kernel_ridge.py, cost, measures it). The exponent carries an
    absolute error of about ``(n_features + 2) eps 2 gamma |x'| |c'| <= gamma (n_features + 2) eps (|x'|^2 +
    |c'|^2)``, the bound of :func:`_rbf32_slices` with centered norms, so the kernel value is off by that,
    relative; ``a`` and ``b`` come from float64 norms. Slices of :data:`RBF32_SLICE_ELEMENTS` float32 values
    (:data:`FACTORED64_SLICE_ELEMENTS` float64) stay in cache from the GEMM to the last product with them.
    """

    def __init__(self, X, C, mu, x_norms, c_norms, gamma, dtype):
        self.X, self.dtype, self.gamma = X, dtype, gamma
        self.mu = mu
        self.C = np.ascontiguousarray((C - mu).astype(dtype))
        self.a = np.exp(-gamma * x_norms).astype(dtype)
        self.b = np.exp(-gamma * c_norms)

    @classmethod
    def of(cls, centers, X, dtype):
        C = centers.points
        if (sp.issparse(X) or sp.issparse(C) or not isinstance(centers.kernel.metric, str)
                or centers.kernel.metric != "rbf" or X.shape[0] == 0):
            return None
        gamma = dict(centers.kernel.params).get("gamma")
        gamma = 1.0 / C.shape[1] if gamma is None else float(gamma)
        C = np.asarray(C, dtype=np.float64)
        mu = C.mean(axis=0)
        c_norms = row_norms(C - mu, squared=True)
        x_norms = row_norms(np.asarray(X, dtype=np.float64) - mu, squared=True)
        if not gamma * (x_norms.max() + c_norms.max()) <= FACTORED_EXPONENT_LIMIT:  # NaN too: the plain path
            return None
        return cls(X, C, mu, x_norms, c_norms, gamma, dtype)

    def slices(self):
        m = self.C.shape[0]
        elements = RBF32_SLICE_ELEMENTS if self.dtype == np.float32 else FACTORED64_SLICE_ELEMENTS
        rows = max(1, min(self.X.shape[0], elements // m))
        buffer = np.empty((rows, m), dtype=self.dtype)
        scaled = np.empty((rows, self.C.shape[1]), dtype=self.dtype)
        for lo in range(0, self.X.shape[0], rows):
            part = self.X[lo : lo + rows]
            E, x = buffer[: part.shape[0]], scaled[: part.shape[0]]
            np.subtract(part, self.mu, out=x, casting="unsafe")
            x *= 2 * self.gamma
            np.matmul(x, self.C.T, out=E)
            np.exp(E, out=E)
            yield slice(lo, lo + part.shape[0]), E, self.a[lo : lo + part.shape[0]]


def centers_kernel(centers, X, dtype):
    """``(s, k(X[s], centers))`` by row slices: :func:`~dkapprox.kernels.kernel_slices`, except the
    rbf kernel on dense float32 rows, whose distances come from a float32 product (:func:`_rbf32_slices`)."""
    if (X.dtype == np.float32 and not sp.issparse(X) and not sp.issparse(centers.points)
            and isinstance(centers.kernel.metric, str) and centers.kernel.metric == "rbf"):
        return _rbf32_slices(centers, X)
    return kernel_slices(centers.kernel, centers.points, X, dtype, elements=SLICE_ELEMENTS)


def _rbf32_slices(centers, X):
    """rbf kernel slices of float32 rows in float32 throughout: ``exp(-gamma max(|x|^2 + |c|^2 - 2 x.c, 0))``.

    scikit-learn (and Nystroem, for its bits) upcasts float32 rows to float64 for the distances; here
    the product ``x.c`` is float32 (half the memory traffic, no upcast copy), so a squared distance
    carries an absolute error of about ``(n_features + 2) eps32 (|x|^2 + |c|^2)``, and the kernel value
    ``gamma`` times that, relative: 5e-7 for 20 standardized features at gamma = 0.05, below what the
    float32 products after it keep. Slices of :data:`RBF32_SLICE_ELEMENTS` values stay in cache
    between the product, the exponential and the two products with it.
    """
    C = np.ascontiguousarray(centers.points)
    m = C.shape[0]
    gamma = dict(centers.kernel.params).get("gamma")
    gamma = 1.0 / C.shape[1] if gamma is None else gamma
    c_norms = row_norms(C.astype(np.float64), squared=True)
    rows = max(1, min(X.shape[0], RBF32_SLICE_ELEMENTS // m))
    buffer = np.empty((rows, m), dtype=np.float32)
    for lo in range(0, X.shape[0], rows):
        part = X[lo : lo + rows]
        K = buffer[: part.shape[0]]
        np.matmul(part, C.T, out=K)
        if not backends.rbf_exponents(K, row_norms(part.astype(np.float64), squared=True), c_norms, gamma, K):
            K *= -2.0
            K += row_norms(part, squared=True)[:, None]
            K += c_norms.astype(np.float32)
            np.maximum(K, 0, out=K)
            K *= -gamma
        np.exp(K, out=K)
        yield slice(lo, lo + part.shape[0]), K


def combine_normal(parts):
    return (sum(p[0] for p in parts), sum(p[1] for p in parts), sum(p[2] for p in parts))


@dataclass(frozen=True, eq=False)
class PredictState(SizedState):
    centers: Centers
    coef: np.ndarray  # (m,) or (m, k)


@dataclass(frozen=True, eq=False)
class LabelState(SizedState):
    scores: PredictState
    classes: np.ndarray
    binarizer: object = None  # scikit-learn's LabelBinarizer, for multilabel targets only


def predict_block(block, state):
    """``k(block, C) @ dual_coef`` in the block's dtype: (rows,) or (rows, k)."""
    centers, coef = state.centers, state.coef
    dtype = block.dtype if block.dtype in (np.float32, np.float64) else np.float64
    b, slices = kernel_parts(centers, block, dtype)
    if b is not None:
        coef = coef * (b if coef.ndim == 1 else b[:, None])
    coef = coef.astype(dtype, copy=False)
    out = np.empty((block.shape[0],) + coef.shape[1:], dtype=dtype)
    for s, E, a in slices:
        np.matmul(E, coef, out=out[s])
        if a is not None:
            out[s] *= a if out.ndim == 1 else a[:, None]
    return out


class Preconditioner:
    """Falkon's ``B = T^-1 A^-1`` (see the module docstring), one ``A`` per distinct alpha.

    ``T`` is factored at once (a singular center kernel with ``alpha = 0`` is refused before any
    pass); the ``A`` factors once the total weight is known (:meth:`set_weight_total`).
    """

    def __init__(self, K_cc, alphas):
        m = K_cc.shape[0]
        K_cc = np.asarray(K_cc, dtype=np.float64)
        if not np.all(np.isfinite(K_cc)):
            raise ValueError("The kernel matrix of the centers contains NaN or infinity.")
        self.alphas = np.asarray(alphas, dtype=np.float64)
        self.jitter = m * np.finfo(np.float64).eps * max(float(np.mean(np.diag(K_cc))), np.finfo(np.float64).tiny)
        if np.any(self.alphas == 0):
            _require_nonsingular(K_cc)
        self.T = None
        scale = self.jitter / (m * np.finfo(np.float64).eps)
        while self.T is None:  # a kernel of low rank may round a little below zero: grow the jitter
            try:
                with _factor_threads(m):
                    self.T = np.linalg.cholesky(K_cc + self.jitter * np.eye(m), upper=True)
            except np.linalg.LinAlgError:
                if self.jitter >= MAX_JITTER * scale:
                    raise ValueError(_NOT_PD.format(what="the kernel matrix of the centers")) from None
                self.jitter *= 100
        self.A = {}

    def set_weight_total(self, weight_total):
        m = self.T.shape[0]
        with _factor_threads(m):
            upper, info = scipy.linalg.lapack.dlauum(self.T, lower=0)  # T T^T, upper triangle: m^3 / 3
        if info != 0:
            raise RuntimeError(f"LAPACK dlauum failed (info={info}) on the {m} x {m} center factor.")
        TTt = np.triu(upper)
        TTt += np.triu(upper, 1).T
        del upper
        TTt *= weight_total / m
        for alpha in np.unique(self.alphas):
            M = TTt.copy()
            M[np.diag_indices(m)] += alpha
            with _factor_threads(m):
                self.A[float(alpha)] = _cholesky(M, what="Falkon's preconditioner")

    def _columns(self, v, fn):
        if len(self.A) == 1:
            return fn(next(iter(self.A.values())), v)
        out = np.empty_like(v)
        for alpha, A in self.A.items():
            cols = self.alphas == alpha
            out[:, cols] = fn(A, v[:, cols])
        return out

    def apply(self, v):
        """``B v = T^-1 A^-1 v``."""
        return self._columns(v, lambda A, x: _solve_upper(self.T, _solve_upper(A, x)))

    def apply_t(self, v):
        """``B^T v = A^-T T^-T v``."""
        return self._columns(v, lambda A, x: _solve_upper(A, _solve_upper(self.T, x, trans=True), trans=True))

    def penalty(self, v):
        """``alpha A^-T A^-1 v``: ``B^T (alpha T^T T) B v``."""
        return self._columns(v, lambda A, x: _solve_upper(A, _solve_upper(A, x), trans=True)) * self.alphas


#: above this many centers the m x m factorizations run on one BLAS thread: threaded Cholesky and syrk crashed
#: on larger matrices (docs/performance.md, "Large factorizations")
ONE_THREAD_ABOVE = 8192


def _factor_threads(m):
    return threadpool_limits(1) if m > ONE_THREAD_ABOVE else contextlib.nullcontext()


def _solve_upper(U, x, trans=False):
    return scipy.linalg.solve_triangular(U, x, lower=False, trans="T" if trans else "N", check_finite=False)


#: the jitter grows (x100 a try) up to this times the mean diagonal before a kernel is called indefinite
MAX_JITTER = 1e-6
_NOT_PD = ("{what} is not positive definite: the kernel is not positive semi-definite on the centers "
           "(kernel='sigmoid' is not a positive definite kernel; a callable kernel may not be one).")


def _cholesky(M, what):
    try:
        return np.linalg.cholesky(M, upper=True)
    except np.linalg.LinAlgError:
        raise ValueError(_NOT_PD.format(what=what)) from None


def _require_nonsingular(K_cc):
    """alpha = 0 leaves nothing to regularize a singular center kernel: say so before any pass."""
    m = K_cc.shape[0]
    try:
        L = np.linalg.cholesky(K_cc)
    except np.linalg.LinAlgError:
        L = None
    pivots = None if L is None else np.diag(L) ** 2
    if pivots is None or pivots.min() <= m * np.finfo(np.float64).eps * pivots.max():
        raise ValueError(
            "alpha=0 with a singular kernel matrix of the centers (two centers are equal, or the kernel "
            f"has lower rank than n_centers={m}): the problem has no unique solution. Set alpha > 0 or "
            "choose fewer centers."
        )


@dataclass
class CGResult:
    beta: np.ndarray
    n_iter: int
    residuals: list
    converged: bool


def conjugate_gradient(apply, rhs, *, tol, max_iter, callback=None):
    """Solve ``apply(x) = rhs`` column by column by CG from ``x = 0``; one ``apply`` per iteration.

    ``apply`` maps an (m, k) array to (m, k), symmetric positive (semi-)definite per column. A
    column stops when its residual is at most ``tol`` times its initial one; the others go on.
    ``residuals`` holds the largest relative residual after each iteration.
    """
    x = np.zeros_like(rhs)
    r = rhs.copy()
    r0 = np.linalg.norm(rhs, axis=0)
    rr = np.einsum("ij,ij->j", r, r)
    active = r0 > 0
    p = r.copy()
    residuals, n_iter = [], 0
    while active.any() and n_iter < max_iter:
        q = apply(p)
        n_iter += 1
        pq = np.einsum("ij,ij->j", p, q)
        step = np.where(active & (pq > 0), rr / np.where(pq > 0, pq, 1.0), 0.0)
        x += step * p
        r -= step * q
        rr_new = np.einsum("ij,ij->j", r, r)
        relative = np.sqrt(rr_new) / np.where(r0 > 0, r0, 1.0)
        residuals.append(float(relative[r0 > 0].max()))
        active &= (relative > tol) & (pq > 0)
        p = np.where(active, r + (rr_new / np.where(rr > 0, rr, 1.0)) * p, 0.0)
        rr = rr_new
        if callback is not None:
            callback(n_iter, residuals[-1])
    return CGResult(x, n_iter, residuals, not residuals or residuals[-1] <= tol)
