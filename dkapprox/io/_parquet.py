"""Parquet datasets as a job's input: one file listing is the identity, the footers the metadata, files the blocks.

A Parquet dataset is a file, or a folder (a key prefix on an object store) of
files. Its data files are, as pyarrow and dask find them, every file below it
whose path has no part starting with ``_`` or ``.`` (``_SUCCESS``,
``_metadata``, ``.crc`` files are left out), taken **in path order** (sorted):
their rows, concatenated in that order, are the input's rows. Hive partition
folders (``year=2024/``) are read as folders only: their keys are no columns.

Everything here before :meth:`ParquetInput.frame`'s blocks are computed reads
metadata only: one recursive listing (size, and mtime in ns or ETag: the
identity, as :mod:`dkapprox.io._identity` has it for Zarr chunks) and each
file's footer (row count and schema; read in threads, cached by the listing's
entry, so a re-identification reads only the footers of files that changed).
The checks then run before any compute: every column named must be in the
schema, numeric (integer, float or boolean), and of the same type in every
file. Nulls are found in the footers' row-group statistics before anything is read or written
(:func:`_check_no_nulls`); where a writer left no statistics, and for NaN (a value, not a null),
when a block is read.

Blocks are files, not row groups: a file is what a writer rewrites and what the
listing stamps, so a changed file names exactly the rows it feeds, and its row
count is in its footer; row groups would need every footer's row-group table
and gain nothing for a rewrite. A file is read whole by the task that needs it.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputDataError, InputMissingError, TemporaryFailure
from ._identity import InputIdentity, _local_listing, stamp_of
from ._location import Location, locate, missing_bucket

PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")
FORMAT = "parquet"
_ZARR_METADATA = frozenset({"zarr.json", ".zarray", ".zgroup"})

__all__ = ["ParquetInput", "is_parquet", "open_parquet", "parquet_identity"]


def is_parquet(source, storage_options=None) -> bool:
    """True if ``source`` names a Parquet dataset rather than a Zarr store.

    Its name ends in .parquet, .parq or .pq; or it ends in neither that nor .zarr and is a folder
    holding no Zarr metadata but Parquet files (one listing of the folder; nothing is read).
    """
    if isinstance(source, str) and source.startswith("icechunk+"):  # an Icechunk repository holds Zarr arrays
        return False
    name = str(source).rstrip("/").rsplit("/", 1)[-1].lower()
    if name.endswith(PARQUET_SUFFIXES):
        return True
    if name.endswith(".zarr"):
        return False
    try:
        loc = locate(source, storage_options)
        fs, path = loc.filesystem()
        names = {p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)} if fs.isdir(path) else set()
    except Exception:  # noqa: BLE001 - undecided: the Zarr path names what is wrong
        return False
    return not (names & _ZARR_METADATA) and any(n.lower().endswith(PARQUET_SUFFIXES) for n in names)


@dataclass(frozen=True)
class _Footer:
    rows: int
    schema: object = field(repr=False)  # pyarrow.Schema
    nulls: dict = field(default_factory=dict, repr=False)  # column: nulls its row groups' statistics count


@dataclass(eq=False)
class ParquetInput:
    """A Parquet dataset opened for ``columns``: its listing, footers and identity, as found when opened.

    ``rows`` are the files' row counts, in ``keys`` order; ``dtype`` the blocks' NumPy dtype.
    """

    loc: Location
    columns: tuple
    keys: tuple
    sizes: tuple
    stamps: tuple
    stamp: str
    rows: tuple
    types: tuple  # the columns' Arrow types, as text
    dtype: np.dtype
    _footers: dict = field(default_factory=dict, repr=False)

    @property
    def column_names(self) -> tuple:
        """Every column of the dataset (its first file's schema), not only the ones opened."""
        return tuple(self._footers[(self.keys[0], self.sizes[0], self.stamps[0])].schema.names)

    @property
    def shape(self) -> tuple:
        return (int(sum(self.rows)), len(self.columns))

    def identity(self) -> InputIdentity:
        metadata = {"format": FORMAT, "shape": list(self.shape), "columns": list(self.columns),
                    "types": list(self.types), "dtype": self.dtype.str}
        return InputIdentity(str(self.loc), metadata, self.stamp, self.keys, self.sizes, self.stamps, self.rows)

    def identify(self, skip=None) -> InputIdentity:
        """The dataset's identity now (a new listing; only new or changed files' footers are read).

        A dataset whose schema no longer suits the columns gives an identity whose types say so
        (a refresh refuses it), never an error: the store's check names the change.
        """
        now = _scan(self.loc, self.columns, cache=self._footers, strict=False)
        return now.identity()

    def frame(self):
        """The columns as a lazy dask DataFrame: one partition per file, in path order; nothing is read.

        Each partition's task reads its file's columns with pyarrow and checks them: a null (or
        NaN) raises :class:`~dkapprox.errors.InputDataError` naming the file and column, and so
        does a file whose row count is no longer its footer's.

        Built with ``dd.from_map``, not ``dd.read_parquet``: read with a subset of its columns,
        ``read_parquet``'s optimizer joins files into fewer partitions (3 files of 100, 100 and 50
        rows read as 2 partitions with 2 of their 4 columns, dask 2026.8), so a partition would
        no longer be a file, nor its row count the footer's.
        """
        import dask.dataframe as dd

        schema = self._footers[(self.keys[0], self.sizes[0], self.stamps[0])].schema
        meta = schema.empty_table().select(list(self.columns)).to_pandas()
        reader = _FileReader(self.loc, self.columns)
        return dd.from_map(reader, list(zip(self.keys, self.rows)), meta=meta, enforce_metadata=False,
                           label="read-parquet-file")


@dataclass(frozen=True)
class _FileReader:
    """Reads one file's columns as a pandas DataFrame, refusing nulls and a changed row count."""

    loc: Location
    columns: tuple

    def __call__(self, entry):
        import pyarrow.parquet as pq

        key, rows = entry
        where = f"{self.loc}/{key}" if key else str(self.loc)
        fs, path = self.loc.filesystem()
        with fs.open(f"{path.rstrip('/')}/{key}" if key else path, "rb") as f:
            part = pq.read_table(f, columns=list(self.columns)).to_pandas()
        if len(part) != rows:
            raise InputDataError(f"{where}: holds {len(part):,} rows where its footer said {rows:,} when the job "
                                 "began: the file was rewritten while the job ran; rerun the job")
        missing = part.isna()
        counts = missing.sum()
        if int(counts.sum()):
            column = next(c for c in part.columns if int(counts[c]))
            first = int(np.flatnonzero(missing[column].to_numpy())[0])
            raise InputDataError(f"{where}: column {column!r} holds {int(counts[column]):,} null or NaN values "
                                 f"(the first in the file's row {first:,}); fill or drop them, or leave the "
                                 "column out")
        return part


def open_parquet(source, columns=None, *, storage_options=None) -> ParquetInput:
    """Open a Parquet dataset (a local path or fsspec URL) for ``columns`` (default: every column).

    Reads one listing and each file's footer, nothing else; every check that the schema allows
    runs here.

    Raises
    ------
    InputMissingError
        Nothing at ``source``, or no data file in it.
    InputDataError
        A column that is not in the dataset, not numeric, or of another type (or missing) in
        some file than in the first one; or a footer that cannot be read.
    """
    loc = locate(source, storage_options)
    return _scan(loc, None if columns is None else tuple(columns), cache={}, strict=True)


def parquet_identity(path, metadata, storage_options=None) -> InputIdentity:
    """The identity now of the dataset a store recorded (``metadata``: its recorded metadata)."""
    return _scan(locate(path, storage_options), tuple(metadata["columns"]), cache={}, strict=False).identity()


# -- listing and footers -------------------------------------------------------------------------


def _scan(loc, columns, *, cache, strict):
    entries, stamp = _listing(loc)
    footers = _footers(loc, entries, cache)
    first = footers[0].schema
    names = tuple(first.names)
    if columns is None:
        columns = names
    absent = [c for c in columns if c not in names]
    if absent and strict:
        error = InputDataError(f"{loc}: no column {', '.join(map(repr, absent))} in the dataset (its columns: "
                               f"{', '.join(names)})")
        error.absent_columns = absent  # the command line's usage error (exit 2): --columns names them
        raise error
    if not columns:
        raise InputDataError(f"{loc}: no columns to read")
    types = [str(first.field(c).type) if c in names else "absent" for c in columns]
    if strict:
        _check_numeric(loc, entries[0][0], first, columns)
        for (key, _, _), footer in zip(entries[1:], footers[1:]):
            _check_same(loc, key, footer.schema, entries[0][0], first, columns)
        _check_no_nulls(loc, entries, footers, columns)
    else:  # an identity: a file that differs in the columns' types shows as a changed type
        for footer in footers[1:]:
            for i, c in enumerate(columns):
                other = str(footer.schema.field(c).type) if c in footer.schema.names else "absent"
                if other != types[i]:
                    types[i] = f"{types[i]} | {other}"
    dtype = _dtype(first, columns) if all(c in names for c in columns) else np.dtype("f8")
    keys, sizes, stamps = (tuple(col) for col in zip(*entries))
    return ParquetInput(loc, tuple(columns), keys, sizes, stamps, stamp, tuple(f.rows for f in footers),
                        tuple(types), dtype, cache)


def _listing(loc):
    """([(key below the dataset, size, stamp)] of its data files, sorted; the stamp kind)."""
    try:
        if loc.local:
            if not os.path.exists(loc.path):
                raise InputMissingError(f"{loc}: no such file or directory")
            if os.path.isfile(loc.path):
                st = os.stat(loc.path)
                return [("", int(st.st_size), int(st.st_mtime_ns))], "mtime_ns"
            entries, stamp = _local_listing(loc.path), "mtime_ns"
        else:
            fs, path = loc.filesystem()
            fs.invalidate_cache(path)
            if fs.isfile(path):
                info = fs.info(path)
                return [("", int(info.get("size") or 0), stamp_of(info))], "etag"
            base = path.strip("/") + "/"
            entries = []
            for found, info in fs.find(path, detail=True).items():
                found = found.lstrip("/")
                key = found[len(base):] if found.startswith(base) else ""
                if key and info.get("type") != "directory":
                    entries.append((key, int(info.get("size") or 0), stamp_of(info)))
            stamp = "etag"
            if not entries and not fs.exists(path):
                bucket = missing_bucket(loc)
                raise InputMissingError(f"{loc}: " + (f"the bucket {bucket!r} does not exist" if bucket
                                                      else "no such dataset"))
    except (InputMissingError, InputDataError):
        raise
    except PermissionError as exc:
        raise InputMissingError(f"{loc}: permission denied ({exc})") from exc
    except (ConnectionError, TimeoutError) as exc:
        raise TemporaryFailure(f"{loc}: listing the dataset failed ({exc}); try again") from exc
    entries = sorted(e for e in entries if not any(part[:1] in ("_", ".") for part in e[0].split("/")))
    if not entries:
        raise InputMissingError(f"{loc}: no Parquet data files in it")
    return entries, stamp


def _footers(loc, entries, cache):
    """Each entry's footer (row count, schema), read in threads; ``cache`` keeps them by entry."""
    todo = [e for e in entries if e not in cache]
    if todo:
        with ThreadPoolExecutor(min(16, len(todo))) as pool:
            for entry, footer in zip(todo, pool.map(lambda e: _read_footer(loc, e[0]), todo)):
                cache[entry] = footer
    return [cache[e] for e in entries]


def _read_footer(loc, key):
    import pyarrow.parquet as pq

    where = f"{loc}/{key}" if key else str(loc)
    fs, path = loc.filesystem()
    path = f"{path.rstrip('/')}/{key}" if key else path
    try:
        with fs.open(path, "rb") as f:
            meta = pq.ParquetFile(f).metadata
            return _Footer(int(meta.num_rows), meta.schema.to_arrow_schema(), _null_counts(meta))
    except FileNotFoundError as exc:
        raise InputMissingError(f"{where}: gone while the dataset was read ({exc})") from exc
    except (ConnectionError, TimeoutError) as exc:
        raise TemporaryFailure(f"{where}: reading its footer failed ({exc}); try again") from exc
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise InputDataError(f"{where}: not a readable Parquet file ({' '.join(str(exc).split())})") from exc


def _null_counts(meta) -> dict:
    """Nulls per top-level column, from the row groups' statistics; a column some row group has no
    count for is left out (its nulls are found when its file is read)."""
    counts, unknown = {}, set()
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for i in range(group.num_columns):
            chunk = group.column(i)
            name = chunk.path_in_schema
            stats = chunk.statistics
            if stats is None or not stats.has_null_count:
                unknown.add(name)
            else:
                counts[name] = counts.get(name, 0) + int(stats.null_count)
    return {name: n for name, n in counts.items() if name not in unknown}


def _check_no_nulls(loc, entries, footers, columns):
    """Nulls in a feature column, found in the footers before anything is read or written (exit 65)."""
    for (key, _, _), footer in zip(entries, footers):
        for column in columns:
            n = footer.nulls.get(column, 0)
            if n:
                where = f"{loc}/{key}" if key else str(loc)
                raise InputDataError(f"{where}: column {column!r} holds {n:,} null values (its footer's "
                                     "statistics); features must be numbers: drop or fill them first")


def _numeric(arrow_type) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_boolean(arrow_type)


def _check_numeric(loc, key, schema, columns):
    bad = [(c, schema.field(c).type) for c in columns if not _numeric(schema.field(c).type)]
    if bad:
        shown = ", ".join(f"{c!r} ({t})" for c, t in bad)
        what = f"column {shown} is" if len(bad) == 1 else f"columns {shown} are"
        raise InputDataError(f"{loc}: {what} not numeric; features are numbers only (integer, float, "
                             "boolean): pass columns= naming the numeric ones")


def _check_same(loc, key, schema, first_key, first, columns):
    for c in columns:
        if c not in schema.names:
            raise InputDataError(f"{loc}: the schema changed between files: {key} has no column {c!r}, "
                                 f"which {first_key} has")
        if schema.field(c).type != first.field(c).type:
            raise InputDataError(f"{loc}: the schema changed between files: column {c!r} is "
                                 f"{schema.field(c).type} in {key} but {first.field(c).type} in {first_key}")


def _dtype(schema, columns) -> np.dtype:
    """The blocks' dtype: NumPy's common type of the columns (float64 once an integer or boolean column
    is mixed with floats; as pandas reads them)."""
    return np.result_type(*(np.dtype(schema.field(c).type.to_pandas_dtype()) for c in columns))
