"""The bound within which dkapprox promises equal features across chunkings (docs/precision.md).

Two promises, and every comparison in the suite falls under one of them:

1. **The same block, computed again, gives the same bits**: a rerun, a resumed
   job, a block recomputed after a worker died, a cluster against NumPy block
   by block. Tests compare identical blocks with ``np.testing.assert_array_equal``.
2. **Another chunking gives features equal within a derived bound**, the one
   computed here. A transform's dot products are sums of ``K`` products, and
   BLAS may add them in another order for another block shape or another CPU
   kernel (OpenBLAS picks its micro-kernel by shape and by the CPU it detects
   at import; ``X[i:i+m] @ W`` and the same rows of ``X @ W`` differ in
   float32 on AVX2 Haswell kernels for every ``m``). Every order's sum is
   within ``gamma_K * sum_i |a_i b_i|`` of the exact one (Higham, *Accuracy and
   Stability of Numerical Algorithms*, 2nd ed., eq. 3.5; ``gamma_K = K u / (1 - K u)``,
   ``u = eps / 2``), so two orders differ by at most ``K * eps * (|A| @ |B|)``
   per entry. The elementwise steps after a product (offset, cos, exp, power,
   scale) see each entry alone and are the same code for every chunking: they
   carry the product's difference on through their derivative and add a few
   units of rounding of their own.

Each ``*_bound`` function returns, in float64 and of the output's shape, the
largest difference the promise allows between ``transform`` of the whole array
and of any other row blocks or column splits. ``SLACK`` (2) covers the
second-order terms and the "few units" of the elementwise steps; a test that
can pass only with more is a defect to find, not a tolerance to raise.

Estimators whose blocks involve no reordered sum are exact: random binning
(IEEE subtraction, division and floor, then integer hashing) has bound 0.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from sklearn.utils.extmath import row_norms

import dkapprox
from dkapprox.random_features.hadamard import StructuredProjection

SLACK = 2.0


def eps(dtype) -> float:
    return float(np.finfo(np.dtype(dtype)).eps)


def dense64(a) -> np.ndarray:
    return (a.toarray() if sp.issparse(a) else np.asarray(a)).astype(np.float64)


def _abs(a):
    return abs(a).astype(np.float64) if sp.issparse(a) else np.abs(np.asarray(a, dtype=np.float64))


def dot_bound(A, B, dtype) -> np.ndarray:
    """``K eps (|A| @ |B|)``: how far two summation orders of ``A @ B`` can lie apart."""
    return A.shape[1] * eps(dtype) * dense64(_abs(A) @ _abs(B))


def projection_bound(X, weights, dtype):
    """(product in float64, its bound) for ``X @ weights``; ``weights`` dense or structured."""
    if not isinstance(weights, StructuredProjection):
        return dense64(X) @ dense64(weights), dot_bound(X, weights, dtype)
    # H D1 H D2 H D3 (unnormalized +-1 Hadamard H of order p) then row scales: three stages,
    # each a sum of p terms of at most the magnitude the all-positive path gives, which is
    # |H| |H| |H| |x| = p^2 sum|x| for every frequency of a block, times the scales.
    from dkapprox.random_features.hadamard import dense_matrix

    n_blocks, _, p = weights.signs.shape
    scales = np.ones((n_blocks, X.shape[1])) if weights.input_scales is None else \
        _abs(weights.input_scales)[:, :X.shape[1]]
    path = p * p * dense64(_abs(X) @ scales.T)  # (n, n_blocks)
    path = np.repeat(path, p, axis=1)[:, :weights.n_frequencies] * _abs(weights.row_scales)
    return dense64(X) @ dense_matrix(weights, X.shape[1]), 3 * p * eps(dtype) * path


def cos_map_bound(product, bound, offset, scale, dtype):
    """Bound of ``scale * cos(product + offset)`` (``offset`` None: cos and sin, side by side)."""
    e = eps(dtype)
    shift = 0.0 if offset is None else np.abs(dense64(offset))
    # |cos a - cos b| <= |a - b|; the offset's addition and cos each round within a few units
    arg = bound + e * (np.abs(product) + shift) + 4 * e
    out = SLACK * scale * arg
    return out if offset is not None else np.hstack([out, out])


def fourier_bound(est, X):
    state = est._state(X.dtype)
    if isinstance(est, dkapprox.SkewedChi2Sampler):
        X = np.log(dense64(X) + state.skewedness).astype(X.dtype)  # elementwise: the same bits
        state = state.fourier
    product, bound = projection_bound(X, state.weights, X.dtype)
    n_freq = product.shape[1]
    scale = math.sqrt(2.0 / n_freq) if state.offset is not None else math.sqrt(1.0 / n_freq)
    return cos_map_bound(product, bound, state.offset, scale, X.dtype)


def projection_only_bound(est, X):
    return SLACK * dot_bound(X, est._state(X.dtype).matrix.T, X.dtype)


def elementwise_bound(est, X):
    """AdditiveChi2Sampler: log, sqrt, cos, sin of each entry alone.

    A few units of the output, plus, for ``factor * cos(j * interval * log x)`` and its sine, the
    rounding of the argument carried by the derivative (at most ``factor``): a few units of
    ``factor * (1 + |j interval log x|)``. Without that term the bound shrinks to nothing where
    the cosine crosses zero, and another libm's log (CUDA's on a GPU, measured: 1.6e-8 off
    on a 5.9e-5 output, float32) broke it while every row stayed within float32 rounding.
    """
    steps, interval = est.sample_steps, est._interval()
    x = dense64(X)
    x = np.where(x != 0, x, 1.0)
    theta = np.abs(interval * np.log(x))
    terms = [np.zeros_like(x)]
    for j in range(1, steps):
        factor = np.sqrt(2 * x * interval / math.cosh(math.pi * j * interval))
        terms += [factor * (1 + j * theta)] * 2
    argument = np.where(dense64(X) != 0, 1.0, 0.0)
    argument = np.hstack([t * argument for t in terms])
    return SLACK * 4 * eps(X.dtype) * (np.abs(dense64(est.transform(X))) + argument)


def exact_bound(est, X):
    return np.zeros(est.transform(X[:1]).shape[1:]) * np.ones((X.shape[0], 1))


def count_sketch_bound(est, X):
    """Count sketches (sparse sums, fixed order), real FFTs, their product, an inverse FFT.

    An FFT of length m rounds each coefficient within about log2(m) eps times the
    input's 1-norm (each |F_j| <= ||c||_1); the product of ``degree`` spectra and
    the inverse transform add one such term each: ``(degree + 1) (log2 m + 1) eps
    prod_k ||c_k||_1`` per row, a bound on every entry of the row.
    """
    state = est._state(X.dtype)
    xg = dense64(X) * math.sqrt(state.gamma)
    if state.coef0 != 0:
        xg = np.hstack([xg, np.full((xg.shape[0], 1), math.sqrt(state.coef0))])
    norms = np.ones(xg.shape[0])
    for sketch in state.sketches:
        norms *= np.abs(dense64(xg @ sketch)).sum(axis=1)
    m = state.sketches[0].shape[1]
    per_row = SLACK * (len(state.sketches) + 1) * (math.log2(m) + 1) * eps(X.dtype) * norms
    return per_row[:, None] * np.ones((1, m))


def _kernel_and_bound(kernel, X, landmarks, dtype):
    """(``k(X, landmarks)`` in float64, the bound of its rounding when computed in ``dtype``)."""
    name = kernel.metric if isinstance(kernel.metric, str) else None
    params = dict(kernel.params)
    e, e64 = eps(dtype), eps(np.float64)
    X64 = dense64(X)
    K = dense64(kernel.between(X64, dense64(landmarks)))
    if name in ("rbf", "linear", "polynomial", "poly", "sigmoid", "cosine"):
        L = dense64(landmarks)
        d = X.shape[1]
        gamma = params.get("gamma") or 1.0 / d
        if name == "cosine":
            X64 = X64 / np.maximum(np.sqrt(row_norms(X64, squared=True)), np.finfo(float).tiny)[:, None]
            L = L / np.maximum(np.sqrt(row_norms(L, squared=True)), np.finfo(float).tiny)[:, None]
        A = np.abs(X64) @ np.abs(L).T
        if name == "rbf":
            # scikit-learn: |x|^2 + |l|^2 - 2 x.l in float64 (float32 is upcast), cast to the
            # data's dtype, then exp(-gamma D) in it
            D = row_norms(X64, squared=True)[:, None] + row_norms(L, squared=True)[None, :]
            dK = gamma * K * ((d + 2) * e64 * (D + 2 * A) + 2 * e * np.abs(D - 2 * X64 @ L.T)) + 4 * e * K
        else:
            dot = (d + 2) * e * A
            P = gamma * (X64 @ L.T) + params.get("coef0", 1)
            if name == "sigmoid":  # tanh is 1-Lipschitz
                dK = gamma * dot + e * np.abs(P) + 4 * e
            elif name in ("polynomial", "poly"):
                degree = params.get("degree", 3)
                dK = degree * np.abs(P) ** (degree - 1) * (gamma * dot + e * np.abs(P)) + 2 * degree * e * np.abs(K)
            else:
                dK = dot
    else:
        # laplacian, chi2, additive_chi2, precomputed: each entry from its own pair of rows by a
        # fixed loop (scipy's cdist, scikit-learn's Cython): a few units of rounding at most
        dK = 4 * e * np.abs(K)
    return K, dK


def nystroem_bound(est, X):
    """k(X, landmarks) @ normalization: the kernel's own bound, then the product's."""
    state = est._state(X.dtype)
    N = dense64(state.normalization)
    K, dK = _kernel_and_bound(state.kernel, X, state.landmarks, X.dtype)
    m = N.shape[0]
    return SLACK * (dK @ np.abs(N) + m * eps(X.dtype) * (np.abs(K) @ np.abs(N)))


def restriction_bound(est, X):
    """Rank-restricted Nystroem fitted on ``X`` in other blocks: how far the features of ``X`` move with the state.

    ``nystroem_bound`` holds one fitted state fixed. A rank restriction (``n_landmarks >
    n_components``; ``normalization_`` of shape (m, l), m < l) reads the data for its state: it sums
    the Gram ``G = Z^T Z`` (l x l, float64) of the plain features ``Z = k(X, L) N0``, ``N0 =
    K_LL^(-1/2)`` (the same bits in every fit: the same landmarks, on the driver), folded over the
    row blocks, and ``normalization_ = (N0 V_m)^T`` with ``V_m`` the top m eigenvectors of ``G``.
    Another chunking (a dask fit against a NumPy fit) sums ``G`` in another order, and an
    eigenvector moves by its neighbours' gap's inverse: the term missing from the chunking bound
    (measured on the fuzz suite's 30 x 5 cosine rpcholesky case: eigenvalues 4.181 and 4.146, gap
    0.035, and the two fits' features 2 and 3 differ by 7.7e-15, over the fixed-state bound).

    Derivation, for a row ``x`` and feature ``j`` (first order; ``SLACK`` covers the second):

    - ``|G - G'| <= n eps |Z|^T |Z| + |Z|^T B + B^T |Z|`` entrywise: each entry is a sum of ``n``
      products, in two orders (Higham eq. 3.5, as ``dot_bound``), of rows ``z_r`` that other
      blocks compute within ``B_r = dK_r |N0| + l eps |K_r| |N0|`` (the kernel's and the product's
      bounds, as in ``nystroem_bound``; float64, the Gram's dtype whatever the data's).
    - Each fit's ``eigh`` is backward stable: its eigenvectors are exact for ``G + F`` with
      ``||F||_2 <= p(l) eps ||G||_2`` (Demmel, *Applied Numerical Linear Algebra*, 5.2; we take
      ``p(l) = l``); two fits, two such errors. So the two fits decompose matrices ``delta``
      apart in the 2-norm, ``delta <= ||G - G'||_F + 2 l eps ||G||_2``.
    - Davis-Kahan's sin-theta theorem: ``||v_j - v_j'||_2 <= delta / (gap_j - delta)``, ``gap_j =
      min_{k != j} |w_j - w_k|`` over all l eigenvalues of ``G`` (``gap_j - delta`` bounds the gap
      to the other matrix's spectrum by Weyl's inequality). The signs are fixed the same way in
      both fits (each vector's largest entry positive).
    - Feature j of ``x`` is ``k(x, L) N0 v_j = z(x) . v_j``: it moves by ``z(x) . (v_j - v_j')``,
      at most ``||z(x)||_2 ||v_j - v_j'||_2``.

    Features whose eigenvalue the fit cut as null (``restriction.NULL_RTOL``) are zero in every fit:
    0. A gap within ``delta`` (eigenvalues tied within rounding) leaves its eigenvectors to
    rounding, so no bound exists: an AssertionError, never a silent infinite bound. 0 everywhere
    for plain Nystroem (square ``normalization_``): its state reads no data.
    """
    from dkapprox.nystroem.normalization import default_rtol, inverse_sqrt

    restricted = dense64(est.normalization_)  # (m, l)
    m, n_landmarks = restricted.shape
    n = X.shape[0]
    out = np.zeros((n, m))
    if m == n_landmarks:
        return out
    e64 = eps(np.float64)
    kernel = est._state(X.dtype).kernel
    basis = kernel.between(est.components_, est._landmarks())
    N0 = dense64(inverse_sqrt(basis, rtol=default_rtol(n_landmarks, basis.dtype)))
    K, dK = _kernel_and_bound(kernel, X, est._landmarks(), np.float64)
    Z, absN0 = K @ N0, np.abs(N0)
    B = dK @ absN0 + n_landmarks * e64 * (np.abs(K) @ absN0)
    absZ = np.abs(Z)
    dG = n * e64 * (absZ.T @ absZ) + absZ.T @ B + B.T @ absZ
    G = Z.T @ Z
    w = np.linalg.eigvalsh((G + G.T) * 0.5)[::-1]
    delta = np.linalg.norm(dG) + 2 * n_landmarks * e64 * float(np.abs(w).max())
    kept = np.abs(restricted).max(axis=1) > 0  # features not cut as null
    for j in np.flatnonzero(kept):
        gap = float(np.min(np.abs(np.delete(w, j) - w[j])))
        assert gap > delta, f"feature {j}: eigenvalue gap {gap:.3g} within the Gram's rounding {delta:.3g}"
        out[:, j] = SLACK * np.linalg.norm(Z, axis=1) * delta / (gap - delta)
    return out


_BOUNDS = [
    ((dkapprox.RBFSampler, dkapprox.SkewedChi2Sampler, dkapprox.RandomFourierFeatures), fourier_bound),
    ((dkapprox.GaussianRandomProjection, dkapprox.SparseRandomProjection), projection_only_bound),
    ((dkapprox.AdditiveChi2Sampler,), elementwise_bound),
    ((dkapprox.PolynomialCountSketch,), count_sketch_bound),
    ((dkapprox.RandomBinningFeatures,), exact_bound),
    ((dkapprox.Nystroem,), nystroem_bound),
]


def transform_bound(est, X) -> np.ndarray:
    """Entrywise bound on |transform(X) in other blocks - transform(X) in one| for a fitted ``est``."""
    for classes, bound in _BOUNDS:
        if isinstance(est, classes):
            return bound(est, X)
    raise TypeError(f"no rounding bound is derived for {type(est).__name__}")


def assert_within_bound(got, expected, bound, what=""):
    """``|got - expected| <= bound`` entrywise; returns the largest fraction of the bound used."""
    got, expected = dense64(got), dense64(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    diff = np.abs(got - expected)
    over = diff > bound
    if over.any():
        i = np.unravel_index(np.argmax(np.where(over, diff - bound, -np.inf)), diff.shape)
        raise AssertionError(
            f"{what}: {int(over.sum())} of {diff.size} entries differ by more than the rounding bound; "
            f"worst at {tuple(int(j) for j in i)}: |{got[i]!r} - {expected[i]!r}| = {diff[i]:.3g} > {bound[i]:.3g}")
    used = np.divide(diff, bound, out=np.zeros_like(diff), where=bound > 0)
    return float(used.max()) if used.size else 0.0


def assert_chunking_promise(est, X, got, expected=None, what=""):
    """``got`` (another chunking's transform of X) within the bound of ``est.transform(X)``."""
    expected = est.transform(X) if expected is None else expected
    return assert_within_bound(got, expected, transform_bound(est, X), what or type(est).__name__)


def compute_checked(lazy):
    """``lazy`` computed block by block, each block checked against the declared chunks, dtype and meta."""
    import dask

    # a delayed object a block, in both dask.array modes (to_delayed: legacy only)
    from dkapprox.engine import _dask_compat

    blocks = dask.compute(*_dask_compat.delayed_blocks(lazy))
    for index, block in zip(np.ndindex(*lazy.numblocks), blocks):
        declared = tuple(lazy.chunks[axis][i] for axis, i in enumerate(index))
        assert block.shape == declared, (index, block.shape, declared)
        assert block.dtype == lazy.dtype, (index, block.dtype, lazy.dtype)
        assert sp.issparse(block) == sp.issparse(lazy._meta), (index, type(block), type(lazy._meta))
    rows = [blocks[i * lazy.numblocks[1]:(i + 1) * lazy.numblocks[1]] for i in range(lazy.numblocks[0])]
    if sp.issparse(lazy._meta):
        return sp.vstack([sp.hstack(r) for r in rows], format="csr")
    return np.block([list(r) for r in rows]) if blocks else np.empty(lazy.shape, lazy.dtype)


def transform_by_blocks(est, X, rows):
    """``est.transform`` of NumPy ``X`` one row block at a time (``rows``: block sizes or one size).

    What a dask or Zarr transform of the same blocks must equal bit for bit (promise 1), and so
    computed as a block task computes them: on one BLAS thread (``threadpool_limits(1)``,
    dkapprox/engine/_blas.py). NumPy on the process's default threads is another computation: OpenBLAS
    splits a product between two threads in another order under some kernels (``OPENBLAS_CORETYPE``
    Zen: 0.4 to 17% of the values of these tests' blocks differ in their last bits).
    """
    from threadpoolctl import threadpool_limits

    n = X.shape[0]
    sizes = [rows] * (-(-n // rows)) if np.isscalar(rows) else list(rows)
    edges = np.cumsum([0] + [int(s) for s in sizes])
    edges[-1] = min(edges[-1], n)
    with threadpool_limits(1, user_api="blas"):
        parts = [est.transform(X[a:b]) for a, b in zip(edges[:-1], edges[1:])]
    return sp.vstack(parts, format="csr") if sp.issparse(parts[0]) else np.concatenate(parts)
