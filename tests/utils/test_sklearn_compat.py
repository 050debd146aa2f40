"""scikit-learn's private names live in dkapprox/utils/_sklearn_compat.py, and nowhere else.

That the package runs on the oldest scikit-learn (and the oldest of every other dependency)
pyproject.toml allows is tests/test_packaging.py's: the wheel in a venv of the lower bounds,
running a compat subset of these tests. An upgrade that moves a private name then fails
there and in one file, not across the package.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dkapprox"
COMPAT = PACKAGE / "utils" / "_sklearn_compat.py"


def _private_sklearn_imports(path):
    """(line, name) of every private scikit-learn module or name a file imports."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sklearn"):
            private_module = any(part.startswith("_") for part in node.module.split("."))
            names = [a.name for a in node.names if a.name.startswith("_")]
            if private_module or names:
                found.append((node.lineno, f"{node.module}: {', '.join(a.name for a in node.names)}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("sklearn") and any(p.startswith("_") for p in alias.name.split(".")):
                    found.append((node.lineno, alias.name))
    return found


def test_only_the_compat_module_imports_private_sklearn_names():
    wrong = [f"{path.relative_to(ROOT)}:{line}: {what}"
             for path in sorted(PACKAGE.rglob("*.py")) if path != COMPAT
             for line, what in _private_sklearn_imports(path)]
    assert not wrong, "import these through dkapprox.utils._sklearn_compat:\n" + "\n".join(wrong)


def test_the_compat_module_provides_every_name_it_lists():
    from dkapprox.utils import _sklearn_compat

    assert [name for name in _sklearn_compat.__all__ if not hasattr(_sklearn_compat, name)] == []
