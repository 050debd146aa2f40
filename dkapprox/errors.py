"""One exception tree for dkapprox; each error is also the builtin it refines.

Every error dkapprox raises on purpose is defined here and derives from
:class:`DkapproxError`, so ``except DkapproxError`` catches them all while
``except ValueError`` (or ``ConnectionError``, ``MemoryError``...) still
catches each where a builtin caller expects it. The command line maps them to
exit codes (see ``dkapprox.cli``): ``InputDataError`` 65,
``InputMissingError`` 66, ``OutputExistsError`` and ``ResumeMismatchError``
(and its ``InputChangedError``) 73, ``TemporaryFailure`` (and its ``WorkerMemoryError``, ``StoreBusyError``,
``LeaseLostError``) and ``ClusterConnectError`` 75, ``ClusterConfigError`` (and its
``UnsharedPathError``) 78, ``MissingPackageError`` and ``DeviceUnavailableError`` 69.
"""

__all__ = [
    "ClusterConfigError",
    "ClusterConnectError",
    "DeviceUnavailableError",
    "DkapproxError",
    "IncompleteStoreError",
    "InputChangedError",
    "InputDataError",
    "InputMissingError",
    "LeaseLostError",
    "MissingPackageError",
    "ModelFileError",
    "OutputExistsError",
    "ResumeMismatchError",
    "StateError",
    "StoreBusyError",
    "TemporaryFailure",
    "UnsharedPathError",
    "WorkerMemoryError",
    "WorkersNeverStarted",
]


class DkapproxError(Exception):
    """Base of every error dkapprox raises on purpose."""


class InputDataError(DkapproxError, ValueError):
    """The input data or its metadata is unusable (hostile, broken, wrong dtype)."""


class InputMissingError(DkapproxError, FileNotFoundError):
    """An input store, array or model file does not exist."""


class MissingPackageError(DkapproxError, ImportError):
    """A URL's protocol needs a package that is not installed (e.g. s3fs for s3://); ``package`` names it."""

    def __init__(self, message, *, package=None):
        super().__init__(message)
        self.package = package

    def __reduce__(self):
        return _rebuild_missing_package, (type(self), str(self), self.package)


def _rebuild_missing_package(cls, message, package):
    return cls(message, package=package)


class DeviceUnavailableError(DkapproxError, RuntimeError):
    """A device was asked for (``--device cuda``) and this machine has none that works; the message says why."""


class ModelFileError(DkapproxError, ValueError):
    """A model file is truncated, tampered with, or of an unknown format."""


class OutputExistsError(DkapproxError, FileExistsError):
    """The output exists and overwriting it was not asked for."""


class ResumeMismatchError(DkapproxError, ValueError):
    """A rerun would write into an output planned for another model or input."""


class InputChangedError(ResumeMismatchError):
    """The input changed since its output store was written (or while it was).

    Raised instead of resuming into, or calling finished, a store whose blocks
    were computed from other data. ``changes`` lists one
    ``dkapprox.io._identity.InputChanges`` per input that differs (how
    many chunks changed, were added or removed, and the row ranges); a
    refresh (``refresh=True``, ``--refresh``) rewrites only those blocks,
    unless ``refusable`` (columns, dtype or chunk grid changed, rows removed).
    """

    def __init__(self, message, *, changes=()):
        super().__init__(message)
        self.changes = list(changes)

    @property
    def refusable(self) -> bool:
        return any(c.refusals for c in self.changes)

    def __reduce__(self):
        return _rebuild_changed, (type(self), str(self), self.changes)


def _rebuild_changed(cls, message, changes):
    return cls(message, changes=changes)


class IncompleteStoreError(DkapproxError, ValueError):
    """A dkapprox output store was not finished (a job died or is still running)."""


class StateError(DkapproxError, ValueError):
    """A model file's document holds something its format does not allow (reported as a ModelFileError)."""


class ClusterConfigError(DkapproxError, ValueError):
    """A cluster config file is unreadable, unsafe, or says something unknown."""


class UnsharedPathError(ClusterConfigError):
    """A local path the job reads or writes is not the same place on every worker.

    Raised before anything is written, when a worker cannot read back a nonce
    the client wrote there (workers on other hosts, each with its own disk).
    Use storage every worker mounts at the same path, or a URL (``s3://...``).
    """


class ClusterConnectError(DkapproxError, ConnectionError):
    """The scheduler could not be reached (down, wrong address, or TLS refused)."""


class TemporaryFailure(DkapproxError, RuntimeError):
    """Worth retrying: workers died or ran out of memory; lower the chunk size."""


class WorkerMemoryError(TemporaryFailure, MemoryError):
    """A block does not fit a worker's memory: workers died running it, or surely would.

    ``str(error)`` is ``facts; advice``: what happened (the block's shape and
    bytes, the workers' memory limit) and what to do. ``suggested_rows`` is the
    rows per block that fit the workers' budget (None if unknown);
    ``attempts`` the times a task was tried before the scheduler gave up (None
    if refused before anything ran); ``killed`` distributed's ``KilledWorker``.
    """

    def __init__(self, facts, advice, *, suggested_rows=None, block_shape=None, block_bytes=None,
                 memory_limit=None, attempts=None, killed=None):
        super().__init__(f"{facts}; {advice}")
        self.facts, self.advice = facts, advice
        self.suggested_rows, self.block_shape, self.block_bytes = suggested_rows, block_shape, block_bytes
        self.memory_limit, self.attempts, self.killed = memory_limit, attempts, killed

    def __reduce__(self):
        return _rebuild, (type(self), self.facts, self.advice, {
            k: getattr(self, k) for k in ("suggested_rows", "block_shape", "block_bytes", "memory_limit",
                                          "attempts")})


def _rebuild(cls, facts, advice, fields):
    return cls(facts, advice, **fields)


class WorkersNeverStarted(TemporaryFailure, TimeoutError):
    """No dask worker of a batch-system cluster (SLURM, PBS) ran within the start timeout.

    ``str(error)`` is one line: how long it waited, the pending job ids with
    the batch system's reason (e.g. ``PartitionDown``, ``Priority``), what to
    check, and that the queued jobs were cancelled. ``job_ids`` are the jobs
    this run submitted, ``reasons`` maps job id to ``(state, reason)`` as
    ``squeue`` gave them, ``timeout`` is the wait in seconds.
    """

    def __init__(self, message, *, job_ids=(), reasons=None, timeout=None):
        super().__init__(message)
        self.job_ids, self.reasons, self.timeout = list(job_ids), dict(reasons or {}), timeout

    def __reduce__(self):
        return _rebuild_never_started, (type(self), str(self), self.job_ids, self.reasons, self.timeout)


def _rebuild_never_started(cls, message, job_ids, reasons, timeout):
    return cls(message, job_ids=job_ids, reasons=reasons, timeout=timeout)


class StoreBusyError(TemporaryFailure):
    """Another run holds the output store's lease (it is writing it): retry later, or wait.

    ``str(error)`` names the holder: host, pid, when it started, its last
    heartbeat and when its lease expires. ``holder`` is the lease document
    (a dict) or None.
    """

    def __init__(self, message, *, holder=None):
        super().__init__(message)
        self.holder = holder

    def __reduce__(self):
        return _rebuild_busy, (type(self), str(self), self.holder)


def _rebuild_busy(cls, message, holder):
    return cls(message, holder=holder)


class LeaseLostError(TemporaryFailure):
    """This run lost its lease on the output store (not renewed in time, or taken over): it stopped writing."""
