"""Sufficient statistics of a linear fit, per cross-validation fold, that fold exactly.

For features ``Z`` (rows z) and targets ``Y`` (rows y) a ridge fit, and the
validation error of any linear model on the same rows, need only

    count n,  means mz and my,  Czz = sum (z - mz)(z - mz)^T,
    Czy = sum (z - mz)(y - my)^T,  Cyy = sum (y - my)^2 (per target).

With sample weights w every sum is weighted (sum w (z - mz)(z - mz)^T, the
means are weighted means) and the total weight W takes the place of n in
every formula; unweighted, W = n.

These are kept *centered* (Chan, Golub & LeVeque's pairwise update) rather
than as raw sums Z^T Z, Z^T y: the raw form loses every digit to cancellation
when a feature's mean is large against its spread, and the centered form folds
just as exactly.  A block's statistics are computed and kept in the block's
dtype (float32 GEMM is twice as fast) and folded in float64.

With ``n_folds`` > 1 each row goes to fold ``hashed_folds(global_row)``; the
block's rows are sorted by fold and each fold's rows make one GEMM, so the
work of all folds together is the work of one fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state
from sklearn.utils.validation import assert_all_finite

from .. import engine
from ..utils import GOLDEN, splitmix64

#: the largest pass partial a cross-validated search accepts, in bytes (dask config ``dkapprox.cv-statistics-bytes``):
#: KernelRidgeCV's n_gammas x n_folds x m x m float64, FeatureMapRidgeCV's Moments of every candidate's features;
#: a task holds one and a fold of the tree two
STATISTICS_BYTES = 2 * 2**30



def fold_key(random_state):
    """The 63-bit key of the fold hash drawn from ``random_state`` (an int always gives the same)."""
    return int(check_random_state(random_state).randint(0, np.iinfo(np.int64).max, dtype=np.int64))


def hashed_folds(rows, n_folds, key):
    """Fold of each global row index: splitmix64(row + key) mod n_folds.

    A pure function of the row index and the key, so folds never depend on
    how the data is chunked or on the number of workers.
    """
    z = splitmix64((np.asarray(rows, dtype=np.uint64) + np.uint64(key)) * GOLDEN)
    return (z % np.uint64(n_folds)).astype(np.intp)


@dataclass(frozen=True)
class Moments:
    """Per-fold count, means and centered co-moments of (Z, Y).

    A block's are in the block's dtype; every combined one is float64.
    """

    count: np.ndarray  # (K,) rows
    weight: np.ndarray  # (K,) float64: total sample weight (the count when unweighted)
    mean_z: np.ndarray  # (K, d)
    mean_y: np.ndarray  # (K, t)
    zz: np.ndarray  # (K, d, d)
    zy: np.ndarray  # (K, d, t)
    yy: np.ndarray  # (K, t): centered sum of squares of each target

    @property
    def nbytes(self):
        return sum(a.nbytes for a in self._arrays())

    def fold(self, k):
        """Fold ``k`` alone, as a one-fold Moments."""
        return Moments(*(a[k : k + 1] for a in self._arrays()))

    def _arrays(self):
        return self.count, self.weight, self.mean_z, self.mean_y, self.zz, self.zy, self.yy


@dataclass(frozen=True)
class MomentsSpec:
    """What a block task needs besides its blocks (shipped once)."""

    targets: object  # .encode(y_block, dtype) -> (rows, n_targets)
    n_folds: int = 1
    fold_key: int = 0
    estimator_name: str = "Ridge"
    constant_weight: float | None = None  # a scalar sample_weight (a block of weights comes as w)


def check_weights(w, rows):
    """A block of sample weights as float64 (rows,): finite and non-negative, as scikit-learn asks."""
    w = np.asarray(w, dtype=np.float64).reshape(-1)
    if w.shape[0] != rows:
        raise ValueError(f"sample_weight.shape == ({w.shape[0]},) in a block of {rows} rows; expected ({rows},)!")
    assert_all_finite(w, input_name="sample_weight")
    if np.any(w < 0):
        raise ValueError("Negative values in data passed to `sample_weight`.")  # scikit-learn's words
    return w


def block_moments(row_start, spec, Z, y, w=None):
    """Moments of one row block of features ``Z``, targets ``y`` and optional sample weights ``w``."""
    if sp.issparse(Z):
        Z = Z.toarray()  # a block of features: centering makes it dense anyway
    Z = np.asarray(Z)
    assert_all_finite(Z, input_name="X", estimator_name=spec.estimator_name)
    Y = spec.targets.encode(y, Z.dtype)
    if Y.shape[0] != Z.shape[0]:
        raise ValueError(
            "Found input variables with inconsistent numbers of samples in a block: "
            f"[{Z.shape[0]}, {Y.shape[0]}]"
        )
    if w is not None:
        w = check_weights(w, Z.shape[0])
    elif spec.constant_weight is not None:
        w = np.full(Z.shape[0], float(spec.constant_weight))
    K = spec.n_folds
    if K == 1:
        counts = np.array([Z.shape[0]])
        owned = False  # the block itself: never written to (dask may hold it for another task)
    else:
        if row_start is None:
            raise ValueError(
                "Cross-validation folds need the global row index of every block, but the row "
                "block sizes of X are unknown. Call X.compute_chunk_sizes() first."
            )
        folds = hashed_folds(np.arange(row_start, row_start + Z.shape[0]), K, spec.fold_key)
        order = np.argsort(folds, kind="stable")
        counts = np.bincount(folds, minlength=K)
        Z, Y = Z.take(order, axis=0), Y.take(order, axis=0)  # copies, rows grouped by fold
        w = None if w is None else w[order]
        owned = True
    d, t = Z.shape[1], Y.shape[1]
    # kept in the block's dtype: a float32 GEMM has nothing more to give, and the partial (which
    # may cross the network) is half the size; combine_moments folds in float64
    out = _zeros(K, d, t, Z.dtype)
    stop = 0
    for k, n in enumerate(counts):
        start, stop = stop, stop + int(n)
        if n == 0:
            continue
        zk, yk = Z[start:stop], Y[start:stop]
        if w is None:
            total = float(n)
            mz = zk.mean(axis=0)
            my = yk.mean(axis=0)
        else:
            wk = w[start:stop]
            total = float(wk.sum())
            scale = 1.0 / total if total > 0 else 0.0
            wz = wk.astype(Z.dtype)  # a float64 weight vector would promote (copy) the whole block
            mz = wz @ zk * scale
            my = wz @ yk * scale
        if owned:
            zk -= mz
            yk -= my
        else:
            zk, yk = zk - mz, yk - my
        if w is not None:  # sum w (z - mz)(z - mz)^T = (sqrt(w) e)^T (sqrt(w) e), still one syrk
            root = np.sqrt(wk).astype(Z.dtype)[:, None]
            zk *= root  # zk and yk are ours here: the centering above made them, or the fold sort
            yk *= root
        out.count[k] = n
        out.weight[k] = total
        out.mean_z[k] = mz
        out.mean_y[k] = my
        out.zz[k] = zk.T @ zk  # NumPy calls syrk for a matrix times its own transpose
        out.zy[k] = zk.T @ yk
        out.yy[k] = np.einsum("ij,ij->j", yk, yk)
    return out


def moments_nbytes(n_folds, d, n_targets):
    """Bytes of a combined (float64) Moments of ``n_folds`` folds, ``d`` features and ``n_targets`` targets.

    ``8 n_folds (d^2 + d (n_targets + 1) + 2 n_targets + 2)``: ``zz``, ``zy``, ``mean_z``, ``mean_y`` and
    ``yy``, ``count`` (int64) and ``weight``, as :func:`_zeros` makes them. A block's own partial is in the
    block's dtype, no larger.
    """
    return 8 * n_folds * (d * d + d * (n_targets + 1) + 2 * n_targets + 2)


def _zeros(K, d, t, dtype=np.float64):
    return Moments(np.zeros(K, dtype=np.int64), np.zeros(K), np.zeros((K, d), dtype), np.zeros((K, t), dtype),
                   np.zeros((K, d, d), dtype), np.zeros((K, d, t), dtype), np.zeros((K, t), dtype))


def combine_moments(parts):
    """Fold partial Moments (same folds) into one, exactly.

    Chan et al.'s update (:func:`dkapprox.backends._stats.merge_moments`) for weighted
    co-moment matrices per fold, in its direct form: every part's mean is
    folded against the final mean at once, one einsum per part.
    """
    parts = list(parts)
    count = sum(p.count for p in parts)
    weight = sum(p.weight for p in parts)
    denom = np.where(weight > 0, weight, 1.0)[:, None]
    mean_z = sum(p.weight[:, None] * p.mean_z.astype(np.float64) for p in parts) / denom
    mean_y = sum(p.weight[:, None] * p.mean_y.astype(np.float64) for p in parts) / denom
    K, d, t = parts[0].zy.shape
    zz, zy, yy = np.zeros((K, d, d)), np.zeros((K, d, t)), np.zeros((K, t))  # float64 from here on
    for p in parts:
        dz = p.mean_z - mean_z
        dy = p.mean_y - mean_y
        w = p.weight
        zz += p.zz
        zz += np.einsum("k,ki,kj->kij", w, dz, dz)
        zy += p.zy
        zy += np.einsum("k,ki,kj->kij", w, dz, dy)
        yy += p.yy + w[:, None] * dy * dy
    return Moments(count, weight, mean_z, mean_y, zz, zy, yy)


def pool_folds(m):
    """All folds together: the statistics of the whole data (one fold)."""
    return combine_moments([m.fold(k) for k in range(m.count.shape[0])])


def without_folds(m, total):
    """For every fold k, the statistics of all rows *not* in fold k (total minus fold k).

    Inverts the pairwise update: total = rest (+) fold k, so
    C_rest = C_total - C_k - n_k (m_k - m)(m_k - m)^T - n_rest (m_rest - m)(m_rest - m)^T.
    """
    n = total.weight[0]
    count = total.count[0] - m.count
    weight = n - m.weight
    denom = np.where(weight > 0, weight, 1.0)[:, None]
    mean_z = (n * total.mean_z - m.weight[:, None] * m.mean_z) / denom
    mean_y = (n * total.mean_y - m.weight[:, None] * m.mean_y) / denom
    dz_k, dy_k = m.mean_z - total.mean_z, m.mean_y - total.mean_y
    dz_r, dy_r = mean_z - total.mean_z, mean_y - total.mean_y
    w_k, w_r = m.weight, weight
    zz = (total.zz - m.zz - np.einsum("k,ki,kj->kij", w_k, dz_k, dz_k)
          - np.einsum("k,ki,kj->kij", w_r, dz_r, dz_r))
    zy = (total.zy - m.zy - np.einsum("k,ki,kj->kij", w_k, dz_k, dy_k)
          - np.einsum("k,ki,kj->kij", w_r, dz_r, dy_r))
    yy = total.yy - m.yy - w_k[:, None] * dy_k**2 - w_r[:, None] * dy_r**2
    return Moments(count, weight, mean_z, mean_y, zz, zy, yy)


@dataclass(frozen=True)
class MappedSpec:
    """A pass that maps each row block by several feature maps, and gathers the Moments of each one's features.

    ``maps``: ``(block_fn, state)`` per map, each ``block_fn(block, state)`` a fitted transformer's
    module-level block function; ``checks``: the value checks of the raw block (each distinct one
    once), run before any map.
    """

    moments: MomentsSpec
    maps: tuple
    checks: tuple = ()


def mapped_moments(row_start, spec, X, y, w=None):
    """A tuple of Moments, one per map of ``spec``, of one row block: the block is read once for all maps."""
    # realigned as map_rows realigns a block and its state (a misaligned array is multiplied without BLAS)
    X, maps = engine.byte_aligned(X), engine.byte_aligned(spec.maps)
    for check in spec.checks:
        check(X)
    # the block's targets, weights and fold order are the same for every map: each map's features go
    # through block_moments in turn, so a block holds one map's features at a time
    return tuple(block_moments(row_start, spec.moments, block_fn(X, state), y, w) for block_fn, state in maps)


def combine_mapped(parts):
    """Fold partials of :func:`mapped_moments` map by map."""
    return tuple(combine_moments(same_map) for same_map in zip(*parts))
