"""BlockwiseTransformer: the plumbing every dkapprox estimator shares.

A subclass says only what is particular to it:

* ``_fit(X)``: draw the fitted attributes (``X`` is validated NumPy/sparse
  or a dask array; use :mod:`dkapprox.engine` for any data statistic);
* ``_state(dtype)``: the small frozen state the block function needs;
* ``_block_fn``: a module-level ``block_fn(block, state)``;
* ``_n_features_out``: the output width.

This class takes every input through the one door (:func:`dkapprox.inputs._lazy.as_input`),
validates it with scikit-learn's wording, dispatches NumPy input
to an eager call and dask input to :func:`dkapprox.engine.map_rows`, and keeps
``set_output`` working for in-memory results (a dask result stays a lazy dask
array: turning it into a pandas frame would compute it). A dask DataFrame is
read lazily, one block per partition; with ``set_output(transform="pandas")``
its features come back as a lazy dask DataFrame with its index and divisions
(:func:`dkapprox.inputs._lazy.as_frame`). A 2-D
``xarray.DataArray`` comes back as a DataArray (:mod:`dkapprox.utils._xarray`), and
a fitted estimator's repr ends with what it holds (widths, landmarks, bytes);
in Jupyter, its HTML adds a table of the fitted state: the bytes shipped to the
workers, dtypes, and what a subclass adds (``_repr_facts``: Nystroem's landmarks).
"""

from __future__ import annotations

import html
from abc import ABCMeta, abstractmethod

import numpy as np
import scipy.sparse as sp
from sklearn import get_config
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from . import backends, engine, inputs, utils
from .inputs import BlockCheck, check_input
from .utils import align_api_if_sparse, estimator_html_repr, format_size, wrap_data_with_container


class BlockwiseTransformer(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator,
                          auto_wrap_output_keys=None, metaclass=ABCMeta):
    """Base class: fit draws a small state, transform maps it over row blocks."""

    _accept_sparse = ("csr", "csc")  # scipy.sparse formats taken as they are
    _non_negative = False  # scikit-learn's ensure_non_negative
    _block_fn = None  # module-level function(block, state) -> block of features

    # scikit-learn's automatic output wrapping would turn a lazy dask result
    # into a pandas frame, i.e. compute it: we wrap in-memory results by hand
    # (``_wrap``) and only declare "transform" so that set_output is offered.
    _sklearn_auto_wrap_output_keys = {"transform"}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(auto_wrap_output_keys=None, **kwargs)
        cls._sklearn_auto_wrap_output_keys = {"transform"}

    # -- the hooks a subclass defines: a missing one is a TypeError at construction, naming it ----------
    @abstractmethod
    def _fit(self, X):
        """Draw the fitted attributes from the checked ``X`` (NumPy, sparse or dask)."""

    @abstractmethod
    def _state(self, dtype):
        """The small frozen state ``_block_fn`` needs, its arrays in ``dtype``."""

    @property
    @abstractmethod
    def _n_features_out(self):
        """The output width, once fitted."""

    # -- public API -------------------------------------------------------
    def fit(self, X, y=None):
        """Draw the random state (and any data statistic it needs).

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array or DataFrame, zarr array} of shape (n_samples, n_features)
            Training data. A dask array is read at most once, and only when the
            method needs a statistic of the data (e.g. ``gamma='scale'``). A dask
            DataFrame is read as the dask array of its partitions (unknown row
            counts: a method that needs them counts them in one more pass); its
            column names become ``feature_names_in_``, as a pandas frame's do.
        y : None
            Ignored.

        Returns
        -------
        self : object
            Fitted transformer.
        """
        self._validate_params()
        X = self._check(X, reset=True)
        # the state is drawn on the driver with NumPy: an array on a device (CuPy) is copied to the
        # host for the fit's statistics, and the fitted attributes are NumPy arrays, as after any fit
        with backends.fitting_on(X):  # its linear algebra may run where the data is (Nystroem's eigh)
            self._fit(backends.to_numpy(X))
        return self

    def transform(self, X):
        """Map ``X`` to the feature space.

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array, array-API array} of shape (n_samples, n_features)
            NumPy or sparse input is transformed now; dask (or zarr) input gives
            a lazy dask array with one task per row block and nothing computed.
            A dask DataFrame is read one partition per task and gives a lazy
            dask array, or with ``set_output(transform="pandas")`` a lazy dask
            DataFrame with ``get_feature_names_out()`` as columns and the
            input's index and divisions.
            An array of another array-API namespace (CuPy) is transformed in
            that namespace, on its device; so are the blocks of a dask array
            of CuPy chunks.

        Returns
        -------
        X_new : ndarray, sparse matrix, dask array or array of X's namespace, of shape (n_samples, n_features_out)
            Or a (lazy) pandas or dask DataFrame, as ``set_output`` asks.

        Notes
        -----
        Two promises (the documentation's "Precision and reproducibility" page):

        - the same row block, transformed again (a rerun, a resumed job, a
          block recomputed after a worker died, NumPy on that block alone),
          gives the same bits on the same machine and BLAS;
        - other row blocks or column chunks, another number of workers or
          another BLAS kernel give features equal within the rounding bound
          of the block's dot products: two summation orders of a product of
          ``K`` terms differ by at most ``K * eps * sum |x_i w_i|`` per entry,
          carried through the feature map by its derivative (cos: 1,
          ``exp(-g d)``: ``g exp(-g d)``), plus a few units of rounding.
          Maps with no reordered sum (random binning) are exact.
        """
        check_is_fitted(self)
        given = inputs.as_input(X)
        return self._transform(self._check(given, reset=False), given)

    # -- hooks --------------------------------------------------------------
    def _out_dtype(self, dtype):
        return np.dtype(dtype)

    def _sparse_out(self, sparse_in):
        return False

    def _block_check(self):
        return BlockCheck(type(self).__name__, non_negative=self._non_negative)

    # -- plumbing -----------------------------------------------------------
    def _check(self, X, *, reset):
        return check_input(self, X, reset=reset, accept_sparse=self._accept_sparse,
                           ensure_non_negative=self._non_negative)

    def _transform(self, X, given, *, block_fn=None, state=None, n_out=None, name="transform"):
        """Features of the checked ``X``; ``given`` is the input through the door
        (:func:`dkapprox.inputs._lazy.as_input`)."""
        block_fn = block_fn or type(self)._block_fn
        state = self._state(backends.numpy_dtype(X)) if state is None else state
        n_out = self._n_features_out if n_out is None else n_out
        if not given.lazy:
            out = self._wrap(block_fn(X, state), given.data)
        else:
            out = engine.map_rows(
                X, block_fn, state, n_out=n_out, dtype=self._out_dtype(X.dtype),
                name=f"{type(self).__name__.lower()}-{name}", check=self._block_check(),
                sparse=self._sparse_out(engine.is_sparse_meta(X)),
            )
            if given.frame is not None:
                out = self._wrap_lazy_frame(out, X, given.frame)
        return out if given.dataarray is None else utils.wrap_like(out, given.dataarray, self)

    def _wrap(self, out, X_orig):
        # sparse output with set_output(transform="pandas") raises, as in scikit-learn
        return wrap_data_with_container("transform", align_api_if_sparse(out), X_orig, self)

    def _wrap_lazy_frame(self, out, X, X_orig):
        """Lazy features ``out`` of the dask DataFrame ``X_orig`` (read as ``X``), in the container set_output asks for.

        scikit-learn wraps the output's empty meta in the frame's empty meta:
        its errors (sparse output and pandas), its columns, the index's type.
        pandas gives a lazy dask DataFrame with the input's index and
        divisions; the default (or a container dask has no lazy form of,
        polars) leaves the lazy dask array.
        """
        shape = (0, out.shape[1])  # dask keeps a meta of shape (0, 0): an empty block of the output's shape
        empty = sp.csr_matrix(shape, dtype=out.dtype) if sp.issparse(out._meta) else np.empty(shape, out.dtype)
        meta = self._wrap(empty, X_orig._meta)
        if type(meta).__module__.partition(".")[0] != "pandas" or not hasattr(meta, "columns"):
            return out
        return inputs.as_frame(out, X, X_orig, meta)

    # -- repr: scikit-learn's, plus what was fitted -------------------------------
    def __repr__(self, N_CHAR_MAX=700):
        summary = _fitted_summary(self)
        text = super().__repr__(N_CHAR_MAX)
        return text if summary is None else f"{text}  # {summary}"

    # scikit-learn >= 1.7 renders the HTML of _repr_html_ and _repr_mimebundle_ through _html_repr;
    # 1.6 called estimator_html_repr directly, which would leave the note out: both route here
    def _repr_html_inner(self):
        return self._html_repr()

    def _repr_mimebundle_(self, **kwargs):
        output = {"text/plain": repr(self)}
        if get_config()["display"] == "diagram":
            output["text/html"] = self._html_repr()
        return output

    def _html_repr(self):
        facts = _fitted_facts(self)
        text = estimator_html_repr(self)
        if facts is None:
            return text
        summary, rows = facts
        cells = "".join(f"<tr><th style='text-align: left; padding-right: 1em'>{html.escape(label)}</th>"
                        f"<td style='text-align: left'>{html.escape(value)}</td></tr>" for label, value in rows)
        note = (f"<div class='dkapprox-fitted'><details open><summary>{html.escape(summary)}</summary>"
                f"<table class='dkapprox-state'>{cells}</table></details></div>")
        head, body_end, tail = text.rpartition("</body>")
        return f"{head}{note}{body_end}{tail}" if body_end else text + note

    def _repr_facts(self):
        """What a subclass adds to the HTML repr of its fitted state: ``[(label, text)]``."""
        return []


def _fitted(estimator) -> dict:
    """The fitted attributes (not parameters), or {} before fit."""
    params = estimator.get_params(deep=False)
    fitted = {k: v for k, v in vars(estimator).items() if k not in params}
    return fitted if any(k.endswith("_") and not k.startswith("__") for k in fitted) else {}


def _fitted_dtype(fitted):
    """The floating dtype the fitted arrays are kept in (the training data's where scikit-learn keeps it)."""
    dtypes = [v.dtype for k, v in fitted.items()
              if k.endswith("_") and (isinstance(v, np.ndarray) or sp.issparse(v)) and v.dtype.kind == "f"]
    return np.result_type(*dtypes) if dtypes else None


def _state_nbytes(estimator, dtype):
    """Bytes of the state ``transform`` ships to the workers (one graph key) for input of ``dtype``."""
    make = getattr(estimator, "_state", None)
    return 0 if make is None else engine.nbytes(make(dtype))



def _fitted_summary(estimator):
    """'fitted: 8 -> 100 features, 100 landmarks, state 7.0 kiB', or None before fit.

    The state is what ``transform`` ships to the workers (:func:`dkapprox.engine.nbytes`),
    for input of the dtype the fitted arrays are kept in.
    """
    fitted = _fitted(estimator)
    if not fitted:
        return None
    parts = []
    try:
        n_out = getattr(estimator, "_n_features_out", None) or len(estimator.get_feature_names_out())
        parts.append(f"{estimator.n_features_in_} -> {n_out} features")
    except Exception:  # a repr never raises: leave the widths out
        pass
    landmarks = fitted.get("component_indices_")  # Nystroem's landmarks, by their row indices
    if landmarks is not None:
        parts.append(f"{len(landmarks)} landmarks")
    try:
        parts.append(f"state {format_size(_state_nbytes(estimator, _fitted_dtype(fitted) or np.float64))}")
    except Exception:  # a repr never raises
        pass
    return "fitted: " + ", ".join(parts)


def _fitted_facts(estimator):
    """``(summary, [(label, text)])`` for the HTML repr of a fitted estimator, or None before fit."""
    summary = _fitted_summary(estimator)
    if summary is None:
        return None
    fitted = _fitted(estimator)
    rows = []
    try:
        dtype = _fitted_dtype(fitted)
        nbytes = _state_nbytes(estimator, dtype or np.float64)
        rows.append(("state shipped to the workers", f"{nbytes:,} bytes ({format_size(nbytes)}), one graph key"))
        outs = [f"{np.dtype(d)} in, {estimator._out_dtype(np.dtype(d))} out" for d in (np.float32, np.float64)]
        kept = f"fitted arrays {dtype}" if dtype else "no fitted arrays"
        rows.append(("dtype", f"{kept}; " + "; ".join(outs)))
        rows += list(estimator._repr_facts())
    except Exception:  # a repr never raises: the summary line stays
        pass
    return summary, rows
