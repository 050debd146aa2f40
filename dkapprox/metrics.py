"""How well a fitted feature map approximates its kernel, measured on a seeded sample of rows.

:func:`kernel_approximation_error` compares the exact kernel matrix K of a
sample with the approximation Z Z^T made by the transformer's features:
relative errors ``||K - Z Z^T|| / ||K||`` in Frobenius and spectral norm.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils import check_random_state
from sklearn.utils.random import sample_without_replacement
from sklearn.utils.validation import check_array, check_is_fitted
from threadpoolctl import threadpool_limits

from . import engine, inputs
from .kernels import chi2_sum_kernel, skewed_chi2_kernel

__all__ = ["KernelApproximationError", "kernel_approximation_error", "chi2_sum_kernel", "skewed_chi2_kernel"]

_ROWS = 256  # rows of the sample transformed at a time


class KernelApproximationError(NamedTuple):
    """Relative errors of Z Z^T against the exact kernel K on a sample of rows.

    Examples
    --------
    >>> from dkapprox.metrics import KernelApproximationError
    >>> KernelApproximationError(frobenius=0.05, spectral=0.02, n_samples=1000).frobenius
    0.05
    """

    frobenius: float  # ||K - Z Z^T||_F / ||K||_F
    spectral: float  # ||K - Z Z^T||_2 / ||K||_2
    n_samples: int  # rows in the sample


def _kernel_of(transformer):
    """The exact kernel a known transformer approximates, as a function of the sample.

    A dkapprox transformer declares it (``_exact_kernel``); one of
    scikit-learn's is answered by the dkapprox class of the same name, whose
    parameters and fitted attributes are scikit-learn's.
    """
    declared = getattr(type(transformer), "_exact_kernel", None)
    if declared is None and type(transformer).__module__.startswith("sklearn."):
        from . import kernel_approximation, nystroem, random_projection

        for family in (kernel_approximation, nystroem, random_projection):
            twin = getattr(family, type(transformer).__name__, None)
            declared = getattr(twin, "_exact_kernel", None) if isinstance(twin, type) else None
            if declared is not None:
                break
    if declared is None:
        raise ValueError(
            f"Cannot tell which kernel {type(transformer).__name__} approximates: pass kernel= (a name from "
            "sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS or a callable k(X, Y) -> matrix)."
        )
    return declared(transformer)


def _given_kernel(kernel, params):
    if callable(kernel):
        return lambda Xs: kernel(Xs, Xs, **params)
    return lambda Xs: pairwise_kernels(Xs, metric=kernel, **params)


def kernel_approximation_error(transformer, X, *, kernel=None, n_samples=1000, random_state=None,
                               kernel_params=None):
    """Relative Frobenius and spectral errors of a fitted feature map against its exact kernel.

    A sample of ``n_samples`` rows is drawn by global row index (seeded by
    ``random_state``, so it does not depend on chunking); from a dask or zarr
    array only the blocks holding sampled rows are read, each giving just its
    sampled rows. The sample's exact kernel K (``n_samples^2``) is compared
    with ``Z Z^T``, Z being the transformer's features of the sample, computed
    ``256`` rows at a time.

    Parameters
    ----------
    transformer : fitted transformer
        dkapprox's or scikit-learn's (RBFSampler, Nystroem, PolynomialCountSketch,
        SkewedChi2Sampler, AdditiveChi2Sampler, random projections (the linear
        kernel), RandomFourierFeatures, RandomBinningFeatures: their kernel is
        inferred), or any other with ``kernel=`` given.
    X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples_total, n_features)
        Data to sample the rows from.
    kernel : str or callable, default=None
        The exact kernel: a name from
        ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS`` or a callable
        ``kernel(X, Y, **kernel_params)`` returning the kernel matrix. None:
        the one the transformer approximates (for a callable Nystroem kernel,
        scikit-learn's ``k(x, y)`` evaluated pairwise).
    n_samples : int, default=1000
        Rows in the sample (all rows if fewer).
    random_state : int, RandomState instance or None, default=None
        Seed of the sample.
    kernel_params : dict, default=None
        Parameters of an explicit ``kernel``.

    Returns
    -------
    errors : KernelApproximationError
        Named tuple ``(frobenius, spectral, n_samples)``.

    Examples
    --------
    >>> import numpy as np
    >>> from dkapprox import RBFSampler
    >>> from dkapprox.metrics import kernel_approximation_error
    >>> X = np.random.default_rng(0).normal(size=(5_000, 5))
    >>> small = RBFSampler(gamma=0.1, n_components=100, random_state=0).fit(X)
    >>> large = RBFSampler(gamma=0.1, n_components=2_000, random_state=0).fit(X)
    >>> e_small = kernel_approximation_error(small, X, n_samples=500, random_state=0)
    >>> e_large = kernel_approximation_error(large, X, n_samples=500, random_state=0)
    >>> e_large.frobenius < e_small.frobenius
    True
    """
    check_is_fitted(transformer)
    if not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive integer; got {n_samples!r}.")
    if kernel is None and kernel_params:
        raise ValueError("kernel_params are the parameters of an explicit kernel=; none was given.")
    exact_kernel = _kernel_of(transformer) if kernel is None else _given_kernel(kernel, kernel_params or {})
    Xs = _sample_rows(X, n_samples, random_state)
    exact = np.asarray(exact_kernel(Xs), dtype=np.float64)
    exact = exact.toarray() if sp.issparse(exact) else exact
    Z = [transformer.transform(Xs[start : start + _ROWS]) for start in range(0, Xs.shape[0], _ROWS)]
    Z = sp.vstack(Z).tocsr() if sp.issparse(Z[0]) else np.concatenate([np.asarray(z) for z in Z])
    approx = Z @ Z.T
    approx = approx.toarray() if sp.issparse(approx) else np.asarray(approx, dtype=np.float64)
    diff = exact - approx
    # one BLAS thread: SciPy's OpenBLAS right after NumPy's, each with a thread per core, spin
    # against each other (benchmarks/bench_blas_threads.py measures it)
    with threadpool_limits(1):
        spectral_exact = np.abs(scipy.linalg.eigvalsh(exact)).max()
        spectral_diff = np.abs(scipy.linalg.eigvalsh(diff)).max()
    return KernelApproximationError(
        frobenius=float(np.linalg.norm(diff) / np.linalg.norm(exact)),
        spectral=float(spectral_diff / spectral_exact),
        n_samples=int(Xs.shape[0]),
    )


def _sample_rows(X, n_samples, random_state):
    """The sampled rows (sorted global indices) of in-memory or dask X, in memory."""
    rng = check_random_state(random_state)
    given = inputs.as_input(X, dtype=None)
    if given.lazy:
        X = given.data
        sizes = engine.row_sizes(X)  # free when known; one pass when the row chunks are unknown
        n = sum(sizes)
        index = np.sort(sample_without_replacement(n, min(n_samples, n), random_state=rng))
        return inputs.compute(engine.take_rows(X, index, sizes=sizes), arrays=[X])[0]
    X = check_array(given.data, accept_sparse="csr", dtype=None)
    n = X.shape[0]
    index = np.sort(sample_without_replacement(n, min(n_samples, n), random_state=rng))
    return X[index]
