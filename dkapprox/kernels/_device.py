"""Nystroem's kernels for blocks of another array-API namespace (CuPy on a GPU).

On NumPy blocks every kernel value is scikit-learn's (:mod:`.kernels`). scikit-learn's
own array-API path (``set_config(array_api_dispatch=True)``) would serve a GPU too, but it
refuses to run unless ``SCIPY_ARRAY_API=1`` was set before SciPy was first imported: a
process-wide switch that a library imported into someone's notebook cannot set. So the
kernels scikit-learn names are written here once more, in array-API form, with
scikit-learn's arithmetic (the rbf kernel's distances in float64, as scikit-learn upcasts
float32 for them, clipped at 0), and tested against scikit-learn's values
(``tests/backends/test_array_api.py``). A callable kernel runs on NumPy blocks only.

Distance kernels (laplacian, chi2, additive_chi2) sum over the features one at a time, so
a slice holds ``rows x n_landmarks`` values, never ``rows x n_landmarks x n_features``.
"""

from __future__ import annotations

from .. import backends

#: Kernels computed on a device; any other (a callable) raises there.
DEVICE_KERNELS = ("rbf", "laplacian", "linear", "polynomial", "poly", "sigmoid", "cosine", "chi2",
                  "additive_chi2")


def device_between(xp, kernel, part, landmarks):
    """k(part, landmarks), ``(rows, n_landmarks)`` in ``part``'s namespace and device."""
    metric, params = kernel.metric, dict(kernel.params)
    if kernel.precomputed:
        return xp.take(part, landmarks, axis=1)
    if not (isinstance(metric, str) and metric in DEVICE_KERNELS):
        raise TypeError(f"Nystroem's kernel {metric!r} runs on NumPy blocks only; the kernels computed on a "
                        f"device are {', '.join(DEVICE_KERNELS)} and 'precomputed'")
    n_features = landmarks.shape[1]
    gamma = params.get("gamma")
    gamma = (1.0 if metric == "chi2" else 1.0 / n_features) if gamma is None else gamma
    if metric == "rbf":
        return _rbf(xp, part, landmarks, gamma)
    if metric == "laplacian":
        return xp.exp(-gamma * _summed(xp, part, landmarks, lambda x, y: xp.abs(x - y)))
    if metric in ("chi2", "additive_chi2"):
        K = _summed(xp, part, landmarks, lambda x, y: _chi2_term(xp, x, y))
        return xp.exp(gamma * K) if metric == "chi2" else K
    if metric == "cosine":
        return _unit_rows(xp, part) @ _unit_rows(xp, landmarks).T
    inner = part @ landmarks.T
    if metric == "linear":
        return inner
    inner = gamma * inner + params.get("coef0", 1)
    return xp.tanh(inner) if metric == "sigmoid" else inner ** params.get("degree", 3)


def _rbf(xp, part, landmarks, gamma):
    x = xp.astype(part, xp.float64)
    y = xp.astype(landmarks, xp.float64)
    dtype = xp.result_type(part.dtype, landmarks.dtype)  # scikit-learn's distances come back in it
    if backends.is_cupy(xp):  # the same arithmetic in one fused kernel after the product (dkapprox.backends._xp)
        K = xp.empty((x.shape[0], y.shape[0]), dtype=dtype, device=backends.device_of(part))
        return backends.cupy_kernel("rbf")(x @ y.T, xp.sum(x * x, axis=1)[:, None], xp.sum(y * y, axis=1)[None, :],
                                      backends.numpy_dtype(K).type(gamma), K)
    D = -2.0 * (x @ y.T)
    D = D + xp.sum(x * x, axis=1)[:, None]
    D = D + xp.sum(y * y, axis=1)[None, :]
    D = xp.maximum(xp.astype(D, dtype), xp.zeros((), dtype=dtype, device=backends.device_of(part)))
    return xp.exp(-gamma * D)


def _summed(xp, part, landmarks, term):
    total = None
    for j in range(part.shape[1]):
        t = term(part[:, j:j + 1], landmarks[:, j][None, :])
        total = t if total is None else total + t
    return total


def _chi2_term(xp, x, y):
    """``-(x - y)^2 / (x + y)``, 0 where ``x + y == 0`` (scikit-learn's array-API form)."""
    denom = x + y
    zero = denom == 0
    return xp.where(zero, xp.zeros_like(denom), -((x - y) ** 2) / xp.where(zero, xp.ones_like(denom), denom))


def _unit_rows(xp, a):
    norms = xp.sqrt(xp.sum(a * a, axis=1))[:, None]
    return xp.where(norms > 0, a / xp.where(norms > 0, norms, xp.ones_like(norms)), xp.zeros_like(a))


def device_diagonal(xp, kernel, part):
    """k(x, x) for every row of ``part``, in float64, on its device (:meth:`.kernels.Kernel.diagonal`)."""
    metric, params = kernel.metric, dict(kernel.params)
    device = backends.device_of(part)
    n, d = part.shape
    if metric in ("rbf", "laplacian", "chi2"):
        return xp.ones((n,), dtype=xp.float64, device=device)
    if metric == "additive_chi2":
        return xp.zeros((n,), dtype=xp.float64, device=device)
    if not (isinstance(metric, str) and metric in DEVICE_KERNELS):
        raise TypeError(f"Nystroem's kernel {metric!r} runs on NumPy blocks only; the kernels computed on a "
                        f"device are {', '.join(DEVICE_KERNELS)}")
    x = xp.astype(part, xp.float64)
    sq = xp.sum(x * x, axis=1)
    if metric == "linear":
        return sq
    if metric == "cosine":
        return xp.astype(sq > 0, xp.float64)
    gamma = params.get("gamma")
    inner = (1.0 / d if gamma is None else gamma) * sq + params.get("coef0", 1)
    return xp.tanh(inner) if metric == "sigmoid" else inner ** params.get("degree", 3)
