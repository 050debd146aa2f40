"""The estimator registry is the one list: the CLI, model files, metrics and the tests derive from it."""

from _estimators import CHECKS, CONTRACT

import dkapprox
from dkapprox import _registry, cli
from dkapprox.models._state_codec import public_estimators


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
    assert cli.METHODS == {cls._cli_name: cls for cls in _registry.TRANSFORMERS if hasattr(cls, "_cli_name")}
    assert sorted(cli.METHODS) == ["additive_chi2", "gaussian", "nystroem", "poly", "rbf", "skewed_chi2", "sparse"]
    assert public_estimators() == {cls.__name__: cls for cls in _registry.ESTIMATORS}


def test_every_transformer_declares_its_exact_kernel():
    for est in (cls(**CONTRACT[cls.__name__][0]) for cls in _registry.TRANSFORMERS):
        assert callable(getattr(type(est), "_exact_kernel", None)), type(est).__name__
