"""Nystroem with the default landmarks gives scikit-learn 1.9's landmarks, warnings, errors and numbers."""

import warnings

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.kernel_approximation import Nystroem as SkNystroem
from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS, rbf_kernel

from dkapprox.nystroem import Nystroem

KERNELS = {
    "rbf": {}, "laplacian": {}, "poly": dict(degree=2), "polynomial": dict(gamma=0.3, coef0=2.0, degree=3),
    "sigmoid": dict(gamma=0.05, coef0=0.2), "cosine": {}, "linear": {}, "chi2": dict(gamma=0.5),
    "additive_chi2": {},
}


def test_every_named_kernel_is_covered():
    assert set(KERNELS) == set(PAIRWISE_KERNEL_FUNCTIONS)


def minkowski_kernel(x, y, scale=1.0):
    return np.exp(-np.abs(x - y).sum() / scale)


def fitted_pair(kernel, params, seed, X, n_components):
    ours = Nystroem(kernel=kernel, n_components=n_components, random_state=seed, **params).fit(X)
    theirs = SkNystroem(kernel=kernel, n_components=n_components, random_state=seed, **params).fit(X)
    return ours, theirs


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_named_kernels_equal_sklearn(kernel, seed):
    X = np.random.default_rng(seed + 100).random((150, 12))
    Y = np.random.default_rng(seed + 200).random((40, 12))
    n_components = 10 if kernel in ("linear", "cosine") else 30  # their rank is at most 12
    ours, theirs = fitted_pair(kernel, KERNELS[kernel], seed, X, n_components)
    np.testing.assert_array_equal(ours.component_indices_, theirs.component_indices_)
    assert ours.component_indices_.dtype == np.int64
    np.testing.assert_array_equal(ours.components_, theirs.components_)
    scale = np.abs(theirs.normalization_).max()
    np.testing.assert_allclose(ours.normalization_, theirs.normalization_, rtol=0, atol=1e-10 * scale)
    for data in (X, Y):
        np.testing.assert_allclose(ours.transform(data), theirs.transform(data), rtol=1e-10, atol=1e-10)


def test_callable_kernel_and_kernel_params_equal_sklearn(seed):
    X = np.random.default_rng(seed).random((60, 5))
    params = dict(kernel=minkowski_kernel, kernel_params={"scale": 2.0})
    ours, theirs = fitted_pair(params["kernel"], {"kernel_params": {"scale": 2.0}}, seed, X, 15)
    np.testing.assert_array_equal(ours.component_indices_, theirs.component_indices_)
    np.testing.assert_allclose(ours.transform(X), theirs.transform(X), rtol=1e-10, atol=1e-10)
    dask_out = ours.transform(da.from_array(X, chunks=(17, 2))).compute()
    np.testing.assert_allclose(dask_out, ours.transform(X), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kernel", ["rbf", "polynomial", "chi2", "cosine"])
def test_float32_stays_float32_and_matches_sklearn(kernel):
    X = np.random.default_rng(0).random((150, 12)).astype(np.float32)
    ours, theirs = fitted_pair(kernel, KERNELS[kernel], 0, X, 10)
    assert ours.components_.dtype == ours.normalization_.dtype == np.float32
    got, expected = ours.transform(X), theirs.transform(X)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-4)


def test_laplacian_keeps_float32_where_sklearn_returns_float64():
    X = np.random.default_rng(0).random((80, 6)).astype(np.float32)
    ours, theirs = fitted_pair("laplacian", {}, 0, X, 20)
    assert theirs.transform(X).dtype == np.float64
    assert ours.transform(X).dtype == np.float32
    assert ours.transform(da.from_array(X, chunks=30)).dtype == np.float32
    np.testing.assert_allclose(ours.transform(X), theirs.transform(X), rtol=1e-4, atol=1e-5)


def test_sparse_input_keeps_sparse_components_and_equals_sklearn(seed):
    X = sp.random(120, 30, density=0.3, format="csr", random_state=seed)
    ours, theirs = fitted_pair("rbf", {}, seed, X, 25)
    assert sp.issparse(ours.components_)
    np.testing.assert_array_equal(ours.components_.toarray(), theirs.components_.toarray())
    np.testing.assert_allclose(ours.transform(X), theirs.transform(X), rtol=1e-10, atol=1e-10)
    lazy = ours.transform(da.from_array(X, chunks=(50, 30), asarray=False))
    np.testing.assert_allclose(lazy.compute(), ours.transform(X), rtol=1e-12, atol=1e-12)


def test_more_components_than_samples_warns_as_sklearn():
    X = np.random.default_rng(0).random((12, 3))
    with pytest.warns(UserWarning, match="n_components > n_samples") as ours_record:
        ours = Nystroem(n_components=20, random_state=0).fit(X)
    with pytest.warns(UserWarning) as theirs_record:
        theirs = SkNystroem(n_components=20, random_state=0).fit(X)
    assert [str(w.message) for w in ours_record] == [str(w.message) for w in theirs_record]
    assert ours.transform(X).shape == (12, 12)
    np.testing.assert_allclose(ours.transform(X), theirs.transform(X), rtol=1e-8, atol=1e-8)
    with pytest.warns(UserWarning, match="n_components > n_samples"):
        Nystroem(n_components=20, random_state=0).fit(da.from_array(X, chunks=5))


@pytest.mark.parametrize("kernel", [minkowski_kernel, "precomputed"])
def test_gamma_with_callable_or_precomputed_raises_sklearn_error(kernel):
    X = np.eye(5)
    for cls in (Nystroem, SkNystroem):
        est = cls(kernel=kernel, gamma=1.0, n_components=3)
        with pytest.raises(ValueError, match="Don't pass gamma, coef0 or degree to Nystroem"):
            est.fit(X)


def test_parameter_errors_are_worded_as_sklearn():
    X = np.random.default_rng(0).random((10, 3))
    for bad in (dict(n_components=0), dict(kernel="nope"), dict(gamma=-1.0)):
        with pytest.raises(ValueError) as ours:
            Nystroem(**bad).fit(X)
        with pytest.raises(ValueError) as theirs:
            SkNystroem(**bad).fit(X)
        assert str(ours.value) == str(theirs.value)


def test_kernel_params_are_never_written_to():
    params = {"gamma": 0.5}
    X = np.random.default_rng(0).random((30, 4))
    est = Nystroem(kernel="polynomial", degree=2, coef0=1.0, kernel_params=params, n_components=5, random_state=0)
    est.fit(X)
    est.transform(X)
    assert params == {"gamma": 0.5}
    SkNystroem(kernel="polynomial", degree=2, coef0=1.0, kernel_params=params, n_components=5).fit(X)
    assert params != {"gamma": 0.5}  # scikit-learn 1.9 writes degree and coef0 into it


def test_precomputed_equals_sklearn_where_sklearn_allows_it(seed):
    X = np.random.default_rng(seed).random((40, 4))
    Y = np.random.default_rng(seed + 1).random((15, 4))
    K, K_new = rbf_kernel(X), rbf_kernel(Y, X)
    ours, theirs = fitted_pair("precomputed", {}, seed, K, 40)
    np.testing.assert_array_equal(ours.component_indices_, theirs.component_indices_)
    np.testing.assert_array_equal(ours.components_, theirs.components_)
    np.testing.assert_allclose(ours.transform(K_new), theirs.transform(K_new), rtol=1e-9, atol=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(ValueError, match="Precomputed metric requires shape"):
            SkNystroem(kernel="precomputed", n_components=10, random_state=seed).fit(K)


def test_precomputed_with_fewer_components_is_a_column_nystroem():
    X = np.random.default_rng(0).random((200, 4))
    Y = np.random.default_rng(1).random((30, 4))
    pre = Nystroem(kernel="precomputed", n_components=25, random_state=3).fit(rbf_kernel(X))
    rows = Nystroem(kernel="rbf", n_components=25, random_state=3).fit(X)
    np.testing.assert_array_equal(pre.component_indices_, rows.component_indices_)
    np.testing.assert_allclose(pre.transform(rbf_kernel(Y, X)), rows.transform(Y), rtol=1e-9, atol=1e-9)
    lazy = pre.transform(da.from_array(rbf_kernel(Y, X), chunks=(7, 50)))
    np.testing.assert_allclose(lazy.compute(), rows.transform(Y), rtol=1e-9, atol=1e-9)
    dask_fit = Nystroem(kernel="precomputed", n_components=25, random_state=3).fit(
        da.from_array(rbf_kernel(X), chunks=(33, 200)))
    np.testing.assert_allclose(dask_fit.normalization_, pre.normalization_, rtol=0, atol=1e-12)


@pytest.mark.parametrize("landmarks", ["kmeans", "leverage", np.zeros((3, 5))])
def test_precomputed_needs_uniform_landmarks(landmarks):
    K = rbf_kernel(np.random.default_rng(0).random((20, 5)))
    with pytest.raises(ValueError, match="precomputed kernel"):
        Nystroem(kernel="precomputed", landmarks=landmarks, n_components=5).fit(K)


def test_precomputed_training_matrix_must_be_square():
    with pytest.raises(ValueError, match="square training kernel matrix"):
        Nystroem(kernel="precomputed", n_components=3).fit(np.ones((10, 8)))
