"""Fast Walsh-Hadamard transform and the structured (SORF) projection built on it.

A structured block of frequencies is ``H D1 H D2 H D3`` (Yu et al. 2016,
"Orthogonal Random Features"): ``H`` the p x p Walsh-Hadamard matrix (entries
+-1, Sylvester order as :func:`scipy.linalg.hadamard`), ``Di`` random diagonal
sign matrices, ``p`` the number of features padded to a power of two. Divided
by ``p ** 1.5`` it is orthogonal; its rows are then rescaled by draws of the
kernel's radial distribution. Nothing p x p is ever built: a row costs
``O(p log p)`` per block, ``O(n_components log p)`` in all.

The transform runs on float32 as float32, in place, on slabs of rows small
enough to stay in cache. The lowest five butterfly levels are one small matrix
product with the 32 x 32 Hadamard matrix (contiguous, so BLAS does them at
full speed where NumPy's strided views of width 1-16 crawl); the levels above
are radix-4 butterflies on reshaped views.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import scipy.sparse as sp
from scipy.linalg import hadamard

from .. import backends

# rows x padded width per slab: 2**20 elements, 4 MiB of float32, stays in L2/L3
_SLAB_ELEMENTS = 1 << 20
_GEMM_LEVELS = 5


@lru_cache(maxsize=8)
def _small_hadamard(size, dtype):
    return hadamard(size).astype(dtype)


def fwht(a):
    """Unnormalized Walsh-Hadamard transform of every row of ``a``, in place.

    Parameters
    ----------
    a : ndarray of shape (n_rows, p), C-contiguous, p a power of two
        Overwritten with ``a @ scipy.linalg.hadamard(p)``; its dtype is kept.

    Returns
    -------
    a : ndarray
        The same array.
    """
    n_rows, p = a.shape
    if p & (p - 1):
        raise ValueError(f"the transform length must be a power of two, got {p}")
    if not a.flags.c_contiguous:
        raise ValueError("fwht works in place on a C-contiguous array")
    rows = max(1, _SLAB_ELEMENTS // p)
    for start in range(0, n_rows, rows):
        _fwht_slab(a[start:start + rows])
    return a


def _fwht_slab(a):
    n_rows, p = a.shape
    levels = p.bit_length() - 1
    low = min(levels, _GEMM_LEVELS)
    width = 1 << low
    flat = a.reshape(-1, width)
    flat[...] = flat @ _small_hadamard(width, a.dtype.str)
    h = width
    if (levels - low) % 2:
        v = a.reshape(n_rows, p // (2 * h), 2, h)
        x, y = v[:, :, 0], v[:, :, 1]
        t = x.copy()
        x += y
        np.subtract(t, y, out=y)
        h *= 2
    while h < p:
        v = a.reshape(n_rows, p // (4 * h), 4, h)
        x0, x1, x2, x3 = v[:, :, 0], v[:, :, 1], v[:, :, 2], v[:, :, 3]
        s0 = x0 + x1
        d0 = x0 - x1
        s1 = x2 + x3
        d1 = x2 - x3
        np.add(s0, s1, out=x0)
        np.add(d0, d1, out=x1)
        np.subtract(s0, s1, out=x2)
        np.subtract(d0, d1, out=x3)
        h *= 4


@dataclass(frozen=True)
class StructuredProjection:
    """``X @ W`` for ``W`` made of stacked ``H D1 H D2 H D3`` blocks.

    Column ``b * p + i`` of ``W`` (block ``b``, row ``i`` of that block) is
    ``row_scales[b * p + i] * (H D1 H D2 H D3 diag(input_scales[b]))[i, :n_features]``.
    """

    signs: np.ndarray  # (n_blocks, 3, p) of +-1: D1, D2, D3
    row_scales: np.ndarray  # (n_frequencies,), the 1 / p**1.5 normalization folded in
    input_scales: np.ndarray | None  # (n_blocks, n_features) or None: per-block coordinate scales

    @property
    def n_frequencies(self):
        return self.row_scales.shape[0]


def structured_project(block, proj):
    """``block @ W`` for a :class:`StructuredProjection`, without forming ``W``.

    Sparse blocks are densified first (the padded dense block is no larger
    than the output). The result has ``block``'s float dtype.
    """
    if sp.issparse(block):
        block = block.toarray()
    xp = backends.namespace(block)
    if xp is not None:
        return _structured_project_xp(xp, block, proj)
    n_rows, n_features = block.shape
    n_blocks, _, p = proj.signs.shape
    m = proj.n_frequencies
    out = np.empty((n_rows, m), dtype=block.dtype)
    # one slab of input rows at a time keeps the (rows, n_blocks, p) work array bounded
    rows = max(1, _SLAB_ELEMENTS // (n_blocks * p))
    for start in range(0, n_rows, rows):
        x = block[start:start + rows]
        work = np.zeros((x.shape[0], n_blocks, p), dtype=block.dtype)
        work[:, :, :n_features] = x[:, None, :]
        if proj.input_scales is not None:
            work[:, :, :n_features] *= proj.input_scales
        flat = work.reshape(-1, p)
        for k in (2, 1, 0):  # D3 first: the block is H D1 H D2 H D3 applied to x
            work *= proj.signs[:, k, :]
            fwht(flat)
        np.multiply(work.reshape(x.shape[0], n_blocks * p)[:, :m], proj.row_scales, out=out[start:start + rows])
    return out


def _structured_project_xp(xp, block, proj):
    """:func:`structured_project` in the block's array-API namespace (``proj`` already there).

    The same butterflies, radix 2, on reshaped copies (the array API has no ``out=``);
    one slab of rows at a time, as on NumPy.
    """
    n_rows, n_features = block.shape
    n_blocks, _, p = proj.signs.shape
    m = proj.n_frequencies
    rows = max(1, _SLAB_ELEMENTS // (n_blocks * p))
    device = backends.device_of(block)
    parts = []
    for start in range(0, n_rows, rows):
        x = block[start:min(start + rows, n_rows), :]
        k = x.shape[0]
        pad = xp.zeros((k, n_blocks, p - n_features), dtype=block.dtype, device=device)
        x = xp.broadcast_to(x[:, None, :], (k, n_blocks, n_features))
        if proj.input_scales is not None:
            x = x * proj.input_scales
        work = xp.concat([x, pad], axis=2)
        for level in (2, 1, 0):  # D3 first: the block is H D1 H D2 H D3 applied to x
            work = _fwht_xp(xp, work * proj.signs[:, level, :])
        parts.append(xp.reshape(work, (k, n_blocks * p))[:, :m] * proj.row_scales)
    return parts[0] if len(parts) == 1 else xp.concat(parts, axis=0)


def _fwht_xp(xp, work):
    """Unnormalized Walsh-Hadamard transform along the last axis (a power of two), a new array."""
    shape = work.shape
    p = shape[-1]
    a = xp.reshape(work, (-1, p))
    h = 1
    while h < p:
        v = xp.reshape(a, (a.shape[0], p // (2 * h), 2, h))
        x, y = v[:, :, 0, :], v[:, :, 1, :]
        a = xp.reshape(xp.stack([x + y, x - y], axis=2), (a.shape[0], p))
        h *= 2
    return xp.reshape(a, shape)


def dense_matrix(proj, n_features):
    """The dense ``(n_features, n_frequencies)`` matrix a structured projection represents.

    Built independently of :func:`fwht`, from :func:`scipy.linalg.hadamard`
    and explicit diagonal matrices: for inspection and tests, O(p^2) memory.
    """
    n_blocks, _, p = proj.signs.shape
    H = hadamard(p).astype(np.float64)
    columns = []
    for b in range(n_blocks):
        d1, d2, d3 = (np.diag(proj.signs[b, k].astype(np.float64)) for k in range(3))
        block = H @ d1 @ H @ d2 @ H @ d3
        if proj.input_scales is not None:
            block = block[:, :n_features] * proj.input_scales[b].astype(np.float64)
        columns.append(block[:, :n_features].T)
    W = np.hstack(columns)[:, :proj.n_frequencies]
    return W * proj.row_scales.astype(np.float64)
