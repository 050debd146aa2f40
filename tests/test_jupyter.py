"""In a real Jupyter kernel: the notebooks of examples/, progress widgets, and rich display.

One kernel (nbclient + ipykernel, this interpreter; its start and imports cost seconds, so it is
shared) runs, one after another:

- the notebooks in examples/ (notebook_*.py, jupytext percent format), read with jupytext, at
  10,000 rows (``DKAPPROX_EXAMPLE_ROWS``, which their parameters cell reads), with matplotlib's
  inline backend: no cell may raise, each plot cell leaves a PNG, the numbers they print are in
  their expected range. ``%reset -f`` empties the namespace before each, so a name one of them
  forgets to import or define fails there as it would for a reader;
- a notebook of checks, one cell each: progress widgets where a person watches, none when
  switched off, the HTML of fitted estimators and of lazy features. The tests read each cell's
  outputs and the widgets' final states (nbclient keeps them, as Jupyter saves them).

Real parts throughout: dask's threaded scheduler, an in-process distributed cluster, Zarr on disk.
(Progress on a terminal and when piped: tests/utils/test_progress.py.)
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import jupytext
import nbformat
import numpy as np
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from dkapprox.utils import format_size

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NOTEBOOKS = sorted(p.name for p in EXAMPLES.glob("notebook_*.py"))
ROWS = 10_000
WIDGET = "application/vnd.jupyter.widget-view+json"

SETUP = '''
import os, sys, time
import dask, dask.array as da, numpy as np
import dkapprox
from dkapprox import Nystroem
from dkapprox.io import write_features
from dkapprox.linear_model import RidgeCV

X = da.from_array(np.random.default_rng(0).random((4000, 8)).astype("float32"), chunks=1000)
y = X.sum(axis=1)

def slow(seconds):
    """One task that takes ``seconds``: a compute a person would watch."""
    return da.from_delayed(dask.delayed(lambda: (time.sleep(seconds), np.ones(3))[1])(), shape=(3,), dtype=float)
'''

#: name -> source of one cell; the kernel runs them in this order
CELLS = {
    "setup": SETUP,
    # switched on: every pass of a k-means landmark fit shows a widget (1 sample + 4 Lloyd steps)
    "fit_on": '%env DKAPPROX_PROGRESS=1\n'
              'nys = Nystroem(n_components=20, landmarks="kmeans", random_state=0).fit(X)\nnys',
    # switched off: the same fit, a write and a slow compute show nothing at all
    "off": '%env DKAPPROX_PROGRESS=0\nNystroem(n_components=20, landmarks="kmeans", random_state=0).fit(X)\n'
           'write_features(nys.transform(X), "off.zarr", plan={"n": 1})\ndkapprox.compute(slow(1.2))\nNone',
    # the default, where a person is watching: a compute longer than a second shows a widget ...
    "auto_slow": 'del os.environ["DKAPPROX_PROGRESS"]\ndkapprox.compute(slow(1.5))\nNone',
    # ... and short passes do not flicker
    "auto_fast": 'Nystroem(n_components=20, landmarks="leverage", random_state=0).fit(X)\nNone',
    "write_on": '%env DKAPPROX_PROGRESS=1\nreport = write_features(nys.transform(X), "on.zarr", plan={"n": 1})\n'
                'print(report.blocks_written, "blocks")',
    # lazy features display as dask displays them
    "features": "Z = nys.transform(X)\nZ",
    # without ipywidgets: text in the cell's output (Python's own way to make a module unimportable)
    "no_widgets": 'sys.modules["ipywidgets"] = None\ndkapprox.compute(slow(0))\ndel sys.modules["ipywidgets"]\nNone',
    # a broken widget library draws nothing and fails nothing
    "broken_widgets": 'import types\nsys.modules["ipywidgets"] = types.ModuleType("ipywidgets")\n'
                      'print(dkapprox.compute(X.sum())[0] > 0)\ndel sys.modules["ipywidgets"]',
    # under a distributed client: distributed's own widget, for the ridge learners' pass
    "distributed_on": "from distributed import Client, LocalCluster\n"
                      'client = Client(LocalCluster(n_workers=1, threads_per_worker=2, processes=False, '
                      'dashboard_address=":0"))\nridge = RidgeCV(alphas=[0.1, 1.0]).fit(X, y)\nNone',
    "distributed_text": 'sys.modules["ipywidgets"] = None\ndkapprox.compute(X.sum())\n'
                        'del sys.modules["ipywidgets"]\nNone',
    "distributed_off": '%env DKAPPROX_PROGRESS=0\nRidgeCV(alphas=[0.1, 1.0]).fit(X, y)\nclient.close()\nNone',
    "cleanup": 'os.environ.pop("DKAPPROX_PROGRESS")\nNone',
}


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """A started kernel (its KernelManager) whose environment gives the notebooks their small size."""
    tmp_path = tmp_path_factory.mktemp("kernel")
    env = {k: v for k, v in os.environ.items() if k not in ("DKAPPROX_PROGRESS", "MPLBACKEND")}
    env.update(DKAPPROX_EXAMPLE_ROWS=str(ROWS), TMPDIR=str(tmp_path),  # the notebooks' stores go to tmp_path
               MPLBACKEND="module://matplotlib_inline.backend_inline")
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=env, cwd=str(tmp_path))
    km.tmp_path = tmp_path
    yield km
    km.shutdown_kernel(now=True)


def execute(km, nb, allow_errors=False):
    """Run ``nb`` in the shared kernel, in an empty namespace; the seconds it took."""
    nb.cells.insert(0, nbformat.v4.new_code_cell("%reset -f"))
    started = time.perf_counter()
    NotebookClient(nb, km=km, timeout=240, store_widget_state=True, allow_errors=allow_errors).execute()
    del nb.cells[0]
    return time.perf_counter() - started


@pytest.fixture(scope="module")
def executed(kernel):
    """{name: executed notebook} of examples/notebook_*.py."""
    results, seconds = {}, {}
    for name in NOTEBOOKS:
        results[name] = jupytext.read(EXAMPLES / name, fmt="py:percent")
        seconds[name] = execute(kernel, results[name])
    print("\n" + ", ".join(f"{name}: {s:.1f} s" for name, s in seconds.items()))
    return results


@pytest.fixture(scope="module")
def session(kernel, executed):
    """{cell name: its outputs} of the checks, and the widgets' saved states by model id.

    Run after the example notebooks (which leave the kernel as they found it), so that those run
    as a reader's fresh kernel would.
    """
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS.values()])
    print(f"\nchecks: {execute(kernel, nb, allow_errors=True):.1f} s")  # a cell that raises fails its tests only
    states = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    return {name: cell.outputs for name, cell in zip(CELLS, nb.cells)}, states


# -- the example notebooks ----------------------------------------------------------------------


def outputs(nb, kind=None):
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
            if kind is None or out.get("output_type") == kind]


def text_of(nb):
    """Everything the notebook printed (stdout), in order."""
    return "".join(out.get("text", "") for out in outputs(nb, "stream") if out.get("name") == "stdout")


def pngs(nb):
    return [out for out in outputs(nb) if "image/png" in out.get("data", {})]


def html_results(nb):
    return [out["data"]["text/html"] for out in outputs(nb, "execute_result") if "text/html" in out.get("data", {})]


def test_every_notebook_is_tested_here():
    assert NOTEBOOKS == ["notebook_choose_landmarks.py", "notebook_featurize_xarray.py",
                         "notebook_learn_out_of_core.py"]
    for name in NOTEBOOKS:  # a title, the imports, and a parameters cell (papermill's) with the size we set
        cells = jupytext.read(EXAMPLES / name, fmt="py:percent").cells
        assert cells[0].cell_type == "markdown" and cells[0].source.splitlines()[0].startswith("Notebook: "), name
        assert "parameters" in cells[2].metadata.get("tags", []), name
        assert "DKAPPROX_EXAMPLE_ROWS" in cells[2].source, name


def run(executed, name, n_figures):
    """The executed notebook ``name``, checked for errors and for its ``n_figures`` PNG figures."""
    nb = executed[name]
    assert not outputs(nb, "error"), name
    assert len(pngs(nb)) == n_figures, f"{name}: {len(pngs(nb))} figures"
    for png in pngs(nb):  # a real figure, not an empty canvas
        assert len(png["data"]["image/png"]) > 20_000, name
    return nb


def test_featurize_xarray_notebook(executed, kernel):
    nb = run(executed, "notebook_featurize_xarray.py", 1)
    out = text_of(nb)
    assert f"{ROWS:,} x 16 float32" in out
    assert "landmarks chosen in 5 passes over the data" in out
    assert f"features ('time', 'feature') ({ROWS}, 256) float32, 8 blocks, nothing computed yet" in out
    assert "wrote 8 of 8 blocks, (10000, 256) float32" in out
    difference = float(re.search(r"max \|stored - in-memory transform\| on the first 1000 rows: (\S+)", out)[1])
    # another chunking of float32 products (256 terms: 256 x 6e-8 of the values' size): within rounding
    assert difference < 2e-4
    html = html_results(nb)
    assert any("xr-wrap" in page for page in html)  # the Dataset, as xarray shows it
    estimator = [page for page in html if "dkapprox-fitted" in page]
    assert len(estimator) == 1 and "kmeans: 256 rows, chosen in 5 passes over the data" in estimator[0]
    assert "float32 in, float32 out" in estimator[0]
    dask_table = [page for page in html if "Dask graph" in page and "xr-wrap" not in page]  # Z.data, as dask shows it
    assert len(dask_table) == 1 and "<svg" in dask_table[0] and "float32" in dask_table[0]
    assert len(list(kernel.tmp_path.glob("dkapprox-notebook-*/features.zarr/zarr.json"))) == 1


def test_choose_landmarks_notebook(executed):
    nb = run(executed, "notebook_choose_landmarks.py", 1)
    out = text_of(nb)
    grid = [16, 32, 64]  # 100 rows a landmark at least, at 10,000 rows
    header = re.search(r"^method\s+([\d ]+)\s+\(relative Frobenius error\)", out, re.M)
    assert [int(n) for n in header[1].split()] == grid
    errors = {m[1].strip(): np.array(m[2].split(), dtype=float)
              for m in re.finditer(r"^((?:Nystroem \w+|RBFSampler))\s+([\d. ]+)$", out, re.M)}
    assert set(errors) == {"Nystroem uniform", "Nystroem kmeans", "Nystroem leverage", "RBFSampler"}
    for method, e in errors.items():
        assert np.all((e > 0) & (e < 1)), method
        assert np.all(np.diff(e) < 0), f"{method}: more components, less error ({e})"
    nystroem = np.array([errors[f"Nystroem {m}"] for m in ("uniform", "kmeans", "leverage")])
    assert np.all(errors["RBFSampler"] > nystroem.max(axis=0))  # data-independent: the largest error
    assert np.all(errors["Nystroem kmeans"] == nystroem.min(axis=0))  # what the notebook's text says
    assert errors["Nystroem kmeans"][-1] < 0.1
    # the choice: the smallest size within the tolerance, with its passes over the data
    assert re.search(r"^Nystroem kmeans\s+n_components=(16|32|64) \(passes over the data: 5\)$", out, re.M)
    assert re.search(r"^RBFSampler\s+not within 0.1 up to n_components=64$", out, re.M)


def test_learn_out_of_core_notebook(executed):
    nb = run(executed, "notebook_learn_out_of_core.py", 1)
    out = text_of(nb)
    assert "10,000 rows in 8 blocks: 7,500 to train, 2,500 to test" in out
    alpha, cv = re.search(r"alpha chosen: (\S+), mean cross-validated R\^2 (\S+)", out).groups()
    assert float(alpha) in np.logspace(-4, 2, 7)
    r2, linear = map(float, re.search(r"held-out R\^2: (\S+) on 512 RBF features, (\S+) linear", out).groups())
    assert 0.85 < r2 <= 1 and abs(r2 - float(cv)) < 0.05  # the kernel model, as cross-validated
    assert 0.5 < linear < 0.8 < r2  # Friedman #1 is not linear: the features are what fits it
    assert any("RidgeCV" in page for page in html_results(nb))  # the fitted pipeline's diagram


# -- progress and display ------------------------------------------------------------------------


def widgets(outputs):
    return [out["data"][WIDGET]["model_id"] for out in outputs if WIDGET in out.get("data", {})]


def printed(outputs):
    return "".join(out.get("text", "") for out in outputs if out.get("output_type") == "stream")


def bar_of(model_id, states):
    """The state of the progress bar inside a displayed widget (an HBox of the bar and its label)."""
    children = [c.removeprefix("IPY_MODEL_") for c in states[model_id]["state"].get("children", [])]
    bars = [states[c]["state"] for c in children if states[c]["model_name"] == "IntProgressModel"]
    assert len(bars) == 1, states[model_id]
    return bars[0]


def test_cells_ran_without_errors(session):
    outputs, _ = session
    errors = {name: out for name, outs in outputs.items() for out in outs if out.get("output_type") == "error"}
    assert not errors, errors


def test_each_pass_of_a_fit_shows_a_widget_that_ends_complete(session):
    outputs, states = session
    shown = widgets(outputs["fit_on"])
    assert len(shown) == 5  # k-means landmarks: 1 + 4 passes
    for model_id in shown:
        bar = bar_of(model_id, states)
        assert bar["value"] == bar["max"] > 0 and bar["bar_style"] == "success"
    assert not printed(outputs["fit_on"]).strip("\n").replace("env: DKAPPROX_PROGRESS=1", "")


def test_nothing_is_shown_when_switched_off(session):
    outputs, _ = session
    for name in ("off", "distributed_off"):
        assert not widgets(outputs[name]), name
        assert printed(outputs[name]) == "env: DKAPPROX_PROGRESS=0\n", name  # %env's echo, and no bar


def test_by_default_a_slow_compute_shows_a_widget_and_short_passes_do_not(session):
    outputs, states = session
    shown = widgets(outputs["auto_slow"])
    assert len(shown) == 1
    bar = bar_of(shown[0], states)
    assert bar["value"] == bar["max"] > 0 and bar["bar_style"] == "success"
    assert not widgets(outputs["auto_fast"]) and not printed(outputs["auto_fast"])


def test_write_features_shows_its_progress(session):
    outputs, states = session
    shown = widgets(outputs["write_on"])
    assert len(shown) == 1 and "4 blocks" in printed(outputs["write_on"])
    assert bar_of(shown[0], states)["bar_style"] == "success"


def test_without_ipywidgets_progress_is_text_in_the_cell(session):
    outputs, _ = session
    for name in ("no_widgets", "distributed_text"):
        assert not widgets(outputs[name]), name
        text = printed(outputs[name])
        assert "100% Completed" in text, name


def test_a_broken_widget_library_fails_no_compute(session):
    outputs, _ = session
    assert not widgets(outputs["broken_widgets"]) and printed(outputs["broken_widgets"]) == "True\n"


def test_under_a_distributed_client_its_own_widget_shows(session):
    outputs, states = session
    shown = widgets(outputs["distributed_on"])
    assert len(shown) == 1  # one pass: the statistics of (X, y), with the fold scores
    assert states[shown[0]]["model_name"] == "VBoxModel"  # distributed's MultiProgressWidget
    assert not printed(outputs["distributed_on"])


def test_fitted_estimator_html_says_bytes_landmarks_passes_and_dtype(session):
    outputs, _ = session
    result = [out for out in outputs["fit_on"] if out.get("output_type") == "execute_result"]
    assert len(result) == 1
    page, text = result[0]["data"]["text/html"], result[0]["data"]["text/plain"]
    assert "sk-top-container" in page  # scikit-learn's diagram, with dkapprox's table after it
    nbytes = 20 * 8 * 4 + 20 * 20 * 4
    assert f"{nbytes:,} bytes ({format_size(nbytes)}), one graph key" in page
    assert "kmeans: 20 rows, chosen in 5 passes over the data" in page
    assert "fitted arrays float32; float32 in, float32 out; float64 in, float64 out" in page
    assert text.endswith(f"# fitted: 8 -> 20 features, 20 landmarks, state {format_size(nbytes)}")


def test_lazy_features_display_as_dask_arrays_do(session):
    outputs, _ = session
    result = [out for out in outputs["features"] if out.get("output_type") == "execute_result"]
    assert len(result) == 1
    data = result[0]["data"]
    assert data["text/plain"].startswith("dask.array<nystroem-transform")
    assert "shape=(4000, 20), dtype=float32, chunksize=(1000, 20)" in data["text/plain"]
    page = re.sub(r"\s+", " ", data["text/html"])  # dask's table and its chunk diagram
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))
    for part in ("Bytes 312.50 kiB 78.12 kiB", "Shape (4000, 20) (1000, 20)", "Dask graph 4 chunks in",
                 "Data type float32 numpy.ndarray"):
        assert part in text, part
    assert "<svg" in page
