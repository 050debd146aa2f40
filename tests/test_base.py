"""BlockwiseTransformer declares the hooks a subclass must define: a missing one fails at construction, by name."""

import numpy as np
import pytest

from dkapprox import _registry
from dkapprox._base import BlockwiseTransformer


class Incomplete(BlockwiseTransformer):
    def _fit(self, X):
        pass

    def _state(self, dtype):
        return None


def test_a_subclass_without_a_hook_cannot_be_made():
    with pytest.raises(TypeError, match="_n_features_out"):
        Incomplete()


def test_every_transformer_defines_every_hook():
    for cls in _registry.TRANSFORMERS:
        assert not getattr(cls, "__abstractmethods__", None), (cls.__name__, cls.__abstractmethods__)


def test_the_width_hook_gives_the_fitted_width():
    from dkapprox import AdditiveChi2Sampler

    est = AdditiveChi2Sampler(sample_steps=3).fit(np.ones((4, 5)))
    assert est._n_features_out == est.transform(np.ones((4, 5))).shape[1] == 25


def test_no_class_borrows_another_class_s_method():
    # estimators that do the same thing share a base class, as RidgeCV and RidgeClassifierCV share _BaseRidgeCV
    import ast
    import pathlib

    package = pathlib.Path(__file__).resolve().parents[1] / "dkapprox"
    found = []
    for path in sorted(package.rglob("*.py")):
        for cls in ast.walk(ast.parse(path.read_text())):
            if isinstance(cls, ast.ClassDef):
                for node in cls.body:
                    value = getattr(node, "value", None)
                    if (isinstance(node, ast.Assign) and isinstance(value, ast.Attribute)
                            and isinstance(value.value, ast.Name) and value.value.id[:1].isupper()):
                        found.append(f"{path.relative_to(package)}:{node.lineno}: {cls.name}.{value.attr}")
    assert not found, found
