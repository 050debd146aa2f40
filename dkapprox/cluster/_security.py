"""Who may talk to a cluster dkapprox starts: TLS for batch-system schedulers, dashboards on loopback.

A dask scheduler reached over plain ``tcp://`` runs any Python a connecting
Client sends, as the user who started it. On a shared HPC network anyone can
open that port, so a SLURM or PBS scheduler (which listens where the worker
nodes can reach it) speaks TLS unless its config says ``insecure: true``:

- with site certificates (``tls: {ca_file, cert, key}``), used by the
  scheduler, the workers and this client;
- otherwise with **temporary credentials**: a self-signed key and certificate
  made for this one cluster (``distributed.security.Security.temporary``,
  which needs ``cryptography``). The workers read them from files: a fresh
  folder of mode 0700 inside ``shared_temp_directory`` (default
  ``~/.dkapprox/credentials``, which must be visible at the same path on the
  nodes, as a home directory is), the files of mode 0600, removed when the
  cluster closes. The job scripts hold only their paths, never a key, so
  nothing secret lands in the batch system's spool or in job logs.

Dashboards (HTTP, no authentication; they show task names, worker addresses
and logs) listen on 127.0.0.1 unless a config names another address: reach a
remote one with ``ssh -L 8787:127.0.0.1:8787 login-node``.

docs/security.md is the threat model in plain words.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
import warnings
from pathlib import Path

from ..errors import ClusterConfigError, InsecureClusterWarning, MissingPackageError

logger = logging.getLogger("dkapprox.cluster")

#: Where temporary credentials are written when a config gives no ``shared_temp_directory``.
DEFAULT_CREDENTIALS_DIRECTORY = "~/.dkapprox/credentials"
#: The dashboard of a cluster dkapprox starts, unless its config names another address.
LOOPBACK_DASHBOARD = "127.0.0.1:8787"


def is_loopback(host: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 and 'localhost'; False for '' or None (every interface)."""
    if not host:
        return False
    host = host.strip("[]")
    return host == "localhost" or host == "::1" or host.startswith("127.")


class Credentials:
    """The TLS of one batch-system cluster: ``security`` (None when insecure) and where its files live.

    ``close()`` removes the files of temporary credentials (site certificates are left alone).
    """

    def __init__(self, security=None, directory: Path | None = None):
        self.security, self.directory = security, directory

    @property
    def protocol(self) -> str:
        return "tcp://" if self.security is None else "tls://"

    def close(self):
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None


def for_jobqueue(options: dict) -> Credentials:
    """The credentials a slurm/pbs config asks for: site certificates, temporary ones, or none (insecure)."""
    from distributed.security import Security

    if options.get("insecure"):
        return Credentials()
    tls = options.get("tls")
    if tls:
        cert, key = tls["cert"], tls.get("key")
        for path in (tls["ca_file"], cert, key):
            if path is not None and not os.path.isfile(path):
                raise ClusterConfigError(f"tls: no such certificate or key file {path!r}")
        return Credentials(Security(
            tls_ca_file=tls["ca_file"], require_encryption=True,
            tls_scheduler_cert=cert, tls_scheduler_key=key, tls_worker_cert=cert, tls_worker_key=key,
            tls_client_cert=cert, tls_client_key=key))
    return _temporary(options.get("shared_temp_directory") or DEFAULT_CREDENTIALS_DIRECTORY)


def _temporary(parent: str) -> Credentials:
    from distributed.security import Security

    try:
        made = Security.temporary()
    except ImportError:
        raise MissingPackageError(
            "TLS for a slurm/pbs scheduler needs the cryptography package to make this cluster's temporary "
            "credentials: pip install 'dkapprox[jobqueue]' (or give site certificates in tls:, or, on a "
            "network no one else uses, insecure: true)", package="cryptography") from None
    base = Path(os.path.expandvars(os.path.expanduser(parent))).absolute()
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory = Path(tempfile.mkdtemp(prefix="dkapprox-tls-", dir=base))  # mode 0700, ours alone
    except OSError as exc:
        raise ClusterConfigError(f"shared_temp_directory: cannot make a private folder for this cluster's "
                                 f"TLS credentials in {base} ({exc})") from None
    try:
        # one self-signed certificate is the CA, and every role's certificate: only holders of its key get in
        ca = _private_file(directory / "cert.pem", made.tls_ca_file)
        key = _private_file(directory / "key.pem", made.tls_scheduler_key)
        security = Security(tls_ca_file=ca, require_encryption=True,
                            tls_scheduler_cert=ca, tls_scheduler_key=key, tls_worker_cert=ca, tls_worker_key=key,
                            tls_client_cert=ca, tls_client_key=key)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    logger.info("TLS: temporary credentials of this cluster in %s (mode 0700, removed when it closes)", directory)
    return Credentials(security, directory)


def _private_file(path: Path, text: str) -> str:
    """Write ``text`` to a new file only its owner can read (created 0600, never wider for a moment)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return str(path)


def warn_insecure(kind: str, address: str) -> None:
    """The warning an ``insecure: true`` scheduler starts with: what anyone who can reach it can do."""
    message = (f"insecure: true: the {kind.upper()} scheduler at {address} speaks plain TCP without "
               f"authentication: anyone who can reach this port can connect a Client and run any code on "
               f"the workers as you, with your files and credentials; remove insecure: true to use TLS")
    logger.warning("%s", message)
    warnings.warn(message, InsecureClusterWarning, stacklevel=3)
