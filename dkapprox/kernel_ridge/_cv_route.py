"""Which route a kernel ridge search takes: whether each fits the memory of a task, and which costs less.

The statistics route (:mod:`._cv_stats_route`) gathers ``m x m`` statistics per kernel candidate and fold
in one pass; the CG route (:mod:`._cv_cg_route`) advances every candidate's columns by Falkon's CG, a pass
an iteration. :func:`check_size` refuses a route whose partial would not fit
``dkapprox.cv-statistics-bytes``; :func:`choose_route` takes the user's route, else the cheaper by a probe
timed on the driver.
"""

from __future__ import annotations

import time

import dask
import numpy as np
from threadpoolctl import threadpool_limits

from ..learning import STATISTICS_BYTES
from ..utils import format_size
from . import _cv_cg as cg
from . import _cv_stats as cv

#: rows of the probe that times both routes' block functions on the driver (route='auto'): enough for the
#: statistics route's per-fold slices to run as a block's do (benchmarks/bench_kernel_ridge_cv.py --part cost
#: measures this)
PROBE_ROWS = 2048
#: route='auto' takes the statistics route without a probe below this many of its multiply-adds (``2 n m^2``
#: a kernel candidate): a small search, the same route every time
PROBE_ABOVE_FLOPS = 2e10


def check_size(route, kernel_params, n_kernels, n_folds, m, n_alphas, n_targets):
    """The route's partial must fit ``dkapprox.cv-statistics-bytes``: the statistics route's ``m x m`` per
    kernel candidate (gamma, with a point of ``kernel_params``) and fold; the CG route's columns. Returns
    whether the statistics fit (route='auto' then takes CG); raises if the route the user named does not fit."""
    limit = int(dask.config.get("dkapprox.cv-statistics-bytes", STATISTICS_BYTES))
    kernels = "n_gammas" if kernel_params is None else "n_kernels (gammas x kernel_params points)"
    columns = n_kernels * n_alphas * (n_folds + 1) * n_targets
    cg_size = 3 * columns * m * 8  # directions, iterates to score, products
    if route != "statistics" and cg_size > limit:
        most = max(0, int(limit / (3 * 8 * columns)))
        raise ValueError(
            f"The search's CG columns would take {format_size(cg_size)} a task ({columns} columns = {kernels} x "
            f"n_alphas x (n_folds + 1) x n_targets, of n_centers={m} float64, three times), more than "
            f"dkapprox.cv-statistics-bytes={format_size(limit)}: use at most {most} centers with this grid, or "
            "fewer gammas, alphas or folds (or raise the limit where the workers have the memory).")
    size = n_kernels * n_folds * m * m * 8
    if size > limit and route == "auto":
        return False
    if size > limit:
        most = max(0, int((limit / (8 * n_kernels * n_folds)) ** 0.5))
        raise ValueError(
            f"The search's statistics would take {format_size(size)} a task ({kernels}={n_kernels} x "
            f"n_folds={n_folds} x n_centers^2={m}^2 float64), more than dkapprox.cv-statistics-bytes="
            f"{format_size(limit)}: use at most {most} centers with this grid, or fewer gammas or folds "
            "(or raise the limit where the workers have the memory), or route='cg'.")
    return True


def choose_route(route, grid, statistics_fit, n_samples, max_iter):
    """``(route, {route: estimated seconds})``: the user's, else the cheaper by a measured probe.

    A statistics pass under :data:`PROBE_ABOVE_FLOPS` is taken at once. Otherwise both routes' block
    functions run on the driver over the same probe rows (the first centers of ``grid``, a
    :class:`._cv_grid.SearchGrid`); the statistics route costs its one pass (two for a classifier), the
    CG route its full-width pass times :func:`._cv_cg.expected_passes`. Both on one BLAS thread, as a
    block task runs. The estimate is for the whole data in one process: per probe row times n_samples.
    """
    if route != "auto":
        return route, {}
    if not statistics_fit:
        return "cg", {}
    m = grid.points.shape[0]
    if 2.0 * n_samples * m * m * len(grid.kernels) < PROBE_ABOVE_FLOPS:
        return "statistics", {}  # a small pass: the exact route, no probe, no chance
    probe = grid.points[: min(PROBE_ROWS, grid.points.shape[0])].astype(grid.dtype)
    rows = probe.shape[0]
    zeros = np.zeros((rows, grid.targets.n_targets))
    stats_state = grid.statistics_state(None, probe=True)
    runs = [lambda part, y: cv.statistics_partial(0, stats_state, part, y)]
    if grid.classes is not None:
        coefs = np.zeros((len(grid.kernels), grid.n_folds, grid.points.shape[0],
                          grid.alphas.size * grid.targets.n_targets))
        pred_state = grid.statistics_state(None, coefs=coefs, probe=True)
        runs.append(lambda part, y: cv.fold_predictions_partial(0, pred_state, part, y))
    full = grid.probe_pass()
    with threadpool_limits(1):  # a block task's BLAS threads (dkapprox.engine._blas)
        cost = {"statistics": sum(_seconds(run, probe, zeros) for run in runs),
                "cg": _seconds(lambda part, y: cg.cg_partial(0, full, part, y), probe, zeros)}
    cost["cg"] *= cg.expected_passes(max_iter)
    cost = {k: v * n_samples / rows for k, v in cost.items()}
    return min(cost, key=cost.get), cost


def _seconds(run, rows, y):
    """Seconds of ``run(rows, y)``, after a warm-up on a few rows (compiled code, caches, first allocations)."""
    run(rows[:16], y[:16])
    t0 = time.perf_counter()
    run(rows, y)
    return time.perf_counter() - t0
