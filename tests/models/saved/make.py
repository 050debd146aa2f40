"""Writes the model files tests/models/test_saved_models.py loads: one a kind, saved by the code of the day.

Run from the repository's root, once, before a change that could break loading them:
``python tests/models/saved/make.py``; for a new kind, name its entries (``make.py GaussianProcessRegressor-28``)
so that the files of the others stay as an earlier main saved them. Each entry of ``test_model_files.MODELS`` is
fitted and saved as ``<Class>-<i>/``; ``expected.npz`` holds its output on its training data and
``fingerprints.json`` its fingerprint, so that a later main must load the file and give the same numbers.
"""

import importlib.util
import json
import pathlib
import shutil
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent


def main(names=()):
    spec = importlib.util.spec_from_file_location("model_cases", HERE.parent / "test_model_files.py")
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    from dkapprox.models import save

    outputs, fingerprints = {}, {}
    if names:
        outputs = dict(np.load(HERE / "expected.npz"))
        fingerprints = json.loads((HERE / "fingerprints.json").read_text())
    for name, (est, X) in zip(cases._ids(), cases.MODELS):
        if names and name not in names:
            continue
        fitted = cases._fit(est, X)
        target = HERE / name
        shutil.rmtree(target, ignore_errors=True)
        fingerprints[name] = save(fitted, target)
        outputs[name] = cases._out(fitted, X)
    np.savez(HERE / "expected.npz", **outputs)
    (HERE / "fingerprints.json").write_text(json.dumps(fingerprints, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
