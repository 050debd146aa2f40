"""The ``dkapprox`` group and its entry point: map an exception that reached the top to its exit code."""

from __future__ import annotations

import logging
import signal
import sys
import traceback

import click

from .. import errors
from .._version import __version__
from ..utils import InvalidParameterError
from ._jobs import one_line, shown

log = logging.getLogger("dkapprox")

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_DATAERR, EXIT_TEMPFAIL = 0, 1, 2, 65, 75  # rows of errors.EXIT_CODES

_debug = {"on": False}
# distributed's own logging config gives distributed.client a level of its own (it would print a
# traceback per reconnection attempt when the scheduler is lost); without --debug the one-line error says it
_QUIETED = ("distributed", "distributed.client")


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: stop, leave the output resumable."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(exc: BaseException) -> int:
    """The exit code for an exception that reached the top: the first row of ``errors.EXIT_CODES`` naming it."""
    from distributed import KilledWorker
    from distributed.comm import CommClosedError

    if isinstance(exc, Interrupted):
        return 128 + exc.signum
    if isinstance(exc, (KilledWorker, CommClosedError)):
        return EXIT_TEMPFAIL
    if isinstance(exc, InvalidParameterError):
        return EXIT_USAGE
    # scikit-learn's data errors raised in tasks (NaN, width) are ValueErrors: 65
    return next((row.code for row in errors.EXIT_CODES if isinstance(exc, row.raised_by)), EXIT_INTERNAL)

def main(argv=None) -> int:
    """Entry point of the ``dkapprox`` console script; returns (and exits with) the code."""
    _debug["on"] = False
    previous = {signum: signal.signal(signum, _raise_interrupted) for signum in (signal.SIGTERM, signal.SIGINT)}
    loggers = {name: (lg.handlers[:], lg.level, lg.propagate)
               for name, lg in ((n, logging.getLogger(n)) for n in ("dkapprox", *_QUIETED))}
    try:
        returned = dkapprox.main(args=argv, prog_name="dkapprox", standalone_mode=False)
        code = returned if isinstance(returned, int) else EXIT_OK  # a command's ctx.exit(code), e.g. verify's
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()
        code = exc.exit_code
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "dkapprox"
        click.echo(f"dkapprox: usage error: {shown(' '.join(exc.format_message().split()))} "
                   f"(see {where} --help)", err=True)
        code = exc.exit_code
    except click.ClickException as exc:
        click.echo(f"dkapprox: error: {shown(' '.join(exc.format_message().split()))}", err=True)
        code = exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("dkapprox: interrupted; rerun the same command to resume", err=True)
        code = 128 + signal.SIGINT
    except (Exception, Interrupted) as exc:  # noqa: BLE001 - every error gets one line and a code
        code = exit_code(exc)
        if _debug["on"]:
            traceback.print_exc()
        hint = {EXIT_INTERNAL: " (internal error: rerun with --debug and report it)",
                EXIT_TEMPFAIL: "" if isinstance(exc, errors.TemporaryFailure) else " (temporary: rerun the same "
                "command; if workers died, lower --block-rows or give them more memory first)"}.get(code, "")
        if isinstance(exc, Interrupted):
            click.echo(f"dkapprox: {exc.args[0]}: stopped; rerun the same command to resume", err=True)
        else:
            click.echo(f"dkapprox: error: {one_line(exc)}{hint}", err=True)
    finally:  # leave the process as we found it (main() also runs inside other programs' tests)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for name, (handlers, level, propagate) in loggers.items():
            logger = logging.getLogger(name)
            logger.handlers[:], logger.propagate = handlers, propagate
            logger.setLevel(level)
    sys.stdout.flush()
    return code


def _redact_record(record) -> bool:
    """A log record with no URL credentials in it (a logging filter: it keeps every record)."""
    message = record.getMessage()
    if "@" in message:
        record.msg, record.args = shown(message), ()
    return True


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)



def _exit_codes_help() -> str:
    return "Exit codes: " + ", ".join(f"{row.code} {row.meaning}" for row in
                                      sorted(errors.EXIT_CODES, key=lambda row: row.code)) + "."


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             epilog=_exit_codes_help())
@click.option("--debug", is_flag=True, help="Show tracebacks and worker warnings.")
@click.option("--quiet", "-q", is_flag=True, help="Only errors on stderr (no log lines).")
@click.version_option(__version__, message="dkapprox %(version)s")  # the wheel's version too (pyproject reads it)
def dkapprox(debug, quiet):
    """Kernel approximation, random projection and kernel ridge on Zarr data (or Parquet datasets) far larger
    than memory."""
    _debug["on"] = debug
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("dkapprox: %(message)s"))
    handler.addFilter(_redact_record)
    logger = logging.getLogger("dkapprox")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.ERROR if quiet else logging.INFO)
    logger.propagate = False
    if not debug:
        import distributed  # noqa: F401 - importing it applies its logging config, which would undo ours

        for name in _QUIETED:
            logging.getLogger(name).setLevel(logging.CRITICAL)
