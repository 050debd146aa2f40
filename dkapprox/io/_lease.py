"""A lease on an output store, so that two runs of one job never write it at once.

A job takes the lease before its first block and gives it back at finalize
(or when it fails in-process). The lease is one small JSON document in the
store, ``OUT/dkapprox-lease.json``::

    kind, format      "dkapprox-lease", 1
    token             random; every change of the document compares it
    host, host_id     hostname, and boot id + pid namespace (Linux) telling "this very host" apart
    pid, pid_start    the holder process and its start time (/proc/<pid>/stat), against pid reuse
    started           when this holder took the lease (UTC)
    heartbeat         its last renewal (UTC)
    expires           heartbeat + ttl (UTC): after this anyone may take the lease over
    ttl               seconds

A daemon thread renews it every ``ttl / 4``. A renewal that fails (store
briefly unreachable) is logged and retried; once the lease would expire
before the next try, the lease is *lost*: the job's block writers (which
check the document before every block, on whatever worker they run) and
``finalize`` raise :class:`~dkapprox.errors.LeaseLostError` rather than
write under someone else's lease.

Another run finding a live lease raises :class:`~dkapprox.errors.StoreBusyError`
naming the holder, or waits (``wait=``). It takes the lease over at once when
the holder is gone (same host, pid dead or reused), and otherwise when the
lease expired. The TTL is 90 s unless ``DKAPPROX_LEASE_TTL`` (seconds) or
``lease_ttl=`` says otherwise. Expiry compares wall clocks of different
hosts: they must agree to well within the TTL (NTP does).

How a change is made safe between two processes:

- **local disk**: creation writes a temporary file and ``os.link``-s it to
  the lease name (fails if the name exists: atomic, also on NFS). Renewal,
  takeover and release run read-compare-replace (``os.replace``) under an
  ``flock`` of the store directory; where ``flock`` does not work (some
  network filesystems) they run without it, and two processes that *both*
  judge one stale lease taken over within the same few milliseconds could
  both believe they won; each then finds the other's token at its next
  renewal or block check and stops.
- **S3** (``s3://``, ``s3a://``): conditional writes. Creation is a PUT with
  ``If-None-Match: *``; renewal and takeover a PUT with ``If-Match: <ETag
  read>``; release a DELETE with ``If-Match``. The server decides, so there
  is no window (AWS S3 since 2024, moto, MinIO). A server that refuses a
  conditional DELETE gets a read-compare-delete.
- **other fsspec URLs**: write, wait ``SETTLE`` seconds, read back: the
  writer whose token is there won. Safe unless a writer takes longer than
  ``SETTLE`` between its existence check and its write.

What remains in every case: a block writer checks the lease, then writes its
block; a lease lost in between (between the check and the end of that one
block's write) does not stop that block. A worker process reads the lease at
most once per ``RECHECK`` seconds (a read is a request to the object store,
as costly as a small block's write: on the multi-host bed one per block cost
about 5% of a featurize's throughput), so the window is that long at most.
Blocks of one job are deterministic (the same bytes from any run), so this
matters only against a run of another job with ``overwrite=True`` after the
lease expired.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
import weakref
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from ..errors import LeaseLostError, StoreBusyError
from ._common import package_version
from ._location import Location

log = logging.getLogger("dkapprox")

LEASE_NAME = "dkapprox-lease.json"
LEASE_PREFIX = "dkapprox-lease"  # the lease and its temporary files: not part of the Zarr store
LEASE_KIND, LEASE_FORMAT = "dkapprox-lease", 1
DEFAULT_TTL = 90.0  # seconds: a nightly job's rerun after a crash on another host waits at most this
TTL_ENV = "DKAPPROX_LEASE_TTL"
WAIT_LIMIT = 24 * 3600.0  # wait=True: at most a day
SETTLE = 1.0  # other fsspec filesystems: seconds between writing a lease and reading it back
RECHECK = 1.0  # seconds a worker trusts a lease it read as this job's, unexpired (see the window above)

__all__ = ["DEFAULT_TTL", "LEASE_NAME", "LEASE_PREFIX", "Lease", "LeaseCheck", "acquire", "read_lease", "resolve_ttl"]


def resolve_ttl(ttl=None) -> float:
    """The lease's time to live in seconds: ``ttl``, else ``$DKAPPROX_LEASE_TTL``, else 90."""
    if ttl is None:
        text = os.environ.get(TTL_ENV, "").strip()
        if not text:
            return DEFAULT_TTL
        try:
            ttl = float(text)
        except ValueError:
            raise ValueError(f"{TTL_ENV}={text!r}: expected seconds, e.g. 90") from None
    ttl = float(ttl)
    if not 0.2 <= ttl <= 86400:
        raise ValueError(f"lease ttl must be between 0.2 and 86400 seconds, got {ttl}")
    return ttl


# -- who and when ----------------------------------------------------------------------


def _now():
    return datetime.now(timezone.utc)


def _stamp(moment) -> str:
    return moment.isoformat(timespec="milliseconds")


def _parse(text):
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _host_id() -> str:
    """This kernel's boot id and this pid namespace: equal only where pids mean the same processes."""
    parts = []
    with contextlib.suppress(OSError):
        with open("/proc/sys/kernel/random/boot_id") as f:
            parts.append(f.read().strip())
    with contextlib.suppress(OSError):
        parts.append(f"pidns:{os.stat('/proc/self/ns/pid').st_ino}")
    return "/".join(parts)


def _process_start(pid):
    """The start time of process ``pid`` (clock ticks since boot, as a string), None if it is gone."""
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]  # field 22 of the whole line
    except (OSError, IndexError, ValueError):
        pass
    try:
        import psutil

        return f"{psutil.Process(int(pid)).create_time():.2f}"
    except Exception:  # noqa: BLE001 - no psutil, no such process, or not allowed: unknown
        return None


def _alive(pid, started) -> bool:
    """True if process ``pid`` runs and is the one that started at ``started`` (pid reuse)."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError, TypeError):
        pass  # another user's process exists
    now = _process_start(pid)
    return started is None or now is None or now == started


def _new_document(ttl, token, started=None):
    now = _now()
    return {"kind": LEASE_KIND, "format": LEASE_FORMAT, "token": token, "host": socket.gethostname(),
            "host_id": _host_id(), "pid": os.getpid(), "pid_start": _process_start(os.getpid()),
            "started": started or _stamp(now), "heartbeat": _stamp(now),
            "expires": _stamp(now + timedelta(seconds=ttl)), "ttl": ttl, "package_version": package_version()}


def _encode(doc) -> bytes:
    return json.dumps(doc, sort_keys=True, indent=1).encode()


def _decode(raw):
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _expired(doc, now=None) -> bool:
    expires = _parse(doc.get("expires"))
    return expires is None or expires <= (now or _now())


def describe_holder(doc) -> str:
    return (f"host {doc.get('host', '?')}, pid {doc.get('pid', '?')}, started {doc.get('started', '?')}, "
            f"last heartbeat {doc.get('heartbeat', '?')}, expires {doc.get('expires', '?')}")


def _stale(doc):
    """Why a lease document may be taken over now ('expired', 'holder gone', 'this process'), else None."""
    if doc.get("kind") != LEASE_KIND or not isinstance(doc.get("token"), str):
        return "unreadable"
    if _expired(doc):
        return "expired"
    if doc.get("host") == socket.gethostname() and doc.get("host_id") == _host_id():
        if not _alive(doc.get("pid"), doc.get("pid_start")):
            return "holder gone"
        if doc.get("pid") == os.getpid():
            return "this process"
    return None


# -- where the document lives ------------------------------------------------------


class _LocalBackend:
    """A lease file on a local (or network-mounted) disk; versions are the raw bytes read."""

    def __init__(self, loc: Location):
        self.folder = loc.path
        self.path = os.path.join(loc.path, LEASE_NAME)

    def read(self):
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None, None
        return _decode(raw), raw

    @contextlib.contextmanager
    def _locked(self):
        fd = None
        try:
            import fcntl

            fd = os.open(self.folder, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except (ImportError, OSError):  # no flock here: the documented window remains
            if fd is not None:
                os.close(fd)
            fd = None
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)  # closing releases the flock

    def _temporary(self, raw) -> str:
        tmp = os.path.join(self.folder, f"{LEASE_PREFIX}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        return tmp

    def create(self, doc) -> bool:
        os.makedirs(self.folder, exist_ok=True)
        tmp = self._temporary(_encode(doc))
        try:
            with self._locked():
                os.link(tmp, self.path)
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)

    def replace(self, doc, version) -> bool:
        tmp = self._temporary(_encode(doc))
        try:
            with self._locked():
                if self.read()[1] != version:
                    return False
                os.replace(tmp, self.path)
                tmp = None
                return True
        finally:
            if tmp is not None:
                os.unlink(tmp)

    def delete(self, version) -> bool:
        with self._locked():
            if self.read()[1] != version:
                return False
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.rmdir(self.folder)  # only if empty: a store this job never got to create leaves nothing
        return True


class _S3Backend:
    """A lease object on S3, changed only by conditional requests; versions are ETags."""

    def __init__(self, loc: Location):
        fs, path = loc.filesystem()
        self.fs = fs
        self.bucket, _, prefix = path.partition("/")
        self.key = f"{prefix.rstrip('/')}/{LEASE_NAME}" if prefix else LEASE_NAME

    def read(self):
        from fsspec.asyn import sync

        async def get():
            response = await self.fs._call_s3("get_object", Bucket=self.bucket, Key=self.key)
            body = response["Body"]
            try:
                return await body.read(), response["ETag"]
            finally:
                body.close()

        try:
            raw, etag = sync(self.fs.loop, get)
        except FileNotFoundError:
            return None, None
        return _decode(raw), etag

    @staticmethod
    @contextlib.contextmanager
    def _lost_race(result):
        """A failed precondition (412) or a conflicting conditional write (409) sets result[0] False."""
        try:
            yield
        except FileExistsError:
            result[0] = False
        except OSError as exc:
            text = str(exc).lower()
            if "pre-condition" in text or "precondition" in text or "conditional" in text or "conflict" in text:
                result[0] = False
            else:
                raise

    def create(self, doc) -> bool:
        result = [True]
        with self._lost_race(result):
            self.fs.call_s3("put_object", Bucket=self.bucket, Key=self.key, Body=_encode(doc), IfNoneMatch="*")
        return result[0]

    def replace(self, doc, version) -> bool:
        result = [True]
        with self._lost_race(result):
            self.fs.call_s3("put_object", Bucket=self.bucket, Key=self.key, Body=_encode(doc), IfMatch=version)
        return result[0]

    def delete(self, version) -> bool:
        result = [True]
        try:
            with self._lost_race(result):
                self.fs.call_s3("delete_object", Bucket=self.bucket, Key=self.key, IfMatch=version)
        except OSError as exc:  # a server without conditional deletes: compare, then delete
            log.debug("conditional delete refused (%s); reading back first", exc)
            if self.read()[1] != version:
                return False
            self.fs.call_s3("delete_object", Bucket=self.bucket, Key=self.key)
        self.fs.invalidate_cache(f"{self.bucket}/{self.key}")
        return result[0]


class _FsspecBackend:
    """Any other fsspec filesystem: write, wait SETTLE seconds, read back (see the module notes)."""

    def __init__(self, loc: Location):
        self.fs, root = loc.filesystem()
        self.path = f"{root.rstrip('/')}/{LEASE_NAME}"

    def read(self):
        try:
            raw = self.fs.cat_file(self.path)
        except FileNotFoundError:
            return None, None
        return _decode(raw), raw

    def _write_and_confirm(self, raw) -> bool:
        self.fs.pipe_file(self.path, raw)
        if "memory" not in self.fs.protocol:  # one process's memory: nobody else can race
            time.sleep(SETTLE)
        return self.read()[1] == raw

    def create(self, doc) -> bool:
        if self.read()[0] is not None:
            return False
        return self._write_and_confirm(_encode(doc))

    def replace(self, doc, version) -> bool:
        if self.read()[1] != version:
            return False
        return self._write_and_confirm(_encode(doc))

    def delete(self, version) -> bool:
        if self.read()[1] != version:
            return False
        self.fs.rm_file(self.path)
        return True


def _backend(loc: Location):
    if loc.local:
        return _LocalBackend(loc)
    if loc.protocol in ("s3", "s3a"):
        return _S3Backend(loc)
    return _FsspecBackend(loc)


def read_lease(loc: Location):
    """The lease document at ``loc`` (a dict, ``{}`` if unreadable), or None if there is none."""
    return _backend(loc).read()[0]


# -- the lease ---------------------------------------------------------------------------


_held = weakref.WeakValueDictionary()  # token -> Lease of this process not yet released
_confirmed = {}  # (store url, token) -> time.monotonic() a LeaseCheck in this process last found it ours


@dataclass(frozen=True)
class LeaseCheck:
    """Shipped with the block writer: raises LeaseLostError unless the lease is still this job's."""

    loc: Location
    token: str

    def __call__(self):
        key = (self.loc.url, self.token)
        now = time.monotonic()
        if key in _confirmed and now - _confirmed[key] < RECHECK:
            return
        try:
            doc = _backend(self.loc).read()[0]
        except FileNotFoundError:
            doc = None
        if doc is None or doc.get("token") != self.token:
            holder = f" ({describe_holder(doc)} holds it now)" if doc else ""
            raise LeaseLostError(f"{self.loc}: this run lost its lease on the store{holder}; stopped "
                                 "writing. Rerun the same job to finish it")
        if _expired(doc):
            raise LeaseLostError(f"{self.loc}: this run's lease on the store expired at {doc.get('expires')} "
                                 "(its heartbeat could not be renewed); stopped writing. Rerun the same job")
        _confirmed[key] = now


class Lease:
    """This process's lease on ``loc``; renewed by a daemon thread until :meth:`release`."""

    def __init__(self, loc, backend, doc, ttl):
        self.loc, self._backend, self.doc, self.ttl = loc, backend, doc, ttl
        self.token = doc["token"]
        self.period = ttl / 4
        self._valid_until = time.monotonic() + ttl
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.lost = None  # why, once lost
        self.released = False
        _held[self.token] = self

    def checker(self) -> LeaseCheck:
        return LeaseCheck(self.loc, self.token)

    def start_heartbeat(self):
        thread = threading.Thread(target=_heartbeat, args=(weakref.ref(self), self._stop, self.period),
                                  name=f"dkapprox-lease-{self.token[:8]}", daemon=True)
        thread.start()
        return thread

    def renew(self) -> bool:
        """Renew once: True if renewed, else False (a failure is logged; a lost lease sets ``lost``)."""
        with self._lock:
            if self.lost or self.released:
                return False
            try:
                doc, version = self._backend.read()
                if doc is None or doc.get("token") != self.token:
                    self._lose("taken over" + (f" by {describe_holder(doc)}" if doc else " (the lease is gone)"))
                    return False
                new = dict(doc, heartbeat=_stamp(_now()), expires=_stamp(_now() + timedelta(seconds=self.ttl)))
                if not self._backend.replace(new, version):
                    self._lose("changed by another process during renewal")
                    return False
                self.doc = new
                self._valid_until = time.monotonic() + self.ttl
                return True
            except Exception as exc:  # noqa: BLE001 - store briefly unreachable: retry until expiry
                left = self._valid_until - time.monotonic()
                if left <= self.period:
                    self._lose(f"could not be renewed for {self.ttl - left:.1f} s ({type(exc).__name__}: {exc})")
                else:
                    log.warning("%s: could not renew the lease (%s: %s); retrying, %.0f s before it expires",
                                self.loc, type(exc).__name__, exc, left)
                return False

    def _lose(self, why):
        self.lost = why
        self._stop.set()
        log.error("%s: lost the lease on the store (%s); this run stops writing", self.loc, why)

    def check(self):
        """Raise LeaseLostError if the lease was lost (before marking the store complete)."""
        if self.lost:
            raise LeaseLostError(f"{self.loc}: this run lost its lease on the store ({self.lost}); rerun the "
                                 "same job to finish it")
        self.checker()()

    def release(self):
        """Give the lease back (idempotent); a lease already taken over is left to its new holder."""
        with self._lock:
            if self.released:
                return
            self.released = True
            self._stop.set()
            _held.pop(self.token, None)
            try:
                doc, version = self._backend.read()
                if doc is not None and doc.get("token") == self.token:
                    self._backend.delete(version)
            except Exception as exc:  # noqa: BLE001 - it expires by itself; never hide the job's own error
                log.warning("%s: could not release the lease (%s: %s); it expires by itself at %s", self.loc,
                            type(exc).__name__, exc, self.doc.get("expires"))

    def _superseded(self):
        with self._lock:
            self.released = True
            self._stop.set()
            self.lost = "taken over by a later write of the same store in this process"


def _heartbeat(ref, stop, period):
    for _ in range(10**9):  # bounded in count; ends at release, loss, or when the lease is dropped
        if stop.wait(period):
            return
        lease = ref()
        if lease is None:
            return
        lease.renew()
        del lease


@atexit.register
def _release_all():
    for lease in list(_held.values()):
        lease.release()


def acquire(loc: Location, *, wait=False, ttl=None) -> Lease:
    """Take the lease on ``loc`` (see the module notes) and start its heartbeat.

    ``wait``: False raises StoreBusyError at once if a live holder has it;
    True waits (up to a day) for it to be released or to expire; a number
    waits at most that many seconds.
    """
    ttl = resolve_ttl(ttl)
    if wait is True:
        limit = WAIT_LIMIT
    elif wait is False or wait is None:
        limit = 0.0
    else:
        limit = float(wait)
        if not limit >= 0:
            raise ValueError(f"wait must be True, False or seconds >= 0, got {wait!r}")
    poll = min(max(ttl / 8, 0.05), 5.0)
    backend = _backend(loc)
    deadline = time.monotonic() + limit
    token = uuid.uuid4().hex
    said = False
    for _ in range(int(limit / poll) + 1000):  # bounded: polls until the deadline, plus lost races
        doc, version = backend.read()
        if doc is None:
            new = _new_document(ttl, token)
            if backend.create(new):
                return _taken(loc, backend, new, ttl)
            continue  # another run created it first: look at it
        why = _stale(doc)
        if why:
            new = _new_document(ttl, token)
            if backend.replace(new, version):
                if why == "this process":
                    earlier = _held.get(doc.get("token"))
                    if earlier is not None:
                        earlier._superseded()
                else:
                    log.info("%s: took over the lease of an earlier run (%s): %s", loc, why, describe_holder(doc))
                return _taken(loc, backend, new, ttl)
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            raise StoreBusyError(
                f"{loc}: another run is writing this store and holds its lease: {describe_holder(doc)} "
                f"(renewed while that run lives). Rerun later, or pass wait=True to wait for it",
                holder=doc)
        if not said:
            log.info("%s: waiting for the run holding the store (%s)", loc, describe_holder(doc))
            said = True
        time.sleep(min(poll, left))
    raise StoreBusyError(f"{loc}: could not take the store's lease (it kept changing hands)", holder=None)


def _taken(loc, backend, doc, ttl):
    lease = Lease(loc, backend, doc, ttl)
    lease.start_heartbeat()
    return lease
