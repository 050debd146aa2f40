"""Per-block statistics that fold exactly: count, mean, M2 (Chan et al.).

Used through :func:`dkapprox._graph.tree_reduce`, so a fit that needs the
variance of a dask array reads every block once, whatever their number.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


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
    values = np.asarray(block, dtype=np.float64)
    n = values.size
    bad = int(np.count_nonzero(~np.isfinite(values)))
    if n == 0:
        return 0, 0.0, 0.0, bad
    mean = values.mean()
    m2 = ((values - mean) ** 2).sum()
    return n, float(mean), float(m2), bad


def combine_moments(parts):
    n, mean, m2, bad = 0, 0.0, 0.0, 0
    for nb, mb, m2b, badb in parts:
        bad += badb
        if nb == 0:
            continue
        total = n + nb
        delta = mb - mean
        mean += delta * nb / total
        m2 += m2b + delta * delta * n * nb / total
        n = total
    return n, mean, m2, bad
