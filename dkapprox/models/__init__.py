"""Model files: a fitted estimator saved and loaded without pickle.

This package sits above the estimators (it rebuilds only the classes of the
estimator registry) and writes through :mod:`dkapprox.io`'s locations, so a
model can live in a local directory or at an fsspec URL:

- :func:`save`, :func:`load`: a directory of ``.npy`` arrays plus one
  checksummed JSON document (``dkapprox.save`` and ``dkapprox.load`` are these);
- :func:`fingerprint`: a stable hash of an estimator's class, parameters and fitted state;
- :func:`describe`: a JSON description of a model directory, read from its
  JSON document alone (:func:`dkapprox.io.describe` describes Zarr stores).
"""

from .model_files import check_saveable, describe, fingerprint, is_model_dir, load, save

__all__ = ["describe", "fingerprint", "load", "save"]
