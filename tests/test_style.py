"""The code passes ruff with the configuration in pyproject.toml ([tool.ruff])."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "dkapprox", "tests", "examples",
                          "benchmarks"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_comments_say_why_without_timings_cards_or_issue_numbers():
    # measurements and the stories of how a bug was found belong in docs/performance.md, benchmarks/ and the changelog
    import io
    import re
    import tokenize

    history = re.compile(r"\bissue \d+|\b(H100|H200|A100|Zen|Xeon|Skylake\w*|Cooperlake|EPYC)\b"
                         r"|\b\d[\d.,]*\s?(s|ms|us|ns)\b(?!.*\bdefault)", re.IGNORECASE)
    found = []
    for path in sorted((ROOT / "dkapprox").rglob("*.py")):
        tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        found += [f"{path.relative_to(ROOT)}:{tok.start[0]}: {tok.string}" for tok in tokens
                  if tok.type == tokenize.COMMENT and history.search(tok.string)]
    assert not found, "\n".join(found)
