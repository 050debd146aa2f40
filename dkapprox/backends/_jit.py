"""Compiled block kernels (numba), with the NumPy code as reference and fallback.

NumPy has had no SIMD float64 cosine since 1.25 (numpy#23925: disabled for
accuracy), so ``np.cos`` on float64 goes through scalar libm, and a float64
Fourier feature block spends most of its time there rather than in its matrix
product. This module compiles a branch-free cosine and sine (fdlibm's
algorithms: Cody-Waite reduction by pi/2 in three 33-bit parts, then the
minimax polynomials of ``k_cos.c`` and ``k_sin.c``, within 1 ulp of the true
value), fused with the offset addition and the scale in one pass over the
product while it is in cache. Arguments beyond ``REDUCTION_LIMIT`` (where the
three-part reduction stops being exact) and non-finite ones take libm's
``cos``/``sin`` itself.

Switches: ``DKAPPROX_JIT=0`` in the environment turns every compiled path off
(the NumPy reference runs), and so does a numba that is missing or fails to
compile (a warning says why, once). :func:`enabled` tells which path runs.
Compiled code is cached on disk (``cache=True``): numba keeps it beside this
file, or in the user's cache folder when the package folder is read-only, so
a worker process loads it instead of compiling.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import scipy.sparse as sp

from ._recycle import empty as recycled_empty

_state = {"module": None, "error": None, "ready": set()}

#: each kernel run once on tiny arrays of the types it is used with: compiles it, or loads it from
#: numba's disk cache, only when a block first needs it, so that a process never pays for kernels it does not use
_WARM_UP = {
    "cos_rows": lambda k: k.cos_rows(np.zeros((1, 2)), np.zeros(2), 1.0, np.zeros((1, 2))),
    "sincos_rows": lambda k: k.sincos_rows(np.zeros((1, 2)), 1.0, np.zeros((1, 4))),
    "l1_distances": lambda k: k.l1_distances(np.zeros((1, 2)), np.zeros((2, 3)), np.zeros((1, 3))),
    "chi2_distances": lambda k: k.chi2_distances(np.zeros((1, 2)), np.zeros((2, 3)), np.zeros((1, 3))),
    "rbf_exponents": lambda k: [k.rbf_exponents(np.zeros((1, 2)), np.zeros(1), np.zeros(2), 1.0,
                                                np.zeros((1, 2), dtype=dtype)) for dtype in (np.float64, np.float32)],
    "affine_rows": lambda k: k.affine_rows(np.zeros((1, 2)), 1.0, 1.0, np.zeros((1, 2))),
    "power_rows": lambda k: k.power_rows(np.zeros((1, 2)), 1.0, 1.0, 3, np.zeros((1, 2))),
    "binning_rows": lambda k: [k.binning_rows(np.zeros((1, 2), dtype=dtype), np.zeros((1, 2), dtype=dtype),
                                              np.ones((1, 2), dtype=dtype), np.ones((1, 2), dtype=np.uint64),
                                              np.zeros(1, dtype=np.uint64), np.uint64(4), 1.0,
                                              np.zeros((1, 1), dtype=np.int32), np.zeros((1, 1), dtype=dtype))
                               for dtype in (np.float64, np.float32)],
}


def enabled() -> bool:
    """True when the compiled kernels run (numba present, compiled, not turned off)."""
    return _kernels() is not None


def _kernels(*names):
    """The kernels module with ``names`` ready to run, or None (off, no numba, or it failed: a warning)."""
    if os.environ.get("DKAPPROX_JIT", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    if _state["error"] is not None:
        return None
    try:
        if _state["module"] is None:
            from . import _jit_kernels

            _state["module"] = _jit_kernels
        for name in names:
            if name not in _state["ready"]:
                _WARM_UP[name](_state["module"])
                _state["ready"].add(name)
    except Exception as exc:  # no numba, or it cannot compile here: the NumPy path runs
        _state["error"], _state["module"] = exc, None
        warnings.warn(f"dkapprox: compiled kernels unavailable ({type(exc).__name__}: {exc}); "
                      "using the NumPy path", RuntimeWarning, stacklevel=3)
        return None
    return _state["module"]


# -- the Fourier feature map, compiled where it pays ---------------------------------------------

#: below this many output values a block takes the NumPy path: loading the compiled code the first
#: time in a process (numba's import included) would cost more than it saves (benchmarks/bench_kernels.py)
MIN_COMPILED_VALUES = 2**16
#: values per tile: its product (tile rows x n_frequencies, 2 MiB of float64) stays in cache for its map
#: (docs/performance.md, "Tiles"; benchmarks/bench_kernels.py measures it)
TILE_VALUES = 2**18
#: float32 tiles (NumPy's map): 2**20 values, 4 MiB (1,024 rows at 1,024 features). Each tile costs
#: three NumPy calls, and each call takes the GIL back when it returns: under dask's threaded
#: scheduler (16 tasks in one process) smaller tiles left the block path GIL-bound
#: (docs/performance.md, "Tiles"; benchmarks/bench_big_box.py measures it)
TILE_VALUES_32 = 2**20
#: ... and at most this many rows: a narrow map's tile (40 features) stays a tile, not a copy of the block
TILE_ROWS_32 = 1024


def fourier_map(block, weights, offset, scale, project=None):
    """``scale cos(block @ weights + offset)``, or ``scale [cos, sin](block @ weights)`` if offset is None.

    ``project(block) -> product`` replaces ``block @ weights`` (a structured projection). The
    compiled path (float64) multiplies a tile of rows and takes its cos while the product is in
    cache; float32 does the same with NumPy's SIMD ufuncs (:func:`_tiled_numpy`), never loading
    numba; the NumPy path is the reference. A tile's
    product is the same BLAS call for the same block, so a block computed again gives the same
    bits; other tilings round within the bound of other chunkings (README, "Precision").
    """
    n_freq = weights.shape[1] if project is None else None
    product = None
    if project is not None:
        product = project(block)
        n_freq = product.shape[1]
    n_out = n_freq if offset is not None else 2 * n_freq
    dtype = np.result_type(block.dtype, weights.dtype) if product is None else product.dtype
    wanted = "cos_rows" if offset is not None else "sincos_rows"
    if dtype == np.float32:
        # NumPy's float32 cos and sin are SIMD, faster than a compiled cos through float64: tiles, no numba
        if product is None and not sp.issparse(block):
            return _tiled_numpy(block, weights, offset, float(scale))
        return _numpy_fourier(_dot(block, weights) if product is None else product, offset, scale, tiled=True)
    k = _kernels(wanted) if dtype == np.float64 and block.shape[0] * n_out >= MIN_COMPILED_VALUES else None
    if k is None:
        return _numpy_fourier(_dot(block, weights) if product is None else product, offset, scale)
    offset64 = np.zeros(n_freq) if offset is None else np.ascontiguousarray(offset, dtype=np.float64)
    if product is None and not sp.issparse(block):
        return _tiled(k, block, weights, offset64, offset is None, float(scale))
    product = np.ascontiguousarray(_dot(block, weights) if product is None else product)
    return _epilogue(k, product, offset64, offset is None, float(scale))


def _tiled(k, block, weights, offset64, paired, scale):
    """Each tile of rows multiplied into one reused buffer, then mapped from it into the output.

    The buffer stays in cache, so the output is written once, by the map, into pages already
    touched: those of an earlier output nothing refers to any more, or fresh ones touched first
    (:mod:`dkapprox.backends._recycle`).
    """
    n_freq = weights.shape[1]
    out = recycled_empty((block.shape[0], 2 * n_freq if paired else n_freq))
    buf = np.empty((min(block.shape[0], max(1, TILE_VALUES // n_freq)), n_freq))
    for start in range(0, block.shape[0], buf.shape[0]):
        tile = slice(start, start + buf.shape[0])
        product = np.matmul(block[tile], weights, out=buf[: out[tile].shape[0]])
        if paired:
            k.sincos_rows(product, scale, out[tile])
        else:
            k.cos_rows(product, offset64, scale, out[tile])
    return out


def _tiled_numpy(block, weights, offset, scale):
    """float32: :func:`_tiled` with NumPy's ufuncs for the map, each tile's product still in cache.

    NumPy's float32 ``cos``/``sin`` are SIMD already (its float64 ones are not: hence numba there);
    what the whole-block path lost was memory traffic: the product written, then read and written
    again by the offset, the cos and the scale, four passes over a block's output. Here the output
    is written once, from the tile's buffer, and scaled while that tile is in cache. The offset is
    one more row of the weights, against a column of ones beside the tile's rows: the product adds
    it, in float32, rounding once where scikit-learn's ``+=`` rounds twice: within the rounding bound
    that docs/precision.md states for BLAS's own reorderings (its offset term).
    """
    n_freq, n_in = weights.shape[1], block.shape[1]
    paired = offset is None
    out = recycled_empty((block.shape[0], 2 * n_freq if paired else n_freq), dtype=np.float32)
    tile_rows = max(1, min(TILE_ROWS_32, TILE_VALUES_32 // n_freq))
    buf = np.empty((min(block.shape[0], tile_rows), n_freq), dtype=np.float32)
    if not paired:  # a tile's rows beside a column of ones (copied a tile at a time: no block-sized copy)
        weights = np.concatenate([weights, np.reshape(offset, (1, n_freq))]).astype(np.float32, copy=False)
        ones = np.ones((buf.shape[0], n_in + 1), dtype=np.float32)
    step = buf.shape[0]
    for start in range(0, block.shape[0], step):  # four NumPy calls a tile: see TILE_VALUES_32
        rows = out[start: start + step]
        m = rows.shape[0]
        if paired:
            product = np.matmul(block[start: start + m], weights, out=buf[:m])
        else:
            ones[:m, :n_in] = block[start: start + m]
            product = np.matmul(ones[:m], weights, out=buf[:m])
        if paired:
            np.cos(product, out=rows[:, :n_freq])
            np.sin(product, out=rows[:, n_freq:])
        else:
            np.cos(product, out=rows)
        rows *= scale  # a Python float keeps float32
    return out


def _epilogue(k, product, offset64, paired, scale):
    """The map of a product computed whole (structured or sparse): cos in place, through a buffer."""
    if paired:
        out = recycled_empty((product.shape[0], 2 * product.shape[1]))
        k.sincos_rows(product, scale, out)
        return out
    buf = np.empty((min(product.shape[0], max(1, TILE_VALUES // product.shape[1])), product.shape[1]))
    for start in range(0, product.shape[0], buf.shape[0]):
        tile = product[start: start + buf.shape[0]]
        rows = buf[: tile.shape[0]]
        rows[...] = tile
        k.cos_rows(rows, offset64, scale, tile)
    return product


def _numpy_fourier(product, offset, scale, tiled=False):
    """The reference: NumPy's cos and sin, in the product's dtype.

    ``tiled``: the cos map a tile of rows at a time, so that each tile is read and written once
    (the offset, cos and scale each pass over it while it is in cache); same values.
    """
    if offset is not None:
        step = max(1, TILE_VALUES_32 // max(1, product.shape[1])) if tiled else max(1, product.shape[0])
        for start in range(0, product.shape[0], step):
            rows = product[start: start + step]
            rows += offset
            np.cos(rows, out=rows)
            rows *= scale  # a Python float keeps float32
        return product
    n_freq = product.shape[1]
    out = np.empty((product.shape[0], 2 * n_freq), dtype=product.dtype)
    np.cos(product, out=out[:, :n_freq])
    np.sin(product, out=out[:, n_freq:])
    out *= scale
    return out


def _dot(block, weights):
    from sklearn.utils.extmath import safe_sparse_dot

    return safe_sparse_dot(block, weights)


# -- Nystroem kernels --------------------------------------------------------------------------

#: Nystroem kernels computed here: name -> (compiled distance, gamma's sign in exp(sign gamma D))
_PAIRWISE = {"laplacian": ("l1_distances", -1.0), "chi2": ("chi2_distances", 1.0),
             "additive_chi2": ("chi2_distances", None)}


def pairwise_kernel(metric, part, landmarks_t, gamma):
    """k(rows, landmarks) for the laplacian, chi2 and additive_chi2 kernels, in float64, or None.

    The landmarks come transposed, in float64. scikit-learn computes these kernels in scalar
    loops (scipy's cityblock, its Cython chi2); here the inner loop runs over landmarks and
    vectorizes, summing the features in scikit-learn's order. None where the compiled path is
    off, the rows are sparse or negative (scikit-learn's kernel then raises its own error), or the
    slice is too small to pay: the caller then uses scikit-learn.
    """
    if metric not in _PAIRWISE or sp.issparse(part) or part.shape[0] * landmarks_t.shape[1] < 1024:
        return None
    distance, sign = _PAIRWISE[metric]
    k = _kernels(distance)
    if k is None:
        return None
    if distance == "chi2_distances" and (part < 0).any():
        return None
    out = np.empty((part.shape[0], landmarks_t.shape[1]))
    getattr(k, distance)(np.ascontiguousarray(part), landmarks_t, out)
    if sign is not None:
        out *= sign * gamma
        np.exp(out, out=out)
    return out


def rbf_exponents(D, row_norms, landmark_norms, gamma, out):
    """``out = -gamma max(-2 D + |x|^2 + |l|^2, 0)`` in one compiled pass; False where it is off.

    The caller (Nystroem's rbf slices) then runs the same steps in NumPy, six passes.
    """
    k = _kernels("rbf_exponents") if D.shape[0] * D.shape[1] >= 1024 else None
    if k is None:
        return False
    k.rbf_exponents(D, row_norms, landmark_norms[0] if landmark_norms.ndim == 2 else landmark_norms, float(gamma),
                    out)
    return True


#: Nystroem kernels of an inner product, by scikit-learn's names: k = f(gamma x.l + coef0)
INNER_PRODUCT = ("poly", "polynomial", "sigmoid")
#: integer degrees up to this take repeated squaring (a pass per bit); larger ones NumPy's power
MAX_SQUARED_DEGREE = 2**31


def inner_product_kernel(metric, part, landmarks_t, gamma, coef0=1, degree=3):
    """k(rows, landmarks) for the polynomial and sigmoid kernels, in float64, or None.

    The product stays BLAS: ``np.matmul`` of the rows in float64 with ``landmarks_t``, the
    float64 landmarks transposed (the view ``landmarks.T`` makes it scikit-learn's own call, and
    so its bits). Then one compiled pass: ``gamma K + coef0`` in scikit-learn's two roundings,
    raised to an integer degree by repeated squaring (scikit-learn's ``K **= degree`` takes
    ``pow``, which does not vectorize). A non-integer degree and the sigmoid's tanh stay NumPy's
    (``np.tanh`` is SIMD on AVX-512, faster here than a compiled one: benchmarks/bench_epilogues.py)
    after the compiled affine pass. Every step is elementwise, so the kernel of a row does not
    depend on the slice it is in beyond the product. None where the compiled path is off, the
    rows are sparse, a parameter is not a number, or the slice is too small to pay: the caller
    then uses scikit-learn.
    """
    if metric not in INNER_PRODUCT or sp.issparse(part) or part.shape[0] * landmarks_t.shape[1] < 1024 or \
            not all(np.ndim(p) == 0 for p in (gamma, coef0, degree)):
        return None
    power = metric != "sigmoid" and float(degree).is_integer() and 1 <= degree <= MAX_SQUARED_DEGREE
    k = _kernels("power_rows" if power else "affine_rows")
    if k is None:
        return None
    out = np.matmul(part.astype(np.float64, copy=False), landmarks_t)
    if power:
        k.power_rows(out, float(gamma), float(coef0), int(degree), out)
        return out
    k.affine_rows(out, float(gamma), float(coef0), out)
    if metric == "sigmoid":
        np.tanh(out, out=out)
    else:
        out **= degree  # NaN for a negative base, as scikit-learn's
    return out


# -- random binning ---------------------------------------------------------------------------------


def binning_cells(block, state, scale, columns, values):
    """Fill ``columns`` and ``values`` (n_rows x n_grids) with random binning's hashed cells; False where off.

    The same bits as the NumPy grid loop of :func:`dkapprox.random_features.binning.binning_features`
    (exact IEEE and integer steps), in one compiled pass over each row. False (the caller then
    runs its NumPy loop) where the compiled path is off, the data is not float32 or float64, the
    hash parameters are not uint64, or the block is too small to pay.
    """
    if block.dtype not in (np.float32, np.float64) or block.shape[0] * state.pitches.shape[0] < MIN_COMPILED_VALUES \
            or not state.multipliers.dtype == state.increments.dtype == np.uint64:  # numba would mix in float64
        return False
    k = _kernels("binning_rows")
    if k is None:
        return False
    k.binning_rows(np.ascontiguousarray(block), np.ascontiguousarray(state.shifts),
                   np.ascontiguousarray(state.pitches), np.ascontiguousarray(state.multipliers),
                   np.ascontiguousarray(state.increments), np.uint64(state.n_components), float(scale), columns, values)
    return True
