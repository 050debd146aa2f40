"""scikit-learn's own estimator checks on Nystroem with each landmark method and a few kernels."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from dkapprox.nystroem import Nystroem

ESTIMATORS = [
    Nystroem(n_components=10, random_state=0),
    Nystroem(kernel="laplacian", n_components=8, landmarks="kmeans", random_state=0),
    Nystroem(kernel="polynomial", degree=2, n_components=8, landmarks="leverage", random_state=0),
    Nystroem(kernel="cosine", n_components=5, landmarks="kmeans",
             landmark_params={"n_iter": 1, "sample_size": 30}, random_state=0),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
