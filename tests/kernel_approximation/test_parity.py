"""Same random state and same numbers as scikit-learn 1.9 for the same seed."""

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn.kernel_approximation as ska

import dkapprox

CASES = [
    ("RBFSampler", dict(n_components=50)),
    ("RBFSampler", dict(n_components=33, gamma="scale")),
    ("RBFSampler", dict(n_components=8, gamma=0.01)),
    ("SkewedChi2Sampler", dict(n_components=40, skewedness=0.5)),
    ("PolynomialCountSketch", dict(n_components=64)),
    ("PolynomialCountSketch", dict(n_components=31, degree=3, coef0=2.0, gamma=0.5)),
    ("AdditiveChi2Sampler", dict()),
    ("AdditiveChi2Sampler", dict(sample_steps=1)),
    ("AdditiveChi2Sampler", dict(sample_steps=4, sample_interval=0.3)),
]
FITTED = {"RBFSampler": ["random_weights_", "random_offset_"],
          "SkewedChi2Sampler": ["random_weights_", "random_offset_"],
          "PolynomialCountSketch": ["indexHash_", "bitHash_"], "AdditiveChi2Sampler": []}


def make(name, params, seed):
    kw = dict(params) if name == "AdditiveChi2Sampler" else dict(params, random_state=seed)
    return getattr(dkapprox, name)(**kw), getattr(ska, name)(**kw)


@pytest.mark.parametrize("name,params", CASES, ids=lambda v: str(v) if isinstance(v, str) else None)
@pytest.mark.parametrize("shape", [(1, 1), (57, 13), (200, 3)])
def test_numpy_output_and_state_equal_sklearn(name, params, shape, seed, dtype):
    X = np.random.default_rng(seed + 100).random(shape).astype(dtype)
    ours, theirs = make(name, params, seed)
    theirs.fit(X)
    ours.fit(X)
    for attr in FITTED[name]:
        np.testing.assert_array_equal(getattr(ours, attr), getattr(theirs, attr))
        assert getattr(ours, attr).dtype == getattr(theirs, attr).dtype
    expected, got = theirs.transform(X), ours.transform(X)
    np.testing.assert_allclose(got, expected, rtol=1e-10 if dtype == np.float64 else 2e-5,
                               atol=1e-10 if dtype == np.float64 else 2e-5)
    assert got.dtype == dtype  # scikit-learn returns float64 for float32 PolynomialCountSketch


@pytest.mark.parametrize("name,params", [c for c in CASES if c[0] != "SkewedChi2Sampler"],
                         ids=lambda v: str(v) if isinstance(v, str) else None)
def test_sparse_input_equals_sklearn(name, params, seed):
    X = sp.random(80, 20, density=0.3, format="csr", random_state=seed, dtype=np.float64)
    ours, theirs = make(name, params, seed)
    expected, got = theirs.fit(X).transform(X), ours.fit(X).transform(X)
    assert sp.issparse(got) == sp.issparse(expected)
    dense = (lambda a: a.toarray() if sp.issparse(a) else a)
    np.testing.assert_allclose(dense(got), dense(expected), rtol=1e-10, atol=1e-12)


def test_gamma_scale_uses_variance_as_sklearn():
    X = np.random.default_rng(0).normal(3.0, 2.0, size=(500, 7))
    ours, theirs = make("RBFSampler", dict(gamma="scale"), 0)
    assert ours.fit(X)._gamma == theirs.fit(X)._gamma
    constant = np.ones((10, 3))
    assert make("RBFSampler", dict(gamma="scale"), 0)[1].fit(constant)._gamma == 1.0


def test_float32_polynomial_count_sketch_keeps_float32_unlike_sklearn():
    X = np.random.default_rng(0).random((30, 5)).astype(np.float32)
    ours, theirs = make("PolynomialCountSketch", dict(n_components=16), 0)
    assert theirs.fit_transform(X).dtype == np.float64
    assert ours.fit_transform(X).dtype == np.float32


def test_sklearn_errors_and_messages():
    with pytest.raises(ValueError, match="The 'n_components' parameter of RBFSampler must be an int in the range"):
        dkapprox.RBFSampler(n_components=0).fit(np.ones((2, 2)))
    with pytest.raises(ValueError, match="X may not contain entries smaller than -skewedness."):
        dkapprox.SkewedChi2Sampler(skewedness=1.0).fit(np.zeros((2, 2))).transform(-np.ones((2, 2)))
    with pytest.raises(ValueError, match="Negative values in data passed to X in AdditiveChi2Sampler"):
        dkapprox.AdditiveChi2Sampler().fit(-np.ones((2, 2)))
    with pytest.raises(ValueError, match="If sample_steps is not in \\[1, 2, 3\\]"):
        dkapprox.AdditiveChi2Sampler(sample_steps=4).fit(np.ones((2, 2)))
    with pytest.raises(ValueError, match="X has 4 features, but RBFSampler is expecting 5 features as input."):
        dkapprox.RBFSampler().fit(np.ones((3, 5))).transform(np.ones((3, 4)))


def test_polynomial_count_sketch_memory_stays_near_output_size():
    """scikit-learn builds n x degree x n_components complex128; we tile rows through rfft."""
    import tracemalloc

    X = np.random.default_rng(0).random((20_000, 16)).astype(np.float32)
    est = dkapprox.PolynomialCountSketch(n_components=512, degree=3, random_state=0).fit(X)
    tracemalloc.start()
    out = est.transform(X)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    sklearn_intermediate = X.shape[0] * 3 * 512 * 16
    assert peak < out.nbytes + 80 * 2**20
    assert peak < sklearn_intermediate / 3
