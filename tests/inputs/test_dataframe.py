"""A dask DataFrame in: read lazily, one block per partition (ARCHITECTURE.md invariants 2 and 3).

Fit reads the partitions no more often than a dask array of the same rows is read (a fit that needs
no statistic reads nothing; Nystroem counts the unknown partition lengths in one more pass), and
``transform`` computes nothing: a lazy dask array, or with ``set_output(transform="pandas")`` a lazy
dask DataFrame with ``get_feature_names_out()`` as columns and the input's index and divisions.
Column names are ``feature_names_in_``, checked with scikit-learn's errors; a non-numeric column is
refused from the metadata. pandas in stays scikit-learn's path (tests/test_contract.py and the
parity tests).
"""

import subprocess
import sys
import threading

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import xarray as xr
from _arrays import computed_blocks, computed_whole
from _estimators import CONTRACT, CONTRACT_ESTIMATORS, ident
from _rounding import assert_chunking_promise
from sklearn.base import clone
from sklearn.kernel_approximation import RBFSampler as SkRBFSampler
from sklearn.linear_model import SGDRegressor
from sklearn.pipeline import make_pipeline
from sklearn.utils import check_array

import dkapprox
from dkapprox.linear_model import Incremental, Ridge, RidgeClassifier

# comparing with NumPy (no column names) after a fit on named columns: scikit-learn's warning, expected
pytestmark = pytest.mark.filterwarnings("ignore:X does not have valid feature names:UserWarning")

ROWS, COLS, PARTS = 125, 6, 4
NAMES = [f"x{j}" for j in range(COLS)]


def table(dtype=np.float64, rows=ROWS, seed=0):
    """Positive values (the chi2 samplers take them too) under an index that is not 0..n-1."""
    values = np.random.default_rng(seed).random((rows, COLS)).astype(dtype) + 0.01
    return pd.DataFrame(values, columns=NAMES, index=pd.Index(np.arange(rows) * 3 + 1000, name="row"))


def dense(a):
    return a.toarray() if sp.issparse(a) else np.asarray(a)


def partition_sizes(ddf):
    return [int(n) for n in ddf.map_partitions(len).compute()]


def numpy_by_blocks(est, X, sizes):
    """``est.transform`` of NumPy ``X``, one block at a time, each block a new array.

    What the transform of a dask DataFrame must equal bit for bit (promise 1 of tests/_rounding.py).
    A partition's block is a new array, so the NumPy block is one too: a view into ``X`` starts
    at another alignment, where a vectorized kernel may round otherwise (Nystroem's rbf does).
    """
    return by_blocks(est.transform, X, sizes)


def by_blocks(method, X, sizes):
    edges = np.cumsum([0, *sizes])
    parts = [method(X[a:b].copy()) for a, b in zip(edges[:-1], edges[1:])]
    return sp.vstack(parts, format="csr") if sp.issparse(parts[0]) else np.concatenate(parts)


def refuse(*args, **kwargs):
    raise AssertionError("something was computed")


def nothing_computed():
    """Any compute in this block fails: dask's scheduler is a function that refuses."""
    return dask.config.set(scheduler=refuse)



class Counter:
    """Counts the partitions (or blocks) computed through it."""

    def __init__(self):
        self.count = 0
        self.lock = threading.Lock()

    def __call__(self, part):
        with self.lock:
            self.count += 1
        return part

    def __dask_tokenize__(self):  # dask-expr names a map_partitions by its function's token
        return ("counter", id(self))


def counted(df, counter, npartitions=PARTS):
    """``df`` in partitions that ``counter`` counts as they are read, then filtered (every row kept).

    dask fuses the filter with the read: an index taken from the frame apart from its values
    (``dd.from_dask_array(Z, index=ddf.index)``) would read every partition twice.
    """
    ddf = dd.from_pandas(df, npartitions=npartitions).map_partitions(counter, meta=df.iloc[:0])
    return ddf[ddf[df.columns[0]] > 0]


@pytest.fixture(params=CONTRACT_ESTIMATORS, ids=ident)
def estimator(request):
    return clone(request.param)


def test_fit_reads_as_a_dask_array_does_and_transform_computes_nothing(estimator):
    df = table()
    counter = Counter()
    ddf = counted(df, counter)
    est = clone(estimator).fit(ddf)
    fit_reads = counter.count
    # a dask array of the same blocks: a fit that reads nothing there reads nothing here
    array_counter = Counter()
    sizes = partition_sizes(dd.from_pandas(df, npartitions=PARTS))
    X = da.from_array(df.to_numpy(), chunks=(tuple(sizes), -1))
    clone(estimator).fit(X.map_blocks(array_counter, dtype=X.dtype, meta=np.empty((0, 0))))
    if array_counter.count == 0:
        assert fit_reads == 0
    passes = max(1, getattr(est, "landmark_passes_", 1))  # Nystroem: + 1 to count the unknown lengths
    assert fit_reads <= passes * PARTS, (fit_reads, passes)

    sparse_out = sp.issparse(est.transform(df.iloc[:2]))
    with nothing_computed():
        lazy = est.transform(ddf)
        frame = None if sparse_out else est.set_output(transform="pandas").transform(ddf)
    assert counter.count == fit_reads
    computed_whole(lazy)
    assert counter.count == fit_reads + PARTS  # each partition read once
    if frame is not None:
        frame.compute()  # values and index come from the same read of each partition
        assert counter.count == fit_reads + 2 * PARTS


def test_transform_gives_numpy_bits_block_by_block(estimator, dtype):
    df = table(dtype)
    X = df.to_numpy()
    ddf = dd.from_pandas(df, npartitions=PARTS)
    est = clone(estimator).fit(ddf)
    np.testing.assert_array_equal(est.feature_names_in_, np.asarray(NAMES, dtype=object))
    assert est.n_features_in_ == COLS
    lazy = est.transform(ddf)
    assert isinstance(lazy, da.Array) and lazy.numblocks[0] == PARTS
    assert np.isnan(lazy.shape[0]) and all(np.isnan(c) for c in lazy.chunks[0])
    assert lazy.dtype == dtype  # float32 stays float32
    got = computed_blocks(lazy)
    # the same rows in the same blocks give the same bits as NumPy; one block, within the rounding bound
    np.testing.assert_array_equal(dense(got), dense(numpy_by_blocks(est, X, partition_sizes(ddf))))
    assert_chunking_promise(est, X, got)


def test_fit_on_a_dask_dataframe_equals_fit_on_numpy(estimator):
    df = table()
    on_numpy = clone(estimator).fit(df.to_numpy())
    on_frame = clone(estimator).fit(dd.from_pandas(df, npartitions=PARTS))
    for name, value in vars(on_numpy).items():
        if (name.endswith("_") or name == "_gamma") and value is not None and name != "landmark_passes_":
            other = getattr(on_frame, name)
            if sp.issparse(value):
                value, other = value.toarray(), other.toarray()
            np.testing.assert_allclose(np.asarray(other), np.asarray(value), rtol=1e-9, atol=1e-12, err_msg=name)
    if hasattr(on_numpy, "landmark_passes_"):  # the partition lengths are unknown: counted in one more pass
        assert on_frame.landmark_passes_ == on_numpy.landmark_passes_ + 1


def test_pandas_output_is_a_lazy_dask_dataframe_with_the_index_and_divisions(estimator):
    df = table()
    X = df.to_numpy()
    ddf = dd.from_pandas(df, npartitions=PARTS)
    est = clone(estimator).fit(ddf).set_output(transform="pandas")
    if sp.issparse(clone(estimator).fit(X).transform(X)):
        for data in (df, ddf):  # as scikit-learn: pandas output refuses sparse data (here before any compute)
            with nothing_computed(), pytest.raises(ValueError, match="sparse"):
                est.transform(data)
        return
    with nothing_computed():
        out = est.transform(ddf)
    assert isinstance(out, dd.DataFrame)
    assert out.npartitions == PARTS and out.divisions == ddf.divisions and out.known_divisions
    assert list(out.columns) == list(est.get_feature_names_out())
    expected = est.transform(df)  # pandas in: scikit-learn's frame
    got = out.compute()
    pd.testing.assert_index_equal(got.index, df.index)
    assert list(got.columns) == list(expected.columns)
    assert list(got.dtypes) == list(out.dtypes) == list(expected.dtypes)  # the meta is what compute gives
    assert got.index.dtype == out.index.dtype and got.index.name == out.index.name == "row"
    np.testing.assert_array_equal(got.to_numpy(), numpy_by_blocks(est, X, partition_sizes(ddf)))
    assert_chunking_promise(est, X, got.to_numpy(), expected.to_numpy())


@pytest.mark.parametrize(("cls", "params"), [(dkapprox.RBFSampler, CONTRACT["RBFSampler"][1]),
                                           *((dkapprox.Nystroem, p) for p in CONTRACT["Nystroem"])],
                         ids=lambda p: p.__name__ if isinstance(p, type) else ident(p))
def test_filtered_partitions_of_unknown_lengths_and_divisions(cls, params):
    """Rows dropped in every partition, divisions cleared: features still match NumPy's rows."""
    df = table()
    keep = (df["x0"] > 0.3).to_numpy()
    ddf = dd.from_pandas(df, npartitions=PARTS)
    ddf = ddf[ddf["x0"] > 0.3].clear_divisions()
    X = df.to_numpy()[keep]
    on_numpy = cls(**params).fit(X)
    with dask.config.set(scheduler="sync"):
        est = cls(**params).fit(ddf)
    if cls is dkapprox.Nystroem:  # landmarks by global row index: the same rows, one pass more to count them
        np.testing.assert_array_equal(est.component_indices_, on_numpy.component_indices_)
        assert est.landmark_passes_ == on_numpy.landmark_passes_ + 1
    else:
        np.testing.assert_allclose(est._gamma, on_numpy._gamma, rtol=1e-12)
    sizes = partition_sizes(ddf)
    got = computed_blocks(est.transform(ddf))
    np.testing.assert_array_equal(got, numpy_by_blocks(est, X, sizes))
    frame = est.set_output(transform="pandas").transform(ddf)
    assert frame.divisions == (None,) * (PARTS + 1)
    computed = frame.compute()
    pd.testing.assert_index_equal(computed.index, df.index[keep])
    np.testing.assert_array_equal(computed.to_numpy(), got)


# -- bad input, refused from the metadata ------------------------------------------------------


@pytest.mark.parametrize(("column", "values"), [
    ("city", pd.array(["a", "b"] * (ROWS // 2) + ["a"], dtype="str")),
    ("kind", pd.Categorical([1.0, 2.0] * (ROWS // 2) + [1.0])),  # numbers, but categories: encode them first
    ("when", pd.date_range("2026-01-01", periods=ROWS, freq="h").array),
    ("lag", pd.to_timedelta(np.arange(ROWS), unit="s").array),
], ids=["str", "category", "datetime", "timedelta"])
def test_a_non_numeric_column_is_refused_by_name(column, values):
    bad, good = table(), table()
    bad[column], good[column] = values, 1.0
    est = dkapprox.RBFSampler(gamma="scale", n_components=4, random_state=0)
    with nothing_computed(), pytest.raises(ValueError, match=f"could not convert column '{column}' "):
        est.fit(dd.from_pandas(bad, npartitions=PARTS))
    est.fit(dd.from_pandas(good, npartitions=PARTS))
    with nothing_computed(), pytest.raises(ValueError, match=f"could not convert column '{column}' "):
        est.transform(dd.from_pandas(bad, npartitions=PARTS))


def test_object_and_several_bad_columns():
    df = table()
    df["s"] = pd.Series([1.5] * ROWS, dtype=object).to_numpy()  # numbers, but object: unknown until read
    df["t"] = "x"
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = dd.from_pandas(df, npartitions=PARTS)
    with nothing_computed(), pytest.raises(ValueError, match=r"could not convert columns 's' \(object\), 't' "):
        dkapprox.Nystroem(n_components=5).fit(ddf)


def test_feature_names_are_checked_with_sklearns_errors():
    df = table()
    ddf = dd.from_pandas(df, npartitions=PARTS)
    est = dkapprox.RBFSampler(n_components=4, random_state=0).fit(ddf)
    sk = SkRBFSampler(n_components=4, random_state=0).fit(df)
    for other in (df.rename(columns={"x2": "z"}), df[NAMES[::-1]]):
        with pytest.raises(ValueError) as expected:
            sk.transform(other)
        with nothing_computed(), pytest.raises(ValueError) as got:
            est.transform(dd.from_pandas(other, npartitions=PARTS))
        assert str(got.value) == str(expected.value)
        assert "The feature names should match those that were passed during fit" in str(got.value)
    # fitted without names, then given names: scikit-learn's warning
    unnamed = dkapprox.RBFSampler(n_components=4, random_state=0).fit(df.to_numpy())
    with pytest.warns(UserWarning, match="X has feature names, but RBFSampler was fitted without feature names"):
        unnamed.transform(ddf)
    # integer column names are no feature names (as scikit-learn), but the count is checked
    numbered = dd.from_pandas(pd.DataFrame(df.to_numpy()[:, :3]), npartitions=2)
    with nothing_computed(), pytest.raises(ValueError, match="X has 3 features, but RBFSampler is expecting 6"):
        unnamed.transform(numbered)
    fitted = dkapprox.RBFSampler(n_components=4, random_state=0).fit(numbered)
    assert not hasattr(fitted, "feature_names_in_") and fitted.n_features_in_ == 3
    mixed = dd.from_pandas(df.rename(columns={"x0": 0}), npartitions=PARTS)
    with pytest.raises(TypeError, match="Feature names are only supported if all input features have string names"):
        dkapprox.RBFSampler().fit(mixed)


def test_other_bad_frames_are_refused_before_compute():
    ddf = dd.from_pandas(table(), npartitions=PARTS)
    est = dkapprox.RBFSampler(n_components=4, random_state=0)
    with nothing_computed():
        with pytest.raises(ValueError, match="Expected 2D array, got 1D array"):
            est.fit(ddf["x0"])
        with pytest.raises(ValueError, match="Complex data not supported"):
            est.fit(ddf.assign(x0=ddf["x0"].astype(complex)))
        with pytest.raises(ValueError, match="Found array with 0 feature"):
            est.fit(ddf[[]])


def test_missing_values_fail_at_compute_with_sklearns_message():
    df = table()
    df["n"] = pd.array([1, None] + [2] * (ROWS - 2), dtype="Int64")  # pandas' nullable integers: NA is NaN
    ddf = dd.from_pandas(df, npartitions=PARTS)
    est = dkapprox.RBFSampler(n_components=4, random_state=0)
    with nothing_computed():
        lazy = est.fit(ddf).transform(ddf)
    with pytest.raises(ValueError, match="Input X contains NaN"):
        computed_whole(lazy)


@pytest.mark.parametrize("column", [
    np.float32,
    np.int8,
    np.int64,
    np.bool_,
    "Int64",
    "float32[pyarrow]",
], ids=["float32", "float32+int8", "float32+int64", "float32+bool", "float32+Int64", "float32+pyarrow"])
def test_values_take_the_dtype_sklearn_picks_for_the_frame(column):
    """float32 columns with one column of another dtype: the values' dtype is scikit-learn's."""
    df = table(np.float32)
    df["x0"] = pd.array(np.arange(ROWS) % 3, dtype=column)
    ddf = dd.from_pandas(df, npartitions=PARTS)
    est = dkapprox.RBFSampler(n_components=8, random_state=0).fit(ddf)
    expected = est.transform(df)  # scikit-learn's check_array chooses the dtype of a pandas frame
    lazy = est.transform(ddf)
    assert lazy.dtype == expected.dtype
    X = check_array(df, dtype=[np.float64, np.float32])
    assert_chunking_promise(est, X, computed_blocks(lazy), expected)


# -- learners --------------------------------------------------------------------------------


def test_learners_take_a_dask_dataframe_and_a_dask_series():
    df = table()
    df["y"] = df["x0"] * 2 - df["x1"]
    df["label"] = np.where(df["x2"] > 0.5, "high", "low")
    ddf = dd.from_pandas(df, npartitions=PARTS)
    X, y, labels = ddf[NAMES], ddf["y"], ddf["label"]
    for learner, target, numpy_target in ((Ridge(alpha=0.1), y, df["y"]), (RidgeClassifier(), labels, df["label"])):
        on_frame = clone(learner).fit(X, target)
        on_pandas = clone(learner).fit(df[NAMES], numpy_target)
        np.testing.assert_allclose(on_frame.coef_, on_pandas.coef_, rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(on_frame.feature_names_in_, np.asarray(NAMES, dtype=object))
        with nothing_computed():
            predicted = on_frame.predict(X)
        assert isinstance(predicted, da.Array) and predicted.numblocks == (PARTS,)
        sizes = partition_sizes(X)
        expected = by_blocks(on_frame.predict, df[NAMES].to_numpy(), sizes)
        np.testing.assert_array_equal(computed_whole(predicted), expected)
    pipe = make_pipeline(dkapprox.RBFSampler(n_components=20, random_state=0), Ridge()).fit(X, y)
    with nothing_computed():
        predicted = pipe.predict(X)
    np.testing.assert_array_equal(computed_whole(predicted), by_blocks(pipe.predict, df[NAMES].to_numpy(), sizes))
    incremental = Incremental(SGDRegressor(random_state=0), n_epochs=2).fit(X, y)
    assert isinstance(incremental.predict(X), da.Array)


# -- xarray and the optional import ----------------------------------------------------------------


def test_a_dask_backed_dataset_variable_stays_lazy():
    counter = Counter()
    values = da.from_array(table().to_numpy(), chunks=(40, -1)).map_blocks(counter, meta=np.empty((0, 0)))
    ds = xr.Dataset({"pixels": (("time", "band"), values)}, coords={"time": np.arange(ROWS)})
    est = dkapprox.RBFSampler(n_components=8, random_state=0)
    with nothing_computed():
        Z = est.fit(ds["pixels"]).transform(ds["pixels"])
        labelled = clone(est).set_output(transform="pandas").fit(ds["pixels"]).transform(ds["pixels"])
    assert counter.count == 0
    for out in (Z, labelled):
        assert isinstance(out, xr.DataArray) and isinstance(out.data, da.Array)
        assert out.dims == ("time", "feature")
    dkapprox.RBFSampler(gamma="scale", n_components=8).fit(ds["pixels"])
    assert counter.count == 4  # gamma='scale' reads every block once


def test_numpy_and_dask_array_users_never_import_dask_dataframe():
    code = ("import sys; sys.modules['dask.dataframe'] = None\n"
            "import numpy as np, dask.array as da\n"
            "import dkapprox\n"
            "X = da.ones((10, 3), chunks=5)\n"
            "est = dkapprox.RBFSampler(gamma='scale', n_components=4, random_state=0).fit(X)\n"
            "est.set_output(transform='pandas')\n"
            "print(type(est.transform(X)).__name__, type(est.transform(np.ones((2, 3)))).__name__)\n")
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Array", "DataFrame"]
