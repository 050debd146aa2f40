"""Features written into an open, writable Icechunk session: the caller's transaction, the caller's commit.

Icechunk's own writers (``icechunk.xarray.to_icechunk``, ``icechunk.dask.store_dask``) take a session
and leave the commit to the caller; so does this. The group is planned in a fork of the session on the
driver, every block is written through a copy of that fork (on the workers under a distributed client),
and the forks are merged back into the session, which then holds the finished group, uncommitted.

What an address gives and a session cannot: commits of progress (a killed job here loses its writes, as
an uncommitted Icechunk transaction does), the lease (two sessions writing one branch conflict at the
later commit instead), and the output branch moved once (the caller commits).
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import IncompleteStoreError, InputDataError, OutputExistsError
from ._common import utc_now
from ._icechunk import DEFAULT_GROUP
from ._icechunk_output import ForkWriter, check_existing, write_forks
from ._identity import save_listing
from ._output_store import ensure_arrays
from ._zarr_store import ATTRIBUTE, blocks_done, output_attributes


def session_target(session, group):
    """(session, group) checked: writable, without uncommitted changes (Icechunk forks only those)."""
    group = (group or DEFAULT_GROUP).strip("/")
    if not group:
        raise ValueError("group must name the features' group in the session, e.g. group='features'")
    if session.read_only:
        raise ValueError("write_features needs a writable Icechunk session (repo.writable_session(branch)); "
                         "this one is read-only")
    if session.has_uncommitted_changes:
        raise ValueError("write_features writes through forks of the session, which Icechunk makes only of a "
                         "session without uncommitted changes: commit them first (session.commit), then open a "
                         "new writable session")
    return session, group


def write_session(features, session, group, *, header, inputs, identities, memory, overwrite, refresh, compression,
                  started, writer):
    """Write ``features`` as ``group`` into ``session`` (see the module notes); a WriteReport, nothing committed.

    ``writer``: the Zarr writer's parts this one shares (``BlockWriter``, ``WriteReport``, ``identify``).
    """
    import zarr

    where = f"icechunk session on {session.branch}, group {group}"
    fork = session.fork()
    root = zarr.open_group(fork.store, mode="a")
    refreshed = False
    if group in root:
        planned = root[group]
        info = output_attributes(planned) if isinstance(planned, zarr.Group) else None
        if not overwrite:
            refreshed = check_existing(where, info, True, header, refresh=refresh,
                                       version=f"snapshot {session.snapshot_id}")
        if info is None or info.get("layout") != header["layout"]:
            # icechunk 2 refuses to merge forks that each delete and remake one array
            raise OutputExistsError(
                f"{where}: the group there {'is no dkapprox output' if info is None else 'has another layout'}, "
                "and its arrays cannot be replaced through forks of a session: delete the group, commit, and "
                "write in a new session; or write to an Icechunk address, whose work branch can")
        planned.update_attributes({ATTRIBUTE: header})  # every block is written again: the markers too
    else:
        planned = root.create_group(group, attributes={ATTRIBUTE: header})
    ensure_arrays(planned, header["layout"], compression)
    layout = header["layout"]
    todo = [tuple(int(i) for i in index) for index in np.ndindex(*layout["numblocks"])]
    session.merge(fork, *write_forks(features, ForkWriter.planned(fork, group, writer.BlockWriter), todo, memory))
    done = zarr.open_group(session.store, path=group, mode="r+")
    missing = int((~blocks_done(done)).sum())
    if missing:
        raise IncompleteStoreError(f"{where}: {missing} blocks were not written")
    now = [writer.identify(z, w, None) for z, w in inputs]
    if [i.digest for i in now] != [i.digest for i in identities]:
        raise InputDataError(f"{where}: an input changed while it was read; discard the session's changes and "
                             "write again")
    save_listing(done, identities)
    done.update_attributes({ATTRIBUTE: {**header, "status": "complete", "completed": utc_now()}})
    return writer.WriteReport(
        path=where, blocks_total=len(todo), blocks_written=len(todo), blocks_skipped=0,
        seconds=time.perf_counter() - started, shape=tuple(layout["shape"]), chunks=tuple(layout["chunks"]),
        dtype=np.dtype(layout["dtype"]).name, resumed=False, refreshed=refreshed, commits=0)


__all__ = ["session_target", "write_session"]
