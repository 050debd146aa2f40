"""KernelRidge and KernelRidgeClassifier: Falkon's preconditioned CG, a pass over the blocks an iteration."""

import threading
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import zarr
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
from sklearn.metrics.pairwise import pairwise_kernels

from dkapprox import Nystroem, engine
from dkapprox.kernel_ridge._falkon import Centers, PassState, combine_normal, normal_partial
from dkapprox.kernels import Kernel
from dkapprox.learning._targets import NumericTargets
from dkapprox.linear_model import KernelRidge, KernelRidgeClassifier


def regression(n=600, d=4, seed=0, targets=None, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 4 + 0.1 * rng.normal(size=n)
    if targets:
        y = np.column_stack([y] + [np.cos(X[:, k % d]) for k in range(1, targets)])
    return X, y


def restricted_solution(model, X, y, w=None):
    """The Nystroem kernel ridge coefficients on the model's centers, by a dense solve."""
    params = dict(gamma=model.gamma, degree=model.degree, coef0=model.coef0)
    K = pairwise_kernels(X.astype(np.float64), model.centers_.astype(np.float64), metric=model.kernel,
                         filter_params=True, **params)
    C = pairwise_kernels(model.centers_.astype(np.float64), metric=model.kernel, filter_params=True, **params)
    W = np.ones(len(X)) if w is None else w
    H = K.T @ (W[:, None] * K) + model.alpha * C
    return np.linalg.solve(H, K.T @ (W[:, None] * y.reshape(len(X), -1))), K


@pytest.mark.parametrize("kernel, params", [("rbf", dict(gamma=0.3)), ("laplacian", dict(gamma=0.2)),
                                            ("polynomial", dict(degree=2, coef0=1.0, gamma=0.5))])
def test_every_row_a_center_gives_scikit_learns_kernel_ridge(kernel, params):
    """m = n: the preconditioner is the system itself (up to its jitter): one iteration, scikit-learn's
    predictions. Bound: the jitter m eps mean(diag K) perturbs K by ~1e-13 relative; 1e-8 leaves room."""
    X, y = regression(n=500, targets=2)
    sk = SkKernelRidge(alpha=0.5, kernel=kernel, **params).fit(X, y)
    model = KernelRidge(alpha=0.5, kernel=kernel, n_centers=500, random_state=0, **params).fit(X, y)
    assert model.n_iter_ <= 2 and model.passes_ == 1 + 1 + model.n_iter_
    Xt = regression(n=200, seed=1)[0]
    np.testing.assert_allclose(model.predict(Xt), sk.predict(Xt), atol=1e-8 * np.abs(sk.predict(Xt)).max())


def test_sample_weights_every_row_a_center_give_scikit_learns_weighted_kernel_ridge():
    X, y = regression(n=400)
    w = np.random.default_rng(3).uniform(0.2, 3.0, size=400)
    sk = SkKernelRidge(alpha=0.3, kernel="rbf", gamma=0.4).fit(X, y, sample_weight=w)
    model = KernelRidge(alpha=0.3, kernel="rbf", gamma=0.4, n_centers=400, tol=1e-12, max_iter=200,
                        random_state=0).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(model.predict(X), sk.predict(X), atol=1e-7)


@pytest.mark.parametrize("weighted", [False, True])
def test_a_tenth_of_the_rows_as_centers_solves_the_nystroem_normal_equations(weighted):
    """m = n/10: CG to tol reaches the dense solve of (K_nm^T W K_nm + alpha K_mm) a = K_nm^T W y."""
    X, y = regression(n=1000, targets=2)
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=1000) if weighted else None
    model = KernelRidge(alpha=1.0, kernel="rbf", gamma=0.5, n_centers=100, tol=1e-10, max_iter=300,
                        random_state=0).fit(X, y, sample_weight=w)
    a, K = restricted_solution(model, X, y, w)
    assert model.residuals_[-1] <= 1e-10 and len(model.residuals_) == model.n_iter_
    np.testing.assert_allclose(model.predict(X), K @ a, atol=1e-7 * np.abs(K @ a).max())


def test_dask_and_zarr_fits_equal_the_numpy_fit_whatever_the_chunks(tmp_path):
    """Centers are chosen by global row, so every chunking picks the same ones. A pass's partials differ
    between chunkings only in summation order, within the float64 bound of a sum of n terms (checked on
    the first pass); CG carries such differences on, and each fit stops within its tol of the same
    solution, so at tol=1e-10 the predictions agree to 1e-7 of their scale (as the dense solve does)."""
    X, y = regression(n=1200)
    kw = dict(alpha=0.5, kernel="rbf", gamma=0.5, n_centers=150, tol=1e-10, max_iter=300, random_state=4)
    ref = KernelRidge(**kw).fit(X, y)
    store = zarr.open_array(tmp_path / "X.zarr", mode="w", shape=X.shape, chunks=(170, 4), dtype=X.dtype)
    store[...] = X
    inputs = [(da.from_array(X, chunks=100), da.from_array(y, chunks=100)),
              (da.from_array(X, chunks=(333, 2)), y),
              (store, da.from_array(y, chunks=170))]
    scale = np.abs(ref.predict(X)).max()
    for Xi, yi in inputs:
        model = KernelRidge(**kw).fit(Xi, yi)
        np.testing.assert_array_equal(model.center_indices_, ref.center_indices_)
        predicted = model.predict(Xi)
        assert isinstance(predicted, da.Array)
        np.testing.assert_allclose(predicted.compute(), ref.predict(X), atol=1e-7 * scale)
        assert abs(model.score(Xi, yi) - ref.score(X, y)) < 1e-7


def test_a_pass_is_chunk_invariant_within_the_rounding_of_a_sum():
    X, y = regression(n=3000)
    centers = Centers(Kernel("rbf", (("gamma", 0.5),)), X[:64])
    state = PassState(centers, None, NumericTargets(1))
    whole = normal_partial(0, state, X, y)[0]
    K = pairwise_kernels(X, X[:64], metric="rbf", gamma=0.5)
    bound = 3000 * np.finfo(np.float64).eps * (np.abs(K).T @ np.abs(y))[:, None]
    for chunks in (100, 777, 1500):
        reduced = engine.reduce_aligned_rows([da.from_array(X, chunks=chunks), y], normal_partial, combine_normal,
                                             state)
        part = reduced.compute()[0]
        assert np.all(np.abs(part - whole) <= bound)


def test_float32_stays_float32_and_agrees_with_float64_within_its_rounding():
    X, y = regression(n=800)
    kw = dict(alpha=1.0, kernel="rbf", gamma=0.5, n_centers=80, tol=1e-6, random_state=0)
    m64 = KernelRidge(**kw).fit(X, y)
    m32 = KernelRidge(**kw).fit(X.astype(np.float32), y)
    assert m32.dual_coef_.dtype == np.float32 and m32.centers_.dtype == np.float32
    lazy = m32.predict(da.from_array(X.astype(np.float32), chunks=200))
    assert lazy.dtype == np.float32 and lazy.compute().dtype == np.float32
    # float32 kernel values (eps 6e-8) through a system of condition ~1e4 at this alpha: 1e-3 relative
    np.testing.assert_allclose(m32.predict(X.astype(np.float32)), m64.predict(X), atol=1e-3)


class RowReads:
    """Records the rows of each block read through it (dask's meta inference calls it on an empty block)."""

    def __init__(self):
        self.reads, self.lock = [], threading.Lock()

    def __call__(self, block):
        if block.shape[0]:
            with self.lock:
                self.reads.append(block.shape[0])
        return block

    def __dask_tokenize__(self):  # array expressions name a map_blocks by its function's token
        return ("row-reads", id(self))


def test_fit_counts_its_passes_and_reads_each_block_once_a_pass_unless_persisted():
    X, y = regression(n=900)
    counted = RowReads()
    reads = counted.reads
    Xd = da.from_array(X, chunks=100).map_blocks(counted, dtype=X.dtype)
    centers = X[::30]
    kw = dict(alpha=0.5, kernel="rbf", gamma=0.5, centers=centers, tol=1e-6)
    with dask.config.set({"dkapprox.persist-fraction": 0, "scheduler": "threads"}):
        model = KernelRidge(**kw).fit(Xd, y)
    assert not model.input_persisted_ and model.center_passes_ == 0
    assert model.passes_ == 1 + model.n_iter_ and len(reads) == 9 * model.passes_
    reads.clear()
    with dask.config.set({"scheduler": "threads"}):
        model = KernelRidge(**kw).fit(Xd, y)
    assert model.input_persisted_ and len(reads) == 9  # read once, kept for every pass


def test_center_methods_and_given_centers():
    X, y = regression(n=2000)
    Xd = da.from_array(X, chunks=400)
    scores = {}
    for method in ("uniform", "kmeans", "leverage", "rpcholesky"):
        model = KernelRidge(alpha=0.1, kernel="rbf", gamma=0.5, n_centers=60, centers=method, random_state=0)
        model.fit(Xd, y)
        assert model.centers_.shape == (60, 4) and model.passes_ == model.center_passes_ + 1 + model.n_iter_
        scores[method] = model.score(X, y)
    assert min(scores.values()) > 0.7, scores
    given = KernelRidge(alpha=0.1, kernel="rbf", gamma=0.5, centers=X[:50]).fit(X, y)
    assert given.center_passes_ == 0 and (given.center_indices_ == -1).all()


@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_is_kernel_ridge_on_plus_minus_one_targets(n_classes):
    X, _ = regression(n=900)
    labels = np.digitize(X[:, 0] + X[:, 1], [-0.5, 0.5][: n_classes - 1]) + 10
    # dask (blocks of 200) against NumPy: the passes differ in summation order, which CG carries on; at
    # tol=1e-10 both stop within 1e-7 of the same solution (as in the chunking test above)
    kw = dict(alpha=0.5, kernel="rbf", gamma=0.5, n_centers=90, tol=1e-10, max_iter=300, random_state=0)
    clf = KernelRidgeClassifier(**kw).fit(da.from_array(X, chunks=200), da.from_array(labels, chunks=200))
    targets = np.where(labels[:, None] == np.unique(labels)[None, :], 1.0, -1.0)
    targets = targets[:, 1] if n_classes == 2 else targets
    reg = KernelRidge(**kw).fit(X, targets)
    np.testing.assert_allclose(clf.decision_function(X), reg.predict(X), atol=1e-7)
    np.testing.assert_array_equal(clf.classes_, np.unique(labels))
    assert clf.predict(da.from_array(X, chunks=300)).compute().tolist() == clf.predict(X).tolist()
    assert clf.score(X, labels) > 0.9


def test_bad_input_gets_a_clear_message_before_any_work():
    X, y = regression(n=200)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        KernelRidge().fit(da.from_array(X, chunks=50), da.from_array(y[:-1], chunks=50))
    Xn = X.copy()
    Xn[7, 1] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        KernelRidge(kernel="rbf", n_centers=20, random_state=0).fit(Xn, y)
    with pytest.raises(ValueError, match="Input X contains NaN"):
        KernelRidge(kernel="rbf", centers=X[:20]).fit(da.from_array(Xn, chunks=50), y)
    yn = y.copy()
    yn[3] = np.nan
    with pytest.raises(ValueError, match="y contains NaN"):
        KernelRidge(kernel="rbf", centers=X[:20]).fit(da.from_array(X, chunks=50), da.from_array(yn, chunks=50))
    with pytest.raises(ValueError, match="n_centers=300 must be at most the number of samples"):
        KernelRidge(n_centers=300).fit(X, y)
    with pytest.raises(ValueError, match="alpha=0 with a singular kernel matrix of the centers"):
        KernelRidge(alpha=0, kernel="rbf", centers=np.vstack([X[:10], X[:1]])).fit(X, y)
    with pytest.raises(ValueError, match="precomputed"):
        KernelRidge(kernel="precomputed").fit(X @ X.T, y)
    with pytest.raises(ValueError, match="not positive definite"):
        KernelRidge(kernel="sigmoid", gamma=2.0, coef0=-3.0, n_centers=40, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="number of penalties"):
        KernelRidge(alpha=[1.0, 2.0, 3.0]).fit(X, np.column_stack([y, y]))


def test_cg_that_stops_at_max_iter_warns_with_its_residual():
    X, y = regression(n=500)
    with pytest.warns(ConvergenceWarning, match=r"did not converge in max_iter=2 iterations: relative residual"):
        model = KernelRidge(alpha=1e-3, kernel="rbf", gamma=1.0, n_centers=100, max_iter=2, random_state=0).fit(X, y)
    assert model.n_iter_ == 2 and model.residuals_[-1] > model.tol
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KernelRidge(alpha=1.0, kernel="rbf", n_centers=50, random_state=0).fit(X, y)


def test_one_alpha_per_target():
    X, y = regression(n=300, targets=2)
    both = KernelRidge(alpha=[0.1, 5.0], kernel="rbf", gamma=0.5, n_centers=60, tol=1e-10, max_iter=300,
                       random_state=0).fit(X, y)
    for k, alpha in enumerate((0.1, 5.0)):
        one = KernelRidge(alpha=alpha, kernel="rbf", gamma=0.5, n_centers=60, tol=1e-10, max_iter=300,
                          random_state=0).fit(X, y[:, k])
        np.testing.assert_allclose(both.predict(X)[:, k], one.predict(X), atol=1e-8)


def test_sparse_input_and_sparse_landmarks_against_dense_rows():
    """Fitted on sparse rows, the centers are sparse; dense rows then go through scikit-learn's kernel
    (this also broke Nystroem: its rbf buffers took sparse landmarks for an array)."""
    X = sp.random(300, 6, density=0.4, format="csr", random_state=0)
    y = np.asarray(X.sum(axis=1)).ravel()
    model = KernelRidge(alpha=0.1, kernel="rbf", gamma=0.5, n_centers=40, random_state=0).fit(X, y)
    np.testing.assert_allclose(model.predict(X.toarray()), model.predict(X), atol=1e-12)
    nys = Nystroem(n_components=20, random_state=0).fit(X)
    np.testing.assert_allclose(nys.transform(X.toarray()), nys.transform(X), atol=1e-12)


def test_model_files_round_trip(tmp_path):
    import dkapprox

    X, y = regression(n=300)
    labels = (y > 0).astype(int)
    for model, target in ((KernelRidge(kernel="rbf", n_centers=30, random_state=0), y),
                          (KernelRidgeClassifier(kernel="rbf", n_centers=30, random_state=0), labels)):
        model.fit(X, target)
        dkapprox.save(model, tmp_path / type(model).__name__)
        loaded = dkapprox.load(tmp_path / type(model).__name__)
        np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
        assert loaded.n_iter_ == model.n_iter_ and loaded.passes_ == model.passes_


def test_float32_rbf_slices_are_within_their_derived_bound():
    """Distances from a float32 product: |error| <= (d + 2) eps32 (|x|^2 + |c|^2) in the squared distance, so
    the kernel value is off by gamma times that, relative, plus the float32 exponential's own rounding."""
    from sklearn.metrics.pairwise import rbf_kernel

    from dkapprox.kernel_ridge._falkon import _rbf32_slices

    rng = np.random.default_rng(5)
    X = (rng.normal(size=(3000, 20)) * 1.5).astype(np.float32)
    C = X[::37].copy()
    centers = Centers(Kernel("rbf", (("gamma", 0.05),)), C)
    exact = rbf_kernel(X.astype(np.float64), C.astype(np.float64), gamma=0.05)
    eps = np.finfo(np.float32).eps
    norms = (X.astype(np.float64) ** 2).sum(1)[:, None] + (C.astype(np.float64) ** 2).sum(1)[None, :]
    bound = exact * (0.05 * 22 * eps * norms + 2 * eps)
    for s, K in _rbf32_slices(centers, X):
        assert np.all(np.abs(K - exact[s]) <= bound[s])


def test_factored_rbf_slices_are_within_their_derived_bound_and_fall_back_outside_their_range():
    """k = a E b with centered rows: the exponent 2 gamma x'.c' is off by at most (d + 2) eps gamma (|x'|^2 +
    |c'|^2) (x' = x - mu, c' = c - mu, mu the centers' mean), so the kernel value by that, relative, plus the
    exponential's and three products' roundings. Rows far from the origin factor as well as any (centering);
    a block whose factors would leave exp(+-40) takes the plain path (and so the same kernel)."""
    from dkapprox.kernel_ridge._falkon import FACTORED_EXPONENT_LIMIT, kernel_parts

    rng = np.random.default_rng(6)
    for dtype, gamma in ((np.float32, 0.05), (np.float64, 0.05), (np.float32, 2.0)):
        X = (rng.normal(size=(3000, 20)) * 1.5 + 100).astype(dtype)  # far from 0: norms of 2e5
        C = X[::37].copy()
        b, slices = kernel_parts(Centers(Kernel("rbf", (("gamma", gamma),)), C), X, dtype)
        X64, C64 = X.astype(np.float64), C.astype(np.float64)
        mu = C64.mean(axis=0)
        norms = ((X64 - mu) ** 2).sum(1)[:, None] + ((C64 - mu) ** 2).sum(1)[None, :]
        factored = gamma * norms.max() <= FACTORED_EXPONENT_LIMIT
        assert (b is not None) == factored == (gamma < 1)
        exact = np.exp(-gamma * ((X64[:, None, :] - C64[None]) ** 2).sum(-1))  # differences: no cancellation
        eps = np.finfo(dtype).eps
        # the plain path's distances are not centered: its bound has the norms themselves
        if not factored and dtype == np.float32:
            norms = (X64 ** 2).sum(1)[:, None] + (C64 ** 2).sum(1)[None, :]
        bound = exact * (gamma * 22 * eps * norms + 4 * eps)
        seen = 0
        for s, E, a in slices:
            K = E.astype(np.float64) if a is None else a[:, None].astype(np.float64) * E * b[None, :]
            assert np.all(np.abs(K - exact[s]) <= bound[s]), (dtype, gamma)
            seen += K.shape[0]
        assert seen == X.shape[0]


def test_each_cg_iteration_is_news_where_a_person_is_watching(monkeypatch, capsys, caplog):
    X, y = regression(n=300)
    import logging

    kw = dict(kernel="rbf", n_centers=30, max_iter=4, tol=1e-12, random_state=0)
    logger = logging.getLogger("dkapprox.linear_model")
    monkeypatch.setattr(logger, "propagate", False)  # no handler takes it (pytest's own sits on the root)
    monkeypatch.setenv("DKAPPROX_PROGRESS", "1")
    with pytest.warns(ConvergenceWarning):
        KernelRidge(**kw).fit(X, y)
    lines = [line for line in capsys.readouterr().err.splitlines() if "CG iteration" in line]
    assert len(lines) == 4 and lines[-1].startswith("KernelRidge: CG iteration 4 of at most 4, relative residual")
    monkeypatch.setenv("DKAPPROX_PROGRESS", "0")
    with pytest.warns(ConvergenceWarning):
        KernelRidge(**kw).fit(X, y)
    assert "CG iteration" not in capsys.readouterr().err
    monkeypatch.setattr(logger, "propagate", True)
    with caplog.at_level("INFO", logger="dkapprox"), pytest.warns(ConvergenceWarning):  # a handler (the CLI's)
        KernelRidge(**kw).fit(X, y)
    assert sum("CG iteration" in r.getMessage() for r in caplog.records) == 4


def test_the_classifier_refuses_device_arrays_with_a_clear_message():
    """KernelRidge runs on device blocks (tests/kernel_ridge/test_device.py); the classifier not yet."""
    array_api_strict = pytest.importorskip("array_api_strict")
    X, y = regression(n=100)
    with pytest.raises(ValueError, match="device arrays"):
        KernelRidgeClassifier(kernel="rbf", n_centers=10).fit(array_api_strict.asarray(X), y > 0)


@pytest.mark.parametrize("Model", [KernelRidge, KernelRidgeClassifier])
def test_gamma_scale_is_svcs_bandwidth_measured_in_one_more_pass(Model, tmp_path):
    """gamma='scale' (issue 40): 1 / (n_features * X.var()), as scikit-learn's SVC; one pass on dask input."""
    import dkapprox

    X, y = regression(n=800, d=5)
    X = X * np.array([1.0, 3.0, 0.5, 2.0, 1.0])  # a variance far from 1: 'scale' differs from 1 / n_features
    target = y if Model is KernelRidge else (y > np.median(y)).astype(int)
    expected = 1.0 / (5 * X.var())
    kw = dict(alpha=0.1, kernel="rbf", n_centers=80, random_state=0, tol=1e-8)
    scaled = Model(gamma="scale", **kw).fit(X, target)
    fixed = Model(gamma=expected, **kw).fit(X, target)
    assert scaled.gamma_ == expected and not hasattr(fixed, "gamma_")
    np.testing.assert_array_equal(scaled.decision_function(X) if Model is KernelRidgeClassifier
                                  else scaled.predict(X),
                                  fixed.decision_function(X) if Model is KernelRidgeClassifier else fixed.predict(X))
    assert scaled.passes_ == fixed.passes_  # in memory: no pass is counted
    Xd = da.from_array(X, chunks=150)
    lazy_scaled, lazy_fixed = Model(gamma="scale", **kw).fit(Xd, target), Model(gamma=expected, **kw).fit(Xd, target)
    # the variance of a dask array is a tree of block moments: equal to NumPy's within the rounding of its sums
    assert lazy_scaled.gamma_ == pytest.approx(expected, rel=1e-12)
    assert lazy_scaled.passes_ == lazy_fixed.passes_ + 1
    dkapprox.save(scaled, tmp_path / "m")
    assert dkapprox.load(tmp_path / "m").gamma_ == expected
    with pytest.raises(ValueError, match="The 'gamma' parameter of .* must be .*'scale'"):
        Model(gamma="auto", kernel="rbf").fit(X, target)


def test_numpy_input_gives_the_same_bits_on_one_core_or_three(monkeypatch):
    """In-memory passes and predict run blocks of 8,192 rows a core each, one BLAS thread each, in row order."""
    from dkapprox import utils
    from dkapprox.linear_model import KernelRidgeCV

    X, y = regression(n=20_000)
    fits = []
    for cores in (1, 3):
        monkeypatch.setattr(utils, "available_cpus", lambda cores=cores: cores)
        ridge = KernelRidge(alpha=0.5, kernel="rbf", gamma=0.5, n_centers=40, random_state=0).fit(X, y)
        cv = KernelRidgeCV(alphas=[0.1, 1.0], gammas=[0.5], n_centers=40, random_state=0).fit(X, y)
        fits.append((ridge.dual_coef_, ridge.predict(X), cv.dual_coef_, cv.cv_results_["mean_test_score"]))
    for one, three in zip(*fits):
        np.testing.assert_array_equal(one, three)
