"""Falkon's solver on device blocks: a pass's kernel slices and products, and the preconditioner, where the data is.

The estimators map :func:`block_partial` and :func:`block_predict`: a NumPy (or sparse) block takes
:func:`._falkon.normal_partial` and :func:`._falkon.predict_block`, as before; a block of another
array-API namespace (CuPy on a GPU; array-api-strict plays one in the tests) takes
:func:`device_normal_partial` and :func:`device_predict`: the same arithmetic in the block's
namespace, on its device.

- **Slices.** ``k(block rows, centers)`` a slice of rows at a time (:data:`DEVICE_SLICE_ELEMENTS`
  kernel values: a GPU wants large products), both products with it (``K v``, then
  ``K^T (w K v)``), in the block's dtype; each slice's ``m x k`` product is added to a float64
  ``m x k`` sum on the device, as the host path adds its slices. The rbf kernel is factored as on
  the host (``a_x exp(2 gamma x'.c') b_c``, :class:`._falkon._RBFFactors`, the same range rule):
  one GEMM and one exponential a slice. Other kernels come from
  :func:`dkapprox.kernels._device.device_between` (scikit-learn's arithmetic in array-API
  form); a callable kernel has no device form and raises ``TypeError``.
- **Partials to the host.** A block's ``m x k`` float64 sum is copied to the host at the end of its
  task (128 KiB at m = 16,384, one target: little beside the block's products), so the tree
  reduction, persist, a distributed cluster's transfers and the CG are the NumPy path's, unchanged,
  whatever the namespace.
- **CG on the host.** The CG's vectors are ``m x k`` float64 NumPy arrays on the driver: ``O(m k)``
  work an iteration, nothing a device would speed up, and a pass's ``v`` ships to the workers as
  NumPy state like every other (:func:`dkapprox.backends._xp.state_on` copies it to each device once).
- **Preconditioner on the device** (:class:`DevicePreconditioner`), where the fit's data lives
  (:func:`dkapprox.backends._xp.fit_namespace`: a device array, or a dask array whose meta is one): the
  center kernel, its Cholesky factor, ``T T^T`` and the ``A`` factors, ``m x m`` float64, there
  (on the host they run on one thread above ``_falkon.ONE_THREAD_ABOVE`` centers). Its triangular
  solves: CuPy's ``cupyx.scipy.linalg.solve_triangular``; a namespace with no triangular solver (the
  array API has none) inverts each factor once (``xp.linalg.solve(L, I)``) and multiplies by the
  inverse. ``B`` and ``B^T`` are then exact transposes of one matrix, a preconditioner as good as the
  solves' (within ``cond(L) eps``). Each apply copies the ``m x k`` vector to the device and back.
"""

from __future__ import annotations

import numpy as np

from .. import backends
from ..inputs import InMemoryRows
from ..kernels import DEVICE_KERNELS, device_between
from ..learning import check_weights
from ._falkon import _NOT_PD, FACTORED_EXPONENT_LIMIT, MAX_JITTER, normal_partial, predict_block

#: kernel values per slice of rows on a device (256 MiB of float32 at m = 16,384: 4,096 rows)
DEVICE_SLICE_ELEMENTS = 2**26


def check_device_kernel(kernel, who):
    """``TypeError`` for a kernel with no device form (a callable), naming the estimator and what runs."""
    if not (isinstance(kernel.metric, str) and kernel.metric in DEVICE_KERNELS):
        raise TypeError(f"{who}'s kernel {kernel.metric!r} runs on NumPy blocks only; the kernels computed on a "
                        f"device are {', '.join(DEVICE_KERNELS)}. Copy X to the host (X.get(), or "
                        "X.map_blocks(lambda b: b.get())) to use it.")


def _gamma(kernel, n_features):
    gamma = dict(kernel.params).get("gamma")
    return 1.0 / n_features if gamma is None else float(gamma)


def _dtype_of(xp, X):
    dtype = backends.numpy_dtype(X)
    return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float64)


class _DeviceSlices:
    """``k(X[lo:hi], C) = diag(a) E diag(b)`` slice by slice on ``X``'s device (``a``, ``b`` None: not factored)."""

    def __init__(self, xp, points, kernel, X, dtype):
        self.xp, self.X, self.kernel = xp, X, kernel
        self.device = backends.device_of(X)
        self.np_dtype = np.dtype(dtype)
        self.dtype = getattr(xp, self.np_dtype.name)
        self.points = points
        m, rows = points.shape[0], X.shape[0]
        self.rows = max(1, min(rows, DEVICE_SLICE_ELEMENTS // max(m, X.shape[1], 1)))
        self.a = self.b = None
        if isinstance(kernel.metric, str) and kernel.metric == "rbf" and rows:
            self._factor(_gamma(kernel, points.shape[1]))

    def _factor(self, gamma):
        """The rbf factors where they stay in range (:data:`._falkon.FACTORED_EXPONENT_LIMIT`), as on the host."""
        xp = self.xp
        C = xp.astype(self.points, xp.float64)
        mu = xp.mean(C, axis=0)
        C = C - mu
        c_norms = xp.sum(C * C, axis=1)
        x_norms = []
        n = self.X.shape[0]
        for lo in range(0, n, self.rows):
            x = xp.astype(self.X[lo : min(lo + self.rows, n), :], xp.float64) - mu
            x_norms.append(xp.sum(x * x, axis=1))
        x_norms = x_norms[0] if len(x_norms) == 1 else xp.concat(x_norms)
        if not float(gamma * (float(xp.max(x_norms)) + float(xp.max(c_norms)))) <= FACTORED_EXPONENT_LIMIT:
            return  # NaN too: the plain kernel
        self.gamma, self.mu = gamma, mu
        self.C = xp.astype(C, self.dtype)
        self.a = xp.astype(xp.exp(-gamma * x_norms), self.dtype)
        self.b = xp.exp(-gamma * c_norms)

    def __iter__(self):
        xp = self.xp
        cupy = backends.is_cupy(xp)
        buffer = None
        for lo in range(0, self.X.shape[0], self.rows):
            hi = min(lo + self.rows, self.X.shape[0])
            part = self.X[lo:hi, :]
            if self.a is None:
                K = device_between(xp, self.kernel, part, self.points)
                yield lo, hi, xp.astype(K, self.dtype, copy=False), None
                continue
            x = xp.astype((xp.astype(part, xp.float64) - self.mu) * (2 * self.gamma), self.dtype)
            if cupy:  # one buffer a block, the product written into it and the exponential in place
                import cupy as cp

                if buffer is None:
                    buffer = xp.empty((self.rows, self.C.shape[0]), dtype=self.dtype, device=self.device)
                E = buffer[: hi - lo]
                cp.matmul(x, self.C.T, out=E)
                cp.exp(E, out=E)
            else:
                E = xp.exp(x @ self.C.T)
            yield lo, hi, E, self.a[lo:hi]


def block_partial(row_start, state, X, *others):
    """The pass's block function the estimators map: :func:`._falkon.normal_partial` of a NumPy or sparse
    block, :func:`device_normal_partial` of a block of another namespace (CuPy)."""
    xp = backends.namespace(X)
    if xp is None:
        return normal_partial(row_start, state, X, *others)
    return device_normal_partial(xp, state, X, *others)


def block_predict(block, state):
    """``k(block, C) @ coef``: :func:`._falkon.predict_block`, or :func:`device_predict` on a device block."""
    xp = backends.namespace(block)
    if xp is None:
        return predict_block(block, state)
    return device_predict(xp, block, state)


def device_normal_partial(xp, state, X, *others):
    """:func:`._falkon.normal_partial` of a device block: ``(K^T W u, total weight, rows)``, the sum on the host."""
    check_device_kernel(state.centers.kernel, "KernelRidge")
    rows = X.shape[0]
    if state.check is not None:
        state.check(X)
    dtype = _dtype_of(xp, X)
    device = backends.device_of(X)
    on = backends.state_on(state, X)  # the centers and v on this device, once a process a pass
    w = None
    if state.weighted:
        w_host = check_weights(backends.to_numpy(others[-1]), rows)
        weight = float(w_host.sum())
        w = xp.asarray(w_host.astype(dtype), device=device)
    else:
        weight = float(rows)
    slices = _DeviceSlices(xp, on.centers.points, state.centers.kernel, X, dtype)
    if state.v is None:
        u_all = state.targets.encode(backends.to_numpy(others[0]), dtype)
        width = u_all.shape[1]
        u_all = xp.asarray(np.ascontiguousarray(u_all), device=device)
    else:
        v = on.v if slices.b is None else on.v * slices.b[:, None]
        v = xp.astype(v, slices.dtype)
        width = v.shape[1]
    m = state.centers.points.shape[0]
    g = xp.zeros((m, width), dtype=xp.float64, device=device)
    for lo, hi, E, a in slices:
        if state.v is None:
            u = u_all[lo:hi, :] if a is None else u_all[lo:hi, :] * a[:, None]
        else:
            u = E @ v
            if a is not None:
                u = u * (a * a)[:, None]  # a (K v), then a again for K^T
        if w is not None:
            u = u * w[lo:hi][:, None]
        g = g + xp.astype(E.T @ u, xp.float64)
    if slices.b is not None:
        g = g * slices.b[:, None]
    return backends.to_numpy(g), weight, rows


def device_predict(xp, block, state):
    """:func:`._falkon.predict_block` of a device block: ``k(block, C) @ coef`` there, in its dtype."""
    check_device_kernel(state.centers.kernel, "KernelRidge")
    dtype = _dtype_of(xp, block)
    on = backends.state_on(state, block)
    slices = _DeviceSlices(xp, on.centers.points, state.centers.kernel, block, dtype)
    coef = on.coef
    if slices.b is not None:
        coef = coef * (slices.b if coef.ndim == 1 else slices.b[:, None])
    coef = xp.astype(coef, slices.dtype)
    parts = []
    for _, _, E, a in slices:
        out = E @ coef
        if a is not None:
            out = out * (a if out.ndim == 1 else a[:, None])
        parts.append(out)
    if not parts:
        return xp.zeros((0,) + tuple(coef.shape[1:]), dtype=slices.dtype, device=backends.device_of(block))
    return parts[0] if len(parts) == 1 else xp.concat(parts, axis=0)


class _Triangular:
    """Solves with a lower triangular ``L`` on its device: CuPy's ``solve_triangular``, else ``L^-1`` once."""

    def __init__(self, xp, L):
        self.xp = xp
        if backends.is_cupy(xp):
            from cupyx.scipy.linalg import solve_triangular

            self._solve = solve_triangular
            self.L, self.inverse = L, None
        else:  # the array API has no triangular solver: invert once, multiply every time
            eye = xp.eye(L.shape[0], dtype=L.dtype, device=backends.device_of(L))
            self.L, self.inverse = None, xp.linalg.solve(L, eye)

    def solve(self, x):
        """``L^-1 x``."""
        if self.inverse is not None:
            return self.inverse @ x
        return self._solve(self.L, x, lower=True, check_finite=False)

    def solve_t(self, x):
        """``L^-T x``."""
        if self.inverse is not None:
            return self.inverse.T @ x
        return self._solve(self.L, x, lower=True, trans="T", check_finite=False)


def _diagonal(xp, M):
    return xp.linalg.diagonal(M) if hasattr(xp.linalg, "diagonal") else xp.diagonal(M)


def _cholesky(xp, M):
    """The lower Cholesky factor of ``M`` on its device, or None where ``M`` is not positive definite."""
    try:
        if backends.is_cupy(xp):
            import cupyx

            with cupyx.errstate(linalg="raise"):  # CuPy otherwise returns a partial factor in silence
                L = xp.linalg.cholesky(M)
        else:
            L = xp.linalg.cholesky(M)
    except (np.linalg.LinAlgError, ValueError, RuntimeError):
        return None
    diagonal = _diagonal(xp, L)
    if not bool(xp.all(xp.isfinite(diagonal))) or not bool(xp.all(diagonal > 0)):
        return None
    return L


class DevicePreconditioner:
    """:class:`._falkon.Preconditioner` with its ``m x m`` algebra on a device; NumPy vectors in and out.

    The same ``B = T^-1 A^-1``, with lower factors: ``K_CC + jitter I = L_T L_T^T`` (``T = L_T^T``) and
    ``(s / m) T T^T + alpha I = L_A L_A^T`` (``A = L_A^T``). The jitter, its growth and the refusals
    are the host's.
    """

    def __init__(self, xp, device, kernel, points, alphas):
        self.xp, self.device = xp, device
        C = xp.asarray(np.ascontiguousarray(points.toarray() if hasattr(points, "toarray") else points,
                                            dtype=np.float64), device=device)
        K = device_between(xp, kernel, C, C)
        del C
        m = K.shape[0]
        if not bool(xp.all(xp.isfinite(K))):
            raise ValueError("The kernel matrix of the centers contains NaN or infinity.")
        self.alphas = np.asarray(alphas, dtype=np.float64)
        diagonal = _diagonal(xp, K)
        eps = np.finfo(np.float64).eps
        self.jitter = float(m * eps * max(float(xp.mean(diagonal)), float(np.finfo(np.float64).tiny)))
        eye = xp.eye(m, dtype=xp.float64, device=device)
        if np.any(self.alphas == 0):
            L = _cholesky(xp, K)
            pivots = None if L is None else _diagonal(xp, L) ** 2
            if pivots is None or float(xp.min(pivots)) <= m * eps * float(xp.max(pivots)):
                raise ValueError(
                    "alpha=0 with a singular kernel matrix of the centers (two centers are equal, or the kernel "
                    f"has lower rank than n_centers={m}): the problem has no unique solution. Set alpha > 0 or "
                    "choose fewer centers.")
            del L
        scale = self.jitter / (m * eps)
        L = None
        while L is None:  # a kernel of low rank may round a little below zero: grow the jitter
            L = _cholesky(xp, K + float(self.jitter) * eye)
            if L is None:
                if self.jitter >= MAX_JITTER * scale:
                    raise ValueError(_NOT_PD.format(what="the kernel matrix of the centers"))
                self.jitter *= 100
        del K
        self.L_T = L
        self.T = _Triangular(xp, L)
        self.A = {}

    def set_weight_total(self, weight_total):
        xp = self.xp
        m = self.L_T.shape[0]
        TTt = (self.L_T.T @ self.L_T) * float(weight_total / m)  # T T^T = L_T^T L_T
        eye = xp.eye(m, dtype=xp.float64, device=self.device)
        for alpha in np.unique(self.alphas):
            L = _cholesky(xp, TTt + float(alpha) * eye)
            if L is None:
                raise ValueError(_NOT_PD.format(what="Falkon's preconditioner"))
            self.A[float(alpha)] = _Triangular(xp, L)
        del TTt
        self.L_T = None  # the solves need only self.T (CuPy: the factor; else its inverse)

    def _columns(self, v, fn):
        xp = self.xp
        x = xp.asarray(np.ascontiguousarray(v, dtype=np.float64), device=self.device)
        if len(self.A) == 1:
            return backends.to_numpy(fn(next(iter(self.A.values())), x))
        out = np.empty_like(v, dtype=np.float64)
        for alpha, A in self.A.items():
            cols = np.flatnonzero(self.alphas == alpha)
            part = xp.take(x, xp.asarray(cols, device=self.device), axis=1)
            out[:, cols] = backends.to_numpy(fn(A, part))
        return out

    def apply(self, v):
        """``B v = T^-1 A^-1 v = L_T^-T L_A^-T v``."""
        return self._columns(v, lambda A, x: self.T.solve_t(A.solve_t(x)))

    def apply_t(self, v):
        """``B^T v = A^-T T^-T v = L_A^-1 L_T^-1 v``."""
        return self._columns(v, lambda A, x: A.solve(self.T.solve(x)))

    def penalty(self, v):
        """``alpha A^-T A^-1 v = alpha L_A^-1 L_A^-T v``."""
        return self._columns(v, lambda A, x: A.solve(A.solve_t(x))) * self.alphas


class DeviceRows(InMemoryRows):
    """The rows of an in-memory device array for the center selectors:
    :class:`~dkapprox.inputs._rows.InMemoryRows`, but the rows taken come to the host (the centers are
    NumPy state); the selectors' passes (k-means, leverage) reduce the array where it lives."""

    def take(self, indices):
        self.passes += 1
        xp = backends.namespace(self.X)
        index = xp.asarray(np.asarray(indices, dtype=np.int64), device=backends.device_of(self.X))
        return backends.to_numpy(xp.take(self.X, index, axis=0))
