"""One error tree: every error dkapprox raises on purpose is in dkapprox.errors and is also a builtin."""

import ast
import builtins
import pathlib

import pytest

from dkapprox import errors

PACKAGE = pathlib.Path(errors.__file__).parent
BUILTIN_ERRORS = tuple(v for v in vars(builtins).values()
                       if isinstance(v, type) and issubclass(v, Exception) and v is not Exception)


@pytest.mark.parametrize("name", errors.__all__)
def test_each_error_is_a_dkapprox_error_and_the_builtin_it_refines(name):
    cls = getattr(errors, name)
    assert issubclass(cls, errors.DkapproxError)
    if cls is not errors.DkapproxError:
        assert issubclass(cls, BUILTIN_ERRORS), f"{name} refines no builtin error"


def test_all_lists_every_error_of_the_module():
    defined = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, BaseException)}
    assert defined == set(errors.__all__)


def test_no_module_but_errors_defines_an_exception():
    # Interrupted (the CLI's SIGTERM/SIGINT, a BaseException) is control flow, not an error: ARCHITECTURE.md, 9.
    allowed = {("cli/__init__.py", "Interrupted")}
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
