"""`dkapprox gaussian-process`, `predict --std` and `info` on real Zarr stores and a Parquet dataset.

Everything runs in this process through the command line's entry point, on an in-process LocalCluster (as
tests/cli/test_kernel_ridge.py does for its variants); small data (1,500 rows, 40 centers) keep it to seconds.
"""

import json

import numpy as np
import pandas as pd
import pytest
from cli.test_kernel_ridge import array, assert_one_line_error, in_process, quietly

from dkapprox import io, models
from dkapprox.gaussian_process import GaussianProcessRegressor

ROWS = 1500
pytestmark = pytest.mark.filterwarnings("ignore:The optimal value found:sklearn.exceptions.ConvergenceWarning")
GP = ("--n-centers", 40, "--noise", 0.1)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    base = tmp_path_factory.mktemp("gaussian_process")
    rng = np.random.default_rng(0)
    X = array(base / "x.zarr", rng.uniform(-2, 2, (ROWS, 3)), 400)
    y = array(base / "y.zarr", np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(ROWS), 500)
    (base / "local.yaml").write_text("kind: local\nn_workers: 1\nthreads_per_worker: 2\n"
                                     "processes: false\ndashboard_address: null\n")
    c = ("--cluster", base / "local.yaml")
    fit = quietly("gaussian-process", base / "x.zarr", "--target", base / "y.zarr", *GP, "--out", base / "gp", *c)
    assert fit.returncode == 0, fit.stderr
    return dict(base=base, X=X, y=y, c=c, fit=fit)


def test_the_fit_is_the_estimators_and_says_what_it_learned(work):
    base, X, y = work["base"], work["X"], work["y"]
    model = models.load(base / "gp")
    assert isinstance(model, GaussianProcessRegressor) and model.n_centers == 40 and model.normalize_y
    ard = model.kernel_.k1.k2.length_scale
    assert ard.shape == (3,) and ard[2] > 10 * max(ard[0], ard[1])  # the third feature is noise: a long scale
    assert model.kernel_.k2.noise_level == pytest.approx(0.01 / y.var(), rel=0.3)  # 0.1² in normalized units
    line = work["fit"].stdout
    assert "fitted GaussianProcessRegressor" in line and "bound on the log marginal likelihood" in line
    assert f"{model.n_passes_} passes over the input" in line
    same = GaussianProcessRegressor(model.kernel, n_centers=40, normalize_y=True, random_state=0).fit(X, y)
    np.testing.assert_allclose(same.kernel_.theta, model.kernel_.theta, rtol=0, atol=1e-4)
    info = quietly("info", base / "gp", "--json")
    described = json.loads(info.stdout)
    assert described["kernel"] == repr(model.kernel_)
    assert described["fitted"]["log_marginal_likelihood_value_"] == pytest.approx(
        model.log_marginal_likelihood_value_)


def test_predict_std_writes_the_mean_then_the_standard_deviation(work, capsys):
    base, X, c = work["base"], work["X"], work["c"]
    model = models.load(base / "gp")
    mean, std = model.predict(X, return_std=True)
    result = in_process(capsys, "predict", base / "x.zarr", "--model", base / "gp", "--out", base / "p.zarr",
                        "--std", *c)
    assert result.returncode == 0, result.stderr
    written = io.open_features(base / "p.zarr").compute()
    assert io.describe(base / "p.zarr")["plan"]["output"] == "predict+std"
    assert written.shape == (ROWS, 2)
    np.testing.assert_allclose(written[:, 0], mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(written[:, 1], std, rtol=1e-12, atol=1e-12)
    assert io.verify(base / "p.zarr").ok
    again = in_process(capsys, "predict", base / "x.zarr", "--model", base / "gp", "--out", base / "p.zarr",
                       "--std", *c)
    assert again.returncode == 0 and "nothing to do" in (again.stdout + again.stderr).lower()


def test_predict_std_into_parquet_names_the_columns(work, capsys):
    base, X, c = work["base"], work["X"], work["c"]
    frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(id=np.arange(ROWS))
    (base / "in.parquet").mkdir()
    frame.iloc[:700].to_parquet(base / "in.parquet" / "part-0.parquet")
    frame.iloc[700:].to_parquet(base / "in.parquet" / "part-1.parquet")
    result = in_process(capsys, "predict", base / "in.parquet", "--columns", "a,b,c", "--keep-columns", "id",
                        "--model", base / "gp", "--out", base / "p.parquet", "--std", *c)
    assert result.returncode == 0, result.stderr
    out = pd.read_parquet(base / "p.parquet").sort_values("id")
    assert set(out.columns) == {"id", "prediction", "std"}
    mean, std = models.load(base / "gp").predict(X, return_std=True)
    np.testing.assert_allclose(out["prediction"].to_numpy(), mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["std"].to_numpy(), std, rtol=1e-12, atol=1e-12)


def test_bad_requests_exit_with_one_line(work, capsys):
    base, c = work["base"], work["c"]
    array(base / "kr_y.zarr", np.zeros(ROWS), 500)
    no_std = in_process(capsys, "kernel-ridge", base / "x.zarr", "--target", base / "kr_y.zarr", "--n-centers", 20,
                        "--out", base / "kr", *c)
    assert no_std.returncode == 0, no_std.stderr
    refused = in_process(capsys, "predict", base / "x.zarr", "--model", base / "kr", "--out", base / "q.zarr",
                         "--std", *c)
    assert_one_line_error(refused, 2, "gives no standard deviation")
    both = in_process(capsys, "predict", base / "x.zarr", "--model", base / "gp", "--out", base / "q.zarr", "--std",
                      "--scores", *c)
    assert_one_line_error(both, 2, "--std or --scores, not both")
    bad = base / "bad_y.zarr"
    values = np.zeros(ROWS)
    values[7] = np.nan
    array(bad, values, 500)
    nan = in_process(capsys, "gaussian-process", base / "x.zarr", "--target", bad, *GP, "--out", base / "gp2", *c)
    assert_one_line_error(nan, 65, "Input y contains NaN")
    unknown = in_process(capsys, "gaussian-process", base / "x.zarr", "--target", base / "y.zarr", "--param",
                         "nope=1", "--out", base / "gp3", *c)
    assert_one_line_error(unknown, 2, "--param nope")
    exists = in_process(capsys, "gaussian-process", base / "x.zarr", "--target", base / "y.zarr", *GP, "--out",
                        base / "gp", *c)
    assert exists.returncode != 0 and not (base / "gp3").exists()
