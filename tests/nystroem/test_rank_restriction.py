"""Rank-restricted Nystroem (n_landmarks > n_components): m features, the best rank-m part of l landmarks."""

import functools
import warnings

import array_api_strict as xs
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from _rounding import compute_checked
from scipy import linalg
from sklearn.datasets import load_digits
from sklearn.kernel_approximation import Nystroem as SkNystroem
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from dkapprox.models import load, save
from dkapprox.nystroem import Nystroem

METHODS = ["uniform", "kmeans", "leverage", "rpcholesky"]


def digits():
    X = StandardScaler().fit_transform(load_digits().data)
    return X, 1.0 / (X.shape[1] * X.var())


@functools.lru_cache(maxsize=1)
def digits_kernel():
    """The rbf kernel matrix of standardized digits and its eigenvalues, largest first (once per run)."""
    X, gamma = digits()
    K = rbf_kernel(X, gamma=gamma)
    with threadpool_limits(1):  # two BLAS threads on a busy 2-core machine: many times slower
        w = np.clip(linalg.eigvalsh(K), 0, None)[::-1]
    return K, w


def relative_error(K, Z):
    return np.linalg.norm(K - Z @ Z.T) / np.linalg.norm(K)


@pytest.mark.parametrize("method", METHODS)
def test_restriction_gives_m_features_and_beats_plain_nystroem_on_digits(method):
    X, gamma = digits()
    K, w = digits_kernel()
    m = 32
    optimal = np.sqrt(np.sum(w[m:] ** 2)) / np.linalg.norm(K)
    plain = Nystroem(gamma=gamma, n_components=m, landmarks=method, random_state=0).fit(X)
    restricted = Nystroem(gamma=gamma, n_components=m, n_landmarks=4 * m, landmarks=method, random_state=0).fit(X)
    Z = restricted.transform(X)
    assert Z.shape == (len(X), m)
    assert restricted._n_features_out == m
    np.testing.assert_array_equal(restricted.get_feature_names_out(), [f"nystroem{i}" for i in range(m)])
    assert restricted.components_.shape == (4 * m, X.shape[1])
    assert restricted.component_indices_.shape == (4 * m,)
    assert restricted.normalization_.shape == (m, 4 * m)
    assert isinstance(restricted.normalization_, np.ndarray)
    plain_error, restricted_error = relative_error(K, plain.transform(X)), relative_error(K, Z)
    # plain Nystroem(32) is 1.5-2.8x the optimum here; four times the landmarks, restricted, 1.02-1.3x
    assert restricted_error <= plain_error
    assert restricted_error < 1.35 * optimal, (restricted_error / optimal, plain_error / optimal)


def test_restriction_is_the_truncated_svd_of_the_plain_features():
    """Z_r Z_r^T is the best rank-m part of Z_l Z_l^T, Z_l the plain features of the same l landmarks."""
    X, gamma = digits()
    X = X[:600]
    m = 12
    restricted = Nystroem(gamma=gamma, n_components=m, n_landmarks=4 * m, random_state=3).fit(X)
    plain = Nystroem(gamma=gamma, landmarks=restricted.components_).fit(X)
    U, s, _ = np.linalg.svd(plain.transform(X), full_matrices=False)
    best = (U[:, :m] * s[:m] ** 2) @ U[:, :m].T
    Z = restricted.transform(X)
    np.testing.assert_allclose(Z @ Z.T, best, rtol=0, atol=1e-9 * s[0] ** 2)
    # the features come in the order of the eigenvalues of Z^T Z, largest first
    np.testing.assert_allclose(np.sum(Z * Z, axis=0), s[:m] ** 2, rtol=1e-9)
    # and hold nothing else: Z^T Z is diagonal
    gram = Z.T @ Z
    np.testing.assert_allclose(gram - np.diag(np.diag(gram)), 0, atol=1e-9 * s[0] ** 2)


@pytest.mark.parametrize("n_landmarks", [None, 30])
def test_default_and_n_landmarks_equal_n_components_keep_sklearn_numbers(n_landmarks):
    X = np.random.default_rng(1).random((150, 6))
    ours = Nystroem(n_components=30, n_landmarks=n_landmarks, random_state=4).fit(X)
    theirs = SkNystroem(n_components=30, random_state=4).fit(X)
    assert ours.landmark_passes_ == 1  # no restriction pass
    np.testing.assert_array_equal(ours.component_indices_, theirs.component_indices_)
    np.testing.assert_allclose(ours.normalization_, theirs.normalization_, rtol=0,
                               atol=1e-10 * np.abs(theirs.normalization_).max())
    np.testing.assert_allclose(ours.transform(X), theirs.transform(X), rtol=1e-10, atol=1e-10)
    assert Nystroem().get_params()["n_landmarks"] is None


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("method", ["uniform", "leverage", "rpcholesky"])
def test_restricted_fit_on_dask_equals_fit_on_numpy(method, dtype):
    X = np.random.default_rng(2).random((400, 5)).astype(dtype)
    params = dict(n_components=8, n_landmarks=32, landmarks=method, random_state=5)
    reference = Nystroem(**params).fit(X)
    assert reference.normalization_.dtype == dtype
    expected = reference.transform(X)
    assert expected.dtype == dtype
    tol = 1e-8 if dtype == np.float64 else 2e-4
    scale = np.abs(reference.normalization_).max()
    for chunks in [(97, -1), (1, -1), (64, 2)]:
        lazy = da.from_array(X, chunks=chunks)
        est = Nystroem(**params).fit(lazy)
        np.testing.assert_array_equal(est.component_indices_, reference.component_indices_)
        # Z^T Z summed in another order: the same eigenvectors within rounding, signs fixed
        np.testing.assert_allclose(est.normalization_, reference.normalization_, rtol=0, atol=tol * scale)
        got = compute_checked(est.transform(lazy))
        assert got.dtype == dtype
        np.testing.assert_allclose(got, expected, rtol=0, atol=tol * np.abs(expected).max())


def test_restriction_on_sparse_input_equals_dense():
    X = sp.random(300, 12, density=0.3, format="csr", random_state=0)
    params = dict(n_components=10, n_landmarks=40, landmarks="rpcholesky", random_state=0)
    dense = Nystroem(**params).fit(X.toarray())
    sparse = Nystroem(**params).fit(X)
    np.testing.assert_array_equal(sparse.component_indices_, dense.component_indices_)
    np.testing.assert_allclose(sparse.transform(X), dense.transform(X.toarray()), rtol=0, atol=1e-10)
    lazy = da.from_array(X, chunks=(70, 12), asarray=False)
    on_dask = Nystroem(**params).fit(lazy)
    np.testing.assert_array_equal(on_dask.component_indices_, dense.component_indices_)
    assert on_dask.landmark_passes_ == 2


def test_restriction_with_a_precomputed_kernel_equals_the_kernel_on_points():
    X = np.random.default_rng(3).random((200, 4))
    K = rbf_kernel(X, gamma=0.7)
    params = dict(n_components=10, n_landmarks=40, random_state=6)
    on_points = Nystroem(gamma=0.7, **params).fit(X)
    on_kernel = Nystroem(kernel="precomputed", **params).fit(K)
    np.testing.assert_array_equal(on_kernel.component_indices_, on_points.component_indices_)
    np.testing.assert_allclose(on_kernel.transform(K), on_points.transform(X), rtol=0, atol=1e-9)


@pytest.mark.parametrize("method", ["leverage", "rpcholesky"])
def test_restricted_model_round_trips(tmp_path, method):
    X = np.random.default_rng(4).random((120, 5)).astype(np.float32)
    est = Nystroem(n_components=6, n_landmarks=24, landmarks=method, random_state=0).fit(X)
    save(est, tmp_path / "model")
    back = load(tmp_path / "model")
    assert back.get_params() == est.get_params()
    assert back.normalization_.tobytes() == est.normalization_.tobytes()
    assert back.transform(X).tobytes() == est.transform(X).tobytes()


def test_n_landmarks_above_n_samples_is_clipped_with_a_warning():
    X = np.random.default_rng(5).random((50, 3))
    with pytest.warns(UserWarning, match="n_landmarks > n_samples"):
        est = Nystroem(n_components=10, n_landmarks=80, random_state=0).fit(X)
    assert est.components_.shape == (50, 3) and est.transform(X).shape == (50, 10)
    with warnings.catch_warnings(record=True) as caught:  # only scikit-learn's warning when both are too large
        warnings.simplefilter("always")
        Nystroem(n_components=60, n_landmarks=80, random_state=0).fit(X)
    assert [str(w.message).splitlines()[0] for w in caught] == ["n_components > n_samples. This is not possible."]


@pytest.mark.parametrize("bad", [0, -3, 2.5, "64"])
def test_bad_n_landmarks_raise_the_parameter_error(bad):
    X = np.random.default_rng(6).random((40, 3))
    with pytest.raises(ValueError, match=r"The 'n_landmarks' parameter of Nystroem must be"):
        Nystroem(n_components=5, n_landmarks=bad).fit(X)


def test_n_landmarks_below_n_components_or_with_given_landmarks_raise():
    X = np.random.default_rng(7).random((40, 3))
    with pytest.raises(ValueError, match=r"n_landmarks must be None or >= n_components=10 .*got n_landmarks=5"):
        Nystroem(n_components=10, n_landmarks=5).fit(X)
    with pytest.raises(ValueError, match="with an array of landmarks it must be None"):
        Nystroem(landmarks=X[:6], n_landmarks=12).fit(X)


@pytest.mark.parametrize("landmarks", ["uniform", "leverage", "rpcholesky"])
def test_restriction_pass_over_device_blocks_equals_numpy_blocks(landmarks):
    """The sum of Z^T Z on device blocks (array-api-strict's second device stands in for a GPU, as in
    tests/backends/test_array_api.py: NumPy refuses its arrays) gives the host's restricted map within rounding."""
    device = xs.Device("device1")
    X = np.random.default_rng(8).random((600, 5))
    host = da.from_array(X, chunks=(150, -1))
    dev = host.map_blocks(lambda b: xs.asarray(b, device=device), dtype=X.dtype, meta=np.empty((0, 0)))
    params = dict(n_components=10, n_landmarks=40, landmarks=landmarks, random_state=0)
    want = Nystroem(**params).fit(host)
    got = Nystroem(**params).fit(dev)
    assert isinstance(got.normalization_, np.ndarray)
    assert got.landmark_passes_ == want.landmark_passes_ == (3 if landmarks == "leverage" else 2)
    np.testing.assert_array_equal(got.component_indices_, want.component_indices_)
    np.testing.assert_allclose(got.normalization_, want.normalization_, rtol=0,
                               atol=1e-8 * np.abs(want.normalization_).max())
