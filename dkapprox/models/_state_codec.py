"""An estimator's parameters and fitted state as JSON plus named NumPy arrays, and back.

Encoding is generic: parameters come from ``get_params(deep=False)`` (less
those a class gained after its first files, :data:`LATER_PARAMS`, while None); the
fitted state is every other entry of the instance ``__dict__`` (public
attributes ending in ``_`` and private ones such as RBFSampler's ``_gamma``).
Values are JSON scalars, or one-key tagged objects::

    {"__ndarray__": name}                      numeric, bool or fixed-width string array (a .npy)
    {"__sparse__": fmt, "class", "shape", ...}  csr / csc / coo matrix or array, parts as arrays
    {"__strings__": [...]}                      object array of str (feature_names_in_)
    {"__scalar__": dtype, "value": v}           NumPy scalar
    {"__float__": "nan" | "inf" | "-inf"}
    {"__tuple__": [...]}, {"__dict__": {...}}
    {"__estimator__": {"class", "params", "attributes"}}   a nested public dkapprox estimator
    {"__pipeline__": [[name, estimator], ...]}  a scikit-learn Pipeline of public dkapprox estimators
                                                (default memory, verbose and transform_input)
    {"__gp_kernel__": {"class", "params"}}      a scikit-learn Gaussian process kernel (:data:`GP_KERNELS`)

Decoding builds only allow-listed classes (public dkapprox estimators, looked
up by name, scikit-learn's Pipeline of them and its GP kernels), NumPy arrays
and scipy.sparse containers; it imports nothing named in a file and runs no
code but the estimator's or kernel's ``__init__`` (which only stores its
parameters, a scikit-learn convention).
"""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import scipy.sparse as sp
from sklearn.gaussian_process import kernels as gp_kernels
from sklearn.pipeline import Pipeline

from .._registry import by_name
from ..errors import StateError
from ..utils import get_param_names

_ARRAY_KINDS = "biufcUS"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ARRAY_NAME = re.compile(r"^[A-Za-z0-9_.]+$")
#: scikit-learn's GP kernels a model file may rebuild: each is its parameters (numbers, bounds, nested kernels)
GP_KERNELS = {cls.__name__: cls for cls in (
    gp_kernels.ConstantKernel, gp_kernels.WhiteKernel, gp_kernels.RBF, gp_kernels.Matern,
    gp_kernels.RationalQuadratic, gp_kernels.ExpSineSquared, gp_kernels.DotProduct, gp_kernels.Sum,
    gp_kernels.Product, gp_kernels.Exponentiation)}
#: parameters a class gained after its model files were first saved, all defaulting to None: left out of a file (and
#: so of its fingerprint) while None, and None where a file lacks them, so earlier files load with their fingerprints
LATER_PARAMS = {"GaussianProcessRegressor": frozenset({"length_scale_grid"})}
_SPARSE_PARTS = {"csr": ("data", "indices", "indptr"), "csc": ("data", "indices", "indptr"),
                 "coo": ("data", "row", "col")}


def public_estimators() -> dict:
    """Name -> class for dkapprox's public estimator classes: the registry's, and nothing else."""
    return by_name()


def class_name(estimator) -> str:
    cls = type(estimator)
    if public_estimators().get(cls.__name__) is not cls:
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} is not a public dkapprox estimator class; "
                        "only those can be saved without pickle")
    return cls.__name__


def param_names(estimator) -> list:
    params = estimator.get_params(deep=False)
    later = LATER_PARAMS.get(type(estimator).__name__, ())
    return sorted(k for k in params if not (k in later and params[k] is None))


def fitted_names(estimator) -> list:
    params = set(estimator.get_params(deep=False))
    return sorted(k for k in vars(estimator) if k not in params and not k.startswith("__"))


class Encoder:
    """Collects arrays (name -> ndarray) while turning values into JSON."""

    def __init__(self):
        self.arrays = {}

    def estimator(self, est, prefix=""):
        name = class_name(est)
        params = est.get_params(deep=False)
        return {
            "class": name,
            "params": {k: self.value(params[k], f"{prefix}{k}", what="parameter") for k in param_names(est)},
            "attributes": {k: self.value(getattr(est, k), f"{prefix}{k}", what="fitted attribute")
                           for k in fitted_names(est)},
        }

    def value(self, v, path, *, what):
        if isinstance(v, np.generic) and v.dtype.kind in "biuf":  # before float: np.float64 is one
            return {"__scalar__": v.dtype.str, "value": self.value(v.item(), path, what=what)}
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return int(v)
        if isinstance(v, float):
            return v if math.isfinite(v) else {"__float__": repr(v)}
        if isinstance(v, np.ndarray):
            return self._ndarray(v, path, what)
        if sp.issparse(v):
            return self._sparse(v, path, what)
        if isinstance(v, (list, tuple)):
            items = [self.value(x, f"{path}.{i}", what=what) for i, x in enumerate(v)]
            return items if isinstance(v, list) else {"__tuple__": items}
        if isinstance(v, dict) and all(isinstance(k, str) for k in v):
            return {"__dict__": {k: self.value(x, f"{path}.{k}", what=what) for k, x in v.items()}}
        if type(v).__name__ in public_estimators() and public_estimators()[type(v).__name__] is type(v):
            return {"__estimator__": self.estimator(v, prefix=f"{path}.")}
        if type(v) is Pipeline:
            return {"__pipeline__": self._pipeline(v, path, what)}
        if GP_KERNELS.get(type(v).__name__) is type(v):
            params = v.get_params(deep=False)
            return {"__gp_kernel__": {"class": type(v).__name__,
                                      "params": {k: self.value(params[k], f"{path}.{k}", what=what)
                                                 for k in sorted(params)}}}
        hint = ""
        if isinstance(v, np.random.RandomState):
            hint = " (pass an int random_state: the fitted arrays are what a model file keeps)"
        elif callable(v):
            hint = " (a callable is code, and model files hold no code: use a named kernel)"
        raise TypeError(f"cannot save {what} {path!r}: {type(v).__module__}.{type(v).__qualname__} is not "
                        f"JSON-safe{hint}")

    def _ndarray(self, v, path, what):
        if v.dtype.kind == "O":
            if all(isinstance(x, str) for x in v.flat) and v.ndim == 1:
                return {"__strings__": [str(x) for x in v]}
            raise TypeError(f"cannot save {what} {path!r}: object arrays hold Python objects, not numbers")
        if v.dtype.kind not in _ARRAY_KINDS or v.dtype.fields is not None:
            raise TypeError(f"cannot save {what} {path!r}: arrays of dtype {v.dtype} are not supported")
        self.arrays[path] = v
        return {"__ndarray__": path}

    def _pipeline(self, v, path, what):
        """A Pipeline's steps; only the steps: its other parameters must be the defaults, and it holds no state."""
        if v.get_params(deep=False).keys() - {"steps"} != _PIPELINE_DEFAULTS.keys() or any(
                v.get_params(deep=False)[k] != d for k, d in _PIPELINE_DEFAULTS.items()):
            raise TypeError(f"cannot save {what} {path!r}: a Pipeline with parameters other than its steps "
                            "at their defaults")
        extra = set(vars(v)) - set(v.get_params(deep=False))
        if extra:
            raise TypeError(f"cannot save {what} {path!r}: a Pipeline holding {sorted(extra)}")
        return [[name, {"__estimator__": self.estimator(step, prefix=f"{path}.{name}.")}] for name, step in v.steps]

    def _sparse(self, v, path, what):
        fmt = v.format
        if fmt not in _SPARSE_PARTS:
            raise TypeError(f"cannot save {what} {path!r}: sparse format {fmt!r} (use csr, csc or coo)")
        doc = {"__sparse__": fmt, "class": "array" if isinstance(v, sp.sparray) else "matrix",
               "shape": [int(s) for s in v.shape]}
        for part in _SPARSE_PARTS[fmt]:
            doc[part] = self._ndarray(np.asarray(getattr(v, part)), f"{path}.{part}", what)
        return doc


class Decoder:
    """Rebuilds values from JSON and the arrays a file holds (name -> ndarray)."""

    def __init__(self, arrays):
        self.arrays = arrays

    def estimator(self, doc):
        if not isinstance(doc, dict) or set(doc) != {"class", "params", "attributes"}:
            raise StateError("an estimator entry needs exactly 'class', 'params' and 'attributes'")
        cls = public_estimators().get(doc["class"]) if isinstance(doc["class"], str) else None
        if cls is None:
            raise StateError(f"unknown estimator class {doc['class']!r} (not a public dkapprox class)")
        params, attrs = doc["params"], doc["attributes"]
        if not isinstance(params, dict) or not isinstance(attrs, dict):
            raise StateError("'params' and 'attributes' must be objects")
        expected = sorted(get_param_names(cls))
        later = LATER_PARAMS.get(doc["class"], frozenset())
        if set(params) - set(expected) or not set(expected) - set(params) <= later:
            raise StateError(f"{doc['class']} takes parameters {expected}, the file has {sorted(params)}")
        est = cls(**{k: self.value(v) for k, v in params.items()})
        for name, value in attrs.items():
            if not _NAME.match(name) or name.startswith("__") or name in expected:
                raise StateError(f"invalid fitted attribute name {name!r}")
            est.__dict__[name] = self.value(value)  # no setattr: no descriptor or property runs
        return est

    def value(self, v):
        if v is None or isinstance(v, (bool, str, int, float)):
            return v
        if isinstance(v, list):
            return [self.value(x) for x in v]
        tags = [k for k in v if k.startswith("__")] if isinstance(v, dict) else []
        if len(tags) != 1:
            raise StateError(f"unexpected JSON value {str(v)[:80]!r}")
        tag = tags[0]
        body = v[tag]
        if tag == "__ndarray__" and len(v) == 1:
            return self._array(body)
        if tag == "__strings__" and len(v) == 1 and isinstance(body, list) and all(isinstance(s, str) for s in body):
            out = np.empty(len(body), dtype=object)
            out[:] = body
            return out
        if tag == "__scalar__" and set(v) == {"__scalar__", "value"}:
            dtype = _dtype(body)
            if dtype.kind not in "biuf":
                raise StateError(f"scalar dtype {body!r} is not a number type")
            return dtype.type(self.value(v["value"]))
        if tag == "__float__" and len(v) == 1 and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "__tuple__" and len(v) == 1 and isinstance(body, list):
            return tuple(self.value(x) for x in body)
        if tag == "__dict__" and len(v) == 1 and isinstance(body, dict):
            return {k: self.value(x) for k, x in body.items()}
        if tag == "__estimator__" and len(v) == 1:
            return self.estimator(body)
        if tag == "__sparse__":
            return self._sparse(v)
        if tag == "__pipeline__" and len(v) == 1:
            return self._pipeline(body)
        if tag == "__gp_kernel__" and len(v) == 1:
            return self._gp_kernel(body)
        raise StateError(f"unexpected tagged value {tag!r}")

    def _pipeline(self, body):
        if not (isinstance(body, list) and body and all(
                isinstance(s, list) and len(s) == 2 and isinstance(s[0], str) and _NAME.match(s[0])
                and isinstance(s[1], dict) and set(s[1]) == {"__estimator__"} for s in body)):
            raise StateError("a pipeline entry must be a non-empty list of [name, estimator] pairs")
        return Pipeline([(name, self.estimator(step["__estimator__"])) for name, step in body])

    def _gp_kernel(self, body):
        if not isinstance(body, dict) or set(body) != {"class", "params"} or not isinstance(body["params"], dict):
            raise StateError("a GP kernel entry needs exactly 'class' and 'params'")
        cls = GP_KERNELS.get(body["class"]) if isinstance(body["class"], str) else None
        if cls is None:
            raise StateError(f"unknown GP kernel class {body['class']!r} (not one of {sorted(GP_KERNELS)})")
        expected = sorted(name for name in inspect.signature(cls.__init__).parameters if name != "self")
        if sorted(body["params"]) != expected:
            raise StateError(f"{body['class']} takes parameters {expected}, the file has {sorted(body['params'])}")
        return cls(**{k: self.value(x) for k, x in body["params"].items()})

    def _array(self, name):
        if not isinstance(name, str) or name not in self.arrays:
            raise StateError(f"array {name!r} is referenced but not in the file")
        return self.arrays[name]

    def _sparse(self, v):
        fmt = v["__sparse__"]
        if fmt not in _SPARSE_PARTS or set(v) != {"__sparse__", "class", "shape", *_SPARSE_PARTS[fmt]}:
            raise StateError(f"invalid sparse entry of format {fmt!r}")
        shape = v["shape"]
        if not (isinstance(shape, list) and len(shape) == 2 and all(isinstance(s, int) and s >= 0 for s in shape)):
            raise StateError(f"invalid sparse shape {shape!r}")
        parts = [self.value(v[p]) for p in _SPARSE_PARTS[fmt]]
        if not all(isinstance(p, np.ndarray) and p.ndim == 1 for p in parts):
            raise StateError("sparse parts must be 1-D arrays")
        kind = {"matrix": "_matrix", "array": "_array"}.get(v["class"])
        if kind is None:
            raise StateError(f"invalid sparse class {v['class']!r}")
        cls = getattr(sp, fmt + kind)
        try:
            if fmt == "coo":
                out = cls((parts[0], (parts[1], parts[2])), shape=tuple(shape))
                out.row, out.col = parts[1], parts[2]
            else:
                out = cls(tuple(parts), shape=tuple(shape))
                out.indices, out.indptr = parts[1], parts[2]  # keep the saved index dtypes
                out.check_format(full_check=True)
        except (ValueError, TypeError, IndexError) as exc:
            raise StateError(f"invalid sparse {fmt} parts: {exc}") from exc
        return out


#: the parameters a saved Pipeline may have besides its steps, at these values
_PIPELINE_DEFAULTS = {"memory": None, "transform_input": None, "verbose": False}


def _dtype(text):
    try:
        dtype = np.dtype(text)
    except TypeError as exc:
        raise StateError(f"invalid dtype {text!r}") from exc
    return dtype


def check_array_name(name):
    if not isinstance(name, str) or not _ARRAY_NAME.match(name) or ".." in name or len(name) > 200:
        raise StateError(f"invalid array name {name!r}")
    return name
