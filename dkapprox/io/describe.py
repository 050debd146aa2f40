"""describe(path): what a dkapprox output store or another Zarr store holds, as JSON."""

from __future__ import annotations

import numpy as np

from ..errors import InputMissingError
from ._icechunk import is_icechunk, parse
from ._icechunk_output import lease_location, unfinished_job
from ._lease import read_lease
from ._location import locate
from ._verify import input_status
from ._zarr_store import FEATURES, blocks_done, open_node, output_attributes, reading

__all__ = ["describe"]


def describe(path, *, check_input=False, storage_options=None) -> dict:
    """A JSON-safe description of a Zarr store (metadata only).

    ``kind`` says which it is:

    - ``"features"``: a dkapprox output store: shape, chunks, dtype,
      compression, status (``"writing"`` or ``"complete"``), blocks_total,
      blocks_done, plan, package_version, created and completed times, and
      ``lease``: the run holding the store (host, pid, started, heartbeat,
      expires; see :func:`dkapprox.io.write_features`), or None; ``inputs``: each
      input's recorded identity (path, metadata, chunks listed, digest) and,
      with ``check_input=True``, whether it still matches (``matches``, and
      ``why`` and ``changes`` where it does not; one listing each); for an
      Icechunk address, ``job``: a job under way or killed on its branch and
      group (its work branch, snapshot, status and blocks committed), and
      where the branch shows no features yet, that job's fields with
      ``visible: False``;
    - ``"array"`` / ``"group"``: any other Zarr array (shape, chunks, dtype,
      zarr_format) or group (its arrays).

    A model directory is described by :func:`dkapprox.models.describe`
    (``dkapprox info PATH`` describes either).

    Raises
    ------
    InputMissingError
        Nothing at ``path``.
    InputDataError
        Broken metadata.

    Examples
    --------
    >>> import tempfile, dask.array as da
    >>> from dkapprox.io import describe, write_features
    >>> out = tempfile.mkdtemp() + "/z.zarr"
    >>> _ = write_features(da.ones((100, 4), chunks=(50, 4)), out, plan={"job": "ones"})
    >>> d = describe(out)
    >>> d["kind"], d["status"], d["blocks_done"], d["shape"]
    ('features', 'complete', 2, [100, 4])
    """
    address = parse(path, storage_options, kind="features") if is_icechunk(path) else None
    loc = lease_location(address) if address is not None else locate(path, storage_options)
    job = unfinished_job(address) if address is not None else None
    try:
        node, where = open_node(path, storage_options=storage_options, kind="features")
    except InputMissingError:
        if job is None:
            raise
        # the branch shows no features yet: the job under way (or killed) writes them on its work branch
        return {"kind": "features", "path": str(address), "status": job["status"], "visible": False,
                "blocks_total": job.get("blocks_total"), "blocks_done": job["blocks_done"], "plan": job.get("plan"),
                "created": job.get("created"), "lease": _holder(loc), "job": job}
    described = _describe(node, where, loc, check_input, storage_options, path)
    if job is not None:  # tonight's job on a branch that shows last night's features
        described["job"] = job
    return described


def _describe(node, where, loc, check_input, storage_options, path):
    with reading(where):
        if hasattr(node, "shape"):
            return {"kind": "array", "path": where, **_array_fields(node),
                    "zarr_format": node.metadata.zarr_format}
        info = output_attributes(node)
        if info is None:
            return {"kind": "group", "path": where, "zarr_format": node.metadata.zarr_format,
                    "arrays": {name: _array_fields(a) for name, a in sorted(node.arrays())}}
        layout = info["layout"]
        total = int(np.prod(layout["numblocks"]))
        # a complete store had every marker when it was completed (the writer checks, then says so), so
        # its count needs no listing: 10^5 markers are a hundred LIST pages on S3. verify lists them again
        done = total if info.get("status") == "complete" else int(blocks_done(node).sum())
        return {
            "kind": "features", "path": where, "shape": layout["shape"], "chunks": layout["chunks"],
            "dtype": np.dtype(layout["dtype"]).name, "compression": layout.get("compression"),
            "status": info.get("status"), "blocks_total": total, "blocks_done": done,
            "plan": info.get("plan"), "package_version": info.get("package_version"),
            "created": info.get("created"), "completed": info.get("completed"),
            "features_array": FEATURES, "lease": _holder(loc),
            "inputs": input_status(node, info, storage_options=storage_options, store=path) if check_input else [
                {k: s.get(k) for k in ("path", "chunks_listed", "digest", "stamp", "metadata")}
                for s in info.get("inputs") or []],
        }


def _holder(loc):
    """Who holds the store's lease (an expired one included: its run died), or None."""
    try:
        doc = read_lease(loc)
    except OSError:
        return None
    if not doc:
        return None
    return {k: doc.get(k) for k in ("host", "pid", "started", "heartbeat", "expires")}


def _array_fields(z) -> dict:
    return {"shape": [int(s) for s in z.shape], "chunks": [int(c) for c in z.chunks], "dtype": str(z.dtype)}
