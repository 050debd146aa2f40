"""The wheel a pip user gets works on its own, and on the oldest versions pyproject.toml allows.

One throwaway environment serves both (built once per run, a few minutes in all):

1. ``python -m build`` makes the sdist and, from it, the wheel; ``twine check`` passes on both.
2. A fresh venv gets the wheel and every lower bound of ``[project] dependencies`` pinned exactly
   (``numpy>=X`` installs ``numpy==X``; binary wheels only, pip resolving everything else).
3. From a temporary folder, so that no repository is on ``sys.path``: every public name imports,
   ``dkapprox --version``, ``dkapprox cluster-config`` and ``dkapprox demo --small`` run.
4. The sdist's own tests, with the sdist's ``dkapprox/`` removed so that the wheel is what they
   import, run the compat subset there: the tests that reach into scikit-learn (every name
   ``_sklearn_compat`` provides), SciPy, dask and Zarr where their APIs moved between releases.

A lower bound that fails here was never true: raise it in pyproject.toml and say why there.
Without a package registry the test skips, except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]
_TOML = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PYPROJECT, SETUPTOOLS = _TOML["project"], _TOML["tool"]["setuptools"]
#: the cluster config templates: one copy at the repository's top, package data in the wheel
TEMPLATES, PACKAGED_TEMPLATES = ROOT / "cluster_configs", "dkapprox/cluster/configs/"

#: the tests run under the lower bounds: those that touch what changed between releases of the
#: dependencies (scikit-learn's private names, its estimator checks and set_output, SciPy's sparse
#: arrays and QMC samplers, dask reductions, model files); Zarr output stores are the demo's. A file
#: costs its run time once more here (test_write_features would add 25 s on 2 cores)
COMPAT_SUBSET = [
    "tests/kernel_approximation/test_parity.py",
    "tests/random_projection/test_parity.py",
    "tests/test_repr.py",
    "tests/linear_model/test_sample_weight.py",
    "tests/linear_model/test_ridge_cv.py",
    "tests/nystroem/test_parity.py",
    "tests/models/test_model_files.py",
    "tests/test_metrics.py",
    # scikit-learn's own estimator checks: tags and checks differ between releases
    "tests/test_estimator_checks.py",
    "tests/nystroem/test_estimator_checks.py",
    "tests/random_features/test_estimator_checks.py",
    "tests/linear_model/test_estimator_checks.py",
]
#: what the compat subset needs besides dkapprox, installed within the same pins
TEST_PACKAGES = ["pytest", "hypothesis", "pandas"]
#: the same check under other chunkings: chunk invariance, not compatibility (5 s each on 2 cores)
DESELECT = [f"tests/test_metrics.py::test_dask_input_gives_the_same_errors_whatever_the_chunking[{which}-{chunks}]"
            for which in ("sklearn", "dkapprox") for chunks in ("chunks1", "chunks2")]
#: the subpackages whose __all__ is public besides dkapprox's own
PUBLIC_MODULES = ["dkapprox", "dkapprox.io", "dkapprox.linear_model", "dkapprox.metrics", "dkapprox.errors",
                  "dkapprox.cluster", "dkapprox.kernel_approximation", "dkapprox.random_projection",
                  "dkapprox.random_features", "dkapprox.nystroem"]


def lower_bounds() -> list[str]:
    """``name[extras]==X`` for every dependency ``name[extras]>=X`` of pyproject.toml."""
    pins = []
    for line in PYPROJECT["dependencies"]:
        requirement = Requirement(line)
        lows = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        assert len(lows) == 1, f"{line}: every dependency needs one lower bound (>=) to be tested"
        extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
        pins.append(f"{requirement.name}{extras}=={lows[0]}")
    return pins


def _oldest_python() -> tuple:
    """The oldest (major, minor) that ``requires-python`` allows, from its ``>=`` bound."""
    (low,) = [spec.version for spec in SpecifierSet(PYPROJECT["requires-python"]) if spec.operator == ">="]
    return tuple(int(part) for part in low.split(".")[:2])


def _version():
    """The version the wheel was built with, read the way setuptools reads it (no import)."""
    namespace = {}
    exec((ROOT / "dkapprox" / "_version.py").read_text(encoding="utf-8"), namespace)
    return namespace["__version__"]


def _run(args, timing=None, **kwargs):
    started = time.perf_counter()
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    if timing is not None:
        timing.append(time.perf_counter() - started)
    return result


def test_the_compat_subset_exists():
    assert all((ROOT / path).is_file() for path in COMPAT_SUBSET)
    assert all(test.split("::")[0] in COMPAT_SUBSET for test in DESELECT)


def test_pyproject_lists_every_package_and_maps_the_templates_from_the_top():
    """pyproject.toml lists the packages (packages.find cannot see the templates' package, whose folder is
    cluster_configs/): every folder of dkapprox/ that holds Python, and the templates' data-only package."""
    folders = {".".join(path.parent.relative_to(ROOT).parts) for path in (ROOT / "dkapprox").rglob("*.py")
               if "__pycache__" not in path.parts}
    assert sorted(SETUPTOOLS["packages"]) == sorted(folders | {"dkapprox.cluster.configs"})
    assert SETUPTOOLS["package-dir"] == {"dkapprox.cluster.configs": "cluster_configs"}
    assert SETUPTOOLS["package-data"]["dkapprox.cluster.configs"] == ["*.yaml"]
    assert sorted(TEMPLATES.glob("*.yaml")) and not (ROOT / PACKAGED_TEMPLATES).exists()


def _no_registry(message):
    if os.environ.get("CI") == "true":  # CI reaches the registry: the lower bounds must be tested there
        pytest.fail(message)
    pytest.skip(message)


def _tail(text, n=4000):
    """pip's output without the lines a machine's own pip config adds to every command."""
    return "\n".join(line for line in text.splitlines() if not line.startswith("WARNING: Location "))[-n:]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The sdist and the wheel, built once as a packager would (python -m build: the wheel from the sdist)."""
    tmp = tmp_path_factory.mktemp("packaging")
    started = time.perf_counter()
    # from a copy without build outputs, as a clean clone: setuptools also packs whatever a stale
    # *.egg-info/SOURCES.txt of an earlier build lists, which would hide a file MANIFEST.in misses
    source = tmp / "source"
    for path in _source_files():
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, source / path)
    build = _run([sys.executable, "-m", "build", "--outdir", tmp / "dist", source], cwd=tmp)
    if build.returncode != 0 and "Could not find a version that satisfies" in build.stdout + build.stderr:
        _no_registry(f"python -m build could not install setuptools (no package registry?): {_tail(build.stderr, 500)}")
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (sdist,) = (tmp / "dist").glob("dkapprox-*.tar.gz")
    (wheel,) = (tmp / "dist").glob("dkapprox-*.whl")
    print(f"built in {time.perf_counter() - started:.1f} s: {wheel.name} {wheel.stat().st_size / 1024:.0f} KiB, "
          f"{sdist.name} {sdist.stat().st_size / 1024:.0f} KiB")
    return {"tmp": tmp, "sdist": sdist, "wheel": wheel}


@pytest.fixture(scope="module")
def env(built):
    """A fresh venv holding the wheel and the lower bounds, and a finished ``dkapprox demo --small``."""
    if os.environ.get("DKAPPROX_IN_LOWER_BOUNDS") == "1":
        pytest.skip("already running inside the lower-bounds environment")
    oldest = _oldest_python()
    if sys.version_info[:2] != oldest:  # .ci/run's newest-Python lane: numpy 2.0 has no wheel for 3.13
        pytest.skip(f"the lower bounds are tested on Python {oldest[0]}.{oldest[1]}, the oldest requires-python "
                    f"allows (.ci/run's first lane); many have no wheel for Python {sys.version.split()[0]}")
    assert SpecifierSet(PYPROJECT["requires-python"]).contains(".".join(map(str, sys.version_info[:3])))
    tmp, wheel = built["tmp"], built["wheel"]
    timings = {}
    pins = lower_bounds()
    pip = [sys.executable, "-m", "pip"]
    probe = _run([*pip, "download", "--no-deps", "--only-binary", ":all:", "--dest", tmp / "probe", pins[0]])
    if probe.returncode != 0:
        _no_registry(f"cannot download {pins[0]} (no package registry reachable?): {_tail(probe.stderr, 500)}")

    steps = []
    venv = tmp / "venv"
    python = venv / "bin" / "python"
    made = _run([sys.executable, "-m", "venv", "--without-pip", venv], timing=steps)
    assert made.returncode == 0, made.stderr
    # byte-compiled as a user's pip does (without it the demo's client and two workers each compile what
    # they import, at once: no faster in all)
    install = _run([*pip, "--python", python, "install", "-q", "--only-binary", ":all:", wheel, *pins], timing=steps)
    assert install.returncode == 0, (
        f"the lower bounds of pyproject.toml cannot be installed together on Python "
        f"{sys.version.split()[0]} (pins: {' '.join(pins)}); raise the one pip names:\n{_tail(install.stderr)}")
    work = tmp / "work"  # a folder with nothing of the repository in it
    work.mkdir()
    demo = _run([venv / "bin" / "dkapprox", "demo", "--small"], cwd=work, timing=steps, timeout=600)
    timings["empty venv to a finished demo --small (venv, pip install, demo)"] = sum(steps)
    timings["  of which pip install"], timings["  of which demo --small"] = steps[1], steps[2]
    return {**built, "python": python, "venv": venv, "work": work, "pins": pins, "demo": demo, "timings": timings}


def _source_files():
    """The files of this checkout (or unpacked sdist), without build outputs and caches."""
    skip = {"__pycache__", "_build", "auto_examples", "generated", "results", ".hypothesis", ".pytest_cache"}
    found = []
    for folder, folders, files in os.walk(ROOT):
        folders[:] = [f for f in folders if f not in skip and not f.endswith((".zarr", ".egg-info"))
                      and not (Path(folder) == ROOT and f in (".git", ".venv", "build", "dist"))]
        found += [str((Path(folder) / f).relative_to(ROOT)) for f in files if f != "sg_execution_times.rst"]
    return found


def test_twine_check_passes_on_the_sdist_and_the_wheel(built):
    check = _run([sys.executable, "-m", "twine", "check", "--strict", built["sdist"], built["wheel"]])
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_sdist_holds_the_tests_and_what_they_read_and_the_wheel_the_package(built):
    with tarfile.open(built["sdist"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    wanted = [path for path in _source_files() if path.split("/")[0] in
              ("dkapprox", "cluster_configs", "tests", "docs", "examples", "benchmarks", ".ci")
              or path in ("pyproject.toml", "README.md")]
    missing = sorted(set(wanted) - names)
    assert not missing, f"the sdist lacks {missing}: MANIFEST.in or [tool.setuptools.package-data]"
    junk = sorted(name for name in names if "__pycache__" in name or "/_build/" in name or ".zarr/" in name)
    assert not junk, junk
    with zipfile.ZipFile(built["wheel"]) as wheel:
        files = set(wheel.namelist())
    package = {path for path in wanted if path.startswith("dkapprox/")}
    assert package <= files, f"the wheel lacks {sorted(package - files)}"
    assert not [name for name in files if name.startswith(("tests/", "docs/", "benchmarks/", "cluster_configs/"))]
    # the templates: cluster_configs/ at the top, the same files byte for byte as the wheel's package data
    with zipfile.ZipFile(built["wheel"]) as wheel:
        packed = {name[len(PACKAGED_TEMPLATES):]: wheel.read(name) for name in wheel.namelist()
                  if name.startswith(PACKAGED_TEMPLATES)}
    top = {path.name: path.read_bytes() for path in TEMPLATES.iterdir() if path.is_file()}
    assert top and packed == top, f"wheel {sorted(packed)} against cluster_configs/ {sorted(top)}"


@pytest.mark.slow  # the venv of the lower bounds: a minute to make
def test_the_lower_bounds_are_what_is_installed(env):
    listed = _run([sys.executable, "-m", "pip", "--python", env["python"], "list", "--format", "freeze"]).stdout
    installed = {Requirement(line.split("==")[0]).name.lower().replace("_", "-"): line.split("==")[1]
                 for line in listed.splitlines() if "==" in line}
    for pin in env["pins"]:
        requirement = Requirement(pin)
        (version,) = [spec.version for spec in requirement.specifier]
        assert requirement.specifier.contains(installed[requirement.name.lower()]), (pin, installed)
        print(f"{requirement.name}=={installed[requirement.name.lower()]} (lower bound {version})")


@pytest.mark.slow  # the venv of the lower bounds: a minute to make
def test_every_public_name_imports_from_the_wheel_alone(env):
    code = ("import importlib, sys\n"
            f"assert not any(p.startswith({str(ROOT)!r}) for p in sys.path), sys.path\n"
            f"for name in {PUBLIC_MODULES!r}:\n"
            "    module = importlib.import_module(name)\n"
            "    assert module.__file__.startswith(sys.prefix), module.__file__\n"
            "    for attr in module.__all__:\n"
            "        getattr(module, attr)\n"
            "import dkapprox; print(dkapprox.__version__)\n")
    run = _run([env["python"], "-I", "-c", code], cwd=env["work"])
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == _version()


@pytest.mark.slow  # the venv of the lower bounds: a minute to make
def test_the_command_line_from_the_wheel(env):
    dkapprox = env["venv"] / "bin" / "dkapprox"
    version = _run([dkapprox, "--version"], cwd=env["work"])
    assert version.returncode == 0 and version.stdout.strip() == f"dkapprox {_version()}", version
    listed = _run([dkapprox, "cluster-config", "--list"], cwd=env["work"])
    templates = ["cuda", "kubernetes", "local", "pbs", "scheduler", "slurm"]
    assert listed.returncode == 0 and listed.stdout.split() == templates
    slurm = _run([dkapprox, "cluster-config", "slurm"], cwd=env["work"])
    shipped = (TEMPLATES / "slurm.yaml").read_text(encoding="utf-8")
    assert slurm.returncode == 0 and slurm.stdout == shipped
    bad = _run([dkapprox, "cluster-config", "nope"], cwd=env["work"])
    assert bad.returncode == 2 and "slurm" in bad.stderr, bad


@pytest.mark.slow  # the venv of the lower bounds: a minute to make
def test_demo_small_runs_from_the_wheel(env):
    demo = env["demo"]
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-3000:]
    assert "check  first 1,000 rows equal the in-memory transform" in demo.stdout, demo.stdout
    for what, seconds in env["timings"].items():
        print(f"{what}: {seconds:.1f} s")


@pytest.mark.slow
def test_the_sdists_compat_subset_passes_on_the_lower_bounds(env):
    tmp, python = env["tmp"], env["python"]
    constraints = tmp / "constraints.txt"
    pins = [Requirement(pin) for pin in env["pins"]]
    for pin in pins:
        pin.extras = set()  # pip takes no extras in constraints
    constraints.write_text("".join(f"{pin}\n" for pin in pins))
    started = time.perf_counter()
    install = _run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-compile", "--only-binary",
                    ":all:", "-c", constraints, *TEST_PACKAGES])  # the tests import little of them: not compiled
    assert install.returncode == 0, _tail(install.stderr)
    with tarfile.open(env["sdist"]) as sdist:
        sdist.extractall(tmp / "sdist", **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (source,) = (tmp / "sdist").iterdir()
    shutil.rmtree(source / "dkapprox")  # the tests must import the wheel's package
    assert all((source / path).is_file() for path in COMPAT_SUBSET), "the sdist lacks a test of the subset"
    environ = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    environ["DKAPPROX_IN_LOWER_BOUNDS"] = "1"
    run = _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=line", "-rfE", *COMPAT_SUBSET,
                *(arg for test in DESELECT for arg in ("--deselect", test))],
               cwd=source, env=environ, timeout=900)
    tail = "\n".join([line for line in run.stdout.splitlines() if not line.startswith("XFAIL")][-40:])
    print(f"\ncompat subset under {' '.join(env['pins'])} in {time.perf_counter() - started:.1f} s:\n{tail}")
    assert run.returncode == 0, tail + run.stderr[-2000:]
