"""Kernels every family shares: scikit-learn's pairwise kernels, their diagonals, and their slices.

Every kernel value comes from :func:`sklearn.metrics.pairwise.pairwise_kernels`
(we do not write kernels again: on a device, :mod:`._device` says why it must);
this module only freezes the parameters the
way scikit-learn's ``Nystroem`` gathers them (without writing into the user's
``kernel_params`` dict, which scikit-learn 1.9 does) and adds the diagonal
``k(x, x)`` that ridge leverage scores need.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import KERNEL_PARAMS, pairwise_kernels
from sklearn.utils.extmath import row_norms

from .. import backends

PRECOMPUTED = "precomputed"


def is_precomputed(metric) -> bool:
    return isinstance(metric, str) and metric == PRECOMPUTED


def kernel_params(estimator) -> dict:
    """The keyword arguments scikit-learn's Nystroem passes to the kernel (a fresh dict).

    ``gamma``, ``coef0`` and ``degree`` are added when set and when the named
    kernel takes them; with a callable or precomputed kernel they must be
    None (scikit-learn's error). The user's ``kernel_params`` is copied, never
    written to.
    """
    params = dict(estimator.kernel_params or {})
    metric = estimator.kernel
    if not callable(metric) and not is_precomputed(metric):
        for name in KERNEL_PARAMS[metric]:
            if getattr(estimator, name) is not None:
                params[name] = getattr(estimator, name)
    elif estimator.gamma is not None or estimator.coef0 is not None or estimator.degree is not None:
        raise ValueError(
            "Don't pass gamma, coef0 or degree to Nystroem if using a callable or precomputed kernel"
        )
    return params


#: Kernels whose scikit-learn loop (``_chi2_kernel_fast``, 1.9) takes writable memoryviews and
#: raises "buffer source array is read-only" on read-only arrays: blocks from a dask dataframe,
#: from a read-only NumPy array, or a state deserialized on a worker.
WRITABLE_ONLY = ("chi2", "additive_chi2")


def _writable(a):
    """``a``, or a copy of it where it is a read-only dense array (a slice of rows: small)."""
    return a.copy() if isinstance(a, np.ndarray) and not a.flags.writeable else a


#: scikit-learn's sparse manhattan loop (``_sparse_manhattan``, 1.9: the laplacian kernel on sparse
#: input) takes int32 indices only and raises "Buffer dtype mismatch" on int64 ones, which scipy
#: keeps for a ``csr_array`` built with them (and for a matrix too large for int32 sliced down).
INT32_MAX = np.iinfo(np.int32).max


def _int32_indices(a):
    """A sparse ``a`` with int32 indices and indptr where they fit (a new matrix sharing ``a``'s data)."""
    if not sp.issparse(a) or a.format != "csr" or a.indices.dtype == np.int32:
        return a
    if a.nnz > INT32_MAX or a.shape[1] > INT32_MAX:
        return a  # no int32 form: scikit-learn says so
    return type(a)((a.data, a.indices.astype(np.int32), a.indptr.astype(np.int32)), shape=a.shape)


@dataclass(frozen=True, eq=False)
class Kernel:
    """A kernel with frozen parameters, evaluated by scikit-learn.

    ``metric`` is a name from ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS``,
    ``'precomputed'`` or a callable; ``params`` are (name, value) pairs.
    For ``'precomputed'`` the landmarks are *column indices*: the kernel
    between a block of rows of the precomputed matrix and the landmarks is
    the block's landmark columns.
    """

    metric: object
    params: tuple = ()

    @classmethod
    def of(cls, estimator) -> Kernel:
        return cls(estimator.kernel, tuple(sorted(kernel_params(estimator).items())))

    @property
    def precomputed(self) -> bool:
        return is_precomputed(self.metric)

    def between(self, X, landmarks, n_jobs=None):
        """Dense kernel matrix k(X, landmarks) of shape (n_rows, n_landmarks)."""
        if self.precomputed:
            K = X[:, landmarks]
        else:
            if isinstance(self.metric, str) and self.metric in WRITABLE_ONLY:
                X, landmarks = _writable(X), _writable(landmarks)
            X, landmarks = _int32_indices(X), _int32_indices(landmarks)
            K = pairwise_kernels(X, landmarks, metric=self.metric, filter_params=True,
                                 n_jobs=n_jobs, **dict(self.params))
        return K.toarray() if sp.issparse(K) else np.asarray(K)

    def diagonal(self, X):
        """k(x, x) for every row x of X, in float64."""
        if self.precomputed:
            raise ValueError("the diagonal of a precomputed kernel needs global row indices")
        params = dict(self.params)
        name = self.metric if isinstance(self.metric, str) else None
        n, d = X.shape
        if name in ("rbf", "laplacian", "chi2"):  # exp(-gamma * 0)
            return np.ones(n)
        if name == "additive_chi2":  # -sum (x - x)^2 / (x + x)
            return np.zeros(n)
        if name in ("linear", "polynomial", "poly", "sigmoid", "cosine"):
            sq = np.asarray(row_norms(X, squared=True), dtype=np.float64)
            if name == "linear":
                return sq
            if name == "cosine":  # scikit-learn normalizes zero rows to zero
                return (sq > 0).astype(np.float64)
            gamma = params.get("gamma")
            gamma = 1.0 / d if gamma is None else gamma
            inner = gamma * sq + params.get("coef0", 1)
            return np.tanh(inner) if name == "sigmoid" else inner ** params.get("degree", 3)
        # a callable: one scikit-learn evaluation per row
        return np.array([self.between(X[i : i + 1], X[i : i + 1])[0, 0] for i in range(n)],
                        dtype=np.float64)


#: Temporaries hold at most about this many values per slice of rows (8 MiB of
#: float64): slice_rows * max(n_landmarks, n_features) <= SLICE_ELEMENTS.
SLICE_ELEMENTS = 2**20
#: ... and, in blocks of more than 64 * 512 rows, about 1/64 of the block's rows, so that they
#: stay a few percent of a large block's output. Slices have at least 512 rows where that fits:
#: the product with the normalization runs slower in thinner slices (docs/performance.md, "Slices").
SLICES_PER_BLOCK, MIN_SLICE_ROWS = 64, 512
#: On a device (CuPy) a slice may hold 64 times as many (512 MiB of float64): a GPU has the memory,
#: and each slice costs several kernel launches, which thin slices would multiply. A device block is
#: sliced by this alone, not into :data:`SLICES_PER_BLOCK` parts, whose launches the device would wait for
#: (docs/performance.md, "Slices"; benchmarks/bench_gpu.py measures it)
DEVICE_SLICE_ELEMENTS = 2**26


def row_slices(n_rows, width, elements=SLICE_ELEMENTS):
    """Consecutive row slices whose temporaries (rows x width) stay small beside the block."""
    step = min(elements // max(1, width), max(MIN_SLICE_ROWS, -(-n_rows // SLICES_PER_BLOCK)))
    step = max(1, step)
    return [slice(lo, min(lo + step, n_rows)) for lo in range(0, n_rows, step)]


def kernel_slices(kernel, landmarks, block, dtype, *, elements=SLICE_ELEMENTS, n_jobs=None):
    """``(s, k(block[s], landmarks))`` for consecutive row slices ``s`` of a NumPy or sparse block.

    Each kernel slice is in ``dtype`` and valid until the next one is made (the rbf kernel on dense
    blocks reuses one set of buffers, :class:`RBFSlices`); a slice holds about ``elements`` values.
    The kernels are those :func:`nystroem_features` documents: scikit-learn's arithmetic.
    """
    slices = row_slices(block.shape[0], max(landmarks.shape[0], block.shape[1]), elements)
    rbf = RBFSlices.of_kernel(kernel, landmarks, block, dtype, slices)
    compiled_t = _compiled_landmarks(kernel, landmarks, block)
    for s in slices:
        part = block[s]
        K = None
        if rbf is not None:
            K = rbf.kernel(part)
        elif compiled_t is not None:
            K = _compiled_kernel(kernel, part, compiled_t)
        if K is None:
            K = kernel.between(part, landmarks, n_jobs=n_jobs)
        yield s, K.astype(dtype, copy=False)


def _compiled_landmarks(kernel, landmarks, block):
    """The landmarks transposed, in float64, for a kernel :mod:`dkapprox.backends._jit` computes, or None.

    Contiguous for the distance loops; for the inner-product kernels the transposed view of
    C-ordered landmarks, so that their product is scikit-learn's ``X @ Y.T`` BLAS call.
    """
    metric = kernel.metric
    if not (isinstance(metric, str) and metric in _COMPILED) or sp.issparse(block) or sp.issparse(landmarks):
        return None
    landmarks_t = np.ascontiguousarray(landmarks, dtype=np.float64).T
    return landmarks_t if metric in backends.INNER_PRODUCT else np.ascontiguousarray(landmarks_t)


_COMPILED = ("laplacian", "chi2", "additive_chi2") + backends.INNER_PRODUCT


def _compiled_kernel(kernel, part, landmarks_t):
    """k(part, landmarks) by :mod:`dkapprox.backends._jit`, with scikit-learn's defaults, or None (its kernel then)."""
    metric, params = kernel.metric, dict(kernel.params)
    n_features = landmarks_t.shape[0]
    gamma = params.get("gamma")
    gamma = (1.0 if metric == "chi2" else 1.0 / n_features) if gamma is None else gamma
    if metric in backends.INNER_PRODUCT:
        return backends.inner_product_kernel(metric, part, landmarks_t, gamma, params.get("coef0", 1),
                                         params.get("degree", 3))
    return backends.pairwise_kernel(metric, part, landmarks_t, gamma)


class RBFSlices:
    """scikit-learn's ``rbf_kernel(part, landmarks)``, same arithmetic, into reused buffers.

    Why not call scikit-learn here: it allocates fresh float64 temporaries for
    every slice (for float32 data it upcasts chunks of X and Y), and dask's
    worker processes run with ``MALLOC_TRIM_THRESHOLD_=65536``, which makes
    every such allocation fresh memory from the kernel: reused buffers are
    faster than scikit-learn's kernel a slice, and unaffected by that malloc
    setting (docs/performance.md, "Slices"). The numbers are
    scikit-learn's: ``-2 x.y + |x|^2 + |y|^2`` in float64 (float32 data is
    upcast slice by slice, as scikit-learn upcasts it), cast to the data's
    dtype, clipped at 0, times -gamma, exponentiated in place.
    """

    def __init__(self, landmarks, gamma, dtype, rows):
        self.landmarks = np.asarray(landmarks, dtype=np.float64)
        self.landmark_norms = row_norms(self.landmarks, squared=True)[None, :]
        self.gamma = 1.0 / self.landmarks.shape[1] if gamma is None else gamma
        m, d = self.landmarks.shape
        self.upcast = np.empty((rows, d))
        self.distances = np.empty((rows, m))
        self.out = self.distances if np.dtype(dtype) == np.float64 else np.empty((rows, m), dtype=dtype)

    @classmethod
    def of(cls, state, block, slices):
        """The buffers for this block of a Nystroem transform, or None where scikit-learn's kernel is used."""
        return cls.of_kernel(state.kernel, state.landmarks, block, state.normalization.dtype, slices)

    @classmethod
    def of_kernel(cls, kernel, landmarks, block, dtype, slices):
        """The buffers for k(block, landmarks) in ``dtype``, or None where scikit-learn's kernel is used."""
        metric = kernel.metric
        if not (isinstance(metric, str) and metric == "rbf") or sp.issparse(block) or sp.issparse(landmarks) \
                or not slices:
            return None
        rows = max(s.stop - s.start for s in slices)
        return cls(landmarks, dict(kernel.params).get("gamma"), dtype, rows)

    def kernel(self, part):
        """k(part, landmarks), a view of the reused output buffer."""
        n = part.shape[0]
        if part.dtype != np.float64:
            x = self.upcast[:n]
            x[...] = part
        else:
            x = part
        D = self.distances[:n]
        np.matmul(x, self.landmarks.T, out=D)
        K = self.out[:n]
        if not backends.rbf_exponents(D, row_norms(x, squared=True), self.landmark_norms, self.gamma, K):
            D *= -2.0
            D += row_norms(x, squared=True)[:, None]
            D += self.landmark_norms
            if K is not D:
                K[...] = D
            np.maximum(K, 0, out=K)
            K *= -self.gamma
        np.exp(K, out=K)
        return K

