"""Every private scikit-learn name dkapprox uses, imported here and nowhere else.

scikit-learn keeps some helpers an estimator library needs (parameter
constraints, output containers, sample weights, the sparse random matrix of
its SparseRandomProjection) in private modules, which move between releases.
This module imports each of them once, from the public re-export where one
exists, with the fallback for the oldest scikit-learn ``pyproject.toml``
allows (1.6), so that an upgrade breaks this file and its test
(``tests/utils/test_sklearn_compat.py``, which also runs a compat subset of the
suite against scikit-learn 1.6), not the package.
"""

from __future__ import annotations

# the sparse random matrix and density check of scikit-learn's SparseRandomProjection
from sklearn.random_projection import _check_density as check_density
from sklearn.random_projection import _sparse_random_matrix as sparse_random_matrix

# the HTML repr: public in every supported release (its private home moved in 1.7)
from sklearn.utils import estimator_html_repr

# parameter constraints (scikit-learn's wording of every parameter error)
from sklearn.utils._param_validation import HasMethods, Interval, InvalidParameterError, StrOptions

# set_output: wrap a transform's output in the configured container (pandas, polars)
from sklearn.utils._set_output import _wrap_data_with_container as wrap_data_with_container

# small validation helpers
from sklearn.utils.validation import _check_feature_names_in as check_feature_names_in
from sklearn.utils.validation import _check_sample_weight
from sklearn.utils.validation import _num_samples as num_samples

try:  # scikit-learn >= 1.9: sparse output follows the configured interface (spmatrix or sparray)
    from sklearn.utils._sparse import _align_api_if_sparse as align_api_if_sparse
except ImportError:  # older releases return scipy.sparse matrices as they are

    def align_api_if_sparse(X):
        return X


__all__ = ["HasMethods", "Interval", "InvalidParameterError", "StrOptions", "align_api_if_sparse",
           "check_density", "check_feature_names_in", "check_sample_weight", "estimator_html_repr",
           "get_param_names", "num_samples", "sparse_random_matrix", "wrap_data_with_container"]


def check_sample_weight(sample_weight, X, *, dtype=None, ensure_non_negative=False):
    """scikit-learn's ``_check_sample_weight`` with the keywords every supported release takes."""
    return _check_sample_weight(sample_weight, X, dtype=dtype, ensure_non_negative=ensure_non_negative)


def get_param_names(cls) -> list:
    """The constructor parameters of an estimator class (``BaseEstimator._get_param_names``)."""
    return cls._get_param_names()
