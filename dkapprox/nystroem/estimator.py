"""Nystroem: scikit-learn's estimator, with landmark selection that scales and better landmarks."""

from __future__ import annotations

import warnings
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.kernel_approximation import Nystroem as _SkNystroem
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array

from .. import backends, inputs
from .._base import BlockwiseTransformer
from ..inputs import FLOAT_DTYPES, row_source
from ..kernels import Kernel, is_precomputed, kernel_params
from ..utils import Interval, StrOptions
from .kernels import NystroemState, nystroem_features
from .landmarks import SELECTORS, Given, make_selector
from .normalization import default_rtol, inverse_sqrt
from .restriction import GramState, gram_combine, gram_partial, restricted_normalization


class Nystroem(BlockwiseTransformer):
    """Approximate a kernel map using a subset of the training data (or better landmarks).

    Same parameters, defaults, fitted attributes, warnings and (for the default
    ``landmarks='uniform'`` and an integer ``random_state``) the same numbers
    as :class:`sklearn.kernel_approximation.Nystroem`; also takes dask and
    zarr arrays far larger than memory, can choose its landmarks by
    k-means, by ridge leverage scores or by randomly pivoted Cholesky, and can
    choose more landmarks than it outputs features (``n_landmarks``), keeping
    the best rank-``n_components`` part of that approximation: on real data
    the way to come near the best possible rank-``n_components`` map.

    Parameters
    ----------
    kernel : str or callable, default='rbf'
        A name from ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS``
        (rbf, laplacian, polynomial/poly, sigmoid, cosine, linear, chi2,
        additive_chi2), a callable ``k(x, y, **kernel_params) -> float``, or
        ``'precomputed'``: ``X`` is then a kernel matrix, square at fit
        (training rows by training rows) and (n_samples, n_train) at transform.
        Only ``landmarks='uniform'`` is possible with 'precomputed' (k-means
        centroids, leverage scores and RPCholesky need the points themselves: we raise a
        ValueError); the landmarks are then *columns*: the features of a row
        are its landmark columns times ``normalization_``. scikit-learn allows
        'precomputed' only with ``n_components >= n_samples`` and gives the same
        numbers there; smaller ``n_components`` is a true Nystroem here.
    gamma, coef0, degree : float, default=None
        Kernel parameters, as in scikit-learn (None: the kernel's default).
        Must be None for a callable or precomputed kernel.
    kernel_params : dict, default=None
        More keyword arguments for the kernel. Never modified.
    n_components : int, default=100
        Number of output features, and of landmarks unless ``n_landmarks`` says
        more. Larger than the number of samples: the number of samples, with
        scikit-learn's warning. Ignored when ``landmarks`` is an array.
    random_state : int, RandomState instance or None, default=None
        Seed of every random choice, all drawn on the driver with NumPy.
    n_jobs : int, default=None
        joblib jobs of ``pairwise_kernels`` for in-memory input (dask input is
        parallel by blocks; its tasks use one job each).
    landmarks : {'uniform', 'kmeans', 'leverage', 'rpcholesky'} or array of shape \
(n_landmarks, n_features), default='uniform'
        How to choose the landmarks, always by global row index, so that no
        random choice depends on chunking ('kmeans' and 'leverage' compare
        distances and scores, whose last bits depend on the blocks' BLAS
        rounding: only an exact tie within that rounding could choose
        otherwise). Each method chooses ``n_landmarks`` landmarks
        (``n_components`` when it is None; below, "landmarks" counts them).
        Passes over dask input (plus one when its row chunk sizes are unknown,
        to count rows):

        - ``'uniform'``: rows sampled without replacement; scikit-learn's
          ``random_state.permutation(n_samples)[:n_components]`` for up to
          ``dkapprox.nystroem.landmarks.PERMUTATION_MAX_ROWS`` (10_000_000)
          rows, above that an O(n_components)-memory draw. One pass, reading
          only the blocks that hold a landmark, each once.
        - ``'kmeans'``: k-means++ seeding on a uniform subsample (one pass),
          then ``n_iter`` (default 4) Lloyd steps over all the rows, each one
          blockwise pass with a tree reduction: 1 + n_iter passes. The
          landmarks are the centroids (``components_`` are not rows of X).
        - ``'leverage'``: ridge leverage score sampling (Musco & Musco 2017):
          a uniform subsample (one pass) on which their recursion runs in
          memory, scoring nested halves of it against dictionaries drawn by
          the same scores, at a ridge tied to a rank (the mean kernel
          eigenvalue beyond it); then one pass that scores every row against
          the last dictionary and samples the landmarks as distinct rows: 2
          passes. Far better than uniform landmarks on clusters of uneven
          density; on evenly spread data, where even exact ridge leverage
          scores do no better than uniform, about as good: 0-8% less error on
          digits, from 7% less to 11% more on breast cancer and diabetes (more
          at m = 16, where its rank is 1 or 2; docs/choosing.rst).
        - ``'rpcholesky'``: randomly pivoted Cholesky (Chen, Epperly, Tropp,
          Webber 2023), accelerated by rejection sampling (Epperly, Tropp,
          Webber 2024), run in memory on a uniform subsample gathered in one
          pass: each landmark is drawn with probability proportional to how
          badly the landmarks before it approximate that row's kernel
          diagonal. 1 pass, whatever the number of landmarks.
        - an array: these landmarks (no pass; ``n_components`` is ignored).

        ``n_landmarks > n_components`` adds one pass to any method (the rank
        restriction below). So ``landmarks='rpcholesky'`` with
        ``n_landmarks`` reads the data twice, ``'uniform'`` twice,
        ``'leverage'`` 3 times, ``'kmeans'`` 2 + ``n_iter`` times.
    landmark_params : dict, default=None
        Options of the landmark method, never modified:
        ``'kmeans'``: ``n_iter`` (4), ``sample_size`` (max(10_000, 20 * landmarks));
        ``'leverage'``: ``sample_size`` (max(10_000, 2 * landmarks): the
        subsample the recursion runs on), ``pilot_size`` (landmarks: the
        dictionary's rows, each level's and the scoring pass's; the pass costs
        ``pilot_size * (n_features + pilot_size)`` per row), ``rank`` (landmarks // 16: the
        ridge is the mean eigenvalue beyond it; see
        ``dkapprox.nystroem.landmarks.Leverage`` for why);
        ``'uniform'``: ``max_permutation_rows`` (10_000_000);
        ``'rpcholesky'``: ``sample_size`` (max(10_000, 8 * n_landmarks): the
        subsample RPCholesky runs on; it holds a ``sample_size x n_landmarks``
        float64 factor, 1.1 GB at n_landmarks=4096; see
        ``dkapprox.nystroem.landmarks.RPCholesky`` for why this size).
    n_landmarks : int, default=None
        Number of landmarks ``l`` to choose; None: ``n_components`` (plain
        Nystroem, scikit-learn's numbers). Larger than ``n_components``
        (``m``): rank-restricted Nystroem. ``l`` landmarks give the features
        ``Z = k(X, L) K_LL^(-1/2)`` of width ``l``; one more pass over the data
        sums ``Z^T Z`` (``l x l``, float64), and the ``m`` eigenvectors of its
        largest eigenvalues, ``V_m``, keep the best rank-``m`` part of ``Z
        Z^T``: ``normalization_`` becomes ``(K_LL^(-1/2) V_m)^T`` of shape
        ``(m, l)``, and the output has ``m`` features whatever ``l`` is,
        ordered by decreasing eigenvalue. ``transform`` costs ``l * n_features``
        kernel terms and ``l * m`` multiply-adds per row (plain Nystroem(l):
        ``l * n_features + l^2``); the fit costs the selection of ``l``
        landmarks, the ``l x l`` eigendecompositions and the pass, about ``1.5
        l^2`` float64 multiply-adds per row (timed in the documentation's
        "Performance" page, "Rank-restricted Nystroem"). Measured on
        scikit-learn's digits, breast cancer and diabetes data (rbf, two
        gammas; benchmarks/bench_nystroem.py),
        as a ratio to the optimal rank-``m`` error in the Frobenius norm:
        plain uniform Nystroem(m) 1.35-2.71; ``l = 4 m`` uniform 1.06-1.21,
        rpcholesky 1.01-1.21, leverage 1.04-1.19, kmeans 1.00-1.07, and kmeans with
        ``landmark_params={'n_iter': 1}`` (3 passes) 1.00-1.09. Larger than the
        number of samples: the number of samples. Must be None for an array
        of landmarks.

    Attributes
    ----------
    components_ : ndarray or sparse matrix of shape (n_landmarks, n_features)
        The landmarks (sparse for sparse X with row landmarks, as scikit-learn);
        ``n_landmarks`` rows (``n_components`` when it is None).
    component_indices_ : ndarray of shape (n_landmarks,), dtype int64
        Global row index of each landmark in the training set. For
        ``'kmeans'``: the row whose k-means++ seed became that centroid. For an
        array of landmarks: -1.
    normalization_ : ndarray of shape (n_components, n_landmarks)
        The features are ``k(x, components_) @ normalization_.T``. Plain
        Nystroem (square): ``K^(-1/2)`` of the landmark kernel matrix ``K``, by a symmetric
        eigendecomposition in float64 with eigenvalues ``|w| <= rtol * max|w|``
        treated as zero, ``rtol = max(n_components * eps(float64), eps(K.dtype))``
        (scikit-learn clips singular values at 1e-12 instead; both agree when
        ``K`` is well conditioned; see ``dkapprox.nystroem.normalization``). Negative
        eigenvalues keep their sign, as scikit-learn's SVD does. Rank-restricted
        (``n_landmarks > n_components``): ``(K^(-1/2) V_m)^T``, see
        ``n_landmarks``. In X's dtype.
    landmark_passes_ : int
        Passes over the data the fit made: the landmark selection's (the table
        under ``landmarks``) and the rank restriction's, the same for in-memory
        and dask input, plus the one that counts rows when a dask array's chunk
        sizes are unknown.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit. Defined only when ``X`` has
        feature names that are all strings.

    Notes
    -----
    ``transform`` maps one task per row block: ``k(block, components_) @
    normalization_.T``, a slice of rows at a time written into the block's
    output, so a task holds its block, its output (block_rows x n_components)
    and a few percent more (slices of ``block_rows x n_landmarks`` kernel
    values). The kernel is scikit-learn's ``pairwise_kernels`` per slice,
    except rbf on dense blocks: the same float64 arithmetic as
    scikit-learn's (its float32 upcast included, bit for bit) in buffers reused
    across slices, because dask's worker processes make every fresh temporary
    expensive (``MALLOC_TRIM_THRESHOLD_``; see
    ``dkapprox.kernels.RBFSlices``). float32 stays float32 (also
    for the laplacian kernel, which scikit-learn returns in float64); the
    landmarks and the normalization enter the graph once.

    Examples
    --------
    >>> import dask.array as da
    >>> from dkapprox.nystroem import Nystroem
    >>> X = da.random.default_rng(0).random((10_000, 8), chunks=(1_000, 8))
    >>> est = Nystroem(n_components=64, landmarks="kmeans", random_state=0).fit(X)
    >>> est.components_.shape, est.normalization_.shape
    ((64, 8), (64, 64))
    >>> Z = est.transform(X)
    >>> Z.numblocks, Z.dtype     # lazy: a dask array, nothing computed yet
    ((10, 1), dtype('float64'))
    >>> Z.compute().shape
    (10000, 64)

    More landmarks than features: 256 RPCholesky landmarks, the best rank-64 part kept.

    >>> est = Nystroem(n_components=64, n_landmarks=256, landmarks="rpcholesky", random_state=0).fit(X)
    >>> est.components_.shape, est.normalization_.shape, est.landmark_passes_
    ((256, 8), (64, 256), 2)
    >>> est.transform(X).shape
    (10000, 64)
    """

    _cli_name = "nystroem"

    def _exact_kernel(self):
        if is_precomputed(self.kernel):
            raise ValueError("A Nystroem on a precomputed kernel has no kernel to compare with: pass kernel=.")
        # a callable kernel is scikit-learn's k(x, y) -> float, evaluated pairwise
        metric, params = self.kernel, kernel_params(self)
        return lambda Xs: pairwise_kernels(Xs, metric=metric, **params)

    _parameter_constraints = {
        **_SkNystroem._parameter_constraints,
        "landmarks": [StrOptions(set(SELECTORS)), "array-like"],
        "landmark_params": [dict, None],
        "n_landmarks": [Interval(Integral, 1, None, closed="left"), None],
    }
    _accept_sparse = ("csr",)
    _block_fn = staticmethod(nystroem_features)

    def __init__(self, kernel="rbf", *, gamma=None, coef0=None, degree=None, kernel_params=None,
                 n_components=100, random_state=None, n_jobs=None, landmarks="uniform",
                 landmark_params=None, n_landmarks=None):
        self.kernel = kernel
        self.gamma = gamma
        self.coef0 = coef0
        self.degree = degree
        self.kernel_params = kernel_params
        self.n_components = n_components
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.landmarks = landmarks
        self.landmark_params = landmark_params
        self.n_landmarks = n_landmarks

    def _fit(self, X):
        kernel = Kernel.of(self)
        selector = self._selector(X, kernel)
        rows = row_source(X, check=self._block_check())
        if isinstance(selector, Given):
            n_components = n_landmarks = selector.components.shape[0]
        else:
            n_samples = rows.n_rows
            if kernel.precomputed and n_samples != X.shape[1]:
                raise ValueError(
                    f"kernel='precomputed' needs the square training kernel matrix at fit; "
                    f"got X of shape ({n_samples}, {X.shape[1]}).")
            n_components = self.n_components
            if n_components > n_samples:
                n_components = n_samples
                warnings.warn(
                    "n_components > n_samples. This is not possible.\n"
                    "n_components was set to n_samples, which results"
                    " in inefficient evaluation of the full kernel."
                )
            n_landmarks = n_components if self.n_landmarks is None else self.n_landmarks
            if n_landmarks > n_samples:
                if n_components < n_samples:  # else scikit-learn's warning above said it
                    warnings.warn("n_landmarks > n_samples: n_landmarks was set to n_samples.")
                n_landmarks = n_samples
        chosen = selector.select(rows, n_landmarks, kernel, check_random_state(self.random_state))
        self.components_ = _as_dtype(chosen.components, X.dtype)
        self.component_indices_ = chosen.indices
        basis_kernel = kernel.between(self.components_, self._landmarks(), n_jobs=self.n_jobs)
        rtol = default_rtol(n_landmarks, basis_kernel.dtype)
        normalization = inverse_sqrt(basis_kernel, rtol=rtol)
        if n_landmarks > n_components:  # rank restriction: one more pass, the sum of Z^T Z
            features = NystroemState(kernel, _as_dtype(self._landmarks(), np.float64),
                                     np.asarray(normalization, dtype=np.float64))
            gram = rows.reduce(gram_partial, gram_combine, GramState(features), running=True)
            normalization = restricted_normalization(gram, normalization, n_components)
        self.normalization_ = normalization.astype(X.dtype, copy=False)
        self.landmark_passes_ = rows.passes

    def _validate_params(self):
        """scikit-learn's checks of each parameter, then those between them (before any data is read:
        the command line calls this to refuse a bad ``--param`` with a usage error)."""
        super()._validate_params()
        if self.n_landmarks is None:
            return
        if not isinstance(self.landmarks, str):
            raise ValueError("n_landmarks is the number of landmarks to choose; with an array of "
                             "landmarks it must be None.")
        if self.n_landmarks < self.n_components:
            raise ValueError(
                f"n_landmarks must be None or >= n_components={self.n_components} (the output "
                f"width); got n_landmarks={self.n_landmarks}.")

    def _selector(self, X, kernel):
        if isinstance(self.landmarks, str):
            selector = make_selector(self.landmarks, self.landmark_params)
            if kernel.precomputed and self.landmarks != "uniform":
                raise ValueError(
                    f"landmarks={self.landmarks!r} needs the data points, not a precomputed kernel: "
                    "use landmarks='uniform' with kernel='precomputed'.")
            return selector
        if kernel.precomputed:
            raise ValueError("An array of landmarks needs the data points, not a precomputed kernel: "
                             "use landmarks='uniform' with kernel='precomputed'.")
        if self.landmark_params:
            raise ValueError("landmark_params has no options for an array of landmarks.")
        given = check_array(inputs.as_input(self.landmarks, dtype=None).in_memory(), accept_sparse="csr",
                            dtype=FLOAT_DTYPES, input_name="landmarks")
        if given.shape[1] != X.shape[1]:
            raise ValueError(
                f"landmarks has {given.shape[1]} features, but Nystroem is fitted on X with "
                f"{X.shape[1]} features.")
        return Given(given)

    def _repr_facts(self):
        method = self.landmarks if isinstance(self.landmarks, str) else "given array"
        passes = self.landmark_passes_
        n_landmarks, n_out = len(self.component_indices_), self._n_features_out
        restricted = f", restricted to their best rank {n_out}" if n_out < n_landmarks else ""
        return [("landmarks", f"{method}: {n_landmarks} rows{restricted}, chosen in {passes} "
                              f"pass{'es' if passes != 1 else ''} over the data")]

    def _landmarks(self):
        """What the kernel is evaluated against: rows, or columns for 'precomputed'."""
        return self.component_indices_ if Kernel.of(self).precomputed else self.components_

    @property
    def _n_features_out(self):
        return self.normalization_.shape[0]

    def _out_dtype(self, dtype):
        return np.result_type(dtype, self.normalization_.dtype)

    def _state(self, dtype):
        dtype = self._out_dtype(dtype)
        return NystroemState(Kernel.of(self), _as_dtype(self._landmarks(), dtype),
                             np.ascontiguousarray(self.normalization_.T, dtype=dtype))

    def _transform(self, X, given):
        if not given.lazy and self.n_jobs is not None:  # joblib inside dask tasks would oversubscribe
            state = self._state(backends.numpy_dtype(X))
            state = NystroemState(state.kernel, state.landmarks, state.normalization, self.n_jobs)
            return super()._transform(X, given, state=state)
        return super()._transform(X, given)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _as_dtype(a, dtype):
    """Float landmarks in ``dtype`` (index arrays and their dtype are left alone)."""
    if a.dtype.kind != "f":
        return a
    return a.astype(dtype, copy=False) if not sp.issparse(a) else a.astype(dtype)
