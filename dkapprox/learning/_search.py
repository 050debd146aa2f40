"""A search's ``cv_results_``, in scikit-learn's ``GridSearchCV`` shape: the one builder every search uses."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from scipy.stats import rankdata


def search_results(candidates, alphas, scores):
    """``cv_results_`` in scikit-learn's ``GridSearchCV`` shape, alpha fastest.

    ``candidates``: dicts of the other parameters; ``scores``: (n_candidates, n_alphas, n_folds).
    """
    n_c, n_a, n_f = scores.shape
    flat = scores.reshape(n_c * n_a, n_f)
    params = [{**point, "alpha": float(alpha)} for point in candidates for alpha in alphas]
    params = [dict(sorted(p.items())) for p in params]
    results = {f"param_{name}": _param_column([p[name] for p in params]) for name in params[0]}
    results["params"] = params
    for k in range(n_f):
        results[f"split{k}_test_score"] = flat[:, k]
    mean = flat.mean(axis=1)
    results["mean_test_score"] = mean
    results["std_test_score"] = flat.std(axis=1)
    # equal means share the best rank, as scikit-learn's (rankdata's 'min')
    results["rank_test_score"] = rankdata(-mean, method="min").astype(np.int32)
    return results


def _param_column(values):
    """A ``param_<name>`` column as scikit-learn makes it: a masked array, numeric where every value is a number."""
    numeric = all(isinstance(v, (Integral, float, np.floating)) and not isinstance(v, bool) for v in values)
    column = np.asarray(values) if numeric else np.array(values, dtype=object)
    return np.ma.MaskedArray(column, mask=False)
