"""The ``dkapprox`` command line: parse arguments, call the library, map errors to exit codes.

Exit codes follow sysexits.h, so a scheduler (cron, Airflow, SLURM) can tell a retry from a
fix: :data:`dkapprox.errors.EXIT_CODES` is their one table, which :func:`exit_code` and
``dkapprox --help`` read and docs/jobs.rst explains. ``dkapprox verify`` exits 0 when the store
checks out and 65 when it found a missing block marker, a chunk that does not match its recorded
checksum, an unfinished store or an input that changed (each named by row range); 66 if there is
no store.

Errors are one line on stderr; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import signal
import sys
import time
import traceback

import click

from .. import errors
from .._version import __version__
from ..utils import InvalidParameterError
from ._jobs import (
    DEFAULT_RANDOM_STATE,
    METHODS,
    check_parquet_out,
    check_targets_given,
    describe_fit,
    describe_model,
    feature_names,
    fit_learner,
    is_parquet_out,
    kernel_ridge_estimator,
    log_search,
    make_estimator,
    on_device,
    one_line,
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
    refuse_unless_able,
    require_workers_see,
    shown,
    storable,
    summary,
    write,
    write_parquet,
)

log = logging.getLogger("dkapprox")

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_DATAERR, EXIT_TEMPFAIL = 0, 1, 2, 65, 75  # rows of errors.EXIT_CODES

_debug = {"on": False}
# distributed's own logging config gives distributed.client a level of its own (it would print a
# traceback per reconnection attempt when the scheduler is lost); without --debug the one-line error says it
_QUIETED = ("distributed", "distributed.client")


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: stop, leave the output resumable."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(exc: BaseException) -> int:
    """The exit code for an exception that reached the top: the first row of ``errors.EXIT_CODES`` naming it."""
    from distributed import KilledWorker
    from distributed.comm import CommClosedError

    if isinstance(exc, Interrupted):
        return 128 + exc.signum
    if isinstance(exc, (KilledWorker, CommClosedError)):
        return EXIT_TEMPFAIL
    if isinstance(exc, InvalidParameterError):
        return EXIT_USAGE
    # scikit-learn's data errors raised in tasks (NaN, width) are ValueErrors: 65
    return next((row.code for row in errors.EXIT_CODES if isinstance(exc, row.raised_by)), EXIT_INTERNAL)

def main(argv=None) -> int:
    """Entry point of the ``dkapprox`` console script; returns (and exits with) the code."""
    _debug["on"] = False
    previous = {signum: signal.signal(signum, _raise_interrupted) for signum in (signal.SIGTERM, signal.SIGINT)}
    loggers = {name: (lg.handlers[:], lg.level, lg.propagate)
               for name, lg in ((n, logging.getLogger(n)) for n in ("dkapprox", *_QUIETED))}
    try:
        returned = dkapprox.main(args=argv, prog_name="dkapprox", standalone_mode=False)
        code = returned if isinstance(returned, int) else EXIT_OK  # a command's ctx.exit(code), e.g. verify's
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()
        code = exc.exit_code
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "dkapprox"
        click.echo(f"dkapprox: usage error: {shown(' '.join(exc.format_message().split()))} "
                   f"(see {where} --help)", err=True)
        code = exc.exit_code
    except click.ClickException as exc:
        click.echo(f"dkapprox: error: {shown(' '.join(exc.format_message().split()))}", err=True)
        code = exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("dkapprox: interrupted; rerun the same command to resume", err=True)
        code = 128 + signal.SIGINT
    except (Exception, Interrupted) as exc:  # noqa: BLE001 - every error gets one line and a code
        code = exit_code(exc)
        if _debug["on"]:
            traceback.print_exc()
        hint = {EXIT_INTERNAL: " (internal error: rerun with --debug and report it)",
                EXIT_TEMPFAIL: "" if isinstance(exc, errors.TemporaryFailure) else " (temporary: rerun the same "
                "command; if workers died, lower --block-rows or give them more memory first)"}.get(code, "")
        if isinstance(exc, Interrupted):
            click.echo(f"dkapprox: {exc.args[0]}: stopped; rerun the same command to resume", err=True)
        else:
            click.echo(f"dkapprox: error: {one_line(exc)}{hint}", err=True)
    finally:  # leave the process as we found it (main() also runs inside other programs' tests)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for name, (handlers, level, propagate) in loggers.items():
            logger = logging.getLogger(name)
            logger.handlers[:], logger.propagate = handlers, propagate
            logger.setLevel(level)
    sys.stdout.flush()
    return code


def _redact_record(record) -> bool:
    """A log record with no URL credentials in it (a logging filter: it keeps every record)."""
    message = record.getMessage()
    if "@" in message:
        record.msg, record.args = shown(message), ()
    return True


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


# -- shared options ---------------------------------------------------------------


class Duration(click.ParamType):
    name = "duration"

    def convert(self, value, param, ctx):
        from ..cluster import duration

        try:
            return duration(f"--{param.name.replace('_', '-')}" if param else "duration", value)
        except errors.ClusterConfigError as exc:
            self.fail(str(exc), param, ctx)


def cluster_options(fn):
    fn = click.option("--start-timeout", type=Duration(), metavar="DURATION",
                      help="slurm/pbs clusters: give up after this long without a running worker, e.g. 10m "
                           "(exit 75, naming the pending jobs and the batch system's reason; the queued jobs "
                           "are cancelled). Default: the config's start_timeout, else 10m.")(fn)
    fn = click.option("--scheduler", metavar="ADDRESS",
                      help="Use a running scheduler, e.g. tcp://host:8786.")(fn)
    return click.option("--cluster", "cluster_config", type=click.Path(dir_okay=False), metavar="CONFIG.yaml",
                        help="Cluster config (`dkapprox cluster-config NAME` prints a template); default: a "
                             "LocalCluster, one worker per core.")(fn)


def storage_options(fn):
    return click.option("--storage-option", "storage_option_items", multiple=True, metavar="KEY=VALUE",
                        help="fsspec option for every URL of the command (repeatable), e.g. "
                             "--storage-option profile=nightly or client_kwargs.endpoint_url=http://host:9000 "
                             "(dotted keys nest). Credentials given here, in AWS_* variables or profiles are "
                             "never printed or recorded.")(fn)


def write_options(fn, device=True):
    if device:
        fn = click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
                          help="Where blocks are computed: cuda reads Zarr on the host, computes each block on its "
                               "worker's GPU (CuPy) and writes from the host; without CuPy or a GPU it exits 69. "
                               "See `dkapprox cluster-config cuda`.")(fn)
    fn = click.option("--wait-timeout", type=Duration(), metavar="DURATION",
                      help="Wait at most this long for another run writing --out, e.g. 2h, then exit 75 "
                           "(implies --wait; --wait alone waits up to a day).")(fn)
    fn = click.option("--refresh", is_flag=True,
                      help="The input changed since --out was written (rows appended, chunks rewritten): "
                           "rewrite only the blocks whose input chunks changed and write the new rows; the "
                           "rest stay. Same model only.")(fn)
    fn = click.option("--wait", is_flag=True,
                      help="If another run is writing --out (it holds the store's lease), wait for it to "
                           "finish or die, then resume (or say there is nothing to do) instead of exiting 75.")(fn)
    fn = click.option("--progress/--no-progress", default=None,
                      help="Progress bar on stderr (default: when stderr is a terminal).")(fn)
    fn = click.option("--compression", type=click.Choice(["none", "zstd"]), default="none", show_default=True,
                      help="Output codec; random features barely compress (zstd: 8% smaller, writes 2x slower), "
                           "but binning's mostly zero ones do (zstd: 1.3% of the bytes).")(fn)
    fn = click.option("--block-rows", type=click.IntRange(min=1), help="Rows per task (default: INPUT's chunks).")(fn)
    return click.option("--component", help="Array inside the INPUT group.")(fn)


columns_option = click.option(
    "--columns", metavar="A,B,C",
    help="INPUT is a Parquet dataset (a file, or a folder or prefix of files, local or a URL): these columns, in this "
         "order, are the features (default: every column; a non-numeric one exits 65, so name the numeric ones). "
         "Each file is one block, files taken in path order; see docs/jobs.rst, 'Parquet input'.")
keep_columns_option = click.option(
    "--keep-columns", metavar="A,B",
    help="Pass these columns of the Parquet INPUT (keys: an id, a timestamp; any type) through to the Parquet --out "
         "beside the features, row for row, for the ETL to join back. Needs a Parquet INPUT and an --out ending in "
         ".parquet; see docs/jobs.rst, 'Parquet output'.")


def method_options(fn):
    fn = click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
                      help="Any other parameter of the estimator (repeatable), e.g. --param degree=3, or "
                           "--param kernel=laplacian --param sampling=orthogonal --param features=sincos for "
                           "fourier. VALUE: a number, true/false, none, a JSON list or mapping, else text.")(fn)
    fn = click.option("--random-state", type=int, default=DEFAULT_RANDOM_STATE, show_default=True,
                      help="Seed of the random draw (fixed, so that reruns resume).")(fn)
    fn = click.option("--gamma", help="Kernel parameter (a number, or 'scale' where supported).")(fn)
    fn = click.option("--n-components", type=click.IntRange(min=1), help="Output features.")(fn)
    return click.option("--method", required=True, type=click.Choice(sorted(METHODS)),
                        help="The feature map (every one dkapprox has): "
                             f"{', '.join(f'{name} ({cls.__name__})' for name, cls in sorted(METHODS.items()))}. "
                             "Sparse features (binning) are stored dense.")(fn)


@contextlib.contextmanager
def _client(cluster_config, scheduler, start_timeout=None):
    from ..cluster import connect, load_config

    if cluster_config and scheduler:
        raise click.UsageError("give --cluster or --scheduler, not both")
    config = load_config(cluster_config) if cluster_config else None
    level = logging.WARNING if _debug["on"] else logging.CRITICAL
    with connect(config, scheduler=scheduler, worker_log_level=level, start_timeout=start_timeout) as client:
        yield client


def _progress(flag):
    if flag is not None:  # --progress/--no-progress: the fits' passes too (DKAPPROX_PROGRESS, dkapprox.utils._progress)
        os.environ["DKAPPROX_PROGRESS"] = "1" if flag else "0"
    return sys.stderr.isatty() if flag is None else flag


def _refresh_or_overwrite(refresh, overwrite):
    if refresh and overwrite:
        raise click.UsageError("give --refresh or --overwrite, not both: --refresh keeps the blocks still right")


def _wait(flag, timeout):
    """write_features' ``wait=``: False, True (a day at most) or seconds (--wait-timeout implies --wait)."""
    return timeout if timeout is not None else bool(flag)


# -- commands ---------------------------------------------------------------------


def _exit_codes_help() -> str:
    return "Exit codes: " + ", ".join(f"{row.code} {row.meaning}" for row in
                                      sorted(errors.EXIT_CODES, key=lambda row: row.code)) + "."


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             epilog=_exit_codes_help())
@click.option("--debug", is_flag=True, help="Show tracebacks and worker warnings.")
@click.option("--quiet", "-q", is_flag=True, help="Only errors on stderr (no log lines).")
@click.version_option(__version__, message="dkapprox %(version)s")  # the wheel's version too (pyproject reads it)
def dkapprox(debug, quiet):
    """Kernel approximation, random projection and kernel ridge on Zarr data (or Parquet datasets) far larger
    than memory."""
    _debug["on"] = debug
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("dkapprox: %(message)s"))
    handler.addFilter(_redact_record)
    logger = logging.getLogger("dkapprox")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.ERROR if quiet else logging.INFO)
    logger.propagate = False
    if not debug:
        import distributed  # noqa: F401 - importing it applies its logging config, which would undo ours

        for name in _QUIETED:
            logging.getLogger(name).setLevel(logging.CRITICAL)


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

    wait = _wait(wait, wait_timeout)
    _refresh_or_overwrite(refresh, overwrite)
    options = parse_storage_options(storage_option_items) or None
    keep = parse_columns(keep_columns, "--keep-columns")
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

    wait = _wait(wait, wait_timeout)
    _refresh_or_overwrite(refresh, overwrite)
    options = parse_storage_options(storage_option_items) or None
    keep = parse_columns(keep_columns, "--keep-columns")
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


def kernel_ridge_options(fn):
    from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS

    from ..linear_model import KernelRidge
    from ..nystroem import SELECTORS

    default = KernelRidge().get_params()
    fn = click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
                      help="Any other parameter of KernelRidge (repeatable), e.g. --param degree=3, --param "
                           'center_params={"n_iter":2}, --param alpha=[0.1,1] (one alpha a target).')(fn)
    fn = click.option("--random-state", type=int, default=DEFAULT_RANDOM_STATE, show_default=True,
                      help="Seed of the choice of centers (fixed, so that a rerun fits the same model).")(fn)
    fn = click.option("--max-iter", type=click.IntRange(min=1),
                      help=f"At most this many CG iterations, a pass over INPUT each "
                           f"[default: {default['max_iter']}].")(fn)
    fn = click.option("--tol", type=float, help="CG stops when the relative residual is at most this "
                                                f"[default: {default['tol']:g}].")(fn)
    fn = click.option("--gamma", help="Kernel parameter of rbf, laplacian, poly, sigmoid, chi2: a number, or "
                                      "'scale' for 1 / (n_features * X.var()), as SVC (one more pass) "
                                      "[default: 1 / n_features].")(fn)
    fn = click.option("--kernel", type=click.Choice(sorted(PAIRWISE_KERNEL_FUNCTIONS)),
                      help=f"The kernel, as scikit-learn's KernelRidge names it [default: {default['kernel']}].")(fn)
    fn = click.option("--alpha", type=float, help=f"Regularization strength [default: {default['alpha']:g}].")(fn)
    fn = click.option("--centers", type=click.Choice(list(SELECTORS)),
                      help="How the centers are chosen, as Nystroem's landmarks are "
                           f"[default: {default['centers']}].")(fn)
    fn = click.option("--gammas", metavar="G[,G...]",
                      help="With --cv: the bandwidths to search (positive numbers) [default: gamma='scale' times "
                           "0.1, 0.3, 1, 3 and 10].")(fn)
    fn = click.option("--kernel-params", metavar="JSON",
                      help='With --cv: a grid of the kernel\'s other parameters to search with the gammas, e.g. '
                           '\'{"degree": [2, 3], "coef0": [0, 1]}\' with --kernel poly.')(fn)
    fn = click.option("--alphas", metavar="A[,A...]",
                      help="With --cv: the regularization strengths to search (positive numbers) "
                           "[default: 1e-3, 1e-2, 0.1, 1, 10, 100].")(fn)
    fn = click.option("--route", type=click.Choice(["auto", "statistics", "cg"]),
                      help="With --cv: solve every candidate from one pass of m x m statistics, or by CG in shared "
                           "passes with losing candidates dropped (--tol, --max-iter apply); auto: the cheaper "
                           "by a measured probe [default: auto].")(fn)
    fn = click.option("--cv", "n_folds", type=click.IntRange(min=2),
                      help="Choose gamma and alpha by this many folds of cross-validation (KernelRidgeCV): every "
                           "(gamma, alpha, fold) in the same passes (see --route), the table logged, the best "
                           "refitted and saved with its cv_results_.")(fn)
    return click.option("--n-centers", type=click.IntRange(min=1),
                        help="Nystroem centers m [default: min(1000, rows)]; Falkon's advice: of order sqrt(rows). "
                             "The driver holds a few m x m float64 matrices (2 GiB each at m = 16,384).")(fn)


@dkapprox.command("kernel-ridge")
@click.argument("input_path", metavar="INPUT")
@click.option("--target", type=click.Path(), metavar="TARGET",
              help="The targets: a Zarr array (a local path or URL; an array in a group is GROUP/NAME), 1-D or "
                   "(rows, targets), one row per row of INPUT, in its order.")
@click.option("--target-column", "target_column", metavar="NAME[,NAME]",
              help="INPUT is a Parquet dataset: the targets are this column of it (several: one target each), "
                   "read from the same files; without --columns the features are the other columns.")
@click.option("--classify", is_flag=True,
              help="The targets are class labels: KernelRidgeClassifier (one-vs-rest on +1/-1), else KernelRidge.")
@kernel_ridge_options
@click.option("--component", help="Array inside the INPUT group.")
@columns_option
@click.option("--out", "model_path", required=True, type=click.Path(), help="Model directory to write.")
@click.option("--overwrite", is_flag=True, help="Replace an existing model at --out.")
@click.option("--progress/--no-progress", default=None,
              help="Progress bars of the passes on stderr (default: when stderr is a terminal).")
@storage_options
@cluster_options
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
    from .. import models

    options = parse_storage_options(storage_option_items) or None
    est = kernel_ridge_estimator(classify, n_folds, alphas, gammas, n_centers=n_centers, centers=centers,
                                 alpha=alpha, kernel=kernel, gamma=gamma, tol=tol, max_iter=max_iter,
                                 random_state=random_state, params=params, route=route, kernel_params=kernel_params)
    target_columns = parse_columns(target_column, "--target-column")
    check_targets_given(target, target_columns)
    refuse_existing_model(model_path, overwrite, options)
    # metadata only: a missing target (66), a wrong length (65) fail before a cluster starts
    X, y, _ = open_training_data(input_path, component, target=target, target_columns=target_columns,
                                 columns=parse_columns(columns), storage_options=options)
    _progress(progress)
    with _client(cluster_config, scheduler, start_timeout):
        require_workers_see(input_path, *([target] if target else []), storage_options=options)
        started = time.perf_counter()
        fit_learner(est, X, y)
        seconds = time.perf_counter() - started
    if n_folds is not None:
        log_search(est)
    models.save(est, model_path, overwrite=overwrite, storage_options=options)
    targets = shown(target) if target else f"column {', '.join(target_columns)}"
    click.echo(f"fitted {describe_model(est)} on {shown(input_path)} ({X.shape[0]:,} x {X.shape[1]:,}; targets: "
               f"{targets}) in {seconds:.1f} s: {describe_fit(est)}; model: {shown(model_path)} "
               f"({models.fingerprint(est)})")


@dkapprox.command()
@click.argument("input_path", metavar="INPUT")
@click.option("--model", "model_path", required=True, type=click.Path(),
              help="Model written by `dkapprox kernel-ridge` (or any saved model that predicts).")
@click.option("--out", "out_path", required=True, type=click.Path(),
              help="Output Zarr store of (rows, outputs), or a Parquet dataset (a folder of one part a block) if "
                   "its name ends in .parquet, .parq or .pq.")
@click.option("--scores", is_flag=True,
              help="A classifier's decision_function (one column a class; one for two classes) instead of its "
                   "labels.")
@click.option("--overwrite", is_flag=True, help="Replace an existing output (of any job).")
@columns_option
@keep_columns_option
@functools.partial(write_options, device=False)
@storage_options
@cluster_options
def predict(input_path, model_path, out_path, scores, component, overwrite, columns, keep_columns, block_rows,
            compression, storage_option_items, cluster_config, scheduler, progress, start_timeout, wait,
            wait_timeout, refresh):
    """Predict INPUT's rows (a Zarr array, or a Parquet dataset's --columns) with a saved model into --out
    (resumable: rerun to finish).

    The store holds one row per row of INPUT: the predictions (a classifier's labels, or with --scores its
    decision_function), one column per target, so one column for a single target. It is written, leased,
    resumed, refreshed and verified (`dkapprox verify`) as `transform`'s output is."""
    from .. import models

    wait = _wait(wait, wait_timeout)
    _refresh_or_overwrite(refresh, overwrite)
    options = parse_storage_options(storage_option_items) or None
    keep = parse_columns(keep_columns, "--keep-columns")
    refuse_missing_bucket(out_path, options)
    model = models.load(model_path, storage_options=options)
    refuse_unless_able(model, "decision_function" if scores else "predict", "predict")
    X, sources = open_data(input_path, component, block_rows, storage_options=options,
                           columns=parse_columns(columns))
    check_parquet_out(input_path, out_path, keep, sources, refresh, compression)
    values = predictions(model, X, scores)  # lazy: a wrong width fails here, before a cluster starts
    plan = {**plan_of("predict", input_path, component, X, model, "cpu", sources),
            "output": "decision_function" if scores else "predict"}
    names = prediction_names(values.shape[1], scores) if is_parquet_out(out_path) else None
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
