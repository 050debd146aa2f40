"""Every public name has a docstring whose Examples section runs as written."""

import doctest
import inspect

import pytest

import dkapprox

PUBLIC = [getattr(dkapprox, name) for name in dkapprox.__all__]


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
