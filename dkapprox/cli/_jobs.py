"""The steps of a command-line job, shared by the commands and the demo.

Build the estimator a ``--method`` names, open the input, describe the plan
of a job, write its features with a progress bar (a finished job is not
redone), and say what happened. Usage errors are click's, naming the option.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os

import click
import numpy as np

from .. import errors
from .._registry import cli_methods

log = logging.getLogger("dkapprox")

#: ``--method`` name -> estimator class, from the estimator registry.
METHODS = cli_methods()
DEFAULT_RANDOM_STATE = 0  # a rerun must draw the same model, or it could not resume


def shown(path) -> str:
    """A path or URL as the command prints and records it: never with the credentials a URL may hold."""
    from ..io import redact

    return redact(path)


def one_line(exc: BaseException) -> str:
    text = shown(" ".join(str(exc).split())) or type(exc).__name__
    if isinstance(exc, (errors.OutputExistsError, errors.ResumeMismatchError)):
        # the library's words, in the CLI's
        text = text.replace("pass overwrite=True", "pass --overwrite").replace("overwrite=True", "--overwrite")
    if isinstance(exc, errors.InputChangedError):
        text = text.replace("pass refresh=True", "pass --refresh").replace("with refresh=True", "with --refresh")
    if isinstance(exc, errors.StoreBusyError):
        text = text.replace("pass wait=True", "pass --wait")
    if isinstance(exc, errors.InputDataError):
        text = text.replace("pass columns=", "pass --columns")
    return text if isinstance(exc, (errors.DkapproxError, ValueError, OSError)) else \
        f"{type(exc).__name__}: {text}"


def refuse_existing_model(path, overwrite, storage_options=None):
    """Fail before the fit, not after it, when saving would be refused (models.save has the final word)."""
    if path and "://" in str(path):
        from ..models import check_saveable

        check_saveable(path, overwrite=overwrite, storage_options=storage_options)
        return
    if path and not overwrite and os.path.lexists(path) and not (os.path.isdir(path) and not os.listdir(path)):
        raise errors.OutputExistsError(f"{path}: exists; pass --overwrite to replace the model there")


def refuse_missing_bucket(out, storage_options=None):
    """Name a missing output bucket before a fit, not after it (write_features has the final word)."""
    if out and "://" in str(out):
        from ..io import locate, missing_bucket

        loc = locate(out, storage_options)
        bucket = missing_bucket(loc)
        if bucket is not None:
            raise errors.InputMissingError(f"{loc}: the bucket {bucket!r} to write the output in does not exist")


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


#: storage option keys whose values stay strings whatever they look like (a secret of digits is a string)
_TEXT_OPTIONS = frozenset({"key", "secret", "token", "password", "username", "profile", "account_name",
                           "account_key", "sas_token", "client_id", "client_secret", "tenant_id",
                           "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "endpoint_url"})


def parse_storage_options(items) -> dict:
    """``--storage-option KEY=VALUE`` items as fsspec storage options; ``a.b=v`` nests as ``{"a": {"b": v}}``.

    Values are parsed like ``--param`` values, except credentials and names,
    which stay strings. A malformed item is named by its key only: its value
    may be a secret.
    """
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            shown = f"{key!r}" if sep else "an item without '='"
            raise click.BadParameter(f"expected KEY=VALUE (KEY may be dotted, e.g. client_kwargs.region_name), "
                                     f"got {shown}", param_hint="--storage-option")
        *parents, leaf = key.split(".")
        target = options
        for part in parents:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise click.BadParameter(f"{key}: {part} is given both as a value and as a group",
                                         param_hint="--storage-option")
        target[leaf] = value if leaf in _TEXT_OPTIONS else parse_value(value)
    return options


def make_estimator(method, *, n_components=None, gamma=None, random_state=DEFAULT_RANDOM_STATE, params=()):
    """The unfitted estimator for ``--method`` and its options; usage errors name the option."""
    return build_estimator(METHODS[method], (("n_components", n_components, "--n-components"),
                                             ("gamma", None if gamma is None else parse_value(gamma), "--gamma")),
                           random_state=random_state, params=params)


def build_estimator(cls, options, *, random_state=DEFAULT_RANDOM_STATE, params=()):
    """The unfitted ``cls`` from ``--param`` items and ``options``, ``(parameter, value, option)`` triples
    (None: not given; a given one overrides a ``--param`` of its name); usage errors name the option."""
    name = cls.__name__
    accepted = cls().get_params()
    chosen = {}
    for item in params:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--param")
        chosen[key.strip().replace("-", "_")] = parse_value(value)
    for key, value, option in options:
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


def open_input(path, component, block_rows=None, storage_options=None):
    from .. import io

    X = io.open_array(path, component, storage_options=storage_options)
    if block_rows:
        X = X.rechunk({0: block_rows})
    return X


def parse_columns(text, option="--columns"):
    """``--columns a,b,c`` (or ``option``'s) as a tuple of names (None: not given)."""
    if text is None:
        return None
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise click.BadParameter(f"expected column names separated by commas, got {text!r}", param_hint=option)
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise click.BadParameter(f"column {duplicated[0]!r} is named twice", param_hint=option)
    return names


def is_parquet_out(path) -> bool:
    """True if --out names a Parquet dataset to write: its name ends in .parquet, .parq or .pq."""
    from ..io import PARQUET_SUFFIXES

    return str(path).rstrip("/").rsplit("/", 1)[-1].lower().endswith(PARQUET_SUFFIXES)


def check_parquet_out(input_path, out, keep, sources, refresh, compression):
    """Usage errors (exit 2) of a Parquet --out and of --keep-columns, before any fit or compute.

    --keep-columns needs Parquet input and Parquet output, and names columns the input has; a
    Parquet output is read from a Parquet input and is never refreshed (--overwrite starts over).
    """
    parquet_out = is_parquet_out(out)
    if keep is not None and not parquet_out:
        raise click.BadParameter(f"{shown(out)} is no Parquet dataset: kept columns go to a Parquet output "
                                 "(an --out ending in .parquet, .parq or .pq)", param_hint="--keep-columns")
    if not parquet_out:
        return
    if not sources:
        what = "--keep-columns needs" if keep is not None else "a Parquet --out is written from"
        raise click.UsageError(f"{what} a Parquet INPUT; {shown(input_path)} is a Zarr store "
                               "(write its features to a .zarr --out)")
    if refresh:
        raise click.UsageError("--refresh: a Parquet --out is not refreshed; pass --overwrite to start over")
    (dataset,) = sources
    if keep:
        absent = [c for c in keep if c not in dataset.column_names]
        if absent:
            raise click.BadParameter(f"{shown(input_path)}: no column {', '.join(map(repr, absent))} in the dataset "
                                     f"(its columns: {', '.join(dataset.column_names)})", param_hint="--keep-columns")


def feature_names(est, keep):
    """The feature columns' names (get_feature_names_out); a kept column of the same name is a usage error."""
    names = [str(n) for n in est.get_feature_names_out()]
    clash = sorted(set(names) & set(keep or ()))
    if clash:
        raise click.BadParameter(f"column {clash[0]!r} is also a feature's name", param_hint="--keep-columns")
    return names


def write_parquet(client, features, out, *, dataset, names, keep, plan, overwrite, progress, compression=None,
                  wait=False, storage_options=None):
    """Features (and kept columns) to a Parquet dataset, one part a block, resumable; the report, or None if
    already done (:mod:`dkapprox.io._parquet_output`)."""
    from ..cluster import run
    from ..io import write_parquet_features

    plan = {**plan, "output": {"format": "parquet", "keep_columns": list(keep or ())}}
    return write_parquet_features(features, out, dataset, names=names, keep=tuple(keep or ()), plan=plan,
                                  overwrite=overwrite, compression=compression, storage_options=storage_options,
                                  wait=wait, run=lambda lazy: run(client, lazy, progress=progress))


def open_data(path, component=None, block_rows=None, storage_options=None, columns=None):
    """``(X, sources)``: INPUT as a lazy dask array, and the inputs the writer must identify besides Zarr arrays.

    A Parquet dataset (:func:`dkapprox.io._parquet.is_parquet`) is read through dask.dataframe, one
    block per file, its row counts from the footers; ``columns`` (default: every column) are its
    features. Every check its schema allows runs here, before any cluster starts. Blocks are made
    regular for the store: ``block_rows``, else the largest file's rows (files of other lengths are
    split or joined across blocks; each file is still read whole by the task that needs it).
    """
    from .. import inputs, io

    if not io.is_parquet(path, storage_options):
        if columns is not None:
            raise click.UsageError(f"--columns: {shown(path)} is a Zarr store, not a Parquet dataset; "
                                   "--columns picks a Parquet dataset's columns (a Zarr array's are all read)")
        return open_input(path, component, block_rows, storage_options), ()
    if component is not None:
        raise click.UsageError(f"--component: {shown(path)} is a Parquet dataset; pick its columns with --columns")
    try:
        dataset = io.open_parquet(path, columns, storage_options=storage_options)
    except errors.InputDataError as exc:
        absent = getattr(exc, "absent_columns", None)
        if absent:
            raise click.BadParameter(one_line(exc), param_hint="--columns") from None
        raise
    X = inputs.frame_as_dask(dataset.frame(), dtype=dataset.dtype, rows=dataset.rows)
    rows = X.chunks[0]
    if block_rows:
        X = X.rechunk({0: block_rows})
    elif any(n != max(rows) for n in rows[:-1]):
        X = X.rechunk({0: max(rows)})
    log.info("reading %s: %d files, %s rows, columns %s", shown(path), len(dataset.keys), f"{X.shape[0]:,}",
             ", ".join(dataset.columns))
    return X, (dataset,)


def require_workers_see(*paths, storage_options=None):
    """Refuse (UnsharedPathError) a local INPUT (or target) that the cluster's workers do not see, before a fit
    reads it."""
    from ..io import locate, require_shared

    require_shared(inputs=[locate(path, storage_options) for path in paths])


def plan_of(command, input_path, component, X, model, device="cpu", sources=()):
    from ..models import fingerprint

    plan = {
        "command": command,
        # the input's shape, dtype and content are its identity, recorded and compared by the store
        # (dkapprox.io._identity): rows appended to it are a refresh of this job, not another job
        "input": {"path": shown(input_path) if "://" in str(input_path) else os.path.abspath(input_path),
                  "component": component, "columns": int(X.shape[1])},
        "model": fingerprint(model),
        "estimator": type(model).__name__,
        # features of other row blocks equal these only within the rounding bound (README:
        # "Precision"): another --block-rows is another job, never resumed into this one
        "block_rows": int(X.chunks[0][0]),
    }
    for source in sources:  # a Parquet dataset: its columns, by name and in order, are the job's
        plan["input"].update(format="parquet", column_names=list(source.columns))
    if device != "cpu":  # a GPU's features equal the CPU's within the rounding bound only: another job
        plan["device"] = device
    return plan


def on_device(X, device):
    """``(blocks, back)``: X's blocks on ``device`` and the function that brings features back to the host.

    ``cpu`` changes nothing. ``cuda`` copies each block to its worker's GPU in its task (Zarr is
    read on the host), and the features back to the host for the writer; CuPy and a GPU are
    checked first (:func:`dkapprox.backends._xp.require_cuda`), so a machine without them fails before
    any cluster starts, never computing on the CPU in silence.
    """
    from .. import backends

    if device == "cpu":
        return X, lambda Z: Z
    return backends.cuda_blocks(X), backends.host_blocks


def refuse_host_only(est, device):
    """``--device cuda`` with a map that runs on NumPy blocks only: a usage error, before any fit or cluster.

    Random binning hashes cells into a scipy.sparse matrix, which the array API has no form of
    (:func:`dkapprox.random_features.binning.refuse_device`); computing it on the host instead
    would break ``on_device``'s promise never to fall back to the CPU in silence.
    """
    from ..random_features import RandomBinningFeatures

    if device != "cpu" and isinstance(est, RandomBinningFeatures):
        raise click.UsageError(f"--device {device}: RandomBinningFeatures (--method binning) runs on the host "
                               "only (its features are scipy.sparse); use --device cpu")


def storable(features):
    """Features as a Zarr store holds them: dense blocks.

    A map with sparse output (``--method binning``, whose ``dense_output`` is False by default)
    gives a dask array of scipy.sparse blocks, which :func:`dkapprox.io.write_features` refuses.
    Each block is made dense in its own task, fused with the map that made it, so the store holds
    exactly ``transform(X).toarray()``; the model stays as fitted (a Python user loading it still
    gets sparse features). Mostly zeros: ``--compression zstd`` shrinks such a store.
    """
    from .. import engine

    if not engine.is_sparse_meta(features):
        return features
    return features.map_blocks(_dense_block, dtype=features.dtype,
                               meta=np.empty((0,) * features.ndim, dtype=features.dtype))


def _dense_block(block):
    return block.toarray()


def describe_model(est):
    params = {k: v for k, v in est.get_params().items() if v is not None}
    return f"{type(est).__name__}({', '.join(f'{k}={v!r}' for k, v in sorted(params.items()))})"


def _described_same_job(out, plan, io, storage_options=None):
    """io.describe(out) if ``out`` is an output store of this very plan (finished or not), else None."""
    try:
        described = io.describe(out, storage_options=storage_options)
    except (errors.DkapproxError, OSError):
        return None
    same = _canonical(described.get("plan")) == _canonical(json.loads(_canonical(plan)))
    return described if described.get("kind") == "features" and same else None


def _finished_same_job(out, plan, io, storage_options=None):
    """True if ``out`` is a complete output of this very plan over its input as it is now: a rerun then
    has nothing to do. A changed input is left to write_features, which names what changed."""
    described = _described_same_job(out, plan, io, storage_options)  # a complete store's: no marker listed
    if described is None or described.get("status") != "complete":
        return False
    inputs = io.describe(out, check_input=True, storage_options=storage_options)["inputs"]
    return all(i.get("matches") for i in inputs)


def write(client, features, out, *, plan, overwrite, progress, compression=None, wait=False, refresh=False,
          storage_options=None, sources=()):
    """Store features with a progress bar; the storage layer's WriteReport, or None if already done.

    Rerunning a finished job over an unchanged input is a no-op that succeeds (nightly jobs get
    retried), also when it waited (``wait``) for another run of it to finish. ``refresh``
    rewrites only the blocks whose input changed, and writes appended rows.
    """
    from .. import io
    from ..cluster import run

    if not overwrite and _finished_same_job(out, plan, io, storage_options):
        return None
    pending = None
    try:
        if io.is_icechunk(out):  # commits batch by batch on the driver: the writer runs the computes itself
            return io.write_features(features, out, plan=plan, overwrite=overwrite, refresh=refresh,
                                     compression=compression, wait=wait, storage_options=storage_options,
                                     sources=sources)
        try:
            pending = io.write_features(features, out, plan=plan, overwrite=overwrite, refresh=refresh,
                                        compute=False, compression=compression, wait=wait,
                                        storage_options=storage_options, sources=sources)
        except errors.OutputExistsError:
            if not overwrite and _finished_same_job(out, plan, io, storage_options):
                return None  # the run we waited for finished it
            raise
        if pending.blocks_to_write < pending.blocks_total:
            log.info("resuming %s: %d of %d blocks already written", shown(out),
                     pending.blocks_total - pending.blocks_to_write, pending.blocks_total)
        written = run(client, pending.delayed, progress=progress, memory=pending.memory, parts=pending.parts,
                      spread=pending.spread)
        return pending.finalize(written)  # every planned block returned after its marker: no listing again
    except errors.WorkerMemoryError as exc:
        raise errors.WorkerMemoryError(exc.facts, _memory_advice(exc, out, plan, io, storage_options),
                                       suggested_rows=exc.suggested_rows, block_shape=exc.block_shape,
                                       block_bytes=exc.block_bytes, memory_limit=exc.memory_limit,
                                       attempts=exc.attempts) from exc
    finally:
        if pending is not None:
            pending.release()  # done, or failed: a rerun need not wait for the lease to expire


def _memory_advice(exc, out, plan, io, storage_options=None):
    """What to rerun after a WorkerMemoryError, in this command's options.

    Smaller blocks are another layout, so a store this job began must be
    started over (--overwrite); any other store at ``out`` is not ours to
    advise replacing.
    """
    rows = f"--block-rows {exc.suggested_rows}" if exc.suggested_rows else "a smaller --block-rows"
    ours = _described_same_job(out, plan, io, storage_options)
    said = "" if exc.attempts is None else "nothing was written: "  # a refusal already says nothing ran
    if ours is None:
        return f"{said}rerun with {rows}"
    done = ours.get("blocks_done", 0)
    if done and exc.attempts is not None:  # workers died: maybe of something passing on a shared cluster
        return (f"{done} finished blocks are kept: rerun the same command to finish the rest, "
                f"or rerun with {rows} and --overwrite to start over with smaller blocks")
    return f"{said}rerun with {rows} and --overwrite" + (f" (starts over: {done} blocks were written)" if done else "")


def summary(report, rows, out):
    out = shown(out)
    if report is None:
        return f"{out} is already complete for this job; nothing to do (its input is unchanged)"
    if report.refreshed and not report.blocks_written:
        return f"{out} is up to date with its input; nothing to refresh"
    rate = rows / report.seconds if report.seconds else math.inf
    return (f"wrote {report.path}: {report.shape[0]:,} x {report.shape[1]:,} {report.dtype}; "
            f"{report.blocks_written} blocks written, {report.blocks_skipped} already there, "
            f"of {report.blocks_total}; {report.seconds:.1f} s ({rate:,.0f} rows/s)")


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


# -- learners: kernel-ridge and predict ---------------------------------------------------------------


def check_targets_given(target, target_columns):
    """Exactly one of --target and --target-column (a usage error otherwise, before anything is opened)."""
    if (target is None) == (target_columns is None):
        raise click.UsageError("give the targets: --target (a Zarr array) or --target-column (columns of a Parquet "
                               "INPUT), one of the two")


def open_training_data(path, component=None, *, target=None, target_columns=None, columns=None,
                       storage_options=None):
    """``(X, y, sources)``: INPUT's features and their targets, lazily; every check metadata allows, now.

    The targets are a Zarr array (``--target``: 1-D, or 2-D rows x targets, an (n, 1) one read as 1-D),
    or columns of the Parquet INPUT itself (``--target-column``: the same files, so the same rows in the
    same order; without ``--columns`` the features are the other columns). A target whose length is not
    INPUT's rows is bad input (65), refused before any cluster starts.
    """
    from .. import inputs, io
    from ..io import open_target

    check_targets_given(target, target_columns)
    y, where = None, shown(target) if target is not None else None
    if target_columns is not None:
        if not io.is_parquet(path, storage_options):
            raise click.UsageError(f"--target-column: {shown(path)} is a Zarr store, not a Parquet dataset; give "
                                   "its targets as a Zarr array with --target")
        try:
            dataset = io.open_parquet(path, target_columns, storage_options=storage_options)
        except errors.InputDataError as exc:
            if getattr(exc, "absent_columns", None):
                raise click.BadParameter(one_line(exc), param_hint="--target-column") from None
            raise
        both = sorted(set(columns or ()) & set(target_columns))
        if both:
            raise click.BadParameter(f"column {both[0]!r} is also a feature column (--columns)",
                                     param_hint="--target-column")
        if columns is None:
            columns = tuple(c for c in dataset.column_names if c not in target_columns)
        y = inputs.frame_as_dask(dataset.frame(), dtype=dataset.dtype, rows=dataset.rows)
        where = f"{shown(path)} column{'s' if len(target_columns) > 1 else ''} {', '.join(target_columns)}"
    X, sources = open_data(path, component, storage_options=storage_options, columns=columns)
    if y is None:
        y = open_target(target, storage_options=storage_options)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.shape[0] != X.shape[0]:
        raise errors.InputDataError(f"{where}: {y.shape[0]:,} targets for the {X.shape[0]:,} rows of "
                                    f"{shown(path)}; the targets must be INPUT's rows, in its order")
    return X, y, sources


def kernel_ridge_estimator(classify, n_folds, alphas, gammas, *, n_centers, centers, alpha, kernel, gamma, tol,
                           max_iter, random_state, params, route=None, kernel_params=None):
    """The unfitted KernelRidge[Classifier], or with ``n_folds`` its CV search; usage errors name the option."""
    from ..linear_model import KernelRidge, KernelRidgeClassifier, KernelRidgeClassifierCV, KernelRidgeCV

    common = (("n_centers", n_centers, "--n-centers"), ("centers", centers, "--centers"),
              ("kernel", kernel, "--kernel"))
    if n_folds is None:
        for given, option in ((alphas, "--alphas"), (gammas, "--gammas"), (kernel_params, "--kernel-params")):
            if given is not None:
                raise click.UsageError(f"{option} is a grid to search: give --cv N with it, or --alpha / --gamma")
        if route is not None:
            raise click.UsageError("--route is how a search (--cv N) solves its candidates: give --cv N with it")
        return build_estimator(KernelRidgeClassifier if classify else KernelRidge, common + (
            ("alpha", alpha, "--alpha"), ("gamma", None if gamma is None else parse_value(gamma), "--gamma"),
            ("tol", tol, "--tol"), ("max_iter", max_iter, "--max-iter")), random_state=random_state, params=params)
    for given, option in ((alpha, "--alpha"), (gamma, "--gamma")):
        if given is not None:
            raise click.UsageError(f"{option} does not go with --cv: the search chooses it; give the grid with "
                                   "--alphas and --gammas")
    grid = [("alphas", _floats(alphas, "--alphas"), "--alphas"), ("gammas", _floats(gammas, "--gammas"), "--gammas"),
            ("kernel_params", _json(kernel_params, "--kernel-params"), "--kernel-params")]
    solver = (("route", route, "--route"), ("tol", tol, "--tol"), ("max_iter", max_iter, "--max-iter"))
    return build_estimator(KernelRidgeClassifierCV if classify else KernelRidgeCV,
                           common + (("cv", n_folds, "--cv"),) + tuple(grid) + solver, random_state=random_state,
                           params=params)


def gaussian_process_estimator(*, n_centers, centers, kernel, nu, ard, length_scale, noise, alpha, optimize, restarts,
                               normalize_y, random_state, params, n_features):
    """The unfitted GaussianProcessRegressor: ``ConstantKernel * (RBF or Matern) + WhiteKernel`` from the options,
    one length scale a feature with ``ard``."""
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Matern, WhiteKernel

    from ..gaussian_process import GaussianProcessRegressor

    scales = np.full(n_features, length_scale) if ard else length_scale
    base = RBF(scales) if kernel == "rbf" else Matern(scales, nu=float(nu))
    est = build_estimator(GaussianProcessRegressor, (
        ("kernel", ConstantKernel(1.0) * base + WhiteKernel(noise), "--kernel"),
        ("n_centers", n_centers, "--n-centers"), ("centers", centers, "--centers"), ("alpha", alpha, "--alpha"),
        ("n_restarts_optimizer", restarts, "--restarts"), ("normalize_y", normalize_y, "--normalize-y")),
        random_state=random_state, params=params)
    return est if optimize else est.set_params(optimizer=None)


def _json(text, option):
    """A JSON value given on the command line (None: not given); the estimator checks what it holds."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise click.BadParameter(f"expected JSON, e.g. '{{\"degree\": [2, 3]}}', got {text!r}",
                                 param_hint=option) from None


def _floats(text, option):
    if text is None:
        return None
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"expected numbers separated by commas, got {text!r}", param_hint=option) from None
    if not values or any(not v > 0 for v in values):
        raise click.BadParameter(f"expected positive numbers separated by commas, got {text!r}", param_hint=option)
    return values


def log_search(est):
    """The search's table, best first: one log line a candidate."""
    results = est.cv_results_
    scoring = est.scoring or est._scorings[0]
    log.info("cross-validation of %d candidates over %d folds (%s) by the %s route, %d passes; best first:",
             len(results["params"]), est.n_splits_, scoring, est.route_, est.passes_)
    for i in sorted(range(len(results["params"])), key=lambda i: (results["rank_test_score"][i], i)):
        p = results["params"][i]
        dropped = int(results["dropped_at_iteration"][i])
        others = "".join(f" {k}={v:<6g}" for k, v in sorted(p.items()) if k not in ("gamma", "alpha"))
        log.info("  rank %3d  gamma=%-10.4g%s alpha=%-10.4g %s %.5f +- %.5f%s", results["rank_test_score"][i],
                 p["gamma"], others, p["alpha"], scoring, results["mean_test_score"][i], results["std_test_score"][i],
                 f"  (dropped after CG iteration {dropped})" if dropped else "")


def fit_learner(est, X, y):
    """Fit; warnings (CG that did not converge) become one log line each, as the CLI's messages are."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        est.fit(X, y)
    for warning in caught:
        log.warning("warning: %s", " ".join(str(warning.message).split()))
    return est


def _chosen(params) -> str:
    """A search's chosen parameters: gamma first, alpha last, the kernel's others between."""
    others = [f"{k}={v:g}" for k, v in sorted(params.items()) if k not in ("gamma", "alpha")]
    return ", ".join([f"gamma={params['gamma']:g}", *others, f"alpha={params['alpha']:g}"])


def describe_fit(est) -> str:
    """What a kernel ridge or GP fit did, in a few words: its centers, CG iterations or kernel, and passes."""
    kept = "kept in the workers' memory" if est.input_persisted_ else "read every pass"
    if hasattr(est, "kernel_"):
        return (f"{est.centers_.shape[0]:,} centers ({est.centers if isinstance(est.centers, str) else 'given'}), "
                f"kernel {est.kernel_}, bound on the log marginal likelihood {est.log_marginal_likelihood_value_:.6g}, "
                f"{est.n_passes_} passes over the input ({kept})")
    if hasattr(est, "cv_results_"):
        return (f"{est.centers_.shape[0]:,} centers ({est.centers if isinstance(est.centers, str) else 'given'}), "
                f"{len(est.cv_results_['params'])} candidates x {est.n_splits_} folds in {est.passes_} passes over "
                f"the input ({kept}): best {_chosen(est.best_params_)} "
                f"({est.scoring or est._scorings[0]} {est.best_score_:.4f})")
    residual = float(est.residuals_[-1]) if len(est.residuals_) else 0.0
    converged = "" if residual <= est.tol else f" > tol={est.tol:g}: did not converge"
    return (f"{est.centers_.shape[0]:,} centers ({est.centers if isinstance(est.centers, str) else 'given'}), "
            f"{est.n_iter_} CG iterations, relative residual {residual:.3g}{converged}, {est.passes_} passes "
            f"over the input ({kept})")


def refuse_unless_able(model, method, command):
    """A model without ``method`` (a feature map asked to predict, a learner to transform): usage error 2."""
    if hasattr(model, method):
        return
    name = type(model).__name__
    other = {"transform": "`dkapprox predict`", "predict": "`dkapprox transform`",
             "decision_function": "`dkapprox predict` without --scores"}[method]
    what = "a feature map" if hasattr(model, "transform") else "a learner" if hasattr(model, "predict") else "a model"
    raise click.UsageError(f"{command}: the model is {what} ({name}), which has no {method}; use {other}")


def refuse_std_unless_able(model, std, scores):
    """--std needs a model whose predict gives a standard deviation, and does not go with --scores."""
    if not std:
        return
    if scores:
        raise click.UsageError("predict: give --std or --scores, not both")
    import inspect

    if "return_std" not in inspect.signature(model.predict).parameters:
        raise click.UsageError(f"predict --std: the model ({type(model).__name__}) gives no standard deviation; "
                               "a Gaussian process (`dkapprox gaussian-process`) does")


def predictions(model, X, scores=False, std=False):
    """``predict`` (a classifier's labels) or, with ``scores``, ``decision_function``, as 2-D (rows, outputs):
    a store holds 2-D blocks, so one output is one column; with ``std`` the standard deviations follow."""
    if std:
        import dask.array as da

        mean, spread = model.predict(X, return_std=True)
        two_d = [a[:, None] if a.ndim == 1 else a for a in (mean, spread)]
        return da.concatenate(two_d, axis=1) if isinstance(mean, da.Array) else np.concatenate(two_d, axis=1)
    out = model.decision_function(X) if scores else model.predict(X)
    if np.dtype(out.dtype).kind not in "biuf":
        raise click.UsageError(f"predict: {type(model).__name__}'s classes are {out.dtype} labels, which a store "
                               "does not hold; write the scores with --scores")
    return out[:, None] if out.ndim == 1 else out


def prediction_names(width, scores=False, std=False):
    """The columns of a Parquet --out of ``predict``: prediction (or score), numbered when several; with ``std``
    the predictions' columns, then as many std columns."""
    if std:
        return prediction_names(width // 2) + [n.replace("prediction", "std") for n in prediction_names(width // 2)]
    stem = "score" if scores else "prediction"
    return [stem] if width == 1 else [f"{stem}{i}" for i in range(width)]
