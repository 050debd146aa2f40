"""The output store's life: what is at ``out``, refusals, creation, layout, and the job it belongs to.

Used by :func:`dkapprox.io.write_features` before and after it takes the
store's lease (see :mod:`dkapprox.io.writer` for the whole write).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..errors import InputChangedError, InputMissingError, OutputExistsError, ResumeMismatchError
from ._common import canonical_json, utc_now
from ._identity import InputChanges, compare, load_listing, save_listing
from ._lease import LEASE_PREFIX
from ._location import missing_bucket
from ._markers import clear_rows
from ._probe import PROBE_PREFIX
from ._zarr_store import ATTRIBUTE, BLOCKS_DONE, FEATURES, output_attributes

_WRITE_CONFIG = {"write_empty_chunks": True}  # skips a per-chunk comparison with the fill value


@dataclass(frozen=True)
class Opened:
    """The output group a write goes on with: ``resumed`` an existing store of this job; ``redo`` the
    row blocks a refresh rewrites (their markers are cleared when the refresh begins)."""

    group: object
    resumed: bool
    redo: tuple = ()
    refresh: bool = False


def open_or_create(loc, header, identities, *, overwrite, refresh=False, dry_run=False):
    """The output group (an :class:`Opened`), new or an existing store of this very job.

    ``identities`` are the job's inputs as they are now (:mod:`dkapprox.io._identity`); a store
    whose inputs changed is never resumed into nor called finished, only refreshed (``refresh``).
    ``dry_run`` only raises the refusals (nothing is deleted, created or changed; returns None).
    """
    import zarr

    state, group = existing(loc)
    if state == "output" and not overwrite:
        info = output_attributes(group)
        complete = info.get("status") == "complete"
        changes = input_changes(group, info, identities, header)
        refused = [c for c in changes if c.refusals and c.rows_before]  # a recorded input now unusable
        if refused:  # named first: its dtype or columns would show as another job's layout below
            raise changed_error(loc, refused)
        diffs = _job_differences(info, header)
        if diffs:
            if complete:
                raise OutputExistsError(f"{loc}: a finished dkapprox output of another job ({'; '.join(diffs)}) "
                                        "is there; pass overwrite=True to replace it, or write to a new path")
            raise ResumeMismatchError(
                f"{loc}: an unfinished dkapprox output of another job is there ({'; '.join(diffs)}); "
                "rerun the original job to finish it, write to a new path, or pass overwrite=True")
        if not changes and not refresh:
            if complete:
                raise OutputExistsError(f"{loc}: a finished dkapprox output is there; pass overwrite=True "
                                        "to replace it, or write to a new path")
            return None if dry_run else Opened(group, True)
        if changes and (not refresh or any(c.refusals for c in changes)):
            raise changed_error(loc, changes)
        redo = refresh_blocks(loc, info, header, changes)
        if dry_run:
            return None
        if redo or not complete:
            begin_refresh(group, info, header, redo)
        return Opened(group, True, redo, refresh=True)
    if state == "zarr" and not overwrite:
        raise OutputExistsError(f"{loc}: a Zarr store that is not a dkapprox output is there; pass "
                                "overwrite=True to replace it")
    if state == "creating" and not dry_run:  # we hold the lease: its last holder died before the metadata
        state = _leftovers(loc)
    if state == "other":
        raise OutputExistsError(f"{loc}: exists and is not a Zarr store; refusing to touch it (even with "
                                "overwrite=True); choose another path")
    if state == "absent" and not loc.local and (bucket := missing_bucket(loc)) is not None:
        raise InputMissingError(f"{loc}: the bucket {bucket!r} to write the output in does not exist")
    if dry_run:
        return None
    if state in ("output", "zarr", "leftovers"):
        _remove_store(loc)
    store = loc.store(read_only=False)
    group = zarr.create_group(store, attributes={ATTRIBUTE: header}, zarr_format=3)
    save_listing(group, identities)  # before any block: a resumed run compares against it
    return Opened(group, False)


# -- the inputs a store was written from ---------------------------------------------------------


def input_changes(group, info, identities, header=None):
    """[InputChanges] of each input that differs from what ``info`` recorded (its rows grown included).

    Without inputs to compare (features not read from Zarr), a store whose rows grew counts as
    an appended input of unknown chunks.
    """
    recorded = load_listing(group, info.get("inputs_digest"))
    old = {d.path: d for d in recorded} if recorded is not None else {
        s.get("path"): s for s in info.get("inputs") or []}
    found = []
    for identity in identities:
        if identity.path not in old:
            found.append(InputChanges(identity.path, rows_now=int(identity.metadata["shape"][0]),
                                      refusals=("it is not an input of the job that wrote the store",)))
            continue
        change = compare(old[identity.path], identity)
        if not change.same:
            found.append(change)
    for path in sorted(set(old) - {i.path for i in identities}):
        found.append(InputChanges(str(path), refusals=("it is no longer an input of this job",)))
    if header is not None and not identities:
        before, now = int(info["layout"]["shape"][0]), int(header["layout"]["shape"][0])
        if before != now:
            refusals = () if now > before else (f"the features shrank from {before:,} to {now:,} rows",)
            found.append(InputChanges("the features", rows_before=before, rows_now=now, refusals=refusals,
                                      rows=((before, now),) if now > before else ()))
    return found


def changed_error(loc, changes, *, during=False):
    """The InputChangedError naming each changed input, what changed, and what proceeds."""
    when = "while this run wrote the store" if during else "since the store was written"
    what = "; ".join(f"input {c.path}: {c.describe()}" for c in changes)
    if any(c.refusals for c in changes):
        advice = "a refresh cannot follow that: pass overwrite=True to start over, or write to a new path"
    elif during:
        advice = "the store is left unfinished: rerun with refresh=True to rewrite the blocks they feed"
    else:
        advice = ("pass refresh=True to rewrite only the blocks they feed (and write appended rows), or "
                  "pass overwrite=True to start over")
    return InputChangedError(f"{loc}: the input changed {when} ({what}); {advice}", changes=changes)


def refresh_blocks(loc, info, header, changes):
    """The output row blocks a refresh rewrites: those fed by changed input rows, and appended ones."""
    layout, before = header["layout"], info["layout"]
    rows, per_block = int(layout["shape"][0]), int(layout["chunks"][0])
    redo = set()
    for change in changes:
        if change.rows_now != rows:
            raise InputChangedError(
                f"{loc}: the output has {rows:,} rows and its input {change.path} {change.rows_now:,}: a refresh "
                "cannot tell which blocks a changed chunk feeds; pass overwrite=True to start over",
                changes=changes)
        for start, stop in change.rows:
            redo.update(range(start // per_block, -(-min(stop, rows) // per_block)))
    old_rows = int(before["shape"][0])
    if rows > old_rows:  # the old last block, if partial, and every new one
        redo.update(range(old_rows // per_block, int(layout["numblocks"][0])))
    return tuple(sorted(i for i in redo if i < int(layout["numblocks"][0])))


def begin_refresh(group, info, header, redo):
    """Mark the store unfinished first (readers refuse it from now on), grow it, clear ``redo``'s markers.

    A run killed anywhere in here leaves a store a rerun with refresh finishes: the recorded inputs
    change only when the refreshed store is marked complete.
    """
    info = {**info, "status": "writing", "layout": header["layout"], "refreshing": utc_now()}
    info.pop("completed", None)
    group.update_attributes({ATTRIBUTE: info})
    ensure_arrays(group, header["layout"], header["layout"].get("compression"), grow=True)
    clear_rows(group, redo)  # single records and packed ones


def existing(loc):
    """('absent' | 'creating' | 'output' | 'zarr' | 'other', group or None) for what is at ``loc``.

    'creating': a folder with a lease and entries but no Zarr metadata yet; another run is creating
    the store (the lease then says busy), or one died doing so (its lease is taken over).
    """
    import zarr

    fs, path = loc.filesystem()
    fs.invalidate_cache(path)  # a lease may have been written since the last look
    if not fs.exists(path):
        return "absent", None
    if not fs.isdir(path):
        return "other", None
    listed = {p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)}
    names = {n for n in listed if not _transient(n)}
    if not names:
        return "absent", None
    if not names & {"zarr.json", ".zarray", ".zgroup"}:
        if any(n.startswith(LEASE_PREFIX) for n in listed):
            # a run holds (or held) the lease and has not written the group's metadata yet: only a
            # dkapprox run puts a lease there, after refusing foreign folders; the lease decides
            return "creating", None
        return "other", None
    try:
        node = zarr.open(store=loc.store(read_only=False), mode="r+")
    except Exception:  # a broken Zarr store is still a Zarr store: replaceable with overwrite
        return "zarr", None
    if isinstance(node, zarr.Group) and output_attributes(node) is not None:
        return "output", node
    return "zarr", None


def _leftovers(loc):
    """'leftovers' if a dead run's store has only our arrays left (an overwrite killed half way through
    deleting it), else 'other': anything else in a leased folder is not ours to delete."""
    fs, path = loc.filesystem()
    names = {p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)}
    return "leftovers" if {n for n in names if not _transient(n)} <= {FEATURES, BLOCKS_DONE} else "other"


def _transient(name) -> bool:
    """Names that are not part of the store: the lease and its temporary files, the workers' probe
    nonce (written in the nearest existing folder of the output), and the temporary file zarr's
    LocalStore writes before renaming it into place (``zarr.<uuid>.partial`` while the group's
    ``zarr.json`` is being created)."""
    return name.startswith((LEASE_PREFIX, PROBE_PREFIX)) or name.endswith(".partial")


def _remove_store(loc):
    """Delete the Zarr store at ``loc`` (overwrite), keeping this run's lease in it."""
    fs, path = loc.filesystem()
    fs.invalidate_cache(path)
    for child in fs.ls(path, detail=False):
        if not child.rstrip("/").rsplit("/", 1)[-1].startswith(LEASE_PREFIX):
            fs.rm(child, recursive=True)
    fs.invalidate_cache(path)


def _job_differences(stored, header):
    """'plan.model: "a" -> "b"' for every part of the job that differs (package, layout, plan).

    The layout's rows are not compared here: they follow the input, whose changes
    :func:`input_changes` reports (a refresh may append rows, nothing may shrink them).
    """
    diffs = []
    for key in ("package_version", "layout", "plan"):
        old, new = stored.get(key), header[key]
        if key == "layout" and isinstance(old, dict):
            old, new = _columns_only(old), _columns_only(new)
        if canonical_json(old) == canonical_json(new):
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            keys = sorted(k for k in set(old) | set(new) if canonical_json(old.get(k)) != canonical_json(new.get(k)))
            diffs += [f"{key}.{k}: {_short(old.get(k))} -> {_short(new.get(k))}" for k in keys]
        else:
            diffs.append(f"{key}: {_short(old)} -> {_short(new)}")
    return diffs


def _columns_only(layout):
    shape, numblocks = layout.get("shape") or [0, 0], layout.get("numblocks") or [0, 0]
    return {**layout, "shape": ["rows", *shape[1:]], "numblocks": ["rows", *numblocks[1:]]}


def _short(value, limit=60):
    text = canonical_json(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def ensure_arrays(group, layout, compression, *, grow=False):
    """The features and blocks_done arrays, created if a killed run did not get to it.

    ``blocks_done`` holds each written block's checksum (:func:`dkapprox.io._zarr_store.checksum`,
    never 0), 0 where the block is not written. ``grow`` lets a refresh append rows.
    """
    from zarr.codecs import ZstdCodec

    dtype = np.dtype(layout["dtype"])
    fill = float("nan") if dtype.kind == "f" else 0
    wanted = {
        FEATURES: dict(shape=tuple(layout["shape"]), chunks=tuple(layout["chunks"]), dtype=dtype,
                       fill_value=fill, dimension_names=("sample", "feature"),
                       compressors=ZstdCodec(level=1) if compression == "zstd" else None),
        BLOCKS_DONE: dict(shape=tuple(layout["numblocks"]), chunks=(1, 1), dtype=np.uint64, fill_value=0,
                          dimension_names=("block_row", "block_column"), compressors=None),
    }
    arrays = []
    for name, spec in wanted.items():
        if name in group:
            array = group[name]
            shape, wanted_shape = tuple(array.shape), spec["shape"]
            if grow and shape[1:] == wanted_shape[1:] and shape[0] < wanted_shape[0]:
                array.resize(wanted_shape)  # rows appended: only the metadata changes
                shape = wanted_shape
            if (shape, tuple(array.chunks), np.dtype(array.dtype)) != (
                    wanted_shape, spec["chunks"], np.dtype(spec["dtype"])):
                raise ResumeMismatchError(f"{group.store}: array {name} does not match the planned layout")
        else:
            array = group.create_array(name, config=_WRITE_CONFIG, **spec)
        arrays.append(array.with_config(_WRITE_CONFIG))
    return arrays


def remove_partial_files(root):
    """Temporary files of writes killed mid-way (zarr's LocalStore writes file.<uuid>.partial, then renames)."""
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".partial"):
                os.unlink(os.path.join(folder, name))


