"""The exact kernels of the chi-squared samplers, which scikit-learn does not provide as such.

Public as :func:`dkapprox.metrics.chi2_sum_kernel` and
:func:`dkapprox.metrics.skewed_chi2_kernel`; defined here, beside the samplers
that declare them as their exact kernels, so that metrics depends on the
samplers and never the other way round.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import additive_chi2_kernel

__all__ = ["chi2_sum_kernel", "skewed_chi2_kernel"]


def chi2_sum_kernel(X, Y=None):
    """sum_i 2 x_i y_i / (x_i + y_i): the additive chi-squared kernel AdditiveChi2Sampler approximates.

    Written with scikit-learn's ``additive_chi2_kernel`` (which is
    ``-sum (x - y)^2 / (x + y)``): 2xy / (x + y) = (x + y) / 2 - (x - y)^2 / (2 (x + y)).

    Examples
    --------
    >>> import numpy as np
    >>> from dkapprox.metrics import chi2_sum_kernel
    >>> chi2_sum_kernel(np.array([[1.0, 2.0], [3.0, 0.5]]))
    array([[3. , 2.3],
           [2.3, 3.5]])
    """
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    Y = X if Y is None else (Y.toarray() if sp.issparse(Y) else np.asarray(Y))
    return 0.5 * (X.sum(axis=1)[:, None] + Y.sum(axis=1)[None, :] + additive_chi2_kernel(X, Y))


def skewed_chi2_kernel(X, Y=None, *, skewedness=1.0):
    """prod_i 2 sqrt(x_i + c) sqrt(y_i + c) / (x_i + y_i + 2c), the kernel of SkewedChi2Sampler.

    Examples
    --------
    >>> import numpy as np
    >>> from dkapprox.metrics import skewed_chi2_kernel
    >>> skewed_chi2_kernel(np.array([[1.0, 2.0], [3.0, 0.5]])).round(4)
    array([[1.    , 0.8889],
           [0.8889, 1.    ]])
    """
    X = np.asarray(X, dtype=np.float64)
    Y = X if Y is None else np.asarray(Y, dtype=np.float64)
    c = float(skewedness)
    half_x = 0.5 * np.log(X + c)
    half_y = 0.5 * np.log(Y + c)
    out = np.empty((X.shape[0], Y.shape[0]))
    rows = max(1, (1 << 22) // max(1, Y.size))  # a (rows, n_y, n_features) tile of 32 MB at a time
    for start in range(0, X.shape[0], rows):
        x = X[start : start + rows, None, :]
        log = np.log(2.0) + half_x[start : start + rows, None, :] + half_y[None] - np.log(x + Y[None] + 2 * c)
        out[start : start + rows] = np.exp(log.sum(axis=2))
    return out
