"""Ridge on Nystroem features is the Nystroem kernel ridge regression of the seed document.

low_rank_matrix_approximations_wiki.txt: with the landmark kernel K_q and
K_nq = k(X, landmarks), K~ = K_nq K_q^-1 K_nq^T; the regularized least squares
solution is c = (K~ + lambda n I)^-1 y, computed with the Woodbury identity as

    c = (1 / (lambda n)) (y - K_nq (lambda n K_q + K_nq^T K_nq)^-1 K_nq^T y),

and the prediction at x is k~(x, X) c = k(x, landmarks) K_q^-1 K_nq^T c.
Nystroem features Z = K_nq K_q^-1/2 satisfy Z Z^T = K~, so ridge without
intercept on Z with alpha = lambda n must predict exactly the same.
"""

import dask.array as da
import numpy as np
import pytest
import scipy.linalg
from sklearn.kernel_approximation import Nystroem
from sklearn.metrics.pairwise import rbf_kernel

from dkapprox.linear_model import Ridge

GAMMA, LAM = 0.5, 1e-3


def woodbury_krr(X, y, landmarks, X_test):
    n = X.shape[0]
    K_nq = rbf_kernel(X, landmarks, gamma=GAMMA)
    K_q = rbf_kernel(landmarks, landmarks, gamma=GAMMA)
    inner = LAM * n * K_q + K_nq.T @ K_nq
    c = (y - K_nq @ scipy.linalg.solve(inner, K_nq.T @ y, assume_a="pos")) / (LAM * n)
    def predict(A):
        return rbf_kernel(A, landmarks, gamma=GAMMA) @ scipy.linalg.solve(K_q, K_nq.T @ c, assume_a="pos")
    return c, predict(X), predict(X_test)


@pytest.mark.parametrize("n_components", [20, 60])
def test_ridge_on_nystroem_features_is_woodbury_kernel_ridge(seed, n_components):
    rng = np.random.default_rng(seed)
    X, X_test = rng.uniform(-2, 2, size=(300, 3)), rng.uniform(-2, 2, size=(50, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=300)
    nystroem = Nystroem(gamma=GAMMA, n_components=n_components, random_state=seed).fit(X)
    c, fitted, predicted = woodbury_krr(X, y, nystroem.components_, X_test)
    Z, Z_test = nystroem.transform(X), nystroem.transform(X_test)
    alpha = LAM * X.shape[0]
    for features in (Z, da.from_array(Z, chunks=(64, -1))):  # in memory, and streamed from dask
        ridge = Ridge(alpha=alpha, fit_intercept=False).fit(features, y)
        np.testing.assert_allclose(ridge.predict(Z), fitted, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(ridge.predict(Z_test), predicted, rtol=1e-6, atol=1e-8)
    # and the weights are the dual coefficients seen through the features: w = Z^T c
    np.testing.assert_allclose(ridge.coef_, Z.T @ c, rtol=1e-6, atol=1e-8)


def test_lazy_pipeline_with_dkapprox_nystroem_is_the_same_kernel_ridge():
    from sklearn.pipeline import make_pipeline

    from dkapprox.nystroem import Nystroem as DkNystroem

    rng = np.random.default_rng(3)
    X, X_test = rng.uniform(-2, 2, size=(600, 3)), rng.uniform(-2, 2, size=(80, 3))
    y = np.cos(X[:, 0]) * X[:, 1] + 0.1 * rng.normal(size=600)
    pipe = make_pipeline(DkNystroem(gamma=GAMMA, n_components=50, random_state=1),
                         Ridge(alpha=LAM * len(X), fit_intercept=False))
    pipe.fit(da.from_array(X, chunks=(97, -1)), da.from_array(y, chunks=150))  # features never stored
    _, _, predicted = woodbury_krr(X, y, pipe[0].components_, X_test)
    lazy = pipe.predict(da.from_array(X_test, chunks=(30, -1)))
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), predicted, rtol=1e-6, atol=1e-8)
