"""The options several commands share, and the helpers their bodies share."""

from __future__ import annotations

import contextlib
import logging
import os
import sys

import click

from .. import errors
from ._jobs import DEFAULT_RANDOM_STATE, METHODS, parse_columns, parse_storage_options
from ._main import _debug


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


def write_settings(wait, wait_timeout, refresh, overwrite, storage_option_items, keep_columns):
    """What every writing command reads from its options first: ``(wait, storage_options, keep)``.

    ``wait`` is write_features' ``wait=``: False, True (a day at most) or seconds (--wait-timeout
    implies --wait)."""
    if refresh and overwrite:
        raise click.UsageError("give --refresh or --overwrite, not both: --refresh keeps the blocks still right")
    return (wait_timeout if wait_timeout is not None else bool(wait),
            parse_storage_options(storage_option_items) or None, parse_columns(keep_columns, "--keep-columns"))


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


def learner_options(fn):
    """What a learner's fit takes besides its own parameters: INPUT's array or columns, the model's directory,
    progress, storage and the cluster."""
    fn = storage_options(cluster_options(fn))
    fn = click.option("--progress/--no-progress", default=None,
                      help="Progress bars of the passes on stderr (default: when stderr is a terminal).")(fn)
    fn = click.option("--overwrite", is_flag=True, help="Replace an existing model at --out.")(fn)
    fn = click.option("--out", "model_path", required=True, type=click.Path(), help="Model directory to write.")(fn)
    return click.option("--component", help="Array inside the INPUT group.")(columns_option(fn))


def target_options(fn):
    """--target and --target-column: where a learner's targets are."""
    fn = click.option("--target-column", "target_column", metavar="NAME[,NAME]",
                      help="INPUT is a Parquet dataset: the targets are this column of it (several: one target each), "
                           "read from the same files; without --columns the features are the other columns.")(fn)
    return click.option("--target", type=click.Path(), metavar="TARGET",
                        help="The targets: a Zarr array (a local path or URL; an array in a group is GROUP/NAME), 1-D "
                             "or (rows, targets), one row per row of INPUT, in its order.")(fn)


def gaussian_process_options(fn):
    from ..nystroem import SELECTORS

    fn = click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
                      help="Any other parameter of GaussianProcessRegressor (repeatable), e.g. --param "
                           "center_params={\"n_iter\":2}.")(fn)
    fn = click.option("--random-state", type=int, default=DEFAULT_RANDOM_STATE, show_default=True,
                      help="Seed of the choice of centers and of the restarts (fixed, so that a rerun fits the same "
                           "model).")(fn)
    fn = click.option("--normalize-y/--no-normalize-y", default=True, show_default=True,
                      help="Center and scale the targets (the noise and signal variance are then in their units).")(fn)
    fn = click.option("--restarts", type=click.IntRange(min=0), default=0, show_default=True,
                      help="More starts of the optimizer, drawn within the bounds (two passes a step each).")(fn)
    fn = click.option("--optimize/--no-optimize", default=True, show_default=True,
                      help="Learn the kernel's hyperparameters by L-BFGS-B on the bound; --no-optimize keeps the "
                           "initial ones (one pass).")(fn)
    fn = click.option("--alpha", type=click.FloatRange(min=0), default=1e-10, show_default=True,
                      help="Added to the noise variance, not learned.")(fn)
    fn = click.option("--noise", type=click.FloatRange(min=0, min_open=True), default=0.1, show_default=True,
                      help="Initial noise variance (a WhiteKernel's level; in the normalized targets' units).")(fn)
    fn = click.option("--length-scale", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
                      help="Initial length scale (of every feature with --ard).")(fn)
    fn = click.option("--ard/--no-ard", default=True, show_default=True,
                      help="One length scale a feature (automatic relevance determination), or one for all.")(fn)
    fn = click.option("--nu", type=click.Choice(["0.5", "1.5", "2.5"]), default="1.5", show_default=True,
                      help="Matern's smoothness (with --kernel matern).")(fn)
    fn = click.option("--kernel", type=click.Choice(["rbf", "matern"]), default="rbf", show_default=True,
                      help="The stationary kernel, times a learned signal variance, plus a learned noise.")(fn)
    fn = click.option("--centers", type=click.Choice(list(SELECTORS)), default="uniform", show_default=True,
                      help="How the centers (inducing points) are chosen, as Nystroem's landmarks are.")(fn)
    return click.option("--n-centers", type=click.IntRange(min=1), default=1000, show_default=True,
                        help="Centers m (at most INPUT's rows): the driver holds a few m x m float64 matrices, and "
                             "each pass costs O(rows m^2).")(fn)
