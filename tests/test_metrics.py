"""kernel_approximation_error: the direct computation on the same sample, whatever the input's chunking."""

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from _arrays import rows_where
from sklearn.exceptions import NotFittedError
from sklearn.kernel_approximation import Nystroem
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel
from sklearn.utils.random import sample_without_replacement

from dkapprox import (
    AdditiveChi2Sampler,
    GaussianRandomProjection,
    PolynomialCountSketch,
    RandomBinningFeatures,
    RandomFourierFeatures,
    RBFSampler,
    SkewedChi2Sampler,
    cauchy_kernel,
)
from dkapprox.metrics import chi2_sum_kernel, kernel_approximation_error, skewed_chi2_kernel
from dkapprox.nystroem import Nystroem as DkNystroem


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).uniform(0.01, 1.0, size=(3_000, 5))


def test_equals_the_direct_computation_on_the_seeded_sample(X):
    rff = RBFSampler(gamma=0.7, n_components=300, random_state=1).fit(X)
    result = kernel_approximation_error(rff, X, n_samples=400, random_state=5)
    rows = np.sort(sample_without_replacement(len(X), 400, random_state=np.random.RandomState(5)))
    K = rbf_kernel(X[rows], gamma=0.7)
    Z = rff.transform(X[rows])
    diff = K - Z @ Z.T
    assert result.n_samples == 400
    assert result.frobenius == pytest.approx(np.linalg.norm(diff) / np.linalg.norm(K), rel=1e-10)
    assert result.spectral == pytest.approx(np.linalg.norm(diff, 2) / np.linalg.norm(K, 2), rel=1e-8)
    assert 0 < result.spectral < result.frobenius < 1


@pytest.mark.parametrize("chunks", [(97, -1), (1000, 2), (3000, -1)])
@pytest.mark.parametrize("nystroem", [Nystroem, DkNystroem], ids=["sklearn", "dkapprox"])
def test_dask_input_gives_the_same_errors_whatever_the_chunking(X, chunks, nystroem):
    nys = nystroem(gamma=0.7, n_components=40, random_state=0).fit(X)
    ref = kernel_approximation_error(nys, X, n_samples=300, random_state=2)
    ours = kernel_approximation_error(nys, da.from_array(X, chunks=chunks), n_samples=300, random_state=2)
    assert ours == ref
    Xd = da.from_array(X, chunks=chunks)
    unknown = rows_where(Xd, Xd[:, 0] > -1.0)  # every row kept, but the row chunk sizes are unknown (NaN)
    assert kernel_approximation_error(nys, unknown, n_samples=300, random_state=2) == ref


def test_error_shrinks_with_more_components_and_vanishes_on_the_landmarks(X):
    errors = [kernel_approximation_error(RBFSampler(gamma=0.7, n_components=m, random_state=0).fit(X), X,
                                         n_samples=300, random_state=0).frobenius for m in (30, 300, 3000)]
    assert errors[0] > errors[1] > errors[2]
    assert errors[0] / errors[2] > 5  # Monte Carlo: about sqrt(100) = 10 from 30 to 3000 components
    small = X[:200]
    exact = Nystroem(gamma=0.7, n_components=200, random_state=0).fit(small)  # every row a landmark
    assert kernel_approximation_error(exact, small, n_samples=200).frobenius < 1e-6


def test_inferred_kernels(X):
    cases = [
        (SkewedChi2Sampler(skewedness=0.5, n_components=2000, random_state=0),
         lambda A, B: skewed_chi2_kernel(A, B, skewedness=0.5)),
        (AdditiveChi2Sampler(sample_steps=3), chi2_sum_kernel),
        (PolynomialCountSketch(degree=2, gamma=0.5, coef0=1.0, n_components=2000, random_state=0),
         lambda A, B: (0.5 * A @ B.T + 1.0) ** 2),
        (GaussianRandomProjection(n_components=3, random_state=0), lambda A, B: A @ B.T),
        (RandomFourierFeatures(n_components=2000, kernel="laplacian", gamma=0.5, random_state=0),
         lambda A, B: laplacian_kernel(A, B, gamma=0.5)),
        (RandomFourierFeatures(n_components=2000, kernel="cauchy", gamma=0.5, random_state=0),
         lambda A, B: cauchy_kernel(A, B, gamma=0.5)),
        (RandomBinningFeatures(n_components=2**16, n_grids=256, gamma=0.5, random_state=0),
         lambda A, B: laplacian_kernel(A, B, gamma=0.5)),
    ]
    for transformer, kernel in cases:
        transformer.fit(X)
        inferred = kernel_approximation_error(transformer, X, n_samples=200, random_state=0)
        given = kernel_approximation_error(transformer, X, n_samples=200, random_state=0, kernel=kernel)
        assert inferred == given, type(transformer).__name__
        assert inferred.frobenius < 0.2 if not isinstance(transformer, GaussianRandomProjection) else True


def test_kernels_equal_their_formulas():
    rng = np.random.default_rng(1)
    A, B = rng.uniform(0, 2, size=(7, 4)), rng.uniform(0, 2, size=(5, 4))
    brute_skewed = np.array([[np.prod(2 * np.sqrt(a + 0.3) * np.sqrt(b + 0.3) / (a + b + 0.6)) for b in B]
                             for a in A])
    np.testing.assert_allclose(skewed_chi2_kernel(A, B, skewedness=0.3), brute_skewed, rtol=1e-12)
    brute_chi2 = np.array([[np.sum(2 * a * b / (a + b)) for b in B] for a in A])
    np.testing.assert_allclose(chi2_sum_kernel(A, B), brute_chi2, rtol=1e-12)
    np.testing.assert_allclose(chi2_sum_kernel(sp.csr_matrix(A), sp.csr_matrix(B)), brute_chi2, rtol=1e-12)


def test_errors(X):
    with pytest.raises(NotFittedError):
        kernel_approximation_error(RBFSampler(), X)
    with pytest.raises(ValueError, match="pass kernel="):
        kernel_approximation_error(Nystroem(kernel="precomputed", n_components=10).fit(X[:10] @ X[:10].T),
                                   X[:10] @ X[:10].T)
    with pytest.raises(ValueError, match="n_samples must be a positive integer"):
        kernel_approximation_error(RBFSampler().fit(X), X, n_samples=0)
