"""Every example in examples/ that this suite owns runs at a small size and prints sane numbers."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).parents[1] / "examples"


def run(name, *args, timeout=300):
    result = subprocess.run([sys.executable, str(EXAMPLES / name), *map(str, args)], capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_featurize_zarr_store(tmp_path):
    out = run("featurize_zarr_store.py", "--rows", 20_000, "--chunk-rows", 5_000, "--n-components", 64,
              "--dir", tmp_path)
    assert "input 20,000 x 32 float32; features (20000, 64) in 4 blocks" in out
    assert "wrote 4 of 4 blocks" in out
    difference = float(re.search(r"max \|stored - in-memory transform\| on the first 1000 rows: (\S+)", out)[1])
    assert difference <= 1e-5
    assert "status=complete shape=[20000, 64] chunks=[5000, 64]" in out
    assert (tmp_path / "features.zarr").is_dir()


def test_nystroem_pipeline():
    out = run("nystroem_pipeline.py", "--n-samples", 2_000)
    accuracy = {m[1].strip(): float(m[2]) for m in re.finditer(r"^(.+?)\s+accuracy (\d\.\d+)", out, re.M)}
    linear = accuracy["linear (LogisticRegression)"]
    kernel = accuracy["Nystroem(100) + LogisticRegression"]
    exact = next(v for k, v in accuracy.items() if k.startswith("exact RBF SVC"))
    assert linear < 0.75  # circles are not linearly separable
    assert kernel > 0.95 and exact > 0.95  # the kernel separates them, approximately as well as exactly
    assert "equal to the in-memory ones: True" in out


def test_plot_kernel_approximation(tmp_path):
    png = tmp_path / "k.png"
    out = run("plot_kernel_approximation.py", "--max-components", 80, "--n-samples", 1000, "--out", png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    rows = [line for line in out.splitlines() if re.match(r"^\s+\d+ \|", line)]
    assert len(rows) >= 5
    table = np.array([[float(v) for v in re.findall(r"-?\d+\.\d+", line)] for line in rows])
    rff_error, rff_acc, nys_error, nys_acc = table.T
    assert np.all((rff_error > 0) & (nys_error > 0) & (nys_error < 1.0))
    assert rff_error[-1] < rff_error[0] and nys_error[-1] < nys_error[0] / 3  # more components, less error
    assert np.all(nys_error < rff_error)  # Nystroem adapts to the data
    assert np.all((rff_acc >= 0) & (rff_acc <= 1)) and nys_acc[-1] > 0.8
    exact = float(re.search(r"exact RBF SVC accuracy: (\d\.\d+)", out)[1])
    assert exact > 0.85


def test_learning_study(tmp_path):
    out = run("learning_study.py", "--quick", "--n-rows", 4000, "--no-cluster", "--svc-budget", 30, "--out", tmp_path)
    for name in ("digits", "synthetic"):
        png = tmp_path / f"learning_study_{name}.png"
        assert f"wrote {png}" in out
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rff, nystroem = map(float, re.search(r"^\s+200\s+(\d\.\d+)\s+(\d\.\d+)", out, re.M).groups())
    assert rff > 0.9 and nystroem > 0.9  # digits, 200 components: both near the exact SVC's 0.99
