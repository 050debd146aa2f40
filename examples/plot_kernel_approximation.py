"""How good is the approximation? Kernel error and accuracy against n_components
=============================================================================

How good is the approximation? Kernel error and accuracy vs n_components (RBF features, Nystroem).

Like scikit-learn's ``plot_kernel_approximation`` example, on the digits data
that ships with scikit-learn: for a growing number of components, the
relative error of the approximate kernel ``||K - Z Z^T||_F / ||K||_F`` (left)
and the test accuracy of a linear SVM on the features (right), beside the
exact RBF kernel SVM. Nystroem adapts to the data and needs far fewer
components than random Fourier features for the same error. Writes a PNG and
prints the numbers.

Run it by hand::

    python examples/plot_kernel_approximation.py --out kernel_approximation.png
    python examples/plot_kernel_approximation.py --max-components 100 --out /tmp/k.png
"""

import argparse

import matplotlib

matplotlib.use("Agg")  # a file, no window: runs on a server or in CI

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.metrics.pairwise import rbf_kernel  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.svm import SVC, LinearSVC  # noqa: E402

from dkapprox import RBFSampler  # noqa: E402
from dkapprox.nystroem import Nystroem  # noqa: E402

GAMMA = 0.2  # scikit-learn's example uses the same kernel width on digits / 16


# argparse's description (sphinx-gallery runs the script without its docstring)
DESCRIPTION = 'How good is the approximation? Kernel error and accuracy vs n_components (RBF features, Nystroem).'


def relative_kernel_error(features, X, K):
    """||K - Z Z^T||_F / ||K||_F: how far the features' dot products are from the kernel."""
    Z = features.transform(X)
    return float(np.linalg.norm(K - Z @ Z.T) / np.linalg.norm(K))


def main():
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--max-components", type=int, default=600)
    parser.add_argument("--n-samples", type=int, default=1797, help="digits used (at most 1797)")
    parser.add_argument("--out", default="kernel_approximation.png")
    args = parser.parse_args()

    X, y = load_digits(return_X_y=True)
    X = X[: args.n_samples] / 16.0
    y = y[: args.n_samples]
    half = len(X) // 2
    X_train, y_train, X_test, y_test = X[:half], y[:half], X[half:], y[half:]
    K = rbf_kernel(X_train, gamma=GAMMA)
    exact = SVC(kernel="rbf", gamma=GAMMA).fit(X_train, y_train).score(X_test, y_test)

    sizes = np.unique(np.geomspace(10, min(args.max_components, half), 7).astype(int))
    methods = {"random Fourier features": lambda n: RBFSampler(gamma=GAMMA, n_components=n, random_state=1),
               "Nystroem": lambda n: Nystroem(kernel="rbf", gamma=GAMMA, n_components=n, random_state=1)}
    errors, accuracy = {m: [] for m in methods}, {m: [] for m in methods}
    print(f"{'n_components':>12} | " + " | ".join(f"{m + ' error, accuracy':>42}" for m in methods))
    for n in sizes:
        row = []
        for name, make in methods.items():
            features = make(n).fit(X_train)
            errors[name].append(relative_kernel_error(features, X_train, K))
            model = make_pipeline(make(n), LinearSVC(dual="auto", max_iter=5000)).fit(X_train, y_train)
            accuracy[name].append(model.score(X_test, y_test))
            row.append(f"{errors[name][-1]:>33.4f}, {accuracy[name][-1]:>8.3f}")
        print(f"{n:>12} | " + " | ".join(row))
    print(f"exact RBF SVC accuracy: {exact:.3f}")

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name in methods:
        left.loglog(sizes, errors[name], "o-", label=name)
        right.plot(sizes, accuracy[name], "o-", label=name)
    right.axhline(exact, color="k", linestyle="--", label="exact RBF SVC")
    left.set(xlabel="n_components", ylabel="||K - Z Zᵀ||_F / ||K||_F", title="kernel approximation error")
    right.set(xlabel="n_components", ylabel="test accuracy", title="linear SVM on the features",
              xscale="log")
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"RBF kernel (gamma={GAMMA}) on digits, {len(X_train)} training images")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
