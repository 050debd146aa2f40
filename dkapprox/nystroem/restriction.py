"""Rank restriction: the best rank-``m`` part of a Nystroem approximation with ``l > m`` landmarks.

With ``l`` landmarks ``L``, plain Nystroem features are ``Z = k(X, L) N`` with
``N = K_LL^(-1/2)``, and ``Z Z^T`` approximates the kernel matrix of ``X``. Its best
rank-``m`` part is ``Z V_m V_m^T Z^T``, where ``V_m`` holds the top ``m`` eigenvectors of
``Z^T Z`` (``l x l``, summed over the rows in one pass): the features ``Z V_m = k(X, L)
(N V_m)`` are still one kernel evaluation and one product per row, with an ``l x m``
matrix at the end (Tropp, Yurtsever, Udell, Cevher 2017, "Fixed-rank approximation of a
positive-semidefinite matrix from streaming data", bound the error of this truncation:
at most ``1 + m / (l - m - 1)`` times the best rank-``m`` error in the Schatten-1 norm for
their sketches).

The sum ``Z^T Z`` is formed in float64, a slice of rows at a time, whatever the data's
dtype, and folded over the row blocks with :mod:`dkapprox.engine`'s running total: only
rounding depends on the chunking. The eigenvectors' signs are fixed (the entry of largest
magnitude of each is positive), so two chunkings give the same features within rounding,
not features of opposite signs. Only the span of eigenvectors of a repeated eigenvalue
(a tie within rounding) could differ between chunkings; ``Z Z^T`` does not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import backends
from ..engine import SizedState
from ..kernels import DEVICE_SLICE_ELEMENTS, row_slices
from .kernels import NystroemState, features_on_device, nystroem_features
from .normalization import symmetric_eig


@dataclass(frozen=True, eq=False)
class GramState(SizedState):
    """What a block needs to add its ``Z^T Z``: the plain Nystroem map in float64."""

    features: NystroemState  # landmarks and normalization (l x l) in float64


def gram_partial(row_start, state, block):
    """``Z^T Z`` (``l x l``, float64) of one row block's plain Nystroem features ``Z``.

    ``Z`` is made a slice of rows at a time (:func:`.kernels.nystroem_features`), so a task
    holds its block, one slice of ``Z`` and the ``l x l`` sum. A device block (CuPy) computes
    on its device; the sum comes back as NumPy.
    """
    xp = backends.namespace(block)
    if xp is not None:
        return _gram_on_device(xp, block, state)
    features = state.features
    width = features.normalization.shape[1]
    total = np.zeros((width, width))
    for s in row_slices(block.shape[0], max(features.normalization.shape[0], block.shape[1])):
        Z = nystroem_features(block[s], features)
        total += Z.T @ Z
    return total


def _gram_on_device(xp, block, state):
    """:func:`gram_partial` of a device block, in its namespace and on its device."""
    features = backends.state_on(state.features, block)
    width = features.normalization.shape[1]
    total = xp.zeros((width, width), dtype=xp.float64, device=backends.device_of(block))
    for s in row_slices(block.shape[0], max(width, block.shape[1]), DEVICE_SLICE_ELEMENTS):
        Z = xp.astype(features_on_device(xp, block[s, :], features), xp.float64)
        total += Z.T @ Z
    return backends.to_numpy(total)


def gram_combine(parts):
    total = np.array(parts[0], dtype=np.float64, copy=True)
    for part in parts[1:]:
        total += part
    return total


def restricted_normalization(gram, normalization, n_components):
    """``(N V_m)^T`` of shape (n_components, l), from ``Z^T Z`` and ``N`` (both float64).

    ``V_m``: the eigenvectors of ``gram`` of the ``n_components`` largest eigenvalues, in
    decreasing order (the first feature carries the most of the kernel), each with its entry
    of largest magnitude positive.

    Eigenvalues at most :data:`NULL_RTOL` times the largest are a null space as far as the data
    says (a kernel of lower rank than ``n_components``): their eigenvectors are set by rounding,
    which the chunking changes, so their features are zero instead.
    """
    w, V = symmetric_eig(gram)
    w, top = w[::-1][:n_components], V[:, ::-1][:, :n_components]
    largest = np.argmax(np.abs(top), axis=0)
    signs = np.sign(top[largest, np.arange(top.shape[1])])
    top = top * np.where(signs == 0, 1.0, signs)
    top[:, w <= NULL_RTOL * max(float(w[0]) if w.size else 0.0, 0.0)] = 0.0
    return np.ascontiguousarray((np.asarray(normalization, dtype=np.float64) @ top).T)


#: eigenvalues of Z^T Z at most this times the largest are treated as zero by the rank restriction
#: (the sum of Z^T Z over n rows rounds at about n eps(float64) of the largest: 1e-10 leaves room)
NULL_RTOL = 1e-10
