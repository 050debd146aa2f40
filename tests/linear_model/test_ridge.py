"""Ridge: scikit-learn's numbers on NumPy, the same numbers on dask whatever the chunking."""

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from _arrays import rows_where
from dask.array.utils import assert_eq
from sklearn import linear_model as sk
from sklearn.pipeline import make_pipeline

from dkapprox import RBFSampler
from dkapprox.linear_model import Ridge


def make_data(seed, n=400, d=12, n_targets=None, offset=3.0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = (rng.normal(size=(n, d)) + offset).astype(dtype)  # an offset tests the centering
    w = rng.normal(size=(d,) if n_targets is None else (d, n_targets))
    y = X @ w + rng.normal(size=(n,) if n_targets is None else (n, n_targets))
    return X, y


def tol(dtype):
    return dict(rtol=2e-3, atol=2e-3) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("n_targets", [None, 1, 3], ids=["1d", "n_by_1", "3targets"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_equals_sklearn_ridge_in_memory(seed, dtype, n_targets, fit_intercept):
    X, y = make_data(seed, n_targets=n_targets, dtype=dtype)
    ours = Ridge(alpha=2.5, fit_intercept=fit_intercept).fit(X, y)
    ref = sk.Ridge(alpha=2.5, fit_intercept=fit_intercept).fit(X, y)
    assert ours.coef_.shape == ref.coef_.shape and ours.coef_.dtype == ref.coef_.dtype
    assert np.shape(ours.intercept_) == np.shape(ref.intercept_)
    np.testing.assert_allclose(ours.coef_, ref.coef_, **tol(dtype))
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, **tol(dtype))
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), **tol(dtype))
    assert ours.predict(X).dtype == ref.predict(X).dtype
    assert ours.score(X, y) == pytest.approx(ref.score(X, y), rel=1e-6)
    assert ours.solver_ == "cholesky"


def test_per_target_alphas_and_sparse_input_equal_sklearn():
    X, y = make_data(0, n_targets=3)
    alpha = np.array([0.1, 10.0, 1000.0])
    np.testing.assert_allclose(Ridge(alpha=alpha).fit(X, y).coef_, sk.Ridge(alpha=alpha).fit(X, y).coef_,
                               rtol=1e-9)
    Xs = sp.random(300, 40, density=0.1, format="csr", random_state=0)
    ys = Xs @ np.arange(40.0)
    # scikit-learn fits an intercept on sparse X with an iterative solver (tol 1e-4): compare
    # with its exact (Cholesky) solution of the same problem on the dense matrix
    ours, ref = Ridge(alpha=0.3).fit(Xs, ys), sk.Ridge(alpha=0.3).fit(Xs.toarray(), ys)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-9)
    np.testing.assert_allclose(ours.predict(Xs), ref.predict(Xs.toarray()), rtol=1e-9)
    dXs = da.from_array(Xs, chunks=(64, -1), asarray=False)
    np.testing.assert_allclose(Ridge(alpha=0.3).fit(dXs, ys).coef_, ref.coef_, rtol=1e-9)


def test_singular_system_falls_back_to_the_minimum_norm_solution():
    X, y = make_data(1, n=200, d=6)
    X = np.hstack([X, X[:, :2]])  # duplicated columns: X^T X is singular, alpha=0 cannot regularize
    ours = Ridge(alpha=0.0).fit(X, y)
    assert ours.solver_ == "eigh"
    lstsq = np.linalg.lstsq(np.c_[X - X.mean(0)], y - y.mean(), rcond=None)[0]  # minimum norm
    np.testing.assert_allclose(ours.coef_, lstsq, rtol=1e-7, atol=1e-9)
    # (scikit-learn 1.9 returns a wrong solution here: its Cholesky and its SVD, with a 1e-15
    # cutoff, both invert the numerically-zero eigenvalue; its predictions differ by up to 0.35)
    np.testing.assert_allclose(ours.predict(X), (X - X.mean(0)) @ lstsq + y.mean(), rtol=1e-9)


@pytest.mark.parametrize("chunks", [(97, -1), (64, 5), (1, -1), (-1, -1)],
                         ids=["97rows", "64x5", "1row", "one-block"])
@pytest.mark.parametrize("n_targets", [None, 2])
def test_dask_fit_is_chunk_invariant(chunks, n_targets):
    X, y = make_data(2, n=300, n_targets=n_targets)
    ref = Ridge(alpha=0.7).fit(X, y)
    ydask = da.from_array(y, chunks=(53,) + y.shape[1:])  # other row blocks than X: aligned by us
    for target in (y, ydask):
        ours = Ridge(alpha=0.7).fit(da.from_array(X, chunks=chunks), target)
        np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-10, atol=1e-12)


def test_unknown_row_sizes_with_dask_targets():
    X, y = make_data(3)
    Xd, yd = da.from_array(X, chunks=50), da.from_array(y, chunks=50)
    keep = Xd[:, 0] > 3.0  # a boolean mask: NaN row chunks, rows of X and y still aligned
    Xm, ym = rows_where(Xd, keep), rows_where(yd, keep)
    assert np.isnan(Xm.shape[0])
    mask = X[:, 0] > 3.0
    ref = sk.Ridge().fit(X[mask], y[mask])
    np.testing.assert_allclose(Ridge().fit(Xm, ym).coef_, ref.coef_, rtol=1e-10)
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        Ridge().fit(Xm, y[mask])


def test_predict_and_score_on_dask_are_lazy_and_honest(dtype):
    X, y = make_data(4, n_targets=2, dtype=dtype)
    model = Ridge().fit(X, y)
    Xd = da.from_array(X, chunks=(77, -1))
    lazy = model.predict(Xd)
    assert isinstance(lazy, da.Array) and lazy.chunks[0] == Xd.chunks[0]
    assert_eq(lazy, model.predict(X), rtol=tol(dtype)["rtol"])  # declared chunks, dtype, meta == computed
    assert model.score(Xd, y) == pytest.approx(model.score(X, y), rel=1e-6 if dtype == np.float32 else 1e-12)
    assert model.score(Xd, da.from_array(y, chunks=40)) == pytest.approx(model.score(X, y), rel=1e-5)
    one = Ridge().fit(X, y[:, 0])
    assert_eq(one.predict(Xd), one.predict(X), rtol=tol(dtype)["rtol"])


def test_pipeline_with_a_transformer_is_lazy_end_to_end():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(2_000, 4))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.05 * rng.normal(size=2_000)
    pipe = make_pipeline(RBFSampler(gamma=0.3, n_components=150, random_state=0), Ridge(alpha=1e-2))
    in_memory = make_pipeline(RBFSampler(gamma=0.3, n_components=150, random_state=0),
                              sk.Ridge(alpha=1e-2)).fit(X, y)
    Xd, yd = da.from_array(X, chunks=300), da.from_array(y, chunks=300)
    pipe.fit(Xd, yd)
    np.testing.assert_allclose(pipe[-1].coef_, in_memory[-1].coef_, rtol=1e-7, atol=1e-9)
    pred = pipe.predict(Xd)
    assert isinstance(pred, da.Array)
    assert_eq(pred, in_memory.predict(X), rtol=1e-7, atol=1e-9)
    assert pipe.score(Xd, yd) == pytest.approx(in_memory.score(X, y), rel=1e-8)
    assert pipe.score(Xd, yd) > 0.9


def test_errors_have_scikit_learn_wording():
    X, y = make_data(6)
    Xd = da.from_array(X, chunks=100)
    with pytest.raises(ValueError, match="requires y to be passed"):
        Ridge().fit(Xd, None)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        Ridge().fit(Xd, y[:-1])
    with pytest.raises(ValueError, match="Number of targets and number of penalties"):
        Ridge(alpha=[1.0, 2.0]).fit(Xd, y)
    with pytest.raises(ValueError, match="must be a float in the range"):
        Ridge(alpha=-1.0).fit(X, y)
    bad = X.copy()
    bad[123, 4] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        Ridge().fit(da.from_array(bad, chunks=100), y)
    bad_y = y.copy()
    bad_y[7] = np.inf
    with pytest.raises(ValueError, match="Input y contains infinity"):
        Ridge().fit(Xd, bad_y)
    model = Ridge().fit(Xd, y)
    with pytest.raises(ValueError, match="X has 11 features, but Ridge is expecting 12 features"):
        model.predict(Xd[:, :11])


def test_fit_from_zarr_arrays_on_disk(tmp_path):
    import zarr

    X, y = make_data(8, n=1_000, n_targets=None)
    zX = zarr.create_array(store=str(tmp_path / "X"), shape=X.shape, chunks=(128, X.shape[1]), dtype="f8")
    zy = zarr.create_array(store=str(tmp_path / "y"), shape=y.shape, chunks=(300,), dtype="f8")
    zX[:], zy[:] = X, y
    zX, zy = zarr.open_array(str(tmp_path / "X"), mode="r"), zarr.open_array(str(tmp_path / "y"), mode="r")
    ref = sk.Ridge(alpha=0.5).fit(X, y)
    model = Ridge(alpha=0.5).fit(zX, zy)
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=1e-10)
    assert model.score(zX, zy) == pytest.approx(ref.score(X, y), rel=1e-10)
    pipe = make_pipeline(RBFSampler(n_components=40, random_state=0), Ridge()).fit(zX, zy)
    assert isinstance(pipe.predict(zX), da.Array)
    assert Ridge(alpha=0.5).fit(X, zy).coef_ == pytest.approx(ref.coef_, rel=1e-10)  # y read into memory


def test_zero_row_blocks_are_folded_as_nothing():
    # found by the input fuzzing: a zero-row block of a 1-D y could not be reshaped to (0, n_targets)
    from dkapprox.linear_model import RidgeCV

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 3)), rng.normal(size=60)
    chunks = (20, 0, 25, 0, 15)
    Xd, yd = da.from_array(X, chunks=(chunks, 3)), da.from_array(y, chunks=(chunks,))
    for ours, whole in [(Ridge(alpha=0.5), Ridge(alpha=0.5)),
                        (RidgeCV(n_folds=3, random_state=0), RidgeCV(n_folds=3, random_state=0))]:
        np.testing.assert_allclose(ours.fit(Xd, yd).coef_, whole.fit(X, y).coef_, rtol=1e-12)
