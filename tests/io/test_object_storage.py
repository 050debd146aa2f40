"""Object storage through the Python API, on a real S3 server (moto in server mode, tests/_s3.py).

Model files on a URL hold the same bytes and fingerprint as local ones and refuse tampering in
the same words; every API that takes a path takes a URL and ``storage_options``; a missing
bucket, model or package is named.
"""

import json

import dask.array as da
import numpy as np
import pytest
import s3fs
from _s3 import SECRET_KEY

from dkapprox import errors, models
from dkapprox.io import describe, open_array, open_features, write_features
from dkapprox.kernel_approximation import RBFSampler
from dkapprox.models import fingerprint, load, save
from dkapprox.models.model_files import check_saveable, is_model_dir
from dkapprox.nystroem import Nystroem
from dkapprox.random_projection import SparseRandomProjection

X = np.random.default_rng(0).random((60, 9))


def _fs():
    return s3fs.S3FileSystem(skip_instance_cache=True)  # the AWS_* variables of the s3 fixture


def _files(root, fs):
    """{relative path: bytes} of every file below ``root`` (local pathlib folder or S3 prefix)."""
    if fs is None:
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    return {p[len(root) + 1:]: fs.cat_file(p) for p in fs.find(root)}


def test_a_model_on_s3_is_the_local_model_byte_for_byte(s3, tmp_path):
    est = Nystroem(n_components=12, random_state=0).fit(X)
    local_fp = save(est, tmp_path / "model")
    s3_fp = save(est, "s3://data/models/nystroem")
    assert s3_fp == local_fp == fingerprint(est)
    local, remote = _files(tmp_path / "model", None), _files("data/models/nystroem", _fs())
    assert local.keys() == remote.keys() == {"model.json", "arrays/components_.npy", "arrays/normalization_.npy",
                                             "arrays/component_indices_.npy"}
    for name in local:
        if name != "model.json":
            assert local[name] == remote[name], name
    a, b = json.loads(local["model.json"]), json.loads(remote["model.json"])
    assert {**a, "saved": None} == {**b, "saved": None}  # same checksums, same document but for the time
    back = load("s3://data/models/nystroem")
    assert fingerprint(back) == local_fp
    assert back.transform(X).tobytes() == est.transform(X).tobytes()
    assert is_model_dir("s3://data/models/nystroem") and not is_model_dir("s3://data/models")
    described = models.describe("s3://data/models/nystroem")
    assert described["kind"] == "model" and described["path"] == "s3://data/models/nystroem"
    assert described["fingerprint"] == local_fp


def _tamper_array(fs_or_none, root):
    name = "arrays/components_.data.npy"
    if fs_or_none is None:
        data = (root / name).read_bytes()
        (root / name).write_bytes(data[:-8] + bytes(8))
    else:
        data = fs_or_none.cat_file(f"{root}/{name}")
        fs_or_none.pipe_file(f"{root}/{name}", data[:-8] + bytes(8))


def _tamper_json(fs_or_none, root):
    read = (lambda: (root / "model.json").read_text()) if fs_or_none is None else \
        (lambda: fs_or_none.cat_file(f"{root}/model.json").decode())
    doc = json.loads(read())
    doc["estimator"]["params"]["density"] = 0.9
    text = json.dumps(doc)
    if fs_or_none is None:
        (root / "model.json").write_text(text)
    else:
        fs_or_none.pipe_file(f"{root}/model.json", text.encode())


def _delete_array(fs_or_none, root):
    if fs_or_none is None:
        (root / "arrays/components_.data.npy").unlink()
    else:
        fs_or_none.rm(f"{root}/arrays/components_.data.npy")


@pytest.mark.parametrize("tamper", [_tamper_array, _tamper_json, _delete_array])
def test_tampering_on_s3_is_refused_in_the_local_words(s3, tmp_path, tamper):
    est = SparseRandomProjection(n_components=4, random_state=0, dense_output=True).fit(X)
    save(est, tmp_path / "m")
    save(est, "s3://data/m")
    tamper(None, tmp_path / "m")
    tamper(_fs(), "data/m")
    with pytest.raises(errors.ModelFileError) as local:
        load(tmp_path / "m")
    with pytest.raises(errors.ModelFileError) as remote:
        load("s3://data/m")
    assert str(remote.value) == str(local.value).replace(str(tmp_path / "m"), "s3://data/m")


def test_saving_on_s3_refuses_and_replaces_as_locally(s3, tmp_path):
    est = RBFSampler(n_components=8, random_state=0).fit(X)
    other = RBFSampler(n_components=8, random_state=1).fit(X)
    fs = _fs()
    save(est, "s3://data/m")
    with pytest.raises(errors.OutputExistsError, match="s3://data/m: a model is already saved there; pass "
                                                      "overwrite=True"):
        save(other, "s3://data/m")
    with pytest.raises(errors.OutputExistsError):
        check_saveable("s3://data/m")
    assert save(other, "s3://data/m", overwrite=True) == fingerprint(other)
    assert fingerprint(load("s3://data/m")) == fingerprint(other)
    fs.pipe_file("data/foreign/notes.txt", b"not a model")
    for overwrite in (False, True):
        with pytest.raises(errors.OutputExistsError, match="is not a dkapprox model directory; refusing"):
            save(est, "s3://data/foreign", overwrite=overwrite)
    assert fs.cat_file("data/foreign/notes.txt") == b"not a model"
    # a killed save leaves arrays without model.json: nothing loads it, the next save replaces it
    fs.pipe_file("data/killed/arrays/random_weights_.npy", b"half")
    with pytest.raises(errors.ModelFileError, match="s3://data/killed: not a dkapprox model directory"):
        load("s3://data/killed")
    save(est, "s3://data/killed")
    assert fingerprint(load("s3://data/killed")) == fingerprint(est)


def test_missing_models_and_buckets_are_named(s3, tmp_path):
    with pytest.raises(errors.InputMissingError) as local:
        load(tmp_path / "nothing")
    with pytest.raises(errors.InputMissingError) as remote:
        load("s3://data/nothing")
    assert str(local.value) == f"{tmp_path / 'nothing'}: no such model directory"
    assert str(remote.value) == "s3://data/nothing: no such model directory"
    with pytest.raises(errors.InputMissingError, match="s3://data/nothing: no such model directory"):
        models.describe("s3://data/nothing")
    with pytest.raises(errors.InputMissingError, match="s3://data/nothing: "):
        describe("s3://data/nothing")
    with pytest.raises(errors.InputMissingError, match="no such model directory .the bucket 'nobucket' does not"):
        load("s3://nobucket/m")
    est = RBFSampler(n_components=8, random_state=0).fit(X)
    with pytest.raises(errors.InputMissingError, match="s3://nobucket: the bucket to save the model in does not"):
        save(est, "s3://nobucket/m")
    with pytest.raises(errors.InputMissingError, match="s3://nobucket/x.zarr: the bucket 'nobucket' does not"):
        open_array("s3://nobucket/x.zarr")
    with pytest.raises(errors.InputMissingError, match="s3://nobucket/o.zarr: the bucket 'nobucket' to write"):
        write_features(da.ones((10, 2), chunks=(5, 2)), "s3://nobucket/o.zarr", plan={})


def test_a_protocol_without_its_package_names_the_package(s3):
    import importlib.util

    # a protocol whose package is not installed here (gcsfs is not a dependency; the others stand in if it is)
    missing = [(proto, pkg) for proto, pkg in (("gcs", "gcsfs"), ("abfs", "adlfs"), ("oci", "ocifs"))
               if importlib.util.find_spec(pkg) is None]
    assert missing, "gcsfs, adlfs and ocifs are all installed: no protocol left to test a missing package with"
    proto, pkg = missing[0]
    for call in (lambda: open_array(f"{proto}://bucket/x.zarr"), lambda: load(f"{proto}://bucket/m"),
                 lambda: describe(f"{proto}://bucket/x.zarr")):
        with pytest.raises(errors.MissingPackageError,
                           match=f"{proto}://bucket/.*needs the package {pkg}.*pip install {pkg}") as info:
            call()
        assert info.value.package == pkg
    with pytest.raises(errors.InputDataError, match="nosuchfs://b/x: unknown protocol 'nosuchfs'"):
        open_array("nosuchfs://b/x")


def test_every_api_takes_storage_options_instead_of_the_environment(s3, monkeypatch):
    options = s3.storage_options()
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no credentials but the options: never ask EC2
    fs = s3fs.S3FileSystem(**options, skip_instance_cache=True)
    import zarr

    Xin = np.random.default_rng(1).random((400, 6)).astype("f4")
    zarr.create_array(zarr.storage.FsspecStore(s3fs.S3FileSystem(**options, asynchronous=True,
                                                                 skip_instance_cache=True), path="data/in.zarr"),
                      shape=Xin.shape, chunks=(100, 6), dtype="f4")[:] = Xin
    Xd = open_array("s3://data/in.zarr", storage_options=options)
    est = RBFSampler(n_components=16, random_state=0).fit(Xd)
    save(est, "s3://data/m", storage_options=options)
    model = load("s3://data/m", storage_options=options)
    assert models.describe("s3://data/m", storage_options=options)["kind"] == "model"
    report = write_features(model.transform(Xd), "s3://data/out.zarr", plan={"input": "s3://data/in.zarr"},
                            storage_options=options)
    assert report.blocks_written == 4
    out = open_features("s3://data/out.zarr", storage_options=options).compute()
    assert out.tobytes() == est.transform(Xin).tobytes()  # same blocks, same bits
    assert describe("s3://data/out.zarr", storage_options=options)["status"] == "complete"
    for path in fs.find("data"):  # the credentials are in no object written
        assert SECRET_KEY.encode() not in fs.cat_file(path), path
