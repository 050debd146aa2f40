"""The ``dkapprox`` command line: parse arguments, call the library, map errors to exit codes.

Exit codes follow sysexits.h, so a scheduler (cron, Airflow, SLURM) can tell a
retry from a fix:

====  ===========================================================================
0     done
1     internal error (a bug: rerun with --debug and report the traceback)
2     usage: unknown option, method or estimator parameter
65    bad input data: hostile or broken Zarr metadata, NaN, wrong width, tampered model
66    input missing: no store, array or model at the path
73    cannot create the output: it exists (use --overwrite) or belongs to another job
74    I/O error (e.g. the disk is full)
75    temporary failure: workers died repeatedly, scheduler unreachable or lost: rerun;
      finished blocks are kept. Out of worker memory (a block that cannot fit any worker is
      refused before it runs): the message gives the --block-rows that fit
77    permission denied
78    bad cluster config (--cluster)
130   interrupted (Ctrl-C); 143 terminated (SIGTERM): rerun the command to resume
====  ===========================================================================

Errors are one line on stderr; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import math
import os
import signal
import sys
import time
import traceback

import click

from . import errors

log = logging.getLogger("dkapprox")

#: ``--method`` name -> "module:class"; a new estimator slots in with one line.
METHODS = {
    "rbf": "dkapprox.kernel_approximation:RBFSampler",
    "nystroem": "dkapprox.nystroem:Nystroem",
    "gaussian": "dkapprox.random_projection:GaussianRandomProjection",
    "sparse": "dkapprox.random_projection:SparseRandomProjection",
    "skewed_chi2": "dkapprox.kernel_approximation:SkewedChi2Sampler",
    "additive_chi2": "dkapprox.kernel_approximation:AdditiveChi2Sampler",
    "poly": "dkapprox.kernel_approximation:PolynomialCountSketch",
}
DEFAULT_RANDOM_STATE = 0  # a rerun must draw the same model, or it could not resume

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2
EXIT_DATAERR, EXIT_NOINPUT, EXIT_CANTCREAT, EXIT_IOERR, EXIT_TEMPFAIL, EXIT_NOPERM, EXIT_CONFIG = \
    65, 66, 73, 74, 75, 77, 78

_debug = {"on": False}


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: stop, leave the output resumable."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(exc: BaseException) -> int:
    """The exit code for an exception that reached the top (see the module table)."""
    from distributed import KilledWorker
    from distributed.comm import CommClosedError
    from sklearn.utils._param_validation import InvalidParameterError

    from .cluster import ClusterConfigError, ClusterConnectError

    if isinstance(exc, Interrupted):
        return 128 + exc.signum
    if isinstance(exc, ClusterConfigError):
        return EXIT_CONFIG
    if isinstance(exc, (errors.TemporaryFailure, ClusterConnectError, ConnectionError, TimeoutError,
                        KilledWorker, CommClosedError)):
        return EXIT_TEMPFAIL
    if isinstance(exc, (errors.OutputExistsError, errors.ResumeMismatchError)):
        return EXIT_CANTCREAT
    if isinstance(exc, (errors.InputMissingError, FileNotFoundError)):
        return EXIT_NOINPUT
    if isinstance(exc, InvalidParameterError):
        return EXIT_USAGE
    if isinstance(exc, (errors.InputDataError, errors.ModelFileError, errors.IncompleteStoreError,
                        ValueError)):
        return EXIT_DATAERR  # includes scikit-learn's data errors raised in tasks (NaN, width)
    if isinstance(exc, PermissionError):
        return EXIT_NOPERM
    if isinstance(exc, OSError):
        return EXIT_IOERR  # e.g. the disk is full
    return EXIT_INTERNAL


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, (errors.DkapproxError, ValueError, OSError)) else \
        f"{type(exc).__name__}: {text}"


def main(argv=None) -> int:
    """Entry point of the ``dkapprox`` console script; returns (and exits with) the code."""
    _debug["on"] = False
    previous = {signum: signal.signal(signum, _raise_interrupted) for signum in (signal.SIGTERM, signal.SIGINT)}
    loggers = {name: (lg.handlers[:], lg.level, lg.propagate)
               for name, lg in ((n, logging.getLogger(n)) for n in ("dkapprox", "distributed"))}
    try:
        dkapprox.main(args=argv, prog_name="dkapprox", standalone_mode=False)
        code = EXIT_OK
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()
        code = exc.exit_code
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "dkapprox"
        click.echo(f"dkapprox: usage error: {' '.join(exc.format_message().split())} "
                   f"(see {where} --help)", err=True)
        code = exc.exit_code
    except click.ClickException as exc:
        click.echo(f"dkapprox: error: {' '.join(exc.format_message().split())}", err=True)
        code = exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("dkapprox: interrupted; rerun the same command to resume", err=True)
        code = 128 + signal.SIGINT
    except (Exception, Interrupted) as exc:  # noqa: BLE001 - every error gets one line and a code
        code = exit_code(exc)
        if _debug["on"]:
            traceback.print_exc()
        hint = {EXIT_INTERNAL: " (internal error: rerun with --debug and report it)",
                EXIT_TEMPFAIL: "" if isinstance(exc, errors.DkapproxError) else " (temporary: rerun the same "
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


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


# -- shared options ---------------------------------------------------------------


class Duration(click.ParamType):
    name = "duration"

    def convert(self, value, param, ctx):
        from .cluster._schema import ClusterConfigError, duration

        try:
            return duration(f"--{param.name.replace('_', '-')}" if param else "duration", value)
        except ClusterConfigError as exc:
            self.fail(str(exc), param, ctx)


def cluster_options(fn):
    fn = click.option("--start-timeout", type=Duration(), metavar="DURATION",
                      help="slurm/pbs clusters: give up after this long without a running worker, e.g. 10m "
                           "(exit 75, naming the pending jobs and the batch system's reason; the queued jobs "
                           "are cancelled). Default: the config's start_timeout, else 10m.")(fn)
    fn = click.option("--scheduler", metavar="ADDRESS",
                      help="Use a running scheduler, e.g. tcp://host:8786.")(fn)
    return click.option("--cluster", "cluster_config", type=click.Path(dir_okay=False), metavar="CONFIG.yaml",
                        help="Cluster config (see cluster_configs/); default: a LocalCluster, one worker per core.")(fn)


def write_options(fn):
    fn = click.option("--progress/--no-progress", default=None,
                      help="Progress bar on stderr (default: when stderr is a terminal).")(fn)
    fn = click.option("--compression", type=click.Choice(["none", "zstd"]), default="none", show_default=True,
                      help="Output codec; random features barely compress (zstd: 8% smaller, writes 2x slower).")(fn)
    fn = click.option("--block-rows", type=click.IntRange(min=1), help="Rows per task (default: INPUT's chunks).")(fn)
    return click.option("--component", help="Array inside the INPUT group.")(fn)


def _refuse_existing_model(path, overwrite):
    """Fail before the fit, not after it, when saving would be refused (io.save has the final word)."""
    if path and not overwrite and os.path.lexists(path) and not (os.path.isdir(path) and not os.listdir(path)):
        raise errors.OutputExistsError(f"{path}: exists; pass --overwrite to replace the model there")


def method_options(fn):
    fn = click.option("--param", "params", multiple=True, metavar="KEY=VALUE",
                      help="Any estimator parameter, e.g. --param degree=3 (repeatable).")(fn)
    fn = click.option("--random-state", type=int, default=DEFAULT_RANDOM_STATE, show_default=True,
                      help="Seed of the random draw (fixed, so that reruns resume).")(fn)
    fn = click.option("--gamma", help="Kernel parameter (a number, or 'scale' where supported).")(fn)
    fn = click.option("--n-components", type=click.IntRange(min=1), help="Output features.")(fn)
    return click.option("--method", required=True, type=click.Choice(sorted(METHODS)),
                        help="Kernel approximation or random projection.")(fn)


@contextlib.contextmanager
def _client(cluster_config, scheduler, start_timeout=None):
    from .cluster import connect, load_config

    if cluster_config and scheduler:
        raise click.UsageError("give --cluster or --scheduler, not both")
    config = load_config(cluster_config) if cluster_config else None
    level = logging.WARNING if _debug["on"] else logging.CRITICAL
    with connect(config, scheduler=scheduler, worker_log_level=level, start_timeout=start_timeout) as client:
        yield client


def _progress(flag):
    return sys.stderr.isatty() if flag is None else flag


def parse_value(text: str):
    """A --param value: int, float, true/false/none, JSON list or mapping, else the string."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for cast in (int, float):
        with contextlib.suppress(ValueError):
            return cast(text)
    if text.strip()[:1] in "[{":
        with contextlib.suppress(ValueError):
            return json.loads(text)
    return text


def make_estimator(method, *, n_components=None, gamma=None, random_state=DEFAULT_RANDOM_STATE, params=()):
    """The unfitted estimator for ``--method`` and its options; usage errors name the option."""
    module, _, name = METHODS[method].partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise click.UsageError(f"--method {method}: {name} is not available in this install ({exc})") from None
    accepted = cls().get_params()
    chosen = {}
    for item in params:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--param")
        chosen[key.strip().replace("-", "_")] = parse_value(value)
    for key, value, option in (("n_components", n_components, "--n-components"),
                               ("gamma", None if gamma is None else parse_value(gamma), "--gamma")):
        if value is not None:
            if key not in accepted:
                raise click.UsageError(f"{option}: {name} has no parameter '{key}'")
            chosen[key] = value
    if "random_state" in accepted:
        chosen.setdefault("random_state", random_state)
    unknown = sorted(set(chosen) - set(accepted))
    if unknown:
        raise click.UsageError(f"--param {unknown[0]}: {name} has no such parameter; "
                               f"its parameters: {', '.join(sorted(accepted))}")
    estimator = cls(**chosen)
    try:
        estimator._validate_params()  # scikit-learn's wording, before any data is read
    except ValueError as exc:
        raise click.UsageError(one_line(exc)) from None
    return estimator


def _open(path, component, block_rows=None):
    from . import io

    X = io.open_array(path, component)
    if block_rows:
        X = X.rechunk({0: block_rows})
    return X


def _plan(command, input_path, component, X, model, io):
    return {
        "command": command,
        "input": {"path": input_path if "://" in str(input_path) else os.path.abspath(input_path),
                  "component": component,
                  "shape": list(X.shape), "dtype": str(X.dtype)},
        "model": io.fingerprint(model),
        "estimator": type(model).__name__,
    }


def _describe_model(est):
    params = {k: v for k, v in est.get_params().items() if v is not None}
    return f"{type(est).__name__}({', '.join(f'{k}={v!r}' for k, v in sorted(params.items()))})"


def _described_same_job(out, plan, io):
    """io.describe(out) if ``out`` is an output store of this very plan (finished or not), else None."""
    try:
        described = io.describe(out)
    except (errors.DkapproxError, OSError):
        return None
    canonical = lambda value: json.dumps(value, sort_keys=True, default=str)  # noqa: E731
    same = canonical(described.get("plan")) == canonical(json.loads(canonical(plan)))
    return described if described.get("kind") == "features" and same else None


def _finished_same_job(out, plan, io):
    """True if ``out`` is a complete output of this very plan: a rerun then has nothing to do."""
    described = _described_same_job(out, plan, io)
    return described is not None and described.get("status") == "complete"


def _write(client, features, out, *, plan, overwrite, progress, compression=None):
    """Store features with a progress bar; the storage layer's WriteReport, or None if already done.

    Rerunning a finished job is a no-op that succeeds (nightly jobs get retried).
    """
    from . import io
    from .cluster import run

    if not overwrite and _finished_same_job(out, plan, io):
        return None
    try:
        pending = io.write_features(features, out, plan=plan, overwrite=overwrite, compute=False,
                                    compression=compression)
        if pending.blocks_to_write < pending.blocks_total:
            log.info("resuming %s: %d of %d blocks already written", out,
                     pending.blocks_total - pending.blocks_to_write, pending.blocks_total)
        run(client, pending.delayed, progress=progress, memory=pending.memory)
    except errors.WorkerMemoryError as exc:
        raise errors.WorkerMemoryError(exc.facts, _memory_advice(exc, out, plan, io),
                                       suggested_rows=exc.suggested_rows, block_shape=exc.block_shape,
                                       block_bytes=exc.block_bytes, memory_limit=exc.memory_limit,
                                       attempts=exc.attempts) from exc
    return pending.finalize()


def _memory_advice(exc, out, plan, io):
    """What to rerun after a WorkerMemoryError, in this command's options.

    Smaller blocks are another layout, so a store this job began must be
    started over (--overwrite); any other store at ``out`` is not ours to
    advise replacing.
    """
    rows = f"--block-rows {exc.suggested_rows}" if exc.suggested_rows else "a smaller --block-rows"
    ours = _described_same_job(out, plan, io)
    said = "" if exc.attempts is None else "nothing was written: "  # a refusal already says nothing ran
    if ours is None:
        return f"{said}rerun with {rows}"
    done = ours.get("blocks_done", 0)
    if done and exc.attempts is not None:  # workers died: maybe of something passing on a shared cluster
        return (f"{done} finished blocks are kept: rerun the same command to finish the rest, "
                f"or rerun with {rows} and --overwrite to start over with smaller blocks")
    return f"{said}rerun with {rows} and --overwrite" + (f" (starts over: {done} blocks were written)" if done else "")


def _summary(report, rows, out):
    if report is None:
        return f"{out} is already complete for this job; nothing to do"
    rate = rows / report.seconds if report.seconds else math.inf
    return (f"wrote {report.path}: {report.shape[0]:,} x {report.shape[1]:,} {report.dtype}; "
            f"{report.blocks_written} blocks written, {report.blocks_skipped} already there, "
            f"of {report.blocks_total}; {report.seconds:.1f} s ({rate:,.0f} rows/s)")


# -- commands ---------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--debug", is_flag=True, help="Show tracebacks and worker warnings.")
@click.option("--quiet", "-q", is_flag=True, help="Only errors on stderr (no log lines).")
@click.version_option(package_name="dkapprox", message="dkapprox %(version)s")
def dkapprox(debug, quiet):
    """Kernel approximation and random projection on Zarr data far larger than memory.

    Exit codes: 0 done, 2 usage, 65 bad input data, 66 input missing, 73 output
    exists or belongs to another job, 74 I/O error, 75 temporary failure
    (rerun; lower --block-rows if workers ran out of memory), 77 permission
    denied, 78 bad cluster config, 130/143 interrupted (rerun to resume).
    """
    _debug["on"] = debug
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("dkapprox: %(message)s"))
    logger = logging.getLogger("dkapprox")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.ERROR if quiet else logging.INFO)
    logger.propagate = False
    if not debug:
        logging.getLogger("distributed").setLevel(logging.CRITICAL)


@dkapprox.command()
@click.argument("input_path", metavar="INPUT")
@method_options
@click.option("--component", help="Array inside the INPUT group.")
@click.option("--out", "model_path", required=True, type=click.Path(), help="Model directory to write.")
@click.option("--overwrite", is_flag=True, help="Replace an existing model at --out.")
@cluster_options
def fit(input_path, method, n_components, gamma, random_state, params, component, model_path, overwrite,
        cluster_config, scheduler, start_timeout):
    """Fit an estimator on the Zarr array INPUT and save it to --out (no pickle)."""
    from . import io

    est = make_estimator(method, n_components=n_components, gamma=gamma, random_state=random_state,
                         params=params)
    _refuse_existing_model(model_path, overwrite)
    X = _open(input_path, component)  # metadata only: a bad input fails before a cluster starts
    with _client(cluster_config, scheduler, start_timeout):
        started = time.perf_counter()
        est.fit(X)
        seconds = time.perf_counter() - started
    io.save(est, model_path, overwrite=overwrite)
    click.echo(f"fitted {_describe_model(est)} on {input_path} ({X.shape[0]:,} x {X.shape[1]:,}) in "
               f"{seconds:.1f} s; model: {model_path} ({io.fingerprint(est)})")


@dkapprox.command()
@click.argument("input_path", metavar="INPUT")
@click.option("--model", "model_path", required=True, type=click.Path(), help="Model written by `dkapprox fit`.")
@click.option("--out", "out_path", required=True, type=click.Path(), help="Output Zarr store.")
@click.option("--overwrite", is_flag=True, help="Replace an existing output (of any job).")
@write_options
@cluster_options
def transform(input_path, model_path, out_path, component, overwrite, block_rows, compression,
              cluster_config, scheduler, progress, start_timeout):
    """Featurize the Zarr array INPUT with a saved model into --out (resumable: rerun to finish)."""
    from . import io

    model = io.load(model_path)
    X = _open(input_path, component, block_rows)
    features = model.transform(X)  # lazy: a wrong width fails here, before a cluster starts
    plan = _plan("transform", input_path, component, X, model, io)
    with _client(cluster_config, scheduler, start_timeout) as client:
        report = _write(client, features, out_path, plan=plan, overwrite=overwrite,
                        progress=_progress(progress), compression=None if compression == "none" else compression)
    click.echo(_summary(report, X.shape[0], out_path))


@dkapprox.command()
@click.argument("input_path", metavar="INPUT")
@method_options
@click.option("--out", "out_path", required=True, type=click.Path(), help="Output Zarr store.")
@click.option("--save-model", type=click.Path(), help="Also save the fitted model here.")
@click.option("--overwrite", is_flag=True, help="Replace an existing output (and model).")
@write_options
@cluster_options
def featurize(input_path, method, n_components, gamma, random_state, params, out_path, save_model, component,
              overwrite, block_rows, compression, cluster_config, scheduler, progress, start_timeout):
    """Fit on INPUT and featurize it into --out in one step (resumable: rerun to finish)."""
    from . import io

    est = make_estimator(method, n_components=n_components, gamma=gamma, random_state=random_state,
                         params=params)
    _refuse_existing_model(save_model, overwrite)
    X = _open(input_path, component, block_rows)
    with _client(cluster_config, scheduler, start_timeout) as client:
        started = time.perf_counter()
        est.fit(X)
        log.info("fitted %s in %.1f s", _describe_model(est), time.perf_counter() - started)
        if save_model:
            io.save(est, save_model, overwrite=overwrite)
        plan = _plan("featurize", input_path, component, X, est, io)
        report = _write(client, est.transform(X), out_path, plan=plan, overwrite=overwrite,
                        progress=_progress(progress), compression=None if compression == "none" else compression)
    click.echo(_summary(report, X.shape[0], out_path))


@dkapprox.command()
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of YAML.")
def info(path, as_json):
    """Describe a model directory or an output store (shape, chunks, completion, provenance)."""
    import yaml

    from . import io

    described = io.describe(path)
    if as_json:
        click.echo(json.dumps(described, indent=2, sort_keys=True, default=str))
    else:
        click.echo(yaml.safe_dump(json.loads(json.dumps(described, default=str)), sort_keys=False).rstrip())


@dkapprox.command("cluster-script")
@click.argument("config", type=click.Path(dir_okay=False))
def cluster_script(config):
    """Check a cluster config and print what it would start (job script, DaskCluster), submitting nothing."""
    from .cluster import load_config, render

    click.echo(render(load_config(config)).rstrip())



# -- demo -------------------------------------------------------------------------


def synthetic_block(index, start, stop, n_features, seed):
    """Rows ``start:stop`` of the demo data: 8 Gaussian blobs, float32, fixed by (seed, start)."""
    import numpy as np

    centers = np.random.default_rng(seed).normal(scale=3.0, size=(8, n_features)).astype(np.float32)
    rng = np.random.default_rng([seed, start])
    block = rng.standard_normal((stop - start, n_features), dtype=np.float32)
    block += centers[rng.integers(0, len(centers), stop - start)]
    return block


def _size(nbytes):
    from dask.utils import format_bytes

    return format_bytes(nbytes)


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
    import shutil
    import tempfile

    import numpy as np
    from dask.utils import parse_bytes

    from . import _graph, io
    from .cluster import ClusterConfig, WorkerWatch, connect

    try:
        limit = parse_bytes(memory_limit)
    except ValueError:
        raise click.BadParameter(f"expected a size such as 768MiB, got {memory_limit!r}",
                                 param_hint="--memory-limit") from None
    if small:
        rows, block_rows = min(rows, 20_000), min(block_rows, 2_000)
    progress = _progress(progress)
    keep, begun = directory is not None, time.perf_counter()
    directory = directory or tempfile.mkdtemp(prefix="dkapprox-demo-")
    os.makedirs(directory, exist_ok=True)
    input_path, out_path = os.path.join(directory, "input.zarr"), os.path.join(directory, "features.zarr")
    config = ClusterConfig("local", {"n_workers": workers, "threads_per_worker": 1,
                                     "memory_limit": memory_limit, "dashboard_address": ":8787"}, "demo")
    level = logging.WARNING if _debug["on"] else logging.CRITICAL
    try:
        with connect(config, worker_log_level=level) as client, WorkerWatch(client) as watch:
            nbytes = rows * features * 4
            click.echo(f"cluster: LocalCluster, {workers} workers x {_size(limit)} (dashboard {client.dashboard_link})")
            lazy = _graph.generate_rows(synthetic_block, rows, features, chunk_rows=block_rows, dtype=np.float32,
                                        name="demo-data", args=(features, 0))
            made = _write(client, lazy, input_path, progress=progress, overwrite=False,
                          plan={"command": "demo-data", "rows": rows, "features": features, "seed": 0})
            took = "kept from an earlier run" if made is None else f"in {made.seconds:.1f} s"
            click.echo(f"made   {input_path}: {rows:,} x {features} float32, {_size(nbytes)} "
                       f"({nbytes / limit:.1f}x one worker's memory limit) {took}")
            X = io.open_array(input_path)
            est = make_estimator(method, n_components=n_components, gamma="scale" if method == "rbf" else None)
            started = time.perf_counter()
            est.fit(X)
            click.echo(f"fit    {_describe_model(est)} in {time.perf_counter() - started:.1f} s")
            plan = _plan("demo", input_path, None, X, est, io)
            report = _write(client, est.transform(X), out_path, plan=plan, overwrite=False, progress=progress)
            Z = io.open_features(out_path)
            took = ("kept from an earlier run" if report is None else
                    f"{report.seconds:.1f} s ({rows / report.seconds:,.0f} rows/s)")
            click.echo(f"wrote  {out_path}: {rows:,} x {Z.shape[1]} {Z.dtype}, {_size(Z.nbytes)} in "
                       f"{Z.numblocks[0] * Z.numblocks[1]} blocks, {took}")
            head = min(rows, 1000)
            stored = Z[:head].compute()
            expected = est.transform(X[:head].compute())
            difference = float(np.abs(stored - expected).max())
            if not difference <= 1e-4:  # float32 features lie in [-0.09, 0.09]: this is a real error
                raise RuntimeError(f"check failed: stored features differ from the in-memory transform by {difference}")
            click.echo(f"check  first {head:,} rows equal the in-memory transform (max |difference| {difference:.1e})")
        w = watch.report
        peak = max(w.peak_rss.values(), default=0)
        click.echo(f"workers: peak memory {_size(peak)} of {_size(limit)}, restarts {w.restarts}, "
                   f"paused {len(w.paused)}, spilled {_size(sum(w.spilled_bytes.values()))}")
        click.echo(f"done in {time.perf_counter() - begun:.1f} s" + ("" if keep else "; removed the demo data"))
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
