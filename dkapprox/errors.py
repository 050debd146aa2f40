"""One exception tree for dkapprox; each error is also the builtin it refines.

Every error dkapprox raises on purpose is defined here and derives from
:class:`DkapproxError`, so ``except DkapproxError`` catches them all while
``except ValueError`` (or ``ConnectionError``, ``MemoryError``...) still
catches each where a builtin caller expects it. :data:`EXIT_CODES` is the one table of
the command line's exit codes and the errors that give each; the public warnings live here too.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "EXIT_CODES",
    "ClusterConfigError",
    "ClusterConnectError",
    "DeviceUnavailableError",
    "DkapproxError",
    "ExitCode",
    "IncompleteStoreError",
    "InsecureClusterWarning",
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
    """Base of every error dkapprox raises on purpose.

    An error crosses processes whole (dask pickles what a task raises): its message and every
    attribute its ``__init__`` set come back, whatever that ``__init__``'s signature, except the
    attributes a class names in ``_not_pickled``.
    """

    _not_pickled: tuple = ()

    def __reduce__(self):
        state = {k: v for k, v in vars(self).items() if k not in self._not_pickled}
        return _rebuild, (type(self), self.args, state)


def _rebuild(cls, args, state):
    error = _new(cls, args)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


def _new(cls, args):
    """``cls`` made without its ``__init__``, by the builtin whose layout it has (OSError's for a TimeoutError)."""
    for base in cls.__mro__:
        if base.__module__ == "builtins":
            try:
                return base.__new__(cls, *args)
            except TypeError:  # "X.__new__(cls) is not safe": another builtin of the MRO lays it out
                continue
    raise TypeError(f"cannot rebuild {cls.__name__}")


class InputDataError(DkapproxError, ValueError):
    """The input data or its metadata is unusable (hostile, broken, wrong dtype)."""


class InputMissingError(DkapproxError, FileNotFoundError):
    """An input store, array or model file does not exist."""


class MissingPackageError(DkapproxError, ImportError):
    """A URL's protocol needs a package that is not installed (e.g. s3fs for s3://); ``package`` names it."""

    def __init__(self, message, *, package=None):
        super().__init__(message)
        self.package = package




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
    if refused before anything ran); ``killed`` distributed's ``KilledWorker`` (not pickled).
    """

    _not_pickled = ("killed",)

    def __init__(self, facts, advice, *, suggested_rows=None, block_shape=None, block_bytes=None,
                 memory_limit=None, attempts=None, killed=None):
        super().__init__(f"{facts}; {advice}")
        self.facts, self.advice = facts, advice
        self.suggested_rows, self.block_shape, self.block_bytes = suggested_rows, block_shape, block_bytes
        self.memory_limit, self.attempts, self.killed = memory_limit, attempts, killed




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




class StoreBusyError(TemporaryFailure):
    """Another run holds the output store's lease (it is writing it): retry later, or wait.

    ``str(error)`` names the holder: host, pid, when it started, its last
    heartbeat and when its lease expires. ``holder`` is the lease document
    (a dict) or None.
    """

    def __init__(self, message, *, holder=None):
        super().__init__(message)
        self.holder = holder




class LeaseLostError(TemporaryFailure):
    """This run lost its lease on the output store (not renewed in time, or taken over): it stopped writing."""


class InsecureClusterWarning(UserWarning):
    """A scheduler runs plain tcp:// because its cluster config says ``insecure: true``.

    docs/security.md says when that is acceptable; filter it with
    ``warnings.filterwarnings("ignore", category=dkapprox.errors.InsecureClusterWarning)``.
    """


@dataclass(frozen=True)
class ExitCode:
    """One exit code of the command line: its number, what ``dkapprox --help`` says of it, the errors that give it."""

    code: int
    meaning: str
    raised_by: tuple = ()


#: The command line's exit codes (sysexits.h), so a scheduler can tell a retry from a fix; an error
#: takes the first row, in this order, that names one of its classes (a ClusterConfigError is a ValueError).
#: ``dkapprox --help`` prints them, docs/jobs.rst explains each (tests/test_readme.py holds it to this table).
EXIT_CODES = (
    ExitCode(0, "done"),
    ExitCode(1, "internal error (rerun with --debug and report it)"),
    ExitCode(2, "usage"),
    ExitCode(78, "bad cluster config", (ClusterConfigError,)),
    ExitCode(69, "a package a URL needs is missing (or CuPy or a GPU for --device cuda)",
             (MissingPackageError, DeviceUnavailableError)),
    ExitCode(75, "temporary failure (rerun; lower --block-rows if workers ran out of memory; another run is "
                 "writing the output: rerun later or pass --wait)",
             (TemporaryFailure, ClusterConnectError, ConnectionError, TimeoutError)),
    ExitCode(73, "output exists or belongs to another job, or its input changed since it was written (--refresh "
                 "rewrites only what changed)", (OutputExistsError, ResumeMismatchError)),
    ExitCode(66, "input missing", (InputMissingError, FileNotFoundError)),
    ExitCode(65, "bad input data (verify: the store failed its checks)",
             (InputDataError, ModelFileError, IncompleteStoreError, ValueError)),
    ExitCode(77, "permission denied", (PermissionError,)),
    ExitCode(74, "I/O error", (OSError,)),
    ExitCode(130, "interrupted (Ctrl-C; 143 for SIGTERM; rerun to resume)"),
)
