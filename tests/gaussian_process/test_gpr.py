"""GaussianProcessRegressor: scikit-learn's exact GP where every row is a center, Titsias' bound otherwise."""

import functools

import dask.array as da
import numpy as np
import pytest
import scipy.optimize
import scipy.sparse
from _estimators import check_estimators
from sklearn.gaussian_process import GaussianProcessRegressor as SklearnGP
from sklearn.gaussian_process.kernels import RBF, DotProduct, Matern, RationalQuadratic, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.utils.estimator_checks import estimator_checks_generator

from dkapprox.gaussian_process import GaussianProcessRegressor, _sparse


def _data(n=300, d=3, seed=1, noise=0.3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + noise * rng.standard_normal(n)
    return X, y


def test_every_row_a_center_is_scikit_learns_exact_gp_on_numpy_and_dask():
    X, y = _data(150)
    kernel = C(1.0) * RBF([1.0, 1.0, 1.0]) + WhiteKernel(0.1)
    ours = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(X, y)
    theirs = SklearnGP(kernel, normalize_y=True, random_state=0).fit(X, y)
    assert ours.kernel_ == theirs.kernel_
    assert ours.log_marginal_likelihood_value_ == pytest.approx(theirs.log_marginal_likelihood_value_, rel=1e-12)
    Xt = X[:40] + 0.05
    mean, std = ours.predict(da.from_array(Xt, chunks=15), return_std=True)
    assert isinstance(mean, da.Array) and isinstance(std, da.Array)
    want_mean, want_std = theirs.predict(Xt, return_std=True)
    np.testing.assert_allclose(mean.compute(), want_mean, rtol=0, atol=1e-12 * np.abs(want_mean).max())
    np.testing.assert_allclose(std.compute(), want_std, rtol=0, atol=1e-12 * want_std.max())
    lazy = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(
        da.from_array(X, chunks=40), da.from_array(y, chunks=40))
    assert lazy.kernel_ == theirs.kernel_ and lazy.n_passes_ == 0


@pytest.mark.parametrize("base", [RBF([0.8, 1.0, 1.3]), Matern(1.0, nu=0.5), Matern([0.8, 1.0, 1.3], nu=1.5),
                                  Matern(1.0, nu=2.5)], ids=["rbf-ard", "matern12", "matern32-ard", "matern52"])
def test_the_bound_with_every_row_a_center_is_the_exact_gp_within_its_jitter(base):
    X, y = _data(200)
    kernel = C(2.0) * base + WhiteKernel(0.05)
    exact = SklearnGP(kernel, optimizer=None).fit(X, y)
    sparse = GaussianProcessRegressor(kernel, optimizer=None, centers=X).fit(X, y)
    Xt = X[:50] + 0.1
    want_mean, want_std = exact.predict(Xt, return_std=True)
    mean, std = sparse.predict(Xt, return_std=True)
    # K_mm carries a jitter ε = 1e-6 s²: Q = K (K + εI)⁻¹ K is K less at most ε a direction, so the trace term
    # and the shifted noise each cost at most n ε / (2σ²): the gap is at most 200 * 2e-6 / 0.05 = 8e-3
    gap = 200 * 1e-6 * 2.0 / 0.05
    assert exact.log_marginal_likelihood_value_ - gap < sparse.log_marginal_likelihood_value_
    assert sparse.log_marginal_likelihood_value_ <= exact.log_marginal_likelihood_value_ + 1e-9
    np.testing.assert_allclose(mean, want_mean, rtol=0, atol=1e-4 * np.abs(want_mean).max())
    np.testing.assert_allclose(std, want_std, rtol=0, atol=1e-4 * want_std.max())


@pytest.mark.parametrize("base", [RBF([0.5, 0.7, 0.9]), RBF(0.6), Matern([0.5, 0.7, 0.9], nu=0.5),
                                  Matern(0.6, nu=1.5), Matern([0.5, 0.7, 0.9], nu=2.5)],
                         ids=["rbf-ard", "rbf", "matern12-ard", "matern32", "matern52-ard"])
def test_the_two_pass_gradient_is_the_bounds_derivative(base):
    X, y = _data()
    gp = GaussianProcessRegressor(C(2.0) * base + WhiteKernel(0.1), optimizer=None, n_centers=40, random_state=0,
                                  normalize_y=True).fit(X, y)
    theta = gp.kernel_.theta + 0.05
    passes = _sparse.TRAINING[gp].passes
    _, grad = gp.log_marginal_likelihood(theta, eval_gradient=True)
    assert _sparse.TRAINING[gp].passes == passes + 2  # the statistics, then the length scales' gradient
    h = 1e-6
    central = np.array([(gp.log_marginal_likelihood(theta + e) - gp.log_marginal_likelihood(theta - e)) / (2 * h)
                        for e in np.eye(theta.size) * h])
    np.testing.assert_allclose(grad, central, rtol=0, atol=1e-6 * np.abs(central).max())


def test_more_centers_raise_the_bound_and_the_exact_evidence_caps_it():
    X, y = _data(250)
    kernel = C(1.0) * RBF([1.0, 1.0, 1.0]) + WhiteKernel(0.1)
    order = np.random.default_rng(0).permutation(X.shape[0])
    values = [GaussianProcessRegressor(kernel, optimizer=None, centers=X[order[:m]]).fit(X, y)
              .log_marginal_likelihood_value_ for m in (5, 20, 80)]
    exact = SklearnGP(kernel, optimizer=None).fit(X, y).log_marginal_likelihood_value_
    assert values[0] < values[1] < values[2] < exact


@pytest.mark.filterwarnings("ignore:The optimal value found:sklearn.exceptions.ConvergenceWarning")
def test_dask_input_gives_numpys_model_whatever_the_chunks():  # the third feature is noise: its length scale grows
    X, y = _data(2000)
    kernel = C(1.0) * RBF([1.0, 1.0, 1.0]) + WhiteKernel(0.1)
    fits = [GaussianProcessRegressor(kernel, n_centers=40, random_state=0, normalize_y=True).fit(*data)
            for data in [(X, y), (da.from_array(X, chunks=700), da.from_array(y, chunks=700)),
                         (da.from_array(X, chunks=450), da.from_array(y, chunks=450))]]
    first = fits[0]
    Xt = X[:60] + 0.02
    want_mean, want_std = first.predict(Xt, return_std=True)
    for other in fits[1:]:
        # the same centers; the bound's sums differ by rounding only. L-BFGS-B stops once F falls by less than
        # 2.2e-9 of itself a step (its ftol): on a ridge that flat (the signal variance against the length scales)
        # where it stops moves with the rounding, so θ agrees to 1e-3 and F, which it maximizes, to 1e-9
        np.testing.assert_array_equal(other.centers_, first.centers_)
        np.testing.assert_allclose(other.kernel_.theta, first.kernel_.theta, rtol=0, atol=1e-3)
        assert other.log_marginal_likelihood_value_ == pytest.approx(first.log_marginal_likelihood_value_, rel=1e-9)
        assert other.n_passes_ > 2
        mean, std = other.predict(da.from_array(Xt, chunks=25), return_std=True)
        np.testing.assert_allclose(mean.compute(), want_mean, rtol=0, atol=1e-6 * np.abs(want_mean).max())
        np.testing.assert_allclose(std.compute(), want_std, rtol=0, atol=1e-6 * want_std.max())
    score = fits[1].score(da.from_array(X, chunks=700), da.from_array(y, chunks=700))
    assert score == pytest.approx(first.score(X, y), rel=1e-9) and score > 0.85


def test_numpy_input_gives_the_same_bits_on_one_core_or_three(monkeypatch):
    """In-memory blocks of 8,192 rows run a core each, one BLAS thread each, and are summed in order."""
    from dkapprox import utils

    X, y = _data(20_000)
    kernel = C(1.0) * RBF([1.0, 1.0, 1.0]) + WhiteKernel(0.1)
    fits = []
    for cores in (1, 3):
        monkeypatch.setattr(utils, "available_cpus", lambda cores=cores: cores)
        gp = GaussianProcessRegressor(kernel, n_centers=32, random_state=0, optimizer=None).fit(X, y)
        fits.append((gp.log_marginal_likelihood_value_, gp.dual_coef_, *gp.predict(X[:9_000], return_std=True)))
    assert fits[0][0] == fits[1][0]
    for one, three in zip(fits[0][1:], fits[1][1:]):
        np.testing.assert_array_equal(one, three)


def test_intervals_cover_held_out_rows_of_a_noisy_field():
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 10, (3000, 2))
    f = np.sin(X[:, 0]) * np.cos(0.7 * X[:, 1]) + 0.3 * X[:, 0]
    y = f + 0.2 * rng.standard_normal(X.shape[0])
    gp = GaussianProcessRegressor(C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1), n_centers=120, centers="kmeans",
                                  random_state=0, normalize_y=True).fit(X[:2000], y[:2000])
    mean, std = gp.predict(X[2000:], return_std=True)
    covered = np.mean(np.abs(y[2000:] - mean) <= 1.96 * std)
    assert 0.93 <= covered <= 0.97
    assert gp.kernel_.k2.noise_level == pytest.approx(0.04, rel=0.25)  # the noise's variance, 0.2²


def test_the_signal_variance_and_the_noise_come_from_one_pass():
    X, y = _data(400)
    fixed = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), optimizer=None, n_centers=20,
                                     random_state=0).fit(X, y)
    assert fixed.n_passes_ == 1 + 1  # the centers' draw reads the rows once, then the statistics
    # a fixed length scale: the signal variance and the noise are learned from that one pass's sums
    kernel = C(1.0) * RBF(1.0, length_scale_bounds="fixed") + WhiteKernel(0.1)
    free_noise = GaussianProcessRegressor(kernel, n_centers=20, random_state=0).fit(X, y)
    assert free_noise.n_passes_ == 1 + 1 and free_noise.kernel_.k1.k2.length_scale == 1.0
    passes = _sparse.TRAINING[free_noise].passes
    value, grad = free_noise.log_marginal_likelihood(free_noise.kernel_.theta + 0.1, eval_gradient=True)
    assert _sparse.TRAINING[free_noise].passes == passes and value < free_noise.log_marginal_likelihood_value_
    # at the optimum the gradient in the signal variance and the noise vanishes (an interior optimum)
    _, at_optimum = free_noise.log_marginal_likelihood(free_noise.kernel_.theta, eval_gradient=True)
    np.testing.assert_allclose(at_optimum, 0.0, atol=1e-4)
    # with the length scale free, each length scale costs two passes and no more: the other two are profiled out
    free = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), n_centers=20, random_state=0).fit(X, y)
    joint = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), n_centers=20, random_state=0,
                                     optimizer=_scipy_lbfgs).fit(X, y)
    assert free.log_marginal_likelihood_value_ >= joint.log_marginal_likelihood_value_ - 1e-6
    assert free.n_passes_ <= joint.n_passes_


def _scipy_lbfgs(objective, theta, bounds):
    """scikit-learn's own optimizer, as a callable: every hyperparameter moved at once (the joint search)."""
    result = scipy.optimize.minimize(objective, theta, method="L-BFGS-B", jac=True, bounds=bounds)
    return result.x, result.fun


def test_sample_y_and_the_covariance_agree_with_the_standard_deviation():
    X, y = _data(300)
    gp = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), n_centers=30, random_state=0).fit(X, y)
    Xt = X[:20]
    mean, cov = gp.predict(Xt, return_cov=True)
    _, std = gp.predict(Xt, return_std=True)
    np.testing.assert_allclose(np.sqrt(np.diag(cov)), std, rtol=1e-9)
    assert gp.sample_y(Xt, n_samples=3).shape == (20, 3)
    two = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), n_centers=30, random_state=0,
                                   normalize_y=True).fit(X, np.c_[y, 2 * y])
    mean2, std2 = two.predict(Xt, return_std=True)
    assert mean2.shape == std2.shape == (20, 2)
    np.testing.assert_allclose(std2[:, 1], 2 * std2[:, 0], rtol=1e-9)
    assert two.sample_y(Xt, n_samples=4).shape == (20, 2, 4)


def test_bad_input_is_refused_in_scikit_learns_words():
    X, y = _data(100)
    sparse = dict(n_centers=10, random_state=0)
    bad = y.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="Input y contains NaN"):
        GaussianProcessRegressor(**sparse).fit(X, bad)
    with pytest.raises(ValueError, match="Input y contains NaN"):
        GaussianProcessRegressor(optimizer=None, **sparse).fit(da.from_array(X, chunks=30),
                                                               da.from_array(bad, chunks=30))
    with pytest.raises(TypeError, match="Sparse data was passed for X, but dense data is required"):
        GaussianProcessRegressor(**sparse).fit(scipy.sparse.csr_matrix(X), y)
    with pytest.raises(ValueError, match="'kernel' parameter of GaussianProcessRegressor must be None or an object"):
        GaussianProcessRegressor("rbf", **sparse).fit(X, y)

    class LooksLikeAKernel:
        def __call__(self, X, Y=None):
            return X @ X.T

        diag = clone_with_theta = __call__

    with pytest.raises(ValueError, match="must be a scikit-learn Gaussian process kernel"):
        GaussianProcessRegressor(LooksLikeAKernel(), **sparse).fit(X, y)
    with pytest.raises(ValueError, match="RBF or Matern"):
        GaussianProcessRegressor(RationalQuadratic(), **sparse).fit(X, y)
    with pytest.raises(ValueError, match="RBF or Matern"):
        GaussianProcessRegressor(RBF() + DotProduct(), **sparse).fit(X, y)
    with pytest.raises(ValueError, match="nu=1.2"):
        GaussianProcessRegressor(Matern(nu=1.2), **sparse).fit(X, y)
    with pytest.raises(ValueError, match="n_centers=200 must be at most the number of samples, n_samples=100"):
        GaussianProcessRegressor(n_centers=200).fit(X, y)
    with pytest.raises(ValueError, match="all bounds are finite"):
        GaussianProcessRegressor(RBF(1.0, length_scale_bounds=(1e-5, np.inf)), n_restarts_optimizer=1,
                                 **sparse).fit(X, y)
    gp = GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1), optimizer=None, **sparse).fit(X, y)
    with pytest.raises(RuntimeError, match="At most one of return_std or return_cov"):
        gp.predict(X, return_std=True, return_cov=True)
    big = da.zeros((1_000_000, 3), chunks=100_000)
    with pytest.raises(ValueError, match=r"return_cov's n x n covariance for 1,000,000 rows needs 7\.28 TiB"):
        gp.predict(big, return_cov=True)
    with pytest.raises(ValueError, match=r"exact GP's n x n kernel matrix for 1,000,000 rows needs 7\.28 TiB"):
        GaussianProcessRegressor().fit(big, da.zeros(1_000_000, chunks=100_000))


def test_restarts_keep_the_best_start():
    X, y = _data(300)
    kernel = C(1.0, (1e-2, 1e2)) * RBF(1.0, (1e-2, 1e2)) + WhiteKernel(0.1, (1e-3, 1e1))
    one = GaussianProcessRegressor(kernel, n_centers=20, random_state=0).fit(X, y)
    three = GaussianProcessRegressor(kernel, n_centers=20, random_state=0, n_restarts_optimizer=2).fit(X, y)
    assert three.log_marginal_likelihood_value_ >= one.log_marginal_likelihood_value_ - 1e-9
    assert three.n_passes_ > one.n_passes_


def test_each_evaluation_of_the_bound_is_news_where_a_person_is_watching(monkeypatch, capsys, caplog):
    import logging

    X, y = _data(200)
    gp = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), n_centers=15, random_state=0)
    logger = logging.getLogger("dkapprox.gaussian_process")
    monkeypatch.setattr(logger, "propagate", False)  # no handler takes it (pytest's own sits on the root)
    monkeypatch.setenv("DKAPPROX_PROGRESS", "1")
    gp.fit(X, y)
    lines = [line for line in capsys.readouterr().err.splitlines() if "GaussianProcessRegressor: evaluation" in line]
    assert len(lines) >= 2 and lines[0].startswith("GaussianProcessRegressor: evaluation 1, bound ")
    passes = [int(line.split(", ")[2].removesuffix(" passes")) for line in lines]
    assert passes == sorted(set(passes)) and passes[-1] <= gp.n_passes_  # each moves the length scales: a pass
    monkeypatch.setenv("DKAPPROX_PROGRESS", "0")
    gp.fit(X, y)
    assert "evaluation" not in capsys.readouterr().err
    monkeypatch.setattr(logger, "propagate", True)
    with caplog.at_level("INFO", logger="dkapprox"):  # a handler (the CLI's)
        gp.fit(X, y)
    assert sum("GaussianProcessRegressor: evaluation" in r.getMessage() for r in caplog.records) == len(lines)





def _checks():
    # check_array_api_input can only skip: the GP takes NumPy and dask arrays, not other namespaces
    for base in check_estimators("gaussian_process"):
        for estimator, check in estimator_checks_generator(base):
            name = (check.func if isinstance(check, functools.partial) else check).__name__
            if name != "check_array_api_input":
                yield pytest.param(estimator, check, id=name)


@pytest.mark.parametrize("estimator, check", list(_checks()))
def test_scikit_learns_estimator_checks(estimator, check):
    check(estimator)


def test_the_profiled_bound_is_the_bound():
    from dkapprox.gaussian_process import _bound
    from dkapprox.gaussian_process._kernels import read_kernel

    X, y = _data(300)
    kernel = C(1.0) * RBF([0.8, 1.0, 1.3]) + WhiteKernel(0.1)
    gp = GaussianProcessRegressor(kernel, optimizer=None, n_centers=25, random_state=0).fit(X, np.c_[y, -y])
    training = _sparse.TRAINING[gp]
    params = read_kernel(gp.kernel_, 3)
    stats, _, _ = training._statistics(params)
    profile = _bound.Profile(stats)
    for u, noise in ((1.0, 0.1), (3.7, 0.02), (0.2, 1.5)):
        full = read_kernel(gp.kernel_.clone_with_theta(np.log([u, 0.8, 1.0, 1.3, noise])), 3)
        bound = training.bound(full)
        value, d_u, d_v = profile(u, noise + gp.alpha)
        assert value == pytest.approx(bound.value, rel=1e-10)
        assert d_u * u == pytest.approx(bound.d_variance, rel=1e-7, abs=1e-8)
        assert d_v == pytest.approx(bound.d_noise, rel=1e-7, abs=1e-8)
