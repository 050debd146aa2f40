"""scikit-learn's private names live in dkapprox/_sklearn_compat.py, and dkapprox runs on the oldest release allowed.

The slow test builds a throwaway environment with the oldest scikit-learn
``pyproject.toml`` allows (1.6), every other package shared with this one,
and runs the tests that exercise the compatibility module there: parity with
scikit-learn's numbers and errors, set_output and the HTML repr, sample
weights, parameter validation, model files, and scikit-learn's own estimator
checks (about a minute in all). An upgrade that moves a private
name then fails here and in one file, not across the package.
"""

from __future__ import annotations

import ast
import os
import pathlib
import re
import subprocess
import sys
import sysconfig

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dkapprox"
COMPAT = PACKAGE / "_sklearn_compat.py"
OLDEST = re.search(r'"scikit-learn>=([0-9.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)

#: The tests run against the oldest scikit-learn: those that touch each name _sklearn_compat provides.
COMPAT_SUBSET = [
    "tests/test_sklearn_compat.py",
    "tests/kernel_approximation/test_parity.py",
    "tests/random_projection/test_parity.py",
    "tests/test_repr.py",
    "tests/linear_model/test_lm_sample_weight.py",
    "tests/linear_model/test_lm_ridge_cv.py",
    "tests/nystroem/test_parity.py",
    "tests/io/test_model_files.py",
    "tests/test_metrics.py",
    # scikit-learn's own estimator checks: tags and checks differ between releases
    "tests/test_estimator_checks.py",
    "tests/nystroem/test_estimator_checks.py",
    "tests/random_features/test_rf_estimator_checks.py",
    "tests/linear_model/test_lm_estimator_checks.py",
]


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
    assert not wrong, "import these through dkapprox._sklearn_compat:\n" + "\n".join(wrong)


def test_the_compat_module_provides_every_name_it_lists():
    from dkapprox import _sklearn_compat

    assert [name for name in _sklearn_compat.__all__ if not hasattr(_sklearn_compat, name)] == []


def test_the_compat_subset_exists():
    assert all((ROOT / path).is_file() for path in COMPAT_SUBSET)


@pytest.mark.slow
def test_the_compat_subset_passes_on_the_oldest_scikit_learn(tmp_path):
    # A venv whose own site-packages hold only scikit-learn OLDEST.*; everything else (NumPy,
    # SciPy, dask, pytest) comes from this environment's site-packages through a .pth file,
    # which Python reads after the venv's own packages: ~10 s instead of a full install.
    if os.environ.get("DKAPPROX_OLDEST_SKLEARN") == "1":
        pytest.skip("already running inside the oldest-scikit-learn environment")
    venv = tmp_path / "oldest"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    pathlib.Path(purelib, "_dkapprox_parent.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    spec = f"scikit-learn=={OLDEST}.*"
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", spec],
                         capture_output=True, text=True)
    if pip.returncode != 0:
        message = f"cannot install {spec} (no package index reachable?): {pip.stderr.strip()[-300:]}"
        if os.environ.get("CI") == "true":  # CI reaches PyPI: the oldest scikit-learn must be tested there
            pytest.fail(message)
        pytest.skip(message)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DKAPPROX_OLDEST_SKLEARN": "1"}
    version = subprocess.run([str(python), "-c", "import sklearn; print(sklearn.__version__)"], env=env,
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version.startswith(OLDEST + "."), version
    run = subprocess.run([str(python), "-m", "pytest", "-q", "-x", "-p", "no:randomly", "-p", "no:cacheprovider",
                          *COMPAT_SUBSET], cwd=ROOT, env=env, capture_output=True, text=True)
    tail = "\n".join(run.stdout.splitlines()[-30:])
    print(f"\nscikit-learn {version}:\n{tail}")
    assert run.returncode == 0, tail
