"""scikit-learn's own estimator checks on every dkapprox estimator."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from dkapprox import (AdditiveChi2Sampler, GaussianRandomProjection, PolynomialCountSketch, RBFSampler,
                      SkewedChi2Sampler, SparseRandomProjection)

ESTIMATORS = [
    RBFSampler(n_components=20, random_state=0),
    RBFSampler(gamma="scale", n_components=20, random_state=0),
    SkewedChi2Sampler(n_components=20, random_state=0),
    AdditiveChi2Sampler(),
    PolynomialCountSketch(n_components=20, random_state=0),
    PolynomialCountSketch(n_components=20, coef0=1.0, degree=3, random_state=0),
    GaussianRandomProjection(n_components=2, random_state=0),
    SparseRandomProjection(n_components=2, random_state=0),
    SparseRandomProjection(n_components=2, dense_output=True, compute_inverse_components=True, random_state=0),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
