"""The CG search's block function against the products and held-out errors it stands for, in dense NumPy."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import pairwise_kernels

from dkapprox.kernel_ridge import _cv_cg as cg
from dkapprox.kernel_ridge._cv_stats import hashed_folds
from dkapprox.kernel_ridge._falkon import Centers
from dkapprox.kernels import Kernel
from dkapprox.learning._targets import NumericTargets

RNG = np.random.default_rng(3)
N, D, M, F, KEY = 700, 4, 24, 3, 11
X = RNG.normal(size=(N, D))
C = RNG.normal(size=(M, D))
Y = RNG.normal(size=(N, 2))
W = RNG.uniform(0.5, 2.0, size=N)


def _state(metric, gammas, V, colfold, coltarget, S, dtype):
    centers = tuple(Centers(Kernel(metric, (("gamma", g),)), C.astype(dtype)) for g in gammas)
    n = len(gammas)
    return cg.CGPass(centers, (V,) * n, (colfold,) * n, (coltarget,) * n, (S,) * n, F, KEY, None,
                     NumericTargets(2), True, False)


@pytest.mark.parametrize("metric, gammas, dtype, sparse", [
    ("rbf", (0.05, 0.3, 40.0), np.float32, False),  # 40: outside the factored range, the centered distances
    ("rbf", (0.05, 0.3), np.float64, False),
    ("rbf", (0.3,), np.float64, True),  # sparse rows: each kernel as KernelRidge forms it
    ("laplacian", (0.1, 1.0), np.float64, False),
])
def test_a_pass_gives_each_fold_columns_products_and_each_folds_held_out_errors(metric, gammas, dtype, sparse):
    # 11 columns (padded to 16 in the GEMM): folds 0..2 and every row (3), both targets, in a shuffled order
    colfold = RNG.permutation(np.array([0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 3]))
    coltarget = np.array([0, 1] * 5 + [0])[: colfold.size]
    V = RNG.normal(size=(M, colfold.size))
    S = RNG.normal(size=(F, M, 3 * 2))  # 3 iterates of both targets per fold
    Xb = X.astype(dtype)
    start = 1000  # a block's global row offset: the folds hash the global index
    folds = hashed_folds(np.arange(start, start + N), F, KEY)
    state = _state(metric, gammas, V, colfold, coltarget, S, dtype)
    products, scores, _ = cg.cg_partial(start, state, sp.csr_matrix(Xb) if sparse else Xb, Y, W)
    rtol = 2e-4 if dtype == np.float32 else 1e-10
    for i, g in enumerate(gammas):
        K = pairwise_kernels(X, C, metric=metric, gamma=g)
        train = folds[:, None] != colfold[None, :]
        expected = K.T @ ((K @ V) * W[:, None] * train)
        np.testing.assert_allclose(products[i], expected, rtol=rtol, atol=rtol * np.abs(expected).max())
        for f in range(F):
            mine = folds == f
            P = (K[mine] @ S[f]).reshape(-1, 3, 2)
            err = W[mine] @ ((P - Y[mine][:, None, :]) ** 2).reshape(mine.sum(), -1)
            np.testing.assert_allclose(scores[i][f], err, rtol=rtol)


def test_the_first_pass_gives_each_fold_columns_right_hand_side():
    colfold, coltarget = np.array([0, 1, 2, 3, 0, 1, 2, 3]), np.array([0, 0, 0, 0, 1, 1, 1, 1])
    state = _state("rbf", (0.2, 1.0), None, colfold, coltarget, None, np.float64)
    state = cg.CGPass(*[getattr(state, k) for k in ("centers", "V", "colfold", "coltarget", "S", "n_folds",
                                                    "fold_key", "labels", "targets", "weighted", "classify")],
                      first=True)
    products, scores, sums = cg.cg_partial(0, state, X, Y, W)
    folds = hashed_folds(np.arange(N), F, KEY)
    for i, g in enumerate((0.2, 1.0)):
        K = pairwise_kernels(X, C, metric="rbf", gamma=g)
        expected = K.T @ (Y[:, coltarget] * W[:, None] * (folds[:, None] != colfold[None, :]))
        np.testing.assert_allclose(products[i], expected, rtol=1e-10)
        assert scores[i] is None
    np.testing.assert_allclose(sums[0][:, 0, 0], [W[folds == f].sum() for f in range(F)])
