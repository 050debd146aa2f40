"""Open Zarr arrays as dask arrays, refusing hostile or broken metadata before any graph exists.

Everything here reads metadata only (a few small JSON documents); no chunk is
read until the returned dask array is computed. Every error names the store.

A dkapprox output store is a Zarr v3 group::

    OUT/zarr.json                  group; attributes["dkapprox"]: kind, format, plan, layout, status
    OUT/features/...               the features, (n_samples, n_features_out), chunks = dask blocks
    OUT/blocks_done/...            uint64 (row blocks, column blocks), chunks (1, 1): the block's checksum
                                   (XXH3-64 of its bytes, never 0) once written, 0 (no object) before;
                                   workers pack these records into OUT/blocks_done/log/ objects
                                   (dkapprox.io._markers)
    OUT/input_listing/...          uint8, zstd: the inputs' chunk listings as JSON (dkapprox.io._identity)

``blocks_done[i, j]`` is written right after features block ``(i, j)``, each
in its own key, so a record survives a killed process; the group's status
becomes ``"complete"`` only after every block is recorded. ``verify`` compares
each block with its recorded checksum.
"""

from __future__ import annotations

import json
import math
import os
from contextlib import contextmanager

import numpy as np

from ..errors import DkapproxError, IncompleteStoreError, InputDataError, InputMissingError, TemporaryFailure
from ._icechunk import DEFAULT_GROUP, is_icechunk, parse, session_node
from ._icechunk import open_node as open_icechunk
from ._location import Location, locate, location_of_node, missing_bucket, redact
from ._markers import BLOCKS_DONE, read  # noqa: F401 - BLOCKS_DONE: named here too, as FEATURES is

FEATURES = "features"
ATTRIBUTE = "dkapprox"
OUTPUT_KIND = "features"
OUTPUT_FORMAT = 1
MAX_METADATA_BYTES = 16 * 2**20  # a zarr.json larger than this is refused unread
_METADATA_FILES = ("zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata")
_NUMERIC_KINDS = "biuf"

__all__ = ["open_array", "open_features"]


def open_array(source, component=None, *, max_chunks=10_000_000, max_chunk_bytes=2**32,
               storage_options=None):
    """A 2-D Zarr array (v3 or v2) as a dask array whose blocks are the Zarr chunks.

    Only metadata is read, and it is checked before any dask graph is built:
    a store declaring 10**12 chunks is refused at once, without allocating.

    Parameters
    ----------
    source : str, os.PathLike, zarr.Array or zarr.Group
        A local path or fsspec URL (``s3://bucket/x.zarr``, ``file://...``) of a
        Zarr array, or of a group with ``component``; or an open zarr node. A
        dkapprox output store (see :func:`dkapprox.io.write_features`) opens as
        its features, and only when it is complete.
    component : str, optional
        Path of the array inside the group ``source``.
    max_chunks : int, default=10_000_000
        Refuse arrays with more chunks than this (each chunk is one task).
    max_chunk_bytes : int, default=2**32
        Refuse arrays whose single chunk is larger than this when decoded.
    storage_options : dict, optional
        fsspec options for URLs (credentials, endpoint).

    Returns
    -------
    dask.array.Array of shape (n_samples, n_features)

    Raises
    ------
    InputMissingError
        Nothing (or no array ``component``) at ``source``.
    InputDataError
        Broken metadata, not 2-D, a non-numeric dtype (object, string, complex,
        datetime, structured), too many or too large chunks, or a group
        without ``component``.

    Examples
    --------
    >>> import tempfile, zarr, numpy as np
    >>> from dkapprox.io import open_array
    >>> path = tempfile.mkdtemp() + "/x.zarr"
    >>> zarr.create_array(path, shape=(1000, 8), chunks=(250, 8), dtype="f4")[:] = 1.0
    >>> open_array(path).chunks
    ((250, 250, 250, 250), (8,))
    """
    node, where = open_node(source, component, storage_options=storage_options)
    if _is_group(node):
        if output_attributes(node) is not None and component is None:
            require_complete(node, where)
            node, where = node[FEATURES], f"{where}/{FEATURES}"
        else:
            arrays = sorted(name for name, _ in node.arrays())
            raise InputDataError(
                f"{where}: is a Zarr group, not an array; pass the array's name as component "
                f"(arrays here: {', '.join(arrays) if arrays else 'none'}).")
    else:
        output = _output_holding(node)
        if output is not None:
            require_complete(output, where)
    return zarr_as_dask(node, where, max_chunks=max_chunks, max_chunk_bytes=max_chunk_bytes)


def open_target(source, *, storage_options=None):
    """Targets as a dask array: a 1-D Zarr array (one per sample) or a 2-D one (samples x targets).

    The command line's ``--target`` (``dkapprox kernel-ridge``); checked as :func:`open_array`
    checks a samples x features array (metadata only, numeric, sane chunks), read lazily. An
    array inside a group is named by its path (``data.zarr/y``).
    """
    node, where = open_node(source, storage_options=storage_options)
    if _is_group(node):
        arrays = sorted(name for name, _ in node.arrays())
        raise InputDataError(f"{where}: is a Zarr group, not an array of targets; name the array inside it "
                             f"(arrays here: {', '.join(arrays) if arrays else 'none'}), e.g. {where}/y")
    return zarr_as_dask(node, where, ndims=(1, 2))


def open_features(path, *, allow_incomplete=False, storage_options=None, group=None):
    """The features of a dkapprox output store as a dask array.

    Parameters
    ----------
    path : str, os.PathLike or icechunk.Session
        A store written by :func:`dkapprox.io.write_features`: a path or URL, an Icechunk address
        (``icechunk+file:///repo?branch=main&group=features``), or an open Icechunk session.
    allow_incomplete : bool, default=False
        Open a store whose job has not finished (died or still running);
        blocks not yet written read as the fill value (NaN for floats).
    group : str, optional
        An Icechunk session only: the features' group in it (default ``"features"``); an address
        names it with ``group=``.

    Raises
    ------
    IncompleteStoreError
        The job that writes the store has not finished (and not allow_incomplete).
    InputDataError
        ``path`` is not a dkapprox output store.

    Examples
    --------
    >>> import tempfile, dask.array as da
    >>> from dkapprox.io import open_features, write_features
    >>> out = tempfile.mkdtemp() + "/z.zarr"
    >>> pending = write_features(da.ones((100, 4), chunks=(50, 4)), out, plan={}, compute=False)
    >>> open_features(out)
    Traceback (most recent call last):
    ...
    dkapprox.errors.IncompleteStoreError: ...: incomplete dkapprox output (0 of 2 blocks written, ...
    >>> pending.delayed.compute()
    2
    >>> open_features(out, allow_incomplete=True).shape
    (100, 4)
    >>> report = pending.finalize()
    >>> float(open_features(out).sum().compute())
    400.0
    """
    session = is_icechunk(path) and not isinstance(path, str)
    if group is not None and not session:
        raise ValueError("group= names the features' group in an Icechunk session; an address names it with "
                         "group= in its text, and a Zarr output store is the group itself")
    component = (group or DEFAULT_GROUP) if session else None
    node, where = open_node(path, component, storage_options=storage_options, kind="features")
    if not _is_group(node) or output_attributes(node) is None:
        raise InputDataError(f"{where}: not a dkapprox output store (no '{ATTRIBUTE}' attributes of "
                             f"kind '{OUTPUT_KIND}'); use dkapprox.io.open_array for other Zarr arrays.")
    if not allow_incomplete:
        require_complete(node, where)
    return zarr_as_dask(node[FEATURES], f"{where}/{FEATURES}", max_chunks=math.inf, max_chunk_bytes=math.inf)


# -- opening ---------------------------------------------------------------------


@contextmanager
def reading(where):
    """Turn whatever zarr, fsspec or json raise on bad metadata into dkapprox errors naming ``where``."""
    try:
        yield
    except DkapproxError:
        raise
    except FileNotFoundError as exc:  # zarr's NodeNotFoundError included
        raise InputMissingError(f"{where}: no Zarr array or group there ({exc})") from exc
    except PermissionError as exc:
        raise InputMissingError(f"{where}: permission denied ({exc})") from exc
    except (ConnectionError, TimeoutError) as exc:
        raise TemporaryFailure(f"{where}: could not reach the store ({exc}); try again") from exc
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, AttributeError,
            NotImplementedError, RecursionError, UnicodeDecodeError) as exc:
        raise InputDataError(f"{where}: broken Zarr metadata ({type(exc).__name__}: {exc})") from exc


def open_node(source, component=None, *, storage_options=None, kind="input"):
    """(zarr node, its name for messages), opened read-only and checked for size."""
    import zarr

    if is_icechunk(source):  # an address pins its version's snapshot now; a session is read as it is
        if not isinstance(source, str):
            return session_node(source, component)
        with reading(redact(source)):
            return open_icechunk(parse(source, storage_options, kind=kind), component)
    if isinstance(source, (zarr.Array, zarr.Group)):
        loc = location_of_node(source)
        where = str(loc) if loc is not None else repr(source)
        if component is None:
            return source, where
        if not _is_group(source):
            raise InputDataError(f"{where}: is an array; component={component!r} needs a group.")
        with reading(f"{where}/{component}"):
            return source[component], f"{where}/{component}"
    loc = locate(source, storage_options)
    where = f"{loc}/{component}" if component else str(loc)
    if loc.local:
        _check_local_metadata(loc, component, where)
    try:
        with reading(where):
            store = loc.store(read_only=True)
            return zarr.open(store=store, path=component or "", mode="r"), where
    except InputMissingError as exc:
        bucket = None if loc.local else missing_bucket(loc)
        if bucket is None:
            raise
        raise InputMissingError(f"{where}: the bucket {bucket!r} does not exist") from exc


def _check_local_metadata(loc: Location, component, where):
    if not os.path.exists(loc.path):
        raise InputMissingError(f"{loc}: no such file or directory")
    if not os.path.isdir(loc.path):
        raise InputDataError(f"{loc}: is a file, not a Zarr store (a directory)")
    folder = os.path.join(loc.path, component) if component else loc.path
    for name in _METADATA_FILES:
        meta = os.path.join(folder, name)
        if os.path.isfile(meta) and os.path.getsize(meta) > MAX_METADATA_BYTES:
            raise InputDataError(f"{where}: {name} is {os.path.getsize(meta):,} bytes, more than the "
                                 f"{MAX_METADATA_BYTES:,} any sane Zarr metadata needs; refused unread")


def _is_group(node) -> bool:
    import zarr

    return isinstance(node, zarr.Group)


def check_zarr_metadata(z, where, *, max_chunks=10_000_000, max_chunk_bytes=2**32, ndims=(2,)):
    """Shape, chunks and dtype of a zarr array, refused unless usable; Python ints only.

    ``ndims``: the dimensions accepted, (2,) for samples x features, (1, 2) for targets.
    """
    with reading(where):
        shape = tuple(int(s) for s in z.shape)
        chunks = tuple(int(c) for c in z.chunks)
        dtype = z.dtype
        stored = _stored_chunk_shape(z)
    if stored is not None and any(c < 1 for c in stored):  # a repair zarr made on opening is refused
        raise InputDataError(f"{where}: invalid shape {shape} or chunks {stored}")
    if len(shape) not in ndims:
        expected = "a 2-D array (samples x features)" if ndims == (2,) else \
            "a 1-D array of targets, or a 2-D one (samples x targets)"
        raise InputDataError(f"{where}: expected {expected}, got {len(shape)}-D with shape {shape}")
    try:
        dtype = np.dtype(dtype)
    except TypeError as exc:
        raise InputDataError(f"{where}: data type {dtype} has no NumPy equivalent") from exc
    if dtype.kind not in _NUMERIC_KINDS:
        raise InputDataError(f"{where}: data type {dtype} is not numeric (object, string, complex, "
                             "datetime and structured types are refused); store float32 or float64")
    if any(s < 0 for s in shape) or any(c < 1 for c in chunks):
        raise InputDataError(f"{where}: invalid shape {shape} or chunks {chunks}")
    n_chunks = math.prod(-(-s // c) for s, c in zip(shape, chunks))
    if n_chunks > max_chunks:
        raise InputDataError(f"{where}: {n_chunks:,} chunks (shape {shape}, chunks {chunks}) exceed "
                             f"max_chunks={max_chunks:,}; rechunk the store or raise max_chunks")
    chunk_bytes = math.prod(chunks) * dtype.itemsize
    if chunk_bytes > max_chunk_bytes:
        raise InputDataError(f"{where}: one chunk {chunks} holds {chunk_bytes:,} bytes, more than "
                             f"max_chunk_bytes={max_chunk_bytes:,}; rechunk the store")
    return shape, chunks, dtype


def _stored_chunk_shape(z):
    """The chunk shape the array's stored metadata document declares, as written (None if not found).

    zarr 3.4 reads a declared chunk length of 0 as 1 and only warns, so ``z.chunks`` no longer tells
    a hostile document from a sane one; the document itself (``zarr.json``'s regular chunk grid, or
    v2's ``.zarray``) still does. A document of another shape (a sharded or irregular grid, a store
    that keeps consolidated metadata only) gives None: zarr's own reading of it stands.
    """
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    v3 = getattr(z.metadata, "zarr_format", 3) == 3
    raw = sync((z.store_path / ("zarr.json" if v3 else ".zarray")).get(prototype=default_buffer_prototype()))
    if raw is None:
        return None
    try:
        document = json.loads(raw.to_bytes())
        declared = (document["chunk_grid"]["configuration"]["chunk_shape"] if v3 else document["chunks"])
        return tuple(int(c) for c in declared)
    except (ValueError, TypeError, KeyError):  # unreadable here: zarr parsed it, its reading stands
        return None


def zarr_as_dask(z, where, *, max_chunks=10_000_000, max_chunk_bytes=2**32, ndims=(2,)):
    """A checked zarr array as a dask array aligned to its chunks (read lazily, lock-free)."""
    import dask.array as da
    from dask.base import tokenize

    shape, chunks, dtype = check_zarr_metadata(z, where, max_chunks=max_chunks, max_chunk_bytes=max_chunk_bytes,
                                               ndims=ndims)
    with reading(where):
        metadata = json.dumps(z.metadata.to_dict(), sort_keys=True, default=str)
    name = f"zarr-{tokenize(where, metadata)}"
    if _on_writable_session(z):  # icechunk pickles no writable session, which is how dask would tokenize it
        z = _session_array(z)
    return da.from_array(z, chunks=chunks, name=name, lock=False, inline_array=False,
                         meta=np.empty((0,) * len(shape), dtype=dtype))


def _on_writable_session(z) -> bool:
    session = getattr(getattr(z, "store", None), "session", None)
    return type(session).__module__.split(".")[0] == "icechunk" and not session.read_only


def _session_array(z):
    """``z`` (on a writable Icechunk session) as a zarr array that dask tokenizes by a name of its own, one an
    opening: its content is the session's uncommitted state, which no snapshot ID names."""
    import uuid
    from dataclasses import dataclass, field

    import zarr

    global _SessionArray
    if _SessionArray is None:
        @dataclass
        class SessionArray(zarr.Array):
            _token: str = field(default="", compare=False)

            def __dask_tokenize__(self):
                return ("icechunk-session-array", self._token)

        _SessionArray = SessionArray
    return _SessionArray(z._async_array, uuid.uuid4().hex)


_SessionArray = None


# -- dkapprox output stores ---------------------------------------------------------


def output_attributes(group):
    """The group's dkapprox attributes if it is a dkapprox output store, else None."""
    info = group.attrs.get(ATTRIBUTE)
    if isinstance(info, dict) and info.get("kind") == OUTPUT_KIND:
        return info
    return None


def blocks_done(group) -> np.ndarray:
    """The (row blocks, column blocks) map of written blocks (bool); all False if not created yet.

    Read from two listings (the blocks' single record objects, then the logs workers packed them
    into) and one read per log, never one read per block: see :mod:`dkapprox.io._markers`.
    """
    return read(group, output_attributes(group)["layout"]["numblocks"]) != 0


def checksum(block) -> int:
    """The checksum a block's marker holds: XXH3-64 of its C-order bytes as stored, never 0 (0 = not written).

    XXH3 hashes at memory speed (17.6 GB/s against zlib's crc32 at 4.1 GB/s on one core, measured on
    a 51 MB float32 block), so checking what is written costs the job almost nothing.
    """
    import xxhash

    data = np.ascontiguousarray(block)
    return xxhash.xxh3_64_intdigest(memoryview(data).cast("B")) or 1


def _output_holding(array):
    """The dkapprox output group whose features ``array`` is (opened through its group), else None."""
    import zarr

    path = getattr(array, "path", "") or ""
    parent, _, name = path.rpartition("/")
    if name != FEATURES:
        return None
    try:
        group = zarr.open_group(store=array.store, path=parent, mode="r")
    except (FileNotFoundError, ValueError, TypeError, KeyError):
        return None
    return group if output_attributes(group) is not None else None


def require_complete(group, where):
    info = output_attributes(group)
    if info.get("status") == "complete":
        return
    with reading(where):
        done = blocks_done(group)
    raise IncompleteStoreError(
        f"{where}: incomplete dkapprox output ({int(done.sum())} of {done.size} blocks written, status "
        f"{info.get('status')!r}): the job died or is still running. Rerun the same job to finish it, "
        "or open it with allow_incomplete=True (missing blocks read as NaN).")
