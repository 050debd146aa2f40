"""verify(out): does a finished output store still hold what its job wrote, from the input it names?

Three checks, reading the store once and changing nothing:

1. every block's marker is present (``blocks_done``);
2. every features chunk reads back and matches the checksum its marker
   recorded when the block was written (a truncated or flipped chunk file,
   a deleted chunk, an object replaced on S3);
3. each input still matches the identity recorded for it (one listing each,
   see :mod:`dkapprox.io._identity`).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ._icechunk import input_of, is_icechunk
from ._identity import compare, identify, load_listing
from ._location import locate, location_of_node
from ._markers import read as read_markers
from ._zarr_store import BLOCKS_DONE, FEATURES, checksum, open_node, output_attributes, reading

__all__ = ["VerifyReport", "input_status", "verify"]


@dataclass(frozen=True)
class VerifyReport:
    """What :func:`verify` found; ``ok`` when nothing is wrong.

    ``missing`` and ``damaged`` are output row ranges ``[start, stop)`` (of
    blocks without a marker, and of blocks whose chunk does not read back as
    written, with why); ``inputs`` says for each recorded input whether it
    still matches. ``lines()`` is what ``dkapprox verify`` prints.

    Examples
    --------
    >>> import tempfile, dask.array as da
    >>> from dkapprox.io import verify, write_features
    >>> out = tempfile.mkdtemp() + "/z.zarr"
    >>> _ = write_features(da.ones((100, 4), chunks=(50, 4)), out, plan={})
    >>> report = verify(out)
    >>> report.ok, report.blocks_checked, report.missing, report.damaged
    (True, 2, [], [])
    >>> report.lines()[-1].split(" in ")[0]
    'ok: ...z.zarr: 2 of 2 blocks checked, 0 bad, 0 inputs matching; 0.0 MiB read'
    """

    path: str
    status: str
    blocks_total: int
    blocks_checked: int
    missing: list = field(default_factory=list)
    damaged: list = field(default_factory=list)
    inputs: list = field(default_factory=list)
    bytes_read: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return (self.status == "complete" and not self.missing and not self.damaged
                and all(i.get("matches") for i in self.inputs))

    def to_dict(self) -> dict:
        return {"path": self.path, "ok": self.ok, "status": self.status, "blocks_total": self.blocks_total,
                "blocks_checked": self.blocks_checked, "missing": self.missing, "damaged": self.damaged,
                "inputs": self.inputs, "bytes_read": self.bytes_read, "seconds": round(self.seconds, 3)}

    def lines(self, limit=10) -> list[str]:
        """What a person reads: one line per problem (at most ``limit`` ranges each), then the verdict."""
        out = []
        if self.status != "complete":
            out.append(f"status {self.status!r}: the job that writes the store has not finished")
        out += [f"rows {a:,}-{b:,}: no block marker (never written)" for a, b in self.missing[:limit]]
        out += [f"rows {d['rows'][0]:,}-{d['rows'][1]:,}: {d['why']}" for d in self.damaged[:limit]]
        hidden = max(0, len(self.missing) - limit) + max(0, len(self.damaged) - limit)
        if hidden:
            out.append(f"... and {hidden:,} more bad blocks (--json lists them all)")
        for i in self.inputs:
            if not i.get("matches"):
                out.append(f"input {i['path']}: {i.get('why', 'changed')}")
        verdict = "ok" if self.ok else "FAILED"
        out.append(f"{verdict}: {self.path}: {self.blocks_checked:,} of {self.blocks_total:,} blocks checked, "
                   f"{len(self.missing) + len(self.damaged):,} bad, {len(self.inputs)} inputs "
                   f"{'matching' if all(i.get('matches') for i in self.inputs) else 'checked'}; "
                   f"{self.bytes_read / 2**20:,.1f} MiB read in {self.seconds:.2f} s")
        return out


def verify(path, *, check_input=True, threads=None, storage_options=None) -> VerifyReport:
    """Check a dkapprox output store against its recorded checksums and its input; change nothing.

    Parameters
    ----------
    path : str or os.PathLike
        A store written by :func:`dkapprox.io.write_features`.
    check_input : bool, default=True
        Also list each recorded input and compare it with its recorded identity.
    threads : int, optional
        Blocks read at once (default: the cores, at least 4: reads wait on storage).
    storage_options : dict, optional
        fsspec options for URLs.

    Returns
    -------
    VerifyReport

    Raises
    ------
    InputMissingError
        Nothing at ``path``.
    InputDataError
        ``path`` is not a dkapprox output store.

    Examples
    --------
    >>> import os, tempfile, dask.array as da
    >>> from dkapprox.io import verify, write_features
    >>> out = tempfile.mkdtemp() + "/z.zarr"
    >>> _ = write_features(da.ones((100, 4), chunks=(50, 4)), out, plan={})
    >>> verify(out).ok
    True
    >>> os.truncate(out + "/features/c/1/0", 10)   # damage one chunk
    >>> report = verify(out)
    >>> report.ok, [d["rows"] for d in report.damaged]
    (False, [[50, 100]])
    """
    from ..errors import InputDataError

    started = time.perf_counter()
    group, where = open_node(path, storage_options=storage_options, kind="features")
    info = output_attributes(group) if hasattr(group, "attrs") and not hasattr(group, "shape") else None
    if info is None:
        raise InputDataError(f"{where}: not a dkapprox output store; verify checks stores written by dkapprox")
    with reading(where):
        features = group[FEATURES] if FEATURES in group else None
        markers = read_markers(group, info["layout"]["numblocks"], values=True) if BLOCKS_DONE in group else np.zeros(
            tuple(info["layout"]["numblocks"]), dtype=np.uint64)
    rows = int(info["layout"]["chunks"][0])
    n = int(info["layout"]["shape"][0])
    span = lambda i: [i * rows, min((i + 1) * rows, n)]  # noqa: E731
    missing = _ranges([i for i in range(markers.shape[0]) if not markers[i].all()], rows, n)
    todo = [tuple(int(x) for x in ij) for ij in np.argwhere(markers != 0)] if features is not None else []
    damaged, read = [], 0
    workers = threads or max(4, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=min(workers, max(1, len(todo)))) as pool:
        for (i, j), (why, nbytes) in zip(todo, pool.map(lambda ij: _check(features, ij, markers[ij]), todo)):
            read += nbytes
            if why:
                damaged.append({"rows": span(i), "block": [i, j], "why": why})
    inputs = input_status(group, info, storage_options=storage_options, store=path) if check_input else []
    return VerifyReport(where, str(info.get("status")), int(markers.size), len(todo), missing, damaged, inputs,
                        read, time.perf_counter() - started)


def _check(features, index, recorded):
    """(why the block is bad or None, bytes read) for block ``index`` of ``features``."""
    i, j = index
    rows, cols = features.chunks
    try:
        block = features[i * rows:(i + 1) * rows, j * cols:(j + 1) * cols]
    except Exception as exc:  # noqa: BLE001 - any failure to read it back is the finding
        return f"unreadable ({type(exc).__name__}: {' '.join(str(exc).split())[:160]})", 0
    if checksum(block) != int(recorded):
        return "checksum differs from the one recorded when it was written", block.nbytes
    return None, block.nbytes


def _ranges(row_blocks, rows, n):
    """Merged output row ranges of these row blocks."""
    merged = []
    for i in sorted(row_blocks):
        a, b = i * rows, min((i + 1) * rows, n)
        if merged and merged[-1][1] == a:
            merged[-1][1] = b
        else:
            merged.append([a, b])
    return merged


def input_status(group, info, *, storage_options=None, store=None) -> list[dict]:
    """For each input the store recorded: its path, the recorded identity, and whether it still matches.

    The credentials a ``store`` URL carries (``s3://KEY:SECRET@bucket/...``) are
    used for inputs of its protocol too, as ``--storage-option`` is for every
    URL of a command: the store records its inputs without them.

    Each input is listed once (no chunk is read). ``why`` says what changed
    (as ``dkapprox.io._identity.InputChanges`` words it) or why it could
    not be checked; ``changes`` holds the counts and row ranges.
    """
    recorded = load_listing(group, info.get("inputs_digest"))
    summaries = info.get("inputs") or []
    by_path = {d.path: d for d in recorded} if recorded is not None else {}
    given = locate(store, storage_options) if isinstance(store, str) and not is_icechunk(store) else None
    found = []
    for summary in summaries:
        options = storage_options
        pinned = is_icechunk(str(summary.get("path")))
        if given is not None and not pinned and locate(str(summary.get("path"))).protocol == given.protocol:
            options = given.storage_options
        entry = {"path": summary.get("path"), "metadata": summary.get("metadata"),
                 "chunks_listed": summary.get("chunks_listed"),
                 "digest": summary.get("digest"), "stamp": summary.get("stamp")}
        try:
            if (summary.get("metadata") or {}).get("format") == "parquet":
                from ._parquet import parquet_identity

                now = parquet_identity(summary["path"], summary["metadata"], options)
            elif pinned:  # a snapshot: there, or gone
                node, _ = open_node(summary["path"], storage_options=options)
                now = input_of(node).identify()
            else:
                node, _ = open_node(summary["path"], storage_options=options)
                now = identify(node, locate(summary["path"], options), skip=location_of_node(group))
        except Exception as exc:  # noqa: BLE001 - a missing or unreadable input does not match
            found.append({**entry, "matches": False, "why": f"cannot be listed ({' '.join(str(exc).split())})"})
            continue
        change = compare(by_path.get(summary["path"], summary), now)
        found.append({**entry, "matches": change.same, "changes": change.to_dict(),
                      **({} if change.same else {"why": change.describe()})})
    return found
