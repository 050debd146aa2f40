"""Storage: Zarr in and out (resumable, honest).

This package is the only code in dkapprox that touches Zarr:

- :func:`open_array`: a Zarr array (path, fsspec URL, group + component, or
  an open node) as a dask array aligned to its chunks, hostile metadata refused;
- :func:`write_features`: a dask array to a Zarr output store, one chunk per
  block, planned, resumable after any kill, marked complete last;
- :func:`open_features`: read such a store back (complete ones only, by default);
- :func:`describe`: a JSON description of a store (:func:`dkapprox.models.describe` for a model);
- :func:`verify`: check a finished store against its recorded checksums and its input.

It sits below the estimators (they open Zarr input through it), so it imports
none of them: model files, which rebuild estimators, are :mod:`dkapprox.models`.
"""

from ._common import canonical_json, package_version, utc_now
from ._icechunk import is_icechunk
from ._location import OBJECT_STORES, locate, missing_bucket, redact
from ._parquet import PARQUET_SUFFIXES, is_parquet, open_parquet
from ._parquet_output import write_parquet_features
from ._probe import require_shared
from ._verify import VerifyReport, verify
from ._zarr_store import open_array, open_features, open_target
from .describe import describe
from .writer import PendingWrite, WriteReport, write_features

__all__ = ["PendingWrite", "VerifyReport", "WriteReport", "describe", "open_array", "open_features", "verify",
           "write_features"]
