# %% [markdown]
"""
Notebook: learning out of core on kernel features, on a LocalCluster
====================================================================

A notebook (jupytext percent format). A regression problem in a Zarr store (``ROWS`` rows:
2,000,000 by default; the documentation runs 20,000), learned with a scikit-learn pipeline of
random Fourier features and :class:`dkapprox.linear_model.RidgeCV`: the features are made block
by block on the workers inside one pass over the data and never stored, and the cross-validation
over the penalties is exact, in that same pass. The held-out score is one more pass.

On a distributed client every pass shows distributed's progress widget in Jupyter (a bar on a
terminal); ``%env DKAPPROX_PROGRESS=0`` turns it off.
"""

# %%
import os
import tempfile

import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from distributed import Client, LocalCluster
from sklearn.pipeline import make_pipeline

import dkapprox
from dkapprox import RBFSampler
from dkapprox.io import open_array
from dkapprox.linear_model import RidgeCV

# %% tags=["parameters"]
ROWS = int(os.environ.get("DKAPPROX_EXAMPLE_ROWS", 2_000_000))  # rows of the store
N_COMPONENTS = 512  # random Fourier features
DIRECTORY = tempfile.mkdtemp(prefix="dkapprox-notebook-")

# %% [markdown]
# A cluster and a Zarr store
# --------------------------
# Two single-threaded workers in this process (they start at once, and the file also runs as a plain
# script; for a cluster of your own, ``Client("tcp://scheduler:8786")``). The data is scikit-learn's
# Friedman #1 problem, ``y = 10 sin(pi x0 x1) + 20 (x2 - 1/2)^2 + 10 x3 + 5 x4 + noise`` with 10
# uniform inputs (5 of them useless), made chunk by chunk on the workers.

# %%
cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0")
client = Client(cluster)

chunk = min(100_000, max(ROWS // 8, 1))
X_lazy = da.random.default_rng(0).random((ROWS, 10), chunks=(chunk, 10), dtype=np.float32)
noise = da.random.default_rng(1).standard_normal(ROWS, chunks=chunk, dtype=np.float32)
y_lazy = (10 * da.sin(np.pi * X_lazy[:, 0] * X_lazy[:, 1]) + 20 * (X_lazy[:, 2] - 0.5) ** 2
          + 10 * X_lazy[:, 3] + 5 * X_lazy[:, 4] + noise)
paths = {name: os.path.join(DIRECTORY, f"{name}.zarr") for name in ("X", "y")}
dkapprox.compute(X_lazy.to_zarr(paths["X"], overwrite=True, compute=False),
                 y_lazy.to_zarr(paths["y"], overwrite=True, compute=False))

X, y = open_array(paths["X"]), da.from_zarr(paths["y"])
split = int(0.8 * ROWS) // chunk * chunk  # the last fifth, at a chunk boundary, is held out
X_train, y_train, X_test, y_test = X[:split], y[:split], X[split:], y[split:]
print(f"{ROWS:,} rows in {X.numblocks[0]} blocks: {split:,} to train, {ROWS - split:,} to test")

# %% [markdown]
# Fit in one pass
# ---------------
# ``RidgeCV`` folds the rows by a seeded hash of their global index and gathers, in one pass, the
# statistics of every fold; each penalty is then scored exactly on each fold, on the driver.

# %%
alphas = np.logspace(-4, 2, 7)
model = make_pipeline(RBFSampler(gamma=0.5, n_components=N_COMPONENTS, random_state=0),
                      RidgeCV(alphas=alphas, n_folds=5, random_state=0))
model.fit(X_train, y_train)
ridge = model[-1]
print(f"alpha chosen: {ridge.alpha_:g}, mean cross-validated R^2 {ridge.best_score_:.3f}")
model

# %% [markdown]
# Score on the held-out rows
# --------------------------
# ``score`` streams too: the R^2 is one pass over the test rows, and so is the linear model's on
# the raw inputs.

# %%
r2 = model.score(X_test, y_test)
linear = RidgeCV(alphas=alphas, n_folds=5, random_state=0).fit(X_train, y_train)
r2_linear = linear.score(X_test, y_test)
print(f"held-out R^2: {r2:.3f} on {N_COMPONENTS} RBF features, {r2_linear:.3f} linear on the raw inputs")

# %% [markdown]
# Plot
# ----
# Left, the cross-validation curve (one line per fold); right, predictions on 2,000 held-out rows.
# The predictions are lazy until computed: ``dkapprox.compute`` shows the progress of that compute
# too.

# %%
predicted, actual = dkapprox.compute(model.predict(X_test[:2000]), y_test[:2000])
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
left.semilogx(alphas, ridge.cv_scores_.T, color="C0", alpha=0.4)
left.semilogx(alphas, ridge.cv_scores_.mean(axis=0), "o-", color="C0", label="mean of 5 folds")
left.axvline(ridge.alpha_, color="k", linestyle=":", label=f"alpha_ = {ridge.alpha_:g}")
left.set(xlabel="alpha", ylabel="R^2 on the fold", title="RidgeCV: exact 5-fold scores, one pass")
left.legend()
right.scatter(actual, predicted, s=4, alpha=0.5)
right.plot([actual.min(), actual.max()], [actual.min(), actual.max()], "k:", lw=1)
right.set(xlabel="y", ylabel="predicted", title=f"held out: R^2 {r2:.3f} (linear: {r2_linear:.3f})")
fig.tight_layout()
plt.show()

# %%
client.close()
cluster.close()
