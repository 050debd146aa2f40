"""Input checks with scikit-learn's wording, for NumPy and dask input alike.

Every input comes through one door first (:func:`dkapprox.inputs._lazy.as_input`),
which tells the kinds apart; what is checked here is its canonical form.
NumPy and scipy.sparse input goes through scikit-learn's own ``validate_data``
(so every message is scikit-learn's).  Dask input is checked on metadata only
(shape, dtype, chunks) when the graph is built; value checks (NaN, infinity,
sign) run inside each task via :class:`BlockCheck`, so bad data fails at
compute time with the same message, and nothing is computed just to check.
A dask DataFrame is checked on its columns' names (by scikit-learn, on the
frame's empty ``_meta``: ``feature_names_in_`` and its errors are
scikit-learn's) and dtypes; the door has read it as a dask array of one
block per partition (:func:`dkapprox.inputs._lazy.frame_as_dask`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import assert_all_finite, check_non_negative, validate_data

from .. import backends, engine
from . import _lazy
from ._lazy import FLOAT_DTYPES


def check_input(estimator, X, *, reset, accept_sparse=("csr", "csc"), ensure_non_negative=False,
                dtype=FLOAT_DTYPES, copy=False):
    """Validate ``X`` for ``estimator``; returns NumPy/sparse, a dask array or an array of X's namespace.

    ``X`` goes through the door (:func:`dkapprox.inputs._lazy.as_input`, with ``dtype``;
    an :class:`~dkapprox.inputs._lazy.Input` made already passes as it is), and its
    canonical form is checked: in-memory data eagerly by scikit-learn; a dask
    (or zarr) array by metadata, cast lazily to a float dtype as scikit-learn
    would cast it; a dask DataFrame by its columns' names and dtypes
    (:func:`_check_dataframe`); a device array where it lives.
    """
    given = _lazy.as_input(X, dtype=dtype)
    if given.device:
        return _check_device_array(estimator, given, reset=reset, ensure_non_negative=ensure_non_negative,
                                   dtype=dtype)
    if not given.lazy:
        return validate_data(estimator, given.data, reset=reset, accept_sparse=accept_sparse or False,
                             ensure_non_negative=ensure_non_negative, dtype=dtype, copy=copy)
    if given.frame is not None and given.frame.ndim == 2:
        return _check_dataframe(estimator, given, reset=reset)
    X = given.data
    name = type(estimator).__name__
    if X.ndim != 2:
        raise ValueError(
            f"Expected 2D array, got {X.ndim}D array instead (dask array of shape {X.shape}). "
            "Reshape your data either using array.reshape(-1, 1) if your data has a single "
            "feature or array.reshape(1, -1) if it contains a single sample."
        )
    kind = X.dtype.kind
    if kind == "c":  # before the sparse check, as in scikit-learn's check_array
        raise ValueError(f"Complex data not supported (dask array of dtype {X.dtype}).")
    if engine.is_sparse_meta(X) and not accept_sparse:
        raise TypeError(
            f"Sparse data was passed for X, but dense data is required ({name}). "
            "Use '.map_blocks(lambda b: b.toarray())' to convert the dask blocks to dense."
        )
    if kind in "OUS" and dtype is not None:
        # as validate_data converts NumPy object and string arrays (to float64, value by value):
        # a value that is no number raises NumPy's "could not convert string to float" at compute
        X = X.astype(np.float64)
        kind = "f"
    if kind not in "biuf":
        raise ValueError(
            f"dtype {X.dtype} is not supported by {name}: convert the dask array to numbers "
            "first, e.g. X.astype('float64')."
        )
    if dtype is not None and X.dtype not in [np.dtype(d) for d in dtype]:
        X = X.astype(dtype[0])
    n_rows, n_features = X.shape
    if n_rows == 0:
        raise ValueError(
            f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is "
            f"required by {name}."
        )
    if n_features == 0:
        raise ValueError(
            f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is "
            f"required by {name}."
        )
    check_n_features(estimator, n_features, reset=reset)
    if reset and hasattr(estimator, "feature_names_in_"):
        del estimator.feature_names_in_  # as scikit-learn does for unnamed input
    return X


def _check_dataframe(estimator, given, *, reset):
    """A dask DataFrame, checked from its metadata; returns the dask array of its values the door read.

    Its column names go through scikit-learn on the frame's empty ``_meta``
    (``feature_names_in_`` set or checked, with scikit-learn's errors and
    warnings, and ``n_features_in_``). Every column must have a numeric or
    bool dtype: a string, object, categorical or datetime column is refused
    by name (scikit-learn would convert strings value by value, which here
    means computing them). The values' dtype is the one the door chose
    (:func:`dkapprox.inputs._lazy.as_input`), the one scikit-learn's ``check_array``
    picks for a pandas frame: the columns' common NumPy dtype if it is one of
    ``dtype``, else ``dtype[0]`` (nullable and pyarrow columns: ``dtype[0]``,
    their missing values NaN).
    """
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    name = type(estimator).__name__
    X = given.frame
    columns = list(X.dtypes.items())
    if not columns:
        raise ValueError(f"Found array with 0 feature(s) (shape=(nan, 0)) while a minimum of 1 is "
                         f"required by {name}.")
    validate_data(estimator, X._meta, reset=reset, skip_check_array=True)
    bad = [(column, d) for column, d in columns if not (is_numeric_dtype(d) or is_bool_dtype(d))]
    if bad:
        listed = ", ".join(f"{column!r} ({d})" for column, d in bad)
        raise ValueError(
            f"could not convert {'column' if len(bad) == 1 else 'columns'} {listed} of the dask DataFrame "
            f"to float: {name} takes numeric and bool columns only. Select the feature columns "
            "(ddf[[...]]) or convert them first (ddf.astype({column: 'float64'}), an encoder for "
            "categories); checked from the dtypes, nothing was computed."
        )
    complex_ = [column for column, d in columns if getattr(d, "kind", "") == "c"]
    if complex_:
        raise ValueError(f"Complex data not supported (dask DataFrame column(s) {complex_}).")
    return given.data


def _check_device_array(estimator, given, *, reset, ensure_non_negative, dtype):
    """An array of another namespace (CuPy, array-api-strict), checked where it lives.

    Its shape and dtype as scikit-learn checks them; its values by one reduction on its
    device (:class:`BlockCheck`), so that nothing is copied to the host unless it is bad.
    Integer and bool arrays become float64, as scikit-learn casts them.
    """
    name = type(estimator).__name__
    X, xp = given.data, given.namespace
    if X.ndim != 2:
        raise ValueError(
            f"Expected 2D array, got {X.ndim}D array instead (array of shape {tuple(X.shape)}). "
            "Reshape your data either using array.reshape(-1, 1) if your data has a single "
            "feature or array.reshape(1, -1) if it contains a single sample."
        )
    kind = backends.numpy_dtype(X).kind
    if kind not in "biuf":
        raise ValueError(f"dtype {X.dtype} is not supported by {name}: convert the array to float64 or float32.")
    if dtype is not None and backends.numpy_dtype(X) not in [np.dtype(d) for d in dtype]:
        X = xp.astype(X, getattr(xp, np.dtype(dtype[0]).name))
    for size, what in ((X.shape[0], "sample"), (X.shape[1], "feature")):
        if size == 0:
            raise ValueError(f"Found array with 0 {what}(s) (shape={tuple(X.shape)}) while a minimum of 1 is "
                             f"required by {name}.")
    check_n_features(estimator, X.shape[1], reset=reset)
    if reset and hasattr(estimator, "feature_names_in_"):
        del estimator.feature_names_in_
    BlockCheck(name, non_negative=ensure_non_negative)(X)
    return X


def check_n_features(estimator, n_features, *, reset):
    if reset:
        estimator.n_features_in_ = int(n_features)
        return
    expected = getattr(estimator, "n_features_in_", None)
    if expected is not None and n_features != expected:
        raise ValueError(
            f"X has {n_features} features, but {type(estimator).__name__} "
            f"is expecting {expected} features as input."
        )


def _nothing():
    return None


@dataclass(frozen=True)
class BlockCheck:
    """Value checks run inside a task on one block (picklable, tiny)."""

    estimator_name: str
    finite: bool = True
    non_negative: bool = False
    greater_than: float | None = None
    greater_than_message: str = ""

    def __call__(self, block):
        if 0 in block.shape:  # an empty block (zero-row chunks are legal) has no value to check,
            return  # and check_non_negative's min() of it would raise NumPy's zero-size error
        if backends.namespace(block) is not None:
            self.start(block)()
            return
        self._on_host(block)

    def start(self, block):
        """Queue the checks of a device block; the function returned waits for their flag and raises.

        One flag, reduced on the device; only a bad block is copied to the host, where
        scikit-learn's own checks raise their own messages. A map over device blocks calls the
        function after queueing the block's work (:mod:`dkapprox.engine._device_turns`), so the wait
        does not empty the device's queue.
        """
        xp = backends.namespace(block)
        if xp is None or 0 in block.shape:
            self(block)
            return _nothing
        fine = None
        for wanted, bad in ((self.finite, lambda: ~xp.all(xp.isfinite(block))),
                            (self.non_negative, lambda: xp.any(block < 0)),
                            (self.greater_than is not None, lambda: xp.any(block <= self.greater_than))):
            if wanted:
                flag = bad()
                fine = ~flag if fine is None else fine & ~flag
        if fine is None:
            return _nothing
        is_fine = backends.truth_later(fine)

        def finish():
            if not is_fine():
                self._on_host(backends.to_numpy(block))

        return finish

    def _on_host(self, block):
        if self.finite:
            assert_all_finite(block, input_name="X", estimator_name=self.estimator_name)
        if self.non_negative:
            check_non_negative(block, f"X in {self.estimator_name}")
        if self.greater_than is not None:
            values = block.data if sp.issparse(block) else block
            if values.size and (values <= self.greater_than).any():
                raise ValueError(self.greater_than_message)
