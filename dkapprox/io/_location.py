"""Where a store lives: a local path or an fsspec URL, and whether one lies inside another."""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass, field

from ..errors import InputDataError, MissingPackageError


@dataclass(frozen=True)
class Location:
    """A store's place, as users name it in messages and as zarr and fsspec open it.

    ``url`` is an absolute local path (symlinks resolved) or the fsspec URL;
    ``protocol`` is ``"file"`` for local paths; ``path`` the path without the
    protocol (absolute for local paths).
    """

    url: str
    protocol: str
    path: str
    # credentials live here: never in repr, messages, plans or files
    storage_options: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def local(self) -> bool:
        return self.protocol == "file"

    def store(self, *, read_only: bool):
        """A zarr store for this place (LocalStore for local paths).

        URLs get zarr's FsspecStore on an asynchronous filesystem, as
        ``FsspecStore.from_url`` makes it, whose sessions are closed at exit
        (see :mod:`dkapprox.io._sessions`).
        """
        from fsspec.core import url_to_fs
        from zarr.storage import LocalStore

        if self.local:
            return LocalStore(self.path, read_only=read_only)
        from ._sessions import Store

        check_protocol(self)
        fs, path = url_to_fs(self.url, **{"asynchronous": True, **self.storage_options})
        if not fs.async_impl:
            from fsspec.implementations.asyn_wrapper import AsyncFileSystemWrapper

            fs = AsyncFileSystemWrapper(fs, asynchronous=True)
        return Store(fs, path=path, read_only=read_only)

    def filesystem(self):
        """The fsspec filesystem and the path in it (for existence checks and deletion)."""
        from fsspec.core import url_to_fs

        if self.local:
            from fsspec.implementations.local import LocalFileSystem

            return LocalFileSystem(), self.path
        check_protocol(self)
        fs, path = url_to_fs(self.url, **self.storage_options)
        return fs, path

    def __str__(self):
        return self.url


def locate(source, storage_options=None) -> Location:
    """The :class:`Location` of a path or URL (``str`` or ``os.PathLike``)."""
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, str) or not source:
        raise TypeError(f"expected a path or URL, got {type(source).__name__}")
    protocol, sep, rest = source.partition("://")
    if not sep or protocol == "file":
        local = rest if sep else source
        path = os.path.realpath(os.path.expanduser(local))
        return Location(path, "file", path, dict(storage_options or {}))
    if "::" in source:
        raise InputDataError(f"{source}: chained fsspec URLs are not supported; open the store yourself "
                             "and pass the zarr array or group.")
    rest, options = _credentials_out(protocol, rest, dict(storage_options or {}))
    path = posixpath.normpath("/" + rest).lstrip("/")
    return Location(f"{protocol}://{path}", protocol, path, options)


_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]*@")


def redact(text) -> str:
    """``text`` with the ``user:password@`` of every URL in it taken out (what may be shown or recorded).

    >>> redact("s3://AKIA:s3cr3t@bucket/x.zarr and http://u:p@host/y")
    's3://bucket/x.zarr and http://host/y'
    """
    return _USERINFO.sub(r"\1", str(text))


def _credentials_out(protocol, rest, options):
    """``user:password@`` taken out of a URL's host part and into its storage options.

    The URL, which messages, plans, stores and model files show, then holds no
    secret; the filesystem gets them as its options: ``key``/``secret`` for S3,
    HTTP basic auth for http(s), ``username``/``password`` for the others
    (ftp, sftp, hdfs, smb: fsspec's names).
    """
    from urllib.parse import unquote

    host, slash, tail = rest.partition("/")
    if "@" not in host:
        return rest, options
    userinfo, _, host = host.rpartition("@")
    user, _, password = (unquote(part) for part in userinfo.partition(":"))
    if protocol in ("s3", "s3a"):
        given = {"key": user, "secret": password}
    elif protocol in ("http", "https"):
        from aiohttp import BasicAuth

        given = {"client_kwargs": {**options.get("client_kwargs", {}), "auth": BasicAuth(user, password)}}
    else:
        given = {"username": user, "password": password}
    given = {k: v for k, v in given.items() if v != ""}
    clash = sorted(k for k in given if k in options and k != "client_kwargs")
    if clash:
        raise InputDataError(f"{protocol}://{host}{slash}{tail}: credentials are given both in the URL and as "
                             f"storage options ({', '.join(clash)}); give them once")
    return host + slash + tail, {**options, **given}


#: protocols whose folders are only key prefixes: what must exist before writing is the bucket
OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "oss", "r2"})


def missing_bucket(loc: Location) -> str | None:
    """The bucket of ``loc`` if it is on an object store and that bucket does not exist, else None."""
    if loc.protocol not in OBJECT_STORES:
        return None
    fs, path = loc.filesystem()
    bucket = path.split("/", 1)[0]
    try:
        return None if fs.exists(bucket) else bucket
    except Exception:  # noqa: BLE001 - only a better message is at stake: let the real operation fail
        return None


def check_protocol(loc: Location):
    """Refuse a URL whose protocol fsspec does not know, or whose package is not installed, saying which."""
    from fsspec.registry import get_filesystem_class, known_implementations

    try:
        get_filesystem_class(loc.protocol)
    except ImportError as exc:
        module = known_implementations.get(loc.protocol, {}).get("class", "").split(".")[0] or "?"
        extra = " or dkapprox[s3]" if module == "s3fs" else ""
        raise MissingPackageError(
            f"{loc}: the {loc.protocol}:// protocol needs the package {module}, which is not installed: "
            f"pip install {module}{extra}", package=module) from exc
    except ValueError as exc:
        raise InputDataError(f"{loc}: unknown protocol {loc.protocol!r} (fsspec knows none by that name); "
                             "use a local path or a URL such as s3://bucket/path") from exc


def location_of_node(node) -> Location | None:
    """Where a zarr array or group is stored, or None (memory and unknown stores)."""
    store = getattr(node, "store", None)
    node_path = getattr(node, "path", "") or ""
    root = getattr(store, "root", None)  # LocalStore
    if root is not None:
        return locate(os.path.join(os.fspath(root), node_path))
    fs = getattr(store, "fs", None)  # FsspecStore
    if fs is not None:
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        base = posixpath.join(store.path, node_path)
        if protocol in ("file", "local"):
            return locate(base)
        return locate(f"{protocol}://{base.lstrip('/')}")
    return None


def is_inside(inner: Location, outer: Location) -> bool:
    """True if ``inner`` is ``outer`` or lies anywhere below it."""
    if inner.protocol != outer.protocol:
        return False
    a = inner.path.rstrip("/")
    b = outer.path.rstrip("/")
    return a == b or a.startswith(b + "/")
