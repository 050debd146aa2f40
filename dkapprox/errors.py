"""One exception tree for dkapprox; each error is also the right builtin.

The command line maps them to exit codes (see ``dkapprox.cli``):
``InputDataError`` 65, ``InputMissingError`` 66, ``TemporaryFailure`` 75.
"""


class DkapproxError(Exception):
    """Base of every error dkapprox raises on purpose."""


class InputDataError(DkapproxError, ValueError):
    """The input data or its metadata is unusable (hostile, broken, wrong dtype)."""


class InputMissingError(DkapproxError, FileNotFoundError):
    """An input store, array or model file does not exist."""


class ModelFileError(DkapproxError, ValueError):
    """A model file is truncated, tampered with, or of an unknown format."""


class OutputExistsError(DkapproxError, FileExistsError):
    """The output exists and overwriting it was not asked for."""


class ResumeMismatchError(DkapproxError, ValueError):
    """A rerun would write into an output planned for another model or input."""


class IncompleteStoreError(DkapproxError, ValueError):
    """A dkapprox output store was not finished (a job died or is still running)."""


class TemporaryFailure(DkapproxError, RuntimeError):
    """Worth retrying: workers died or ran out of memory; lower the chunk size."""
