"""What an input array holds, told apart without reading its data: metadata plus one chunk listing.

A Zarr array's content changes only by writing its chunk objects, and every
write changes what a listing says of them: a file's size and modification time
(in ns) on a filesystem, an object's size and ETag on an object store. So one
recursive listing of the array's folder (one paginated LIST on S3: 1,000
objects a request) identifies the content the job reads, and comparing two
listings names the chunks that changed, were added or were removed, and so
the input rows they hold. Metadata documents are not in the listing: the
array's shape, chunk grid, dtype and fill value are recorded as values.

An identity records the listing's entries (key, size, stamp) so that a later
run can say *which* chunks changed; the store's header holds only a digest of
them (see :mod:`dkapprox.io.writer`).

What this cannot see: a chunk rewritten with the same size within the
filesystem's timestamp resolution (1 ns on ext4/xfs, 1 s on some network
filesystems), or a store that rewrites objects keeping their ETag (none known).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field

from ._common import canonical_json
from ._location import Location

_METADATA_NAMES = frozenset({"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"})
IDENTITY_FORMAT = 1

__all__ = ["InputChanges", "InputIdentity", "compare", "identify"]


@dataclass(frozen=True)
class InputIdentity:
    """One input array: where, its metadata, and its chunk listing (parallel tuples, sorted by key)."""

    path: str
    metadata: dict
    stamp: str  # what ``stamps`` are: "mtime_ns" (filesystems) or "etag" (object stores)
    keys: tuple = field(repr=False)
    sizes: tuple = field(repr=False)
    stamps: tuple = field(repr=False)
    rows: tuple = field(default=(), repr=False)  # rows of each entry, where entries are files of rows (Parquet)

    @property
    def digest(self) -> str:
        parts = [self.metadata, self.stamp, list(self.keys), list(self.sizes), list(self.stamps)]
        listing = canonical_json(parts + [list(self.rows)] if self.rows else parts)  # a Zarr input's as before
        return hashlib.sha256(listing.encode()).hexdigest()

    def summary(self) -> dict:
        """What the store's header records: everything but the entries."""
        return {"path": self.path, "metadata": self.metadata, "stamp": self.stamp, "chunks_listed": len(self.keys),
                "digest": self.digest}

    def to_dict(self) -> dict:
        doc = {**self.summary(), "keys": list(self.keys), "sizes": list(self.sizes), "stamps": list(self.stamps)}
        return {**doc, "rows": list(self.rows)} if self.rows else doc

    @classmethod
    def from_dict(cls, doc) -> InputIdentity:
        return cls(doc["path"], doc["metadata"], doc["stamp"], tuple(doc["keys"]), tuple(doc["sizes"]),
                   tuple(doc["stamps"]), tuple(doc.get("rows") or ()))


def identify(z, loc: Location, *, skip=None) -> InputIdentity:
    """The identity of zarr array ``z`` stored at ``loc`` (metadata and one listing; no chunk is read).

    ``skip``: the Location of an output written inside the input (``allow_inside_input``), left out.
    """
    metadata = _metadata(z)
    entries, stamp = list_entries(z.store, z.path or "")
    entries = [e for e in entries if e[0].rsplit("/", 1)[-1] not in _METADATA_NAMES]
    if skip is not None and skip.protocol == loc.protocol and skip.path.startswith(loc.path.rstrip("/") + "/"):
        inner = skip.path[len(loc.path.rstrip("/")) + 1:].rstrip("/") + "/"
        entries = [e for e in entries if not e[0].startswith(inner)]
    entries.sort()
    keys, sizes, stamps = (tuple(column) for column in zip(*entries)) if entries else ((), (), ())
    return InputIdentity(str(loc), metadata, stamp, keys, sizes, stamps)


def list_entries(store, prefix):
    """([(key below ``prefix``, size, stamp)], stamp kind) of every object under ``prefix`` of a zarr store,
    from one listing: a walk of the folder on a LocalStore (zarr's temporary files left out), one
    recursive (paginated) listing on fsspec stores. Nothing is read."""
    root = getattr(store, "root", None)
    if root is not None:  # LocalStore
        folder = os.path.join(os.fspath(root), prefix) if prefix else os.fspath(root)
        return _local_listing(folder), "mtime_ns"
    return _fsspec_listing(store, prefix), "etag"


def _metadata(z) -> dict:
    shards = getattr(z, "shards", None)
    meta = z.metadata
    if meta.zarr_format == 2:
        encoding = {"name": "v2", "separator": meta.dimension_separator or "."}
    else:
        cke = meta.chunk_key_encoding
        encoding = {"name": cke.name, "separator": cke.separator}
    return {"shape": [int(s) for s in z.shape], "chunks": [int(c) for c in z.chunks],
            "grid": [int(c) for c in (shards or z.chunks)], "dtype": str(z.dtype),
            "fill_value": json.loads(json.dumps(_plain(meta.fill_value), default=str)),
            "zarr_format": int(meta.zarr_format), "key_encoding": encoding}


def _plain(value):
    item = getattr(value, "item", None)
    value = item() if callable(item) else value
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return str(value)
    return value


def _local_listing(root):
    """[(key, size, mtime_ns)] of every file below ``root`` but zarr's temporary files ([] if no folder)."""
    entries = []
    stack = [""]
    for _ in range(10**7):  # bounded: one step a folder
        if not stack:
            break
        rel = stack.pop()
        try:
            it = os.scandir(os.path.join(root, rel) if rel else root)
        except FileNotFoundError:
            if rel:
                raise  # a folder vanished while it was walked: the listing failed half way
            return entries
        with it:
            for entry in it:
                key = f"{rel}/{entry.name}" if rel else entry.name
                if entry.is_dir(follow_symlinks=False):
                    stack.append(key)
                elif not entry.name.endswith(".partial"):
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:  # deleted since the folder was read (a worker packing its
                        continue  # markers): gone, as a listing a moment later would say
                    entries.append((key, int(st.st_size), int(st.st_mtime_ns)))
    return entries


def _fsspec_listing(store, node_path):
    """[(key, size, etag or modification stamp)] from one recursive listing of the array's prefix."""
    import fsspec

    fs = store.fs
    sync_fs = getattr(fs, "sync_fs", None)  # AsyncFileSystemWrapper
    if sync_fs is None:
        options = {k: v for k, v in fs.storage_options.items() if k != "asynchronous"}
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        sync_fs = fsspec.filesystem(protocol, **options)
    prefix = f"{store.path.rstrip('/')}/{node_path}".strip("/") if node_path else store.path.rstrip("/")
    sync_fs.invalidate_cache(prefix)
    found = sync_fs.find(prefix, detail=True)
    entries = []
    base = prefix.strip("/") + "/"  # memory:// lists "/bucket/..." where others list "bucket/..."
    for path, info in found.items():
        path = path.lstrip("/")
        key = path[len(base):] if path.startswith(base) else ""
        if not key or info.get("type") == "directory":
            continue
        entries.append((key, int(info.get("size") or 0), stamp_of(info)))
    return entries


def stamp_of(info) -> str:
    """What changes when an object is rewritten, from an fsspec listing's entry: its ETag, else its time."""
    tag = next((str(info[k]) for k in ("ETag", "etag", "md5Hash", "mtime", "LastModified", "last_modified",
                                       "created") if info.get(k) is not None), "")
    return tag.strip('"')


# -- comparing two identities -------------------------------------------------------------------


@dataclass(frozen=True)
class InputChanges:
    """How an input differs from the identity a store recorded.

    ``refusals`` name what a refresh cannot follow (columns, dtype, chunk
    grid, fill value, rows that shrank); ``rows`` are the merged input row
    ranges ``[start, stop)`` of changed, added or removed chunks (rows of the
    current input); ``everything`` says the recorded listing is unknown or a
    changed entry could not be placed, so every row counts as changed.
    """

    path: str
    changed: int = 0
    added: int = 0
    removed: int = 0
    rows_before: int = 0
    rows_now: int = 0
    refusals: tuple = ()
    rows: tuple = ()
    everything: bool = False
    unit: str = "chunks"  # what the listing's entries are: a Zarr array's chunks, a Parquet dataset's files

    @property
    def same(self) -> bool:
        return not (self.changed or self.added or self.removed or self.refusals or self.everything
                    or self.rows_before != self.rows_now)

    def describe(self, ranges=3) -> str:
        """One phrase: what changed, and the first few row ranges."""
        parts = list(self.refusals)
        if self.rows_now > self.rows_before and not self.refusals:
            parts.append(f"{self.rows_now - self.rows_before:,} rows appended ({self.rows_before:,} -> "
                         f"{self.rows_now:,})")
        if self.everything:
            parts.append(f"its recorded {self.unit[:-1]} listing is missing or unplaceable, so every row counts as "
                         "changed")
        parts.append(f"{self.changed:,} {self.unit} changed, {self.added:,} added, {self.removed:,} removed")
        if self.rows:
            shown = ", ".join(f"{a:,}-{b:,}" for a, b in self.rows[:ranges])
            more = f" and {len(self.rows) - ranges:,} more" if len(self.rows) > ranges else ""
            parts.append(f"rows {shown}{more}")
        return "; ".join(parts)

    def to_dict(self) -> dict:
        return {"same": self.same, "changed": self.changed, "added": self.added, "removed": self.removed,
                "rows_before": self.rows_before, "rows_now": self.rows_now, "refusals": list(self.refusals),
                "rows": [list(r) for r in self.rows], "everything": self.everything}


def compare(old: InputIdentity | dict | None, new: InputIdentity) -> InputChanges:
    """How ``new`` differs from ``old`` (an identity, or only its recorded summary, or None: unknown)."""
    summary = old.summary() if isinstance(old, InputIdentity) else (old or {})
    before, now = summary.get("metadata") or {}, new.metadata
    rows_before = int((before.get("shape") or [0])[0])
    rows_now = int(now["shape"][0])
    refusals = []
    for key, what in (("dtype", "dtype"), ("grid", "chunk grid"), ("fill_value", "fill value"),
                      ("key_encoding", "chunk key encoding"), ("columns", "columns"),
                      ("types", "column types")):  # the last two: a Parquet input's (a Zarr one has none)
        if canonical_json(before.get(key)) != canonical_json(now.get(key)):
            refusals.append(f"its {what} changed ({_short(before.get(key))} -> {_short(now.get(key))})")
    if before.get("shape") and int(before["shape"][1]) != int(now["shape"][1]):
        refusals.append(f"its columns changed ({before['shape'][1]} -> {now['shape'][1]})")
    if rows_now < rows_before:
        refusals.append(f"it shrank from {rows_before:,} to {rows_now:,} rows")
    if not isinstance(old, InputIdentity):
        same = summary.get("digest") == new.digest
        return InputChanges(new.path, rows_before=rows_before, rows_now=rows_now, refusals=tuple(refusals),
                            everything=not same, rows=() if same else ((0, rows_now),),
                            unit="files" if now.get("format") == "parquet" else "chunks")
    recorded = dict(zip(old.keys, zip(old.sizes, old.stamps)))
    current = dict(zip(new.keys, zip(new.sizes, new.stamps)))
    changed = [k for k in current if k in recorded and recorded[k] != current[k]]
    added = [k for k in current if k not in recorded]
    removed = [k for k in recorded if k not in current]
    if now.get("format") == "parquet":
        rows, everything = _file_rows(old, new, changed, added)
        return InputChanges(new.path, len(changed), len(added), len(removed), rows_before, rows_now,
                            tuple(refusals), rows, everything, unit="files")
    grid = int(now["grid"][0])
    spans, everything = [], False
    for key in (*changed, *added, *removed):
        row = _row_block(key, now)
        if row is None:
            everything = True
            continue
        spans.append((row * grid, min((row + 1) * grid, max(rows_now, rows_before))))
    if rows_now > rows_before:  # appended rows: the old last chunk grew, new chunks follow
        spans.append((rows_before, rows_now))
    rows = ((0, rows_now),) if everything else _merge(spans)
    return InputChanges(new.path, len(changed), len(added), len(removed), rows_before, rows_now,
                        tuple(refusals), rows, everything)


def _file_rows(old, new, changed, added):
    """(merged rows of the current input that changed files feed, everything) for inputs of files of rows.

    A file's rows follow the files before it in path order: a changed, added or removed file whose
    row count differs shifts every later row, which then counts as changed too.
    """
    if len(old.rows) != len(old.keys) or len(new.rows) != len(new.keys):
        return ((0, int(new.metadata["shape"][0])),), True

    def spans(identity):
        out, start = {}, 0
        for key, n in zip(identity.keys, identity.rows):
            out[key] = (start, start + int(n))
            start += int(n)
        return out

    before, now = spans(old), spans(new)
    rows_now = int(new.metadata["shape"][0])
    found = [now[k] for k in (*changed, *added)]
    shifted = [now[k][0] for k in now if k in before and k not in changed and before[k] != now[k]]
    if shifted:
        found.append((min(shifted), rows_now))
    rows_before = sum(int(n) for n in old.rows)
    if rows_now > rows_before:
        found.append((rows_before, rows_now))
    return _merge([s for s in found if s[1] > s[0]]), False


def _row_block(key, metadata):
    """The row index of the chunk (or shard) stored under ``key``, or None if it is no chunk key."""
    encoding = metadata["key_encoding"]
    sep = encoding["separator"]
    if encoding["name"] == "default":
        if not key.startswith("c" + sep):
            return None
        key = key[2:]
    elif sep == "/" and "/" not in key and "." in key:
        return None
    parts = key.split(sep)
    if len(parts) != len(metadata["shape"]) or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0])


def _merge(spans):
    merged = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return tuple(merged)


def _short(value, limit=40):
    text = canonical_json(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- the listings kept in an output store ----------------------------------------------------

LISTING = "input_listing"  # uint8 array in the output group: canonical JSON of the identities, zstd


def listing_digest(identities) -> str:
    """One digest for the identities of a job's inputs (in the order given)."""
    return hashlib.sha256(canonical_json([i.digest for i in identities]).encode()).hexdigest()


def save_listing(group, identities):
    """Keep the identities' entries in ``group`` (replacing earlier ones); its header names the digest."""
    import numpy as np
    from zarr.codecs import ZstdCodec

    raw = np.frombuffer(canonical_json({"format": IDENTITY_FORMAT,
                                        "inputs": [i.to_dict() for i in identities]}).encode(), dtype=np.uint8)
    if LISTING in group:
        del group[LISTING]
    array = group.create_array(LISTING, shape=raw.shape, chunks=(max(1, min(raw.size, 2**24)),), dtype=np.uint8,
                               fill_value=0, compressors=ZstdCodec(level=3), dimension_names=("byte",),
                               attributes={"format": IDENTITY_FORMAT})
    array[...] = raw
    # the digest last: a run killed before the bytes were written leaves a listing no digest names, so the
    # rerun writes it again (tests/io/test_listing.py)
    array.attrs["digest"] = listing_digest(identities)


def has_listing(group, digest) -> bool:
    """True if ``group`` keeps the listing of that digest (its attributes only are read)."""
    return LISTING in group and group[LISTING].attrs.get("digest") == digest


def load_listing(group, digest):
    """The identities kept in ``group`` if they are the ones whose digest the header names, else None."""
    if not digest or LISTING not in group:
        return None
    array = group[LISTING]
    if array.attrs.get("digest") != digest:  # a run died between saving the listing and the header
        return None
    try:
        doc = json.loads(bytes(array[...]).decode())
        return [InputIdentity.from_dict(d) for d in doc["inputs"]]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
