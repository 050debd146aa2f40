"""One error tree: every error dkapprox raises on purpose is in dkapprox.errors and is also a builtin."""

import ast
import builtins
import pathlib

import pytest

from dkapprox import errors

PACKAGE = pathlib.Path(errors.__file__).parent
BUILTIN_ERRORS = tuple(v for v in vars(builtins).values()
                       if isinstance(v, type) and issubclass(v, Exception) and v is not Exception)


CLASSES = {n: getattr(errors, n) for n in errors.__all__ if isinstance(getattr(errors, n), type)}
ERRORS = [n for n, c in CLASSES.items() if issubclass(c, Exception) and not issubclass(c, Warning)]
WARNINGS = [n for n, c in CLASSES.items() if issubclass(c, Warning)]


@pytest.mark.parametrize("name", ERRORS)
def test_each_error_is_a_dkapprox_error_and_the_builtin_it_refines(name):
    cls = getattr(errors, name)
    assert issubclass(cls, errors.DkapproxError)
    if cls is not errors.DkapproxError:
        assert issubclass(cls, BUILTIN_ERRORS), f"{name} refines no builtin error"


def test_all_lists_every_error_of_the_module():
    defined = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, BaseException)}
    assert defined == set(ERRORS) | set(WARNINGS)
    assert set(errors.__all__) == defined | {"EXIT_CODES", "ExitCode"}
    assert WARNINGS == ["InsecureClusterWarning"]


@pytest.mark.parametrize("name", ERRORS)
def test_an_error_crosses_processes_with_its_attributes(name):
    import pickle

    cls = getattr(errors, name)
    error = errors._rebuild(cls, (f"{name}: one line",), {})
    error.extra, error.rows = {"block": 3}, [1, 2]
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is cls and back.args == error.args and str(back) == str(error)
    assert (back.extra, back.rows) == ({"block": 3}, [1, 2])


def test_errors_made_with_their_keywords_come_back_whole():
    import pickle

    made = [errors.MissingPackageError("no s3fs", package="s3fs"),
            errors.InputChangedError("changed", changes=[]),
            errors.WorkerMemoryError("100 x 2 float32", "lower --block-rows", suggested_rows=50, block_shape=(100, 2),
                                     block_bytes=800, memory_limit=10, attempts=2, killed=object()),
            errors.WorkersNeverStarted("none ran", job_ids=[7], reasons={7: ("PD", "Priority")}, timeout=600),
            errors.StoreBusyError("busy", holder={"host": "a", "pid": 1})]
    for error in made:
        back = pickle.loads(pickle.dumps(error))
        kept = {k: v for k, v in vars(error).items() if k not in type(error)._not_pickled}
        assert type(back) is type(error) and str(back) == str(error) and vars(back) == kept, type(error)
    assert made[2].killed is not None and not hasattr(pickle.loads(pickle.dumps(made[2])), "killed")


def test_every_exit_code_row_names_errors_once_and_the_cli_reads_it():
    from dkapprox.cli import exit_code

    codes = [row.code for row in errors.EXIT_CODES]
    assert len(codes) == len(set(codes))
    for row in errors.EXIT_CODES:
        for cls in row.raised_by:
            if issubclass(cls, errors.DkapproxError):
                assert exit_code(errors._rebuild(cls, ("x",), {})) == row.code, (cls, row.code)
    assert exit_code(errors.UnsharedPathError("x")) == 78  # a ValueError: the cluster config's row comes first


def test_no_module_but_errors_defines_an_exception():
    # Interrupted (the CLI's SIGTERM/SIGINT, a BaseException) is control flow, not an error: ARCHITECTURE.md, 9.
    allowed = {("cli/_main.py", "Interrupted")}
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                if any(b.endswith(("Error", "Exception", "Failure")) for b in bases):
                    if (str(path.relative_to(PACKAGE)), node.name) not in allowed:
                        found.append(f"{path.relative_to(PACKAGE)}: {node.name}")
    assert not found


def test_old_import_locations_still_work():
    from dkapprox.cluster import ClusterConfigError, ClusterConnectError
    from dkapprox.models._state_codec import StateError

    assert (ClusterConfigError, ClusterConnectError, StateError) == (
        errors.ClusterConfigError, errors.ClusterConnectError, errors.StateError)
    assert issubclass(errors.ClusterConnectError, ConnectionError)
