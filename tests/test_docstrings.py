"""Every public name has a docstring whose Examples section runs as written."""

import doctest
import inspect

import _estimators
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


def _attributes_section(doc):
    """{name: description} of the numpydoc "Attributes" section of ``doc``."""
    lines = inspect.cleandoc(doc).splitlines()
    start = lines.index("Attributes") + 2
    described, name = {}, None
    for line in lines[start:]:
        if line and not line.startswith(" "):
            if " : " not in line:
                break  # the next section's title
            name = line.split(" : ")[0]
            described[name] = ""
        elif line.strip() and name is not None:
            described[name] += line.strip() + " "
    return described


@pytest.mark.parametrize("name", sorted(_estimators.CONTRACT))
def test_every_fitted_attribute_is_described(name):
    # as scikit-learn's docstrings do: each fitted attribute with its type or shape and a line saying what it is
    import numpy as np
    import pandas as pd

    cls = getattr(dkapprox, name)
    described = _attributes_section(cls.__doc__)
    X = pd.DataFrame(np.random.default_rng(0).random((60, 6)), columns=[f"c{i}" for i in range(6)])
    fitted = set()
    for params in _estimators.CONTRACT[name]:
        extra = {"compute_inverse_components": True} if "compute_inverse_components" in cls().get_params() else {}
        est = cls(**params, **extra).fit(X)
        fitted |= {k for k in vars(est) if k.endswith("_") and not k.startswith("_")}
    assert fitted <= set(described), (name, fitted - set(described))
    assert all(described[k] for k in fitted), (name, [k for k in fitted if not described[k]])
