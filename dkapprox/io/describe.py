"""describe(path): what a dkapprox output store or another Zarr store holds, as JSON."""

from __future__ import annotations

import numpy as np

from ._icechunk import is_icechunk, parse
from ._icechunk_output import lease_location
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
      ``why`` and ``changes`` where it does not; one listing each);
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
    loc = lease_location(parse(path, storage_options, kind="features")) if is_icechunk(path) else locate(
        path, storage_options)
    node, where = open_node(path, storage_options=storage_options, kind="features")
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
