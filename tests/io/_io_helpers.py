"""Helpers of the storage tests (importable by name: pytest puts this folder on sys.path)."""

import zarr


def make_store(path, data, chunks, **kwargs):
    """A real Zarr array on disk holding ``data``; returns its path."""
    z = zarr.create_array(str(path), shape=data.shape, chunks=chunks, dtype=data.dtype, **kwargs)
    z[...] = data
    return str(path)
