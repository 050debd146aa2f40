"""
Comparing the feature maps: accuracy, kernel error and time against n_components
================================================================================

The learning study of ``examples/learning_study.py`` widened to every way
dkapprox has of approximating the RBF kernel: scikit-learn's
``RBFSampler`` (i.i.d. random Fourier features), ``RandomFourierFeatures``
with paired sin/cos features drawn orthogonally or from a scrambled Sobol
sequence (QMC), and ``Nystroem`` with uniform, k-means and ridge-leverage
landmarks. Each feature map feeds a ``RidgeClassifier`` on the digits data
that ships with scikit-learn (half for training), beside the exact RBF SVC.

Three panels, against ``n_components``: test accuracy, the relative
Frobenius error of the kernel ``||K - Z Z^T||_F / ||K||_F`` measured by
:func:`dkapprox.metrics.kernel_approximation_error`, and the fit + predict
time (median of 3; one run with ``--small``). The gallery runs it at small sizes (``--small``); by
hand::

    python examples/plot_compare_methods.py                # n_components up to 800
    python examples/plot_compare_methods.py --small        # up to 200, seconds
"""

# %%
# The data and the feature maps
# -----------------------------
# Every feature map approximates ``exp(-gamma ||x - y||^2)`` with the same
# ``gamma``; they differ in how the random state is drawn.

import argparse
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.pipeline import make_pipeline
from sklearn.svm import SVC

from dkapprox import Nystroem, RandomFourierFeatures, RBFSampler
from dkapprox.linear_model import RidgeClassifier
from dkapprox.metrics import kernel_approximation_error

parser = argparse.ArgumentParser(description="Feature maps of the RBF kernel compared on digits.")
parser.add_argument("--small", action="store_true", help="n_components up to 200, one timed fit per point")
args, _ = parser.parse_known_args()
grid = [25, 50, 100, 200] if args.small else [25, 50, 100, 200, 400, 800]
repeats = 1 if args.small else 3

GAMMA = 0.2
X, y = load_digits(return_X_y=True)
X = (X / 16.0).astype(np.float32)
order = np.random.RandomState(0).permutation(len(X))
half = len(X) // 2
X_train, y_train, X_test, y_test = X[order[:half]], y[order[:half]], X[order[half:]], y[order[half:]]

METHODS = {
    "RBFSampler (iid, cos)": lambda n: RBFSampler(gamma=GAMMA, n_components=n, random_state=0),
    "RFF orthogonal, sincos": lambda n: RandomFourierFeatures(
        n_components=n + n % 2, gamma=GAMMA, features="sincos", sampling="orthogonal", random_state=0),
    "RFF qmc, sincos": lambda n: RandomFourierFeatures(
        n_components=n + n % 2, gamma=GAMMA, features="sincos", sampling="qmc", random_state=0),
    "Nystroem uniform": lambda n: Nystroem(gamma=GAMMA, n_components=n, random_state=0),
    "Nystroem kmeans": lambda n: Nystroem(gamma=GAMMA, n_components=n, landmarks="kmeans", random_state=0),
    "Nystroem leverage": lambda n: Nystroem(gamma=GAMMA, n_components=n, landmarks="leverage", random_state=0),
}

# %%
# Measure
# -------
# Accuracy and time of the pipeline ``feature map + RidgeClassifier``; the
# kernel error of the feature map alone, on the training rows.


def fit_predict(model):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        predicted = clone(model).fit(X_train, y_train).predict(X_test)
        times.append(time.perf_counter() - start)
    return float(np.mean(predicted == y_test)), float(np.median(times))


results = {name: {"accuracy": [], "error": [], "seconds": []} for name in METHODS}
for n in grid:
    for name, make in METHODS.items():
        accuracy, seconds = fit_predict(make_pipeline(make(n), RidgeClassifier(alpha=1e-2)))
        error = kernel_approximation_error(make(n).fit(X_train), X_train, random_state=0).frobenius
        for key, value in (("accuracy", accuracy), ("error", error), ("seconds", seconds)):
            results[name][key].append(value)

start = time.perf_counter()
svc_accuracy = SVC(kernel="rbf", gamma=GAMMA).fit(X_train, y_train).score(X_test, y_test)
svc_seconds = time.perf_counter() - start

print(f"{'method':<24}" + "".join(f"{n:>16}" for n in grid) + "   (accuracy / kernel error)")
for name, r in results.items():
    print(f"{name:<24}" + "".join(f"{a:>8.3f} /{e:>6.3f}" for a, e in zip(r["accuracy"], r["error"])))
print(f"exact RBF SVC: accuracy {svc_accuracy:.3f} in {svc_seconds:.3f} s")

# %%
# Plot
# ----
# Nystroem adapts to the data and reaches a given accuracy with fewer
# components; among the data-independent maps, orthogonal and QMC sin/cos
# features have a lower kernel error than i.i.d. cos features at the same
# width. On this small data set every map is fast: what separates them at
# scale is in :doc:`/choosing`.

fig, (left, middle, right) = plt.subplots(1, 3, figsize=(13, 4.2))
for (name, r), marker in zip(results.items(), "os^vDP"):
    style = "-" if name.startswith("Nystroem") else "--"
    left.plot(grid, r["accuracy"], style, marker=marker, label=name)
    middle.plot(grid, r["error"], style, marker=marker, label=name)
    right.plot(grid, r["seconds"], style, marker=marker, label=name)
left.axhline(svc_accuracy, color="k", linestyle=":", label="exact RBF SVC")
right.axhline(svc_seconds, color="k", linestyle=":", label="exact RBF SVC")
left.set(ylabel="test accuracy", title="RidgeClassifier on the features")
middle.set(ylabel="||K - Z Zᵀ||_F / ||K||_F", title="kernel approximation error", yscale="log")
right.set(ylabel="fit + predict seconds", title=f"time (median of {repeats})", yscale="log")
for axis in (left, middle, right):
    axis.set(xscale="log", xlabel="n_components")
    axis.set_xticks(grid, [str(n) for n in grid])
    axis.minorticks_off()
    axis.grid(True, alpha=0.3)
left.legend(fontsize=7)
fig.suptitle(f"RBF kernel (gamma={GAMMA}) on digits, {len(X_train)} training images")
fig.tight_layout()
plt.show()
