"""Zarr stores on fsspec URLs whose network sessions are closed when the process exits.

Why this exists: zarr opens a URL with an *asynchronous* fsspec filesystem
(``asynchronous=True``), and s3fs closes its aiobotocore client (and so the
aiohttp session under it) only for synchronous instances, from a
``weakref.finalize`` it registers in ``set_session``; an asynchronous instance
is the caller's to close. Nobody closed it, so at interpreter exit the
garbage collector found open ``aiohttp.ClientSession`` objects and printed
``Unclosed client session`` / ``client_session: <...>`` on stderr: in the
client, and in every worker process that had read or written a block (the
store travels to the workers pickled and opens its own session there).

:class:`Store` is zarr's ``FsspecStore`` plus one thing: every store made or
unpickled in a process records its filesystem, and an ``atexit`` hook closes
their sessions on the event loop they were opened on (zarr's I/O loop). The
hook is registered after zarr's own (which stops that loop), so it runs first.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import weakref

import zarr.core.sync as zarr_sync
from zarr.storage import FsspecStore

_filesystems: weakref.WeakSet = weakref.WeakSet()
_lock = threading.Lock()
_CLOSE_TIMEOUT = 5.0  # seconds for all sessions; a store that does not answer must not hang the exit

__all__ = ["Store", "close_sessions"]


class Store(FsspecStore):
    """zarr's FsspecStore whose filesystem's sessions are closed at exit (see the module notes)."""

    def __init__(self, fs, *args, **kwargs):
        super().__init__(fs, *args, **kwargs)
        _track(fs)

    def __setstate__(self, state):  # unpickled on a worker: that process opens (and must close) its own
        self.__dict__.update(state)
        _track(self.fs)


def _track(fs):
    with _lock:
        _filesystems.add(fs)


async def _close(fs):
    creator = getattr(fs, "_s3creator", None)  # s3fs: the aiobotocore client context it entered
    if creator is not None and getattr(fs, "_s3", None) is not None:
        fs._s3, fs._s3creator = None, None
        await creator.__aexit__(None, None, None)
        return
    session = getattr(fs, "_session", None)  # http, gcsfs: an aiohttp.ClientSession
    if session is not None and hasattr(session, "close") and not getattr(session, "closed", True):
        await session.close()


async def _close_all(filesystems):
    results = await asyncio.gather(*(_close(fs) for fs in filesystems), return_exceptions=True)
    return [r for r in results if isinstance(r, BaseException)]


def close_sessions():
    """Close the network sessions of every store's filesystem in this process (idempotent).

    Runs at exit by itself; call it to release connections earlier. Errors are
    swallowed: at exit a store that is gone or unreachable has nothing to close.
    """
    with _lock:
        filesystems = list(_filesystems)
        _filesystems.clear()
    loop = zarr_sync.loop[0]
    if not filesystems or loop is None or loop.is_closed() or not loop.is_running():
        return
    try:
        zarr_sync.sync(_close_all(filesystems), loop=loop, timeout=_CLOSE_TIMEOUT)
    except Exception:  # noqa: BLE001 - best effort at exit; never turn a finished job into an error
        pass


atexit.register(close_sessions)  # zarr.core.sync registered its loop's cleanup on import, above: ours runs first
