# %% [markdown]
"""
Notebook: choosing n_components and the landmark method from the kernel error
=============================================================================

A notebook (jupytext percent format). How many components does a Nystroem feature map need, and
which landmarks: ``"uniform"`` (scikit-learn's), ``"kmeans"`` or ``"leverage"``? Measure it:
:func:`dkapprox.metrics.kernel_approximation_error` compares the exact kernel of a seeded sample
of rows with the one the features give, ``||K - Z Z^T|| / ||K||``, reading only the blocks that
hold sampled rows. Plot it against ``n_components`` for each method, pick the smallest that meets
your tolerance, and weigh it against the passes each method makes over the data.

The data is a Zarr store of clusters of very different sizes. ``ROWS`` sets its size (200,000 by
default; the documentation runs 20,000, the tests 10,000).
"""

# %%
import os
import tempfile
import time

import dask.array as da
import matplotlib.pyplot as plt
import numpy as np

from dkapprox import Nystroem, RBFSampler
from dkapprox.io import open_array
from dkapprox.metrics import kernel_approximation_error

# %% tags=["parameters"]
ROWS = int(os.environ.get("DKAPPROX_EXAMPLE_ROWS", 200_000))  # rows of the store
GRID = [n for n in (16, 32, 64, 128, 256) if 100 * n <= ROWS]  # n_components tried: 100 rows a landmark at least
TOLERANCE = 0.1  # the relative Frobenius error we accept
DIRECTORY = tempfile.mkdtemp(prefix="dkapprox-notebook-")

# %% [markdown]
# Clusters of very different sizes, in Zarr
# -----------------------------------------
# Twenty clusters in 8 dimensions; the largest holds half the rows, the smallest a few hundredths
# of a percent.

# %%
rng = np.random.default_rng(0)
weights = 0.5 ** np.arange(20)
centers = rng.normal(scale=4.0, size=(20, 8))
labels = rng.choice(20, size=ROWS, p=weights / weights.sum())
data = (centers[labels] + rng.normal(scale=0.7, size=(ROWS, 8))).astype(np.float32)
source = os.path.join(DIRECTORY, "clusters.zarr")
da.from_array(data, chunks=(max(ROWS // 8, 1), 8)).to_zarr(source, overwrite=True)
X = open_array(source)  # lazy: blocks are the Zarr chunks
print(f"{X.shape[0]:,} rows in {X.numblocks[0]} blocks; rows per cluster: {np.bincount(labels, minlength=20)}")

# %% [markdown]
# Measure
# -------
# For each method and ``n_components``: fit on the dask array, then the kernel error on a sample
# of 500 rows (the same sample for every fit: ``random_state=0``). Random Fourier features
# (``RBFSampler``) are the data-independent baseline.

# %%
GAMMA = 0.1
METHODS = {
    "Nystroem uniform": lambda n: Nystroem(gamma=GAMMA, n_components=n, landmarks="uniform", random_state=0),
    "Nystroem kmeans": lambda n: Nystroem(gamma=GAMMA, n_components=n, landmarks="kmeans", random_state=0),
    "Nystroem leverage": lambda n: Nystroem(gamma=GAMMA, n_components=n, landmarks="leverage", random_state=0),
    "RBFSampler": lambda n: RBFSampler(gamma=GAMMA, n_components=n, random_state=0),
}
results = {name: {"frobenius": [], "spectral": [], "seconds": [], "passes": []} for name in METHODS}
for name, make in METHODS.items():
    for n in GRID:
        started = time.perf_counter()
        fitted = make(n).fit(X)
        seconds = time.perf_counter() - started
        error = kernel_approximation_error(fitted, X, n_samples=500, random_state=0)
        for key, value in (("frobenius", error.frobenius), ("spectral", error.spectral), ("seconds", seconds),
                           ("passes", getattr(fitted, "landmark_passes_", 0))):
            results[name][key].append(value)

print(f"{'method':<20}" + "".join(f"{n:>9}" for n in GRID) + "   (relative Frobenius error)")
for name, r in results.items():
    print(f"{name:<20}" + "".join(f"{e:>9.4f}" for e in r["frobenius"]))

# %% [markdown]
# Plot
# ----
# The error falls with ``n_components`` for every method. Which landmarks do best depends on the
# data, which is why you measure: on these clusters k-means centroids give the lowest error at each
# size, and random Fourier features, which do not look at the data, need far more components.

# %%
fig, (left, middle, right) = plt.subplots(1, 3, figsize=(14, 4))
for (name, r), marker in zip(results.items(), "os^v"):
    left.loglog(GRID, r["frobenius"], marker=marker, label=name)
    middle.loglog(GRID, r["spectral"], marker=marker, label=name)
    right.loglog(GRID, r["seconds"], marker=marker, label=name)
left.axhline(TOLERANCE, color="k", linestyle=":", label=f"tolerance {TOLERANCE}")
left.set(xlabel="n_components", ylabel="||K - Z Zᵀ||_F / ||K||_F", title="Frobenius error")
middle.set(xlabel="n_components", ylabel="||K - Z Zᵀ||_2 / ||K||_2", title="spectral error")
right.set(xlabel="n_components", ylabel="fit seconds", title="fit time (dask, local threads)")
for axis in (left, middle, right):
    axis.set_xticks(GRID, [str(n) for n in GRID])
    axis.minorticks_off()
    axis.grid(True, which="both", alpha=0.3)
left.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# Choose
# ------
# The smallest ``n_components`` within the tolerance, per method, and what it costs in passes over
# the data (k-means: 1 + 4 Lloyd steps; leverage: 2; uniform: 1, reading only the blocks holding a
# landmark). On data larger than memory each pass reads the whole store, so a method that needs
# half the components for twice the passes can still be the cheaper one to transform with.

# %%
choices = {}
for name, r in results.items():
    within = [n for n, e in zip(GRID, r["frobenius"]) if e <= TOLERANCE]
    choices[name] = within[0] if within else None
    passes = r["passes"][GRID.index(within[0])] if within else None
    print(f"{name:<20} n_components={choices[name]} (passes over the data: {passes})" if within else
          f"{name:<20} not within {TOLERANCE} up to n_components={GRID[-1]}")
