"""scikit-learn's own estimator checks on the streaming learners (NumPy input)."""

import functools

import pytest
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.utils.estimator_checks import estimator_checks_generator

from dkapprox.linear_model import Incremental, Ridge, RidgeClassifier, RidgeCV

ESTIMATORS = [
    Ridge(),
    Ridge(fit_intercept=False),
    RidgeCV(n_folds=3, random_state=0),
    RidgeClassifier(),
    # NumPy input is one block, so an epoch is one partial_fit: enough epochs to learn
    Incremental(SGDClassifier(random_state=0), n_epochs=20, random_state=0),
    Incremental(SGDRegressor(random_state=0), n_epochs=20, random_state=0),
]

# Checks that can only skip here: the array API (these learners take NumPy, sparse and dask
# arrays) and predict_proba (RidgeClassifier has none, as in scikit-learn).
NOT_APPLICABLE = {"check_array_api_input", "check_classifiers_multilabel_output_format_predict_proba"}


def name_of(check):
    return (check.func if isinstance(check, functools.partial) else check).__name__


CASES = [(estimator, check) for base in ESTIMATORS for estimator, check in estimator_checks_generator(base)
         if name_of(check) not in NOT_APPLICABLE]


@pytest.mark.parametrize("estimator, check", CASES,
                         ids=[f"{type(e).__name__}-{i}-{name_of(c)}" for i, (e, c) in enumerate(CASES)])
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
