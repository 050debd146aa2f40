"""Lazy input in, results out: the layer between the estimators and the engine.

:mod:`dkapprox.engine` builds dask graphs and knows nothing above it. This
module wraps it where an estimator meets the outside world:

- every input goes through one door, :func:`as_input`, before validation or
  the engine sees it: NumPy, scipy.sparse, dask, dask DataFrame, Zarr, xarray
  and array-API (CuPy) input become one :class:`Input`, its data in exactly one
  of three forms (in memory, lazy, on a device) and what the output side needs
  back (the frame, the DataArray). Only the door tells the kinds apart;
- a Zarr array is opened by :mod:`dkapprox.io` (its metadata checked) there,
  before the engine ever sees it;
- a dask DataFrame (or Series) becomes a dask array of its values, one
  block per partition, read when the blocks are (:func:`frame_as_dask`), and
  features come back as a lazy dask DataFrame with its index and divisions
  (:func:`as_frame`); dask.dataframe and pandas are imported only by whoever
  made the frame;
- a fit's compute runs inside :func:`dkapprox.cluster.explain_worker_deaths`,
  so that workers dying on a block become one clear error (:func:`compute`),
  with a progress display where a person is watching (:mod:`dkapprox.utils._progress`).
"""

from __future__ import annotations

import dataclasses
import sys
from functools import partial

import dask.array as da
import numpy as np
from dask.base import tokenize

from .. import backends, engine, utils

__all__ = ["FLOAT_DTYPES", "Input", "as_dask", "as_frame", "as_input", "compute", "frame_as_dask"]

_VALUES, _INDEX = "frame-values-", "frame-index-"

#: The dtypes the estimators compute in (scikit-learn's): a dask DataFrame's values are read in the
#: columns' common dtype where it is one of them, else in the first.
FLOAT_DTYPES = (np.float64, np.float32)

MEMORY, LAZY, DEVICE = "memory", "lazy", "device"

#: Packages whose objects that are no array (a dask Bag or Delayed, an xarray Dataset, a Zarr group) are no input.
_READ_BY_KIND = ("dask", "distributed", "xarray", "zarr")


@dataclasses.dataclass(frozen=True, eq=False)
class Input:
    """One input, through the door (:func:`as_input`): its data in one form, and what the output needs back.

    ``data`` is in exactly one of three forms, which ``form`` names:

    - ``"memory"``: what scikit-learn's ``validate_data`` takes, as given: NumPy,
      scipy.sparse, or an array-like it converts itself (a pandas frame, a list),
      so that scikit-learn's messages, dtypes and ``feature_names_in_`` stay its own;
    - ``"lazy"``: a ``dask.array.Array``; a Zarr array already opened and checked by
      :mod:`dkapprox.io`, a dask DataFrame already read (:func:`frame_as_dask`);
    - ``"device"``: an array of another array-API namespace (CuPy), where it lives.

    ``frame`` is the dask DataFrame (or Series) the lazy data was read from (its
    columns' names and dtypes for validation, its index for :func:`as_frame`), and
    ``dataarray`` the ``xarray.DataArray`` the data came in
    (:func:`dkapprox.utils._xarray.wrap_like`); None otherwise. scikit-learn's
    ``set_output`` wraps in-memory results like ``data``.
    """

    data: object
    form: str
    frame: object = None
    dataarray: object = None

    @property
    def lazy(self) -> bool:
        """Whether the data is a dask array (nothing of it is read until it is computed)."""
        return self.form == LAZY

    @property
    def device(self) -> bool:
        """Whether the data is an array of another array-API namespace (CuPy)."""
        return self.form == DEVICE

    @property
    def namespace(self):
        """The array namespace of the data's blocks (a dask array's: its chunks'); None for NumPy and sparse."""
        if self.form == MEMORY:
            return None
        return backends.namespace(self.data._meta if self.lazy else self.data)

    def in_memory(self):
        """The data in memory: computed (one pass) if it is lazy, else as it is."""
        return compute(self.data)[0] if self.lazy else self.data


def as_input(X, *, dtype=FLOAT_DTYPES, targets=False) -> Input:
    """The one door: any input dkapprox takes, as one canonical :class:`Input`.

    Called once at the top of validation (:func:`dkapprox.inputs._validation.check_input`),
    or earlier by an estimator that must know the form first; an :class:`Input`
    passes through as it is. Nothing is computed: a dask DataFrame's values and
    a Zarr array's chunks are read when the blocks are.

    Parameters
    ----------
    X : object
        A NumPy array, a scipy.sparse matrix or another array-like scikit-learn
        takes (memory); a dask array, a dask DataFrame or Series, a Zarr array
        (lazy); an array of another array-API namespace such as CuPy (device); or
        a ``xarray.DataArray`` of any of them.
    dtype : tuple of dtypes or None, default=FLOAT_DTYPES
        The dtypes the caller computes in, as ``check_input``'s ``dtype``: a dask
        DataFrame's values are read in its columns' common NumPy dtype where it
        is one of them, else in ``dtype[0]``, as scikit-learn's ``check_array``
        reads a pandas frame; None: pandas' common dtype (float64 for nullable
        and pyarrow columns).
    targets : bool, default=False
        ``X`` is a target or weight vector: a 1-D Zarr array is opened as it is
        (an input's Zarr array must be 2-D, samples x features).

    Returns
    -------
    Input
        Frozen: ``data``, ``form`` (``"memory"``, ``"lazy"`` or ``"device"``),
        ``frame`` and ``dataarray``.

    Raises
    ------
    TypeError
        For an object of dask, xarray or Zarr that is no array (a dask Bag or
        Delayed, an xarray Dataset, a Zarr group); anything else is in-memory
        input, left to scikit-learn's validation and its messages.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dkapprox.inputs._lazy import as_input
    >>> as_input(np.ones((4, 2))).form
    'memory'
    >>> given = as_input(da.ones((4, 2), chunks=2))
    >>> given.lazy, given.frame is None, given.data.chunks
    (True, True, ((2, 2), (2,)))
    >>> as_input(given) is given
    True
    """
    if isinstance(X, Input):
        return X
    if utils.is_dataarray(X):
        return dataclasses.replace(as_input(X.data, dtype=dtype, targets=targets), dataarray=X)
    if isinstance(X, da.Array):
        return Input(X, LAZY)
    if _is_dataframe(X):
        return Input(frame_as_dask(X, dtype=_frame_dtype(X, dtype)), LAZY, frame=X)
    if _is_zarr(X):
        return Input(_open_zarr(X, targets), LAZY)
    if _is_other_kind(X):
        raise TypeError(
            f"dkapprox does not read a {type(X).__module__}.{type(X).__qualname__}: give a NumPy array, a "
            "scipy.sparse matrix, a dask array or DataFrame, a Zarr array, an xarray.DataArray (a Dataset's "
            "variable: ds['name']) or an array of an array-API namespace (CuPy).")
    return Input(X, MEMORY if backends.namespace(X) is None else DEVICE)


def as_dask(X) -> da.Array:
    """The lazy data of ``X`` (:func:`as_input`): a dask or Zarr array, a dask DataFrame's values, for scripts."""
    given = as_input(X, dtype=None)
    if not given.lazy:
        raise TypeError(f"expected a dask or zarr array, got {type(X).__name__}")
    return given.data


def _is_dataframe(X) -> bool:
    """True for a dask DataFrame or Series; never imports dask.dataframe (a frame's maker did)."""
    dd = sys.modules.get("dask.dataframe")
    kinds = tuple(kind for kind in (getattr(dd, "DataFrame", None), getattr(dd, "Series", None)) if kind)
    return bool(kinds) and isinstance(X, kinds)


def _is_other_kind(X) -> bool:
    """An object of dask, xarray or Zarr that is no array: a Bag, a Delayed, a Dataset, a group."""
    if type(X).__module__.partition(".")[0] not in _READ_BY_KIND:
        return False
    return not (hasattr(type(X), "__array__") and hasattr(X, "shape"))  # the type's: a Delayed answers any name


def _is_zarr(X) -> bool:
    return type(X).__module__.startswith("zarr") and hasattr(X, "chunks")


def _open_zarr(z, targets):
    """A Zarr array as dask: checked by dkapprox.io as samples x features; a 1-D target vector as it is."""
    if targets and len(z.shape) == 1:
        return engine.from_zarr(z)
    from ..io import open_array

    return open_array(z)


def _frame_dtype(X, dtype):
    """The dtype a dask DataFrame's values are read in (:func:`as_input`'s ``dtype``); None: pandas' own."""
    dtypes = list(X.dtypes) if X.ndim == 2 else [X.dtype]
    try:
        common = np.result_type(*dtypes) if dtypes and all(isinstance(d, np.dtype) for d in dtypes) else None
    except TypeError:  # no common dtype (dates beside numbers): validation refuses the columns by name
        common = np.dtype(object)
    if dtype is None:
        return common
    wanted = [np.dtype(d) for d in dtype]
    return common if common is not None and common in wanted else wanted[0]


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
    return engine.array_from_graph(graph, values, chunks, np.empty((0,) * (1 + len(tail)), dtype=dtype))


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

    from ..cluster import WorkerMemory, active_client

    fraction = float(dask.config.get("dkapprox.persist-fraction", PERSIST_FRACTION))
    # from the shape: array expressions have no Array.nbytes; NaN where a row size is unknown
    nbytes = float(np.prod(X.shape, dtype=np.float64)) * X.dtype.itemsize
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
    (:func:`dkapprox.utils._progress.compute`; ``DKAPPROX_PROGRESS=0`` turns it off).
    """
    from ..cluster import explain_worker_deaths

    with explain_worker_deaths(objs=objs + tuple(arrays)):
        return utils.compute(*objs)
