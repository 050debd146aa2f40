"""The Nystroem transform's state and block function, on the kernels of :mod:`dkapprox.kernels`.

``Kernel``, ``kernel_slices``, ``row_slices`` and ``RBFSlices`` were defined here before
:mod:`dkapprox.kernels` took them; importing them from here still works.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import backends
from ..backends import empty as recycled_empty
from ..engine import SizedState
from ..kernels import (
    DEVICE_SLICE_ELEMENTS,
    SLICE_ELEMENTS,
    Kernel,
    RBFSlices,
    device_between,
    is_precomputed,
    kernel_params,
    kernel_slices,
    row_slices,
)

__all__ = ["Kernel", "NystroemState", "RBFSlices", "SLICE_ELEMENTS", "is_precomputed", "kernel_params",
           "kernel_slices", "nystroem_features", "row_slices"]


@dataclass(frozen=True, eq=False)
class NystroemState(SizedState):
    """What the transform of one block needs: k(block, landmarks) @ normalization."""

    kernel: Kernel
    landmarks: object  # (n_components, n_features) rows, or column indices for 'precomputed'
    normalization: np.ndarray  # (n_components, n_components), transposed, in the output dtype
    n_jobs: object = None  # joblib jobs of pairwise_kernels: in-memory input only


def nystroem_features(block, state):
    """Nystroem features of one row block: k(block, landmarks) @ normalization.

    The kernel is evaluated a slice of rows at a time and each slice's product
    written into the output, so a task holds its block, its output (block_rows x
    n_components, in the output dtype) and one slice's temporaries: scikit-learn's
    float64 intermediates for float32 data (the upcast of euclidean distances,
    scipy's float64 cityblock distances for the laplacian kernel) never reach a
    whole block. The rbf kernel on dense blocks reuses one set of slice buffers
    (:class:`RBFSlices`); the laplacian, chi2, additive_chi2, polynomial and sigmoid
    kernels on dense blocks are compiled where :mod:`dkapprox.backends._jit` runs
    (:func:`_compiled_kernel`); every other kernel is scikit-learn's, per slice.
    """
    xp = backends.namespace(block)
    if xp is not None:
        return features_on_device(xp, block, backends.state_on(state, block))
    N = state.normalization
    out = recycled_empty((block.shape[0], N.shape[1]), dtype=N.dtype)  # pages touched or reused: see _recycle
    for s, K in kernel_slices(state.kernel, state.landmarks, block, N.dtype, n_jobs=state.n_jobs):
        np.matmul(K, N, out=out[s])
    return out


def features_on_device(xp, block, state):
    """:func:`nystroem_features` in the block's namespace, on its device, the same slices of rows."""
    N = state.normalization
    out = xp.empty((block.shape[0], N.shape[1]), dtype=N.dtype, device=backends.device_of(block))
    step = max(1, DEVICE_SLICE_ELEMENTS // max(N.shape[0], block.shape[1]))
    for s in (slice(lo, min(lo + step, block.shape[0])) for lo in range(0, block.shape[0], step)):
        K = device_between(xp, state.kernel, block[s, :], state.landmarks)
        backends.matmul_into(xp, xp.astype(K, N.dtype, copy=False), N, out[s, :])
    return out
