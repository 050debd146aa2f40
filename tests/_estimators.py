"""Every public dkapprox transformer, configured small, for the shared contract tests.

Add new estimators here: the contract (chunk invariance, laziness, honest
metadata, dtype, memory, validation) then runs on them too.
"""

import dkapprox

CONTRACT_ESTIMATORS = [
    dkapprox.RBFSampler(n_components=40, random_state=1),
    dkapprox.RBFSampler(gamma="scale", n_components=40, random_state=1),
    dkapprox.SkewedChi2Sampler(n_components=30, random_state=1),
    dkapprox.AdditiveChi2Sampler(sample_steps=3),
    dkapprox.PolynomialCountSketch(n_components=32, degree=3, coef0=1.0, random_state=1),
    dkapprox.GaussianRandomProjection(n_components=6, random_state=1),
    dkapprox.SparseRandomProjection(n_components=6, density=0.4, random_state=1),
    dkapprox.RandomFourierFeatures(n_components=40, kernel="rbf", sampling="orthogonal", random_state=1),
    dkapprox.RandomFourierFeatures(n_components=40, kernel="laplacian", sampling="orthogonal", random_state=1),
    dkapprox.RandomFourierFeatures(n_components=40, kernel="matern", nu=2.5, features="sincos", sampling="structured",
                                   random_state=1),
    dkapprox.RandomFourierFeatures(n_components=40, kernel="cauchy", sampling="qmc", random_state=1),
    dkapprox.RandomBinningFeatures(n_components=64, n_grids=8, random_state=1),
    dkapprox.RandomBinningFeatures(n_components=64, n_grids=8, dense_output=True, random_state=1),
    dkapprox.Nystroem(n_components=20, random_state=1),
    dkapprox.Nystroem(kernel="laplacian", gamma=0.5, n_components=20, landmarks="kmeans", random_state=1),
    dkapprox.Nystroem(kernel="polynomial", degree=2, n_components=20, landmarks="leverage", random_state=1),
    dkapprox.Nystroem(kernel="chi2", n_components=15, random_state=1),
]


def ident(estimator):
    return repr(estimator).replace(" ", "").replace("\n", "")
