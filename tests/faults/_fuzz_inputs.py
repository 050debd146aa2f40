"""Fuzzed inputs for tests/faults/test_fuzz.py: what is drawn, how it is built, what it must give.

A :class:`Case` is a plain description (shape, dtype, one fault, layout,
container, chunking) drawn by Hypothesis; :func:`build` turns it into the
NumPy (or scipy.sparse) input and its dask twin; :func:`problems` says, from
the data itself, what is wrong with it (NaN, infinity, negative values,
complex numbers, strings that are not numbers, sparse data for a dense-only
estimator), and :data:`PATTERNS` what an error about each must say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import dask.array as da
import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st

DTYPES = ("float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool",
          "object", "object-str", "str", "complex64", "complex128")
SPARSE_DTYPES = ("float32", "float64", "int64", "complex128")
FAULTS = (None, "nan", "inf", "-inf", "negative", "below_skew", "huge", "bad_string", "none")
LAYOUTS = ("C", "F", "rows_strided", "cols_reversed")
CONTAINERS = ("dask", "unknown_mask", "dataframe", "sparse")

#: What an error about each problem must say, and the exception class that says it.
PATTERNS = {
    "nan": (ValueError, r"Input X contains NaN"),
    "inf": (ValueError, r"Input X contains infinity"),
    "negative": (ValueError, r"[Nn]egative values"),
    "skew": (ValueError, r"smaller than -skewedness"),
    "complex": (ValueError, r"Complex data not supported"),
    "string": (ValueError, r"could not convert string to float"),
    "sparse": (TypeError, r"Sparse data was passed"),
}


@dataclass(frozen=True)
class Case:
    n_samples: int
    n_features: int
    dtype: str
    seed: int
    zero_fraction: float
    fault: str | None
    fault_at: tuple  # (row, column), taken modulo the shape
    layout: str
    read_only: bool
    container: str
    sparse_format: str
    row_cuts: tuple  # sorted cut points in [0, n_samples]; repeats give zero-row chunks
    column_cuts: tuple  # sorted distinct cut points in (0, n_features)
    keep_seed: int  # rows kept by the unknown-size mask


def _faults_for(dtype, container):
    if dtype in ("uint8", "bool"):
        return (None,)  # a negative or NaN value cannot be written in these dtypes
    if dtype.startswith("int"):
        return (None, "negative", "below_skew")
    if dtype in ("object-str", "str"):
        return (None, "nan", "inf", "-inf", "negative", "below_skew", "bad_string")
    if dtype == "object":
        return (None, "nan", "inf", "negative", "none")
    if container == "sparse":
        return (None, "nan", "inf", "negative", "below_skew")
    return (None, "nan", "inf", "-inf", "negative", "below_skew", "huge")


@st.composite
def cases(draw, containers=CONTAINERS, faults=FAULTS, max_samples=60, max_features=8, empty_blocks=True):
    """A fuzzed input: every field independent, so that Hypothesis shrinks each on its own.

    ``faults`` narrows the faults drawn; ``empty_blocks=False`` draws no
    zero-row chunks (and no boolean mask, which may empty a block).
    """
    if not empty_blocks:
        containers = tuple(c for c in containers if c != "unknown_mask")
    container = draw(st.sampled_from(containers))
    n = draw(st.integers(1, max_samples))
    d = draw(st.integers(1, max_features))
    if container == "sparse":
        dtype = draw(st.sampled_from(SPARSE_DTYPES))
    elif container == "dataframe":
        dtype = draw(st.sampled_from(("float32", "float64", "int8", "int64", "uint8", "bool")))
    else:
        dtype = draw(st.sampled_from(DTYPES))
    fault = draw(st.sampled_from([f for f in _faults_for(dtype, container) if f in faults] or [None]))
    n_cuts = draw(st.integers(0, 4))
    if empty_blocks:
        row_cuts = tuple(sorted(draw(st.lists(st.integers(0, n), min_size=n_cuts, max_size=n_cuts))))
    else:
        row_cuts = tuple(sorted(draw(st.sets(st.integers(1, max(1, n - 1)), max_size=n_cuts)))) if n > 1 else ()
    column_cuts = ()
    if container != "dataframe" and d > 1 and draw(st.booleans()):
        column_cuts = tuple(sorted(draw(st.sets(st.integers(1, d - 1), min_size=1, max_size=3))))
    return Case(
        n_samples=n,
        n_features=d,
        dtype=dtype,
        seed=draw(st.integers(0, 2**16)),
        zero_fraction=draw(st.sampled_from((0.0, 0.3, 0.8))),
        fault=fault,
        fault_at=(draw(st.integers(0, max_samples - 1)), draw(st.integers(0, max_features - 1))),
        layout=draw(st.sampled_from(LAYOUTS)) if container != "sparse" else "C",
        read_only=draw(st.booleans()) if container != "sparse" else False,
        container=container,
        sparse_format=draw(st.sampled_from(("csr", "csc"))),
        row_cuts=row_cuts,
        column_cuts=column_cuts,
        keep_seed=draw(st.integers(0, 2**16)),
    )


FAULT_VALUES = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf, "negative": -0.75, "below_skew": -2.5,
                "huge": 1e5}  # 1e5 overflows float16 to infinity, nothing else


def values(case):
    """The float64 values of the case, one fault written in (strings and None come later)."""
    rng = np.random.default_rng(case.seed)
    X = rng.random((case.n_samples, case.n_features)) * 3.0 + 0.05
    X[rng.random(X.shape) < case.zero_fraction] = 0.0
    i, j = case.fault_at[0] % case.n_samples, case.fault_at[1] % case.n_features
    if case.fault in FAULT_VALUES:
        X[i, j] = FAULT_VALUES[case.fault]
    return X, (i, j)


def _strings(X):
    return np.array([[repr(float(v)) for v in row] for row in X], dtype=object).reshape(X.shape)


def dense_input(case):
    """The case as a NumPy array of its dtype and layout (read-only if asked)."""
    X, (i, j) = values(case)
    kind = case.dtype
    if kind.startswith("int") or kind == "uint8":
        A = np.floor(X * 10).astype(kind)
    elif kind == "bool":
        A = X > 1.5
    elif kind == "object":
        A = X.astype(object)
        if case.fault == "none":
            A[i, j] = None
    elif kind in ("object-str", "str"):
        A = _strings(X)
        if case.fault == "bad_string":
            A[i, j] = "abc"
        if kind == "str":
            A = A.astype(str)
    else:
        with np.errstate(over="ignore"):  # the 'huge' fault: 1e5 is infinity in float16, on purpose
            A = X.astype(kind)
    if case.layout == "F":
        A = np.asfortranarray(A)
    elif case.layout == "rows_strided":  # every other row of a twice-as-tall array
        tall = np.empty((2 * A.shape[0],) + A.shape[1:], dtype=A.dtype)
        tall[::2] = A
        tall[1::2] = A
        A = tall[::2]
    elif case.layout == "cols_reversed":
        A = np.ascontiguousarray(A[:, ::-1])[:, ::-1]
    if case.read_only:
        A.setflags(write=False)
    return A


def sparse_input(case):
    """The case as CSR/CSC, with explicit zeros stored (every third stored value set to 0)."""
    X, _ = values(case)
    S = sp.csr_matrix(X.astype(case.dtype))
    S.data[::3] = 0  # explicit zeros: stored, but zero
    S = S.asformat(case.sparse_format)
    if case.sparse_format == "csc":  # asformat dropped nothing: make sure zeros stay stored
        S.data[::3] = 0
    return S


def row_chunks(case, n_rows):
    cuts = [min(c, n_rows) for c in case.row_cuts]
    edges = [0] + cuts + [n_rows]
    return tuple(int(b - a) for a, b in zip(edges[:-1], edges[1:]))


def column_chunks(case):
    edges = [0] + list(case.column_cuts) + [case.n_features]
    return tuple(int(b - a) for a, b in zip(edges[:-1], edges[1:]))


def build(case):
    """``(numpy_input, dask_input)``: the in-memory input, and the same rows as a dask array."""
    if case.container == "sparse":
        S = sparse_input(case)
        rows = row_chunks(case, case.n_samples)
        # dask slices rows of a CSR matrix; its blocks are CSR with the explicit zeros kept
        Xd = da.from_array(S.tocsr(), chunks=(rows, (case.n_features,)), asarray=False)
        return S, Xd
    A = dense_input(case)
    rows = row_chunks(case, case.n_samples)
    Xd = da.from_array(A, chunks=(rows, column_chunks(case)))
    if case.container == "unknown_mask":
        if case.n_samples == 1:
            # dask 2026.8 bug: a 2-D array of ONE row with a zero-row chunk, indexed by a dask
            # boolean mask, repeats that row once per block (chunks (0, 1): two rows)
            rows = (1,)
            Xd = da.from_array(A, chunks=(rows, column_chunks(case)))
        keep = np.random.default_rng(case.keep_seed).random(case.n_samples) < 0.7
        keep[case.keep_seed % case.n_samples] = True  # at least one row
        Xd = Xd[da.from_array(keep, chunks=(rows,))]
        A = A[keep]
    elif case.container == "dataframe":
        Xd = Xd.to_dask_dataframe().to_dask_array()  # unknown (NaN) row chunk sizes, read-only blocks
    return A, Xd


def as_float(A):
    """The input as scikit-learn converts it to float64, or the problem that stops the conversion."""
    if sp.issparse(A):
        if A.dtype.kind == "c":
            return None, "complex"
        return A.astype(np.float64).toarray(), None
    if A.dtype.kind == "c":
        return None, "complex"
    try:
        return np.asarray(A, dtype=np.float64), None
    except ValueError as exc:
        if "could not convert string to float" in str(exc):
            return None, "string"
        raise


def problems(estimator, A):
    """What is wrong with input ``A`` for ``estimator``: names in :data:`PATTERNS`."""
    found = set()
    if sp.issparse(A) and not accepts_sparse(estimator):
        found.add("sparse")
    X, stop = as_float(A)
    if stop:
        return found | {stop}
    if np.isnan(X).any():
        found.add("nan")
    if np.isinf(X).any():
        found.add("inf")
    finite = X[np.isfinite(X)]
    if needs_non_negative(estimator) and (finite < 0).any():
        found.add("negative")
    skewedness = getattr(estimator, "skewedness", None)
    if skewedness is not None and (finite <= -skewedness).any():
        found.add("skew")
    return found


def accepts_sparse(estimator):
    if type(estimator).__name__ == "Nystroem" and estimator.kernel in ("chi2", "additive_chi2"):
        return False  # scikit-learn's chi2 kernels are dense only
    return bool(estimator.__sklearn_tags__().input_tags.sparse)


def needs_non_negative(estimator):
    name = type(estimator).__name__
    return name == "AdditiveChi2Sampler" or (name == "Nystroem" and estimator.kernel in ("chi2", "additive_chi2"))


def explains(exc, names):
    """The problem in ``names`` that ``exc`` reports (right class, message naming it), or None."""
    for name in sorted(names):
        cls, pattern = PATTERNS[name]
        if isinstance(exc, cls) and re.search(pattern, str(exc)):
            return name
    return None
