"""README.md is the front door: the two commands at the top, three short examples that run, the
estimators, and links into docs/, which hold everything else once (no text in both places).

The documentation site itself is built and checked by tests/test_docs.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import zarr

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 150
#: the docs pages the README must send a reader to (issue 24): jobs and exit codes, object storage,
#: clusters and SLURM, precision, what it survives, performance; and where to start
REQUIRED_PAGES = ["docs/getting_started.rst", "docs/jobs.rst", "docs/storage.md", "docs/clusters.md",
                  "docs/precision.md", "docs/survives.md", "docs/performance.md"]
#: a run of this many words of README prose found in a docs page is text that exists twice
SHARED_WORDS = 8


def _text():
    return README.read_text(encoding="utf-8")


def _blocks(text, language):
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def _prose_words(text):
    """The words of a Markdown or reST text outside code and tables (names, not prose), lower case."""
    text = re.sub(r"^```.*?^```", " ", text, flags=re.S | re.M)
    text = re.sub(r"^\|.*$", " ", text, flags=re.M)
    text = re.sub(r"^\.\. code-block::.*?(?=^\S)", " ", text, flags=re.S | re.M)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # [words](link) -> words
    text = re.sub(r":\w+:`~?([^`<]*?)(?:\s*<[^>]*>)?`", r"\1", text)  # :class:`~x.Y` -> x.Y
    text = re.sub(r"\{\w+\}`~?([^`]*)`", r"\1", text)
    return re.findall(r"[\w.'/-]*\w", text.lower())


def _docs_pages():
    skip = {"_build", "auto_examples", "generated", "_templates"}
    return [p for p in sorted((ROOT / "docs").rglob("*")) if p.suffix in (".rst", ".md") and not
            skip & set(p.relative_to(ROOT / "docs").parts)]


def test_the_readme_is_short():
    lines = len(_text().splitlines())
    assert lines <= MAX_LINES, f"README.md has {lines} lines; at most {MAX_LINES}: move the text into docs/"


def test_the_two_commands_come_first_and_ci_runs_the_second():
    text = _text()
    first = _blocks(text, "bash")[0]
    assert text.index(first) < text.index("\n## "), "the two commands come before the first section"
    demo, tests = first.strip().splitlines()
    assert demo == "python3 -m venv .venv && .venv/bin/python -m pip install -e . && .venv/bin/dkapprox demo"
    assert tests == ('python3 -m venv .venv && .venv/bin/python -m pip install -e ".[test,docs]" '
                     "&& .venv/bin/python -m pytest -q -n auto --dist loadfile")
    ci = [line.strip().replace("pip install -q ", "pip install ")
          for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert tests in ci, ".ci/run must run the README's test command (its first lane)"


def test_every_link_of_the_readme_leads_to_a_file_and_the_docs_pages_are_linked():
    links = [link for link in re.findall(r"\]\(([^)\s]+)\)", _text()) if "://" not in link]
    missing = [link for link in links if not (ROOT / link.split("#")[0]).exists()]
    assert not missing, f"README.md links to files that are not there: {missing}"
    unlinked = [page for page in REQUIRED_PAGES if page not in links]
    assert not unlinked, f"README.md does not link to {unlinked}"


def test_the_docs_do_not_include_the_readme():
    including = [str(page.relative_to(ROOT)) for page in _docs_pages()
                 if re.search(r"include(::|\})\s*\S*README\.md", page.read_text(encoding="utf-8"))]
    assert not including, f"the docs are the single source; these pages include README.md: {including}"


def test_no_text_is_both_in_the_readme_and_in_the_docs():
    docs = " " + " ".join(" ".join(_prose_words(p.read_text(encoding="utf-8"))) for p in _docs_pages()) + " "
    words = _prose_words(_text())
    twice = sorted({" ".join(words[i:i + SHARED_WORDS]) for i in range(len(words) - SHARED_WORDS + 1)
                    if f" {' '.join(words[i:i + SHARED_WORDS])} " in docs})
    assert not twice, f"text in README.md and in docs/ (keep it in docs/, link to it): {twice}"


def test_the_python_examples_of_the_readme_run(tmp_path):
    rng = np.random.default_rng(0)
    zarr.create_array(str(tmp_path / "input.zarr"), shape=(3_000, 8), chunks=(1_000, 8),
                      dtype="float32")[:] = rng.random((3_000, 8), dtype=np.float32)
    examples = _blocks(_text(), "python")
    assert len(examples) >= 3, "one example each for NumPy, dask and Zarr"
    for code in examples:
        run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, f"this README example fails:\n{code}\n{run.stderr[-3000:]}"
    assert zarr.open_array(str(tmp_path / "features.zarr" / "features")).shape == (3_000, 256)


def test_every_exit_code_of_the_cli_is_in_the_jobs_page():
    from dkapprox import errors
    from dkapprox.cli import _main as cli

    codes = sorted(row.code for row in errors.EXIT_CODES)
    assert {v for k, v in vars(cli).items() if k.startswith("EXIT_")} <= set(codes)
    table = (ROOT / "docs" / "jobs.rst").read_text(encoding="utf-8")
    missing = [code for code in codes if not re.search(rf"^{code}\s{{2,}}\S", table, flags=re.M)]
    assert not missing, f"docs/jobs.rst's table of exit codes lacks {missing}"
