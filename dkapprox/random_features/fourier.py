"""RandomFourierFeatures: random Fourier features for several kernels and samplers.

Rahimi and Recht (2007) for the feature map; Yu et al. (2016) for orthogonal
and structured orthogonal frequencies; Yang et al. (2014) and Avron et al.
(2016) for quasi-Monte Carlo frequencies.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state

from .. import backends
from .._base import BlockwiseTransformer
from ..engine import SizedState
from ..utils import Interval, StrOptions
from . import _sampling
from .hadamard import StructuredProjection, structured_project
from .spectra import KERNELS, Spectrum

SAMPLINGS = ("iid", "orthogonal", "structured", "qmc")


@dataclass(frozen=True)
class RandomFeatureState(SizedState):
    """Frequencies (a dense matrix or a structured projection) and the cos offsets.

    ``offset is None`` means paired sin and cos features.
    """

    weights: np.ndarray | StructuredProjection  # dense: (n_features, n_frequencies)
    offset: np.ndarray | None  # (n_frequencies,)


def random_fourier_features(block, state):
    """``sqrt(2/D) cos(X W + b)``, or ``sqrt(2/D) [cos(X W), sin(X W)]`` with D/2 frequencies."""
    structured = isinstance(state.weights, StructuredProjection)
    n_freq = state.weights.n_frequencies if structured else state.weights.shape[1]
    scale = math.sqrt(2.0 / n_freq) if state.offset is not None else math.sqrt(1.0 / n_freq)
    xp = backends.namespace(block)
    if xp is not None:
        state = backends.state_on(state, block)
        product = structured_project(block, state.weights) if structured else block @ state.weights
        return backends.fourier(xp, product, state.offset, scale)
    project = (lambda b: structured_project(b, state.weights)) if structured else None
    return backends.fourier_map(block, state.weights, state.offset, scale, project=project)


class RandomFourierFeatures(BlockwiseTransformer):
    """Random Fourier features for the RBF, Laplacian, Cauchy and Matern kernels.

    ``transform(X) @ transform(Y).T`` is an unbiased (``sampling='structured'``:
    nearly unbiased) Monte Carlo estimate of the kernel matrix
    ``k(X, Y)``. Frequencies are drawn on the driver with NumPy in float64
    and cast to the data's dtype, so the frequencies never depend on
    chunking (a row's features in other row blocks are equal within the
    rounding bound of its dot products) and float32 and float64 fits see
    the same numbers; for dask
    input ``transform`` is lazy and ships the frequencies to the graph once.

    Parameters
    ----------
    n_components : int, default=100
        Number of output features. With ``features='sincos'`` it must be
        even: ``n_components / 2`` frequencies, each giving a cos and a sin.
    kernel : {'rbf', 'laplacian', 'cauchy', 'matern'}, default='rbf'
        The kernel approximated:

        - ``'rbf'``: ``exp(-gamma ||x - y||_2^2)``, as
          :func:`sklearn.metrics.pairwise.rbf_kernel` (Gaussian frequencies);
        - ``'laplacian'``: ``exp(-gamma ||x - y||_1)``, as
          :func:`sklearn.metrics.pairwise.laplacian_kernel` (independent
          Cauchy frequencies per coordinate);
        - ``'cauchy'``: ``prod_j 1 / (1 + gamma (x_j - y_j)^2)``, as
          :func:`dkapprox.cauchy_kernel` (Laplace frequencies);
        - ``'matern'``: :class:`sklearn.gaussian_process.kernels.Matern` with
          ``length_scale`` and ``nu`` (multivariate Student-t frequencies
          with ``2 nu`` degrees of freedom).
    gamma : float, default=1.0
        Kernel coefficient of 'rbf', 'laplacian' and 'cauchy'; ignored by 'matern'.
    nu : float, default=1.5
        Smoothness of 'matern' (0.5, 1.5 and 2.5 are the usual choices, any
        positive finite value works); ignored by the other kernels.
    length_scale : float, default=1.0
        Length scale of 'matern'; ignored by the other kernels.
    features : {'cos', 'sincos'}, default='cos'
        ``'cos'``: ``sqrt(2/D) cos(w.x + b)`` with uniform offsets ``b``
        (scikit-learn's form). ``'sincos'``: ``sqrt(2/D) (cos(w.x), sin(w.x))``
        pairs without offsets, which estimate the kernel with lower variance
        at the same ``n_components``. The cos features come first, then the
        sin features of the same frequencies.
    sampling : {'iid', 'orthogonal', 'structured', 'qmc'}, default='iid'
        How frequencies are drawn:

        - ``'iid'``: independently (Rahimi and Recht 2007). With
          ``kernel='rbf'`` and ``features='cos'`` the numbers are
          scikit-learn's ``RBFSampler``'s for the same seed.
        - ``'orthogonal'``: blocks of ``n_features`` frequencies whose Gaussian
          parts are the columns of a Haar-random orthogonal matrix rescaled by
          chi-distributed norms (Yu et al. 2016); each frequency keeps the
          kernel's exact distribution. For radial spectra (rbf, matern) the
          frequencies of a block are orthogonal. For the product spectra
          (laplacian, cauchy) each frequency's coordinates are then scaled by
          their own independent scale-mixture draw, so only the Gaussian parts
          are orthogonal (see ``dkapprox.random_features.spectra``).
          Measured: 0.3-0.75 of the iid error on rbf, little or no gain on
          laplacian and matern with nu=0.5, whose heavy-tailed scales dominate.
        - ``'structured'``: stacked ``H D1 H D2 H D3`` blocks (Walsh-Hadamard
          ``H``, random signs ``Di``; structured orthogonal random features),
          applied with a fast Walsh-Hadamard transform in
          ``O(n_components log n_features)`` per row after padding
          ``n_features`` to a power of two; the dense matrix is never built.
          It beats a float32 GEMM from about 1024 features on (one core,
          4096 components: about 2x at 1024 features, 5-6x at 4096;
          ``benchmarks/bench_random_features.py``); below that the dense
          product of 'orthogonal' is faster.
          Rows are rescaled by the kernel's radial distribution. For the
          product spectra (laplacian, cauchy) one draw of coordinate scales
          is shared by each block of the padded size: still unbiased, but
          the error is several times iid's (measured 4-18x for laplacian,
          1-2x for cauchy in ``benchmarks/bench_random_features.py``), and
          fit warns; prefer 'qmc' for those kernels.
        - ``'qmc'``: a scrambled Sobol sequence seeded from ``random_state``,
          mapped through the spectral distribution's inverse CDF
          (:mod:`scipy.stats.qmc`).
    random_state : int, RandomState instance or None, default=None
        Seed of every random draw, made on the driver with NumPy.

    Attributes
    ----------
    random_weights_ : ndarray of shape (n_features, n_frequencies)
        The frequencies as columns, float64 (not with 'structured').
    random_offset_ : ndarray of shape (n_frequencies,) or None
        Offsets of the cos features, float64; None with 'sincos'.
    hadamard_signs_ : ndarray of shape (n_blocks, 3, padded_n_features)
        The +-1 diagonals D1, D2, D3 of each block ('structured' only).
    row_scales_ : ndarray of shape (n_frequencies,)
        Radial scale of each structured frequency, ``1 / padded**1.5``
        included ('structured' only).
    input_scales_ : ndarray of shape (n_blocks, n_features) or None
        Coordinate scales of each block for the product spectra, None for
        radial ones ('structured' only).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit. Defined only when ``X`` has
        feature names that are all strings.

    See Also
    --------
    dkapprox.RBFSampler : scikit-learn's RBF random Fourier features.
    RandomBinningFeatures : sparse random features of the Laplacian kernel.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.metrics.pairwise import laplacian_kernel
    >>> from dkapprox.random_features import RandomFourierFeatures
    >>> X = np.random.default_rng(0).normal(size=(50, 4))
    >>> rff = RandomFourierFeatures(4096, kernel="laplacian", gamma=0.3,
    ...                             features="sincos", sampling="orthogonal", random_state=0)
    >>> Z = rff.fit_transform(X)
    >>> Z.shape
    (50, 4096)
    >>> bool(np.abs(Z @ Z.T - laplacian_kernel(X, gamma=0.3)).max() < 0.1)
    True
    """

    # --method fourier: named for the technique, not a kernel, as one class serves four kernels
    # (--param kernel=laplacian); "rbf" stays scikit-learn's RBFSampler
    _cli_name = "fourier"

    def _exact_kernel(self):
        return Spectrum(self.kernel, float(self.gamma), float(self.nu), float(self.length_scale)).kernel_matrix

    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "kernel": [StrOptions(set(KERNELS))],
        "gamma": [Interval(Real, 0.0, None, closed="left")],
        "nu": [Interval(Real, 0.0, None, closed="neither")],
        "length_scale": [Interval(Real, 0.0, None, closed="neither")],
        "features": [StrOptions({"cos", "sincos"})],
        "sampling": [StrOptions(set(SAMPLINGS))],
        "random_state": ["random_state"],
    }
    _block_fn = staticmethod(random_fourier_features)

    def __init__(self, n_components=100, *, kernel="rbf", gamma=1.0, nu=1.5, length_scale=1.0,
                 features="cos", sampling="iid", random_state=None):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.nu = nu
        self.length_scale = length_scale
        self.features = features
        self.sampling = sampling
        self.random_state = random_state

    def _validate_params(self):
        """scikit-learn's checks of each parameter, then the one between two: sincos needs an even width.

        Here rather than in ``_fit`` so that every caller that validates before reading data
        (``dkapprox featurize --param features=sincos``, a model file's load) refuses it too.
        """
        super()._validate_params()
        if self.features == "sincos" and self.n_components % 2:
            n = self.n_components
            even = f"{n - 1} or {n + 1}" if n > 1 else f"{n + 1}"
            raise ValueError(
                f"n_components must be even with features='sincos' (each frequency gives a cos "
                f"and a sin feature); got n_components={n}. Use {even}, or features='cos'.")

    def _fit(self, X):
        rs = check_random_state(self.random_state)
        n_features = X.shape[1]
        with_offset = self.features == "cos"
        n_freq = self.n_components if with_offset else self.n_components // 2
        spectrum = Spectrum(self.kernel, float(self.gamma), float(self.nu), float(self.length_scale))
        offset = None
        if self.sampling == "structured":
            if not spectrum.radial:
                warnings.warn(
                    f"sampling='structured' shares one draw of coordinate scales per block for the "
                    f"{self.kernel} kernel's product spectrum: unbiased, but with several times the "
                    f"error of sampling='iid' at equal n_components; sampling='qmc' is both accurate "
                    f"and cheap for this kernel.", UserWarning, stacklevel=3)
            proj = _sampling.structured(rs, spectrum, n_features, n_freq)
            self.hadamard_signs_ = proj.signs
            self.row_scales_ = proj.row_scales
            self.input_scales_ = proj.input_scales
        elif self.sampling == "qmc":
            n_uniforms = n_features + spectrum.n_extra_uniforms
            U = _sampling.qmc_uniform(rs, n_freq, n_uniforms + with_offset)
            self.random_weights_ = spectrum.from_uniform(U[:, :n_uniforms])
            if with_offset:
                offset = 2.0 * np.pi * U[:, n_uniforms]
        else:
            draw = _sampling.gaussian_iid if self.sampling == "iid" else _sampling.gaussian_orthogonal
            self.random_weights_ = draw(rs, n_features, n_freq) * spectrum.scales(rs, n_freq, n_features)
        if with_offset and self.sampling != "qmc":  # after the weights: RBFSampler's order
            offset = rs.uniform(0, 2 * np.pi, size=n_freq)
        self.random_offset_ = offset

    @property
    def _n_features_out(self):
        return self.n_components

    def _state(self, dtype):
        def cast(a):
            return None if a is None else a.astype(dtype, copy=False)

        if self.sampling == "structured":
            weights = StructuredProjection(cast(self.hadamard_signs_), cast(self.row_scales_),
                                           cast(self.input_scales_))
        else:
            weights = cast(self.random_weights_)
        return RandomFeatureState(weights, cast(self.random_offset_))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
