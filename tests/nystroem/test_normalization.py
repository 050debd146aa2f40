"""The normalization: scikit-learn's matrix where K is well conditioned, bounded where it is not."""

import numpy as np
import pytest
from sklearn.kernel_approximation import Nystroem as SkNystroem
from sklearn.metrics.pairwise import pairwise_kernels

from dkapprox.nystroem import Nystroem
from dkapprox.nystroem.normalization import default_rtol, inverse_sqrt


def sklearn_normalization(K):
    U, S, V = np.linalg.svd(K)
    return U / np.sqrt(np.clip(S, 1e-12, None)) @ V


@pytest.mark.parametrize("indefinite", [False, True])
def test_equals_sklearn_svd_formula_when_well_conditioned(seed, indefinite):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(30, 30)))
    w = rng.uniform(0.5, 5.0, size=30) * (np.where(rng.random(30) < 0.3, -1, 1) if indefinite else 1)
    K = (Q * w) @ Q.T
    N = inverse_sqrt(K, rtol=default_rtol(30, np.float64))
    np.testing.assert_allclose(N, sklearn_normalization(K), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(N, N.T, rtol=0, atol=1e-14)
    # N K N = sign(K): identity for a PSD kernel
    np.testing.assert_allclose(N @ K @ N, (Q * np.sign(w)) @ Q.T, atol=1e-12)


def test_tiny_eigenvalues_are_cut_relative_to_the_largest():
    Q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(10, 10)))
    w = np.array([1e6, 1e5, 1.0, 1e-3, 1e-8, 1e-9, 1e-10, 1e-12, 0.0, -1e-11])
    N = inverse_sqrt((Q * w) @ Q.T, rtol=1e-12)  # cut at 1e-12 * 1e6 = 1e-6
    w_N = np.sort(np.abs(np.linalg.eigvalsh(N)))[::-1]
    np.testing.assert_allclose(w_N[:4], [1e-3 ** -0.5, 1.0, 1e5 ** -0.5, 1e6 ** -0.5], rtol=1e-6)
    assert (w_N[4:] < 1e-6).all()  # the six smallest count as zero
    assert np.abs(N).max() < 40  # scikit-learn's clip at 1e-12 would put 1e6 there


def test_default_rtol_is_the_float64_rank_tolerance_or_the_kernel_rounding():
    assert default_rtol(1024, np.float64) == 1024 * np.finfo(np.float64).eps
    assert default_rtol(1024, np.float32) == np.finfo(np.float32).eps
    assert default_rtol(10, np.float64) == 10 * np.finfo(np.float64).eps


def relative_kernel_error(Z, K):
    Z = Z.astype(np.float64)
    return np.linalg.norm(Z @ Z.T - K) / np.linalg.norm(K)


def test_float32_ill_conditioned_kernel_does_not_blow_up():
    X = np.random.default_rng(0).random((3000, 6))
    K = pairwise_kernels(X[:500], metric="poly")
    X32 = X.astype(np.float32)
    def error(cls, data):
        Z = cls(kernel="poly", n_components=256, random_state=0).fit(data).transform(data[:500])
        return relative_kernel_error(Z, K)

    ours, theirs, exact64 = error(Nystroem, X32), error(SkNystroem, X32), error(Nystroem, X)
    assert exact64 < 1e-8  # the polynomial kernel on 6 features has rank 84 < 256
    assert ours < 2e-5 and ours < theirs / 10, (ours, theirs)


def test_duplicate_landmarks_reproduce_the_kernel_on_their_span():
    X = np.random.default_rng(0).random((50, 3)).astype(np.float32)
    landmarks = np.concatenate([X[:10], X[:10]])  # every landmark twice: K has rank 10 of 20
    est = Nystroem(landmarks=landmarks, gamma=1.0).fit(X)
    Z = est.transform(X).astype(np.float64)
    assert np.isfinite(Z).all() and np.abs(Z).max() < 2
    K = pairwise_kernels(X.astype(np.float64), X[:10].astype(np.float64), metric="rbf", gamma=1.0)
    np.testing.assert_allclose(Z @ Z[:10].T, K, atol=1e-4)
