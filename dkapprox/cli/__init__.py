"""The ``dkapprox`` command line: parse arguments, call the library, map errors to exit codes.

Exit codes follow sysexits.h, so a scheduler (cron, Airflow, SLURM) can tell a retry from a
fix: :data:`dkapprox.errors.EXIT_CODES` is their one table, which :func:`exit_code` and
``dkapprox --help`` read and docs/jobs.rst explains. ``dkapprox verify`` exits 0 when the store
checks out and 65 when it found a missing block marker, a chunk that does not match its recorded
checksum, an unfinished store or an input that changed (each named by row range); 66 if there is
no store.

Errors are one line on stderr; ``--debug`` adds the traceback.
"""

from . import _commands  # noqa: E402 - registers the commands on the group
from ._main import Interrupted, dkapprox, exit_code, main

__all__ = ["Interrupted", "dkapprox", "exit_code", "main"]
