"""How the Gaussian part of the frequencies is drawn: iid, orthogonal, quasi-Monte Carlo, structured.

Every function draws from a ``numpy.random.RandomState`` on the driver, in
float64, with the same number of draws whatever the data's dtype or chunking.
Frequencies are *columns* (shape ``(n_features, n_frequencies)``), as in
scikit-learn's ``RBFSampler.random_weights_``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import qmc

from .hadamard import StructuredProjection

# scipy's Sobol direction numbers stop at this dimension
_SOBOL_MAX_DIM = 21201
# uniforms at exactly 0 or 1 would map to infinite frequencies
_U_EPS = 2.0 ** -53


def gaussian_iid(rs, n_features, n_frequencies):
    """Independent standard Gaussian frequencies (Rahimi and Recht 2007)."""
    return rs.normal(size=(n_features, n_frequencies))


def gaussian_orthogonal(rs, n_features, n_frequencies):
    """Orthogonal random features (Yu et al. 2016), Gaussian marginals.

    Stacked blocks of ``n_features`` columns; each block is a Haar-random
    orthogonal matrix (QR of a Gaussian matrix with the signs of R's diagonal
    fixed, Mezzadri 2007) whose columns are rescaled by independent
    chi(n_features) norms, so every column is exactly N(0, I) while the
    columns of one block are orthogonal.
    """
    blocks = []
    for _ in range(math.ceil(n_frequencies / n_features)):
        q, r = np.linalg.qr(rs.normal(size=(n_features, n_features)))
        q *= np.sign(np.diag(r))
        q *= np.sqrt(rs.chisquare(n_features, size=n_features))
        blocks.append(q)
    return np.hstack(blocks)[:, :n_frequencies]


def qmc_uniform(rs, n_points, dim):
    """Scrambled Sobol points ``(n_points, dim)`` in (0, 1), seeded from ``rs``.

    The first ``n_points`` of a scrambled Sobol sequence of ``2**ceil(log2 n_points)``
    points; scrambled Halton beyond Sobol's 21201 dimensions.
    """
    seed = np.random.default_rng(rs.randint(np.iinfo(np.int32).max))
    if dim <= _SOBOL_MAX_DIM:
        points = qmc.Sobol(dim, scramble=True, rng=seed).random_base2(max(0, math.ceil(math.log2(n_points))))
    else:
        points = qmc.Halton(dim, scramble=True, rng=seed).random(n_points)
    return np.clip(points[:n_points], _U_EPS, 1.0 - _U_EPS)


def structured(rs, spectrum, n_features, n_frequencies):
    """A :class:`StructuredProjection` whose columns follow ``spectrum``'s distribution.

    ``p`` is ``n_features`` padded to a power of two; each block of ``p``
    frequencies is ``H D1 H D2 H D3 / p**1.5`` (orthogonal, rows close to
    uniform directions), its rows rescaled by chi(p) norms so that a row
    restricted to the first ``n_features`` coordinates is close to N(0, I).
    Radial spectra multiply the row scale by the frequency's own scale. The
    product spectra (laplacian, cauchy) cannot keep a per-row, per-coordinate
    scale without losing the fast transform: each *block* shares one draw of
    coordinate scales, applied to the input (``H D1 H D2 H D3 diag(s_b)``),
    so every frequency still has the exact product distribution (to the
    structured approximation of a Gaussian) but the frequencies of a block
    share their scales, which adds variance across blocks.
    """
    p = 1 << max(0, (n_features - 1).bit_length())
    n_blocks = math.ceil(n_frequencies / p)
    signs = rs.randint(0, 2, size=(n_blocks, 3, p)).astype(np.float64) * 2.0 - 1.0
    row_scales = np.sqrt(rs.chisquare(p, size=n_frequencies)) / p ** 1.5
    if spectrum.radial:
        row_scales *= spectrum.scales(rs, n_frequencies, n_features)
        input_scales = None
    else:
        input_scales = np.ascontiguousarray(spectrum.scales(rs, n_blocks, n_features).T)
    return StructuredProjection(signs, row_scales, input_scales)
