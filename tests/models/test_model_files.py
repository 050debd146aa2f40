"""Model files: bit-identical round trips for every estimator, no pickle, tampering caught, clear refusals."""

import hashlib
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Matern, WhiteKernel
from sklearn.kernel_approximation import RBFSampler as SkRBFSampler
from sklearn.linear_model import SGDRegressor

from dkapprox import io
from dkapprox.errors import InputMissingError, ModelFileError, OutputExistsError
from dkapprox.gaussian_process import GaussianProcessRegressor
from dkapprox.kernel_approximation import AdditiveChi2Sampler, PolynomialCountSketch, RBFSampler, SkewedChi2Sampler
from dkapprox.linear_model import (
    FeatureMapRidgeCV,
    Incremental,
    KernelRidge,
    KernelRidgeClassifier,
    KernelRidgeClassifierCV,
    KernelRidgeCV,
    Ridge,
    RidgeClassifier,
    RidgeCV,
)
from dkapprox.models import describe, fingerprint, load, save
from dkapprox.models._state_codec import public_estimators
from dkapprox.nystroem import Nystroem
from dkapprox.random_features import RandomBinningFeatures, RandomFourierFeatures
from dkapprox.random_projection import GaussianRandomProjection, SparseRandomProjection

RNG = np.random.default_rng(0)
X64 = RNG.random((60, 9))
X32 = X64.astype(np.float32)
XS = sp.random(60, 9, density=0.4, format="csr", random_state=0, dtype=np.float64)
Y = X64 @ RNG.random(9)
LABELS = (Y > np.median(Y)).astype(int)

# (estimator, training data): every public dkapprox estimator class, several configurations
MODELS = [
    (RBFSampler(n_components=20, random_state=0), X64),
    (RBFSampler(gamma="scale", n_components=20, random_state=0), X32),
    (SkewedChi2Sampler(n_components=20, random_state=0), X64),
    (AdditiveChi2Sampler(sample_steps=3), X64),
    (PolynomialCountSketch(n_components=16, degree=3, coef0=1.0, random_state=0), X32),
    (GaussianRandomProjection(n_components=5, compute_inverse_components=True, random_state=0), X64),
    (SparseRandomProjection(n_components=5, density=0.5, random_state=0), X64),
    (SparseRandomProjection(n_components=5, dense_output=True, random_state=0), XS),
    (Nystroem(n_components=12, random_state=0), X64),
    (Nystroem(kernel="polynomial", degree=2, kernel_params=None, n_components=12, landmarks="kmeans",
              landmark_params={"n_iter": 2}, random_state=0), X32),
    (Nystroem(landmarks=X64[:7], gamma=0.3), X64),
    (Nystroem(n_components=10, random_state=0), XS),
    (RandomFourierFeatures(n_components=16, kernel="laplacian", sampling="orthogonal", random_state=0), X64),
    (RandomFourierFeatures(n_components=16, kernel="matern", nu=2.5, features="sincos", sampling="structured",
                           random_state=0), X32),  # Hadamard signs and scales, no dense matrix
    (RandomFourierFeatures(n_components=16, kernel="cauchy", features="sincos", sampling="qmc", random_state=0),
     XS),  # no offsets (None)
    (RandomBinningFeatures(n_components=64, n_grids=4, random_state=0), X64),
    (RandomBinningFeatures(n_components=64, gamma=0.25, n_grids=4, dense_output=True, random_state=0), X32),
    (Ridge(alpha=0.5), X64),
    (RidgeCV(alphas=(0.1, 1.0)), X64),
    (RidgeClassifier(), X64),
    (KernelRidge(kernel="rbf", n_centers=20, random_state=0), X64),
    (KernelRidge(alpha=0.1, kernel="laplacian", n_centers=15, centers="kmeans", random_state=0), X32),
    (KernelRidgeClassifier(kernel="rbf", n_centers=20, random_state=0), X32),
    (KernelRidgeCV(alphas=(0.1, 1.0), gammas=(0.1, 1.0), n_centers=20, cv=3, random_state=0), X64),
    (KernelRidgeClassifierCV(alphas=(0.1, 1.0), gammas=(0.1, 1.0), n_centers=20, cv=3, random_state=0), X32),
    # a scikit-learn Pipeline (best_estimator_: the fitted map, then Ridge) and a nested unfitted map
    (FeatureMapRidgeCV(RBFSampler(n_components=10, random_state=0), {"gamma": [0.1, 1.0]}, alphas=(0.1, 1.0),
                       n_folds=3, random_state=0), X64),
    (FeatureMapRidgeCV(RandomFourierFeatures(n_components=8, random_state=0),
                       {"kernel": ["rbf", "laplacian"], "length_scale": [0.5, 2.0]}, n_folds=3, random_state=0), X32),
    # a grid of the kernel's other parameters: kernel_params a dict of lists, degree_ and coef0_ fitted
    (KernelRidgeCV(alphas=(0.1, 1.0), gammas=(0.1,), kernel="poly", kernel_params={"degree": [1, 2], "coef0": [0.5, 1]},
                   n_centers=20, cv=3, random_state=0), X64),
    # a scikit-learn GP kernel as parameter and fitted attribute; the sparse GP's factors, the exact GP's arrays
    (GaussianProcessRegressor(ConstantKernel() * RBF(np.ones(9)) + WhiteKernel(), n_centers=15, normalize_y=True,
                              random_state=0), X64),
    (GaussianProcessRegressor(Matern(nu=1.5) + WhiteKernel(), random_state=0), X32),
]


def _fit(est, X):
    est = clone(est)
    if isinstance(est, (RidgeClassifier, KernelRidgeClassifier, KernelRidgeClassifierCV)):
        return est.fit(X, LABELS)
    if type(est).__module__.startswith(("dkapprox.linear_model", "dkapprox.kernel_ridge", "dkapprox.gaussian_process")):
        return est.fit(X, Y)
    return est.fit(X)


def _out(est, X):
    out = est.predict(X) if hasattr(est, "predict") else est.transform(X)
    return out.toarray() if sp.issparse(out) else out


def _ids():
    return [f"{type(e).__name__}-{i}" for i, (e, _) in enumerate(MODELS)]


def test_every_public_estimator_class_is_covered():
    covered = {type(e).__name__ for e, _ in MODELS} | {"Incremental"}  # Incremental: see its own test
    assert set(public_estimators()) <= covered, "add the new estimator to MODELS"


@pytest.mark.parametrize("est, X", MODELS, ids=_ids())
def test_round_trip_is_bit_identical(tmp_path, est, X):
    est = _fit(est, X)
    model_fingerprint = save(est, tmp_path / "model")
    back = load(tmp_path / "model")
    assert type(back) is type(est)
    assert back.get_params().keys() == est.get_params().keys()
    assert repr(back) == repr(est)
    for name, value in vars(est).items():
        restored = vars(back)[name]
        assert type(restored) is type(value), name  # np.float64 stays np.float64 (NEP 50 promotion)
        if isinstance(value, np.ndarray):
            assert restored.dtype == value.dtype and restored.shape == value.shape, name
            assert restored.tobytes() == value.tobytes(), name
        elif sp.issparse(value):
            assert type(restored) is type(value) and (restored != value).nnz == 0, name
            assert restored.indices.dtype == value.indices.dtype, name
    a, b = _out(est, X), _out(back, X)
    assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    assert fingerprint(back) == fingerprint(est) == model_fingerprint


def test_pickle_and_clone_still_work(tmp_path):
    est = Nystroem(n_components=8, random_state=0).fit(X64)
    save(est, tmp_path / "m")
    again = pickle.loads(pickle.dumps(load(tmp_path / "m")))
    np.testing.assert_array_equal(again.transform(X64), est.transform(X64))
    fresh = clone(load(tmp_path / "m"))
    assert fresh.get_params() == est.get_params() and not hasattr(fresh, "components_")


def test_fingerprint_is_stable_across_processes_and_sensitive(tmp_path):
    est = RBFSampler(n_components=10, random_state=3).fit(X64)
    code = ("import numpy as np; from dkapprox.models import fingerprint; "
            "from dkapprox.kernel_approximation import RBFSampler; "
            "X = np.random.default_rng(0).random((60, 9)); "
            "print(fingerprint(RBFSampler(n_components=10, random_state=3).fit(X)))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == fingerprint(est)
    assert fingerprint(est).startswith("sha256:") and len(fingerprint(est)) == 71
    assert fingerprint(RBFSampler(n_components=10, random_state=4).fit(X64)) != fingerprint(est)
    assert fingerprint(RBFSampler(n_components=10, random_state=3).fit(X32)) != fingerprint(est)
    assert fingerprint(RBFSampler(n_components=10, random_state=3)) != fingerprint(est)  # unfitted
    changed = RBFSampler(n_components=10, random_state=3).fit(X64)
    changed.random_offset_[4] = np.nextafter(changed.random_offset_[4], 10)
    assert fingerprint(changed) != fingerprint(est)


@pytest.fixture
def saved(tmp_path):
    est = SparseRandomProjection(n_components=4, random_state=0, compute_inverse_components=True).fit(X64)
    save(est, tmp_path / "model")
    return tmp_path / "model"


def _edit_json(path, edit):
    doc = json.loads((path / "model.json").read_text())
    edit(doc)
    (path / "model.json").write_text(json.dumps(doc))


def test_a_flipped_array_byte_is_caught(saved):
    file = saved / "arrays" / "inverse_components_.npy"
    data = bytearray(file.read_bytes())
    data[-1] ^= 1
    file.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="inverse_components_.npy: checksum mismatch"):
        load(saved)


def test_a_truncated_array_is_caught(saved):
    file = saved / "arrays" / "components_.data.npy"
    file.write_bytes(file.read_bytes()[:-8])
    with pytest.raises(ModelFileError, match="checksum mismatch"):
        load(saved)
    os.unlink(file)
    with pytest.raises(ModelFileError, match="components_.data.npy: missing"):
        load(saved)


def test_an_edited_parameter_is_caught(saved):
    _edit_json(saved, lambda d: d["estimator"]["params"].update(n_components=5))
    with pytest.raises(ModelFileError, match="modified after saving"):
        load(saved)


def test_truncated_or_foreign_json(saved):
    text = (saved / "model.json").read_text()
    (saved / "model.json").write_text(text[: len(text) // 2])
    with pytest.raises(ModelFileError, match="not valid JSON"):
        load(saved)
    (saved / "model.json").write_text('{"format": "dkapprox-model", "format_version": 1, "x": NaN}')
    with pytest.raises(ModelFileError, match="NaN is not valid JSON"):
        load(saved)
    (saved / "model.json").write_text("[1, 2]")
    with pytest.raises(ModelFileError, match="not a dkapprox model file"):
        load(saved)


def test_unknown_format_version(saved):
    _edit_json(saved, lambda d: d.update(format_version=2))
    with pytest.raises(ModelFileError, match="unknown model format version 2 .* reads version 1"):
        load(saved)


def test_missing_and_non_model_paths(tmp_path):
    with pytest.raises(InputMissingError, match="no such model directory"):
        load(tmp_path / "nothing")
    (tmp_path / "dir").mkdir()
    with pytest.raises(ModelFileError, match="no model.json"):
        load(tmp_path / "dir")


def _rehash(path, name):
    """Make an array file look legitimate (as an attacker who can write the directory would)."""
    data = (path / "arrays" / f"{name}.npy").read_bytes()
    digest = hashlib.sha256(data).hexdigest()

    def edit(doc):
        doc["arrays"][name]["sha256"] = digest
    _edit_json(path, edit)


def test_a_pickle_inside_an_npy_never_runs(saved, tmp_path):
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    evil = np.empty(1, dtype=object)
    evil[0] = Payload()
    with open(saved / "arrays" / "components_.data.npy", "wb") as f:
        np.save(f, evil, allow_pickle=True)
    _rehash(saved, "components_.data")
    with pytest.raises(ModelFileError, match="components_.data.npy: not a readable .npy file"):
        load(saved)
    assert not marker.exists()


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["estimator"].update({"class": "Popen"}), "unknown estimator class 'Popen'"),
    (lambda d: d["estimator"].update({"class": "subprocess.Popen"}), "unknown estimator class"),
    (lambda d: d["arrays"].update({"../../etc/passwd": {"sha256": "0", "dtype": "<f8", "shape": [1]}}),
     "invalid array name"),
    (lambda d: d["estimator"]["attributes"].update({"__class__": 1}), "invalid fitted attribute name"),
    (lambda d: d["estimator"]["attributes"].update({"x_": {"__ndarray__": "nowhere"}}), "not in the file"),
    (lambda d: d["estimator"]["attributes"].update({"x_": {"__pickle__": "gASV"}}), "unexpected tagged value"),
    (lambda d: d["estimator"]["params"].update({"kernel": "rbf"}), "takes parameters"),
], ids=["class", "dotted-class", "path-traversal", "dunder", "dangling-array", "unknown-tag", "extra-param"])
def test_hostile_documents_are_refused(saved, edit, message):
    _edit_json(saved, edit)
    with pytest.raises(ModelFileError, match=message):
        load(saved)


def test_save_refuses_what_json_cannot_hold(tmp_path):
    with pytest.raises(TypeError, match="parameter 'random_state'.*RandomState.*int random_state"):
        save(RBFSampler(random_state=np.random.RandomState(0)).fit(X64), tmp_path / "a")
    with pytest.raises(TypeError, match="parameter 'kernel'.*callable"):
        save(Nystroem(kernel=lambda a, b: float(a @ b), n_components=5, random_state=0).fit(X64), tmp_path / "b")
    with pytest.raises(TypeError, match="parameter 'estimator'.*SGDRegressor"):
        save(Incremental(SGDRegressor(random_state=0), random_state=0).fit(X64, Y), tmp_path / "c")
    with pytest.raises(TypeError, match="not a public dkapprox estimator"):
        save(SkRBFSampler(random_state=0).fit(X64), tmp_path / "d")

    class MyRBF(RBFSampler):
        pass
    with pytest.raises(TypeError, match="not a public dkapprox estimator"):
        save(MyRBF(random_state=0).fit(X64), tmp_path / "e")
    with pytest.raises(NotFittedError):
        save(RBFSampler(), tmp_path / "f")
    assert sorted(os.listdir(tmp_path)) == []  # nothing half-written


def test_no_overwrite_without_asking_and_never_a_foreign_path(tmp_path):
    a = RBFSampler(n_components=4, random_state=0).fit(X64)
    b = RBFSampler(n_components=4, random_state=1).fit(X64)
    save(a, tmp_path / "m")
    with pytest.raises(OutputExistsError, match="pass overwrite=True"):
        save(b, tmp_path / "m")
    save(b, tmp_path / "m", overwrite=True)
    assert fingerprint(load(tmp_path / "m")) == fingerprint(b)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    with pytest.raises(OutputExistsError, match="not a dkapprox model directory"):
        save(a, tmp_path / "notes", overwrite=True)
    assert (tmp_path / "notes" / "todo.txt").read_text() == "keep me"
    assert sorted(os.listdir(tmp_path)) == ["m", "notes"]  # no temporary directories left
    with pytest.raises(InputMissingError, match="does not exist"):
        save(a, tmp_path / "no" / "such" / "m")


def test_describe_a_model(tmp_path):
    est = Nystroem(n_components=12, random_state=0).fit(X32)
    save(est, tmp_path / "m")
    d = describe(tmp_path / "m")
    json.dumps(d)
    assert d["kind"] == "model" and d["class"] == "Nystroem" and d["n_features_in"] == 9
    assert d["arrays"]["components_"] == {"dtype": "float32", "shape": [12, 9]}
    assert d["state_bytes"] == sum(v.nbytes for v in vars(est).values() if isinstance(v, np.ndarray))
    assert d["fingerprint"] == fingerprint(est) and d["format_version"] == 1
    # dkapprox.io describes Zarr stores only (it sits below the estimators); `dkapprox info` describes either
    with pytest.raises(InputMissingError, match="no Zarr array or group there"):
        io.describe(tmp_path / "m")


def test_describe_shows_scalar_fitted_attributes_and_the_final_residual(tmp_path):
    """A learner's fit facts without loading it: the scalars of the JSON, and the last of an iterative
    solver's residuals_ (the one array describe reads, checked like any)."""
    est = KernelRidge(alpha=0.1, kernel="rbf", n_centers=20, random_state=0).fit(X64, Y)
    save(est, tmp_path / "m")
    d = describe(tmp_path / "m")
    json.dumps(d)
    assert d["fitted"] == {"center_passes_": est.center_passes_, "input_persisted_": False, "n_iter_": est.n_iter_,
                           "passes_": est.passes_, "final_residual": float(est.residuals_[-1])}
    assert d["arrays"]["centers_"]["shape"] == [20, 9] and d["params"]["kernel"] == "rbf"
    assert describe_fitted_of(RBFSampler(n_components=4, random_state=0).fit(X64), tmp_path / "r") == {}
    residuals = tmp_path / "m" / "arrays" / "residuals_.npy"
    data = bytearray(residuals.read_bytes())
    data[-1] ^= 1
    residuals.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="residuals_.npy: checksum mismatch"):
        describe(tmp_path / "m")


def describe_fitted_of(est, path):
    save(est, path)
    return describe(path)["fitted"]
