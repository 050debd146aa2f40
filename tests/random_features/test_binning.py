"""RandomBinningFeatures: unbiased Laplacian kernel estimate, sparse output, chunk-free hashing."""

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import laplacian_kernel

from dkapprox.random_features import RandomBinningFeatures


@pytest.fixture(scope="module")
def points():
    return np.random.default_rng(0).normal(size=(50, 4))


def gram(Z):
    return (Z @ Z.T).toarray() if sp.issparse(Z) else Z @ Z.T


def test_estimate_converges_to_the_laplacian_kernel(points):
    K = laplacian_kernel(points, gamma=0.4)
    mse = {}
    for n_grids in (64, 512, 4096):
        errors = [((gram(RandomBinningFeatures(2**24, gamma=0.4, n_grids=n_grids, random_state=seed)
                         .fit_transform(points)) - K) ** 2).mean() for seed in range(3)]
        mse[n_grids] = np.mean(errors)
        assert mse[n_grids] < 2.0 / n_grids, (n_grids, mse[n_grids])  # variance <= k (1 - k) / n_grids
    assert mse[4096] < mse[64] / 16, mse


def test_hash_collisions_add_variance_not_bias(points):
    """Few columns: many cells share a column, but the random signs cancel on average."""
    K = laplacian_kernel(points, gamma=0.4)
    mean = np.mean([gram(RandomBinningFeatures(32, gamma=0.4, n_grids=256, random_state=seed)
                         .fit_transform(points)) for seed in range(200)], axis=0)
    np.testing.assert_allclose(mean, K, atol=0.06)


def test_output_is_sparse_with_one_signed_entry_per_grid(points):
    Z = RandomBinningFeatures(10_000, n_grids=16, random_state=0).fit_transform(points)
    assert sp.issparse(Z) and Z.format == "csr" and Z.shape == (50, 10_000)
    assert np.all(np.diff(Z.indptr) <= 16)
    # a collision inside a row can only sum entries; 16 grids in 10k columns rarely collide
    np.testing.assert_allclose(np.abs(Z.data), 0.25)
    np.testing.assert_allclose(Z.multiply(Z).sum(axis=1), 1.0)


@pytest.mark.parametrize("chunks", [(1, -1), (97, -1), (-1, -1), (64, 3), (299, 5)],
                         ids=["rows1", "rows97", "all", "cols3", "short_last"])
@pytest.mark.parametrize("dense_output", [False, True], ids=["sparse", "dense"])
def test_dask_output_equals_numpy_output(chunks, dense_output, dtype):
    X = np.random.default_rng(1).normal(size=(300, 7)).astype(dtype)
    est = RandomBinningFeatures(512, n_grids=24, gamma=0.7, dense_output=dense_output, random_state=2).fit(X)
    expected = est.transform(X)
    lazy = est.transform(da.from_array(X, chunks=chunks))
    assert lazy.dtype == expected.dtype == dtype
    assert sp.issparse(lazy._meta) != dense_output
    assert lazy.chunks[1] == (512,)
    computed = lazy.compute()
    assert sp.issparse(computed) != dense_output and computed.dtype == dtype
    if not dense_output:
        computed, expected = computed.toarray(), expected.toarray()
    np.testing.assert_array_equal(computed, expected)


def test_a_rows_columns_depend_on_the_row_only():
    X = np.random.default_rng(3).normal(size=(120, 5))
    est = RandomBinningFeatures(1000, n_grids=8, random_state=4).fit(X)
    perm = np.random.default_rng(5).permutation(120)
    np.testing.assert_array_equal(est.transform(X[perm]).toarray(), est.transform(X).toarray()[perm])


def test_float32_fit_sees_the_float64_grids():
    X = np.random.default_rng(6).normal(size=(30, 3))
    fit64 = RandomBinningFeatures(256, n_grids=8, random_state=0).fit(X)
    fit32 = RandomBinningFeatures(256, n_grids=8, random_state=0).fit(X.astype(np.float32))
    np.testing.assert_array_equal(fit32.pitches_, fit64.pitches_)
    np.testing.assert_array_equal(fit32.hash_multipliers_, fit64.hash_multipliers_)
    assert fit32.transform(X.astype(np.float32)).dtype == np.float32
    assert fit64.transform(X.astype(np.int32)).dtype == np.float64


def test_sparse_input_gives_the_dense_input_result():
    X = sp.random(60, 9, density=0.3, format="csr", random_state=0)
    est = RandomBinningFeatures(300, n_grids=12, random_state=1).fit(X)
    np.testing.assert_array_equal(est.transform(X).toarray(), est.transform(X.toarray()).toarray())


def test_pitches_and_shifts_follow_their_laws():
    from scipy import stats
    est = RandomBinningFeatures(16, gamma=2.0, n_grids=4000, random_state=0).fit(np.zeros((1, 2)))
    assert stats.kstest(est.pitches_.ravel(), stats.gamma(2.0, scale=0.5).cdf).pvalue > 1e-3
    assert stats.kstest((est.shifts_ / est.pitches_).ravel(), stats.uniform.cdf).pvalue > 1e-3
    assert np.all(est.hash_multipliers_ % 2 == 1)


def test_parameters_are_validated_with_scikit_learns_wording():
    with pytest.raises(ValueError, match=r"The 'n_grids' parameter of RandomBinningFeatures must be an int "
                                         r"in the range \[1, inf\)\. Got 0 instead\."):
        RandomBinningFeatures(n_grids=0).fit(np.zeros((2, 2)))
