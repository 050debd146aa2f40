"""Model files without pickle: a directory of .npy arrays plus one JSON document.

::

    MODEL/model.json          format, format_version, package_version, class, estimator
                              (parameters and fitted state, see _state_codec), arrays
                              (file, sha256, dtype, shape), fingerprint, state_bytes
    MODEL/arrays/NAME.npy     one per fitted array, written with allow_pickle=False

Loading reads the JSON (at most 64 MiB, strict: no NaN literals), checks every
array file against its sha256, loads it with ``allow_pickle=False``, rebuilds
the estimator from an allow-list of public dkapprox classes, and checks the
fingerprint of the result against the one recorded, so a modified parameter is
caught as surely as a modified array. A save goes to a temporary directory
beside ``path`` and is renamed into place, so a killed save never leaves half a
model under the real name.

``path`` may also be an fsspec URL (``s3://bucket/models/rbf``), with
``storage_options`` for the filesystem (credentials, endpoint; never written
anywhere). The files, checksums and fingerprint are the same. Object stores
have no rename, so a save there writes the arrays first and ``model.json``
last (each object appears whole): a killed save leaves arrays without
``model.json``, which nothing loads and the next save replaces. Replacing a
model (``overwrite=True``) deletes its ``model.json`` first, then the rest.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import uuid

import numpy as np

from ..errors import InputMissingError, ModelFileError, OutputExistsError, StateError
from ..io import OBJECT_STORES, canonical_json, locate, missing_bucket, package_version, utc_now
from ._state_codec import Decoder, Encoder, check_array_name

FORMAT = "dkapprox-model"
FORMAT_VERSION = 1
MODEL_JSON = "model.json"
ARRAYS = "arrays"
MAX_JSON_BYTES = 64 * 2**20

__all__ = ["check_saveable", "describe", "fingerprint", "is_model_dir", "load", "save"]


def fingerprint(estimator) -> str:
    """A stable hash of an estimator's class, parameters and fitted state.

    Equal for equal models whatever the process, machine or save/load round
    trips; different if any parameter, fitted array (its dtype, shape or any
    bit) or other fitted attribute differs. Works on unfitted estimators too
    (class and parameters only).

    Returns
    -------
    str
        ``"sha256:"`` followed by 64 hex digits.

    Examples
    --------
    >>> import numpy as np
    >>> from dkapprox.kernel_approximation import RBFSampler
    >>> from dkapprox.models import fingerprint
    >>> X = np.ones((4, 3))
    >>> a = RBFSampler(random_state=0).fit(X)
    >>> fingerprint(a) == fingerprint(RBFSampler(random_state=0).fit(X))
    True
    >>> fingerprint(a) == fingerprint(RBFSampler(random_state=1).fit(X))
    False
    """
    encoder = Encoder()
    doc = encoder.estimator(estimator)
    return _fingerprint(doc, {name: _data_digest(a) for name, a in encoder.arrays.items()})


def save(estimator, path, *, overwrite=False, storage_options=None):
    """Save a fitted dkapprox estimator to the directory ``path``, without pickle.

    Parameters
    ----------
    estimator : a fitted public dkapprox estimator
        Parameters must be JSON-safe (no callable kernel, no RandomState
        instance: an int seed keeps the same fitted arrays).
    path : str or os.PathLike
        A local directory, created (its parent must exist); or an fsspec URL
        such as ``s3://bucket/models/rbf`` (its bucket must exist).
    overwrite : bool, default=False
        Replace an existing dkapprox model directory. Other existing paths
        (besides an empty directory) are never replaced.
    storage_options : dict, optional
        fsspec options for a URL ``path`` (credentials, endpoint); never saved.

    Returns
    -------
    str
        The model's fingerprint (see :func:`fingerprint`).

    Raises
    ------
    TypeError
        The class is not a public dkapprox estimator, or a parameter or fitted
        attribute has no JSON-safe form (the message names it).
    OutputExistsError
        ``path`` exists and is not replaceable.
    InputMissingError
        The parent folder (for a URL on an object store: the bucket) does not exist.
    MissingPackageError
        The URL's protocol needs a package that is not installed (named).

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from dkapprox.kernel_approximation import RBFSampler
    >>> from dkapprox.models import load, save
    >>> X = np.random.default_rng(0).random((10, 3))
    >>> est = RBFSampler(n_components=8, random_state=0).fit(X)
    >>> path = tempfile.mkdtemp() + "/rbf"
    >>> _ = save(est, path)
    >>> np.array_equal(load(path).transform(X), est.transform(X))
    True
    """
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(estimator)
    folder = _folder(path, storage_options)
    if not folder.local:
        return _save_remote(estimator, folder, overwrite)
    path = folder.name
    existing = _replaceable(path, overwrite)
    encoder = Encoder()
    doc = encoder.estimator(estimator)
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex}")
    os.makedirs(os.path.join(tmp, ARRAYS))
    try:
        files, document_bytes, model_fingerprint = _model_files(encoder, doc)
        for file, data in files.items():
            _write(os.path.join(tmp, *file.split("/")), data)
        _write(os.path.join(tmp, MODEL_JSON), document_bytes)
        if existing:
            old = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.old-{uuid.uuid4().hex}")
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return model_fingerprint


def load(path, *, storage_options=None):
    """Load an estimator saved by :func:`save`; never runs code from the file.

    ``path`` is a local directory or an fsspec URL (``storage_options`` for
    its filesystem); either is checked the same way.

    Raises
    ------
    InputMissingError
        Nothing at ``path``.
    ModelFileError
        Not a model directory, an unknown format version, a truncated or
        modified file (checksum or fingerprint mismatch), or invalid content.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from dkapprox.random_projection import GaussianRandomProjection
    >>> from dkapprox.models import fingerprint, load, save
    >>> est = GaussianRandomProjection(n_components=2, random_state=0).fit(np.eye(5))
    >>> path = tempfile.mkdtemp() + "/projection"
    >>> _ = save(est, path)
    >>> loaded = load(path)
    >>> loaded
    GaussianRandomProjection(n_components=2, random_state=0)  # fitted: 5 -> 2 features, state 80 B
    >>> fingerprint(loaded) == fingerprint(est)
    True
    """
    folder = _folder(path, storage_options)
    path = folder.name
    document = _read_document(folder)
    arrays, digests = {}, {}
    for name, entry in document["arrays"].items():
        arrays[name] = _read_array(folder, name, entry)
        digests[name] = _data_digest(arrays[name])
    try:
        estimator = Decoder(arrays).estimator(document["estimator"])
    except StateError as exc:
        raise ModelFileError(f"{path}: {exc}") from exc
    if _fingerprint(document["estimator"], digests) != document.get("fingerprint"):
        raise ModelFileError(f"{path}: {MODEL_JSON} was modified after saving (its content does not match "
                             "the fingerprint recorded at save time)")
    try:
        estimator._validate_params()
    except (ValueError, TypeError) as exc:
        raise ModelFileError(f"{path}: invalid parameters: {exc}") from exc
    return estimator


def is_model_dir(path, *, storage_options=None) -> bool:
    """True if ``path`` (a local directory or a URL) holds a model.json."""
    if isinstance(path, str) and path.startswith("icechunk+"):  # a repository holds stores, never a model
        return False
    folder = _folder(path, storage_options)
    if folder.local:
        return os.path.isfile(os.path.join(folder.name, MODEL_JSON))
    return folder.isfile(MODEL_JSON)


def describe(path, *, storage_options=None) -> dict:
    """A JSON-safe description of a model directory, read from its model.json alone.

    ``kind`` is ``"model"``; then class, params, arrays (dtype, shape),
    n_features_in, ``fitted`` (the fitted attributes that are one number, bool
    or word: a CG's ``n_iter_`` and ``passes_``; and an iterative solver's
    ``final_residual``, the last of its ``residuals_``), state_bytes,
    fingerprint, format and package versions, and when it was saved; a
    search's ``cv_results_`` as ``search``, best first. No array is read but
    ``residuals_`` and those of ``cv_results_`` (each checked against its
    checksum): :func:`load` checks them.
    ``dkapprox info PATH`` prints this for a model directory, and
    :func:`dkapprox.io.describe` for a Zarr store.

    Raises
    ------
    InputMissingError
        Nothing at ``path``.
    ModelFileError
        Not a model directory, an unknown format version, or broken JSON.

    Examples
    --------
    >>> import numpy as np, tempfile
    >>> from dkapprox.kernel_approximation import RBFSampler
    >>> from dkapprox.models import describe, save
    >>> path = tempfile.mkdtemp() + "/rbf"
    >>> _ = save(RBFSampler(n_components=8, random_state=0).fit(np.ones((4, 3))), path)
    >>> d = describe(path)
    >>> d["kind"], d["class"], d["n_features_in"], d["arrays"]["random_weights_"]
    ('model', 'RBFSampler', 3, {'dtype': 'float64', 'shape': [3, 8]})
    """
    folder = _folder(path, storage_options)
    path = folder.name
    document = _read_document(folder)
    attributes = document["estimator"]["attributes"]
    described = {
        "kind": "model", "path": path, "class": document["class"],
        "params": document["estimator"]["params"],
        "arrays": {name: {"dtype": np.dtype(e["dtype"]).name, "shape": e["shape"]}
                   for name, e in document["arrays"].items()},
        "n_features_in": attributes.get("n_features_in_"),
        "fitted": _scalars(attributes),
        "state_bytes": document.get("state_bytes"), "fingerprint": document.get("fingerprint"),
        "format_version": document["format_version"], "package_version": document.get("package_version"),
        "saved": document.get("saved"),
    }
    search = attributes.get(SEARCH)
    if isinstance(search, dict) and isinstance(search.get("__dict__"), dict):
        described["search"] = _search_table(folder, document, search["__dict__"])
    kernel = attributes.get("kernel_")
    if isinstance(kernel, dict) and "__gp_kernel__" in kernel:
        described["kernel"] = _gp_kernel_text(folder, document, kernel)
    history = attributes.get(RESIDUALS)
    name = history.get("__ndarray__") if isinstance(history, dict) else None
    if isinstance(name, str) and name in document["arrays"]:
        residuals = _read_array(folder, name, document["arrays"][name])  # its checksum, dtype and shape checked
        if residuals.ndim == 1 and residuals.size and residuals.dtype.kind == "f":
            described["fitted"]["final_residual"] = float(residuals[-1])
    return described


def _gp_kernel_text(folder, document, entry) -> str:
    """A fitted GP kernel as scikit-learn writes it (its length scales read from their arrays, each checked)."""
    names = set()

    def refs(value):
        if isinstance(value, dict):
            if "__ndarray__" in value:
                names.add(value["__ndarray__"])
            for item in value.values():
                refs(item)
        elif isinstance(value, list):
            for item in value:
                refs(item)

    refs(entry)
    arrays = {name: _read_array(folder, name, document["arrays"][name]) for name in names
              if isinstance(name, str) and name in document["arrays"]}
    return repr(Decoder(arrays).value(entry))


#: an iterative solver's history (KernelRidge's CG: the relative residual after each iteration), whose last value
#: ``describe`` shows as ``final_residual``: the one array it reads (a few hundred bytes, checked like any)
RESIDUALS = "residuals_"


#: a search's results (KernelRidgeCV's ``cv_results_``): ``describe`` shows each candidate's parameters and
#: mean, std and rank of its test score, best first (reading those three small arrays, checked like any)
SEARCH = "cv_results_"


def _search_table(folder, document, results) -> list:
    columns = {}
    for key in ("mean_test_score", "std_test_score", "rank_test_score"):
        ref = results.get(key)
        name = ref.get("__ndarray__") if isinstance(ref, dict) else None
        if not (isinstance(name, str) and name in document["arrays"]):
            return []
        columns[key] = _read_array(folder, name, document["arrays"][name]).tolist()
    params = [p.get("__dict__", p) if isinstance(p, dict) else p for p in results.get("params", [])]
    rows = [{"params": params[i], **{k: v[i] for k, v in columns.items()}} for i in range(len(params))]
    return sorted(rows, key=lambda row: row["rank_test_score"])


def _scalars(attributes) -> dict:
    """The public fitted attributes that are one number, bool or word (``n_iter_``, ``passes_``), as JSON."""
    scalars = {}
    for name, value in sorted(attributes.items()):
        if isinstance(value, dict) and "__scalar__" in value:
            value = value.get("value")
        elif isinstance(value, dict) and "__float__" in value:
            value = value["__float__"]
        if not name.startswith("_") and name != "n_features_in_" and (
                value is None or isinstance(value, (bool, int, float, str))):
            scalars[name] = value
    return scalars


# -- reading -------------------------------------------------------------------------


def read_document(path, *, storage_options=None) -> dict:
    """model.json of ``path``, parsed strictly and checked for the format and its version."""
    return _read_document(_folder(path, storage_options))


def _read_document(folder) -> dict:
    path = folder.name
    if not folder.exists():
        bucket = None if folder.local else missing_bucket(folder.loc)
        where = "" if bucket is None else f" (the bucket {bucket!r} does not exist)"
        raise InputMissingError(f"{path}: no such model directory{where}")
    meta = folder.where(MODEL_JSON)
    if not folder.isdir() or not folder.isfile(MODEL_JSON):
        raise ModelFileError(f"{path}: not a dkapprox model directory (no {MODEL_JSON})")
    if folder.size(MODEL_JSON) > MAX_JSON_BYTES:
        raise ModelFileError(f"{meta}: larger than {MAX_JSON_BYTES:,} bytes; not a model file")
    try:
        document = json.loads(folder.read(MODEL_JSON).decode("utf-8"), parse_constant=_no_constants)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ModelFileError(f"{meta}: not valid JSON (truncated or modified?): {exc}") from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ModelFileError(f"{meta}: not a dkapprox model file")
    version = document.get("format_version")
    if version != FORMAT_VERSION:
        raise ModelFileError(f"{meta}: unknown model format version {version!r} (saved by dkapprox "
                             f"{document.get('package_version')}); this dkapprox reads version {FORMAT_VERSION}")
    estimator, entries = document.get("estimator"), document.get("arrays")
    if not isinstance(estimator, dict) or not isinstance(entries, dict):
        raise ModelFileError(f"{meta}: 'estimator' and 'arrays' must be objects")
    if not all(isinstance(e, dict) and {"sha256", "dtype", "shape"} <= set(e) for e in entries.values()):
        raise ModelFileError(f"{meta}: every array entry needs sha256, dtype and shape")
    try:
        for name in entries:
            check_array_name(name)
    except StateError as exc:
        raise ModelFileError(f"{meta}: {exc}") from exc
    return document


def _read_array(folder, name, entry):
    file = folder.where(ARRAYS, f"{name}.npy")  # never a path taken from the file
    try:
        data = folder.read(ARRAYS, f"{name}.npy")
    except FileNotFoundError as exc:
        raise ModelFileError(f"{file}: missing (the model directory is incomplete)") from exc
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ModelFileError(f"{file}: checksum mismatch; the file was modified or truncated")
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ModelFileError(f"{file}: not a readable .npy file: {exc}") from exc
    if array.dtype.str != entry["dtype"] or list(array.shape) != entry["shape"]:
        raise ModelFileError(f"{file}: holds {array.dtype.str} {list(array.shape)}, model.json says "
                             f"{entry['dtype']} {entry['shape']}")
    return array


def _no_constants(name):
    raise ValueError(f"{name} is not valid JSON")


# -- hashing and writing ---------------------------------------------------------------


def _data_digest(array) -> str:
    h = hashlib.sha256(f"{array.dtype.str}|{list(array.shape)}|".encode())
    h.update(np.ascontiguousarray(array).reshape(-1).view(np.uint8))
    return h.hexdigest()


def _fingerprint(estimator_doc, digests) -> str:
    body = canonical_json({"estimator": estimator_doc, "arrays": digests})
    return "sha256:" + hashlib.sha256(body.encode()).hexdigest()


def _model_files(encoder, doc):
    """({relative file: bytes} of the arrays, model.json's bytes, the fingerprint): the same wherever saved."""
    files, entries = {}, {}
    for name, array in encoder.arrays.items():
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        data = buffer.getvalue()
        files[f"{ARRAYS}/{name}.npy"] = data
        entries[name] = {"file": f"{ARRAYS}/{name}.npy", "sha256": hashlib.sha256(data).hexdigest(),
                         "dtype": array.dtype.str, "shape": list(array.shape)}
    model_fingerprint = _fingerprint(doc, {name: _data_digest(a) for name, a in encoder.arrays.items()})
    document = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "package_version": package_version(),
        "saved": utc_now(), "class": doc["class"], "estimator": doc, "arrays": entries,
        "state_bytes": int(sum(a.nbytes for a in encoder.arrays.values())), "fingerprint": model_fingerprint,
    }
    return files, json.dumps(document, indent=1, allow_nan=False).encode(), model_fingerprint


def _write(file, data):
    with open(file, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _replaceable(path, overwrite) -> bool:
    """True if ``path`` holds a model to replace; raises if it holds anything else we may not touch."""
    if not os.path.lexists(path):
        if not os.path.isdir(os.path.dirname(path)):
            raise InputMissingError(f"{os.path.dirname(path)}: the folder to save the model in does not exist")
        return False
    if os.path.isdir(path) and not os.path.islink(path) and not os.listdir(path):
        return False  # an empty directory: os.replace takes its place
    if is_model_dir(path) and not os.path.islink(path):
        if overwrite:
            return True
        raise OutputExistsError(f"{path}: a model is already saved there; pass overwrite=True to replace it")
    raise OutputExistsError(f"{path}: exists and is not a dkapprox model directory; refusing to replace it "
                            "(even with overwrite=True); choose another path")


# -- where a model lives: a local folder or a URL prefix -----------------------------------


def _folder(path, storage_options=None):
    loc = locate(path, storage_options)
    if loc.local:
        text = os.fspath(path)
        return _LocalFolder(os.path.abspath(text[len("file://"):] if text.startswith("file://") else text))
    return _RemoteFolder(loc)


class _LocalFolder:
    """A model directory on this machine (names are absolute paths, as the messages give them)."""

    local = True

    def __init__(self, name):
        self.name = name

    def where(self, *parts):
        return os.path.join(self.name, *parts)

    def exists(self, *parts):
        return os.path.exists(self.where(*parts))

    def isdir(self):
        return os.path.isdir(self.name)

    def isfile(self, *parts):
        return os.path.isfile(self.where(*parts))

    def size(self, *parts):
        return os.path.getsize(self.where(*parts))

    def read(self, *parts):
        with open(self.where(*parts), "rb") as f:
            return f.read()


class _RemoteFolder:
    """A model directory at an fsspec URL (names are URLs; credentials stay in the filesystem object)."""

    local = False

    def __init__(self, loc):
        self.loc = loc
        self.name = loc.url
        self.fs, self.root = loc.filesystem()
        self.fs.invalidate_cache(self.root)  # another process may have written since this one listed it

    def where(self, *parts):
        return "/".join((self.name, *parts))

    def _key(self, *parts):
        return "/".join((self.root.rstrip("/"), *parts))

    def exists(self, *parts):
        return self.fs.exists(self._key(*parts))

    def isdir(self):
        return self.fs.isdir(self.root)

    def isfile(self, *parts):
        return self.fs.isfile(self._key(*parts))

    def size(self, *parts):
        return self.fs.size(self._key(*parts))

    def read(self, *parts):
        return self.fs.cat_file(self._key(*parts))

    def write(self, data, *parts):
        self.fs.pipe_file(self._key(*parts), data)

    def files(self):
        """Every file below the folder, as paths relative to it."""
        root = self.root.rstrip("/")
        return sorted(p[len(root) + 1:] for p in self.fs.find(root) if p.startswith(root + "/"))

    def remove(self, *parts, recursive=False):
        key = self._key(*parts)
        if self.fs.exists(key):
            self.fs.rm(key, recursive=recursive)


def check_saveable(path, *, overwrite=False, storage_options=None):
    """Raise now what :func:`save` would raise for ``path`` (OutputExistsError, InputMissingError), writing nothing."""
    folder = _folder(path, storage_options)
    if folder.local:
        _replaceable(folder.name, overwrite)
    else:
        _remote_state(folder, overwrite)


def _remote_state(folder, overwrite) -> str:
    """'absent' | 'model' (to replace) | 'partial' (a killed save's arrays): what a save at ``folder`` finds."""
    path = folder.name
    if not folder.exists():
        _require_remote_parent(folder)
        return "absent"
    if folder.isfile():
        raise OutputExistsError(f"{path}: exists and is not a dkapprox model directory; refusing to replace it "
                                "(even with overwrite=True); choose another path")
    if folder.isfile(MODEL_JSON):
        if overwrite:
            return "model"
        raise OutputExistsError(f"{path}: a model is already saved there; pass overwrite=True to replace it")
    files = folder.files()
    if not files:
        return "absent"  # an empty directory (filesystems that have them)
    if all(f.startswith(f"{ARRAYS}/") and f.endswith(".npy") and f.count("/") == 1 for f in files):
        return "partial"
    raise OutputExistsError(f"{path}: exists and is not a dkapprox model directory; refusing to replace it "
                            "(even with overwrite=True); choose another path")


def _require_remote_parent(folder):
    loc = folder.loc
    if loc.protocol in OBJECT_STORES:  # no folders, only keys: the bucket must exist
        bucket = missing_bucket(loc)
        if bucket is not None:
            raise InputMissingError(f"{loc.protocol}://{bucket}: the bucket to save the model in does not exist")
        return
    parent = folder.root.rstrip("/").rpartition("/")[0]
    if parent and not folder.fs.isdir(parent):
        raise InputMissingError(f"{folder.name.rpartition('/')[0]}: the folder to save the model in does not exist")


def _save_remote(estimator, folder, overwrite):
    """Save to a URL: the arrays, then model.json last (no rename on object stores; see the module notes)."""
    state = _remote_state(folder, overwrite)
    encoder = Encoder()
    doc = encoder.estimator(estimator)
    files, document_bytes, model_fingerprint = _model_files(encoder, doc)
    if state == "model":
        folder.remove(MODEL_JSON)  # first: from here on nothing loads the old model half-replaced
    if state in ("model", "partial"):
        folder.remove(recursive=True)
    try:
        for file, data in files.items():
            folder.write(data, *file.split("/"))
        folder.write(document_bytes, MODEL_JSON)
    except BaseException:
        if not folder.isfile(MODEL_JSON):
            with contextlib.suppress(Exception):  # best effort: a next save replaces what is left anyway
                folder.remove(recursive=True)
        raise
    return model_fingerprint
