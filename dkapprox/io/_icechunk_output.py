"""Features written to an Icechunk repository: the output branch moves once, to a finished snapshot.

A job writes the group ``group=`` (default ``features``, laid out as a Zarr output store, see
:mod:`dkapprox.io._zarr_store`) on a work branch of its own, ``dkapprox.<branch>.<group>``, made from
the output branch's tip:

1. the plan is the work branch's first commit (the group, its header and empty arrays);
2. the blocks are written ``commit_every`` at a time: each block task writes its chunk and its
   checksum through a fork of the work branch's session, the forks come back to the driver, are
   merged and committed; a killed job keeps every batch committed before it died, and a rerun of
   the same job continues from the work branch's tip;
3. the last commit marks the group complete and names the inputs' snapshots, the model's
   fingerprint and the plan in its message and metadata; then the output branch is moved to it in
   one conditional update (refused if anyone else moved the branch meanwhile), and the work branch
   is deleted. Readers of the output branch see last night's features or tonight's, never a mix.

Overlapping runs take the lease of :mod:`dkapprox.io._lease` beside the repository's metadata
(``REPO/dkapprox-leases/<branch>/<group>/``), as a Zarr output's: a second run is refused
(StoreBusyError, exit 75) or waits.
"""

from __future__ import annotations

import functools
import logging
import os
import pickle
import re
import time
import uuid
from dataclasses import dataclass, replace

import numpy as np

from .. import engine
from ..errors import InputDataError, OutputExistsError, ResumeMismatchError, StoreBusyError
from ._common import canonical_json, utc_now
from ._icechunk import Address, failure, is_icechunk, parse
from ._identity import has_listing, save_listing
from ._lease import acquire
from ._location import Location
from ._output_store import _WRITE_CONFIG, _job_differences, changed_error, ensure_arrays
from ._zarr_store import ATTRIBUTE, BLOCKS_DONE, FEATURES, blocks_done, output_attributes

#: blocks written between two commits of the work branch (a killed job loses at most these);
#: ``$DKAPPROX_COMMIT_EVERY`` or ``write_features(commit_every=)`` set it
COMMIT_EVERY = 256
log = logging.getLogger(__name__)


def address_of(out, storage_options=None) -> Address:
    """The output address of ``out`` (an ``icechunk+...`` address)."""
    if not isinstance(out, str):
        raise TypeError(f"write_features takes an Icechunk output as an address, e.g. 'icechunk+file:///data/repo"
                        f"?branch=main&group=features', or a writable session, not {type(out).__name__}")
    return parse(out, storage_options, kind="output")


def work_branch(address: Address) -> str:
    return "dkapprox." + ".".join(re.sub(r"[^A-Za-z0-9_-]+", "-", p) for p in (address.branch, address.group))


def lease_location(address: Address) -> Location:
    loc = address.location()
    path = f"{loc.path.rstrip('/')}/dkapprox-leases/{address.branch}/{address.group}"
    return replace(loc, url=path if loc.local else f"{loc.protocol}://{path}", path=path)


@dataclass(frozen=True)
class ForkWriter:
    """Writes one block and its checksum through a fresh copy of a fork, and returns that fork (its change)."""

    fork: object  # icechunk ForkSession of the work branch (pickled as its bytes)
    group: str
    block_writer: type  # dkapprox.io.writer.BlockWriter: writes a block, then its checksum
    lease: object = None  # dkapprox.io._lease.LeaseCheck
    metadata: tuple = ()  # the features' and blocks_done's zarr metadata, read once on the driver

    @classmethod
    def planned(cls, fork, group, block_writer, lease=None):
        """A writer whose blocks open no metadata: three reads through the fork a block, 2-8 ms, saved."""
        import zarr

        node = zarr.open_group(fork.store, path=group, mode="r")
        return cls(fork, group, block_writer, lease, tuple(node[name].metadata for name in (FEATURES, BLOCKS_DONE)))

    def __call__(self, block, index):
        from zarr import Array
        from zarr.core.array import AsyncArray
        from zarr.storage import StorePath

        fork = pickle.loads(pickle.dumps(self.fork))  # one block's changes a fork: merged once each
        features, done = (Array(AsyncArray(meta, StorePath(fork.store, f"{self.group}/{name}"), _WRITE_CONFIG))
                          for meta, name in zip(self.metadata, (FEATURES, BLOCKS_DONE), strict=True))
        self.block_writer(features, done, lease=self.lease, fresh=True, lend=lent)(block, index)  # a retry: a new copy
        return fork


def lent(data):
    """A zarr Buffer of a chunk's bytes (a memoryview) that an Icechunk store stores without copying them.

    icechunk 1.x stores ``value.to_bytes()``, a copy (0.9 ms for 10 MB, on zarr's one event-loop thread:
    1.36 s against 1.76 s for 100 such blocks); its Rust side reads any buffer, and icechunk 2.3 passes
    ``as_buffer_like()`` itself (earth-mover/icechunk#2332).
    """
    return _lending_buffer().from_bytes(data)


@functools.cache
def _lending_buffer():
    from zarr.core.buffer import cpu

    class Lent(cpu.Buffer):
        def to_bytes(self):
            return memoryview(self.as_numpy_array())  # no copy; read before the write returns

    return Lent


def write_forks(features, writer: ForkWriter, blocks, memory) -> list:
    """The forks of ``blocks`` written by ``writer``, under the active distributed client if any."""
    from .. import utils
    from ..cluster import active_client, explain_worker_deaths, run

    lazy = engine.store_blocks(features, writer, blocks, name=f"dkapprox-icechunk-{uuid.uuid4().hex}", gather=True)
    client = active_client()
    if client is not None:
        return run(client, lazy, memory=memory, progress=utils.where())
    with explain_worker_deaths(memory, objs=(lazy,)):
        (forks,) = utils.compute(lazy)
    return forks


def write_icechunk(features, address: Address, *, header, inputs, identities, memory, overwrite, refresh,
                   wait, lease_ttl, compression, started, writer, commit_every=None):
    """Write ``features`` to ``address`` (see the module notes); a :class:`~dkapprox.io.WriteReport`.

    ``writer``: the Zarr writer's parts this one shares (``BlockWriter``, ``WriteReport``, ``identify``),
    handed in by :mod:`dkapprox.io.writer`, which calls this.
    """
    every = commit_every or os.environ.get("DKAPPROX_COMMIT_EVERY") or COMMIT_EVERY
    try:
        every = int(every)
    except (TypeError, ValueError):
        every = 0
    if every < 1:
        raise ValueError(f"commit_every must be a positive number of blocks, got {commit_every!r}")
    repo = address.repository(create=True)
    lease = acquire(lease_location(address), wait=wait, ttl=lease_ttl)
    try:
        job = _Job(repo, address, header, identities, compression, writer)
        resumed, refreshed = job.prepare(overwrite=overwrite, refresh=refresh)
        todo = job.todo()
        total = int(np.prod(header["layout"]["numblocks"]))
        commits = 0
        for start in range(0, len(todo), every):
            job.write(features, todo[start:start + every], lease, memory, written=total - len(todo) + start)
            commits += 1
        lease.check()
        snapshot, visible = job.finish(inputs, lease)
        log.info("%s: the branch shows snapshot %s, %.3f s after the last block was written (%d commits)", address,
                 snapshot, visible, commits + 1 + (not resumed))
    finally:
        lease.release()
    layout = header["layout"]
    return writer.WriteReport(
        path=str(address), blocks_total=total, blocks_written=len(todo), blocks_skipped=total - len(todo),
        seconds=time.perf_counter() - started, shape=tuple(layout["shape"]), chunks=tuple(layout["chunks"]),
        dtype=np.dtype(layout["dtype"]).name, resumed=resumed, refreshed=refreshed, snapshot=snapshot,
        commits=commits + 1 + (not resumed), commit_seconds=visible)


class _Job:
    """One job's work branch: prepared, written batch by batch, then finished onto the output branch."""

    def __init__(self, repo, address, header, identities, compression, writer):
        self.repo, self.address, self.header, self.writer = repo, address, header, writer
        self.identities, self.compression = identities, compression
        self.work = work_branch(address)
        branches = repo.list_branches()
        self.tip = repo.lookup_branch(address.branch) if address.branch in branches else None
        self.has_work = self.work in branches
        self.last_block = None  # when this run's last block was written (perf_counter)

    def _info(self, branch):
        import zarr

        session = self.repo.readonly_session(branch=branch)
        try:
            node = zarr.open(session.store, path=self.address.group, mode="r")
        except (KeyError, FileNotFoundError):  # zarr's NodeNotFoundError and GroupNotFoundError too
            return None, False
        return (output_attributes(node) if isinstance(node, zarr.Group) else None), True

    def prepare(self, *, overwrite, refresh):
        """(resumed, refreshed): go on with this job's work branch, or start it; refusals as a Zarr output's."""
        where = str(self.address)
        if self.has_work:
            info, _ = self._info(self.work)
            if info is not None and not overwrite:
                diffs = _job_differences(info, self.header)
                if diffs:
                    raise ResumeMismatchError(
                        f"{where}: an unfinished job of another plan is on {self.work} ({'; '.join(diffs)}); rerun "
                        "that job to finish it, or pass overwrite=True to start this one")
                if info.get("inputs_digest") != self.header["inputs_digest"]:
                    if not refresh:
                        raise changed_error(where, _changes(info, self.header))
                    self._start()
                    return False, True
                if info.get("base") == self.tip:
                    return True, False
                log.warning("%s: the branch moved since the unfinished job on %s began; starting over", where,
                            self.work)
        elif self.tip is not None and not overwrite:
            refreshed = check_existing(where, *self._info(self.address.branch), self.header, refresh=refresh,
                                       version=f"snapshot {self.tip}")
            self._start()
            return False, refreshed
        self._start()
        return False, False

    def _start(self):
        """The work branch at the output branch's tip (main's for a new branch), the plan its first commit."""
        import zarr

        base = self.tip or self.repo.lookup_branch("main")
        if self.has_work:
            self.repo.reset_branch(self.work, base)
        else:
            self.repo.create_branch(self.work, base)
            self.has_work = True
        session = self.repo.writable_session(self.work)
        root = zarr.open_group(session.store, mode="a")
        if self.address.group in root:
            del root[self.address.group]
        group = root.create_group(self.address.group, attributes={ATTRIBUTE: {**self.header, "base": self.tip}})
        ensure_arrays(group, self.header["layout"], self.compression)
        session.commit(f"dkapprox: plan of {self.address.group}", metadata={"dkapprox": {"step": "plan"}})

    def todo(self):
        import zarr

        session = self.repo.readonly_session(branch=self.work)
        done = blocks_done(zarr.open_group(session.store, path=self.address.group, mode="r"))
        return [tuple(int(i) for i in index) for index in np.argwhere(~done)]

    def write(self, features, batch, lease, memory, *, written):
        """Write ``batch`` through forks of the work branch, merge them here and commit them."""
        session = self.repo.writable_session(self.work)
        writer = ForkWriter.planned(session.fork(), self.address.group, self.writer.BlockWriter, lease.checker())
        forks = write_forks(features, writer, batch, memory)
        self.last_block = time.perf_counter()
        lease.check()  # never commit under another run's lease
        session.merge(*forks)
        total = int(np.prod(self.header["layout"]["numblocks"]))
        session.commit(f"dkapprox: {written + len(batch)} of {total} blocks of {self.address.group}",
                       metadata={"dkapprox": {"step": "blocks", "blocks": written + len(batch), "of": total}})

    def finish(self, inputs, lease):
        """Mark the group complete, commit, and move the output branch there once: (snapshot, seconds from
        the last block written, or from now if none was, to the branch showing it).

        The blocks' records are not read again (2 ms a block): called only after every block :meth:`todo`
        listed came back in a fork, after its record, and was merged and committed."""
        import zarr

        started = time.perf_counter()
        session = self.repo.writable_session(self.work)
        group = zarr.open_group(session.store, path=self.address.group, mode="r+")
        total = int(np.prod(self.header["layout"]["numblocks"]))
        now = [self.writer.identify(z, where, self.address.location()) for z, where in inputs]
        if [i.digest for i in now] != [i.digest for i in self.identities]:
            raise InputDataError(f"{self.address}: an input changed while it was read; rerun the job")
        if not has_listing(group, self.header["inputs_digest"]):
            save_listing(group, self.identities)
        info = dict(output_attributes(group))
        info.update(status="complete", completed=utc_now(), inputs=self.header["inputs"],
                    inputs_digest=self.header["inputs_digest"], layout=self.header["layout"])
        group.update_attributes({ATTRIBUTE: info})
        plan = self.header["plan"]
        snapshots = [i.stamps[0] for i in self.identities if i.stamp == "snapshot"]
        metadata = {"dkapprox": {"step": "complete", "group": self.address.group, "inputs": [i.path for i in
                    self.identities], "input_snapshots": snapshots, "model": plan.get("model"),
                    "plan": canonical_json(plan), "blocks": total}}
        message = (f"dkapprox: {self.address.group} of {', '.join(i.path for i in self.identities) or 'memory'}"
                   f" with model {plan.get('model') or '-'}")
        lease.check()
        snapshot = session.commit(message, metadata=metadata)
        try:
            if self.tip is None:
                self.repo.create_branch(self.address.branch, snapshot)
            else:
                self.repo.reset_branch(self.address.branch, snapshot, from_snapshot_id=self.tip)
        except Exception as exc:  # noqa: BLE001 - the features stay on the work branch
            if "conflict" not in str(exc).lower():
                raise failure(str(self.address), exc) from exc
            raise StoreBusyError(f"{self.address}: the branch moved while this job ran (from {self.tip}); the "
                                 f"finished features stay at snapshot {snapshot} on {self.work}: rerun the job "
                                 "to write them over the new tip", holder=None) from exc
        visible = time.perf_counter() - (self.last_block or started)
        self.repo.delete_branch(self.work)
        return snapshot, visible


def check_existing(where, info, present, header, *, refresh, version) -> bool:
    """Whether a group already at ``where`` (``info`` its dkapprox attributes, if any) is refreshed; the
    refusals of a finished output otherwise: another job's, the same one's, or a node that is no output."""
    if info is not None:
        diffs = _job_differences(info, header)
        if diffs:
            raise OutputExistsError(f"{where}: features of another job ({'; '.join(diffs)}) are there; pass "
                                    "overwrite=True to replace them, or name another group")
        if info.get("inputs_digest") == header["inputs_digest"]:
            raise OutputExistsError(f"{where}: these features are on the branch already ({version}); pass "
                                    "overwrite=True to write them again")
        if not refresh:
            raise changed_error(where, _changes(info, header))
        return True
    if present:
        raise OutputExistsError(f"{where}: the branch holds that group, which is no dkapprox output; pass "
                                "overwrite=True to replace it, or name another group")
    return False


def unfinished_job(address: Address):
    """The job under way (or killed) on the address's branch and group, as ``describe`` shows it, or None:
    its work branch, that branch's snapshot, and the blocks committed there."""
    import zarr

    if address.branch is None:
        return None
    repo = address.repository()
    work = work_branch(address)
    if work not in repo.list_branches():
        return None
    session = repo.readonly_session(branch=work)
    job = {"work_branch": work, "snapshot": session.snapshot_id, "status": "planning", "blocks_done": 0}
    try:
        node = zarr.open_group(session.store, path=address.group, mode="r")
    except (KeyError, FileNotFoundError):  # zarr's GroupNotFoundError too: the plan is not committed yet
        return job
    info = output_attributes(node) or {}
    layout = info.get("layout") or {}
    total = int(np.prod(layout["numblocks"])) if layout else None
    job.update(status=info.get("status"), blocks_done=int(blocks_done(node).sum()) if total else 0,
               blocks_total=total, plan=info.get("plan"), created=info.get("created"))
    return job


def _changes(info, header):
    from ._identity import InputChanges

    rows = int(header["layout"]["shape"][0])
    return [InputChanges(", ".join(i["path"] for i in header["inputs"]) or "the input", rows_before=rows,
                         rows_now=rows, everything=True, unit="snapshots", rows=((0, rows),))]


__all__ = ["COMMIT_EVERY", "address_of", "is_icechunk", "unfinished_job", "write_icechunk"]
