"""The fast Walsh-Hadamard transform and the structured projection against dense matrices."""

import numpy as np
import pytest
from scipy.linalg import hadamard

from dkapprox.random_features import RandomFourierFeatures
from dkapprox.random_features._sampling import structured
from dkapprox.random_features.hadamard import StructuredProjection, dense_matrix, fwht, structured_project
from dkapprox.random_features.spectra import Spectrum

# structured sampling of the product spectra warns on purpose (tested below)
pytestmark = pytest.mark.filterwarnings("ignore:sampling='structured' shares:UserWarning")


@pytest.mark.parametrize("p", [1, 2, 4, 8, 16, 32, 64, 128, 256, 4096])
def test_fwht_is_the_hadamard_matrix_product(p, dtype):
    # 600 rows of 4096: more than one slab, so the slab loop is exercised
    a = np.random.default_rng(p).normal(size=(600 if p == 4096 else 7, p)).astype(dtype)
    expected = a.astype(np.float64) @ hadamard(p)
    out = fwht(a)
    assert out is a and out.dtype == dtype
    tol = 1e-9 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * np.sqrt(p))


def test_fwht_rejects_what_it_cannot_transform_in_place():
    with pytest.raises(ValueError, match="power of two, got 12"):
        fwht(np.zeros((2, 12)))
    with pytest.raises(ValueError, match="C-contiguous"):
        fwht(np.zeros((16, 2)).T)


@pytest.mark.parametrize("kernel", ["rbf", "matern", "laplacian", "cauchy"])
@pytest.mark.parametrize("n_features, n_frequencies", [(13, 40), (16, 16), (1, 5), (33, 200)])
def test_structured_transform_equals_the_dense_matrix_it_represents(kernel, n_features, n_frequencies, dtype):
    proj = structured(np.random.RandomState(0), Spectrum(kernel, gamma=0.5), n_features, n_frequencies)
    W = dense_matrix(proj, n_features)
    assert W.shape == (n_features, n_frequencies)
    X = np.random.default_rng(1).normal(size=(50, n_features))
    cast = StructuredProjection(proj.signs.astype(dtype), proj.row_scales.astype(dtype),
                      None if proj.input_scales is None else proj.input_scales.astype(dtype))
    out = structured_project(X.astype(dtype), cast)
    assert out.dtype == dtype
    tol = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(out, X @ W, rtol=tol, atol=tol * np.abs(X @ W).max())


def test_structured_blocks_are_orthogonal_when_nothing_is_padded():
    proj = structured(np.random.RandomState(2), Spectrum("rbf"), 16, 48)
    W = dense_matrix(proj, 16)
    for start in (0, 16, 32):
        gram = W[:, start:start + 16].T @ W[:, start:start + 16]
        np.testing.assert_allclose(gram - np.diag(np.diag(gram)), 0.0, atol=1e-10)


def test_estimator_features_are_cos_of_the_dense_frequencies():
    X = np.random.default_rng(3).normal(size=(20, 10))
    est = RandomFourierFeatures(50, kernel="cauchy", gamma=0.2, sampling="structured", random_state=4).fit(X)
    proj = StructuredProjection(est.hadamard_signs_, est.row_scales_, est.input_scales_)
    W = dense_matrix(proj, 10)
    np.testing.assert_allclose(est.transform(X), np.sqrt(2 / 50) * np.cos(X @ W + est.random_offset_),
                               atol=1e-12)
