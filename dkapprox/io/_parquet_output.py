"""Features to a Parquet dataset the ETL can join back: one part a block, key columns passed through.

The output is a folder (a key prefix on an object store)::

    OUT/part-000000.parquet     block 0's rows: the features (columns named by get_feature_names_out),
    OUT/part-000001.parquet     then the kept columns, in the input's row order
    ...
    OUT/_SUCCESS                written last, once every part is there and the input did not change
    OUT/_dkapprox/job.json      the job: plan, layout, package version, the input's identity
    OUT/_dkapprox/input.json    the input's full identity (its file listing), compared by a rerun
    OUT/_dkapprox/done/part-000000.json   a part's record: rows, bytes, checksum of its features
    OUT/_dkapprox/dkapprox-lease.json     the lease of the run writing it (:mod:`dkapprox.io._lease`)

Readers (pyarrow, dask, pandas, Spark) skip every path with a part starting with ``_`` or ``.``: they
see the parts only. A part is never visible half written: on a local disk it is written to
``OUT/_tmp-part-NNNNNN.<random>.parquet`` and renamed into place (atomic) when complete; on S3 its
key is written directly (an object appears only when its single PUT or multipart upload completes);
on other fsspec filesystems it is written under the temporary name and moved. Its record is written
after the part, so a part with a record is complete; a part without one (the run killed between the
two) is written again, to the same bytes. A rerun of the same job (same plan, layout, dkapprox
version and input identity) writes only the parts without a record; another job, or a changed input,
is refused (``overwrite`` starts over). ``_SUCCESS`` says the dataset is whole.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from dataclasses import dataclass

import numpy as np

from .. import engine
from ..errors import (
    IncompleteStoreError,
    InputChangedError,
    InputDataError,
    OutputExistsError,
    ResumeMismatchError,
)
from ._common import canonical_json, package_version, utc_now
from ._identity import InputIdentity, compare, listing_digest
from ._lease import LEASE_PREFIX, acquire
from ._location import is_inside, locate
from ._probe import require_shared
from ._zarr_store import checksum

log = logging.getLogger(__name__)

KIND, FORMAT = "dkapprox-parquet-features", 1
STATE = "_dkapprox"
SUCCESS = "_SUCCESS"
TMP_PREFIX = "_tmp-"

__all__ = ["ParquetPartWriter", "write_parquet_features"]


def part_name(i) -> str:
    return f"part-{int(i):06d}.parquet"


@dataclass(frozen=True)
class ParquetPartWriter:
    """Writes one row block as one part (features, then the kept columns), then its record.

    Shipped to the graph once; runs on the workers. ``offsets`` are the input files' first rows
    (global), so that a block's kept columns are read from the files its rows lie in.
    """

    out: object  # Location of the output folder
    source: object  # Location of the input dataset
    keys: tuple  # the input's data files, in path order
    offsets: tuple  # each file's first row, and the total rows last
    keep: tuple  # the kept columns' names
    names: tuple  # the feature columns' names
    block_rows: int
    compression: object = None
    lease: object = None  # LeaseCheck: never write under another run's lease

    def __call__(self, block, i):
        import pyarrow as pa

        i = int(i)
        start = i * self.block_rows
        stop = min(start + self.block_rows, self.offsets[-1])
        if block.shape != (stop - start, len(self.names)):
            raise RuntimeError(f"block {i} has shape {block.shape}, expected {(stop - start, len(self.names))}")
        block = np.ascontiguousarray(block)
        mark, record_key = checksum(block), f"{STATE}/done/{part_name(i)}.json"
        if _recorded_as(_get(self.out, record_key), stop - start, mark):  # a retried task: its first try wrote it
            return 1
        columns = {name: block[:, k] for k, name in enumerate(self.names)}
        kept = self._kept(start, stop)
        arrays = [pa.array(columns[n]) for n in self.names] + [kept.column(n) for n in self.keep]
        table = pa.Table.from_arrays(arrays, names=[*self.names, *self.keep])
        if self.lease is not None:
            self.lease()
        size = self._write(table, i)
        record = {"rows": stop - start, "bytes": size, "checksum": mark}
        _put(self.out, record_key, json.dumps(record).encode())  # after the part
        return 1

    def _kept(self, start, stop):
        """The kept columns of global rows [start, stop), read from the files holding them."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        fs, path = self.source.filesystem()
        pieces = []
        for f, key in enumerate(self.keys):
            first, end = self.offsets[f], self.offsets[f + 1]
            if end <= start or first >= stop:
                continue
            with fs.open(f"{path.rstrip('/')}/{key}" if key else path, "rb") as fh:
                table = pq.read_table(fh, columns=list(self.keep))
            if table.num_rows != end - first:
                raise InputDataError(f"{self.source}/{key}: holds {table.num_rows:,} rows where its footer said "
                                     f"{end - first:,} when the job began: the file was rewritten while the job "
                                     "ran; rerun the job")
            lo, hi = max(start, first) - first, min(stop, end) - first
            pieces.append(table.slice(lo, hi - lo))
        return pa.concat_tables(pieces).combine_chunks() if len(pieces) > 1 else pieces[0]

    def _write(self, table, i) -> int:
        import pyarrow.parquet as pq

        fs, root = self.out.filesystem()
        final = f"{root.rstrip('/')}/{part_name(i)}"
        if self.out.protocol in ("s3", "s3a"):  # an object appears whole, when its upload completes
            with fs.open(final, "wb") as fh:
                pq.write_table(table, fh, compression=self.compression or "none")
            return int(fs.info(final)["size"])
        tmp = f"{root.rstrip('/')}/{TMP_PREFIX}{part_name(i)}.{uuid.uuid4().hex}"
        try:
            with fs.open(tmp, "wb") as fh:
                pq.write_table(table, fh, compression=self.compression or "none")
            size = int(fs.info(tmp)["size"])
            if self.out.local:
                os.replace(tmp, final)  # atomic: a reader sees no part or the whole part
            else:
                fs.mv(tmp, final)
        except BaseException:
            try:
                fs.rm(tmp)
            except Exception:  # noqa: BLE001 - best effort: a rerun removes leftovers
                pass
            raise
        return size


def _put(loc, key, data: bytes):
    """Write ``data`` at ``loc/key``: whole or not at all (a temporary file renamed on a local disk)."""
    fs, root = loc.filesystem()
    path = f"{root.rstrip('/')}/{key}"
    if loc.local:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    else:
        fs.pipe_file(path, data)


def _recorded_as(raw, rows, mark) -> bool:
    """True if a part's record (its bytes, or None) says it holds ``rows`` rows of checksum ``mark``."""
    try:
        record = json.loads(raw) if raw is not None else None
    except ValueError:  # a record cut short is no record
        return False
    return isinstance(record, dict) and record.get("rows") == rows and record.get("checksum") == mark


def _get(loc, key):
    fs, root = loc.filesystem()
    try:
        with fs.open(f"{root.rstrip('/')}/{key}", "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


@dataclass(frozen=True)
class ParquetWriteReport:
    """What a Parquet write did (the fields ``dkapprox.cli._jobs.summary`` prints)."""

    path: str
    blocks_total: int
    blocks_written: int
    blocks_skipped: int
    seconds: float
    shape: tuple
    dtype: str
    resumed: bool
    refreshed: bool = False


def write_parquet_features(features, out, dataset, *, names, keep=(), plan, overwrite=False, compression=None,
                           storage_options=None, wait=False, lease_ttl=None, run=None):
    """Write ``features`` (a lazy dask array over ``dataset``'s rows) as a Parquet dataset at ``out``.

    ``dataset`` is the :class:`~dkapprox.io._parquet.ParquetInput` the features are read from; ``keep``
    its columns passed through beside the features (``names``). ``run(delayed)`` computes the writes
    (default: dask's compute). Returns a :class:`ParquetWriteReport`, or None when ``out`` is already
    complete for this job over the input as it is now.

    Raises OutputExistsError (``out`` is something else, or a finished output of another job),
    ResumeMismatchError (an unfinished output of another job), InputChangedError (the input changed
    since ``out`` was begun, or while it was written), StoreBusyError (another run holds its lease).
    """
    import dask

    started = time.perf_counter()
    names, keep = tuple(map(str, names)), tuple(keep)
    clash = sorted(set(names) & set(keep))
    if clash:
        raise InputDataError(f"kept column {clash[0]!r} has a feature's name; keep columns named otherwise")
    loc = locate(out, storage_options)
    if is_inside(loc, dataset.loc) or is_inside(dataset.loc, loc):
        raise InputDataError(f"output {loc} and input {dataset.loc} overlap (one lies inside the other); "
                             "write elsewhere")
    if features.ndim != 2 or features.shape[1] != len(names):
        raise InputDataError(f"features of shape {features.shape} for {len(names)} feature names")
    features = features.rechunk({1: -1})
    rows = features.chunks[0]
    block_rows = int(rows[0])
    if any(r != block_rows for r in rows[:-1]):
        features = features.rechunk({0: block_rows})
        rows = features.chunks[0]
    # workers on other hosts must see a local out (and input) as the client does, or parts land on their disks
    require_shared(outputs=[loc], inputs=[dataset.loc])
    identity = dataset.identify()
    layout = {"rows": int(features.shape[0]), "block_rows": block_rows, "parts": len(rows),
              "features": list(names), "keep": list(keep), "dtype": features.dtype.str, "compression": compression}
    header = {"kind": KIND, "format": FORMAT, "package_version": package_version(),
              "plan": json.loads(canonical_json(plan)), "layout": layout, "input": identity.summary(),
              "input_digest": listing_digest([identity])}
    resumed = _check_existing(loc, header, identity, overwrite=overwrite)
    if resumed == "complete":
        return None
    state = locate(f"{loc.url.rstrip('/')}/{STATE}", storage_options)
    lease = acquire(state, wait=wait, ttl=lease_ttl)
    try:
        resumed = _check_existing(loc, header, identity, overwrite=overwrite)  # again, under the lease
        if resumed == "complete":
            return None
        if resumed == "overwrite":
            _clear(loc)
            resumed = False
        if not resumed:  # records a run killed while clearing left behind go before the job is named
            fs, root = loc.filesystem()
            if fs.exists(f"{root.rstrip('/')}/{STATE}/done"):
                fs.rm(f"{root.rstrip('/')}/{STATE}/done", recursive=True)
            _put(loc, f"{STATE}/input.json", canonical_json(identity.to_dict()).encode())
            _put(loc, f"{STATE}/job.json", canonical_json({**header, "created": utc_now()}).encode())
        _remove_temporaries(loc)
        done = _recorded(loc, len(rows)) if resumed else set()
        todo = [i for i in range(len(rows)) if i not in done]
        if todo and resumed:
            log.info("resuming %s: %d of %d parts already written", loc, len(done), len(rows))
        offsets = tuple(int(x) for x in np.concatenate([[0], np.cumsum(dataset.rows)]))
        writer = ParquetPartWriter(loc, dataset.loc, tuple(dataset.keys), offsets, keep, names, block_rows,
                                   compression, lease.checker())
        blocks = engine.row_blocks(features)  # one delayed object a row block (to_delayed()[:, 0])
        shipped = dask.delayed(writer, pure=True)
        writes = [dask.delayed(shipped)(blocks[i], i, dask_key_name=f"dkapprox-parquet-part-{i}-{uuid.uuid4().hex}")
                  for i in todo]
        if writes:
            total = dask.delayed(sum)(writes)
            written = run(total) if run is not None else dask.compute(total)[0]
        else:
            written = 0
        lease.check()
        # every write returned after its record, and the parts before were listed when planned: no second
        # read of every record then (one GET a part on an object store)
        missing = 0 if written == len(todo) else len(rows) - len(_recorded(loc, len(rows)))
        if missing:
            raise IncompleteStoreError(f"{loc}: {missing} of {len(rows)} parts are not written (the compute "
                                       "failed or was cancelled); rerun the same job to write them")
        change = compare(identity, dataset.identify())
        if not change.same:
            raise InputChangedError(f"{loc}: the input changed while this run wrote it (input {change.path}: "
                                    f"{change.describe()}); rerun with --overwrite to start over",
                                    changes=[change])
        _put(loc, SUCCESS, b"")  # last: the dataset is whole
    finally:
        lease.release()
    return ParquetWriteReport(str(loc), len(rows), len(todo), len(rows) - len(todo), time.perf_counter() - started,
                              (int(features.shape[0]), len(names) + len(keep)), np.dtype(features.dtype).name,
                              bool(resumed))


def _check_existing(loc, header, identity, *, overwrite):
    """False: nothing of ours there (absent or empty); True: resume; "complete": done; "overwrite"."""
    fs, root = loc.filesystem()
    fs.invalidate_cache(root)
    if not fs.exists(root):
        return False
    if not fs.isdir(root):
        raise OutputExistsError(f"{loc}: exists and is not a folder; refusing to touch it (even with "
                                "--overwrite); choose another path")
    listed = {p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(root, detail=False)}
    raw = _get(loc, f"{STATE}/job.json")
    if raw is None:
        if listed - {STATE} and not all(n.startswith(TMP_PREFIX) for n in listed - {STATE}):
            raise OutputExistsError(f"{loc}: exists and is not a dkapprox Parquet output; refusing to touch "
                                    "it (even with --overwrite); choose another path")
        return False  # empty, or a dead run's lease only
    old = json.loads(raw)
    if old.get("kind") != KIND:
        raise OutputExistsError(f"{loc}: not a dkapprox Parquet output; choose another path")
    if overwrite:
        return "overwrite"
    complete = SUCCESS in listed
    diffs = [k for k in ("package_version", "plan", "layout")
             if canonical_json(old.get(k)) != canonical_json(header[k])]
    if diffs:
        what = ", ".join(diffs)
        if complete:
            raise OutputExistsError(f"{loc}: a finished dkapprox output of another job ({what} differ) is there; "
                                    "pass --overwrite to replace it, or write to a new path")
        raise ResumeMismatchError(f"{loc}: an unfinished dkapprox output of another job ({what} differ) is there; "
                                  "rerun the original job to finish it, write to a new path, or pass --overwrite")
    recorded = _get(loc, f"{STATE}/input.json")
    before = InputIdentity.from_dict(json.loads(recorded)) if recorded else None
    change = compare(before, identity)
    if not change.same:
        raise InputChangedError(f"{loc}: the input changed since the output was written (input {change.path}: "
                                f"{change.describe()}); a Parquet output is not refreshed: pass --overwrite to "
                                "start over", changes=[change])
    return "complete" if complete else True


def _recorded(loc, parts):
    """The parts with a record whose part is there with the recorded size."""
    fs, root = loc.filesystem()
    root = root.rstrip("/")
    fs.invalidate_cache(root)
    fs.invalidate_cache(f"{root}/{STATE}/done")
    try:
        sizes = {info["name"].rstrip("/").rsplit("/", 1)[-1]: int(info.get("size") or 0)
                 for info in fs.ls(root, detail=True)}
    except FileNotFoundError:
        return set()
    found = set()
    for i in range(parts):
        raw = _get(loc, f"{STATE}/done/{part_name(i)}.json")
        if raw is None:
            continue
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if sizes.get(part_name(i)) == record.get("bytes"):
            found.add(i)
    return found


def _clear(loc):
    """Delete a dkapprox Parquet output's parts, records and _SUCCESS (overwrite), keeping the lease."""
    fs, root = loc.filesystem()
    root = root.rstrip("/")
    fs.invalidate_cache(root)
    if fs.exists(f"{root}/{SUCCESS}"):  # first: a run killed in here leaves no dataset called whole
        fs.rm(f"{root}/{SUCCESS}")
    for child in fs.ls(root, detail=False):
        name = child.rstrip("/").rsplit("/", 1)[-1]
        if name != STATE:
            fs.rm(child, recursive=True)
    for child in fs.ls(f"{root}/{STATE}", detail=False):
        if not child.rstrip("/").rsplit("/", 1)[-1].startswith(LEASE_PREFIX):
            fs.rm(child, recursive=True)
    fs.invalidate_cache(root)


def _remove_temporaries(loc):
    """Parts a killed run was writing under their temporary names."""
    fs, root = loc.filesystem()
    fs.invalidate_cache(root)
    if not fs.exists(root):
        return
    for child in fs.ls(root, detail=False):
        if child.rstrip("/").rsplit("/", 1)[-1].startswith(TMP_PREFIX):
            fs.rm(child)
