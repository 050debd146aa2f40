"""xarray in, xarray out: a 2-D DataArray (samples first) becomes a DataArray of features.

xarray stays optional: nothing here imports it unless the input already is a
DataArray (then xarray is in ``sys.modules``). The data inside (dask or NumPy)
goes through the estimator unchanged (:func:`dkapprox.inputs._lazy.as_input` takes it
out and keeps the DataArray for :func:`wrap_like`), so a dask-backed DataArray
(as ``xarray.open_zarr`` gives) stays lazy.
"""

from __future__ import annotations

import sys

FEATURE_DIM = "feature"


def is_dataarray(X) -> bool:
    xr = sys.modules.get("xarray")
    return xr is not None and isinstance(X, xr.DataArray)


def wrap_like(out, X, estimator):
    """A DataArray of ``out`` with ``X``'s sample dimension and coordinates and a feature dimension.

    The feature dimension is named ``"feature"`` (``"feature_out"`` if the
    samples are called that) with ``get_feature_names_out()`` as coordinates.
    Coordinates that run along the samples (or are scalars) are kept;
    those along the input's feature dimension are dropped with it.
    """
    import xarray as xr
    from sklearn.exceptions import NotFittedError

    if hasattr(out, "columns"):  # set_output asked for a data frame
        return out
    sample_dim = X.dims[0]
    feature_dim = FEATURE_DIM if sample_dim != FEATURE_DIM else f"{FEATURE_DIM}_out"
    coords = {name: coord for name, coord in X.coords.items() if set(coord.dims) <= {sample_dim}}
    try:
        coords[feature_dim] = estimator.get_feature_names_out().astype(str)
    except NotFittedError:  # stateless transformers (AdditiveChi2Sampler) transform unfitted
        coords[feature_dim] = [str(i) for i in range(out.shape[1])]
    return xr.DataArray(out, dims=(sample_dim, feature_dim), coords=coords, name="features")
