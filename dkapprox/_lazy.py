"""Lazy input in, results out: the layer between the estimators and the engine.

:mod:`dkapprox._graph` builds dask graphs and knows nothing above it. This
module wraps it where an estimator meets the outside world:

- a Zarr array given to an estimator is opened by :mod:`dkapprox.io` (its
  metadata checked) before the engine ever sees it (:func:`as_dask`);
- a fit's compute runs inside :func:`dkapprox.cluster.explain_worker_deaths`,
  so that workers dying on a block become one clear error (:func:`compute`),
  with a progress display where a person is watching (:mod:`dkapprox._progress`).
"""

from __future__ import annotations

import dask.array as da

from . import _progress

__all__ = ["as_dask", "compute", "is_lazy", "targets_as_dask"]


def is_lazy(X) -> bool:
    """True for dask arrays and zarr arrays (which are opened lazily as dask)."""
    return isinstance(X, da.Array) or _is_zarr(X)


def _is_zarr(X) -> bool:
    return type(X).__module__.startswith("zarr") and hasattr(X, "chunks")


def as_dask(X) -> da.Array:
    """A dask array for a dask or zarr array; a zarr array is checked and aligned to its chunks."""
    if isinstance(X, da.Array):
        return X
    if _is_zarr(X):
        from .io._zarr_store import open_array  # imported here: zarr is imported only when used

        return open_array(X)
    raise TypeError(f"expected a dask or zarr array, got {type(X).__name__}")


def targets_as_dask(y) -> da.Array:
    """Targets (1-D or 2-D) of a dask or zarr array as a dask array.

    A 2-D zarr array goes through :func:`as_dask` (and dkapprox.io's checks of
    a samples x features array); a 1-D one (a target vector) is opened lazily
    as it is, aligned to its zarr chunks.
    """
    if _is_zarr(y) and len(y.shape) == 1:
        return da.from_zarr(y)
    return as_dask(y)


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
