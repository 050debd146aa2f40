"""Do the workers see the job's local paths? Asked before anything is written.

A local output path written by workers on other hosts would land on each
worker's own disk: blocks scattered over machines, the store on the client
empty, and the job "complete". So before the first byte, the client writes a
nonce where the job will write (and reads the input's metadata where the job
will read), and every worker must read back exactly those bytes. URLs
(``s3://...``) are the same place for everyone and are not probed.

Without a distributed client (the threaded scheduler) there is nothing to ask.
"""

from __future__ import annotations

import hashlib
import os
import secrets

from ..errors import UnsharedPathError
from ._location import Location

PROBE_PREFIX = ".dkapprox-probe-"


def current_client():
    """The distributed client dask would compute on, or None."""
    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    try:
        return default_client()
    except ValueError:
        return None


def require_shared(outputs=(), inputs=(), client=None):
    """Raise :class:`UnsharedPathError` unless every worker sees these local paths as the client does.

    ``outputs`` are Locations the job will create or write (the nonce goes to
    the nearest folder of theirs that exists, and is removed again);
    ``inputs`` are Locations it will read (their metadata must read the same).
    """
    client = client or current_client()
    local_out = [loc for loc in outputs if loc.local]
    local_in = [loc for loc in inputs if loc.local]
    if client is None or not (local_out or local_in):
        return
    checks = [_input_check(loc) for loc in local_in]
    written = []
    try:
        for loc in local_out:
            check = _output_check(loc)
            if check is not None:
                written.append(check[0])
                checks.append(check)
        checks = [c for c in checks if c is not None]
        if not checks:
            return
        answers = client.run(_read_back, [(path, digest) for path, digest, _ in checks], on_error="return")
    finally:
        for path in written:
            try:
                os.unlink(path)
            except OSError:
                pass
    _raise_unless_all_see(answers, checks, client)


def _input_check(loc: Location):
    """(a metadata file of the input, its digest, the input) or None if none is readable here."""
    for name in ("zarr.json", ".zarray", ".zgroup"):
        path = os.path.join(loc.path, name)
        try:
            with open(path, "rb") as f:
                return path, hashlib.sha256(f.read()).hexdigest(), str(loc)
        except OSError:
            continue
    return None


def _output_check(loc: Location):
    """Write a nonce in the output's nearest existing folder: (its path, digest, the output), or None."""
    folder = loc.path
    for _ in range(256):  # bounded walk up to the root
        if os.path.isdir(folder):
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
    nonce = secrets.token_hex(16).encode()
    path = os.path.join(folder, PROBE_PREFIX + secrets.token_hex(8))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:
        return None  # not writable here either: the job's own write will say so
    with os.fdopen(fd, "wb") as f:
        f.write(nonce)
    return path, hashlib.sha256(nonce).hexdigest(), str(loc)


def _read_back(expected):
    """On a worker: for each (path, digest), what it sees there ('ok' or why not). Reads only."""
    seen = []
    for path, digest in expected:
        try:
            with open(path, "rb") as f:
                got = hashlib.sha256(f.read()).hexdigest()
        except FileNotFoundError:
            seen.append("no such file")
            continue
        except OSError as exc:
            seen.append(f"{type(exc).__name__}: {exc.strerror or exc}")
            continue
        seen.append("ok" if got == digest else "other contents")
    return seen


def _raise_unless_all_see(answers, checks, client):
    names = {address: info.get("name", address) for address, info in client.scheduler_info()["workers"].items()}
    blind = {}
    for address, seen in answers.items():
        if isinstance(seen, BaseException):
            seen = [f"{type(seen).__name__}: {seen}"] * len(checks)
        for (_, _, where), what in zip(checks, seen):
            if what != "ok":
                blind.setdefault(where, []).append(f"{names.get(address, address)} ({address}): {what}")
    if not blind:
        return
    where, workers = next(iter(blind.items()))
    more = len(workers) - 3
    raise UnsharedPathError(
        f"{where}: the workers do not see this path as the client does ({'; '.join(workers[:3])}"
        f"{f'; and {more} more' if more > 0 else ''}): it is on this machine's disk, and they run elsewhere. "
        "Use storage every worker mounts at the same path, or a URL (e.g. s3://bucket/out.zarr); "
        "nothing was written.")

