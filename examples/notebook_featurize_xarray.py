# %% [markdown]
"""
Notebook: a large Zarr dataset, opened with xarray and featurized lazily
========================================================================

A notebook (jupytext percent format: JupyterLab with jupytext opens this file as a notebook;
``jupytext --to notebook`` makes an ``.ipynb``). It makes a Zarr store of sensor readings as large
as you like (``ROWS`` below: 4,000,000 rows by default, 256 MiB), opens it with
``xarray.open_zarr`` and turns it into Nystroem features without ever holding it in memory:
``fit`` reads the data a few documented times (k-means landmarks: 5 passes), ``transform`` is
lazy, and the features go back to Zarr block by block.

Every pass over the data shows its progress in Jupyter (a widget) or on a terminal (a bar);
``%env DKAPPROX_PROGRESS=0`` turns that off. The documentation runs it on 20,000 rows.
"""

# %%
import os
import tempfile

import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import xarray as xr

import dkapprox
from dkapprox import Nystroem
from dkapprox.io import open_features, write_features

# %% tags=["parameters"]
ROWS = int(os.environ.get("DKAPPROX_EXAMPLE_ROWS", 4_000_000))  # rows of the store (one a minute)
CHANNELS = 16  # sensor channels (columns)
DIRECTORY = tempfile.mkdtemp(prefix="dkapprox-notebook-")  # where the stores go

# %% [markdown]
# A Zarr store as large as you like
# ---------------------------------
# It stands in for your own: a ``readings`` variable (time x channel, float32), chunked along
# time, built lazily with dask and written chunk by chunk, so ``ROWS`` is bounded by the disk, not
# by memory. ``dkapprox.compute`` is ``dask.compute`` with the same progress display as the fits.

# %%
chunk = min(100_000, max(ROWS // 8, 1))  # rows per Zarr chunk, and per task
rng = da.random.default_rng(0)
day = da.arange(ROWS, chunks=chunk, dtype=np.float32)[:, None] * np.float32(2 * np.pi / 1440)  # a daily cycle
channels = np.arange(CHANNELS, dtype=np.float32)
readings = da.sin(day + channels * np.float32(2 * np.pi / CHANNELS)) + 0.3 * rng.standard_normal(
    (ROWS, CHANNELS), chunks=(chunk, CHANNELS), dtype=np.float32)
ds = xr.Dataset({"readings": (("time", "channel"), readings.astype(np.float32))},
                coords={"time": pd.date_range("2020-01-01", periods=ROWS, freq="min"), "channel": channels})
source = os.path.join(DIRECTORY, "sensors.zarr")
dkapprox.compute(ds.to_zarr(source, mode="w", consolidated=False, compute=False))
print(f"wrote {source}: {ROWS:,} x {CHANNELS} float32, {ROWS * CHANNELS * 4 / 2**20:,.0f} MiB")

# %% [markdown]
# Open it lazily
# --------------
# ``xr.open_zarr`` reads the metadata only: ``X`` is a DataArray backed by a dask array whose
# blocks are the Zarr chunks.

# %%
ds = xr.open_zarr(source, consolidated=False)
X = ds["readings"]
ds

# %% [markdown]
# Fit the feature map
# -------------------
# k-means landmarks adapt to the data: one pass gathers a sample for k-means++, then one pass per
# Lloyd step. The fitted estimator says what it holds: the bytes shipped to the workers (one graph
# key, whatever the number of blocks), its dtypes, and the landmark method with its passes.

# %%
nystroem = Nystroem(kernel="rbf", gamma=0.05, n_components=256, landmarks="kmeans", random_state=0).fit(X)
print(f"landmarks chosen in {nystroem.landmark_passes_} passes over the data")
nystroem

# %% [markdown]
# Features, lazily
# ----------------
# ``transform`` computes nothing: a DataArray with the ``time`` coordinate kept and a new
# ``feature`` dimension; its ``.data`` is a dask array, displayed as dask displays one.

# %%
Z = nystroem.transform(X)
print(f"features {Z.dims} {Z.shape} {Z.dtype}, {Z.data.numblocks[0]} blocks, nothing computed yet")
Z.data

# %% [markdown]
# Look at them
# ------------
# A reduction over every row is one more pass: the mean of three features by hour of the day, over
# all the days. The readings follow a daily cycle, each channel at its own phase; each feature
# peaks at the time of day its landmark (a k-means centroid of the readings) stands for.

# %%
by_hour = Z.isel(feature=slice(0, 3)).groupby("time.hour").mean()
hourly, first_days = dkapprox.compute(by_hour.data, X.isel(time=slice(0, 2 * 1440), channel=[0, 5, 10]).data)

fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
left.plot(np.arange(len(first_days)) / 60, first_days, lw=0.6)
left.set(xlabel="hour", ylabel="reading", title="channels 0, 5 and 10, the first 2 days")
right.plot(by_hour["hour"], hourly, marker="o")
right.set(xlabel="hour of the day", ylabel="mean feature value",
          title=f"3 of the 256 features, by hour, over {ROWS // 1440:,} days")
fig.tight_layout()
plt.show()

# %% [markdown]
# Write them to Zarr
# ------------------
# :func:`dkapprox.io.write_features` writes block by block with a marker per finished block, so a
# rerun after a crash writes only what is missing. The stored rows are the in-memory transform's.

# %%
target = os.path.join(DIRECTORY, "features.zarr")
report = write_features(Z.data, target, plan={"input": source, "model": "Nystroem", "landmarks": "kmeans"},
                        overwrite=True)
stored = open_features(target)
head = X[:1000].values
difference = float(np.abs(stored[:1000].compute() - nystroem.transform(head)).max())
print(f"wrote {report.blocks_written} of {report.blocks_total} blocks, {stored.shape} {stored.dtype}")
print(f"max |stored - in-memory transform| on the first 1000 rows: {difference:.2e}")
