"""Each kernel's spectral distribution, checked against the exact kernels and by distribution tests."""

import numpy as np
import pytest
from scipy import stats
from sklearn.gaussian_process.kernels import Matern
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel

from dkapprox.random_features import cauchy_kernel
from dkapprox.random_features._sampling import gaussian_iid
from dkapprox.random_features.spectra import Spectrum

N_FEATURES = 3
N_DRAWS = 20_000
SPECTRA = [
    Spectrum("rbf", gamma=0.7),
    Spectrum("laplacian", gamma=0.4),
    Spectrum("cauchy", gamma=0.6),
    Spectrum("matern", nu=0.5, length_scale=2.0),
    Spectrum("matern", nu=1.5, length_scale=2.0),
    Spectrum("matern", nu=2.5, length_scale=0.5),
]


def frequencies(spectrum, route, seed=0):
    """(n_features, N_DRAWS) draws through the scale mixture or through the inverse CDF."""
    rs = np.random.RandomState(seed)
    if route == "mixture":
        return gaussian_iid(rs, N_FEATURES, N_DRAWS) * spectrum.scales(rs, N_DRAWS, N_FEATURES)
    return spectrum.from_uniform(rs.uniform(size=(N_DRAWS, N_FEATURES + spectrum.n_extra_uniforms)))


def marginal_law(spectrum):
    """The exact law of one coordinate (product spectra) or of ||w||^2 scaled (radial spectra)."""
    if spectrum.kernel == "rbf":
        return stats.norm(scale=np.sqrt(2 * spectrum.gamma))
    if spectrum.kernel == "laplacian":
        return stats.cauchy(scale=spectrum.gamma)
    if spectrum.kernel == "cauchy":
        return stats.laplace(scale=np.sqrt(spectrum.gamma))
    # multivariate Student-t: ||w||^2 l^2 / d ~ F(d, 2 nu)
    return stats.f(N_FEATURES, 2 * spectrum.nu)


@pytest.mark.parametrize("route", ["mixture", "inverse_cdf"])
@pytest.mark.parametrize("spectrum", SPECTRA, ids=repr)
def test_frequencies_follow_the_spectral_law(spectrum, route):
    W = frequencies(spectrum, route)
    if spectrum.kernel == "matern":
        sample = (W ** 2).sum(axis=0) * spectrum.length_scale ** 2 / N_FEATURES
    else:
        sample = W[0]
    assert stats.kstest(sample, marginal_law(spectrum).cdf).pvalue > 1e-3
    if spectrum.kernel != "matern":  # coordinates independent and identically distributed
        assert stats.kstest(W[1], marginal_law(spectrum).cdf).pvalue > 1e-3
        # a shared (multivariate) scale would make |w_0| and |w_2| rank-correlated
        assert abs(stats.spearmanr(np.abs(W[0]), np.abs(W[2])).statistic) < 0.05


@pytest.mark.parametrize("spectrum", SPECTRA, ids=repr)
def test_characteristic_function_is_the_exact_kernel(spectrum):
    """Bochner: E cos(w . (x - y)) is k(x, y), for the exact kernel of scikit-learn."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(6, N_FEATURES))
    W = frequencies(spectrum, "mixture", seed=2)
    diffs = (X[:, None, :] - X[None, :, :]).reshape(-1, N_FEATURES)
    estimate = np.cos(diffs @ W).mean(axis=1).reshape(6, 6)
    # Monte Carlo: standard error at most 1/sqrt(2 N); 6 standard errors
    np.testing.assert_allclose(estimate, spectrum.kernel_matrix(X), atol=6 / np.sqrt(2 * N_DRAWS))


def test_kernel_matrices_are_scikit_learns():
    X = np.random.default_rng(3).normal(size=(5, 4))
    Y = np.random.default_rng(4).normal(size=(3, 4))
    np.testing.assert_allclose(Spectrum("rbf", gamma=0.3).kernel_matrix(X, Y), rbf_kernel(X, Y, gamma=0.3))
    np.testing.assert_allclose(Spectrum("laplacian", gamma=0.3).kernel_matrix(X, Y),
                               laplacian_kernel(X, Y, gamma=0.3))
    np.testing.assert_allclose(Spectrum("matern", nu=2.5, length_scale=1.7).kernel_matrix(X, Y),
                               Matern(length_scale=1.7, nu=2.5)(X, Y))
    # nu = 1/2 is the exponential kernel of the L2 distance, not the L1 Laplacian
    dist = np.sqrt(((X[:, None] - Y[None]) ** 2).sum(-1))
    np.testing.assert_allclose(Spectrum("matern", nu=0.5, length_scale=1.7).kernel_matrix(X, Y),
                               np.exp(-dist / 1.7))


def test_cauchy_kernel_is_the_product_formula():
    X = np.random.default_rng(5).normal(size=(4, 3))
    Y = np.random.default_rng(6).normal(size=(2, 3))
    expected = np.prod(1.0 / (1.0 + 0.8 * (X[:, None, :] - Y[None, :, :]) ** 2), axis=-1)
    np.testing.assert_allclose(cauchy_kernel(X, Y, gamma=0.8), expected)
    K = cauchy_kernel(X, gamma=0.8)
    np.testing.assert_allclose(np.diag(K), 1.0)
    assert np.all(np.linalg.eigvalsh(K) > -1e-12)
