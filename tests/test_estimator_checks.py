"""scikit-learn's own estimator checks on every dkapprox estimator."""

from _estimators import check_estimators
from sklearn.utils.estimator_checks import parametrize_with_checks

ESTIMATORS = check_estimators("kernel_approximation") + check_estimators("random_projection")


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
