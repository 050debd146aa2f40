"""Icechunk repositories: an address a user can type, sessions opened from it, and inputs named by snapshot.

An address names a repository, a version and a node in it::

    icechunk+file:///data/repo?branch=main&array=X       an input: branch=, tag= or snapshot=, and array=
    icechunk+s3://bucket/prefix?snapshot=1CEC...&array=X
    icechunk+file:///data/repo?branch=features&group=rbf  an output: branch= (default main), group=

A branch read as an input is resolved to its snapshot once, when it is opened: the job then reads
that snapshot whatever the branch does meanwhile, and records its ID as the input's identity (a
snapshot is immutable, so no chunk listing is needed). S3 credentials and the endpoint come from
the same storage options (``key``, ``secret``, ``client_kwargs.endpoint_url``, ``endpoint_url``) and
``AWS_*`` variables the ``s3://`` paths use; they never enter the address's text.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field, replace
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from ..errors import InputDataError, InputMissingError, MissingPackageError
from ._identity import InputIdentity, _metadata
from ._location import Location, redact

PREFIX = "icechunk+"
PROTOCOLS = ("file", "s3")
SELECTORS = ("branch", "tag", "snapshot")
DEFAULT_GROUP = "features"

__all__ = ["Address", "IcechunkInput", "is_icechunk", "parse"]


def is_icechunk(source) -> bool:
    """True for an ``icechunk+...://`` address (a str) or an open Icechunk session."""
    if isinstance(source, str):
        return source.startswith(PREFIX)
    return type(source).__module__.split(".")[0] == "icechunk" and hasattr(source, "store")


@dataclass(frozen=True)
class Address:
    """A repository (``protocol`` file or s3, ``root`` its path or bucket/prefix), a version and a node."""

    protocol: str
    root: str
    branch: str | None = None
    tag: str | None = None
    snapshot: str | None = None
    array: str | None = None
    group: str | None = None
    storage_options: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def __str__(self):
        query = [(k, getattr(self, k)) for k in (*SELECTORS, "array", "group") if getattr(self, k) is not None]
        text = "&".join(f"{k}={quote(str(v), safe='/')}" for k, v in query)
        root = self.root if self.protocol != "file" else "/" + self.root.lstrip("/")
        return f"{PREFIX}{self.protocol}://{root}" + (f"?{text}" if text else "")

    @property
    def repository_url(self) -> str:
        return str(replace(self, branch=None, tag=None, snapshot=None, array=None, group=None))

    def at(self, snapshot_id) -> Address:
        """This address pinned to one snapshot (what a job reads and records)."""
        return replace(self, branch=None, tag=None, snapshot=snapshot_id)

    def location(self) -> Location:
        """The repository's place, as the lease and the shared-path checks take it."""
        if self.protocol == "file":
            return Location(self.root, "file", self.root, {})
        return Location(f"s3://{self.root}", "s3", self.root, dict(self.storage_options))

    def storage(self):
        ic = icechunk()
        if self.protocol == "file":
            return ic.local_filesystem_storage(self.root)
        bucket, _, prefix = self.root.partition("/")
        return ic.s3_storage(bucket=bucket, prefix=prefix or None, **_s3_arguments(self.storage_options))

    def repository(self, *, create=False):
        """The repository (made empty if ``create`` and there is none).

        Virtual chunks are read from the containers the storage option ``virtual_chunks`` names (URL
        prefixes the user trusts, e.g. ``["s3://archive/netcdf/"]``), with credentials from the
        environment: Icechunk reads none without that authorization, since a repository could point
        its chunks at any file.
        """
        ic = icechunk()
        storage = self.storage()
        try:
            if ic.Repository.exists(storage):
                trusted = _virtual_access(ic, self.storage_options.get("virtual_chunks"))
                return ic.Repository.open(storage, authorize_virtual_chunk_access=trusted)
        except Exception as exc:  # noqa: BLE001 - icechunk's own errors name no repository
            raise failure(self.repository_url, exc) from exc
        if not create:
            raise InputMissingError(f"{self.repository_url}: no Icechunk repository there")
        return ic.Repository.create(storage)


def parse(text, storage_options=None, *, kind="input") -> Address:
    """The :class:`Address` of ``icechunk+file://...`` or ``icechunk+s3://...`` (see the module notes).

    ``kind``: ``"input"`` (a version and ``array=``), ``"output"`` (``branch=`` and ``group=``) or
    ``"features"`` (an output read back: a version and ``group=``).
    """
    output = kind == "output"
    if not is_icechunk(text) or not isinstance(text, str):
        raise InputDataError(f"{text!r}: not an Icechunk address (icechunk+file:// or icechunk+s3://)")
    parts = urlsplit(text[len(PREFIX):])
    if parts.scheme not in PROTOCOLS:
        raise InputDataError(f"{redact(text)}: Icechunk repositories are addressed as icechunk+file:// or "
                             f"icechunk+s3://, not icechunk+{parts.scheme}://")
    options = dict(storage_options or {})
    host = parts.netloc
    if "@" in host:  # credentials go to the storage options, never into messages
        userinfo, _, host = host.rpartition("@")
        key, _, secret = (unquote(p) for p in userinfo.partition(":"))
        options.update({k: v for k, v in (("key", key), ("secret", secret)) if v})
    if parts.scheme == "file":
        root = os.path.realpath(os.path.expanduser(unquote(host + parts.path)))
    else:
        root = posixpath.normpath("/" + host + unquote(parts.path)).strip("/")
        if not root:
            raise InputDataError(f"{redact(text)}: no bucket named")
    query = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if key in query:
            raise InputDataError(f"{redact(text)}: {key}= is given twice")
        query[key] = value
    allowed = {"input": (*SELECTORS, "array", "group"), "output": ("branch", "group"),
               "features": (*SELECTORS, "group")}[kind]
    unknown = sorted(set(query) - set(allowed))
    if unknown:
        what = "an output" if output else "an input"
        raise InputDataError(f"{redact(text)}: {', '.join(unknown)}= is not for {what} address (it takes "
                             f"{', '.join(k + '=' for k in allowed)})")
    empty = sorted(k for k, v in query.items() if not v)
    if empty:
        raise InputDataError(f"{redact(text)}: {empty[0]}= is empty")
    chosen = [k for k in SELECTORS if k in query]
    if len(chosen) > 1:
        raise InputDataError(f"{redact(text)}: name one version: {' or '.join(k + '=' for k in chosen)}")
    if not chosen:
        query["branch"] = "main"
    if kind != "input":
        query["group"] = query.get("group", DEFAULT_GROUP).strip("/")
    return Address(parts.scheme, root, storage_options=options, **query)


def icechunk():
    """The icechunk module, or the error that says how to install it."""
    global _QUIET
    try:
        import icechunk as ic
    except ImportError as exc:
        raise MissingPackageError("Icechunk repositories need the package icechunk, which is not installed: "
                                  "pip install icechunk or dkapprox[icechunk]", package="icechunk") from exc
    if not _QUIET and "ICECHUNK_LOG" not in os.environ:
        # every local repository opened warns of concurrent commits, which the job's lease rules out
        ic.set_logs_filter("icechunk=error")
        _QUIET = True
    return ic


_QUIET = False


def failure(where, exc):
    """An icechunk error as dkapprox's: a missing repository, ref or snapshot is InputMissingError."""
    lines = [line.strip(" |x") for line in str(exc).splitlines()]
    text = next((line for line in lines if line), type(exc).__name__)
    name = type(exc).__name__
    if "not found" in text or "doesn't exist" in text or name.endswith("NotFoundError"):
        return InputMissingError(f"{where}: {text}")
    return InputDataError(f"{where}: {name}: {text}")


def readonly(address: Address):
    """(read-only session, its snapshot ID) of the version ``address`` names; a branch is resolved now."""
    repo = address.repository()
    try:
        if address.snapshot is not None:
            session = repo.readonly_session(snapshot_id=address.snapshot)
        elif address.tag is not None:
            session = repo.readonly_session(tag=address.tag)
        else:
            session = repo.readonly_session(branch=address.branch)
    except Exception as exc:  # noqa: BLE001 - named with the address, and which branches exist
        error = failure(str(replace(address, array=None)), exc)
        if address.branch is not None and isinstance(error, InputMissingError):
            error = InputMissingError(f"{error}; branches: {', '.join(sorted(repo.list_branches()))}")
        raise error from exc
    return session, session.snapshot_id


#: repository addresses of the snapshots opened here, by snapshot ID (IDs are unique): names for messages
_OPENED: dict = {}


@dataclass(frozen=True)
class IcechunkInput:
    """An array read from one snapshot: the writer records ``identify()`` and checks ``loc``, as for a Zarr input."""

    snapshot: str
    path: str
    array: object = field(repr=False, compare=False)  # the zarr array on that snapshot's read-only store
    address: Address | None = None  # the repository, when it was opened from an address

    @property
    def name(self) -> str:
        if self.address is not None:
            return str(replace(self.address.at(self.snapshot), array=self.path or None, group=None))
        return f"icechunk snapshot {self.snapshot}" + (f" {self.path}" if self.path else "")

    @property
    def loc(self) -> Location:
        if self.address is not None:
            return replace(self.address.location(), url=self.name)
        return Location(self.name, "icechunk", self.snapshot, {})

    def identify(self, skip=None) -> InputIdentity:
        """The snapshot's ID is the content's name: one entry, no listing (a snapshot never changes)."""
        metadata = {**_metadata(self.array), "format": "icechunk"}
        return InputIdentity(self.name, metadata, "snapshot", ("snapshot",), (0,), (self.snapshot,))


def open_node(address: Address, component=None):
    """(zarr node, its name) of an input address (``array=``, then ``component`` below it)."""
    import zarr

    path = "/".join(p.strip("/") for p in (address.array or address.group, component) if p)
    session, snapshot = readonly(address)
    _OPENED[snapshot] = replace(address.at(snapshot), array=None, group=None)  # the repository, by snapshot
    pinned = replace(address.at(snapshot), array=path or None, group=None)
    try:
        return zarr.open(store=session.store, path=path, mode="r"), str(pinned)
    except FileNotFoundError as exc:
        raise InputMissingError(f"{pinned}: no Zarr array or group at {path or '/'} in this snapshot") from exc


def session_node(session, component=None):
    """(zarr node, its name) of an open Icechunk session."""
    import zarr

    where = f"icechunk snapshot {session.snapshot_id}" + (f" {component}" if component else "")
    try:
        return zarr.open(store=session.store, path=component or "", mode="r"), where
    except FileNotFoundError as exc:
        raise InputMissingError(f"{where}: no Zarr array or group there") from exc


def input_of(node):
    """An :class:`IcechunkInput` for a zarr array stored in an Icechunk snapshot, else None."""
    session = getattr(getattr(node, "store", None), "session", None)
    if session is None or type(session).__module__.split(".")[0] != "icechunk":
        return None
    snapshot = session.snapshot_id
    if not session.read_only and session.has_uncommitted_changes:
        raise InputDataError(f"icechunk session on {session.branch}: the input has uncommitted changes, which no "
                             "snapshot names; commit them first, or read a read-only session")
    return IcechunkInput(snapshot, (node.path or "").strip("/"), node, _OPENED.get(snapshot))


def _virtual_access(ic, prefixes):
    """icechunk's ``authorize_virtual_chunk_access`` for the trusted URL prefixes (None: none trusted)."""
    if prefixes is None:
        return None
    if isinstance(prefixes, str) or not all(isinstance(p, str) and "://" in p for p in prefixes):
        raise InputDataError(f"virtual_chunks must be a list of URL prefixes, e.g. [\"s3://bucket/files/\"], got "
                             f"{prefixes!r}")
    local = getattr(getattr(ic, "credentials", None), "LocalFileSystemAccess", None)  # icechunk 2.x's sentinel
    access = {}
    for prefix in prefixes:
        if prefix.startswith("file://"):
            access[prefix] = local
        elif prefix.startswith(("s3://", "s3a://")):
            access[prefix] = ic.s3_from_env_credentials()
        else:
            access[prefix] = None  # the store's own defaults (public HTTP, GCS/Azure from the environment)
    return access


def _s3_arguments(options) -> dict:
    """icechunk's s3_storage arguments from fsspec-style options and the AWS_* variables."""
    options = dict(options or {})
    client = dict(options.get("client_kwargs") or {})
    endpoint = (options.get("endpoint_url") or client.get("endpoint_url") or os.environ.get("AWS_ENDPOINT_URL_S3")
                or os.environ.get("AWS_ENDPOINT_URL"))
    region = client.get("region_name") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    key = options.get("key") or options.get("aws_access_key_id")
    secret = options.get("secret") or options.get("aws_secret_access_key")
    arguments = {"region": region, "endpoint_url": endpoint}
    if endpoint:  # S3-compatible servers (MinIO, moto, Ceph) address buckets by path
        arguments.update(allow_http=endpoint.startswith("http://"), force_path_style=True)
    if options.get("anon"):
        arguments["anonymous"] = True
    elif key:
        arguments.update(access_key_id=key, secret_access_key=secret,
                         session_token=options.get("token") or options.get("aws_session_token"))
    else:
        arguments["from_env"] = True
    return arguments
