"""The estimator registry is the one list: the CLI, model files, metrics and the tests derive from it."""

import json
import pathlib
import re

import pytest
from _estimators import CHECKS, CONTRACT

import dkapprox
from dkapprox import _registry, cli
from dkapprox.cli._jobs import DEFAULT_RANDOM_STATE, METHODS, make_estimator
from dkapprox.models._state_codec import public_estimators

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_registered_estimator_is_configured():
    names = {cls.__name__ for cls in _registry.ESTIMATORS}
    assert set(CHECKS) == names, "configure the new estimator for scikit-learn's checks in tests/_estimators.py"
    assert set(CONTRACT) == {cls.__name__ for cls in _registry.TRANSFORMERS}, \
        "configure the new transformer for the contract tests in tests/_estimators.py"


def test_every_public_estimator_is_registered():
    from sklearn.base import BaseEstimator

    public = set()
    for package in (dkapprox, dkapprox.kernel_approximation, dkapprox.random_projection, dkapprox.random_features,
                    dkapprox.nystroem, dkapprox.linear_model):
        public |= {obj for name in package.__all__ if isinstance(obj := getattr(package, name), type)
                   and issubclass(obj, BaseEstimator)}
    assert public == set(_registry.ESTIMATORS)


def test_cli_methods_and_model_files_derive_from_the_registry():
    assert METHODS == {cls._cli_name: cls for cls in _registry.TRANSFORMERS if hasattr(cls, "_cli_name")}
    assert sorted(METHODS) == ["additive_chi2", "binning", "fourier", "gaussian", "nystroem", "poly", "rbf",
                                   "skewed_chi2", "sparse"]
    assert public_estimators() == {cls.__name__: cls for cls in _registry.ESTIMATORS}


def test_every_transformer_is_a_method_of_every_command_that_fits():
    """A new feature map cannot be left out of the jobs: it must declare its own ``--method`` name
    (not inherit its parent's, which would hide one of the two), and fit and featurize offer it."""
    declared = {cls: cls.__dict__.get("_cli_name") for cls in _registry.TRANSFORMERS}
    missing = sorted(cls.__name__ for cls, name in declared.items() if not name)
    assert not missing, f"declare _cli_name (its --method) on {missing}"
    assert len(set(declared.values())) == len(declared), f"two transformers share a --method: {declared}"
    assert _registry.cli_methods() == {name: cls for cls, name in declared.items()}
    for command in (cli.dkapprox.commands["fit"], cli.dkapprox.commands["featurize"]):
        (method,) = (p for p in command.params if p.name == "method")
        assert sorted(method.type.choices) == sorted(declared.values()), command.name
        assert all(f"{name} ({cls.__name__})" in method.help for cls, name in declared.items())
    jobs = (ROOT / "docs" / "jobs.rst").read_text()
    listed = jobs.split("``--method`` is one of", 1)[1].split(":", 1)[0]
    assert sorted(re.findall(r"``(\w+)``", listed)) == sorted(declared.values()), "docs/jobs.rst lists the methods"


def _as_param(value):
    """A parameter's value as ``--param KEY=VALUE`` spells it."""
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


@pytest.mark.parametrize("cls, params", [pytest.param(cls, params, id=f"{cls.__name__}-{i}")
                                         for cls in _registry.TRANSFORMERS
                                         for i, params in enumerate(CONTRACT[cls.__name__])])
def test_every_configuration_the_tests_run_is_reachable_from_the_command_line(cls, params):
    """Each contract configuration of each transformer, given as --param KEY=VALUE (strings, numbers,
    booleans), builds the same estimator as the Python call."""
    items = [f"{key}={_as_param(value)}" for key, value in params.items()]
    est = make_estimator(cls._cli_name, params=items)
    expected = cls(**params)
    if "random_state" in expected.get_params() and "random_state" not in params:
        expected.set_params(random_state=DEFAULT_RANDOM_STATE)
    assert type(est) is cls and est.get_params() == expected.get_params()
    assert all(type(est.get_params()[k]) is type(v) for k, v in params.items())


def test_every_transformer_declares_its_exact_kernel():
    for est in (cls(**CONTRACT[cls.__name__][0]) for cls in _registry.TRANSFORMERS):
        assert callable(getattr(type(est), "_exact_kernel", None)), type(est).__name__
