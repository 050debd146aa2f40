"""length_scale_grid: every candidate's statistics in one pass, each one's profiled bound, the best kept."""

import threading

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from dkapprox.gaussian_process import GaussianProcessRegressor
from dkapprox.models import fingerprint, load, save


def _data(n=300, d=3, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    return X, np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.3 * rng.standard_normal(n)


class BlockCounter:
    """Counts the blocks of X a fit computes: a pass reads every block once."""

    def __init__(self):
        self.count, self.lock = 0, threading.Lock()

    def __call__(self, block):
        with self.lock:
            self.count += 1
        return block

    def __dask_tokenize__(self):  # array expressions tokenize map_blocks' function, which a lock refuses
        return ("block-counter", id(self))


CASES = {
    "isotropic": (C(1.0) * RBF(1.0) + WhiteKernel(0.1), [0.2, 0.5, 1.0, 2.0, 5.0]),
    "ard-rows": (C(1.0) * RBF([1.0, 1.0, 1.0]) + WhiteKernel(0.1), [[0.5, 1.0, 2.0], [1.0, 1.0, 1.0], [2, 1, 3]]),
    "ard-shared": (C(1.0) * Matern([1.0, 1.0, 1.0], nu=1.5) + WhiteKernel(0.1), [0.3, 1.0, 3.0]),
    "fixed-noise": (RBF(1.0) + WhiteKernel(0.1, "fixed"), [0.5, 1.0, 2.0]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_pass_scores_each_candidate_as_its_own_fixed_fit_does(case):
    kernel, grid = CASES[case]
    X, y = _data()
    gp = GaussianProcessRegressor(kernel, optimizer=None, n_centers=20, random_state=0, normalize_y=True,
                                  length_scale_grid=grid).fit(X, y)
    for i, theta in enumerate(gp.grid_thetas_):
        alone = GaussianProcessRegressor(kernel.clone_with_theta(theta), optimizer=None, centers=gp.centers_,
                                         normalize_y=True).fit(X, y)
        assert gp.grid_scores_[i] == pytest.approx(alone.log_marginal_likelihood_value_, rel=1e-9)
    best = int(np.argmax(gp.grid_scores_))
    assert gp.best_index_ == best and gp.log_marginal_likelihood_value_ == gp.grid_scores_[best]
    np.testing.assert_array_equal(gp.kernel_.theta, gp.grid_thetas_[best])
    scales = np.asarray(grid, dtype=float)[best] * np.ones(1 if case in ("isotropic", "fixed-noise") else 3)
    np.testing.assert_allclose(gp.best_length_scale_, scales if scales.size > 1 else scales[0], rtol=1e-14)
    assert gp.n_passes_ == 1 + 1  # the uniform centers' draw, then the grid's one pass


def test_each_candidate_gets_its_own_signal_variance_and_noise():
    X, y = _data()
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)
    gp = GaussianProcessRegressor(kernel, optimizer=None, n_centers=20, random_state=0,
                                  length_scale_grid=[0.3, 3.0]).fit(X, y)
    assert not np.allclose(gp.grid_thetas_[0, [0, 2]], gp.grid_thetas_[1, [0, 2]], rtol=0.1)
    interior = 0
    for theta in gp.grid_thetas_:  # at each one's optimum the bound is flat in the variance and the noise (or bounded)
        alone = GaussianProcessRegressor(kernel.clone_with_theta(theta), optimizer=None, centers=gp.centers_).fit(X, y)
        _, grad = alone.log_marginal_likelihood(theta, eval_gradient=True)
        inside = [i for i in (0, 2) if np.all(np.abs(theta[i] - kernel.bounds[i]) > 1e-6)]
        np.testing.assert_allclose(grad[inside], 0.0, atol=1e-4)
        interior += len(inside)
    assert interior >= 3  # at 0.3 the signal variance is at its lower bound: all noise


def test_the_grid_reads_the_data_once_whatever_its_size():
    X, y = _data(400)
    centers = X[:15]
    counter = BlockCounter()
    Xd = da.from_array(X, chunks=(100, -1)).map_blocks(counter, dtype=np.float64, meta=np.empty((0, 0)))
    yd = da.from_array(y, chunks=100)
    with dask.config.set({"dkapprox.persist-fraction": 0, "scheduler": "threads"}):
        gp = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), optimizer=None, centers=centers,
                                      length_scale_grid=np.geomspace(0.1, 10, 8)).fit(Xd, yd)
        assert counter.count == Xd.numblocks[0] and gp.n_passes_ == 1  # 8 candidates, one pass
        counter.count = 0
        gp.predict(X[:5])  # the fitted model at the best candidate: nothing read again
        assert counter.count == 0
        on = GaussianProcessRegressor(C(1.0) * RBF(1.0) + WhiteKernel(0.1), centers=centers,
                                      length_scale_grid=np.geomspace(0.1, 10, 8)).fit(Xd, yd)
        assert counter.count == on.n_passes_ * Xd.numblocks[0] and on.n_passes_ > 1


def test_the_optimizer_starts_from_the_best_candidate():
    X, y = _data(200, d=2)  # both features matter: no flat ridge for rounding to steer L-BFGS-B along
    kernel = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
    gp = GaussianProcessRegressor(kernel, n_centers=20, random_state=0,
                                  length_scale_grid=[[0.2, 0.2], [1.0, 3.0], [5.0, 5.0]]).fit(X, y)
    best = int(np.argmax(gp.grid_scores_))
    assert gp.best_index_ == best and gp.log_marginal_likelihood_value_ > gp.grid_scores_.max()
    # a plain fit started where the grid left off takes the same path: the grid's pass stands in for its first
    plain = GaussianProcessRegressor(kernel.clone_with_theta(gp.grid_thetas_[best]), centers=gp.centers_).fit(X, y)
    assert gp.log_marginal_likelihood_value_ == pytest.approx(plain.log_marginal_likelihood_value_, rel=1e-9)
    np.testing.assert_allclose(gp.kernel_.theta, plain.kernel_.theta, rtol=0, atol=1e-6)
    assert gp.n_passes_ == 1 + plain.n_passes_  # the centers' draw


def test_dask_input_gives_numpys_grid():
    X, y = _data(300)
    kwargs = dict(kernel=C(1.0) * RBF([1.0, 1.0, 1.0]) + WhiteKernel(0.1), optimizer=None, n_centers=20,
                  random_state=0, normalize_y=True, length_scale_grid=[[0.5, 1.0, 2.0], [1.0, 1.0, 1.0], [2, 2, 2]])
    eager = GaussianProcessRegressor(**kwargs).fit(X, y)
    for chunks in (70, 300):
        lazy = GaussianProcessRegressor(**kwargs).fit(da.from_array(X, chunks=(chunks, -1)),
                                                      da.from_array(y, chunks=chunks))
        np.testing.assert_allclose(lazy.grid_scores_, eager.grid_scores_, rtol=1e-10)
        np.testing.assert_allclose(lazy.grid_thetas_, eager.grid_thetas_, rtol=0, atol=1e-6)
        assert lazy.best_index_ == eager.best_index_ and lazy.n_passes_ == eager.n_passes_ + 1  # + y's moments
        np.testing.assert_allclose(lazy.predict(X[:20]), eager.predict(X[:20]), rtol=0, atol=1e-8)


def test_a_model_file_keeps_the_grid_and_older_files_stay_as_they_were(tmp_path):
    X, y = _data(200)
    gp = GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1), optimizer=None, n_centers=10, random_state=0,
                                  length_scale_grid=[0.5, 1.0]).fit(X, y)
    save(gp, tmp_path / "gp")
    loaded = load(tmp_path / "gp")
    assert fingerprint(loaded) == fingerprint(gp) and loaded.length_scale_grid == [0.5, 1.0]
    np.testing.assert_array_equal(loaded.grid_scores_, gp.grid_scores_)
    np.testing.assert_array_equal(loaded.predict(X[:5]), gp.predict(X[:5]))
    assert clone(gp).get_params() == gp.get_params()
    # without a grid, the file has no length_scale_grid: the files saved before it had none, and load the same
    plain = GaussianProcessRegressor(RBF(1.0) + WhiteKernel(0.1), optimizer=None, n_centers=10, random_state=0)
    save(plain.fit(X, y), tmp_path / "plain")
    assert "length_scale_grid" not in (tmp_path / "plain" / "model.json").read_text()
    assert load(tmp_path / "plain").length_scale_grid is None
    assert not hasattr(gp.set_params(length_scale_grid=None).fit(X, y), "grid_scores_")  # no stale grid in a file


def test_bad_grids_are_refused_naming_why():
    X, y = _data(100)
    ard = C(1.0) * RBF([1.0, 1.0, 1.0]) + WhiteKernel(0.1)
    iso = C(1.0) * RBF(1.0) + WhiteKernel(0.1)
    cases = [
        (iso, [[[1.0]]], r"shape \(n_candidates,\) or \(n_candidates, n_features\).*got shape \(1, 1, 1\)"),
        (iso, [], r"at least one candidate; got shape \(0,\)"),
        (iso, 2.0, "'length_scale_grid' parameter of GaussianProcessRegressor must be an array-like or None"),
        (iso, [1.0, 0.0], "positive, finite length scales"),
        (iso, [1.0, -2.0], "positive, finite length scales"),
        (iso, [1.0, np.nan], "positive, finite length scales"),
        (iso, ["a", "b"], "length_scale_grid must be an array of numbers"),
        (iso, [[1.0, 2.0, 3.0]], r"has shape \(1, 3\), but the kernel has one length scale"),
        (ard, [[1.0, 2.0]], r"has shape \(1, 2\), but the kernel has 3 length scales.*\(n_candidates, 3\)"),
        (None, [1.0, 2.0], "length_scale is fixed.*length_scale_bounds='fixed'"),
        (C(1.0) * RBF(1.0, (0.1, 10.0)), [0.05, 1.0, 20.0], r"\[0.05, 20.0\] lie outside .*bounds \(0.1, 10\)"),
        (C(1.0) * Matern(1.0, nu=0.7), [1.0], "nu=0.7"),
    ]
    for kernel, grid, message in cases:
        with pytest.raises(ValueError, match=message):
            GaussianProcessRegressor(kernel, n_centers=10, random_state=0, length_scale_grid=grid).fit(X, y)
    with pytest.raises(ValueError, match="length_scale_grid is for the sparse GP"):
        GaussianProcessRegressor(iso, length_scale_grid=[1.0]).fit(X, y)
    with dask.config.set({"dkapprox.cv-statistics-bytes": 5 * 10 * 10 * 8}):
        with pytest.raises(ValueError, match=r"use at most 5 candidates with 10 centers"):
            GaussianProcessRegressor(iso, n_centers=10, random_state=0,
                                     length_scale_grid=np.linspace(0.5, 2, 6)).fit(X, y)
        GaussianProcessRegressor(iso, n_centers=10, random_state=0, optimizer=None,
                                 length_scale_grid=np.linspace(0.5, 2, 5)).fit(X, y)
