"""Array namespaces: NumPy blocks stay on NumPy's path; any other array-API array keeps its own.

A block function asks :func:`namespace` about its block. ``None`` means NumPy (or
scipy.sparse): the NumPy path runs, compiled kernels and all, exactly as before. Anything
else (a CuPy array on a GPU, an array-api-strict array in the tests) gets its namespace
from array-api-compat, the library scikit-learn's own array-API support uses, and the
block function computes with that namespace only: ``xp.cos``, ``xp.fft.rfft``, ``@``.

The fitted state is drawn and kept in NumPy on the driver and shipped once (one graph
key). :func:`state_on` copies it to the block's namespace and device the first time a
process sees it there, and returns that same copy for every later block: a worker
deserializes the shipped state once, so it copies it to its GPU once, never per task.
Sparse parts of a state (a count sketch, a sparse projection) become dense on a device:
the array API has no sparse arrays, and a dense product is what a GPU does fast.

Neither array-api-compat (the ``gpu`` extra brings it) nor CuPy is imported for NumPy input.

>>> import numpy as np
>>> namespace(np.ones((2, 2))) is None
True
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import sys
import threading
import weakref

import numpy as np
import scipy.sparse as sp

#: How many states (or parts of them) this process has copied to a namespace/device.
#: The tests read it: the state reaches a worker's device once, whatever the number of blocks.
copies = {"count": 0}

_cache: dict = {}
_lock = threading.Lock()


def namespace(x):
    """The array-API namespace of ``x``, or None for NumPy, scipy.sparse and what NumPy takes."""
    if isinstance(x, np.ndarray) or sp.issparse(x) or np.isscalar(x) or x is None:
        return None
    module = type(x).__module__.partition(".")[0]
    if module in ("numpy", "scipy", "pandas", "builtins", "dask", "xarray", "zarr"):
        return None
    try:
        import array_api_compat
    except ImportError:  # the gpu extra brings it; without it, the standard's own method
        get = getattr(x, "__array_namespace__", None)
        return None if get is None else get()
    if not array_api_compat.is_array_api_obj(x) or array_api_compat.is_numpy_array(x):
        return None
    return array_api_compat.array_namespace(x)


def device_of(x):
    try:
        import array_api_compat
    except ImportError:
        return x.device
    return array_api_compat.device(x)


def numpy_dtype(x) -> np.dtype:
    """``x.dtype`` as a NumPy dtype (CuPy's already are; array-api-strict's are its own objects)."""
    dtype = x.dtype
    if isinstance(dtype, np.dtype):
        return dtype
    xp = namespace(x)
    for name in ("float64", "float32", "float16", "int64", "int32", "int16", "int8",
                 "uint64", "uint32", "uint16", "uint8", "bool", "complex64", "complex128"):
        if getattr(xp, name, None) == dtype:
            return np.dtype(name)
    raise TypeError(f"dtype {dtype} has no NumPy equivalent")


def is_floating(x) -> bool:
    return numpy_dtype(x).kind == "f"


def to_numpy(x):
    """A NumPy copy of an array of any namespace (CuPy: ``.get()``; others: through their CPU device)."""
    if namespace(x) is None:
        return x
    if hasattr(x, "get") and type(x).__module__.startswith("cupy"):
        return x.get()
    try:
        return np.asarray(x)
    except (TypeError, ValueError, RuntimeError):
        # array-api-strict refuses NumPy conversion off its CPU device, as CuPy refuses it on a GPU
        xp = namespace(x)
        cpu = getattr(xp, "Device", None)
        return np.asarray(x.to_device(cpu("CPU_DEVICE") if cpu else "cpu"))


def truth_later(flag):
    """A function giving ``bool(flag)`` (a 0-d device array) without waiting for work queued after now.

    CuPy: the flag is copied to pinned host memory without blocking and an event recorded
    behind the copy; the function waits for that event only, so kernels queued after this call
    keep the device busy meanwhile. ``bool(flag)`` would wait for the whole stream. Other
    namespaces: the value now.
    """
    if type(flag).__module__.startswith("cupy"):
        import cupy
        import cupyx

        host = cupyx.empty_pinned((), dtype=np.bool_)
        flag.get(out=host, blocking=False)
        done = cupy.cuda.get_current_stream().record()

        def value():
            done.synchronize()
            return bool(host[()])

        return value
    value = bool(flag)
    return lambda: value


def state_on(state, like):
    """``state`` with every NumPy and scipy.sparse array in it on ``like``'s namespace and device.

    Cached per process, by the state object's identity, namespace and device: the first block
    a worker sees on a device pays the copy, every later block reuses it. The cache entry goes
    when the state object does (it is the shipped key's value, freed with the graph).
    """
    xp = namespace(like)
    device = device_of(like)
    key = (id(state), xp.__name__, str(device))
    found = _cache.get(key)
    if found is not None:
        return found
    with _lock:
        found = _cache.get(key)
        if found is None:
            found = _convert(state, xp, device)
            _cache[key] = found
            weakref.finalize(state, _cache.pop, key, None)
            copies["count"] += 1
    return found


def _convert(obj, xp, device):
    if isinstance(obj, np.ndarray):
        return xp.asarray(np.ascontiguousarray(obj), device=device)
    if sp.issparse(obj):
        return xp.asarray(obj.toarray(), device=device)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        clone = object.__new__(type(obj))
        if hasattr(obj, "__dict__"):
            clone.__dict__.update(obj.__dict__)
        for f in dataclasses.fields(obj):
            object.__setattr__(clone, f.name, _convert(getattr(obj, f.name), xp, device))
        return clone
    if type(obj) in (list, tuple):
        return type(obj)(_convert(item, xp, device) for item in obj)
    return obj


_fit_on = contextvars.ContextVar("dkapprox_fit_on", default=(None, None))


@contextlib.contextmanager
def fitting_on(X):
    """Within it, :func:`fit_namespace` and :func:`fit_device` name where ``X``'s data lives.

    ``X`` a device array, or a dask array whose chunks are (its meta is one): the fit's
    driver-side linear algebra (Nystroem's eigendecomposition) may run there. NumPy, sparse
    and dask-of-NumPy input: None, the host.
    """
    like = X._meta if type(X).__module__.startswith("dask") and hasattr(X, "_meta") else X
    xp = namespace(like)
    token = _fit_on.set((xp, None if xp is None else device_of(like)))
    try:
        yield
    finally:
        _fit_on.reset(token)


def fit_namespace():
    return _fit_on.get()[0]


def fit_device():
    return _fit_on.get()[1]


def cupy_loaded() -> bool:
    """Whether CuPy was imported by anyone (dkapprox never imports it for NumPy data)."""
    return "cupy" in sys.modules


def is_cupy(xp) -> bool:
    """Whether ``xp`` is CuPy's namespace (array-api-compat's wrapper or CuPy itself)."""
    return xp is not None and xp.__name__ in ("cupy", "array_api_compat.cupy")


def matmul_into(xp, a, b, out):
    """``out[...] = a @ b``: on CuPy the product is written into ``out`` (no block-sized temporary)."""
    if is_cupy(xp):
        import cupy

        cupy.matmul(a, b, out=out)
    else:
        out[...] = a @ b
    return out


def cupy_kernel(name):
    """A fused elementwise kernel for CuPy blocks (:mod:`dkapprox.backends._xp_cuda`), compiled once per process."""
    from . import _xp_cuda

    return _xp_cuda.elementwise(name)


def fourier(xp, product, offset, scale):
    """``scale cos(product + offset)``, or ``scale [cos, sin](product)`` where ``offset`` is None.

    The array-API twin of :func:`dkapprox.backends._jit.fourier_map`'s NumPy path, for blocks of
    another namespace (the NumPy path stays NumPy's, compiled kernels and all). On CuPy
    one fused kernel does it (:mod:`dkapprox.backends._xp_cuda`), in place for ``cos(product + offset)``.
    """
    if is_cupy(xp):
        s = numpy_dtype(product).type(scale)
        if offset is not None:
            return cupy_kernel("cos_offset")(product, offset[None, :], s, product)
        out = xp.empty((product.shape[0], 2 * product.shape[1]), dtype=product.dtype, device=device_of(product))
        cupy_kernel("cos_sin")(product, s, product.shape[1], out)
        return out
    if offset is not None:
        out = xp.cos(product + offset)
    else:
        out = xp.concat([xp.cos(product), xp.sin(product)], axis=1)
    out *= xp.asarray(scale, dtype=out.dtype, device=device_of(out))
    return out


def require_cuda():
    """CuPy, importable here and seeing a GPU; else an error naming what is missing (exit 69 on the CLI)."""
    from ..errors import DeviceUnavailableError, MissingPackageError

    try:
        import cupy
    except ImportError as exc:
        raise MissingPackageError(
            f"--device cuda needs CuPy, which is not installed here ({exc}): pip install "
            "'dkapprox[gpu-cuda13]' or 'dkapprox[gpu-cuda12]' (CuPy for your CUDA major version, dask-cuda), "
            "or run without --device to compute on the CPU", package="cupy") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CuPy's CUDARuntimeError, or a missing driver library
        raise DeviceUnavailableError(f"--device cuda: CuPy is installed but finds no usable GPU ({exc}); "
                                     "run without --device to compute on the CPU") from None
    if count < 1:
        raise DeviceUnavailableError("--device cuda: CuPy is installed but finds no GPU (CUDA_VISIBLE_DEVICES?); "
                                     "run without --device to compute on the CPU")
    return cupy


def cuda_blocks(X):
    """A dask array of NumPy blocks as one of CuPy blocks: each block copied to its worker's GPU in its task."""
    cupy = require_cuda()
    return X.map_blocks(_to_cupy, dtype=X.dtype, meta=cupy.empty((0,) * X.ndim, dtype=X.dtype))


def host_blocks(Z):
    """A dask array of CuPy blocks as one of NumPy blocks (the copy back, for writing)."""
    return Z.map_blocks(_to_numpy_block, dtype=Z.dtype, meta=np.empty((0,) * Z.ndim, dtype=Z.dtype))


def _to_cupy(block):
    import cupy

    return cupy.asarray(block)


def _to_numpy_block(block):
    return to_numpy(block)
