"""Random projections: scikit-learn's matrices, numbers, warnings and errors, and what it gets wrong."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn.random_projection as skr
from sklearn.exceptions import DataDimensionalityWarning

import dkapprox

CASES = [
    ("GaussianRandomProjection", dict(n_components=7)),
    ("GaussianRandomProjection", dict(n_components="auto", eps=0.9)),
    ("SparseRandomProjection", dict(n_components=9)),
    ("SparseRandomProjection", dict(n_components=9, density=1.0)),
    ("SparseRandomProjection", dict(n_components=5, density=0.5, dense_output=True)),
    ("SparseRandomProjection", dict(n_components="auto", eps=0.9, density=0.005)),
]


@pytest.mark.parametrize("name,params", CASES, ids=lambda v: str(v) if isinstance(v, str) else None)
@pytest.mark.parametrize("sparse_input", [False, True])
def test_matrices_and_output_equal_sklearn(name, params, sparse_input, seed, dtype):
    rng = np.random.default_rng(seed)
    X = rng.random((60, 300)).astype(dtype)
    if sparse_input:
        X = sp.csr_matrix(X * (X > 0.7))
    theirs = getattr(skr, name)(**params, random_state=seed).fit(X)
    ours = getattr(dkapprox, name)(**params, random_state=seed).fit(X)
    assert ours.n_components_ == theirs.n_components_
    a, b = ours.components_, theirs.components_
    assert sp.issparse(a) == sp.issparse(b) and a.dtype == b.dtype
    np.testing.assert_array_equal(a.toarray() if sp.issparse(a) else a, b.toarray() if sp.issparse(b) else b)
    got, expected = ours.transform(X), theirs.transform(X)
    assert sp.issparse(got) == sp.issparse(expected) and got.dtype == expected.dtype
    dense = (lambda m: m.toarray() if sp.issparse(m) else m)
    np.testing.assert_allclose(dense(got), dense(expected), rtol=1e-10 if dtype == np.float64 else 1e-5)


@pytest.mark.parametrize("name", ["GaussianRandomProjection", "SparseRandomProjection"])
def test_inverse_transform_equals_sklearn(name, seed):
    X = np.random.default_rng(seed).random((40, 30))
    for stored in (True, False):
        theirs = getattr(skr, name)(n_components=10, compute_inverse_components=stored, random_state=seed).fit(X)
        ours = getattr(dkapprox, name)(n_components=10, compute_inverse_components=stored, random_state=seed).fit(X)
        Z = ours.transform(X)
        Z = Z.toarray() if sp.issparse(Z) else Z
        np.testing.assert_allclose(ours.inverse_transform(Z), theirs.inverse_transform(Z), rtol=1e-10)


def test_auto_feature_names_work_where_sklearn_crashes():
    X = np.random.default_rng(0).random((100, 3000))
    ours = dkapprox.GaussianRandomProjection(eps=0.5, random_state=0).fit(X)
    names = ours.get_feature_names_out()
    assert len(names) == ours.n_components_ and names[0] == "gaussianrandomprojection0"
    with pytest.raises(TypeError):  # sk#34993, fixed here
        skr.GaussianRandomProjection(eps=0.5, random_state=0).fit(X).get_feature_names_out()


def test_set_output_pandas_with_auto():
    pd = pytest.importorskip("pandas", reason="pandas is in the test extra")
    X = np.random.default_rng(0).random((50, 2000))
    out = dkapprox.SparseRandomProjection(eps=0.8, random_state=0).set_output(transform="pandas").fit_transform(X)
    assert isinstance(out, pd.DataFrame) and out.columns[0] == "sparserandomprojection0"


def test_warnings_and_errors_as_sklearn():
    X = np.ones((10, 3))
    with pytest.warns(DataDimensionalityWarning, match="n_features < n_components \\(3 < 5\\)"):
        dkapprox.GaussianRandomProjection(n_components=5).fit(X)
    with pytest.raises(ValueError, match="which is larger than the original space with n_features=3"):
        dkapprox.GaussianRandomProjection(eps=0.5).fit(X)
    with pytest.raises(ValueError, match="The 'density' parameter of SparseRandomProjection"):
        dkapprox.SparseRandomProjection(density=2.0).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dkapprox.GaussianRandomProjection(n_components=2).fit(X)


def test_johnson_lindenstrauss_min_dim_is_sklearns():
    assert dkapprox.johnson_lindenstrauss_min_dim(1e6, eps=0.5) == skr.johnson_lindenstrauss_min_dim(1e6, eps=0.5)
    np.testing.assert_array_equal(dkapprox.johnson_lindenstrauss_min_dim([1e4, 1e6], eps=[0.5, 0.1]),
                                  skr.johnson_lindenstrauss_min_dim([1e4, 1e6], eps=[0.5, 0.1]))
