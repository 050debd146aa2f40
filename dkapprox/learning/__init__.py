"""What every learner shares: one-pass statistics, penalized solves, targets, the streamed pass and predict."""

from ._moments import (
    STATISTICS_BYTES,
    check_weights,
    fold_key,
    hashed_folds,
    moments_nbytes,
    pool_folds,
    without_folds,
)
from ._search import search_results
from ._solve import fold_errors, intercept_of, normal_equations, penalties, solve_ridge, solve_ridge_path, target_scores
from ._streaming import (
    PREDICT_ROWS,
    StreamedScore,
    apply_rows,
    as_targets,
    check_sample_weight,
    check_Xy,
    classifier_targets,
    distinct_labels,
    gather_moments,
    in_memory,
    lazy_predict,
    target_input,
)
from ._targets import (
    ClassifierState,
    LinearState,
    NumericTargets,
    decision_block,
    label_block,
    label_output,
    labels_of,
    linear_predict,
)
