"""Model files saved by an earlier main load and give the same numbers: one of each kind, in saved/."""

import importlib.util
import json
import pathlib

import numpy as np
import pytest
import scipy.sparse as sp

from dkapprox.models import fingerprint, load

SAVED = pathlib.Path(__file__).resolve().parent / "saved"
EXPECTED = np.load(SAVED / "expected.npz")
FINGERPRINTS = json.loads((SAVED / "fingerprints.json").read_text())


def _cases():
    spec = importlib.util.spec_from_file_location("model_cases", SAVED.parent / "test_model_files.py")
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    return cases


CASES = _cases()
DATA = dict(zip(CASES._ids(), (X for _, X in CASES.MODELS)))


def test_every_saved_kind_is_still_a_case():
    assert sorted(FINGERPRINTS) == sorted(EXPECTED.files) == sorted(p.name for p in SAVED.iterdir() if p.is_dir())
    assert {name.split("-")[0] for name in FINGERPRINTS} == {type(e).__name__ for e, _ in CASES.MODELS}


@pytest.mark.parametrize("name", sorted(FINGERPRINTS))
def test_a_saved_model_loads_and_predicts_the_same(name):
    est = load(SAVED / name)
    assert type(est).__name__ == name.split("-")[0]
    assert fingerprint(est) == FINGERPRINTS[name]
    out = est.predict(DATA[name]) if hasattr(est, "predict") else est.transform(DATA[name])
    out = out.toarray() if sp.issparse(out) else out
    expected = EXPECTED[name]
    assert out.dtype == expected.dtype and out.shape == expected.shape
    if out.dtype.kind != "f":
        np.testing.assert_array_equal(out, expected)
    else:
        # another BLAS may round a product differently: a bound of 100 ulps of the output's scale
        eps = 100 * np.finfo(out.dtype).eps
        np.testing.assert_allclose(out, expected, rtol=eps, atol=eps * max(1.0, float(np.abs(expected).max())))
