"""The commands of ``dkapprox``, each registered on the group in :mod:`._main`."""

from __future__ import annotations

import functools
import json
import logging
import time

import click

from ._jobs import (
    check_parquet_out,
    check_targets_given,
    describe_fit,
    describe_model,
    feature_names,
    fit_learner,
    gaussian_process_estimator,
    is_parquet_out,
    kernel_ridge_estimator,
    log_search,
    make_estimator,
    on_device,
    open_data,
    open_training_data,
    parse_columns,
    parse_storage_options,
    plan_of,
    prediction_names,
    predictions,
    refuse_existing_model,
    refuse_host_only,
    refuse_missing_bucket,
    refuse_std_unless_able,
    refuse_unless_able,
    require_workers_see,
    shown,
    storable,
    summary,
    write,
    write_parquet,
)
from ._main import EXIT_DATAERR, _debug, dkapprox, log
from ._options import (
    _client,
    _progress,
    cluster_options,
    columns_option,
    gaussian_process_options,
    keep_columns_option,
    kernel_ridge_options,
    learner_options,
    method_options,
    storage_options,
    target_options,
    write_options,
    write_settings,
)


@dkapprox.command()
@click.argument("input_path", metavar="INPUT")
@method_options
@click.option("--component", help="Array inside the INPUT group.")
@columns_option
@click.option("--out", "model_path", required=True, type=click.Path(), help="Model directory to write.")
@click.option("--overwrite", is_flag=True, help="Replace an existing model at --out.")
@storage_options
@cluster_options
def fit(input_path, method, n_components, gamma, random_state, params, component, columns, model_path, overwrite,
        storage_option_items, cluster_config, scheduler, start_timeout):
    """Fit an estimator on INPUT (a Zarr array, or a Parquet dataset's --columns) and save it to --out (no
    pickle)."""
    from .. import models

    options = parse_storage_options(storage_option_items) or None
    est = make_estimator(method, n_components=n_components, gamma=gamma, random_state=random_state,
                         params=params)
    refuse_existing_model(model_path, overwrite, options)
    # metadata only (Parquet: a listing and the footers): fails before a cluster starts
    X, _ = open_data(input_path, component, storage_options=options, columns=parse_columns(columns))
    with _client(cluster_config, scheduler, start_timeout):
        require_workers_see(input_path)
        started = time.perf_counter()
        est.fit(X)
        seconds = time.perf_counter() - started
    models.save(est, model_path, overwrite=overwrite, storage_options=options)
    click.echo(f"fitted {describe_model(est)} on {shown(input_path)} ({X.shape[0]:,} x {X.shape[1]:,}) in "
               f"{seconds:.1f} s; model: {shown(model_path)} ({models.fingerprint(est)})")


@dkapprox.command()
@click.argument("input_path", metavar="INPUT")
@click.option("--model", "model_path", required=True, type=click.Path(), help="Model written by `dkapprox fit`.")
@click.option("--out", "out_path", required=True, type=click.Path(),
              help="Output Zarr store, or a Parquet dataset (a folder of one part a block) if its name ends in "
                   ".parquet, .parq or .pq.")
@click.option("--overwrite", is_flag=True, help="Replace an existing output (of any job).")
@columns_option
@keep_columns_option
@write_options
@storage_options
@cluster_options
def transform(input_path, model_path, out_path, component, overwrite, columns, keep_columns, block_rows, compression,
              storage_option_items, cluster_config, scheduler, progress, start_timeout, wait,
              wait_timeout, refresh, device):
    """Featurize INPUT (a Zarr array, or a Parquet dataset's --columns) with a saved model into --out
    (resumable: rerun to finish)."""
    from .. import models

    wait, options, keep = write_settings(wait, wait_timeout, refresh, overwrite, storage_option_items, keep_columns)
    refuse_missing_bucket(out_path, options)
    model = models.load(model_path, storage_options=options)
    refuse_unless_able(model, "transform", "transform")
    refuse_host_only(model, device)
    X, sources = open_data(input_path, component, block_rows, storage_options=options,
                           columns=parse_columns(columns))
    check_parquet_out(input_path, out_path, keep, sources, refresh, compression)
    blocks, back = on_device(X, device)  # --device cuda without CuPy or a GPU fails here
    features = storable(back(model.transform(blocks)))  # lazy: a wrong width fails here, before a cluster starts
    plan = plan_of("transform", input_path, component, X, model, device, sources)
    names = feature_names(model, keep) if is_parquet_out(out_path) else None
    _store(features, out_path, X, plan, sources, names, keep, overwrite=overwrite, refresh=refresh, wait=wait,
           progress=progress, compression=compression, options=options,
           cluster=(cluster_config, scheduler, start_timeout))


def _store(values, out_path, X, plan, sources, names, keep, *, overwrite, refresh, wait, progress, compression,
           options, cluster):
    """Write a job's lazy output to --out, a Parquet dataset (columns ``names``) or a Zarr store, resumable;
    print what was written."""
    compression = None if compression == "none" else compression
    with _client(*cluster) as client:
        if is_parquet_out(out_path):
            report = write_parquet(client, values, out_path, dataset=sources[0], names=names, keep=keep, plan=plan,
                                   overwrite=overwrite, progress=_progress(progress), wait=wait,
                                   compression=compression, storage_options=options)
        else:
            report = write(client, values, out_path, plan=plan, overwrite=overwrite, storage_options=options,
                           wait=wait, refresh=refresh, progress=_progress(progress), compression=compression,
                           sources=sources)
    click.echo(summary(report, X.shape[0], out_path))


@dkapprox.command()
@click.argument("input_path", metavar="INPUT")
@method_options
@click.option("--out", "out_path", required=True, type=click.Path(),
              help="Output Zarr store, or a Parquet dataset (a folder of one part a block) if its name ends in "
                   ".parquet, .parq or .pq.")
@click.option("--save-model", type=click.Path(), help="Also save the fitted model here.")
@click.option("--overwrite", is_flag=True, help="Replace an existing output (and model).")
@columns_option
@keep_columns_option
@write_options
@storage_options
@cluster_options
def featurize(input_path, method, n_components, gamma, random_state, params, out_path, save_model, component,
              overwrite, columns, keep_columns, block_rows, compression, storage_option_items, cluster_config,
              scheduler, progress, start_timeout, wait, wait_timeout, refresh, device):
    """Fit on INPUT (a Zarr array, or a Parquet dataset's --columns) and featurize it into --out in one
    step (resumable: rerun to finish).

    Every feature map of dkapprox is a --method; e.g. --method fourier --param kernel=laplacian
    --param sampling=qmc, or --method binning (sparse features, stored dense: --compression zstd
    shrinks them)."""
    from .. import models

    wait, options, keep = write_settings(wait, wait_timeout, refresh, overwrite, storage_option_items, keep_columns)
    est = make_estimator(method, n_components=n_components, gamma=gamma, random_state=random_state,
                         params=params)
    refuse_host_only(est, device)
    refuse_existing_model(save_model, overwrite, options)
    refuse_missing_bucket(out_path, options)  # before the fit, not after it
    X, sources = open_data(input_path, component, block_rows, storage_options=options,
                           columns=parse_columns(columns))
    check_parquet_out(input_path, out_path, keep, sources, refresh, compression)
    blocks, back = on_device(X, device)  # --device cuda without CuPy or a GPU fails here, before the fit
    with _client(cluster_config, scheduler, start_timeout) as client:
        require_workers_see(input_path)
        started = time.perf_counter()
        est.fit(X)  # the fit draws its state on the host (a pass over X where the method needs one)
        log.info("fitted %s in %.1f s", describe_model(est), time.perf_counter() - started)
        if save_model:
            models.save(est, save_model, overwrite=overwrite, storage_options=options)
        plan = plan_of("featurize", input_path, component, X, est, device, sources)
        if is_parquet_out(out_path):
            report = write_parquet(client, storable(back(est.transform(blocks))), out_path, dataset=sources[0],
                                   names=feature_names(est, keep), keep=keep, plan=plan, overwrite=overwrite,
                                   progress=_progress(progress), wait=wait, storage_options=options,
                                   compression=None if compression == "none" else compression)
            click.echo(summary(report, X.shape[0], out_path))
            return
        report = write(client, storable(back(est.transform(blocks))), out_path, plan=plan, overwrite=overwrite,
                        storage_options=options, wait=wait, refresh=refresh, progress=_progress(progress),
                        compression=None if compression == "none" else compression, sources=sources)
    click.echo(summary(report, X.shape[0], out_path))


@dkapprox.command("kernel-ridge")
@click.argument("input_path", metavar="INPUT")
@target_options
@click.option("--classify", is_flag=True,
              help="The targets are class labels: KernelRidgeClassifier (one-vs-rest on +1/-1), else KernelRidge.")
@kernel_ridge_options
@learner_options
def kernel_ridge(input_path, target, target_column, classify, n_centers, n_folds, route, alphas, kernel_params, gammas,
                 centers, alpha, kernel, gamma, tol, max_iter, random_state, params, component, columns, model_path,
                 overwrite, progress, storage_option_items, cluster_config, scheduler, start_timeout):
    """Fit kernel ridge regression (--classify: classification) on INPUT (a Zarr array, or a Parquet dataset's
    --columns) and its targets, and save it to --out.

    Falkon's preconditioned conjugate gradient over n_centers Nystroem centers: the centers' passes, then
    one pass over INPUT for the right-hand side and one per CG iteration, each logged; the n x m kernel
    matrix is never stored. With --cv N, gamma and alpha are chosen from --gammas and --alphas (and the
    kernel's other parameters from --kernel-params) by N-fold cross-validation: the centers' passes, then one
    pass of per-fold statistics (classes: one more) or CG passes shared by every candidate (--route), every
    candidate's score logged, the best refitted and saved with its cv_results_ (`dkapprox info` shows them).
    `dkapprox predict INPUT --model DIR --out OUT` predicts with the model."""
    options = parse_storage_options(storage_option_items) or None
    est = kernel_ridge_estimator(classify, n_folds, alphas, gammas, n_centers=n_centers, centers=centers,
                                 alpha=alpha, kernel=kernel, gamma=gamma, tol=tol, max_iter=max_iter,
                                 random_state=random_state, params=params, route=route, kernel_params=kernel_params)
    _learn(est, input_path, target, target_column, component, columns, model_path, overwrite, progress, options,
           (cluster_config, scheduler, start_timeout), after=log_search if n_folds is not None else None)


@dkapprox.command("gaussian-process")
@click.argument("input_path", metavar="INPUT")
@target_options
@gaussian_process_options
@learner_options
def gaussian_process(input_path, target, target_column, n_centers, centers, kernel, nu, ard, length_scale, noise,
                     alpha, optimize, restarts, normalize_y, random_state, params, component, columns, model_path,
                     overwrite, progress, storage_option_items, cluster_config, scheduler, start_timeout):
    """Fit a Gaussian process (GaussianProcessRegressor) on INPUT (a Zarr array, or a Parquet dataset's
    --columns) and its targets, and save it to --out.

    Titsias' sparse variational GP over --n-centers centers: the centers' passes, then L-BFGS-B on the bound
    over the kernel's signal variance, length scales (one a feature with --ard) and noise, one pass over INPUT
    for the bound and one for its gradient a step. `dkapprox info` shows the learned kernel and the bound;
    `dkapprox predict INPUT --model DIR --out OUT --std` writes the mean and its standard deviation."""
    options = parse_storage_options(storage_option_items) or None
    est = gaussian_process_estimator(n_centers=n_centers, centers=centers, kernel=kernel, nu=nu, ard=ard,
                                     length_scale=length_scale, noise=noise, alpha=alpha, optimize=optimize,
                                     restarts=restarts, normalize_y=normalize_y, random_state=random_state,
                                     params=params, n_features=1)

    def prepare(est, X):
        return gaussian_process_estimator(n_centers=min(n_centers, X.shape[0]), centers=centers, kernel=kernel, nu=nu,
                                          ard=ard, length_scale=length_scale, noise=noise, alpha=alpha,
                                          optimize=optimize, restarts=restarts, normalize_y=normalize_y,
                                          random_state=random_state, params=params, n_features=X.shape[1])

    _learn(est, input_path, target, target_column, component, columns, model_path, overwrite, progress, options,
           (cluster_config, scheduler, start_timeout), prepare=prepare)


def _learn(est, input_path, target, target_column, component, columns, model_path, overwrite, progress, options,
           cluster, *, after=None, prepare=None):
    """Fit a learner on INPUT and its targets under the cluster, save it, say what it did."""
    from .. import models

    target_columns = parse_columns(target_column, "--target-column")
    check_targets_given(target, target_columns)
    refuse_existing_model(model_path, overwrite, options)
    # metadata only: a missing target (66), a wrong length (65) fail before a cluster starts
    X, y, _ = open_training_data(input_path, component, target=target, target_columns=target_columns,
                                 columns=parse_columns(columns), storage_options=options)
    if prepare is not None:  # what depends on INPUT's shape (one length scale a feature)
        est = prepare(est, X)
    _progress(progress)
    with _client(*cluster):
        require_workers_see(input_path, *([target] if target else []), storage_options=options)
        started = time.perf_counter()
        fit_learner(est, X, y)
        seconds = time.perf_counter() - started
    if after is not None:
        after(est)
    models.save(est, model_path, overwrite=overwrite, storage_options=options)
    targets = shown(target) if target else f"column {', '.join(target_columns)}"
    click.echo(f"fitted {describe_model(est)} on {shown(input_path)} ({X.shape[0]:,} x {X.shape[1]:,}; targets: "
               f"{targets}) in {seconds:.1f} s: {describe_fit(est)}; model: {shown(model_path)} "
               f"({models.fingerprint(est)})")


@dkapprox.command()
@click.argument("input_path", metavar="INPUT")
@click.option("--model", "model_path", required=True, type=click.Path(),
              help="Model written by `dkapprox kernel-ridge` or `dkapprox gaussian-process` (or any saved model "
                   "that predicts).")
@click.option("--out", "out_path", required=True, type=click.Path(),
              help="Output Zarr store of (rows, outputs), or a Parquet dataset (a folder of one part a block) if "
                   "its name ends in .parquet, .parq or .pq.")
@click.option("--scores", is_flag=True,
              help="A classifier's decision_function (one column a class; one for two classes) instead of its "
                   "labels.")
@click.option("--std", is_flag=True,
              help="A Gaussian process's standard deviation beside its mean: one more column a target (the means, "
                   "then the standard deviations; in a Parquet --out, the columns std, or std0, std1, ...).")
@click.option("--overwrite", is_flag=True, help="Replace an existing output (of any job).")
@columns_option
@keep_columns_option
@functools.partial(write_options, device=False)
@storage_options
@cluster_options
def predict(input_path, model_path, out_path, scores, std, component, overwrite, columns, keep_columns, block_rows,
            compression, storage_option_items, cluster_config, scheduler, progress, start_timeout, wait,
            wait_timeout, refresh):
    """Predict INPUT's rows (a Zarr array, or a Parquet dataset's --columns) with a saved model into --out
    (resumable: rerun to finish).

    The store holds one row per row of INPUT: the predictions (a classifier's labels, or with --scores its
    decision_function), one column per target, so one column for a single target; with --std (a Gaussian
    process) the standard deviations follow, one column per target. It is written, leased,
    resumed, refreshed and verified (`dkapprox verify`) as `transform`'s output is."""
    from .. import models

    wait, options, keep = write_settings(wait, wait_timeout, refresh, overwrite, storage_option_items, keep_columns)
    refuse_missing_bucket(out_path, options)
    model = models.load(model_path, storage_options=options)
    refuse_std_unless_able(model, std, scores)
    refuse_unless_able(model, "decision_function" if scores else "predict", "predict")
    X, sources = open_data(input_path, component, block_rows, storage_options=options,
                           columns=parse_columns(columns))
    check_parquet_out(input_path, out_path, keep, sources, refresh, compression)
    values = predictions(model, X, scores, std)  # lazy: a wrong width fails here, before a cluster starts
    output = "decision_function" if scores else "predict+std" if std else "predict"
    plan = {**plan_of("predict", input_path, component, X, model, "cpu", sources), "output": output}
    names = prediction_names(values.shape[1], scores, std) if is_parquet_out(out_path) else None
    _store(values, out_path, X, plan, sources, names, keep, overwrite=overwrite, refresh=refresh, wait=wait,
           progress=progress, compression=compression, options=options,
           cluster=(cluster_config, scheduler, start_timeout))


@dkapprox.command()
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of YAML.")
@storage_options
def info(path, as_json, storage_option_items):
    """Describe a model directory or an output store (shape, chunks, completion, provenance, and
    whether each input still matches the identity recorded when the store was written)."""
    import yaml

    from .. import io, models
    from ..models import is_model_dir

    options = parse_storage_options(storage_option_items) or None
    if is_model_dir(path, storage_options=options):
        described = models.describe(path, storage_options=options)
    else:
        described = io.describe(path, check_input=True, storage_options=options)
    if as_json:
        click.echo(json.dumps(described, indent=2, sort_keys=True, default=str))
    else:
        click.echo(yaml.safe_dump(json.loads(json.dumps(described, default=str)), sort_keys=False).rstrip())


@dkapprox.command()
@click.argument("path", metavar="OUT")
@click.option("--json", "as_json", is_flag=True, help="Print the whole report as JSON.")
@click.option("--no-input", "no_input", is_flag=True, help="Skip listing the input (checks the store alone).")
@storage_options
def verify(path, as_json, no_input, storage_option_items):
    """Check a finished output store: every block marker there, every chunk matching the checksum
    recorded when it was written, the input unchanged. Reads the store once, changes nothing.
    Exit 0 if it checks out, 65 if not (bad blocks are named by row range)."""
    from .. import io

    report = io.verify(path, check_input=not no_input,
                       storage_options=parse_storage_options(storage_option_items) or None)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, sort_keys=True))
    else:
        for line in report.lines():
            click.echo(line)
    if not report.ok:
        raise click.exceptions.Exit(EXIT_DATAERR)


@dkapprox.command("cluster-config")
@click.argument("name", required=False)
@click.option("--list", "list_names", is_flag=True, help="Print the names of the templates, one a line.")
def cluster_config(name, list_names):
    """Print the cluster config template NAME (local, cuda, scheduler, slurm, pbs, kubernetes) to copy and edit,
    e.g. `dkapprox cluster-config slurm > slurm.yaml`; then `dkapprox cluster-script slurm.yaml` checks it."""
    from ..cluster import template, template_names

    names = template_names()
    if list_names:
        click.echo("\n".join(names))
        return
    if name not in names:
        problem = "give a template NAME" if name is None else f"no cluster config template {name!r}"
        raise click.UsageError(f"{problem}; the templates are: {', '.join(names)}")
    click.echo(template(name), nl=False)


@dkapprox.command("cluster-script")
@click.argument("config", type=click.Path(dir_okay=False))
def cluster_script(config):
    """Check a cluster config and print what it would start (job script, DaskCluster), submitting nothing."""
    from ..cluster import load_config, render

    click.echo(render(load_config(config)).rstrip())


@dkapprox.command()
@click.option("--rows", type=click.IntRange(min=1), default=12_000_000, show_default=True,
              help="Rows of the synthetic data (the default, 1.4 GiB, is 1.9x a worker's memory limit).")
@click.option("--features", type=click.IntRange(min=1), default=32, show_default=True)
@click.option("--method", type=click.Choice(["rbf", "nystroem"]), default="rbf", show_default=True)
@click.option("--n-components", type=click.IntRange(min=1), default=128, show_default=True)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--memory-limit", default="768MiB", show_default=True,
              help="Per worker (an idle worker with dkapprox imported holds about 0.35 GiB).")
@click.option("--block-rows", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--dir", "directory", type=click.Path(file_okay=False),
              help="Keep the data here (a rerun resumes); default: a temporary directory, removed after.")
@click.option("--small", is_flag=True, help="20,000 rows in blocks of 2,000: a smoke test in seconds.")
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: on a terminal).")
def demo(rows, features, method, n_components, workers, memory_limit, block_rows, directory, small, progress):
    """The main job, end to end: make a Zarr data set larger than a worker's memory,
    fit and featurize it on a LocalCluster, and say what happened and how long it took."""
    from . import _demo

    _demo.run(rows=rows, features=features, method=method, n_components=n_components, workers=workers,
              memory_limit=memory_limit, block_rows=block_rows, directory=directory, small=small,
              progress=_progress(progress), worker_log_level=logging.WARNING if _debug["on"] else logging.CRITICAL)
