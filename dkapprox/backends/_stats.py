"""Per-block statistics that fold exactly: count, mean, M2 (Chan et al.).

Used through :func:`dkapprox.engine.tree_reduce`, so a fit that needs the
variance of a dask array reads every block once, whatever their number.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from . import _xp


def moments(block):
    """(count, mean, M2, n_nonfinite) of all the entries of one block."""
    if sp.issparse(block):
        n = block.shape[0] * block.shape[1]
        data = np.asarray(block.data, dtype=np.float64)
        bad = int(np.count_nonzero(~np.isfinite(data)))
        if n == 0:
            return 0, 0.0, 0.0, bad
        mean = data.sum() / n
        # zeros not stored contribute (0 - mean)^2 each
        m2 = ((data - mean) ** 2).sum() + (n - data.size) * mean * mean
        return n, float(mean), float(m2), bad
    xp = _xp.namespace(block)
    if xp is not None:  # a CuPy block: reduced on its device, four numbers come back
        values = xp.reshape(xp.astype(block, xp.float64), (-1,))
        n = values.shape[0]
        bad = int(xp.sum(xp.astype(~xp.isfinite(values), xp.int64)))
        if n == 0:
            return 0, 0.0, 0.0, bad
        mean = xp.mean(values)
        return n, float(mean), float(xp.sum((values - mean) ** 2)), bad
    values = np.asarray(block, dtype=np.float64)
    n = values.size
    bad = int(np.count_nonzero(~np.isfinite(values)))
    if n == 0:
        return 0, 0.0, 0.0, bad
    mean = values.mean()
    m2 = ((values - mean) ** 2).sum()
    return n, float(mean), float(m2), bad


def merge_moments(parts):
    """Fold ``(count, mean, M2)`` triples into one with Chan et al.'s pairwise update, exactly.

    Means and M2 may be NumPy arrays (one per column or target), folded
    element by element. Parts of no rows are skipped.
    """
    n, mean, m2 = 0, 0.0, 0.0
    for nb, mb, m2b in parts:
        if nb == 0:
            continue
        total = n + nb
        delta = mb - mean
        mean = mean + delta * nb / total
        m2 = m2 + m2b + delta * delta * n * nb / total
        n = total
    return n, mean, m2


def combine_block_moments(parts):
    """Fold ``(count, mean, M2, total)`` quadruples: the moments merged, the totals summed.

    The parts of :func:`moments` (the total: entries not finite), or of any
    statistic that rides along with a mean and M2 (a score's squared error).
    """
    parts = list(parts)
    return (*merge_moments(p[:3] for p in parts), sum(p[3] for p in parts))
