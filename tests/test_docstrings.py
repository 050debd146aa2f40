"""Every public name has a docstring whose Examples section runs as written."""

import doctest
import inspect

import pytest

import dkapprox
import dkapprox.io
import dkapprox.linear_model
import dkapprox.metrics
import dkapprox.models

MODULES = [dkapprox, dkapprox.io, dkapprox.models, dkapprox.linear_model, dkapprox.metrics]
PUBLIC = list({id(obj): obj for module in MODULES for obj in (getattr(module, name) for name in module.__all__)
               if callable(obj)}.values())


@pytest.mark.parametrize("obj", PUBLIC, ids=lambda o: o.__name__)
def test_public_docstring_examples_run(obj):
    if obj.__module__.startswith("sklearn"):  # re-exported as it is (johnson_lindenstrauss_min_dim)
        assert obj.__doc__
        return
    assert ">>>" in (obj.__doc__ or ""), f"{obj.__name__} has no runnable example"
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(obj, obj.__name__, globs={}):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0 and result.attempted > 0, inspect.getsourcefile(obj)


def test_docstrings_are_written_out_in_the_source():
    # a reader of the source reads the docstring help() shows: nothing assigns or fills one at import
    import ast
    import pathlib

    package = pathlib.Path(__file__).resolve().parents[1] / "dkapprox"
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if isinstance(node, (ast.Assign, ast.AugAssign)) and any(
                    getattr(t, "id", getattr(t, "attr", "")) == "__doc__" for t in targets):
                found.append(f"{path.relative_to(package)}:{node.lineno}")
    assert not found, found
