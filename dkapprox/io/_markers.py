"""The blocks' records in an output store: one object a block when it is written, packed by the workers.

Under ``OUT/blocks_done`` (the uint64 Zarr array of the blocks' checksums, chunks (1, 1))::

    c/<i>/<j>      block (i, j)'s checksum, 8 little-endian bytes: the array's own chunk, written
                   right after the block's features chunk, before its task reports the block done
    log/<name>     b"DKLOG001" then (i, j, checksum) triples of little-endian uint64: blocks a worker
                   packed, their single objects deleted after the log was stored

A block is recorded when either holds it. Why two forms: one object a block keeps the crash promise
(a block reported done has its record, whatever is killed when), but a resume has to list them, and at
10^5 blocks that listing was the resume's whole cost (5 x 10^4 markers: 67 s on the suite's S3 server,
which reads the whole bucket for each page of 1,000 keys; a hundred LIST pages on S3). So each worker
keeps the records it wrote in a :class:`Journal` and, every ``every`` blocks, stores them as one log
object and then deletes their single objects (on S3 one DeleteObjects request). A killed run leaves at
most ``every`` single objects per worker beside its logs; a crash between the log and the deletes
leaves a block in both, which reads the same.

Readers list the single objects first and the logs second (:func:`read`): a block packed while it is
being read is seen either way, since its log is stored before its single object is deleted.
A refresh clears the blocks it rewrites from both (:func:`clear_rows`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid

import numpy as np

from ..errors import InputDataError

BLOCKS_DONE = "blocks_done"  # the array's name in the output group
LOG = "log"
MAGIC = b"DKLOG001"
EVERY = 1000  # blocks a worker packs into one log object (dask config "dkapprox.io.markers-per-log")
log = logging.getLogger(__name__)


def markers_per_log() -> int:
    """How many records a worker packs into one log (0: never pack), from dask's config."""
    import dask

    value = dask.config.get("dkapprox.io.markers-per-log", EVERY)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"dkapprox.io.markers-per-log must be an int >= 0 (0: one object a block, never "
                         f"packed), got {value!r}")
    return value


class Journal:
    """The records a worker wrote and has not packed yet; :meth:`add` hands back a full batch to pack.

    Pickled empty: each process that unpickles a writer starts its own (a worker fetches the writer
    once, and its tasks share it). Losing one (a worker killed, a writer spilled) loses nothing: the
    single objects of its records stay until a log holds them.
    """

    def __init__(self, every=EVERY):
        self.every = int(every)
        self._lock = threading.Lock()
        self._entries: list = []

    def __reduce__(self):
        return Journal, (self.every,)

    def add(self, index, marker):
        """Note block ``index`` recorded with ``marker``; the batch to pack now, or None."""
        if self.every <= 0:
            return None
        with self._lock:
            self._entries.append((int(index[0]), int(index[1]), int(marker)))
            if len(self._entries) < self.every:
                return None
            batch, self._entries = self._entries, []
        return batch


def encode(entries) -> bytes:
    return MAGIC + np.asarray(entries, dtype="<u8").reshape(-1, 3).tobytes()


def decode(data: bytes, where) -> np.ndarray:
    """The (n, 3) uint64 triples of a log object; a foreign or cut one is refused, naming it."""
    if not data.startswith(MAGIC) or (len(data) - len(MAGIC)) % 24:
        raise InputDataError(f"{where}: not a dkapprox block log ({len(data)} bytes)")
    return np.frombuffer(data, dtype="<u8", offset=len(MAGIC)).reshape(-1, 3)


async def pack(done, batch):
    """Store ``batch`` ((i, j, checksum) of blocks whose single objects exist) as one log, then delete
    those single objects. ``done`` is the blocks_done zarr.Array the writer holds."""
    await _store_log(done, batch)
    keys = [done.metadata.encode_chunk_key((i, j)) for i, j, _ in batch]
    await _delete(done.store_path.store, [f"{done.store_path.path}/{k}".strip("/") for k in keys])


async def _store_log(done, entries):
    from zarr.core.buffer import default_buffer_prototype

    await (done.store_path / f"{LOG}/{uuid.uuid4().hex}").set(
        default_buffer_prototype().buffer.from_bytes(encode(entries)))


async def _delete(store, keys):
    """Delete ``keys`` of a zarr store: one bulk request per 1,000 on S3 (s3fs), one unlink each on disk."""
    if not keys:
        return
    fs = getattr(store, "fs", None)
    if fs is not None and getattr(fs, "async_impl", False):
        root = getattr(store, "path", "").rstrip("/")
        try:
            await fs._rm([f"{root}/{k}" if root else k for k in keys])
        except FileNotFoundError:  # nothing left to delete
            pass
        return
    await asyncio.gather(*(store.delete(k) for k in keys))


# -- reading and clearing -----------------------------------------------------------------------


def read(group, numblocks, *, values=False) -> np.ndarray:
    """(row blocks, column blocks) uint64 of the output ``group`` whose layout has ``numblocks``:
    each recorded block's checksum (``values``) or 1, else 0.

    Two listings (the single objects, then the logs) and one GET per log; with ``values`` also one
    GET per single object (a finished job leaves fewer than ``every`` per worker).
    """
    from zarr.core.sync import sync

    numblocks = tuple(int(n) for n in numblocks)
    if _in_icechunk(group):  # the records are chunks a snapshot's manifest holds inline: read them as the array
        found = np.asarray(group[BLOCKS_DONE][...], dtype=np.uint64)
        return found if values else (found != 0).astype(np.uint64)
    found = np.zeros(numblocks, dtype=np.uint64)
    singles, logs = _listed(group)
    if values and singles:
        blobs = sync(_get_all(group.store, [key for key, _ in singles]))
        for (key, index), blob in zip(singles, blobs):
            if blob is None:  # packed meanwhile: its log is listed below
                continue
            index = _checked(index, numblocks, key)
            raw = len(blob) == 8  # as ensure_arrays makes them; another codec is decoded by zarr
            found[index] = int(np.frombuffer(blob, dtype="<u8")[0]) if raw else group[BLOCKS_DONE][index]
    else:
        for key, index in singles:
            found[_checked(index, numblocks, key)] = 1
    for key, triples in zip(logs, sync(_get_all(group.store, logs))):
        if triples is None:  # replaced meanwhile by a refresh, which stored its successor first
            continue
        for i, j, marker in decode(triples, key):
            index = _checked((int(i), int(j)), numblocks, key)
            if not (values and found[index]):
                found[index] = marker if values else 1
    return found


def clear_rows(group, rows):
    """Unrecord every block of the row blocks ``rows`` (a refresh rewrites them): logs holding any are
    stored again without them (the new one first), then the old logs and the single objects go."""
    from zarr.core.sync import sync

    rows = {int(r) for r in rows}
    if not rows:
        return
    singles, logs = _listed(group)
    stale = [key for key, (i, _) in singles if i in rows]
    done = group[BLOCKS_DONE]
    for key, data in zip(logs, sync(_get_all(group.store, logs))):
        if data is None:
            continue
        triples = decode(data, key)
        keep = triples[~np.isin(triples[:, 0], list(rows))]
        if len(keep) == len(triples):
            continue
        if len(keep):
            sync(_store_log(done, keep))
        stale.append(key)
    sync(_delete(group.store, stale))


def _in_icechunk(group) -> bool:
    return type(getattr(group.store, "session", None)).__module__.split(".")[0] == "icechunk"


def _listed(group):
    """([(key, (i, j))] of the single objects, [key] of the logs), keys from the store's root; the
    singles listed first (see the module's docstring)."""
    from ._identity import list_entries

    prefix = f"{group.path}/{BLOCKS_DONE}".strip("/")
    singles = []
    for key, size, _ in list_entries(group.store, f"{prefix}/c")[0]:
        parts = key.split("/")
        if len(parts) == 2 and size and parts[0].isdigit() and parts[1].isdigit():
            singles.append((f"{prefix}/c/{key}", (int(parts[0]), int(parts[1]))))
    logs = [f"{prefix}/{LOG}/{key}" for key, size, _ in list_entries(group.store, f"{prefix}/{LOG}")[0]
            if "/" not in key and size]
    return singles, logs


def _checked(index, numblocks, key):
    if index[0] >= numblocks[0] or index[1] >= numblocks[1]:
        raise InputDataError(f"{key}: a record of block {index}; the layout has {numblocks} blocks")
    return index


async def _get_all(store, keys, *, at_once=64):
    """The bytes of each key (None where it is gone), ``at_once`` requests in flight."""
    from zarr.core.buffer import default_buffer_prototype

    gate = asyncio.Semaphore(at_once)

    async def one(key):
        async with gate:
            buf = await store.get(key, prototype=default_buffer_prototype())
        return None if buf is None else buf.to_bytes()

    return await asyncio.gather(*(one(k) for k in keys))
