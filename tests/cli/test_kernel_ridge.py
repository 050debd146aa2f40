"""`dkapprox kernel-ridge` and `dkapprox predict` (issue 33, part 4): real Zarr stores and a Parquet dataset.

The two fits run as real subprocesses (their log lines as a user sees them), side by side; the rest
runs in this process through the same entry point, on an in-process LocalCluster, as tests/cli/test_commands.py
does for variants of a code. Small data (2,000 rows, 60 centers) keep the file to seconds.
"""

import contextlib
import io as io_module
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import zarr

from dkapprox import io, models
from dkapprox.cli import main
from dkapprox.io._zarr_store import open_target
from dkapprox.kernel_approximation import RBFSampler
from dkapprox.linear_model import KernelRidge, KernelRidgeClassifier

ENV = dict(os.environ, PYTHONUNBUFFERED="1", DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="1")
ROWS, CHUNK = 2000, 250
PARAMS = dict(alpha=0.1, kernel="rbf", gamma=0.5, n_centers=60, random_state=0)
KR = ("--alpha", 0.1, "--kernel", "rbf", "--gamma", 0.5, "--n-centers", 60)


def cli(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "dkapprox", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def in_process(capsys, *args):
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, captured.out, captured.err)


def assert_one_line_error(result, code, *fragments):
    assert result.returncode == code, (result.args, result.returncode, result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])


def array(path, values, chunk):
    zarr.create_array(str(path), shape=values.shape, chunks=(chunk, *values.shape[1:]), dtype=values.dtype)[:] = values
    return values


def quietly(*args):
    """main(ARGS) in this process, its output captured (for a module's fixture, where capsys is not)."""
    out, err = io_module.StringIO(), io_module.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """Inputs, targets (chunked unlike the input), a regressor and a classifier fitted by the CLI, their
    predictions. The regressor's fit is a real subprocess, run beside the rest."""
    base = tmp_path_factory.mktemp("kernel_ridge")
    rng = np.random.default_rng(0)
    X = array(base / "x.zarr", rng.standard_normal((ROWS, 5)).astype(np.float32), CHUNK)
    y = array(base / "y.zarr", np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(ROWS), 400)
    labels = array(base / "labels.zarr", ((X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0))[:, None], 500)
    (base / "local.yaml").write_text("kind: local\nn_workers: 1\nthreads_per_worker: 2\n"
                                     "processes: false\ndashboard_address: null\n")
    c = ("--cluster", base / "local.yaml")
    with ThreadPoolExecutor(1) as pool:
        regressor = pool.submit(cli, "kernel-ridge", base / "x.zarr", "--target", base / "y.zarr", *KR,
                                "--out", base / "model", *c)
        classifier = quietly("kernel-ridge", base / "x.zarr", "--target", base / "labels.zarr", "--classify", *KR,
                             "--out", base / "clf", *c)
        fits = [regressor.result(), classifier]
    assert all(r.returncode == 0 for r in fits), [r.stderr for r in fits]
    predicted = [quietly("predict", base / "x.zarr", "--model", base / name, "--out", base / out, *c)
                 for name, out in (("model", "p.zarr"), ("clf", "c.zarr"))]
    assert all(r.returncode == 0 for r in predicted), [r.stderr for r in predicted]
    return {"dir": base, "X": X, "y": y, "labels": labels[:, 0], "fits": fits, "predicted": predicted, "c": c}


def test_fit_then_predict_equals_the_python_api(work):
    base = work["dir"]
    fit = work["fits"][0]
    # the estimator's news of each iteration, as the command's other log lines
    assert re.search(r"^dkapprox: KernelRidge: CG iteration 1\b.*relative residual", fit.stderr, re.M), fit.stderr
    assert fit.stdout.startswith("fitted KernelRidge(") and fit.stdout.count("\n") == 1, fit.stdout
    assert "(2,000 x 5; targets: " in fit.stdout and "60 centers (uniform)" in fit.stdout
    assert "CG iterations, relative residual" in fit.stdout and "passes over the input" in fit.stdout

    X = io.open_array(base / "x.zarr")
    est = KernelRidge(**PARAMS).fit(X, open_target(base / "y.zarr"))  # the same store, the same blocks
    model = models.load(base / "model")
    assert model.get_params() == est.get_params()
    assert model.n_iter_ == est.n_iter_ and model.passes_ == est.passes_ == model.n_iter_ + 2
    np.testing.assert_array_equal(model.centers_, est.centers_)
    np.testing.assert_array_equal(model.dual_coef_, est.dual_coef_)
    stored = io.open_features(base / "p.zarr").compute()
    assert stored.shape == (ROWS, 1) and stored.dtype == np.float32
    np.testing.assert_array_equal(stored[:, 0], est.predict(X).compute())
    assert 1 - ((stored[:, 0] - work["y"]) ** 2).mean() / work["y"].var() > 0.6  # R^2
    assert io.describe(base / "p.zarr")["plan"]["model"] == models.fingerprint(model)
    assert "wrote" in work["predicted"][0].stdout and "2,000 x 1 float32; 8 blocks written" in \
        work["predicted"][0].stdout


def test_classifier_predicts_labels_and_with_scores_its_decision_function(work, capsys):
    base = work["dir"]
    assert work["fits"][1].stdout.startswith("fitted KernelRidgeClassifier(")
    X = io.open_array(base / "x.zarr")
    est = KernelRidgeClassifier(**PARAMS).fit(X, work["labels"])
    model = models.load(base / "clf")
    np.testing.assert_array_equal(model.classes_, [0, 1, 2])
    np.testing.assert_array_equal(model.dual_coef_, est.dual_coef_)
    labels = io.open_features(base / "c.zarr").compute()
    assert labels.shape == (ROWS, 1) and labels.dtype == np.int64
    np.testing.assert_array_equal(labels[:, 0], est.predict(X).compute())
    assert (labels[:, 0] == work["labels"]).mean() > 0.85
    scores = in_process(capsys, "predict", base / "x.zarr", "--model", base / "clf", "--scores",
                        "--out", base / "s.zarr", *work["c"])
    assert scores.returncode == 0, scores.stderr
    np.testing.assert_array_equal(io.open_features(base / "s.zarr").compute(), est.decision_function(X).compute())
    assert io.describe(base / "s.zarr")["plan"]["output"] == "decision_function"


def test_info_shows_the_fit_facts(work, capsys):
    as_json = in_process(capsys, "info", work["dir"] / "model", "--json")
    assert as_json.returncode == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    model = models.load(work["dir"] / "model")
    assert doc["class"] == "KernelRidge" and doc["arrays"]["centers_"]["shape"] == [60, 5]
    assert {k: doc["params"][k] for k in ("n_centers", "centers", "kernel", "alpha")} == \
        {"n_centers": 60, "centers": "uniform", "kernel": "rbf", "alpha": 0.1}
    assert doc["fitted"]["n_iter_"] == model.n_iter_ and doc["fitted"]["passes_"] == model.passes_
    assert doc["fitted"]["final_residual"] == float(model.residuals_[-1]) <= 1e-4
    as_yaml = in_process(capsys, "info", work["dir"] / "model")
    assert "fitted:" in as_yaml.stdout and "final_residual:" in as_yaml.stdout and "n_iter_:" in as_yaml.stdout


def test_a_rerun_of_predict_does_nothing_resumes_an_unfinished_store_and_verifies(work, capsys, tmp_path):
    base = work["dir"]
    job = ("predict", base / "x.zarr", "--model", base / "model", *work["c"])
    again = in_process(capsys, *job, "--out", base / "p.zarr")
    assert again.returncode == 0 and "already complete for this job; nothing to do" in again.stdout, again
    verified = in_process(capsys, "verify", base / "p.zarr")
    assert verified.returncode == 0 and verified.stdout.startswith("ok:"), verified
    # a store left unfinished: one block and its marker missing; the rerun writes that block only
    out = tmp_path / "p.zarr"
    expected = io.open_features(base / "p.zarr").compute()
    shutil.copytree(base / "p.zarr", out)
    store = zarr.open_group(str(out), mode="r+")
    store.attrs.update({**store.attrs.asdict(), "dkapprox": {**store.attrs["dkapprox"], "status": "writing"}})
    shutil.rmtree(out / "blocks_done" / "c" / "3")
    shutil.rmtree(out / "features" / "c" / "3")
    resumed = in_process(capsys, *job, "--out", out)
    assert resumed.returncode == 0 and "1 blocks written, 7 already there, of 8" in resumed.stdout, resumed
    np.testing.assert_array_equal(io.open_features(out).compute(), expected)


def test_bad_targets_and_an_existing_model_exit_like_the_other_jobs(work, capsys, tmp_path):
    base, c = work["dir"], work["c"]
    array(tmp_path / "short.zarr", work["y"][:-1], 400)
    nan = work["y"].copy()
    nan[1234] = np.nan
    array(tmp_path / "nan.zarr", nan, 400)
    array(tmp_path / "cube.zarr", np.zeros((ROWS, 1, 1)), 400)

    def kernel_ridge(*args):
        return in_process(capsys, "kernel-ridge", base / "x.zarr", *KR, *c, *args)

    new = tmp_path / "new"
    assert_one_line_error(kernel_ridge("--target", tmp_path / "none.zarr", "--out", new), 66, "none.zarr")
    assert_one_line_error(kernel_ridge("--target", tmp_path / "short.zarr", "--out", new), 65,
                          "1,999 targets for the 2,000 rows")
    assert_one_line_error(kernel_ridge("--target", tmp_path / "cube.zarr", "--out", new), 65, "expected a 1-D array")
    assert_one_line_error(kernel_ridge("--target", tmp_path / "nan.zarr", "--out", new), 65, "y contains NaN")
    assert_one_line_error(kernel_ridge("--target", base / "y.zarr", "--out", base / "model"), 73,
                          "exists; pass --overwrite")
    assert_one_line_error(kernel_ridge("--out", base / "model"), 2, "give the targets")
    assert_one_line_error(kernel_ridge("--target", base / "y.zarr", "--target-column", "y", "--out", new), 2,
                          "give the targets")
    assert_one_line_error(kernel_ridge("--target-column", "y", "--out", new), 2, "--target-column", "Zarr store")
    assert_one_line_error(kernel_ridge("--target", base / "y.zarr", "--param", "centres=kmeans", "--out", new), 2,
                          "--param centres: KernelRidge has no such parameter")
    assert not new.exists()
    before = models.load(base / "model")
    replaced = kernel_ridge("--target", base / "y.zarr", "--random-state", 1, "--out", tmp_path / "copy")
    assert replaced.returncode == 0, replaced.stderr
    other = models.load(tmp_path / "copy")
    again = kernel_ridge("--target", base / "y.zarr", "--out", tmp_path / "copy", "--overwrite")
    assert again.returncode == 0, again.stderr
    after = models.load(tmp_path / "copy")
    # --overwrite replaced the random_state=1 model with the fixture's: the same parameters and centers, and
    # coefficients within a bound, not bits: the fixture's fit ran in another process, whose driver's BLAS may
    # split the m x m algebra differently (bits are promised only where the same blocks are computed again)
    assert after.get_params() == before.get_params() != other.get_params()
    np.testing.assert_array_equal(after.centers_, before.centers_)
    scale = np.abs(before.dual_coef_).max()
    np.testing.assert_allclose(after.dual_coef_, before.dual_coef_, rtol=1e-6, atol=1e-9 * scale)
    assert not np.array_equal(other.centers_, before.centers_)


def test_predict_refuses_a_feature_map_and_transform_a_learner(work, capsys, tmp_path):
    base = work["dir"]
    models.save(RBFSampler(n_components=8, random_state=0).fit(work["X"]), tmp_path / "rbf")
    out = tmp_path / "never.zarr"
    assert_one_line_error(in_process(capsys, "predict", base / "x.zarr", "--model", tmp_path / "rbf", "--out", out),
                          2, "a feature map (RBFSampler), which has no predict; use `dkapprox transform`")
    assert_one_line_error(in_process(capsys, "transform", base / "x.zarr", "--model", base / "model", "--out", out),
                          2, "a learner (KernelRidge), which has no transform; use `dkapprox predict`")
    assert_one_line_error(in_process(capsys, "predict", base / "x.zarr", "--model", base / "model", "--scores",
                                     "--out", out), 2, "KernelRidge), which has no decision_function")
    assert not out.exists()


def test_parquet_targets_are_a_column_of_the_input_and_predictions_keep_columns_beside_them(work, capsys,
                                                                                           tmp_path):
    """--target-column reads the targets from the same files (the same rows, in order); without
    --columns the features are the other columns. predict writes a Parquet dataset with kept columns."""
    data = tmp_path / "sales.parquet"
    data.mkdir()
    X, y = work["X"][:900].astype(np.float64), work["y"][:900]
    for i, rows in enumerate((slice(0, 400), slice(400, 800), slice(800, 900))):
        frame = pd.DataFrame({"a": X[rows, 0], "b": X[rows, 1], "c": X[rows, 2], "y": y[rows]})
        frame.to_parquet(data / f"part.{i}.parquet", index=False)
    c = work["c"]
    fit = in_process(capsys, "kernel-ridge", data, "--target-column", "y", *KR, "--out", tmp_path / "m", *c)
    assert fit.returncode == 0, fit.stderr
    assert "(900 x 3; targets: column y)" in fit.stdout
    # the Python API on the same blocks (the files: 400, 400 and 100 rows) gives the same model
    est = KernelRidge(**PARAMS).fit(da.from_array(X[:, :3], chunks=(400, 3)), da.from_array(y, chunks=400))
    model = models.load(tmp_path / "m")
    assert model.n_features_in_ == 3
    np.testing.assert_array_equal(model.dual_coef_, est.dual_coef_)

    out = tmp_path / "predictions.parquet"
    written = in_process(capsys, "predict", data, "--columns", "a,b,c", "--keep-columns", "y", "--model",
                         tmp_path / "m", "--out", out, *c)
    assert written.returncode == 0, written.stderr
    frame = pd.read_parquet(out)
    assert list(frame.columns) == ["prediction", "y"]
    np.testing.assert_array_equal(frame["y"].to_numpy(), y)
    np.testing.assert_allclose(frame["prediction"].to_numpy(), model.predict(X[:, :3]), rtol=1e-12)

    for args, fragment in [(("--target-column", "z"), "no column 'z'"),
                           (("--target-column", "y", "--columns", "a,y"), "'y' is also a feature column")]:
        assert_one_line_error(in_process(capsys, "kernel-ridge", data, *args, "--out", tmp_path / "never", *c),
                              2, fragment)
    assert not (tmp_path / "never").exists()


def test_cg_stopped_at_max_iter_is_one_warning_line_and_the_summary_says_so(work, capsys, tmp_path):
    stopped = in_process(capsys, "kernel-ridge", work["dir"] / "x.zarr", "--target", work["dir"] / "y.zarr", *KR,
                         "--alpha", 1e-4, "--max-iter", 2, "--out", tmp_path / "m", *work["c"])
    assert stopped.returncode == 0, stopped.stderr
    warned = [line for line in stopped.stderr.splitlines() if "warning" in line]
    assert len(warned) == 1 and warned[0].startswith("dkapprox: warning: KernelRidge: conjugate gradient did not "
                                                     "converge in max_iter=2 iterations"), stopped.stderr
    assert "2 CG iterations" in stopped.stdout and "did not converge" in stopped.stdout
    assert models.load(tmp_path / "m").n_iter_ == 2


def test_gamma_scale_on_the_command_line_is_the_python_apis_and_info_shows_it(work, capsys, tmp_path):
    base = work["dir"]
    args = [a if a != 0.5 else "scale" for a in KR]
    fit = in_process(capsys, "kernel-ridge", base / "x.zarr", "--target", base / "y.zarr", *args,
                     "--out", tmp_path / "model", *work["c"])
    assert fit.returncode == 0, fit.stderr
    est = KernelRidge(**dict(PARAMS, gamma="scale")).fit(io.open_array(base / "x.zarr"), open_target(base / "y.zarr"))
    model = models.load(tmp_path / "model")
    assert model.gamma == "scale" and model.gamma_ == est.gamma_ and model.passes_ == est.passes_ == model.n_iter_ + 3
    np.testing.assert_array_equal(model.dual_coef_, est.dual_coef_)
    doc = json.loads(in_process(capsys, "info", tmp_path / "model", "--json").stdout)
    assert doc["params"]["gamma"] == "scale" and doc["fitted"]["gamma_"] == est.gamma_


def test_cv_searches_the_grid_logs_the_table_and_saves_it_for_info(work, capsys):
    """--cv 3 --alphas --gammas: KernelRidgeCV on the store; the table logged best first, the model saved
    with its cv_results_, `info` showing them; the Python search on the same store chooses the same."""
    from dkapprox.linear_model import KernelRidgeCV

    base, c = work["dir"], work["c"]
    fit = in_process(capsys, "kernel-ridge", base / "x.zarr", "--target", base / "y.zarr", "--cv", 3, "--alphas",
                     "0.01,1", "--gammas", "0.05,0.5,5", "--n-centers", 60, "--out", base / "cv", *c)
    assert fit.returncode == 0, fit.stderr
    assert "6 candidates x 3 folds in 2 passes" in fit.stdout and "best gamma=0.5, alpha=0.01 (r2 0." in fit.stdout
    table = [line for line in fit.stderr.splitlines() if "rank " in line]
    assert len(table) == 6 and "rank   1  gamma=0.5" in table[0], fit.stderr
    est = KernelRidgeCV(alphas=[0.01, 1], gammas=[0.05, 0.5, 5], n_centers=60, cv=3, random_state=0)
    est.fit(io.open_array(base / "x.zarr"), open_target(base / "y.zarr"))
    model = models.load(base / "cv")
    assert model.best_params_ == est.best_params_
    np.testing.assert_array_equal(model.cv_results_["mean_test_score"], est.cv_results_["mean_test_score"])
    shown = in_process(capsys, "info", base / "cv", "--json")
    described = json.loads(shown.stdout)
    assert described["fitted"]["gamma_"] == 0.5 and described["fitted"]["passes_"] == 2
    assert described["search"][0]["params"] == {"alpha": 0.01, "gamma": 0.5}
    assert [row["rank_test_score"] for row in described["search"]] == sorted(est.cv_results_["rank_test_score"])


def test_cv_by_the_cg_route_logs_its_iterations_and_what_it_dropped(work, capsys):
    base, c = work["dir"], work["c"]
    fit = in_process(capsys, "kernel-ridge", base / "x.zarr", "--target", base / "y.zarr", "--cv", 3, "--alphas",
                     "0.01,1", "--gammas", "0.05,0.5,5", "--n-centers", 60, "--route", "cg", "--tol", "1e-6",
                     "--max-iter", 300, "--out", base / "cg", *c)
    assert fit.returncode == 0, fit.stderr
    assert "by the cg route" in fit.stderr and "CG iteration 1, 6 of 6 candidates running" in fit.stderr
    model = models.load(base / "cg")
    assert model.route_ == "cg" and model.tol == 1e-6 and model.max_iter == 300
    assert model.best_params_ == {"alpha": 0.01, "gamma": 0.5}  # the statistics route's choice (the test above)
    dropped = model.cv_results_["dropped_at_iteration"]
    assert sum("dropped after CG iteration" in line for line in fit.stderr.splitlines()) == int((dropped > 0).sum())


def test_cv_searches_kernel_params_and_logs_them_in_the_table(work, capsys):
    """--kernel poly --kernel-params: the degree searched with gamma and alpha, as the Python search does."""
    from dkapprox.linear_model import KernelRidgeCV

    base, c = work["dir"], work["c"]
    fit = in_process(capsys, "kernel-ridge", base / "x.zarr", "--target", base / "y.zarr", "--cv", 3, "--alphas",
                     "0.1", "--gammas", "0.1,1", "--kernel", "poly", "--kernel-params", '{"degree": [1, 3]}',
                     "--n-centers", 30, "--out", base / "poly", *c)
    assert fit.returncode == 0, fit.stderr
    est = KernelRidgeCV(alphas=[0.1], gammas=[0.1, 1], kernel="poly", kernel_params={"degree": [1, 3]},
                        n_centers=30, cv=3, random_state=0)
    est.fit(io.open_array(base / "x.zarr"), open_target(base / "y.zarr"))
    model = models.load(base / "poly")
    assert model.kernel_params == {"degree": [1, 3]} and model.best_params_ == est.best_params_
    assert model.degree_ == est.best_params_["degree"]
    np.testing.assert_array_equal(model.cv_results_["mean_test_score"], est.cv_results_["mean_test_score"])
    table = [line for line in fit.stderr.splitlines() if "rank " in line]
    assert len(table) == 4 and all("degree=" in line for line in table), fit.stderr
    best = est.best_params_
    assert f"best gamma={best['gamma']:g}, degree={best['degree']}, alpha=0.1 (r2 " in fit.stdout, fit.stdout


@pytest.mark.parametrize("args, fragment", [
    (("--route", "cg"), "--route is how a search (--cv N) solves its candidates: give --cv N with it"),
    (("--cv", 3, "--alpha", 1), "--alpha does not go with --cv"),
    (("--alphas", "1,2"), "--alphas is a grid to search: give --cv N with it"),
    (("--cv", 3, "--gammas", "0.1,-1"), "expected positive numbers separated by commas"),
    (("--kernel-params", '{"degree": [2]}'), "--kernel-params is a grid to search: give --cv N with it"),
    (("--cv", 3, "--kernel-params", "{degree: 2}"), "expected JSON"),
    (("--cv", 3, "--kernel-params", '{"degree": [2]}'), "kernel_params names 'degree', which kernel='rbf' does not"),
    (("--cv", 3, "--kernel", "poly", "--kernel-params", '{"degree": []}'), "need to be a non-empty sequence"),
])
def test_cv_usage_errors_name_the_option(work, capsys, args, fragment):
    base = work["dir"]
    result = in_process(capsys, "kernel-ridge", base / "x.zarr", "--target", base / "y.zarr", *args,
                        "--out", base / "never")
    assert_one_line_error(result, 2, fragment)
    assert not (base / "never").exists()
