"""scikit-learn's own estimator checks on Nystroem with each landmark method and a few kernels."""

from _estimators import check_estimators
from sklearn.utils.estimator_checks import parametrize_with_checks

ESTIMATORS = check_estimators("nystroem")


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
