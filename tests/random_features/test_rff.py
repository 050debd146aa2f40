"""RandomFourierFeatures: convergence to the exact kernels, chunk invariance, dtypes, sampling structure."""

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from _rounding import assert_chunking_promise, compute_checked
from scipy import stats
from sklearn.kernel_approximation import RBFSampler as SkRBFSampler

from dkapprox.random_features import RandomFourierFeatures
from dkapprox.random_features._sampling import gaussian_orthogonal
from dkapprox.random_features.spectra import Spectrum

# structured sampling of the product spectra warns on purpose (tested below)
pytestmark = pytest.mark.filterwarnings("ignore:sampling='structured' shares:UserWarning")

KERNELS = {
    "rbf": dict(kernel="rbf", gamma=0.1),
    "laplacian": dict(kernel="laplacian", gamma=0.2),
    "cauchy": dict(kernel="cauchy", gamma=0.3),
    "matern0.5": dict(kernel="matern", nu=0.5, length_scale=3.0),
    "matern1.5": dict(kernel="matern", nu=1.5, length_scale=3.0),
    "matern2.5": dict(kernel="matern", nu=2.5, length_scale=3.0),
}
FEATURES = ["cos", "sincos"]
SAMPLINGS = ["iid", "orthogonal", "structured", "qmc"]


def exact(params, X):
    spectrum = Spectrum(params["kernel"], params.get("gamma", 1.0), params.get("nu", 1.5),
                        params.get("length_scale", 1.0))
    return spectrum.kernel_matrix(X)


@pytest.fixture(scope="module")
def points():
    return np.random.default_rng(0).normal(size=(60, 5))


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("features", FEATURES)
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_estimate_converges_to_the_exact_kernel(points, kernel, features, sampling):
    params = KERNELS[kernel]
    K = exact(params, points)
    mse = {}
    for n in (256, 1024, 4096):
        errors = []
        for seed in range(3):
            Z = RandomFourierFeatures(n, features=features, sampling=sampling, random_state=seed,
                                      **params).fit_transform(points)
            assert Z.shape == (len(points), n)
            errors.append(((Z @ Z.T - K) ** 2).mean())
        mse[n] = np.mean(errors)
        # Monte Carlo rate: a bound that shrinks as 1 / n_components (measured worst: about 3.3 / n)
        assert mse[n] < 8.0 / n, (n, mse[n])
    assert mse[4096] < mse[256] / 4, mse


def test_rbf_iid_cos_draws_scikit_learns_numbers(points):
    ours = RandomFourierFeatures(300, gamma=0.4, random_state=7).fit(points)
    theirs = SkRBFSampler(gamma=0.4, n_components=300, random_state=7).fit(points)
    np.testing.assert_array_equal(ours.random_weights_, theirs.random_weights_)
    np.testing.assert_array_equal(ours.random_offset_, theirs.random_offset_)
    np.testing.assert_allclose(ours.transform(points), theirs.transform(points), rtol=1e-12)


@pytest.mark.parametrize("kernel", ["rbf", "matern2.5"])
def test_orthogonal_frequencies_are_orthogonal_within_a_block(kernel):
    n_features = 7
    est = RandomFourierFeatures(3 * n_features + 4, sampling="orthogonal", random_state=0,
                                **KERNELS[kernel]).fit(np.zeros((2, n_features)))
    W = est.random_weights_
    for start in range(0, W.shape[1], n_features):
        block = W[:, start:start + n_features]
        gram = block.T @ block
        np.testing.assert_allclose(gram - np.diag(np.diag(gram)), 0.0, atol=1e-12)
    # across blocks they are independent, not orthogonal
    assert abs(W[:, 0] @ W[:, n_features]) > 1e-6


def test_orthogonal_gaussian_part_is_orthogonal_with_chi_norms():
    """The coupling the product spectra use: exact N(0, I) columns, orthogonal within a block."""
    n_features = 6
    G = gaussian_orthogonal(np.random.RandomState(0), n_features, 6000)
    for start in range(0, 60, n_features):
        block = G[:, start:start + n_features]
        gram = block.T @ block
        np.testing.assert_allclose(gram - np.diag(np.diag(gram)), 0.0, atol=1e-12)
    assert stats.kstest((G ** 2).sum(axis=0), stats.chi2(n_features).cdf).pvalue > 1e-3
    assert stats.kstest(G[0], stats.norm.cdf).pvalue > 1e-3


@pytest.mark.parametrize("sampling", SAMPLINGS)
@pytest.mark.parametrize("features", FEATURES)
@pytest.mark.parametrize("chunks", [(1, -1), (97, -1), (-1, -1), (64, 5), (299, 7)],
                         ids=["rows1", "rows97", "all", "cols5", "short_last"])
def test_transform_is_chunk_invariant(chunks, features, sampling, dtype):
    X = np.random.default_rng(1).normal(size=(300, 12)).astype(dtype)
    est = RandomFourierFeatures(40, kernel="laplacian", gamma=0.3, features=features, sampling=sampling,
                                random_state=3).fit(X)
    expected = est.transform(X)
    lazy = est.transform(da.from_array(X, chunks=chunks))
    assert lazy.dtype == expected.dtype == dtype
    # another chunking: within the rounding bound of the block's products (tests/_rounding.py);
    # compute_checked also checks the declared chunks, dtype and meta
    assert_chunking_promise(est, X, compute_checked(lazy), expected)


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_float32_fit_sees_the_float64_numbers(sampling):
    X = np.random.default_rng(2).normal(size=(50, 9))
    fit64 = RandomFourierFeatures(64, kernel="matern", sampling=sampling, random_state=5).fit(X)
    fit32 = RandomFourierFeatures(64, kernel="matern", sampling=sampling, random_state=5).fit(X.astype(np.float32))
    for name, value in vars(fit64).items():
        if name.endswith("_") and isinstance(value, np.ndarray):
            np.testing.assert_array_equal(getattr(fit32, name), value, err_msg=name)
    Z32 = fit32.transform(X.astype(np.float32))
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, fit64.transform(X), atol=2e-5)
    assert fit64.transform(X.astype(np.int64)).dtype == np.float64


@pytest.mark.parametrize("sampling", SAMPLINGS)
def test_sparse_input_gives_the_dense_result(sampling):
    X = sp.random(80, 20, density=0.2, format="csr", random_state=0, dtype=np.float32)
    est = RandomFourierFeatures(32, features="sincos", sampling=sampling, random_state=0).fit(X)
    out = est.transform(X)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    assert_chunking_promise(est, X, est.transform(X.toarray()), out, what="dense vs sparse")
    lazy = est.transform(da.from_array(X, chunks=(30, 20), asarray=False))
    assert_chunking_promise(est, X, lazy.compute(), out, what="dask vs NumPy")


class BlockMaker:
    """Makes block i as a 10 x 4 block of i, and records that it did (a dask token: expressions tokenize it)."""

    def __init__(self):
        self.computed = []

    def __call__(self, block, block_info=None):
        i = block_info[None]["chunk-location"][0]
        self.computed.append(i)
        return np.full((10, 4), float(i))

    def __dask_tokenize__(self):
        return ("block-maker", id(self))


def test_transform_of_dask_input_is_lazy():
    make = BlockMaker()
    computed = make.computed
    X = da.zeros((30, 4), chunks=(10, 4)).map_blocks(make, dtype=float, meta=np.empty((0, 0)))
    est = RandomFourierFeatures(16, sampling="structured", random_state=0).fit(np.zeros((2, 4)))
    lazy = est.transform(X)
    assert computed == []
    assert lazy.shape == (30, 16)
    lazy.compute()
    assert sorted(computed) == [0, 1, 2]


def test_sincos_layout_and_norm():
    X = np.random.default_rng(3).normal(size=(10, 4))
    est = RandomFourierFeatures(20, features="sincos", sampling="qmc", random_state=0).fit(X)
    Z = est.transform(X)
    assert est.random_offset_ is None and est.random_weights_.shape == (4, 10)
    proj = X @ est.random_weights_
    np.testing.assert_allclose(Z[:, :10], np.cos(proj) / np.sqrt(10))
    np.testing.assert_allclose(Z[:, 10:], np.sin(proj) / np.sqrt(10))
    np.testing.assert_allclose((Z * Z).sum(axis=1), 1.0)  # z(x) . z(x) = k(x, x) = 1 exactly


def test_sincos_needs_an_even_n_components():
    with pytest.raises(ValueError, match=r"n_components must be even with features='sincos'.*got "
                                         r"n_components=7\. Use 6 or 8"):
        RandomFourierFeatures(7, features="sincos").fit(np.zeros((2, 3)))


@pytest.mark.parametrize("params, message", [
    (dict(kernel="gauss"), r"The 'kernel' parameter of RandomFourierFeatures must be a str among"),
    (dict(sampling="sobol"), r"The 'sampling' parameter of RandomFourierFeatures must be a str among"),
    (dict(nu=0), r"The 'nu' parameter of RandomFourierFeatures must be a float in the range \(0.0, inf\)"),
    (dict(n_components=0), r"The 'n_components' parameter of RandomFourierFeatures must be an int in the "
                           r"range \[1, inf\)\. Got 0 instead\."),
])
def test_parameters_are_validated_with_scikit_learns_wording(params, message):
    with pytest.raises(ValueError, match=message):
        RandomFourierFeatures(**params).fit(np.zeros((2, 3)))


def test_same_seed_same_graph():
    X = da.from_array(np.random.default_rng(4).normal(size=(100, 6)), chunks=(25, 6))
    a = RandomFourierFeatures(32, sampling="structured", random_state=1).fit(X).transform(X)
    b = RandomFourierFeatures(32, sampling="structured", random_state=1).fit(X).transform(X)
    c = RandomFourierFeatures(32, sampling="structured", random_state=2).fit(X).transform(X)
    assert a.name == b.name != c.name


@pytest.mark.parametrize("kernel", ["laplacian", "cauchy"])
def test_structured_sampling_of_a_product_spectrum_warns(kernel):
    with pytest.warns(UserWarning, match=f"shares one draw of coordinate scales per block for the {kernel}"):
        RandomFourierFeatures(16, kernel=kernel, sampling="structured").fit(np.zeros((2, 3)))
