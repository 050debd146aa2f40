"""
A Zarr store opened with xarray: labelled data in, labelled features out
========================================================================

``xarray.open_zarr`` gives dask-backed ``DataArray`` objects. dkapprox's
estimators take them as they are: ``transform`` returns a ``DataArray`` with
the sample dimension and its coordinates (here, time stamps and a station
label per row) and a new ``feature`` dimension, and stays lazy. Here
readings of 8 sensors, one a minute, goes through random Fourier features
into a ridge regression that predicts a non-linear target, and the features
are written back to Zarr with xarray.

The gallery runs it on 20,000 rows; by hand::

    python examples/plot_xarray_zarr.py --rows 200000 --dir /tmp/xr
"""

# %%
# A Zarr store made with xarray
# -----------------------------
# It stands in for your own store: a ``readings`` variable (time x sensor)
# and a ``target`` along time, chunked by time.

import argparse
import os
import tempfile

import dask
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import xarray as xr

from dkapprox import RBFSampler
from dkapprox.linear_model import Ridge

parser = argparse.ArgumentParser(description="xarray in, xarray out, on a Zarr store.")
parser.add_argument("--rows", type=int, default=20_000)
parser.add_argument("--dir", default=None, help="where the stores go (default: a new temporary directory)")
args, _ = parser.parse_known_args()
directory = args.dir or tempfile.mkdtemp(prefix="dkapprox-xarray-")

rng = np.random.default_rng(0)
time_index = pd.date_range("2026-01-01", periods=args.rows, freq="min")
phase = np.linspace(0, 40 * np.pi, args.rows)
readings = np.stack([np.sin(phase * (k + 1) / 8 + k) for k in range(8)], axis=1)
readings = (readings + 0.1 * rng.standard_normal(readings.shape)).astype(np.float32)
target = np.sin(3 * readings[:, 0] * readings[:, 1]) + np.cos(2 * readings[:, 2]) + 0.05 * rng.standard_normal(
    args.rows)
ds = xr.Dataset(
    {"readings": (("time", "sensor"), readings), "target": ("time", target.astype(np.float32))},
    coords={"time": time_index, "sensor": [f"s{k}" for k in range(8)],
            "station": ("time", np.where(np.arange(args.rows) % 2, "north", "south"))},
)
source = os.path.join(directory, "sensors.zarr")
# Zarr format 2: its string coordinates (sensor, station) have no Zarr 3 specification yet
ds.chunk({"time": args.rows // 8}).to_zarr(source, mode="w", zarr_format=2)

# %%
# Open it lazily and make features
# --------------------------------
# ``X`` is a DataArray backed by a dask array whose blocks are the Zarr
# chunks; so is ``Z``. Nothing has been read yet but the metadata.

ds = xr.open_zarr(source)
X = ds["readings"]
rbf = RBFSampler(gamma=0.5, n_components=256, random_state=0).fit(X)
Z = rbf.transform(X)
print(Z)

# %%
# Learn on them in one pass
# -------------------------
# ``Ridge`` reads the features block by block; the first three quarters of
# the rows train it, the last quarter tests it.

split = int(0.75 * args.rows)
y = ds["target"].data
model = Ridge(alpha=1e-3).fit(Z.data[:split], y[:split])
predicted, actual = dask.compute(model.predict(Z.data[split:]), y[split:])
r2 = 1 - np.sum((actual - predicted) ** 2) / np.sum((actual - actual.mean()) ** 2)
linear = Ridge(alpha=1e-3).fit(X.data[:split], y[:split])
r2_linear = 1 - np.sum((actual - linear.predict(X.data[split:]).compute()) ** 2) / np.sum(
    (actual - actual.mean()) ** 2)
print(f"held-out R^2: {r2:.3f} on RBF features, {r2_linear:.3f} on the raw readings")

# %%
# Write the features back with xarray
# -----------------------------------
# The coordinates travel with them. (For jobs that must survive a crash,
# :func:`dkapprox.io.write_features` writes the same array resumably.)

out = os.path.join(directory, "features.zarr")
Z.to_dataset(name="features").to_zarr(out, mode="w", zarr_format=2)
stored = xr.open_zarr(out)["features"]
print(f"stored {stored.dims} {stored.shape}, chunks {stored.chunks[0][:2]}..., "
      f"stations {sorted(map(str, set(stored['station'].values[:4])))}")

# %%
# Plot
# ----

window = slice(split, split + 600)
fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 5.5), sharex=True)
top.plot(time_index[window], ds["readings"].isel(time=window, sensor=slice(0, 3)).values, lw=0.8)
top.set(ylabel="readings s0-s2", title="test quarter: the first 600 rows")
bottom.plot(time_index[window], actual[: window.stop - window.start], "k", lw=1, label="target")
bottom.plot(time_index[window], predicted[: window.stop - window.start], lw=1,
            label=f"Ridge on RBFSampler(256) features, R^2 {r2:.2f}")
bottom.set(ylabel="target")
bottom.legend(fontsize=8, loc="upper right")
fig.tight_layout()
plt.show()
