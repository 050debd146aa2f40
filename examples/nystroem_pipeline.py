"""Nystroem + a linear model in a scikit-learn Pipeline
====================================================

Nystroem + a linear model in a scikit-learn Pipeline: a kernel machine at linear cost.

Two interleaved circles cannot be separated by a line; an RBF kernel separates
them. The exact kernel SVM costs O(n^2) memory and more; ``Nystroem`` gives
features whose dot products approximate the kernel, so a linear classifier on
them acts like the kernel machine. The pipeline is a plain scikit-learn
estimator (cross-validation, grid search and pickling work as usual), and the
fitted feature map also turns a dask array into lazy features.

Run it by hand::

    python examples/nystroem_pipeline.py                    # 20,000 samples
    python examples/nystroem_pipeline.py --n-samples 2000
"""

import argparse
import time

import dask.array as da
import numpy as np
from sklearn.datasets import make_circles
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from dkapprox.nystroem import Nystroem

# argparse's description (sphinx-gallery runs the script without its docstring)
DESCRIPTION = 'Nystroem + a linear model in a scikit-learn Pipeline: a kernel machine at linear cost.'


def score(name, model, X_train, X_test, y_train, y_test):
    started = time.perf_counter()
    model.fit(X_train, y_train)
    accuracy = model.score(X_test, y_test)
    print(f"{name:<34} accuracy {accuracy:.3f}   fit+score {time.perf_counter() - started:6.2f} s")
    return accuracy


def main():
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--n-samples", type=int, default=20_000)
    parser.add_argument("--n-components", type=int, default=100)
    args = parser.parse_args()

    X, y = make_circles(n_samples=args.n_samples, noise=0.08, factor=0.5, random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)

    linear = make_pipeline(StandardScaler(), LogisticRegression())
    kernel = make_pipeline(StandardScaler(), Nystroem(kernel="rbf", gamma=1.0, n_components=args.n_components,
                                                      random_state=0), LogisticRegression(C=10.0))
    score("linear (LogisticRegression)", linear, X_train, X_test, y_train, y_test)
    score(f"Nystroem({args.n_components}) + LogisticRegression", kernel, X_train, X_test, y_train, y_test)
    exact_n = min(len(X_train), 5_000)  # the exact kernel SVM is quadratic: a subset keeps it short
    score(f"exact RBF SVC ({exact_n:,} samples)", make_pipeline(StandardScaler(), SVC(kernel="rbf", gamma=1.0)),
          X_train[:exact_n], X_test, y_train[:exact_n], y_test)

    # The fitted feature map works on dask arrays too: lazy features, block by block.
    scaler, features = kernel[0], kernel[1]
    lazy = features.transform(da.from_array(scaler.transform(X_test), chunks=(1_000, 2)))
    same = np.allclose(lazy.compute(), features.transform(scaler.transform(X_test)))
    print(f"dask input: {lazy.numblocks[0]} blocks of features, equal to the in-memory ones: {same}")


if __name__ == "__main__":
    main()
