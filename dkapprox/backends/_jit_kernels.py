"""The compiled kernels themselves (imported by :mod:`dkapprox.backends._jit` only when numba is there).

fdlibm's cosine and sine, vectorized: x = fn pi/2 + y0 + y1 by three 33-bit parts of
pi/2 (exact for |fn| < 2^20, so up to ``REDUCTION_LIMIT``), then the minimax
polynomials of ``k_cos.c`` and ``k_sin.c`` on (y0, y1), chosen and signed by fn's
quadrant with no integer conversion; within 1 ulp of the true value. Arguments beyond
``REDUCTION_LIMIT``, NaN and infinity are reduced as 0 in the loop, counted, and given
libm's value in a second loop that runs only when there are any: an unconditional second
loop, like outputs that may alias the input, kept LLVM's loop scalar, several times slower
(docs/performance.md, "Tiles"; benchmarks/bench_kernels.py measures the kernels).
"""

import math

import numba
import numpy as np

from ..utils import FMIX1 as _FMIX1
from ..utils import FMIX2 as _FMIX2
from ..utils import FMIX_ONE as _ONE
from ..utils import FMIX_S32 as _S32
from ..utils import FMIX_S33 as _S33

REDUCTION_LIMIT = (2.0**19) * (math.pi / 2)

_INVPIO2 = 6.36619772367581382433e-01
_PIO2_1 = 1.57079632673412561417e+00  # first 33 bits of pi/2
_PIO2_2 = 6.07710050630396597660e-11  # second 33 bits
_PIO2_2T = 2.02226624879595063154e-21  # pi/2 - (_PIO2_1 + _PIO2_2)
_PIO2_3 = 2.02226624871116645580e-21  # third 33 bits
_PIO2_3T = 8.47842766036889956997e-32  # pi/2 - (_PIO2_1 + _PIO2_2 + _PIO2_3)
_TOINT = 6755399441055744.0  # 1.5 * 2^52: adding and subtracting it rounds to an integer
_C1, _C2, _C3 = 4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05
_C4, _C5, _C6 = -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11
_S1, _S2, _S3 = -1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04
_S4, _S5, _S6 = 2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10

jit = numba.njit(cache=True, nogil=True, fastmath=False, error_model="numpy")


@numba.njit(inline="always")
def _reduced_cos_sin(x):
    """(cos, sin) polynomials of x's remainder by pi/2, and the quadrant (0-3, as a float).

    Inlined into the loops below: LLVM vectorizes them whole. A libm call or a branch in the same
    loop keeps it scalar (docs/performance.md, "Tiles").
    """
    fn = (x * _INVPIO2 + _TOINT) - _TOINT
    r = x - fn * _PIO2_1
    t = r
    w = fn * _PIO2_2
    r = t - w
    w = fn * _PIO2_2T - ((t - r) - w)
    t = r
    w = fn * _PIO2_3
    r = t - w
    w = fn * _PIO2_3T - ((t - r) - w)
    y0 = r - w
    y1 = (r - y0) - w
    z = y0 * y0
    w = z * z
    r = z * (_C1 + z * (_C2 + z * _C3)) + w * w * (_C4 + z * (_C5 + z * _C6))
    hz = 0.5 * z
    w = 1.0 - hz
    c = w + (((1.0 - w) - hz) + (z * r - y0 * y1))
    w = z * z
    r = _S2 + z * (_S3 + z * _S4) + z * w * (_S5 + z * _S6)
    v = z * y0
    s = y0 - ((z * (0.5 * y1 - v * r) - y1) - v * _S1)
    return c, s, fn - 4.0 * math.floor(0.25 * fn)


@jit
def cos_row(src, offset, scale, out):
    """out = scale * cos(src + offset), 1-D; ``out`` must not be ``src`` (LLVM then stays scalar)."""
    m = src.shape[0]
    outside = 0  # counted in the loop, which stays vectorized; libm takes these after it
    for j in range(m):
        x = np.float64(src[j]) + offset[j]
        inside = abs(x) <= REDUCTION_LIMIT
        outside += 0 if inside else 1
        c, s, q = _reduced_cos_sin(x if inside else 0.0)
        v = s if (q == 1.0 or q == 3.0) else c  # quadrants 1 and 3 swap cos and sin
        out[j] = scale * (-v if (q == 1.0 or q == 2.0) else v)  # cos < 0 in quadrants 1, 2
    if outside:
        for j in range(m):
            x = np.float64(src[j]) + offset[j]
            if not abs(x) <= REDUCTION_LIMIT:
                out[j] = scale * math.cos(x)


@jit
def sincos_row(src, scale, cos_out, sin_out):
    """cos_out = scale * cos(src), sin_out = scale * sin(src); 1-D, three distinct arrays."""
    m = src.shape[0]
    outside = 0
    for j in range(m):
        x = np.float64(src[j])
        inside = abs(x) <= REDUCTION_LIMIT
        outside += 0 if inside else 1
        c, s, q = _reduced_cos_sin(x if inside else 0.0)
        odd = q == 1.0 or q == 3.0
        cv = s if odd else c
        sv = c if odd else s
        cos_out[j] = scale * (-cv if (q == 1.0 or q == 2.0) else cv)
        sin_out[j] = scale * (-sv if q >= 2.0 else sv)  # sin < 0 in quadrants 2, 3
    if outside:
        for j in range(m):
            x = np.float64(src[j])
            if not abs(x) <= REDUCTION_LIMIT:
                cos_out[j] = scale * math.cos(x)
                sin_out[j] = scale * math.sin(x)


@jit
def cos_rows(a, offset, scale, out):
    """out[i, j] = scale * cos(a[i, j] + offset[j]); ``out`` is another array than ``a``."""
    for i in range(a.shape[0]):
        cos_row(a[i], offset, scale, out[i])


@jit
def sincos_rows(a, scale, out):
    """out[i, :m] = scale * cos(a[i]), out[i, m:] = scale * sin(a[i])."""
    m = a.shape[1]
    for i in range(a.shape[0]):
        sincos_row(a[i], scale, out[i, :m], out[i, m:])


def _feature_sums(chi2):
    """The compiled ``out[i, k] = sum_f term(X[i, f], landmarks_t[f, k])``, summed over f in order (no BLAS:
    the same for any row blocks); the inner loop runs over landmarks, contiguous, and vectorizes.

    One loop nest for both distances: ``chi2`` is a closure constant, so numba compiles it in and
    LLVM drops the other term; a term chosen at run time, by an argument, is what kept the cos
    kernels' loops scalar (see the module docstring). It is a bool, whose bytes key numba's disk cache.
    """

    def distances(X, landmarks_t, out):
        n, d = X.shape
        m = landmarks_t.shape[1]
        for i in range(n):
            row = out[i]
            for k in range(m):
                row[k] = 0.0
            for f in range(d):
                x = np.float64(X[i, f])
                lf = landmarks_t[f]
                for k in range(m):
                    y = lf[k]
                    if chi2:
                        nom = x + y
                        diff = x - y
                        row[k] += diff * diff / nom if nom != 0.0 else 0.0
                    else:
                        row[k] += abs(x - y)
            if chi2:
                for k in range(m):
                    row[k] = -row[k]

    return jit(distances)


#: out[i, k] = sum_f |X[i, f] - landmarks_t[f, k]|: scikit-learn's manhattan distances
l1_distances = _feature_sums(chi2=False)
#: out[i, k] = -sum_f (x_f - l_f)^2 / (x_f + l_f) over terms with x_f + l_f != 0, summed over f in order
#: as scikit-learn's ``_chi2_kernel_fast`` does (its additive_chi2_kernel)
chi2_distances = _feature_sums(chi2=True)


@jit
def rbf_exponents(D, row_norms, landmark_norms, gamma, out):
    """out = -gamma * max(-2 D + |x|^2 + |l|^2, 0), the argument of scikit-learn's rbf exp.

    The same IEEE operations in scikit-learn's order (-2 D, then + |x|^2, then + |l|^2, then the
    cast to ``out``'s dtype, the clip at 0 and the scale in it), fused in one pass instead of six
    over the slice: the bits are scikit-learn's. ``out`` may be ``D`` (float64).
    """
    n, m = D.shape
    neg_gamma = out.dtype.type(-gamma)
    zero = out.dtype.type(0.0)
    for i in range(n):
        xn = row_norms[i]
        src, dst = D[i], out[i]
        for j in range(m):
            t = out.dtype.type((src[j] * -2.0 + xn) + landmark_norms[j])
            dst[j] = (zero if t < zero else t) * neg_gamma  # NaN passes, as np.maximum's


@jit
def affine_rows(a, gamma, coef0, out):
    """out = a * gamma + coef0: scikit-learn's ``K *= gamma; K += coef0`` (two roundings, no fused
    multiply-add: the same bits) in one pass; ``out`` may be ``a``."""
    n, m = a.shape
    for i in range(n):
        src, dst = a[i], out[i]
        for j in range(m):
            dst[j] = src[j] * gamma + coef0


@jit
def power_rows(a, gamma, coef0, degree, out):
    """out = (a * gamma + coef0) ** degree for an integer ``degree`` >= 1, by repeated squaring.

    The base is scikit-learn's bits (see :func:`affine_rows`); the power is products of it
    (within a few ulp of ``pow``'s, and the same sign and the same overflow to inf for negative
    bases), each a pass over one row while it is in L1: plain products vectorize, ``pow`` does
    not. ``out`` may be ``a``.
    """
    n, m = a.shape
    base = np.empty(m)
    for i in range(n):
        src, dst = a[i], out[i]
        for j in range(m):
            base[j] = src[j] * gamma + coef0
        e = degree
        started = False
        while True:
            if e & 1:
                if started:
                    for j in range(m):
                        dst[j] *= base[j]
                else:
                    dst[:] = base
                    started = True
            e >>= 1
            if e == 0:
                break
            for j in range(m):
                base[j] *= base[j]


@jit
def binning_rows(block, shifts, pitches, multipliers, increments, width, scale, columns, values):
    """Random binning's cells, hashed: :func:`dkapprox.random_features.binning.binning_features`' grid loop.

    For each row and grid: cell = floor((x - shift) / pitch) per feature in the data's dtype,
    cast to int64 and taken as uint64, times the grid's odd multipliers and summed modulo 2**64
    (in any order: integer addition is exact), plus the increment, through MurmurHash3's
    finalizer; the high 32 bits pick the column, the low bit the sign of ``scale``. The same
    IEEE and integer operations as the NumPy loop, so the same bits, in one pass over each row
    (NumPy's makes eight over the whole block per grid) that LLVM vectorizes over the features.
    """
    n, d = block.shape
    n_grids = shifts.shape[0]
    for i in range(n):
        row = block[i]
        for g in range(n_grids):
            shift, pitch, mult = shifts[g], pitches[g], multipliers[g]
            h = np.uint64(0)
            for f in range(d):
                cell = np.int64(np.floor((row[f] - shift[f]) / pitch[f]))
                h += np.uint64(cell) * mult[f]
            h += increments[g]
            h ^= h >> _S33
            h *= _FMIX1
            h ^= h >> _S33
            h *= _FMIX2
            h ^= h >> _S33
            columns[i, g] = ((h >> _S32) * width) >> _S32
            values[i, g] = scale if (h & _ONE) == _ONE else -scale
