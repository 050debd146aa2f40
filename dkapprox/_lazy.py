"""Lazy input in, results out: the layer between the estimators and the engine.

:mod:`dkapprox._graph` builds dask graphs and knows nothing above it. This
module wraps it where an estimator meets the outside world:

- a Zarr array given to an estimator is opened by :mod:`dkapprox.io` (its
  metadata checked) before the engine ever sees it (:func:`as_dask`);
- a dask DataFrame (or Series) becomes a dask array of its values, one
  block per partition, read when the blocks are (:func:`frame_as_dask`), and
  features come back as a lazy dask DataFrame with its index and divisions
  (:func:`as_frame`); dask.dataframe and pandas are imported only by whoever
  made the frame;
- a fit's compute runs inside :func:`dkapprox.cluster.explain_worker_deaths`,
  so that workers dying on a block become one clear error (:func:`compute`),
  with a progress display where a person is watching (:mod:`dkapprox._progress`).
"""

from __future__ import annotations

import sys
from functools import partial

import dask.array as da
import numpy as np
from dask.base import tokenize

from . import _graph, _progress

__all__ = ["as_dask", "as_frame", "compute", "frame_as_dask", "is_dataframe", "is_lazy", "targets_as_dask"]

_VALUES, _INDEX = "frame-values-", "frame-index-"


def is_lazy(X) -> bool:
    """True for dask arrays, zarr arrays (opened lazily as dask) and dask DataFrames and Series."""
    return isinstance(X, da.Array) or _is_zarr(X) or is_dataframe(X)


def is_dataframe(X) -> bool:
    """True for a dask DataFrame or Series; never imports dask.dataframe (a frame's maker did)."""
    dd = sys.modules.get("dask.dataframe")
    kinds = tuple(kind for kind in (getattr(dd, "DataFrame", None), getattr(dd, "Series", None)) if kind)
    return bool(kinds) and isinstance(X, kinds)


def _is_zarr(X) -> bool:
    return type(X).__module__.startswith("zarr") and hasattr(X, "chunks")


def as_dask(X) -> da.Array:
    """A dask array for a dask or zarr array or a dask DataFrame.

    A zarr array is checked and aligned to its chunks; a dask DataFrame or
    Series gives its values as pandas converts them (:func:`frame_as_dask`).
    """
    if isinstance(X, da.Array):
        return X
    if is_dataframe(X):
        return frame_as_dask(X)
    if _is_zarr(X):
        from .io._zarr_store import open_array  # imported here: zarr is imported only when used

        return open_array(X)
    raise TypeError(f"expected a dask or zarr array, got {type(X).__name__}")


def frame_as_dask(X, dtype=None, rows=None) -> da.Array:
    """The values of a dask DataFrame (2-D) or Series (1-D) as a dask array; nothing is computed.

    One row block per partition, with unknown row counts (NaN chunks: a
    partition's length is known only once it is read) and one column chunk.
    Each block is a C-contiguous array (pandas holds a frame's values in
    Fortran order), as a copy of the same NumPy rows is, so a block function
    gives it the bits it gives that copy. ``dtype`` is the blocks'
    dtype (default: pandas' common dtype of the columns, float64 for
    nullable and pyarrow columns); missing values of nullable and pyarrow
    columns become NaN, which the block checks then refuse with
    scikit-learn's message.

    The blocks read the frame's optimized partitions (``to_delayed``): the
    graph also holds a task per partition giving its index, computed only
    when :func:`as_frame` puts the features back into a frame, from the
    partition the block was read from (each partition is read once).

    ``rows``: the partitions' row counts where they are known without
    reading them (a Parquet file's footer says it): the blocks then declare
    them; the partitions' reader must check that they still hold as many
    (``dkapprox.io._parquet``'s does).
    """
    dtypes = list(X.dtypes) if X.ndim == 2 else [X.dtype]
    numpy_only = all(isinstance(d, np.dtype) for d in dtypes)
    if dtype is None:
        if numpy_only:
            dtype = np.result_type(*dtypes) if dtypes else np.float64
        else:
            from pandas.api.types import is_bool_dtype, is_numeric_dtype

            numeric = all(is_numeric_dtype(d) or is_bool_dtype(d) for d in dtypes)
            dtype = np.float64 if numeric else object
    dtype = np.dtype(dtype)
    na_value = np.nan if not numpy_only and dtype.kind in "fc" else None
    parts = X.to_delayed(optimize_graph=True)
    token = tokenize([part.key for part in parts], dtype.str, na_value)
    values, index = f"{_VALUES}{token}", f"{_INDEX}{token}"
    convert = partial(_partition_values, dtype=dtype, na_value=na_value)
    tail = (len(dtypes),) if X.ndim == 2 else ()
    layer = {(values, i, *([0] * len(tail))): (convert, part.key) for i, part in enumerate(parts)}
    layer.update({(index, i): (_partition_index, part.key) for i, part in enumerate(parts)})
    from dask.highlevelgraph import HighLevelGraph

    graph = HighLevelGraph.from_collections(values, layer, dependencies=parts[:1])  # parts share one graph
    if rows is not None and len(rows) != len(parts):
        raise ValueError(f"{len(rows)} row counts given for {len(parts)} partitions")
    chunks = ((np.nan,) * len(parts) if rows is None else tuple(int(n) for n in rows),) + tuple((t,) for t in tail)
    return _graph.array_from_graph(graph, values, chunks, np.empty((0,) * (1 + len(tail)), dtype=dtype))


def _partition_values(part, dtype, na_value):
    values = part.to_numpy(dtype=dtype) if na_value is None else part.to_numpy(dtype=dtype, na_value=na_value)
    return np.ascontiguousarray(values)


def _partition_index(part):
    return part.index


def as_frame(out, values, X, meta):
    """Row blocks ``out`` of ``values`` (:func:`frame_as_dask` of the dask DataFrame ``X``) as a lazy dask DataFrame.

    Its partitions are ``meta``'s type (a pandas DataFrame of no rows: the
    columns, their dtype, the index's type) with the index of the input
    partition each block was read from, and its divisions are ``X``'s.
    Nothing is computed; each input partition is still read once.
    """
    import dask.dataframe as dd
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph

    if not values.name.startswith(_VALUES) or values.numblocks[0] != X.npartitions:
        raise ValueError("as_frame needs the blocks of frame_as_dask(X)")
    if out.ndim != 2 or out.numblocks[1] != 1 or out.numblocks[0] != X.npartitions:
        raise ValueError(f"as_frame needs one row block per partition of X and one column block; got {out.numblocks}")
    # the token frame_as_dask named both by (array expressions append a token of their own to the values' name)
    index = _INDEX + values.name[len(_VALUES):].split("-")[0]
    name = f"frame-features-{tokenize(out.name, index, list(meta.columns))}"
    make = partial(_features_frame, columns=meta.columns)
    blocks = out.__dask_keys__()  # (out.name, i, 0) in legacy dask.array; array expressions may name them otherwise
    layer = {(name, i): (make, blocks[i][0], (index, i)) for i in range(X.npartitions)}
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[out, values])
    parts = [Delayed((name, i), graph, layer=name) for i in range(X.npartitions)]
    return dd.from_delayed(parts, meta=meta, divisions=X.divisions, verify_meta=False)


def _features_frame(block, index, columns):
    import pandas as pd

    return pd.DataFrame(block, index=index, columns=columns, copy=False)


def targets_as_dask(y) -> da.Array:
    """Targets (1-D or 2-D) of a dask or zarr array as a dask array.

    A 2-D zarr array goes through :func:`as_dask` (and dkapprox.io's checks of
    a samples x features array); a 1-D one (a target vector) is opened lazily
    as it is, aligned to its zarr chunks.
    """
    if _is_zarr(y) and len(y.shape) == 1:
        # array expressions have no from_zarr: from_array of the zarr array, aligned to its chunks, as from_zarr does
        return da.from_array(y, chunks=y.chunks) if _graph.expression_mode() else da.from_zarr(y)
    return as_dask(y)


#: A fit that reads its input many times (KernelRidge's CG, a pass an iteration) keeps the input in the
#: workers' memory when it takes at most this fraction of it (dask config ``dkapprox.persist-fraction``).
PERSIST_FRACTION = 0.25


def persist_if_fits(X):
    """``(X, persisted)``: ``X`` persisted where it fits in memory, else ``X`` as it is (read every pass).

    It fits when its bytes are at most ``dkapprox.persist-fraction`` (default :data:`PERSIST_FRACTION`)
    of the memory that would hold it: under a distributed client, the workers' memory limits up to
    their pause line, less what they hold now (:class:`~dkapprox.cluster._memory.WorkerMemory`); on
    dask's local schedulers, or workers without a limit, the memory this machine has available. An
    array whose row sizes are unknown is never persisted (its size is unknown).
    """
    import dask
    import psutil

    from .cluster._memory import WorkerMemory, active_client

    fraction = float(dask.config.get("dkapprox.persist-fraction", PERSIST_FRACTION))
    nbytes = X.nbytes
    if not np.isfinite(nbytes) or fraction <= 0:
        return X, False
    client = active_client()
    workers = WorkerMemory.of(client) if client is not None else None
    if workers is not None:
        room = workers.workers * (workers.limit * workers.pause - workers.in_use)
    else:
        room = psutil.virtual_memory().available
    if nbytes > fraction * room:
        return X, False
    return X.persist(), True


def compute(*objs, arrays=()):
    """Compute several lazy objects in one pass over the data.

    Under a distributed client, a task whose workers died repeatedly
    (distributed's ``KilledWorker``, nearly always memory) raises
    :class:`~dkapprox.errors.WorkerMemoryError` naming its block and the
    workers' memory limit. ``arrays`` are the dask arrays whose blocks the
    objects' tasks compute or read (a fit's input, its features): their layers
    declare their chunks, so the error can name the block a dead task worked
    on. A graph cut into delayed blocks (a fit's reductions) has lost them.
    Each pass shows its progress in Jupyter or on a terminal
    (:func:`dkapprox._progress.compute`; ``DKAPPROX_PROGRESS=0`` turns it off).
    """
    from .cluster._memory import explain_worker_deaths  # imported here: distributed only when computing

    with explain_worker_deaths(objs=objs + tuple(arrays)):
        return _progress.compute(*objs)
