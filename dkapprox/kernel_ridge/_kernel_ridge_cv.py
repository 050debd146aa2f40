"""KernelRidgeCV and KernelRidgeClassifierCV: the kernel's parameters, alpha and folds searched in one pass."""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass
from numbers import Integral, Real

import dask
import numpy as np
import scipy.linalg
import scipy.sparse as sp
from scipy.stats import rankdata
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS
from sklearn.utils import check_random_state
from threadpoolctl import threadpool_limits

from .. import backends, engine, inputs, utils
from ..inputs import BlockCheck, row_source
from ..kernels import Kernel
from ..learning import (
    STATISTICS_BYTES,
    NumericTargets,
    check_sample_weight,
    check_Xy,
    classifier_targets,
    distinct_labels,
    fold_key,
    search_results,
    target_input,
)
from ..utils import Interval, StrOptions, format_size
from . import _cv_cg as cg
from . import _cv_stats as cv
from . import _kernel_grid
from ._falkon import Centers
from ._kernel_ridge import (
    _FalkonKernelRidge,
    _KernelRidgeClassifier,
    _KernelRidgeRegressor,
)

log = logging.getLogger("dkapprox.linear_model")

REGRESSION_SCORINGS = ("r2", "neg_mean_squared_error", "neg_root_mean_squared_error")
CLASSIFICATION_SCORINGS = ("accuracy",)
#: the default bandwidth grid: these multiples of gamma='scale' (1 / (n_features * X.var()))
DEFAULT_GAMMA_FACTORS = (0.1, 0.3, 1.0, 3.0, 10.0)
#: rows of the probe that times both routes' block functions on the driver (route='auto'): at 512 the statistics
#: route's per-fold slices were a hundred rows and its triangular solves ran at a fraction of a block's speed
#: (benchmarks/bench_kernel_ridge_cv.py --part choice compares the estimates with the searches' times)
PROBE_ROWS = 2048
#: route='auto' below this many multiply-adds of the statistics route (its ``2 n m^2`` per gamma) takes it
#: without a probe: on any machine a few seconds at most, and a search the same route every time
PROBE_ABOVE_FLOPS = 2e10


class _KernelRidgeSearch(_FalkonKernelRidge):
    """Shared by both searches: the grid, the folds, the one statistics pass and the driver's solves."""

    _parameter_constraints: dict = {
        "alphas": ["array-like"],
        "gammas": ["array-like", None],
        "kernel": [StrOptions(set(PAIRWISE_KERNEL_FUNCTIONS) - {"precomputed"})],
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "n_centers": [Interval(Integral, 1, None, closed="left"), None],
        "centers": _FalkonKernelRidge._parameter_constraints["centers"],
        "center_params": [dict, None],
        "cv": [Interval(Integral, 2, None, closed="left"), "array-like", "cv_object"],
        "scoring": [str, None],
        "route": [StrOptions({"auto", "statistics", "cg"})],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "halving_factor": [Interval(Real, 1, None, closed="neither"), None],
        "random_state": ["random_state"],
    }
    _scorings: tuple = ()

    def __init__(self, alphas=(1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0), *, gammas=None, kernel="rbf", degree=3, coef0=1,
                 kernel_params=None, n_centers=None, centers="uniform", center_params=None, cv=5, scoring=None,
                 route="auto", tol=1e-4, max_iter=100, halving_factor=3, random_state=None):
        self.alphas = alphas
        self.gammas = gammas
        self.kernel = kernel
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.n_centers = n_centers
        self.centers = centers
        self.center_params = center_params
        self.cv = cv
        self.scoring = scoring
        self.route = route
        self.tol = tol
        self.max_iter = max_iter
        self.halving_factor = halving_factor
        self.random_state = random_state

    def _validate_params(self):
        """scikit-learn's check of each parameter, then ``kernel_params``'s grid against the kernel: before any
        data is read (and the command line's usage errors come from here)."""
        super()._validate_params()
        _kernel_grid.kernel_points(self.kernel, self.kernel_params)

    def _kernel(self) -> Kernel:
        """The chosen kernel (a model saved before ``degree_`` and ``coef0_`` existed: the fixed ones)."""
        params = {"gamma": getattr(self, "gamma_", None), "degree": getattr(self, "degree_", self.degree),
                  "coef0": getattr(self, "coef0_", self.coef0)}
        return Kernel(self.kernel, tuple(sorted(params.items())))

    # -- the grid -------------------------------------------------------------------------------
    def _grid(self, name, values):
        grid = np.atleast_1d(np.asarray(values, dtype=np.float64)).ravel() if values is not None else None
        if grid is not None and (grid.size == 0 or not np.all(np.isfinite(grid)) or np.any(grid <= 0)):
            raise ValueError(f"{name} must be a non-empty list of positive numbers; got {values!r}.")
        return grid

    def _scoring(self):
        scoring = self.scoring or self._scorings[0]
        if scoring not in self._scorings:
            raise ValueError(f"scoring={scoring!r} cannot be computed from streamed statistics by "
                             f"{type(self).__name__}; the scorings it offers are {', '.join(self._scorings)}.")
        return scoring

    def _folds(self, X, lazy, n_samples):
        """``(n_folds, labels or None, label array or None)``: hashed folds for an int cv, else the labels."""
        if isinstance(self.cv, Integral):
            if self.cv > n_samples:
                raise ValueError(f"Cannot have number of folds n_folds={self.cv} greater than the number of "
                                 f"samples: n_samples={n_samples}.")
            return int(self.cv), None, None
        splits = self.cv
        if hasattr(splits, "split") and not hasattr(splits, "ndim"):  # a scikit-learn splitter
            splits = list(splits.split(np.zeros((n_samples, 1))))
        if isinstance(splits, (list, tuple)) and splits and isinstance(splits[0], tuple):
            splits = _labels_of_splits(splits, n_samples)
        given = target_input(splits)
        labels = given.data
        if labels.ndim != 1 or labels.shape[0] != n_samples:
            raise ValueError(f"cv as fold labels must be one label per row of X: got shape {tuple(labels.shape)} "
                             f"for {n_samples} rows.")
        if given.lazy:
            distinct = np.asarray(distinct_labels(labels))  # one pass over the labels (dask's unique: legacy only)
            if not lazy:
                labels = np.asarray(inputs.compute(labels)[0])
        else:
            labels = np.asarray(labels)
            distinct = np.unique(labels)
            if lazy:
                import dask.array as da

                labels = da.from_array(labels, chunks=(X.chunks[0],))
        if distinct.size < 2:
            raise ValueError(f"cv as fold labels needs at least 2 distinct folds; got {distinct.size}.")
        return int(distinct.size), distinct, labels

    def _check_size(self, n_kernels, n_folds, m, n_alphas, n_targets):
        """The route's partial must fit ``dkapprox.cv-statistics-bytes``: the statistics route's ``m x m`` per
        kernel candidate (gamma, with a point of ``kernel_params``) and fold; the CG route's columns. Returns
        whether the statistics fit (route='auto' then takes CG); raises if the route the user named does not fit."""
        limit = int(dask.config.get("dkapprox.cv-statistics-bytes", STATISTICS_BYTES))
        kernels = "n_gammas" if self.kernel_params is None else "n_kernels (gammas x kernel_params points)"
        columns = n_kernels * n_alphas * (n_folds + 1) * n_targets
        cg_size = 3 * columns * m * 8  # directions, iterates to score, products
        if self.route != "statistics" and cg_size > limit:
            most = max(0, int(limit / (3 * 8 * columns)))
            raise ValueError(
                f"The search's CG columns would take {format_size(cg_size)} a task ({columns} columns = {kernels} x "
                f"n_alphas x (n_folds + 1) x n_targets, of n_centers={m} float64, three times), more than "
                f"dkapprox.cv-statistics-bytes={format_size(limit)}: use at most {most} centers with this grid, or "
                "fewer gammas, alphas or folds (or raise the limit where the workers have the memory).")
        size = n_kernels * n_folds * m * m * 8
        if size > limit and self.route == "auto":
            return False
        if size > limit:
            most = max(0, int((limit / (8 * n_kernels * n_folds)) ** 0.5))
            raise ValueError(
                f"The search's statistics would take {format_size(size)} a task ({kernels}={n_kernels} x "
                f"n_folds={n_folds} x n_centers^2={m}^2 float64), more than dkapprox.cv-statistics-bytes="
                f"{format_size(limit)}: use at most {most} centers with this grid, or fewer gammas or folds "
                "(or raise the limit where the workers have the memory), or route='cg'.")
        return True

    # -- the fit ----------------------------------------------------------------------------------
    def _search(self, X, y, targets, lazy, sample_weight, classes=None):
        """Centers, then the statistics route or the CG route (chosen by measured cost); the chosen model."""
        started = time.perf_counter()
        seconds = {}
        alphas = self._grid("alphas", self.alphas)
        gammas = self._grid("gammas", self.gammas)
        kernel_points = _kernel_grid.kernel_points(self.kernel, self.kernel_params)
        scoring = self._scoring()
        if backends.namespace(X._meta if lazy else X) is not None:
            raise ValueError(f"{type(self).__name__} runs on NumPy blocks: device arrays (CuPy) are not supported "
                             "yet. Copy X to the host first.")
        passes = 0
        if gammas is None:
            from ..kernel_approximation import data_variance

            var = float(data_variance(X, type(self).__name__))
            scale = 1.0 / (X.shape[1] * var) if var != 0 else 1.0
            gammas = scale * np.asarray(DEFAULT_GAMMA_FACTORS)
            passes += 1 if lazy else 0
        check = BlockCheck(type(self).__name__)
        rows = row_source(X, check=check if lazy else None)
        n_samples = rows.n_rows
        n_folds, labels, label_array = self._folds(X, lazy, n_samples)
        selector = self._selector(X)
        m = self._n_centers(n_samples, selector)
        fixed = {"coef0": self.coef0, "degree": self.degree}
        candidates, kernels = _kernel_grid.kernel_candidates(self.kernel, fixed, kernel_points, gammas)
        statistics_fit = self._check_size(len(kernels), n_folds, m, alphas.size, targets.n_targets)
        middle = {**kernel_points[len(kernel_points) // 2], "gamma": float(np.sort(gammas)[gammas.size // 2])}
        kernel = _kernel_grid.kernel_of(self.kernel, fixed, middle)
        chosen = selector.select(rows, m, kernel, check_random_state(self.random_state))
        points = chosen.components
        points64 = np.asarray(points.toarray() if sp.issparse(points) else points, dtype=np.float64)
        passes += rows.passes
        seconds["centers"] = time.perf_counter() - started
        weights, constant = check_sample_weight(sample_weight, X, lazy)
        if lazy:
            if any(c != c for c in X.chunks[0]):
                X = engine.with_row_sizes(X, rows.sizes)
            X, self.input_persisted_ = inputs.persist_if_fits(X)
        else:
            self.input_persisted_ = False
        arrays = [X, y] + ([] if label_array is None else [label_array]) + ([] if weights is None else [weights])
        t0 = time.perf_counter()
        factors = np.stack([cv.center_factor(k, points64) for k in kernels])
        seconds["factors"] = time.perf_counter() - t0
        dtype = X.dtype if X.dtype in (np.float32, np.float64) else np.float64
        grid = _Grid(kernels, candidates, alphas, points64, factors, n_folds, fold_key(self.random_state), labels,
                     targets, weights is not None, 1.0 if constant is None else float(constant), scoring, classes,
                     dtype)
        t0 = time.perf_counter()
        self.route_, self.route_seconds_ = self._choose_route(grid, statistics_fit, n_samples)
        seconds["route"] = time.perf_counter() - t0
        route = self._statistics_route if self.route_ == "statistics" else self._cg_route
        result = route(grid, arrays, lazy, check if lazy else None, n_samples, seconds)
        g, a = result["best"]
        best = dict(kernels[g].params)
        self.gamma_, self.alpha_ = float(best["gamma"]), float(alphas[a])
        self.degree_, self.coef0_ = best["degree"], best["coef0"]
        self.centers_ = points.astype(dtype) if points.dtype != dtype else points
        self.center_indices_ = chosen.indices
        self.center_passes_ = rows.passes
        self.dual_coef_ = result["dual"].astype(dtype)
        self.passes_ = passes + result["passes"]
        self.n_iter_ = result["n_iter"]
        self.n_splits_ = n_folds
        seconds["total"] = time.perf_counter() - started
        self.phase_seconds_ = seconds
        points = "" if self.kernel_params is None else f" x {len(kernel_points)} kernel_params points"
        utils.news(log, "%s: %d gammas%s x %d alphas x %d folds by %s in %d passes, %.1f s: best %s, alpha=%g "
                       "(%s %.4g)", type(self).__name__, gammas.size, points, alphas.size, n_folds, self.route_,
                       self.passes_, seconds["total"], _kernel_grid.shown(candidates[g]), self.alpha_, scoring,
                       self.best_score_)
        return self

    def _choose_route(self, grid, statistics_fit, n_samples):
        """``(route, {route: estimated seconds})``: the user's, else the cheaper by a measured probe.

        A statistics pass under :data:`PROBE_ABOVE_FLOPS` is taken at once. Otherwise both routes' block
        functions run on the driver over the same probe rows (the first centers); the
        statistics route costs its one pass (two for a classifier), the CG route its full-width pass
        times :func:`._cv_cg.expected_passes`. Both on one BLAS thread, as a block task runs. The
        estimate is for the whole data in one process: per probe row times n_samples.
        """
        if self.route != "auto":
            return self.route, {}
        if not statistics_fit:
            return "cg", {}
        m = grid.points.shape[0]
        if 2.0 * n_samples * m * m * len(grid.kernels) < PROBE_ABOVE_FLOPS:
            return "statistics", {}  # a second or so of work at most: the exact route, no probe, no chance
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
        cost["cg"] *= cg.expected_passes(self.max_iter)
        cost = {k: v * n_samples / rows for k, v in cost.items()}
        return min(cost, key=cost.get), cost

    def _statistics_route(self, grid, arrays, lazy, check, n_samples, seconds):
        """One pass of every fold's statistics, every candidate solved on the driver (:mod:`._cv_stats`)."""
        n_k, alphas, n_folds, m = len(grid.kernels), grid.alphas, grid.n_folds, grid.points.shape[0]
        t0 = time.perf_counter()
        G, r, sums, positives, counts = self._pass(arrays, grid.statistics_state(check), lazy, cv.statistics_partial,
                                                   cv.combine_statistics)
        G = cv.symmetric(G)
        passes = 1
        seconds["statistics"] = time.perf_counter() - t0
        c = grid.constant
        G, r, sums = G * c, r * c, sums * c
        self._check_folds(sums, positives, counts, n_samples, n_folds, grid.classes)
        t0 = time.perf_counter()
        G_all, r_all = G.sum(axis=1), r.sum(axis=1)
        z = np.empty((n_k, n_folds, alphas.size, m, r.shape[3]))  # each candidate's T a
        for g in range(n_k):
            for f in range(n_folds):
                z[g, f] = cv.ridge_path(G_all[g] - G[g, f], r_all[g] - r[g, f], alphas)
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
            correct, weight = self._pass(arrays, grid.statistics_state(None, coefs=stacked), lazy,
                                         cv.fold_predictions_partial, cv.combine_predictions)
            passes += 1
            scores = np.moveaxis(correct / weight[None, :, None], 1, 2)  # (n_kernels, n_alphas, n_folds)
        seconds["scores"] = time.perf_counter() - t0
        self._results(grid.candidates, alphas, scores, sums[:, 0, 0])
        g, a = np.unravel_index(self.best_index_, (n_k, alphas.size))
        t0 = time.perf_counter()
        dual = scipy.linalg.solve_triangular(grid.factors[g], cv.ridge_path(G_all[g], r_all[g], [alphas[a]])[0],
                                             check_finite=False)
        seconds["refit"] = time.perf_counter() - t0
        return {"best": (g, a), "dual": dual, "passes": passes, "n_iter": 0}

    def _cg_route(self, grid, arrays, lazy, check, n_samples, seconds):
        """Every candidate's fold and all-rows columns advanced by CG in the same passes (:mod:`._cv_cg`),
        losing candidates dropped by successive halving; the chosen one's all-rows column run on to ``tol``."""
        alphas, F, t = grid.alphas, grid.n_folds, grid.targets.n_targets
        n_g, n_a = len(grid.kernels), alphas.size  # g: a kernel candidate
        t0 = time.perf_counter()
        width = (F + 1) * t
        colfold, coltarget = np.repeat(np.arange(F + 1), t), np.tile(np.arange(t), F + 1)
        products, _, sums = self._pass(arrays, grid.cg_state(range(n_g), [None] * n_g, [colfold] * n_g,
                                                             [coltarget] * n_g, [None] * n_g, first=True,
                                                             check=check), lazy, cg.cg_partial, cg.combine_cg)
        passes = 1
        sums, positives, counts = sums
        c = grid.constant
        sums = sums * c
        self._check_folds(sums, positives, counts, n_samples, F, grid.classes)
        total = float(sums[:, 0, 0].sum())
        columns = [cg.GammaColumns(grid.factors[g], alphas, F, t, total, total * (F - 1) / F) for g in range(n_g)]
        everything = np.arange(n_a * width)
        for g, gc in enumerate(columns):
            gc.start(np.tile(products[g] * c, (1, n_a)), everything)
        seconds["first pass"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        scores = np.full((n_g, n_a, F), -np.inf)
        dropped = np.zeros((n_g, n_a), dtype=int)
        factor = self.halving_factor
        iteration = 0
        nothing = np.array([], dtype=int)

        def advance(run, score):
            """One pass: CG steps for ``run[g]`` columns, scores of the candidates ``score`` picked. The
            driver's m x m algebra runs on one BLAS thread: its solves are small, and threaded they waited
            on threads (6x slower at m = 100 on this project's 2-core VM, the workers busy beside them)."""
            live = [g for g in range(n_g) if run[g].size or score[g][0].size]
            with threadpool_limits(1):
                V = [columns[g].directions(run[g]) if run[g].size else None for g in live]
            state = grid.cg_state(live, V, [columns[g].colfold[run[g]] for g in live],
                                  [columns[g].coltarget[run[g]] for g in live], [score[g][1] for g in live])
            data, raw, _ = self._pass(arrays, state, lazy, cg.cg_partial, cg.combine_cg)
            residual = 0.0
            with threadpool_limits(1):
                for i, g in enumerate(live):
                    if run[g].size:
                        residual = max(residual, columns[g].step(data[i] * c, run[g], self.tol))
                    cands = score[g][0]
                    if cands.size:
                        scores[g, cands] = cg.fold_scores(raw[i], cands, sums, c, grid.classes is not None,
                                                          grid.scoring, sums[:, 0, 0], t)
            return residual

        def to_score():
            with threadpool_limits(1):
                return [gc.to_score() for gc in columns]

        while iteration < self.max_iter and any(gc.held_out_running().size for gc in columns):
            # scores only where a halving reads them (a pass's scoring cost 0.18 of it at m = 2,048, 6 alphas,
            # 5 folds: profiled); the last iterates' in one pass after the loop
            halving = factor is not None and iteration + 1 in cg.HALVING_PASSES
            score = to_score() if halving else [(nothing, None)] * n_g
            for gc, (cands, _) in zip(columns, score):
                gc.dirty[cands] = False
            residual = advance([gc.running() for gc in columns], score)
            iteration += 1
            passes += 1
            live = np.concatenate([gc.live for gc in columns])
            utils.news(log, "%s: CG iteration %d, %d of %d candidates running, largest residual %.3g",
                           type(self).__name__, iteration, int(live.sum()), live.size, residual)
            if halving and live.sum() > 1:
                judged = np.concatenate([gc.scored_residual <= cg.JUDGED_RESIDUAL for gc in columns])
                keep = cg.keep_best(scores.reshape(n_g * n_a, F), live, judged, factor)
                for flat in np.setdiff1d(np.flatnonzero(live), keep):
                    g, a = divmod(int(flat), n_a)
                    columns[g].live[a] = False
                    dropped[g, a] = iteration
        score = to_score()
        if any(cands.size for cands, _ in score):  # the last iterates' scores: one pass, no CG step
            advance([nothing] * n_g, score)
            passes += 1
        seconds["search"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        iterations = np.stack([gc.iterations for gc in columns])
        self._results(grid.candidates, alphas, scores, sums[:, 0, 0], dropped=dropped, iterations=iterations)
        g, a = np.unravel_index(self.best_index_, (n_g, n_a))
        best = columns[g]
        _, cols = best.dual(a)
        refit = 0
        while iteration + refit < self.max_iter and best.active[cols].any():
            run = [nothing] * n_g
            run[g] = cols[best.active[cols]]
            advance(run, [(nothing, None)] * n_g)
            refit += 1
            passes += 1
        dual, cols = best.dual(a)
        if best.active[cols].any():
            warnings.warn(f"{type(self).__name__}: conjugate gradient did not converge in max_iter={self.max_iter} "
                          f"iterations for the chosen {_kernel_grid.shown(grid.candidates[g])}, alpha={alphas[a]:g}; "
                          "increase max_iter.", ConvergenceWarning, stacklevel=3)
        seconds["refit"] = time.perf_counter() - t0
        return {"best": (g, a), "dual": dual, "passes": passes, "n_iter": iteration + refit}

    def _check_folds(self, sums, positives, counts, n_samples, n_folds, classes):
        empty = np.flatnonzero(sums[:, 0, 0] <= 0)
        if empty.size:
            raise ValueError(f"Cannot cross-validate n_samples={n_samples} in {n_folds} folds: fold(s) "
                             f"{empty.tolist()} received no rows (or no weight); use fewer folds.")
        if classes is not None:
            self._check_classes(positives, counts, classes)

    @staticmethod
    def _pass(arrays, state, lazy, chunk_fn, combine_fn):
        if not lazy:
            return chunk_fn(0, state, *arrays)
        reduced = engine.reduce_aligned_rows(arrays, chunk_fn, combine_fn, state, running=True)
        return inputs.compute(reduced, arrays=arrays[:1])[0]

    @staticmethod
    def _check_classes(positives, counts, classes):
        """Every fold's training rows (those outside it) must hold at least two classes."""
        for f in range(counts.shape[0]):
            pos = positives.sum(axis=0) - positives[f]  # rows of each one-vs-rest column's class
            if positives.shape[1] > 1:
                held = int((pos > 0).sum())
            else:  # two classes, one column: classes_[1] where positive, classes_[0] elsewhere
                held = int(pos[0] > 0) + int(counts.sum() - counts[f] - pos[0] > 0)
            if held < 2:
                raise ValueError(f"The training rows of fold {f} (every row outside it) hold fewer than two "
                                 f"of the classes {np.asarray(classes).tolist()}: use fewer folds, or fold labels "
                                 "that keep every class in each training set.")

    def _results(self, candidates, alphas, scores, fold_weights, dropped=None, iterations=None):
        """``cv_results_`` in scikit-learn's shape (``search_results``): the kernel candidates
        (dicts of gamma and the searched kernel_params) slowest, in their order.

        With the CG route, ``dropped`` (n_kernels, n_alphas) holds the iteration after which successive
        halving dropped each candidate (0: kept) and ``iterations`` the CG iterations its fold columns
        ran. A dropped candidate's scores are those of its last iterates; it ranks after every kept one
        (as scikit-learn's halving searches choose among the last round), and only a kept one is chosen.
        """
        n = len(candidates) * alphas.size
        dropped = np.zeros(n, dtype=int) if dropped is None else np.asarray(dropped).reshape(n)
        results = search_results(list(candidates), alphas, scores)
        mean = results["mean_test_score"]
        kept = dropped == 0
        rank = np.empty(n, dtype=np.int32)
        rank[kept] = rankdata(-mean[kept], method="min")
        if (~kept).any():
            rank[~kept] = kept.sum() + rankdata(-mean[~kept], method="min")
        results["rank_test_score"] = rank
        results["dropped_at_iteration"] = dropped
        results["n_iterations"] = np.zeros(n, dtype=int) if iterations is None else np.asarray(iterations).reshape(n)
        self.cv_results_ = results
        self.best_index_ = int(np.flatnonzero(kept)[np.argmax(mean[kept])])
        self.best_params_ = results["params"][self.best_index_]
        self.best_score_ = float(mean[self.best_index_])
        self.fold_weights_ = fold_weights


def _seconds(run, rows, y):
    """Seconds of ``run(rows, y)``, after a warm-up on a few rows (compiled code, caches, first allocations)."""
    run(rows[:16], y[:16])
    t0 = time.perf_counter()
    run(rows, y)
    return time.perf_counter() - t0


@dataclass(frozen=True)
class _Grid:
    """What both routes need: the grid, the centers and their factors, the folds, the targets."""

    kernels: tuple  # (n_kernels,) Kernel: each kernel candidate's full parameters
    candidates: tuple  # (n_kernels,) dicts: each one's searched parameters (gamma and kernel_params' names)
    alphas: np.ndarray
    points: np.ndarray  # (m, n_features) float64
    factors: np.ndarray  # (n_kernels, m, m)
    n_folds: int
    fold_key: int
    labels: np.ndarray | None
    targets: object
    weighted: bool
    constant: float  # a scalar sample_weight, 1 otherwise
    scoring: str
    classes: object
    dtype: object

    def _as(self, probe):
        """``(targets, labels, weighted)`` of a data pass, or of the probe (numeric zeros, hashed folds)."""
        if probe:
            return NumericTargets(self.targets.n_targets), None, False
        return self.targets, self.labels, self.weighted

    def statistics_state(self, check, coefs=None, probe=False):
        targets, labels, weighted = self._as(probe)
        return cv.GridState(self.kernels, self.points, self.factors, self.n_folds, self.fold_key, labels, targets,
                            weighted, check, coefs)

    def centers(self, g):
        """Kernel candidate ``g``'s centers: its kernel, the points in the blocks' dtype."""
        return Centers(self.kernels[g], self.points.astype(self.dtype))

    def cg_state(self, live, V, colfold, coltarget, S, first=False, check=None, probe=False):
        targets, labels, weighted = self._as(probe)
        return cg.CGPass(tuple(self.centers(g) for g in live), tuple(V), tuple(colfold), tuple(coltarget),
                         tuple(S), self.n_folds, self.fold_key, labels, targets, weighted, self.classes is not None,
                         first, check)

    def probe_pass(self):
        """A CG pass at its widest: every column of every kernel candidate, every candidate scored."""
        n_a, F, t, n_g = self.alphas.size, self.n_folds, self.targets.n_targets, len(self.kernels)
        m = self.points.shape[0]
        rng = np.random.default_rng(0)
        return self.cg_state(range(n_g), [rng.standard_normal((m, n_a * (F + 1) * t)) for _ in range(n_g)],
                             [np.tile(np.repeat(np.arange(F + 1), t), n_a)] * n_g,
                             [np.tile(np.arange(t), n_a * (F + 1))] * n_g,
                             [rng.standard_normal((F, m, n_a * t)) for _ in range(n_g)], probe=True)


def _labels_of_splits(splits, n_samples):
    """Fold labels of ``(train, test)`` splits whose test sets partition the rows (K-fold splitters')."""
    labels = np.full(n_samples, -1)
    for k, (train, test) in enumerate(splits):
        test = np.asarray(test)
        if test.dtype == bool:
            test = np.flatnonzero(test)
        if np.any(labels[test] >= 0):
            raise ValueError("cv's test sets overlap: each row must be held out by exactly one split.")
        labels[test] = k
        train = np.asarray(train)
        if np.setdiff1d(np.arange(n_samples), test).size != np.unique(train).size:
            raise ValueError("cv's splits must train on every row they do not hold out (K-fold splits).")
    if np.any(labels < 0):
        raise ValueError(f"cv's test sets leave {int((labels < 0).sum())} rows out of every fold: each row "
                         "must be held out by exactly one split.")
    return labels


class KernelRidgeCV(_KernelRidgeRegressor, _KernelRidgeSearch):
    """Kernel ridge with gamma, alpha (and degree, coef0) chosen by K-fold cross-validation in one pass.

    The grid search ``GridSearchCV(KernelRidge(kernel, n_centers=m), {'gamma': gammas, 'alpha':
    alphas, **kernel_params}, cv=...)`` would run as ``n_gammas x n_alphas x n_folds`` whole fits
    (times the points of ``kernel_params``, a grid of degree or coef0); this reads the data once for
    all of them (plus the centers' passes), and refits the best on every row from the same statistics.

    Parameters
    ----------
    alphas : array-like of shape (n_alphas,), default=(1e-3, 1e-2, 1e-1, 1, 10, 100)
        Ridge strengths to try (positive), scikit-learn's KernelRidge ``alpha``.
    gammas : array-like of shape (n_gammas,), default=None
        Bandwidths to try (positive). None: ``gamma='scale'`` (``1 / (n_features * X.var())``, one
        pass over dask input) times 0.1, 0.3, 1, 3 and 10. Why 'scale' and not the median distance
        of a sample: it is exact and chunk-invariant, costs one pass that reads each block once, and
        for standardized features the median heuristic ``1 / median |x - x'|^2`` is ``1 / (2 d)``,
        half of it: within the grid's two decades.
    kernel : str, default='rbf'
        A kernel of ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS`` that takes ``gamma``.
        rbf and laplacian share one distance computation across the gammas; the others compute
        the kernel once per kernel candidate (a gamma, with a point of ``kernel_params``).
    degree, coef0 : float
        Of the polynomial and sigmoid kernels, fixed during the search unless ``kernel_params``
        names them (its values then replace these).
    kernel_params : dict of str to list, default=None
        A grid of the kernel's other parameters to search, as ``GridSearchCV``'s ``param_grid``:
        ``'degree'`` (poly) and ``'coef0'`` (poly, sigmoid) to non-empty lists of finite numbers,
        e.g. ``{'degree': [2, 3], 'coef0': [0, 1]}``. Its points, in ``ParameterGrid``'s order,
        are crossed with ``gammas``: each (point, gamma) is a kernel candidate, each candidate's
        kernel computed once a block, its factor once. A name the kernel does not take, and
        ``'gamma'`` (the grid is ``gammas``), are refused. None: the fixed ``degree`` and ``coef0``.
        Not scikit-learn ``KernelRidge``'s ``kernel_params`` (a callable kernel's fixed arguments):
        the search takes named kernels only.
    n_centers : int, default=None
        Number of centers ``m``, chosen once for the whole search; None: ``min(1000, n_samples)``.
    centers : {'uniform', 'kmeans', 'leverage', 'rpcholesky'} or array-like, default='uniform'
        As in :class:`KernelRidge`. A kernel-dependent method (leverage, rpcholesky) uses the
        grid's middle gamma (with ``kernel_params``' middle point).
    center_params : dict, default=None
    cv : int, array-like of shape (n_samples,), K-fold splitter or list of (train, test), default=5
        An int: that many folds, by a seeded hash of the global row index (chunk-invariant; the
        same folds as :class:`RidgeCV` and :class:`HashedKFold` with the same ``random_state``).
        An array (NumPy or dask, aligned with X's rows): each row's fold label, for grouped or
        time-ordered data. A scikit-learn splitter, or its splits, whose test sets partition the
        rows (``KFold``, ``GroupKFold``, ``PredefinedSplit``): read as fold labels (in memory).
    scoring : str, default=None
        'r2' (default), 'neg_mean_squared_error' or 'neg_root_mean_squared_error', averaged over targets, weighted by
        sample_weight: scores a fold's statistics give exactly.
    route : {'auto', 'statistics', 'cg'}, default='auto'
        How every candidate is solved. 'statistics': one pass of per-fold ``m x m`` statistics, every
        candidate solved exactly on the driver (``2 n m^2`` multiply-adds a kernel candidate). 'cg':
        Falkon's CG with every candidate's fold columns in the same passes (about ``4 n m`` a column
        and iteration), losing candidates dropped by successive halving. 'auto': the statistics route when
        its pass is small (under 2e10 multiply-adds) or, when its statistics would not fit
        ``dkapprox.cv-statistics-bytes``, CG; otherwise the one whose block functions, timed on the
        driver over the same rows, cost less (``route_seconds_``).
    tol : float, default=1e-4
        The CG route's relative residual per column, as :class:`KernelRidge`'s ``tol``.
    max_iter : int, default=100
        The CG route's iterations at most, for the search and the chosen model together.
    halving_factor : float > 1 or None, default=3
        The CG route's successive halving: after 4, 8, 16, ... iterations, of the candidates whose
        scored iterates have every fold's relative residual at most 0.05 (*judged*), the best
        ``1 / halving_factor`` run on; an unjudged candidate is never dropped (an early iterate of a
        small alpha scores far below its solution). None: every candidate runs to ``tol``.
    random_state : int, RandomState instance or None, default=None
        Seeds the centers and the fold hash.

    Attributes
    ----------

    cv_results_ : dict of ndarrays
        scikit-learn's ``GridSearchCV.cv_results_`` keys: ``params``, ``param_gamma``, ``param_alpha``
        (and ``param_degree``, ``param_coef0`` for the names of ``kernel_params``),
        ``split{k}_test_score``, ``mean_test_score``, ``std_test_score``, ``rank_test_score``. One
        candidate per (kernel_params point, gamma, alpha), the point slowest, alpha fastest. Also
        ``n_iterations`` (the CG iterations each candidate's fold columns ran; 0 on the statistics
        route) and ``dropped_at_iteration`` (the iteration after which halving dropped it, 0 if
        kept). A dropped candidate's scores are those of its last iterates, and it ranks after every
        kept one.
    best_params_ : dict
    best_score_ : float
    best_index_ : int
    gamma_, alpha_ : float
        The chosen candidate's.
    degree_, coef0_ : float
        The chosen candidate's kernel's (the fixed ``degree``, ``coef0`` where ``kernel_params`` does
        not name them): ``predict`` is ``KernelRidge(alpha=alpha_, kernel=kernel, gamma=gamma_,
        degree=degree_, coef0=coef0_)`` on ``centers_``.
    dual_coef_ : ndarray of shape (n_centers,) or (n_centers, n_targets)
        The chosen model refitted on every row (from the same statistics: no further pass).
    centers_, center_indices_, center_passes_ :
        As in :class:`KernelRidge`.
    passes_ : int
        Passes over the data: one for the default grid's 'scale' on dask input, the centers', then the
        statistics route's one for the statistics, or the CG route's one for the right-hand
        sides, one an iteration and one for the last iterates' scores.
    n_iter_ : int
        CG iterations (the search's and the chosen model's after it); 0 on the statistics route,
        which solves each candidate directly.
    route_ : str
        'statistics' or 'cg': the route taken.
    route_seconds_ : dict
        route='auto' with a probe: each route's estimated seconds for the whole data in one process (the probe's per
        row times n_samples); empty otherwise.
    phase_seconds_ : dict
        Seconds spent choosing centers, factoring, choosing the route, then in the statistics pass, the
        solves, scoring and refit (statistics), or the first pass, the search and the refit (CG).
    n_splits_ : int
    fold_weights_ : ndarray of shape (``n_splits_``,)
        Each fold's total weight (its row count, unweighted).
    input_persisted_, n_features_in_, feature_names_in_ :
        As in :class:`KernelRidge`.

    Notes
    -----

    One pass over the data gathers, for every kernel candidate (a gamma, with a point of
    ``kernel_params``) and fold, the fold's ``G_f = K^T W K`` (``m x m``) and ``K^T W y``: each
    block's distances to the centers once (rbf, laplacian; other kernels once a candidate), an
    exponential per gamma, and its rows' products added to their own fold's sums. Every (kernel,
    alpha, fold) candidate is then solved on the driver, ``(G - G_f + alpha K_CC) a = r - r_f``, and
    scored on its held-out fold from the same statistics (its squared error is ``sum w y^2 - 2 a^T r_f + a^T G_f a``);
    the chosen model solves ``(G + alpha K_CC) a = r``. The cost
    is ``n m^2`` multiply-adds per kernel candidate, and the statistics take ``n_kernels x n_folds x
    m^2`` float64 a task (``n_kernels``: the gammas times the points of ``kernel_params``; the search
    refuses more than ``dkapprox.cv-statistics-bytes``, 2 GiB, and says how many centers fit).
    Every candidate solved this way is the exact Nystroem kernel ridge solution :class:`KernelRidge`'s
    CG converges to.

    The CG route (``route='cg'``, or 'auto' where it measures cheaper) solves the same problems by
    Falkon's preconditioned CG (:class:`KernelRidge`'s), each kernel candidate's columns (every alpha
    and fold, and the all-rows problem of each candidate, which becomes the chosen model) advanced
    together: a pass forms each kernel's slice once for all its columns, and scores every candidate's
    previous iterates on its held-out rows on the way. Its cost is about ``(4 (n_folds + 1) + 2)
    n_alphas n m`` multiply-adds a kernel candidate and iteration while every candidate runs;
    converged and dropped candidates cost nothing more.

    Examples
    --------
    >>> import dask.array as da
    >>> from sklearn.datasets import make_friedman1
    >>> from dkapprox.linear_model import KernelRidgeCV
    >>> X, y = make_friedman1(n_samples=20_000, noise=0.5, random_state=0)
    >>> X, y = da.from_array(X, chunks=5_000), da.from_array(y, chunks=5_000)
    >>> grid = dict(alphas=[1e-3, 1e-1, 10], gammas=[0.1, 1, 10], n_centers=300, random_state=0)
    >>> search = KernelRidgeCV(**grid).fit(X, y)
    >>> search.route_, search.passes_, search.best_params_
    ('statistics', 2, {'alpha': 0.001, 'gamma': 0.1})
    >>> by_cg = KernelRidgeCV(route="cg", tol=1e-6, **grid).fit(X, y)
    >>> by_cg.best_params_ == search.best_params_, by_cg.cv_results_["dropped_at_iteration"][by_cg.best_index_]
    (True, np.int64(0))
    >>> round(search.score(X, y), 2), round(by_cg.score(X, y), 2)
    (0.98, 0.98)

    A polynomial kernel's degree searched with its gamma and alpha, in the same one pass:

    >>> poly = KernelRidgeCV(alphas=[1e-3, 1e-1], gammas=[0.1, 1], kernel="poly", kernel_params={"degree": [2, 3]},
    ...                      n_centers=300, random_state=0).fit(X, y)
    >>> poly.best_params_, poly.degree_, poly.passes_
    ({'alpha': 0.001, 'degree': 3, 'gamma': 1.0}, 3, 2)

    """
    _scorings = REGRESSION_SCORINGS

    def fit(self, X, y, sample_weight=None):
        """Search the grid (by either route), then refit the best on every row.

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)
        y : {ndarray, dask array} of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : float or {ndarray, dask array} of shape (n_samples,), default=None
            Non-negative weight of each row, as in scikit-learn.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        self._validate_params()
        X, y, lazy = check_Xy(self, X, y, y_numeric=True, on_host=True)
        self._search(X, y, NumericTargets.of(y), lazy, sample_weight)
        if y.ndim == 1:
            self.dual_coef_ = self.dual_coef_.ravel()
        return self



class KernelRidgeClassifierCV(_KernelRidgeClassifier, _KernelRidgeSearch):
    """KernelRidgeClassifier with gamma and alpha chosen by K-fold cross-validation: two passes.

    One-vs-rest kernel ridge on +1/-1 targets, as :class:`KernelRidgeClassifier`; the statistics pass
    of :class:`KernelRidgeCV`, then one more pass for each held-out row's predicted class under every
    candidate (accuracy is not a function of the statistics).

    Parameters
    ----------
    alphas : array-like of shape (n_alphas,), default=(1e-3, 1e-2, 1e-1, 1, 10, 100)
        Ridge strengths to try (positive), scikit-learn's KernelRidge ``alpha``.
    gammas : array-like of shape (n_gammas,), default=None
        Bandwidths to try (positive). None: ``gamma='scale'`` (``1 / (n_features * X.var())``, one
        pass over dask input) times 0.1, 0.3, 1, 3 and 10. Why 'scale' and not the median distance
        of a sample: it is exact and chunk-invariant, costs one pass that reads each block once, and
        for standardized features the median heuristic ``1 / median |x - x'|^2`` is ``1 / (2 d)``,
        half of it: within the grid's two decades.
    kernel : str, default='rbf'
        A kernel of ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS`` that takes ``gamma``.
        rbf and laplacian share one distance computation across the gammas; the others compute
        the kernel once per kernel candidate (a gamma, with a point of ``kernel_params``).
    degree, coef0 : float
        Of the polynomial and sigmoid kernels, fixed during the search unless ``kernel_params``
        names them (its values then replace these).
    kernel_params : dict of str to list, default=None
        A grid of the kernel's other parameters to search, as ``GridSearchCV``'s ``param_grid``:
        ``'degree'`` (poly) and ``'coef0'`` (poly, sigmoid) to non-empty lists of finite numbers,
        e.g. ``{'degree': [2, 3], 'coef0': [0, 1]}``. Its points, in ``ParameterGrid``'s order,
        are crossed with ``gammas``: each (point, gamma) is a kernel candidate, each candidate's
        kernel computed once a block, its factor once. A name the kernel does not take, and
        ``'gamma'`` (the grid is ``gammas``), are refused. None: the fixed ``degree`` and ``coef0``.
        Not scikit-learn ``KernelRidge``'s ``kernel_params`` (a callable kernel's fixed arguments):
        the search takes named kernels only.
    n_centers : int, default=None
        Number of centers ``m``, chosen once for the whole search; None: ``min(1000, n_samples)``.
    centers : {'uniform', 'kmeans', 'leverage', 'rpcholesky'} or array-like, default='uniform'
        As in :class:`KernelRidge`. A kernel-dependent method (leverage, rpcholesky) uses the
        grid's middle gamma (with ``kernel_params``' middle point).
    center_params : dict, default=None
    cv : int, array-like of shape (n_samples,), K-fold splitter or list of (train, test), default=5
        An int: that many folds, by a seeded hash of the global row index (chunk-invariant; the
        same folds as :class:`RidgeCV` and :class:`HashedKFold` with the same ``random_state``).
        An array (NumPy or dask, aligned with X's rows): each row's fold label, for grouped or
        time-ordered data. A scikit-learn splitter, or its splits, whose test sets partition the
        rows (``KFold``, ``GroupKFold``, ``PredefinedSplit``): read as fold labels (in memory).
    scoring : str, default=None
        'accuracy' (default, weighted by sample_weight): the only one.
    route : {'auto', 'statistics', 'cg'}, default='auto'
        How every candidate is solved. 'statistics': one pass of per-fold ``m x m`` statistics, every
        candidate solved exactly on the driver (``2 n m^2`` multiply-adds a kernel candidate). 'cg':
        Falkon's CG with every candidate's fold columns in the same passes (about ``4 n m`` a column
        and iteration), losing candidates dropped by successive halving. 'auto': the statistics route when
        its pass is small (under 2e10 multiply-adds) or, when its statistics would not fit
        ``dkapprox.cv-statistics-bytes``, CG; otherwise the one whose block functions, timed on the
        driver over the same rows, cost less (``route_seconds_``).
    tol : float, default=1e-4
        The CG route's relative residual per column, as :class:`KernelRidge`'s ``tol``.
    max_iter : int, default=100
        The CG route's iterations at most, for the search and the chosen model together.
    halving_factor : float > 1 or None, default=3
        The CG route's successive halving: after 4, 8, 16, ... iterations, of the candidates whose
        scored iterates have every fold's relative residual at most 0.05 (*judged*), the best
        ``1 / halving_factor`` run on; an unjudged candidate is never dropped (an early iterate of a
        small alpha scores far below its solution). None: every candidate runs to ``tol``.
    random_state : int, RandomState instance or None, default=None
        Seeds the centers and the fold hash.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)

    cv_results_ : dict of ndarrays
        scikit-learn's ``GridSearchCV.cv_results_`` keys: ``params``, ``param_gamma``, ``param_alpha``
        (and ``param_degree``, ``param_coef0`` for the names of ``kernel_params``),
        ``split{k}_test_score``, ``mean_test_score``, ``std_test_score``, ``rank_test_score``. One
        candidate per (kernel_params point, gamma, alpha), the point slowest, alpha fastest. Also
        ``n_iterations`` (the CG iterations each candidate's fold columns ran; 0 on the statistics
        route) and ``dropped_at_iteration`` (the iteration after which halving dropped it, 0 if
        kept). A dropped candidate's scores are those of its last iterates, and it ranks after every
        kept one.
    best_params_ : dict
    best_score_ : float
    best_index_ : int
    gamma_, alpha_ : float
        The chosen candidate's.
    degree_, coef0_ : float
        The chosen candidate's kernel's (the fixed ``degree``, ``coef0`` where ``kernel_params`` does
        not name them): ``predict`` is ``KernelRidge(alpha=alpha_, kernel=kernel, gamma=gamma_,
        degree=degree_, coef0=coef0_)`` on ``centers_``.
    dual_coef_ : ndarray of shape (n_centers,) or (n_centers, n_targets)
        The chosen model refitted on every row (from the same statistics: no further pass).
    centers_, center_indices_, center_passes_ :
        As in :class:`KernelRidge`.
    passes_ : int
        Passes over the data: one for the default grid's 'scale' on dask input, the centers', then the
        statistics route's one for the statistics, one for the held-out predictions, or the CG route's one for the
        right-hand
        sides, one an iteration and one for the last iterates' scores.
    n_iter_ : int
        CG iterations (the search's and the chosen model's after it); 0 on the statistics route,
        which solves each candidate directly.
    route_ : str
        'statistics' or 'cg': the route taken.
    route_seconds_ : dict
        route='auto' with a probe: each route's estimated seconds for the whole data in one process (the probe's per
        row times n_samples); empty otherwise.
    phase_seconds_ : dict
        Seconds spent choosing centers, factoring, choosing the route, then in the statistics pass, the
        solves, scoring and refit (statistics), or the first pass, the search and the refit (CG).
    n_splits_ : int
    fold_weights_ : ndarray of shape (``n_splits_``,)
        Each fold's total weight (its row count, unweighted).
    input_persisted_, n_features_in_, feature_names_in_ :
        As in :class:`KernelRidge`.

    Notes
    -----

    One pass over the data gathers, for every kernel candidate (a gamma, with a point of
    ``kernel_params``) and fold, the fold's ``G_f = K^T W K`` (``m x m``) and ``K^T W y``: each
    block's distances to the centers once (rbf, laplacian; other kernels once a candidate), an
    exponential per gamma, and its rows' products added to their own fold's sums. Every (kernel,
    alpha, fold) candidate is then solved on the driver, ``(G - G_f + alpha K_CC) a = r - r_f``, and
    scored on its held-out fold in a second pass; the chosen model solves ``(G + alpha K_CC) a = r``. The cost
    is ``n m^2`` multiply-adds per kernel candidate, and the statistics take ``n_kernels x n_folds x
    m^2`` float64 a task (``n_kernels``: the gammas times the points of ``kernel_params``; the search
    refuses more than ``dkapprox.cv-statistics-bytes``, 2 GiB, and says how many centers fit).
    Every candidate solved this way is the exact Nystroem kernel ridge solution :class:`KernelRidge`'s
    CG converges to.

    The CG route (``route='cg'``, or 'auto' where it measures cheaper) solves the same problems by
    Falkon's preconditioned CG (:class:`KernelRidge`'s), each kernel candidate's columns (every alpha
    and fold, and the all-rows problem of each candidate, which becomes the chosen model) advanced
    together: a pass forms each kernel's slice once for all its columns, and scores every candidate's
    previous iterates on its held-out rows on the way. Its cost is about ``(4 (n_folds + 1) + 2)
    n_alphas n m`` multiply-adds a kernel candidate and iteration while every candidate runs;
    converged and dropped candidates cost nothing more.

    Examples
    --------
    >>> import dask.array as da
    >>> from sklearn.datasets import load_digits
    >>> from dkapprox.linear_model import KernelRidgeClassifierCV
    >>> digits = load_digits()
    >>> X = da.from_array(digits.data / 16, chunks=300)
    >>> y = da.from_array(digits.target, chunks=300)
    >>> search = KernelRidgeClassifierCV(alphas=[1e-3, 1e-1], gammas=[0.02, 0.2], n_centers=400, random_state=0)
    >>> search.fit(X, y).best_params_["gamma"]
    0.02
    >>> search.best_score_ > 0.95
    True

    """
    _scorings = CLASSIFICATION_SCORINGS

    def fit(self, X, y, sample_weight=None):
        """Search the grid (by either route; the statistics route reads the data once more for the held-out classes),
        then refit the best on every row.

        Parameters
        ----------
        X : {ndarray, sparse matrix, dask array, zarr array} of shape (n_samples, n_features)
        y : {ndarray, dask array} of shape (n_samples,)
            Class labels (in memory, also a multilabel indicator matrix).
        sample_weight : float or {ndarray, dask array} of shape (n_samples,), default=None
            Non-negative weight of each row, as in scikit-learn.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        self._validate_params()
        X, y, lazy = check_Xy(self, X, y, y_numeric=False, on_host=True)
        y, targets, self.classes_, self._binarizer = classifier_targets(self, y, lazy)
        if self._binarizer is not None:
            raise ValueError(f"{type(self).__name__} takes class labels (1-D y); multilabel targets are not "
                             "supported: use KernelRidgeClassifier with a chosen gamma and alpha.")
        self._search(X, y, targets, lazy, sample_weight, classes=self.classes_)
        if self.dual_coef_.shape[1] == 1:
            self.dual_coef_ = self.dual_coef_.ravel()
        return self

