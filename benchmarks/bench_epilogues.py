"""Compiled epilogues of Nystroem's polynomial and sigmoid kernels, and where two other block functions spend time.

One run, with interleaved repeats (medians), one BLAS thread:

- ``epilogue_table``: ns per element of the elementwise step after ``K = X @ L.T`` on the same
  (10000, 1024) float64 product: scikit-learn's steps (``K *= gamma; K += coef0; K **= degree``
  or ``np.tanh``) against the compiled pass (``dkapprox.backends._jit_kernels``), and for the sigmoid a
  compiled tanh (an expm1 built from vectorizable operations, not shipped) against ``np.tanh``;
  then float64 ``Nystroem(1024, kernel='poly')`` and ``'sigmoid'`` transforms of N x 64 in row
  blocks on dask's threaded scheduler (2 workers): compiled, ``DKAPPROX_JIT=0`` and
  scikit-learn's ``Nystroem.transform`` in ``map_blocks``.
- ``profile_table``: one float64 block (N x 64, n_components 1024, default parameters) of
  RandomBinningFeatures and of PolynomialCountSketch, timed line by line, each line sorted into
  elementwise work (binning, hashing, the count-sketch accumulation) or the rest (FFT, BLAS,
  sparse assembly and indexing). Issue 15 compiles such work where it takes >= 30% of a block.

    python benchmarks/bench_epilogues.py [--rows 100000] [--block-rows 10000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import inspect
import math
import statistics
import sys
import time
from collections import defaultdict

import dask.array as da
import numba
import numpy as np
from _common import consume, interleaved, jit, print_table
from threadpoolctl import threadpool_limits

import dkapprox
from dkapprox.backends import _jit
from dkapprox.kernel_approximation.polynomial_count_sketch import count_sketch_features
from dkapprox.random_features.binning import _numpy_cells, binning_features

# -- the epilogues alone ------------------------------------------------------------------------

_LN2_HI, _LN2_LO, _INVLN2 = 6.93147180369123816490e-01, 1.90821492927058770002e-10, 1.44269504088896338700e+00
_TOINT = 6755399441055744.0
_C = [1.0 / math.factorial(n) for n in range(2, 15)]
_C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11, _C12, _C13, _C14 = _C


@numba.njit(nogil=True, fastmath=False, error_model="numpy")
def expm1_tanh_rows(a, gamma, coef0, out):
    """out = tanh(a gamma + coef0) as expm1(2|x|) / (expm1(2|x|) + 2), branch-free so LLVM vectorizes.

    expm1(y), y = 2|x| clamped at 40 (tanh(20) rounds to 1): y = k ln2 + r, |r| <= ln2 / 2, with
    Taylor to r^14 for expm1(r), 2^k built from k's bits by multiplication (no integer bit casts),
    then 2^k (1 + p) - 1. Within 3 ulp of ``np.tanh`` (checked by :func:`tanh_candidate_ulps`).
    The candidate that lost to NumPy's SIMD tanh on AVX-512: measured here, not shipped.
    """
    n, m = a.shape
    for i in range(n):
        src, dst = a[i], out[i]
        for j in range(m):
            x = src[j] * gamma + coef0
            ax = abs(x)
            y = 2.0 * ax if ax < 20.0 else 40.0
            k = (y * _INVLN2 + _TOINT) - _TOINT
            r = (y - k * _LN2_HI) - k * _LN2_LO
            p = r + r * r * (_C2 + r * (_C3 + r * (_C4 + r * (_C5 + r * (_C6 + r * (_C7 + r * (
                _C8 + r * (_C9 + r * (_C10 + r * (_C11 + r * (_C12 + r * (_C13 + r * _C14))))))))))))
            # 2^k, k <= 58, from k's bits (a loop over them here, even over a constant tuple, kept LLVM scalar)
            h = math.floor(0.5 * k)
            scale = 2.0 if k - 2.0 * h == 1.0 else 1.0
            b = math.floor(0.5 * h)
            scale *= 4.0 if h - 2.0 * b == 1.0 else 1.0
            h = math.floor(0.5 * b)
            scale *= 16.0 if b - 2.0 * h == 1.0 else 1.0
            b = math.floor(0.5 * h)
            scale *= 256.0 if h - 2.0 * b == 1.0 else 1.0
            h = math.floor(0.5 * b)
            scale *= 65536.0 if b - 2.0 * h == 1.0 else 1.0
            scale *= 4294967296.0 if h == 1.0 else 1.0
            e = scale * p + (scale - 1.0) if k != 0.0 else p
            t = math.copysign(e / (e + 2.0), x)
            dst[j] = t if x == x else x


def tanh_candidate_ulps():
    """Largest distance in ulp of :func:`expm1_tanh_rows` from ``np.tanh``, over 1e-300 .. 30 and both signs."""
    x = np.geomspace(1e-300, 30, 200_000)
    x = np.concatenate([x, -x, [0.0, -0.0]])[None, :]
    got = np.empty_like(x)
    expm1_tanh_rows(x, 1.0, 0.0, got)
    expected = np.tanh(x)
    return float((np.abs(got - expected) / np.spacing(np.abs(expected))).max())


def _epilogues(k, gamma, coef0):
    """{name: fn(work)}: scikit-learn's steps and the compiled ones, each in place on ``work``."""

    def sklearn_power(degree):
        def run(K):
            K *= gamma
            K += coef0
            K **= degree
        return run

    def sklearn_tanh(K):
        K *= gamma
        K += coef0
        np.tanh(K, out=K)

    def compiled_affine_then(ufunc, *args):
        def run(K):
            k.affine_rows(K, gamma, coef0, K)
            ufunc(K, *args, out=K)
        return run

    return {
        "poly degree 3: scikit-learn": sklearn_power(3),
        "poly degree 3: compiled": lambda K: k.power_rows(K, gamma, coef0, 3, K),
        "poly degree 2: scikit-learn": sklearn_power(2),
        "poly degree 2: compiled": lambda K: k.power_rows(K, gamma, coef0, 2, K),
        "poly degree 5: scikit-learn": sklearn_power(5),
        "poly degree 5: compiled": lambda K: k.power_rows(K, gamma, coef0, 5, K),
        "poly degree 2.5: scikit-learn": sklearn_power(2.5),
        "poly degree 2.5: compiled affine + np.power": compiled_affine_then(np.power, 2.5),
        "sigmoid: scikit-learn": sklearn_tanh,
        "sigmoid: compiled affine + np.tanh (shipped)": compiled_affine_then(np.tanh),
        "np.tanh alone": lambda K: np.tanh(K, out=K),
        "np.exp alone": lambda K: np.exp(K, out=K),
    }


def epilogue_ns(repeats):
    """ns per element of each epilogue on the product of (10000, 64) rows and 1024 landmarks.

    Each run copies the product into a work array first (the epilogues are in place); the copy's
    own time is measured alike and subtracted. The compiled tanh candidate reads the product and
    writes the work array instead, the copy's traffic: its time less the copy's is its epilogue too.
    """
    k = _jit._kernels("affine_rows", "power_rows")
    rng = np.random.default_rng(0)
    X, landmarks = rng.random((10_000, 64)), rng.random((1024, 64))
    with threadpool_limits(1):
        product = X @ landmarks.T
    work = np.empty_like(product)
    expm1_tanh_rows(product[:1], 1.0, 0.0, work[:1])  # compile outside the timing

    def with_copy(fn):
        def run():
            np.copyto(work, product)
            fn(work)
        return run

    fns = {name: with_copy(fn) for name, fn in _epilogues(k, 1.0 / 64, 1.0).items()}
    # out of place, from the product (the copy's traffic): in place, aliasing keeps this loop scalar (16.5 ns)
    fns["sigmoid: compiled expm1 tanh, one pass (not shipped)"] = lambda: expm1_tanh_rows(product, 1.0 / 64, 1.0, work)
    fns["copy alone"] = lambda: np.copyto(work, product)
    with threadpool_limits(1):
        t = interleaved(fns, repeats)
    copy = t.pop("copy alone")
    print(f"copy of the product: {copy / product.size * 1e9:.2f} ns/element (subtracted below); compiled tanh "
          f"within {tanh_candidate_ulps():.0f} ulp of np.tanh")
    print_table("ns per element of the epilogue on a (10000, 1024) float64 product, one thread",
                ["epilogue", "ns/element"], [[name, (s - copy) / product.size * 1e9] for name, s in t.items()])


# -- Nystroem transforms ---------------------------------------------------------------------------

def nystroem_transforms(rows, block_rows, repeats):
    """float64 Nystroem(1024) poly and sigmoid transforms, threaded (2 workers, one BLAS thread each)."""
    from sklearn.kernel_approximation import Nystroem as SkNystroem

    Xd = da.random.default_rng(1).random((rows, 64), chunks=(block_rows, 64))
    X = Xd[:20_000].compute()
    found = []
    for kernel in ("poly", "sigmoid"):
        ours = dkapprox.Nystroem(kernel=kernel, n_components=1024, random_state=0).fit(X)
        theirs = SkNystroem(kernel=kernel, n_components=1024, random_state=0).fit(X)

        def run(Z, on=True):
            def go():
                with jit(on), threadpool_limits(1, user_api="blas"):
                    consume(Z, scheduler="threads", num_workers=2)
            return go

        t = interleaved({"dkapprox compiled": run(ours.transform(Xd)),
                         "dkapprox DKAPPROX_JIT=0": run(ours.transform(Xd), False),
                         "scikit-learn map_blocks": run(Xd.map_blocks(theirs.transform, chunks=(Xd.chunks[0], (1024,)),
                                                                      dtype=np.float64))}, repeats)
        found += [[kernel, name, s, rows / s, t["scikit-learn map_blocks"] / s, t["dkapprox DKAPPROX_JIT=0"] / s]
                  for name, s in t.items()]
    print_table(f"float64 Nystroem(1024) on {rows:,} x 64, blocks of {block_rows:,} rows, threaded (2 workers)",
                ["kernel", "run", "seconds", "rows/s", "x scikit-learn", "x JIT=0"], found)


def epilogue_table(rows, block_rows, repeats):
    """The epilogues alone (ns per element), then whole Nystroem transforms."""
    epilogue_ns(repeats)
    nystroem_transforms(rows, block_rows, repeats)


# -- profiles of two block functions -------------------------------------------------------------

def line_seconds(fns, *args):
    """{(function, line number): seconds} of one call ``fns[0](*args)``, timing the lines of every function in
    ``fns`` (from each line event to the next: a line's calls count to it, except into another traced
    function, whose lines count themselves); the tracer's own time is left out."""
    codes = {fn.__code__: fn for fn in fns}
    seconds = defaultdict(float)
    last = {"line": None, "at": 0.0}

    def local(frame, event, arg):
        now = time.perf_counter()
        if last["line"] is not None:
            seconds[last["line"]] += now - last["at"]
        last["line"] = (codes[frame.f_code], frame.f_lineno) if event == "line" else None
        last["at"] = time.perf_counter()
        return local

    sys.settrace(lambda frame, event, arg: local if frame.f_code in codes else None)
    try:
        fns[0](*args)
    finally:
        sys.settrace(None)
    return seconds


#: (words in a line, what its time counts as), first match; lines that match none are "other"
_BINNING_STEPS = [("block - state.shifts", "elementwise: binning"), ("scaled /=", "elementwise: binning"),
                  ("np.floor", "elementwise: binning"), ("cells *=", "elementwise: hashing"),
                  ("cells.sum", "elementwise: hashing"), ("h +=", "elementwise: hashing"),
                  ("_fmix64", "elementwise: hashing"), ("columns[:, g]", "elementwise: hashing"),
                  ("values[:, g]", "elementwise: hashing"), ("csr_matrix", "sparse assembly (indexing)"),
                  ("sum_duplicates", "sparse assembly (indexing)"), ("np.empty", "allocation"),
                  ("_jit.binning_cells", "elementwise, compiled: binning and hashing")]
_SKETCH_STEPS = [("rows * ", "elementwise: scale by sqrt(gamma)"), ("hstack", "elementwise: coef0 column"),
                 ("xg @ sketch", "elementwise: count-sketch accumulation (scipy dense @ csc)"),
                 ("toarray", "indexing"), ("rfft(counts", "FFT"), ("np.multiply", "elementwise: spectra product"),
                 ("irfft", "FFT (inverse) and the write into out"), ("np.empty", "allocation")]


def profile_block(fns, block, state, steps, repeats):
    """Rows of (line, category, median seconds, share) for one block by ``fns[0]`` (its helpers ``fns[1:]``
    timed line by line too), the seconds by category, the total and the elementwise share."""
    sources = {fn: inspect.getsourcelines(fn) for fn in fns}
    with threadpool_limits(1):
        runs = [line_seconds(fns, block, state) for _ in range(repeats)]
    lines = sorted(set().union(*runs), key=lambda key: (fns.index(key[0]), key[1]))
    median = {key: statistics.median(run.get(key, 0.0) for run in runs) for key in lines}
    total = sum(median.values())
    rows, by_category = [], defaultdict(float)
    for fn, n in lines:
        source, first = sources[fn]
        text = source[n - first].strip()
        category = next((c for words, c in steps if words in text), "other")
        by_category[category] += median[fn, n]
        if median[fn, n] >= 0.005 * total:
            rows.append([text[:70], category, median[fn, n], median[fn, n] / total])
    elementwise = sum(s for c, s in by_category.items() if c.startswith("elementwise")) / total
    return rows, by_category, total, elementwise


def profile_table(rows=100_000, repeats=3):
    """Where one float64 block's time goes, n_components 1024, default parameters: RandomBinningFeatures on
    its NumPy path (``DKAPPROX_JIT=0``, what issue 15 measures) and compiled, and PolynomialCountSketch."""
    X = np.random.default_rng(2).random((rows, 64))
    binning = dkapprox.RandomBinningFeatures(n_components=1024, random_state=0)
    sketch = dkapprox.PolynomialCountSketch(n_components=1024, random_state=0)
    binning_fns = [binning_features, _numpy_cells]
    cases = [("RandomBinningFeatures, DKAPPROX_JIT=0", binning, binning_fns, _BINNING_STEPS, False),
             ("RandomBinningFeatures, compiled", binning, binning_fns, _BINNING_STEPS, True),
             ("PolynomialCountSketch", sketch, [count_sketch_features], _SKETCH_STEPS, True)]
    for name, est, fns, steps, on in cases:
        est.fit(X[:1000])
        with jit(on):
            fns[0](X[:2000], est._state(X.dtype))  # the kernels loaded outside the timing
            lines, by_category, total, elementwise = profile_block(fns, X, est._state(X.dtype), steps, repeats)
        print_table(f"{name}: one {rows:,} x 64 float64 block, {total:.3f} s (median of {repeats}, one thread), "
                    f"line by line", ["line", "counts as", "seconds", "share"], lines)
        print_table(f"{name}: by kind; elementwise {elementwise:.0%} of the block", ["kind", "seconds", "share"],
                    [[c, s, s / total] for c, s in sorted(by_category.items(), key=lambda kv: -kv[1])])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--block-rows", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=["epilogues", "profiles"], default=None)
    args = parser.parse_args()
    if args.only != "profiles":
        epilogue_table(args.rows, args.block_rows, args.repeats)
    if args.only != "epilogues":
        profile_table(args.rows, args.repeats)


if __name__ == "__main__":
    main()
