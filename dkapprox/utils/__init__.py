"""Small helpers every floor above may use: scikit-learn compatibility, hashing, CPUs, progress, xarray."""

from ._format import format_size
from ._progress import CountBar, compute, news, show_distributed, where
from ._random import FMIX1, FMIX2, FMIX_ONE, FMIX_S32, FMIX_S33, GOLDEN, fmix64, splitmix64
from ._sklearn_compat import (
    HasMethods,
    Interval,
    InvalidParameterError,
    StrOptions,
    align_api_if_sparse,
    check_density,
    check_feature_names_in,
    check_sample_weight,
    estimator_html_repr,
    get_param_names,
    num_samples,
    sparse_random_matrix,
    wrap_data_with_container,
)
from ._system import available_cpus, touched_empty
from ._xarray import is_dataarray, wrap_like
