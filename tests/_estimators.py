"""Every public dkapprox estimator, configured small, derived from the estimator registry.

Adding an estimator: register its class in ``dkapprox/_registry.py`` and give
it configurations here, under its class name. ``CONTRACT`` configures the
transformers for the shared contract tests (chunk invariance, laziness, honest
metadata, dtype, memory, validation); ``CHECKS`` configures every estimator for
scikit-learn's own estimator checks. ``test_every_registered_estimator_is_configured``
(tests/test_registry.py) fails until both name the new class.
"""

from sklearn.linear_model import SGDClassifier, SGDRegressor

from dkapprox import RBFSampler, _registry

#: class name -> parameters of each configuration the contract tests run
CONTRACT = {
    "RBFSampler": [dict(n_components=40, random_state=1), dict(gamma="scale", n_components=40, random_state=1)],
    "SkewedChi2Sampler": [dict(n_components=30, random_state=1)],
    "AdditiveChi2Sampler": [dict(sample_steps=3)],
    "PolynomialCountSketch": [dict(n_components=32, degree=3, coef0=1.0, random_state=1)],
    "GaussianRandomProjection": [dict(n_components=6, random_state=1)],
    "SparseRandomProjection": [dict(n_components=6, density=0.4, random_state=1)],
    "RandomFourierFeatures": [
        dict(n_components=40, kernel="rbf", sampling="orthogonal", random_state=1),
        dict(n_components=40, kernel="laplacian", sampling="orthogonal", random_state=1),
        dict(n_components=40, kernel="matern", nu=2.5, features="sincos", sampling="structured", random_state=1),
        dict(n_components=40, kernel="cauchy", sampling="qmc", random_state=1),
    ],
    "RandomBinningFeatures": [dict(n_components=64, n_grids=8, random_state=1),
                              dict(n_components=64, n_grids=8, dense_output=True, random_state=1)],
    "Nystroem": [
        dict(n_components=20, random_state=1),
        dict(kernel="laplacian", gamma=0.5, n_components=20, landmarks="kmeans", random_state=1),
        dict(kernel="polynomial", degree=2, n_components=20, landmarks="leverage", random_state=1),
        dict(kernel="chi2", n_components=15, random_state=1),
        dict(kernel="cosine", n_components=16, n_landmarks=32, landmarks="rpcholesky", random_state=1),
    ],
}

#: class name -> parameters of each configuration scikit-learn's estimator checks run
CHECKS = {
    "RBFSampler": [dict(n_components=20, random_state=0), dict(gamma="scale", n_components=20, random_state=0)],
    "SkewedChi2Sampler": [dict(n_components=20, random_state=0)],
    "AdditiveChi2Sampler": [dict()],
    "PolynomialCountSketch": [dict(n_components=20, random_state=0),
                              dict(n_components=20, coef0=1.0, degree=3, random_state=0)],
    "GaussianRandomProjection": [dict(n_components=2, random_state=0)],
    "SparseRandomProjection": [dict(n_components=2, random_state=0),
                               dict(n_components=2, dense_output=True, compute_inverse_components=True,
                                    random_state=0)],
    "RandomFourierFeatures": [
        dict(n_components=20, random_state=0),
        dict(n_components=20, kernel="laplacian", features="sincos", sampling="orthogonal", random_state=0),
        dict(n_components=20, kernel="matern", nu=2.5, sampling="structured", random_state=0),
        dict(n_components=20, kernel="cauchy", features="sincos", sampling="qmc", random_state=0),
    ],
    "RandomBinningFeatures": [dict(n_components=64, n_grids=8, random_state=0),
                              dict(n_components=64, n_grids=8, dense_output=True, random_state=0)],
    "Nystroem": [
        dict(n_components=10, random_state=0),
        dict(kernel="laplacian", n_components=8, landmarks="kmeans", random_state=0),
        dict(kernel="polynomial", degree=2, n_components=8, landmarks="leverage", random_state=0),
        dict(kernel="cosine", n_components=5, landmarks="kmeans", landmark_params={"n_iter": 1, "sample_size": 30},
             random_state=0),
        dict(n_components=6, landmarks="rpcholesky", random_state=0),
        dict(kernel="laplacian", n_components=4, n_landmarks=8, landmarks="leverage", random_state=0),
    ],
    "Ridge": [dict(), dict(fit_intercept=False)],
    "RidgeCV": [dict(n_folds=3, random_state=0)],
    "RidgeClassifier": [dict()],
    "KernelRidge": [dict(tol=1e-10, max_iter=500),
                    dict(kernel="rbf", gamma=0.1, alpha=0.1, centers="kmeans", random_state=0)],
    "KernelRidgeClassifier": [dict(kernel="rbf", tol=1e-10, max_iter=500, random_state=0)],
    "KernelRidgeCV": [dict(alphas=(0.1, 1.0), gammas=(0.1, 1.0), cv=3, random_state=0),
                      dict(alphas=(0.1, 1.0), gammas=(0.1, 1.0), cv=3, route="cg", tol=1e-10, max_iter=1000,
                           halving_factor=None, random_state=0)],
    "KernelRidgeClassifierCV": [dict(alphas=(0.1, 1.0), gammas=(0.1, 1.0), cv=3, random_state=0),
                                dict(alphas=(0.1, 1.0), gammas=(0.1, 1.0), cv=3, route="cg", tol=1e-10,
                                     max_iter=1000, halving_factor=None, random_state=0)],
    "FeatureMapRidgeCV": [dict(transformer=RBFSampler(n_components=100, random_state=0),
                               param_grid={"gamma": [0.01, 0.1]}, n_folds=3, random_state=0)],
    # the exact GP: the sparse one refuses fewer rows than centers, which most checks' data sets have
    "GaussianProcessRegressor": [dict()],
    # NumPy input is one block, so an epoch is one partial_fit: enough epochs to learn
    "Incremental": [dict(estimator=SGDClassifier(random_state=0), n_epochs=20, random_state=0),
                    dict(estimator=SGDRegressor(random_state=0), n_epochs=20, random_state=0)],
}


def configured(table, classes):
    """An instance per configuration of each class, in the registry's order."""
    return [cls(**params) for cls in classes for params in table.get(cls.__name__, [])]


def check_estimators(package):
    """The configured estimators of the registry whose class lives in ``dkapprox.<package>``."""
    return [est for est in configured(CHECKS, _registry.ESTIMATORS)
            if type(est).__module__.startswith(f"dkapprox.{package}.")]


CONTRACT_ESTIMATORS = configured(CONTRACT, _registry.TRANSFORMERS)


def ident(estimator):
    return repr(estimator).replace(" ", "").replace("\n", "")
