"""The layers of dkapprox, and a test that no module imports a layer above its own.

This table is the one place the layering is written down (ARCHITECTURE.md
explains it). Each layer lists its modules (a name covers the module and
everything below it; the longest name wins) and the layers it may import
besides itself. Every import counts, including those inside function bodies,
which is where a cycle hides: ``ast`` finds them without running anything.

Python runs a package's ``__init__`` before any of its modules, so importing
``dkapprox.io._zarr_store`` also imports all of ``dkapprox.io``: a package is
one unit of import. So each package lies on one floor (all its modules in one
layer), and the packages import each other without a cycle, imports inside
functions included. That is why model files (above the estimators: they rebuild
them from the registry) are ``dkapprox.models`` and not part of ``dkapprox.io``
(below the estimators: ``_lazy`` opens Zarr input through it). What ``ast``
cannot see, a package ``__init__`` pulling in more than its modules import, the
test of a fresh interpreter below checks.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "dkapprox"

#: (layer, its packages, the layers below it that it may import), lowest first: `ls dkapprox` is this table
#: (ARCHITECTURE.md's Layout names each folder, tests/test_architecture.py checks it).
LAYERS = [
    ("foundation", ["dkapprox.errors", "dkapprox._version"], []),
    # every dask graph, the BLAS threads its tasks run with, device turns; a leaf, like dask's map_blocks
    ("engine", ["dkapprox.engine"], []),
    # scikit-learn compatibility, hashing, CPUs, progress displays, xarray, the size formatter
    ("utils", ["dkapprox.utils"], ["foundation"]),
    # how a block is computed: compiled kernels with NumPy fallbacks, array namespaces, CuPy kernels, recycling
    ("backends", ["dkapprox.backends"], ["foundation", "utils"]),
    # clusters: configs to a client, worker deaths explained around a compute
    ("cluster", ["dkapprox.cluster"], ["foundation", "utils", "backends"]),
    # Zarr and Parquet, all of dkapprox.io: input opened and checked, features written (resumable, leased)
    ("storage", ["dkapprox.io"], ["foundation", "engine", "utils", "backends", "cluster"]),
    # kernels every family shares: the Kernel class, its slices on CPUs and devices, the exact chi-squared kernels
    ("kernels", ["dkapprox.kernels"], ["foundation", "engine", "utils", "backends"]),
    # the one door of every input, its checks, frames, the row sources
    ("inputs", ["dkapprox.inputs"], ["foundation", "engine", "utils", "backends", "cluster", "storage"]),
    # the estimators: state + block function; no dask code of their own
    ("estimators", ["dkapprox._base", "dkapprox.kernel_approximation", "dkapprox.random_projection",
                    "dkapprox.random_features", "dkapprox.nystroem", "dkapprox.learning", "dkapprox.kernel_ridge",
                    "dkapprox.gaussian_process", "dkapprox.linear_model", "dkapprox.metrics"],
     ["foundation", "engine", "utils", "backends", "kernels", "inputs"]),
    ("registry", ["dkapprox._registry"], ["foundation", "utils", "estimators"]),
    # model files: the registry's estimators saved and rebuilt, through storage's locations
    ("models", ["dkapprox.models"], ["foundation", "utils", "storage", "registry"]),
    ("application", ["dkapprox", "dkapprox.__main__", "dkapprox.cli"],
     ["foundation", "engine", "utils", "backends", "cluster", "storage", "kernels", "inputs", "estimators",
      "registry", "models"]),
]


def _modules():
    """{module name: path} of every module of the package."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def layer_of(module: str) -> str:
    best = None
    for layer, names, _ in LAYERS:
        for name in names:
            if module == name or module.startswith(name + "."):
                if best is None or len(name) > len(best[1]):
                    best = (layer, name)
    if best is None:
        raise LookupError(f"{module} is in no layer: add it to LAYERS in {__file__}")
    return best[0]


def imports_of(module: str, path: pathlib.Path, known) -> set[tuple[str, int]]:
    """The dkapprox modules ``module`` imports anywhere in its file, with line numbers."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from a import b` imports the module a.b when there is one, else a name of a
            targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source
                       for alias in node.names]
        else:
            continue
        for target in targets:
            if target == "dkapprox" or target.startswith("dkapprox."):
                found.add((target, node.lineno))
    return found


def test_every_layer_imports_only_itself_and_the_layers_it_may():
    known = _modules()
    allowed = {layer: {layer, *below} for layer, _, below in LAYERS}
    wrong = []
    for module, path in sorted(known.items()):
        own = layer_of(module)
        for target, line in sorted(imports_of(module, path, known)):
            theirs = layer_of(target)
            if theirs not in allowed[own]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} ({own}) imports "
                             f"{target} ({theirs})")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_the_layer_table_is_ordered_and_names_only_lower_layers():
    seen = set()
    for layer, _, below in LAYERS:
        assert set(below) <= seen, (layer, set(below) - seen)
        seen.add(layer)


def test_the_engine_is_a_leaf():
    """The engine's modules import one another (_blocks' tasks run under _blas and _device_turns), nothing else."""
    known = _modules()
    engine = {m for m in known if m == "dkapprox.engine" or m.startswith("dkapprox.engine.")}
    for module in sorted(engine):
        assert {m for m, _ in imports_of(module, known[module], known)} <= engine - {module}


@pytest.mark.parametrize("module", ["dkapprox.engine", "dkapprox.errors", "dkapprox.utils", "dkapprox.backends",
                                    "dkapprox.cluster", "dkapprox.io", "dkapprox.kernels", "dkapprox.inputs",
                                    "dkapprox.models"])
def test_a_low_layer_imports_without_the_layers_above_it(module):
    # what ast cannot see: a package __init__ that pulls in more than its modules import
    families = ["dkapprox._base", "dkapprox.kernel_approximation", "dkapprox.nystroem", "dkapprox.kernel_ridge",
                "dkapprox.linear_model", "dkapprox._registry", "dkapprox.models", "dkapprox.cli"]
    above = {"dkapprox.engine": ["dkapprox.utils", "dkapprox.backends", "dkapprox.io", "dkapprox.cluster", *families],
             "dkapprox.errors": ["dkapprox.engine", "dkapprox.utils", "dkapprox.io"],
             "dkapprox.utils": ["dkapprox.engine", "dkapprox.backends", "dkapprox.io", *families],
             "dkapprox.backends": ["dkapprox.engine", "dkapprox.io", "dkapprox.kernels", *families],
             "dkapprox.cluster": ["dkapprox.io", "dkapprox.engine", "dkapprox.inputs", *families],
             "dkapprox.io": ["dkapprox.inputs", "dkapprox.kernels", *families],
             "dkapprox.kernels": ["dkapprox.io", "dkapprox.inputs", *families],
             "dkapprox.inputs": ["dkapprox.kernels", *families],
             "dkapprox.models": ["dkapprox.cli"]}[module]
    code = (f"import sys, importlib.util\n"
            f"spec = importlib.util.find_spec('dkapprox')\n"  # the package itself, without its __init__
            f"import types; pkg = types.ModuleType('dkapprox'); pkg.__path__ = list(spec.submodule_search_locations)\n"
            f"sys.modules['dkapprox'] = pkg\n"
            f"import {module}\n"
            f"print(sorted(m for m in sys.modules if m in {above!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def _cycles(edges) -> list[str]:
    """Every cycle a depth-first walk of ``edges`` ({node: nodes it imports}) closes, as "a -> b -> a"."""
    cycles, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for target in sorted(edges.get(node, ())):
            if state.get(target) == "open":
                cycles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return cycles


def test_no_two_modules_import_each_other_even_inside_functions():
    # within a layer imports are free, but a cycle (a imports b imports a) is never needed
    known = _modules()
    edges = {m: {t for t, _ in imports_of(m, p, known) if t in known and t != m} for m, p in known.items()}
    cycles = _cycles(edges)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def package_of(module: str) -> str:
    """The package (or top-level module) of dkapprox a module belongs to: dkapprox.io for dkapprox.io.writer."""
    return ".".join(module.split(".")[:2])


def test_no_cycle_between_packages_even_inside_functions():
    # importing any module of a package runs the package's __init__, which may import all of it: a
    # cycle between packages (io -> _registry -> estimators -> _base -> _lazy -> io) is a cycle of
    # modules waiting to happen, however lazily each single import is written
    known = _modules()
    edges, where = {}, {}
    for module, path in known.items():
        for target, line in imports_of(module, path, known):
            source, dest = package_of(module), package_of(target)
            if source != dest:
                edges.setdefault(source, set()).add(dest)
                where.setdefault((source, dest), f"{path.relative_to(PACKAGE.parent)}:{line}")
    cycles = _cycles(edges)
    shown = []
    for cycle in cycles:
        steps = cycle.split(" -> ")
        shown.append(cycle + "\n    " + "\n    ".join(f"{a} -> {b}: {where[a, b]}" for a, b in zip(steps, steps[1:])))
    assert not cycles, "import cycles between packages:\n" + "\n".join(shown)


def test_every_package_lies_on_one_floor():
    # a package split over two layers (Zarr access below the estimators, model files above them) is how
    # a cycle between packages starts: every module of a package is in the package's own layer
    known = _modules()
    split = {}
    for module in known:
        split.setdefault(package_of(module), {}).setdefault(layer_of(module), []).append(module)
    split = {package: floors for package, floors in split.items() if len(floors) > 1}
    assert not split, "packages on more than one floor:\n" + "\n".join(
        f"{package}: " + "; ".join(f"{layer}: {', '.join(sorted(ms))}" for layer, ms in floors.items())
        for package, floors in sorted(split.items()))


def test_packages_share_through_their_front_doors():
    # a package offers its names in its __init__; no module reaches into another package's modules
    known = _modules()
    wrong = []
    for module, path in sorted(known.items()):
        for target, line in sorted(imports_of(module, path, known)):
            theirs = package_of(target)
            if theirs != package_of(module) and target != theirs and theirs != "dkapprox":
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} imports {target}")
    assert not wrong, "import these from the package itself:\n" + "\n".join(wrong)
