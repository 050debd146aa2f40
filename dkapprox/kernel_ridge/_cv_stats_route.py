"""The statistics route of a kernel ridge search: one pass of every fold's statistics, every candidate solved on
the driver (:mod:`._cv_stats`); a classifier's held-out classes take one more pass."""

from __future__ import annotations

import time

import numpy as np
import scipy.linalg

from . import _cv_stats as cv
from ._cv_grid import Found, check_folds, data_pass


class StatisticsRoute:
    """Every (kernel, alpha, fold) candidate solved exactly from one pass's per-fold statistics.

    ``search`` reads the data (once; twice for a classifier) and scores every candidate; ``refit`` solves
    the chosen one on every row from the same statistics, with no pass. ``passes`` and ``n_iter`` (0: no
    CG) count what it did; ``seconds`` (shared with the search) gets each phase's.
    """

    def __init__(self, grid, arrays, lazy, check, n_samples, seconds):
        self.grid, self.arrays, self.lazy, self.check = grid, arrays, lazy, check
        self.n_samples, self.seconds = n_samples, seconds
        self.passes, self.n_iter = 0, 0

    def search(self) -> Found:
        grid, arrays, lazy, seconds = self.grid, self.arrays, self.lazy, self.seconds
        n_k, alphas, n_folds, m = len(grid.kernels), grid.alphas, grid.n_folds, grid.points.shape[0]
        t0 = time.perf_counter()
        G, r, sums, positives, counts = data_pass(arrays, grid.statistics_state(self.check), lazy,
                                                  cv.statistics_partial, cv.combine_statistics)
        G = cv.symmetric(G)
        self.passes += 1
        seconds["statistics"] = time.perf_counter() - t0
        c = grid.constant
        G, r, sums = G * c, r * c, sums * c
        check_folds(sums, positives, counts, self.n_samples, n_folds, grid.classes)
        t0 = time.perf_counter()
        self.G_all, self.r_all = G.sum(axis=1), r.sum(axis=1)
        z = np.empty((n_k, n_folds, alphas.size, m, r.shape[3]))  # each candidate's T a
        for g in range(n_k):
            for f in range(n_folds):
                z[g, f] = cv.ridge_path(self.G_all[g] - G[g, f], self.r_all[g] - r[g, f], alphas)
        seconds["solves"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if grid.classes is None:
            scores = np.empty((n_k, alphas.size, n_folds))
            for g in range(n_k):
                for f in range(n_folds):
                    for a in range(alphas.size):
                        coef = z[g, f, a]  # (m, t)
                        sse = sums[f, 2] - 2 * np.einsum("mt,mt->t", coef, r[g, f]) + np.einsum(
                            "mt,mn,nt->t", coef, G[g, f], coef)
                        scores[g, a, f] = cv.regression_scores(np.maximum(sse, 0.0), sums[f], grid.scoring)
        else:
            # each candidate's a = T^-1 z, (n_kernels, n_folds, m, n_alphas * t): column a * t + target, as
            # fold_predictions_partial reads it
            stacked = np.transpose(z, (0, 1, 3, 2, 4)).reshape(n_k, n_folds, m, -1)
            stacked = np.stack([[scipy.linalg.solve_triangular(grid.factors[g], stacked[g, f], check_finite=False)
                                 for f in range(n_folds)] for g in range(n_k)])
            correct, weight = data_pass(arrays, grid.statistics_state(None, coefs=stacked), lazy,
                                        cv.fold_predictions_partial, cv.combine_predictions)
            self.passes += 1
            scores = np.moveaxis(correct / weight[None, :, None], 1, 2)  # (n_kernels, n_alphas, n_folds)
        seconds["scores"] = time.perf_counter() - t0
        return Found(scores, sums[:, 0, 0])

    def refit(self, g, a):
        """Kernel candidate ``g`` with alpha ``alphas[a]`` on every row: its dual coefficients (m, t)."""
        t0 = time.perf_counter()
        dual = scipy.linalg.solve_triangular(
            self.grid.factors[g], cv.ridge_path(self.G_all[g], self.r_all[g], [self.grid.alphas[a]])[0],
            check_finite=False)
        self.seconds["refit"] = time.perf_counter() - t0
        return dual
