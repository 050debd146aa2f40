"""Kernels for Nystroem: scikit-learn's pairwise kernels, their diagonals, and the block function.

Every kernel value comes from :func:`sklearn.metrics.pairwise.pairwise_kernels`
(we do not write kernels again); this module only freezes the parameters the
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
    def of(cls, estimator) -> "Kernel":
        return cls(estimator.kernel, tuple(sorted(kernel_params(estimator).items())))

    @property
    def precomputed(self) -> bool:
        return is_precomputed(self.metric)

    def between(self, X, landmarks, n_jobs=None):
        """Dense kernel matrix k(X, landmarks) of shape (n_rows, n_landmarks)."""
        if self.precomputed:
            K = X[:, landmarks]
        else:
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


@dataclass(frozen=True, eq=False)
class NystroemState:
    """What the transform of one block needs: k(block, landmarks) @ normalization."""

    kernel: Kernel
    landmarks: object  # (n_components, n_features) rows, or column indices for 'precomputed'
    normalization: np.ndarray  # (n_components, n_components), transposed, in the output dtype
    n_jobs: object = None  # joblib jobs of pairwise_kernels: in-memory input only


def nystroem_features(block, state):
    """Nystroem features of one row block (memory: block_rows x n_components, twice)."""
    K = state.kernel.between(block, state.landmarks, n_jobs=state.n_jobs)
    if K.dtype != state.normalization.dtype:  # e.g. scikit-learn's laplacian is float64
        K = K.astype(state.normalization.dtype)
    return K @ state.normalization
