"""Store features to Zarr: aligned, planned, resumable after any kill, marked complete last.

The write is one task per dask block. Each task writes its block as exactly
one Zarr chunk (the store's chunks *are* the dask blocks, made regular first;
a full uncompressed block as its bytes, past zarr's codec pipeline), so no two
tasks ever touch one chunk, and then records the block in ``blocks_done``.
A rerun of the same job (same plan, same layout, same dkapprox version)
computes and writes only the blocks not recorded; the
group's status turns ``"complete"`` only after every block is recorded.

Output codec: none. Random features barely compress (zstd saves 8-9% of the
bytes of RBF or Gaussian-projection features) while it halves the write rate
(measured here for float32 RBF(1024) features: 1.3 GB/s uncompressed, 0.7 GB/s
with zstd), and featurizing to Zarr is I/O-bound. Pass ``compression="zstd"``
for outputs that do compress (e.g. additive-chi2 features of sparse data).

Overlapping runs: before its first block a write takes a lease in the store
(``OUT/dkapprox-lease.json``, see :mod:`dkapprox.io._lease`), renews it while
it writes, and gives it back at finalize or when it fails. A second run of
the same job meanwhile raises :class:`~dkapprox.errors.StoreBusyError` (or
waits, ``wait=``); a run killed on this host leaves a lease the next run
takes over at once, one killed elsewhere a lease that expires.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace

import numpy as np

from .. import engine
from ..errors import IncompleteStoreError, InputDataError, InputMissingError, TemporaryFailure
from ._common import canonical_json, package_version, utc_now
from ._icechunk import input_of, is_icechunk
from ._icechunk_output import address_of, write_icechunk
from ._icechunk_session import session_target, write_session
from ._identity import compare, has_listing, identify, listing_digest, save_listing
from ._lease import acquire
from ._location import Location, is_inside, locate, location_of_node
from ._markers import Journal, markers_per_log, pack
from ._output_store import changed_error, ensure_arrays, open_or_create, remove_partial_files
from ._probe import require_shared
from ._zarr_store import ATTRIBUTE, OUTPUT_FORMAT, OUTPUT_KIND, blocks_done, checksum, output_attributes

COMPRESSIONS = (None, "zstd")
log = logging.getLogger(__name__)
# packages whose errors mean the store could not be reached (botocore's ConnectionClosedError is no OSError)
_TRANSPORTS = frozenset({"botocore", "aiobotocore", "aiohttp", "s3fs", "fsspec", "urllib3", "requests"})

__all__ = ["PendingWrite", "WriteReport", "write_features"]


@dataclass(frozen=True)
class WriteReport:
    """What a write did. ``blocks_written + blocks_skipped == blocks_total``.

    ``blocks_skipped`` were recorded by an earlier run and left alone;
    ``seconds`` runs from the call of :func:`write_features` to the end of
    the write (of ``finalize()`` with ``compute=False``); ``resumed`` says
    that an unfinished store of the same job was continued.

    Examples
    --------
    >>> import tempfile, dask.array as da
    >>> from dkapprox.io import write_features
    >>> report = write_features(da.ones((10, 2), chunks=(5, 2)), tempfile.mkdtemp() + "/z.zarr", plan={})
    >>> {k: report.to_dict()[k] for k in ("blocks_total", "blocks_written", "shape", "chunks", "dtype")}
    {'blocks_total': 2, 'blocks_written': 2, 'shape': [10, 2], 'chunks': [5, 2], 'dtype': 'float64'}
    """

    path: str
    blocks_total: int
    blocks_written: int
    blocks_skipped: int
    seconds: float
    shape: tuple
    chunks: tuple
    dtype: str
    resumed: bool
    refreshed: bool = False
    snapshot: str | None = None  # an Icechunk output: the snapshot the output branch now shows
    commits: int | None = None  # an Icechunk output: commits this run made
    commit_seconds: float | None = None  # an Icechunk output: from the last commit to the branch showing it

    def to_dict(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if v is not None}
        out["shape"], out["chunks"] = list(self.shape), list(self.chunks)
        return out


@dataclass(frozen=True)
class PendingWrite:
    """A planned write: compute ``delayed`` (any scheduler), then call ``finalize()``.

    Unpacks as ``delayed, finalize = write_features(..., compute=False)``.
    ``delayed`` computes to the number of blocks it wrote; ``finalize()``
    checks that every block is recorded, marks the store complete and returns
    a :class:`WriteReport` (it raises :class:`~dkapprox.errors.IncompleteStoreError`
    if blocks are missing, e.g. after a cancelled compute: rerun the job).
    ``finalize(written)`` with the count ``delayed`` computed to (or what
    ``dkapprox.cluster.run(..., parts=)`` returned) skips listing every marker
    again when it equals ``blocks_to_write``: each write returned only after
    its marker was stored, and the blocks before them were listed when the
    write was planned (the listing is a LIST page per 1,000 blocks on S3).
    ``memory`` is what was checked against the workers of the distributed
    client active when it was planned (None without one):
    ``dkapprox.cluster.run(client, delayed, memory=pending.memory, parts=pending.parts,
    spread=pending.spread)`` then reports workers that died as a
    ``WorkerMemoryError`` naming the block and the rows per block that fit,
    and copies a large state to every worker in a tree first (``spread``). ``parts`` are the keys of the
    block writes: run so, each is released as it finishes, and a worker lost
    later makes no block already written be written again (``delayed``, the
    count, holds every write's result until the last one is there).

    Examples
    --------
    >>> import tempfile, dask.array as da
    >>> from dkapprox.io import write_features
    >>> delayed, finalize = write_features(da.ones((10, 2), chunks=(5, 2)), tempfile.mkdtemp() + "/z.zarr",
    ...                                    plan={}, compute=False)
    >>> delayed.compute()  # or client.compute(delayed) with distributed.progress
    2
    >>> finalize().blocks_written
    2
    """

    delayed: object
    finalize: Callable[..., WriteReport]
    path: str
    blocks_total: int
    blocks_to_write: int
    memory: object = None  # dkapprox.cluster's MemoryCheck: pass to dkapprox.cluster.run(..., memory=)
    lease: object = None  # the store's lease (dkapprox.io._lease.Lease), held until finalize or release
    parts: tuple = ()  # keys of the block writes in delayed's graph (dkapprox.cluster.run(..., parts=))
    spread: tuple = ()  # keys of large fitted states, copied to every worker first (dkapprox.cluster.run(..., spread=))

    def __iter__(self):
        return iter((self.delayed, self.finalize))

    def release(self):
        """Give the store's lease back without finishing (after a failed compute): a rerun need not wait.

        ``finalize()`` releases it itself once the store is complete.
        """
        if self.lease is not None:
            self.lease.release()


@dataclass(frozen=True)
class BlockWriter:
    """Writes one block as its own chunk, then its record (shipped to the graph once).

    A block whose record already holds its checksum is left alone: the task is a retry (its worker
    died after the record was stored, before the scheduler heard the task finish), and the block's
    chunk, stored before its record, holds these very bytes. A ``fresh`` store is not asked (a missing
    key in an Icechunk fork costs 4 ms to read).

    Every ``journal.every`` blocks a worker writes, it packs their records into one log object and
    deletes their single ones (:mod:`dkapprox.io._markers`), so that a resume lists a few objects
    per thousand blocks. A pack that fails is logged and dropped: the single records stay.
    """

    features: object  # zarr.Array opened for writing
    done: object  # zarr.Array of uint64, chunks (1, 1): the block's checksum once written
    lease: object = None  # dkapprox.io._lease.LeaseCheck: raises LeaseLostError unless the lease is still ours
    journal: Journal = field(default_factory=lambda: Journal(0), compare=False)  # this worker's unpacked records
    fresh: bool = False  # the store holds no earlier try of the block (an Icechunk fork copy made for this try)
    lend: Callable | None = None  # a chunk's bytes -> the store's Buffer of them (default: zarr's own)

    def __call__(self, block, index):
        i, j = index
        rows, cols = self.features.chunks
        expected = (min(rows, self.features.shape[0] - i * rows), min(cols, self.features.shape[1] - j * cols))
        if block.shape != expected:
            raise RuntimeError(f"block {index} has shape {block.shape}, its dask chunks declare {expected}")
        if self.lease is not None:
            self.lease()  # never write under another run's lease
        region = (slice(i * rows, i * rows + expected[0]), slice(j * cols, j * cols + expected[1]))
        marker = checksum(block)
        if _raw_markers(self.done):
            from zarr.core.sync import sync

            sync(self._write(region, block, (i, j), marker))
        elif self.fresh or self.done[i, j] != marker:  # a retried task whose first try stored it: nothing to do
            self.features[region] = block
            self.done[i, j] = marker  # after the data: a marker never precedes its block

    async def _write(self, region, block, index, marker):
        """The block's record read, its chunk, then its record's 8 bytes, in one trip to zarr's event loop
        (two trips, each through the codec pipeline, cost 1.5 ms a block: as much as a 200 KiB chunk's
        write); then, every ``journal.every`` blocks, the worker's records packed."""
        from zarr.core.buffer import default_buffer_prototype

        raw = np.array([marker], dtype="<u8").tobytes()
        record = self.done.store_path / self.done.metadata.encode_chunk_key(index)
        stored = None if self.fresh else await record.get(prototype=default_buffer_prototype())
        if stored is not None and stored.to_bytes() == raw:  # a retried task whose first try stored the block
            return
        chunk = _raw_chunk(self.features, block)
        if chunk is None:
            await self.features._async_array.setitem(region, block)
        else:  # zarr's codec pipeline would copy the block three times
            await (self.features.store_path / self.features.metadata.encode_chunk_key(index)).set(
                (self.lend or default_buffer_prototype().buffer.from_bytes)(chunk))
        await record.set(default_buffer_prototype().buffer.from_bytes(raw))  # after the data: never before it
        batch = self.journal.add(index, marker)
        if batch:
            await self._pack(batch)

    async def _pack(self, batch):
        try:
            if self.lease is not None:
                self.lease()  # a run that lost the store leaves its records as they are
            await pack(self.done, batch)
        except Exception as exc:  # noqa: BLE001 - the single records stay: nothing is lost
            log.warning("packing %d block records of %s failed (%s: %s); they stay one object each",
                        len(batch), self.done.store_path, type(exc).__name__, exc)


def _raw_markers(done) -> bool:
    """True if a marker chunk is its value's 8 little-endian bytes, as ensure_arrays makes it."""
    return tuple(done.chunks) == (1, 1) and np.dtype(done.dtype) == np.uint64 and _plain_little_endian(done)


def _raw_chunk(features, block):
    """The bytes of ``block``'s chunk as zarr would store them (a memoryview), or None where only zarr can
    say: an edge block (zarr pads it with the fill value) or a codec beyond plain little-endian bytes."""
    if tuple(block.shape) != tuple(features.chunks) or not _plain_little_endian(features):
        return None
    data = np.ascontiguousarray(block, dtype=np.dtype(features.dtype).newbyteorder("<"))  # zarr's cast
    return memoryview(data).cast("B")


def _plain_little_endian(array) -> bool:
    """True if a chunk of ``array`` is its values' C-order little-endian bytes (Zarr v3, one bytes codec).

    Read from the metadata document (``to_dict``), not from the codec objects: zarr 3.1 gives
    ``BytesCodec.endian`` as an ``Endian`` enum, zarr 3.3 and newer as a plain string, while the
    document says ``{"name": "bytes", "configuration": {"endian": "little"}}`` in every release.
    """
    meta = array.metadata
    if getattr(meta, "zarr_format", 2) != 3 or np.dtype(array.dtype).kind not in "biuf":
        return False
    codecs = list(meta.to_dict().get("codecs") or ())
    if len(codecs) != 1 or not isinstance(codecs[0], dict):
        return False
    endian = (codecs[0].get("configuration") or {}).get("endian")
    return codecs[0].get("name") == "bytes" and str(getattr(endian, "value", endian)) == "little"


def write_features(features, out, *, plan, overwrite=False, refresh=False, compute=True, allow_inside_input=False,
                   compression=None, storage_options=None, wait=False, lease_ttl=None, sources=(), commit_every=None,
                   group=None):
    """Store a lazy 2-D dask array to a Zarr store at ``out``; rerunnable, never losing blocks.

    Parameters
    ----------
    features : dask.array.Array of shape (n_samples, n_features_out)
        Known chunk sizes, numeric dtype, dense blocks. Irregular row or
        column chunks are first rechunked to the largest chunk, so that every
        dask block is exactly one Zarr chunk.
    out : str or os.PathLike
        Local path or fsspec URL of the output store (a Zarr v3 group, see
        :mod:`dkapprox.io._zarr_store`); or an Icechunk address,
        ``icechunk+file:///path/repo?branch=main&group=features`` (or ``icechunk+s3://bucket/prefix?...``):
        the group is written on a work branch, committed every ``commit_every`` blocks, and the
        branch moves to the finished snapshot once (:mod:`dkapprox.io._icechunk_output`). Or a
        writable Icechunk session without uncommitted changes: the group ``group`` is written into
        it, and the caller commits (:mod:`dkapprox.io._icechunk_session`).
    plan : dict
        JSON-safe description of the job (input path, shape and chunks, model
        fingerprint, estimator parameters, chunking), recorded in the store
        before any block is written. A rerun is a resume only if its plan is
        equal. If ``plan["input"]`` is a path, or a dict with a ``"path"``,
        that store counts as an input for ``allow_inside_input``, as does every
        zarr array found in the graph of ``features``.
    overwrite : bool, default=False
        Replace an existing Zarr store at ``out`` (a dkapprox output of any
        plan, finished or not, or another Zarr store). Paths that are not Zarr
        stores (other than an empty directory) are never deleted.
    compute : bool, default=True
        Write now and return a :class:`WriteReport`; or return a
        :class:`PendingWrite` to compute (e.g. under a distributed client with a
        progress bar) and then finalize.
    allow_inside_input : bool, default=False
        Allow ``out`` inside an input store, or an input inside ``out``.
    compression : {None, 'zstd'}, default=None
        Output codec; none by default (see the module notes for why).
    storage_options : dict, optional
        fsspec options for a URL ``out``.
    wait : bool or float, default=False
        When another run holds the store's lease (it is writing ``out``):
        False raises :class:`~dkapprox.errors.StoreBusyError` at once; True
        waits (up to a day) until that run finishes, dies or its lease
        expires, then goes on (resuming, or refusing a finished store as
        usual); a number waits at most that many seconds.
    lease_ttl : float, optional
        Seconds the store's lease lasts without a heartbeat (renewed every
        quarter of it); default ``$DKAPPROX_LEASE_TTL``, else 90. A run
        killed on another host blocks reruns for at most this long.
    sources : sequence, optional
        Inputs the features are read from that are no Zarr array in their
        graph, e.g. a Parquet dataset (``dkapprox.io._parquet.open_parquet``):
        each has ``loc`` and ``identify(skip=)``, and its identity is recorded
        and compared as a Zarr input's is.
    commit_every : int, optional
        An Icechunk output only: blocks between two commits of the job's work branch (default 256);
        a killed job loses at most these.
    group : str, optional
        An Icechunk session only: the features' group in it (default ``"features"``).

    Returns
    -------
    WriteReport or PendingWrite

    Raises
    ------
    OutputExistsError
        ``out`` is a finished dkapprox output, another Zarr store, or a path
        that is not a Zarr store, and not ``overwrite`` (the last even then).
    ResumeMismatchError
        ``out`` is an unfinished dkapprox output of another plan, layout or
        dkapprox version, and not ``overwrite``.
    UnsharedPathError
        Under a distributed client: ``out`` (or an input) is a local path
        that some worker does not see as the client does (workers on other
        hosts); raised before anything is written.
    StoreBusyError
        Another live run holds ``out``'s lease (the message names its host,
        pid and times), and not ``wait`` (or the wait ran out). Even with
        ``overwrite`` a leased store is never deleted.
    LeaseLostError
        This run's lease could not be renewed before it expired, or another
        run took it over: the write stopped (finished blocks are kept).
    InputDataError
        ``out`` lies inside an input (or an input inside it), or ``features``
        cannot be stored (unknown chunk sizes, sparse blocks, non-numeric).
    WorkerMemoryError
        Under a distributed client: a block cannot fit any worker's memory
        limit (raised before anything is written or computed), or workers died
        repeatedly running it. The message names the block's shape and bytes,
        the workers' memory limit and the rows per block that fit
        (``error.suggested_rows``); finished blocks are kept. A block that
        needs more than a worker's budget but may fit is logged as a warning.

    Examples
    --------
    >>> import tempfile, dask.array as da
    >>> from dkapprox.io import write_features, open_features
    >>> Z = da.ones((1000, 16), chunks=(250, 16), dtype="f4")
    >>> out = tempfile.mkdtemp() + "/z.zarr"
    >>> report = write_features(Z, out, plan={"job": "ones"})
    >>> report.blocks_written, report.blocks_skipped
    (4, 0)
    >>> float(open_features(out).sum().compute())
    16000.0
    """
    from .. import utils
    from ..cluster import active_client, check_memory, explain_worker_deaths, run

    started = time.perf_counter()
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression must be one of {COMPRESSIONS}, got {compression!r}")
    if refresh and overwrite:
        raise ValueError("pass refresh=True or overwrite=True, not both: a refresh keeps what is still right")
    features = _storable(features)
    plan = _json_safe_plan(plan)
    every = markers_per_log()
    session = session_target(out, group) if is_icechunk(out) and not isinstance(out, str) else None
    if group is not None and session is None:
        raise ValueError("group= names the features' group in an Icechunk session; an address names it with "
                         "group= in its text, and a Zarr output store is the group itself")
    icechunk = address_of(out, storage_options) if is_icechunk(out) and session is None else None
    if (icechunk is not None or session is not None) and not compute:
        raise ValueError("an Icechunk output is written through forked sessions merged on the driver: pass "
                         "compute=True (write_features runs the compute under the active distributed client, "
                         "if any)")
    loc = None if session is not None else locate(out, storage_options) if icechunk is None else icechunk.location()
    if not allow_inside_input and icechunk is None and session is None:  # a snapshot read is immutable
        _refuse_inside_input(loc, features, plan)
    memory = check_memory(features)  # before the store is made: a refused job leaves nothing behind
    # workers on other hosts must see a local out (and input) as the client does, or blocks land on their disks
    require_shared(outputs=[loc] if loc is not None else [], inputs=input_locations(features, plan))
    inputs = input_arrays(features) + [(source, source.loc) for source in sources]
    identities = [_identify(z, where, loc) for z, where in inputs]  # one listing each, before any write
    header = {
        "kind": OUTPUT_KIND, "format": OUTPUT_FORMAT, "package_version": package_version(),
        "plan": plan, "layout": _layout(features, compression), "status": "writing", "created": utc_now(),
        "inputs": [i.summary() for i in identities], "inputs_digest": listing_digest(identities),
    }
    shared = SimpleNamespace(BlockWriter=BlockWriter, WriteReport=WriteReport, identify=_identify)
    if session is not None:
        return write_session(features, *session, header=header, inputs=inputs, identities=identities, memory=memory,
                             overwrite=overwrite, refresh=refresh, compression=compression, started=started,
                             writer=shared)
    if icechunk is not None:
        return write_icechunk(features, icechunk, header=header, inputs=inputs, identities=identities, memory=memory,
                              overwrite=overwrite, refresh=refresh, wait=wait, lease_ttl=lease_ttl,
                              compression=compression, started=started, commit_every=commit_every,
                              writer=shared)
    # refusals before any lease is written
    open_or_create(loc, header, identities, overwrite=overwrite, refresh=refresh, dry_run=True)
    lease = acquire(loc, wait=wait, ttl=lease_ttl)
    try:  # again: the holder we waited for may have finished, or the input changed meanwhile
        opened = open_or_create(loc, header, identities, overwrite=overwrite, refresh=refresh)
        group, resumed = opened.group, opened.resumed
        writer = BlockWriter(*ensure_arrays(group, header["layout"], compression), lease=lease.checker(),
                             journal=Journal(every))
        if loc.local:  # a killed write's temporary files (a dead creator's zarr.<uuid>.partial too)
            remove_partial_files(loc.path)
        # a store made just now has no block written: reading its markers is one request per block on S3
        done = blocks_done(group) if resumed else np.zeros(tuple(header["layout"]["numblocks"]), dtype=bool)
    except BaseException:
        lease.release()
        raise
    todo = [tuple(int(i) for i in index) for index in np.argwhere(~done)]
    name = f"dkapprox-write-{uuid.uuid4().hex}"
    lazy = engine.store_blocks(features, writer, todo, name=name)

    def finalize(written=None) -> WriteReport:
        lease.check()
        if loc.local:  # a block write killed during this run (a cancelled worker job) left its temporary file
            remove_partial_files(loc.path)
        report = _finalize(group, loc, header, inputs, identities, blocks_to_write=len(todo), started=started,
                           resumed=resumed, refreshed=opened.refresh, all_written=written == len(todo))
        lease.release()
        return report

    pending = PendingWrite(lazy, finalize, str(loc), int(done.size), len(todo), memory, lease,
                           tuple(engine.written_keys(lazy)), tuple(engine.shipped_states(lazy)))
    if not compute:
        return pending
    try:
        client = active_client()
        if client is not None:  # each write released as it finishes: a lost worker loses none of them
            written = run(client, lazy, memory=memory, parts=pending.parts, spread=pending.spread,
                          progress=utils.where())
        else:
            with explain_worker_deaths(memory, objs=(lazy,)):
                (written,) = utils.compute(lazy)
        return finalize(written)
    finally:
        lease.release()  # done, or failed: a rerun need not wait for it to expire


# -- checks --------------------------------------------------------------------------


def _storable(features):
    import dask.array as da

    if not isinstance(features, da.Array):
        raise TypeError(f"features must be a dask array, got {type(features).__name__}; "
                        "wrap an in-memory array with dask.array.from_array")
    if features.ndim != 2:
        raise InputDataError(f"features must be 2-D, got shape {features.shape}")
    if any(np.isnan(c) for axis in features.chunks for c in axis):
        raise InputDataError("features have unknown chunk sizes (NaN); call features.compute_chunk_sizes() "
                             "first, or keep the rows whole (e.g. no boolean indexing)")
    if engine.is_sparse_meta(features):
        raise InputDataError("features have sparse blocks; a Zarr store holds dense data: use "
                             "features.map_blocks(lambda b: b.toarray(), dtype=features.dtype)")
    if features.dtype.kind not in "biuf":
        raise InputDataError(f"features of dtype {features.dtype} cannot be stored; numbers only")
    if 0 in features.shape:
        raise InputDataError(f"features of shape {features.shape} are empty")
    regular = []
    for axis in features.chunks:
        size = max(axis)
        regular.append(axis if all(c == size for c in axis[:-1]) else size)
    if any(not isinstance(r, tuple) for r in regular):
        features = features.rechunk(tuple(regular))
    return features


def _json_safe_plan(plan):
    import json

    if not isinstance(plan, dict):
        raise TypeError(f"plan must be a dict, got {type(plan).__name__}")
    try:
        return json.loads(canonical_json(plan))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"plan must be JSON-safe (str keys; str, finite numbers, bool, None, lists, "
                        f"dicts): {exc}") from exc


def input_arrays(features):
    """[(zarr array, its Location)] read by ``features``' graph, each once (arrays in memory left out)."""
    import zarr

    found = {}
    for node in engine.graph_constants(features, lambda v: isinstance(v, zarr.Array)):
        pinned = input_of(node)  # an Icechunk snapshot's array: named by its snapshot
        if pinned is not None:
            found.setdefault(pinned.name, (pinned, pinned.loc))
            continue
        loc = location_of_node(node)
        if loc is not None:
            found.setdefault(loc.url, (node, loc))
    return [found[url] for url in sorted(found)]


def input_locations(features, plan) -> list[Location]:
    """Stores the features are read from: zarr arrays in the graph, and ``plan['input']``."""
    found = [loc for _, loc in input_arrays(features)]
    named = plan.get("input")
    if isinstance(named, dict):
        named = named.get("path")
    if isinstance(named, str) and named:
        found.append(locate(named))
    return found


def _identify(z, where, out):
    """The input's identity; a listing that fails is named (66 if the input is gone, else temporary)."""
    try:
        return z.identify(skip=out) if hasattr(z, "identify") else identify(z, where, skip=out)
    except FileNotFoundError as exc:
        raise InputMissingError(f"{where}: the input's chunks could not be listed, it is gone ({exc}); "
                                f"nothing was written to {out}") from exc
    except Exception as exc:
        if not isinstance(exc, (OSError, TimeoutError)) and type(exc).__module__.split(".")[0] not in _TRANSPORTS:
            raise
        raise TemporaryFailure(f"{where}: listing the input's chunks failed ({type(exc).__name__}: "
                               f"{' '.join(str(exc).split())}); nothing was written to {out}: rerun") from exc


def _refuse_inside_input(loc, features, plan):
    for source in input_locations(features, plan):
        if is_inside(loc, source) or is_inside(source, loc):
            raise InputDataError(
                f"output {loc} and input {source} overlap (one lies inside the other); "
                "write elsewhere, or pass allow_inside_input=True if you mean it")


def _layout(features, compression):
    chunks = tuple(int(axis[0]) for axis in features.chunks)
    return {"shape": [int(s) for s in features.shape], "chunks": list(chunks),
            "numblocks": [int(n) for n in features.numblocks], "dtype": features.dtype.str,
            "compression": compression}


def _finalize(group, loc, header, inputs, identities, *, blocks_to_write, started, resumed, refreshed,
              all_written=False):
    """Mark the store complete. ``all_written``: this run's every planned write returned (each after its
    marker), so the markers need not be listed again (at 10^5 blocks on the suite's S3 server that
    listing took 289 s)."""
    total = int(np.prod(header["layout"]["numblocks"]))
    missing = 0 if all_written else int(total - blocks_done(group).sum())
    if missing:
        raise IncompleteStoreError(f"{loc}: {missing} of {total} blocks are not written (the compute "
                                   "failed or was cancelled); rerun the same job to write them")
    now = [_identify(z, where, loc) for z, where in inputs]  # did the input change while it was read?
    changes = [c for c in (compare(before, after) for before, after in zip(identities, now)) if not c.same]
    if changes:
        raise changed_error(loc, changes, during=True)
    info = dict(output_attributes(group))
    digest = listing_digest(identities)
    if not has_listing(group, digest):  # a refresh, or a run killed before it was kept: first the listing,
        save_listing(group, identities)  # then the header naming it
    if info.get("status") != "complete" or info.get("inputs_digest") != digest:
        info.update(status="complete", completed=utc_now(), inputs=header["inputs"], inputs_digest=digest,
                    layout=header["layout"])
        info.pop("refreshing", None)
        group.update_attributes({ATTRIBUTE: info})
    layout = header["layout"]
    return WriteReport(
        path=str(loc), blocks_total=total, blocks_written=blocks_to_write,
        blocks_skipped=total - blocks_to_write, seconds=time.perf_counter() - started,
        shape=tuple(layout["shape"]), chunks=tuple(layout["chunks"]), dtype=np.dtype(layout["dtype"]).name,
        resumed=resumed, refreshed=refreshed)
