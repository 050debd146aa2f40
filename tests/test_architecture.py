"""ARCHITECTURE.md's Layout section names every folder of the package, one line each, and the root's modules."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dkapprox"


def _layout():
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return [line.strip() for line in section.splitlines() if line.startswith("    ")]


def test_the_layout_names_each_package_folder_once():
    named = [m.group(1) for line in _layout() if (m := re.match(r"dkapprox/(\w+)/\s", line))]
    folders = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert len(named) == len(set(named)), "a folder is named twice"
    assert sorted(named) == folders


def test_the_layout_names_the_root_modules_and_they_are_few():
    line = next(line for line in _layout() if line.startswith("dkapprox/*.py"))
    named = {name.strip() for name in re.sub(r"\([^)]*\)", "", line.split(None, 1)[1]).split(",")}
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert len(modules) <= 8, sorted(modules)
    assert modules == named, f"root modules against from ARCHITECTURE.md's layout: {sorted(modules ^ named)}"


def test_the_layout_folders_outside_the_package_exist():
    for line in _layout():
        path = line.split()[0]
        if not path.startswith("dkapprox/"):
            assert (ROOT / path).is_dir(), path
