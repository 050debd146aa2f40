"""CUDA kernels for CuPy blocks: fused elementwise maps, one read and one write of each value.

Imported only where a block is a CuPy array (``dkapprox.backends._xp.is_cupy``); each kernel is compiled
once per process on first use (CuPy caches the binary on disk, so a later process only loads it).

- ``cos_offset``: ``scale cos(p + b)`` in place of the product ``p = X W`` (RBFSampler,
  SkewedChi2Sampler, RandomFourierFeatures); ``cos_sin``: the paired ``scale [cos p, sin p]``.
  The array-API form (add, cos, scale) made three passes over a block-sized product. A product
  fused with the cosine in one register-tiled kernel was slower than cuBLAS's product with this
  pass after it, so this stays (docs/gpu.md; benchmarks/bench_gpu.py measures both).
- ``rbf``: Nystroem's rbf kernel from the float64 inner products, scikit-learn's arithmetic.

``cos``, ``sin`` and ``exp`` of a float are CUDA's single-precision functions (2 ulp), not the
fast-math intrinsics; the rounding bound (docs/precision.md) allows a few units.
"""

from __future__ import annotations

_ELEMENTWISE = {
    "cos_offset": ("T p, T b, T s", "T out", "out = cos(p + b) * s"),
    "cos_sin": ("T p, T s, int64 n", "raw T out",
                "ptrdiff_t r = i / n, c = i - r * n; out[r * 2 * n + c] = cos(p) * s; "
                "out[r * 2 * n + n + c] = sin(p) * s"),
    # scikit-learn's rbf arithmetic: D = -2 x.y + |x|^2 + |y|^2 in float64, cast to the output
    # dtype, clipped at 0, then exp(-gamma D) in that dtype
    "rbf": ("float64 ip, float64 xx, float64 yy, T g", "T k",
            "T d = (T)(-2.0 * ip + xx + yy); if (d < (T)0) d = (T)0; k = exp(-g * d)"),
}

_compiled: dict = {}


def elementwise(name):
    """The fused elementwise kernel ``name`` (:data:`_ELEMENTWISE`), compiled once per process."""
    found = _compiled.get(name)
    if found is None:
        import cupy

        found = _compiled[name] = cupy.ElementwiseKernel(*_ELEMENTWISE[name], name=f"dkapprox_{name}")
    return found
