"""The CG route of a kernel ridge search: every candidate's columns advanced by Falkon's CG in the same passes.

Each kernel candidate's columns (every alpha's fold and all-rows problems, :class:`._cv_cg.GammaColumns`)
take a CG step a pass (:func:`._cv_cg.cg_partial`); successive halving drops the losing candidates at
:data:`._cv_cg.HALVING_PASSES`, and the chosen candidate's all-rows column, the search's own, runs on to
``tol``.
"""

from __future__ import annotations

import logging
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from .. import utils
from . import _cv_cg as cg
from . import _kernel_grid
from ._cv_grid import Found, check_folds, data_pass

log = logging.getLogger("dkapprox.linear_model")

_NONE = np.array([], dtype=int)  # no columns (never written to)


class CGRoute:
    """The CG driver: the columns of every kernel candidate, the passes that advance and score them.

    ``search`` makes the first pass (the right-hand sides and the folds' sums), then CG passes with
    halving until every held-out column converged or ``max_iter``, then one pass for the last iterates'
    scores; ``refit`` runs the chosen candidate's all-rows columns on to ``tol``. ``passes`` and
    ``n_iter`` count what it did; ``seconds`` (shared with the search) gets each phase's.
    """

    def __init__(self, grid, arrays, lazy, check, n_samples, seconds, *, name, tol, max_iter, halving_factor):
        self.grid, self.arrays, self.lazy, self.check = grid, arrays, lazy, check
        self.n_samples, self.seconds = n_samples, seconds
        self.name, self.tol, self.max_iter, self.halving_factor = name, tol, max_iter, halving_factor
        self.passes, self.n_iter = 0, 0
        n_g, n_a = len(grid.kernels), grid.alphas.size  # g: a kernel candidate
        self.n_g, self.n_a = n_g, n_a
        self.scores = np.full((n_g, n_a, grid.n_folds), -np.inf)
        self.columns = []  # per kernel candidate: its GammaColumns, from the first pass
        self.sums = None  # (n_folds, 3, t): each fold's weighted sums, from the first pass

    def search(self) -> Found:
        """Every candidate's scores, the dropped ones' at the iteration halving dropped them."""
        t0 = time.perf_counter()
        self._first_pass()
        self.seconds["first pass"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        columns, n_g, n_a, F = self.columns, self.n_g, self.n_a, self.grid.n_folds
        dropped = np.zeros((n_g, n_a), dtype=int)
        factor = self.halving_factor
        while self.n_iter < self.max_iter and any(gc.held_out_running().size for gc in columns):
            # scores only where a halving reads them (scoring adds to a pass's cost); the last iterates' in one
            # pass after the loop
            halving = factor is not None and self.n_iter + 1 in cg.HALVING_PASSES
            score = self._to_score() if halving else [(_NONE, None)] * n_g
            for gc, (cands, _) in zip(columns, score):
                gc.dirty[cands] = False
            residual = self._advance([gc.running() for gc in columns], score)
            self.n_iter += 1
            live = np.concatenate([gc.live for gc in columns])
            utils.news(log, "%s: CG iteration %d, %d of %d candidates running, largest residual %.3g",
                       self.name, self.n_iter, int(live.sum()), live.size, residual)
            if halving and live.sum() > 1:
                judged = np.concatenate([gc.scored_residual <= cg.JUDGED_RESIDUAL for gc in columns])
                keep = cg.keep_best(self.scores.reshape(n_g * n_a, F), live, judged, factor)
                for flat in np.setdiff1d(np.flatnonzero(live), keep):
                    g, a = divmod(int(flat), n_a)
                    columns[g].live[a] = False
                    dropped[g, a] = self.n_iter
        score = self._to_score()
        if any(cands.size for cands, _ in score):  # the last iterates' scores: one pass, no CG step
            self._advance([_NONE] * n_g, score)
        self.seconds["search"] = time.perf_counter() - t0
        iterations = np.stack([gc.iterations for gc in columns])
        return Found(self.scores, self.sums[:, 0, 0], dropped=dropped, iterations=iterations)

    def refit(self, g, a):
        """Kernel candidate ``g`` with alpha ``alphas[a]`` on every row: its all-rows columns run on to ``tol``
        (within ``max_iter`` iterations, the search's included); its dual coefficients (m, t)."""
        t0 = time.perf_counter()
        best = self.columns[g]
        _, cols = best.dual(a)
        while self.n_iter < self.max_iter and best.active[cols].any():
            run = [_NONE] * self.n_g
            run[g] = cols[best.active[cols]]
            self._advance(run, [(_NONE, None)] * self.n_g)
            self.n_iter += 1
        dual, cols = best.dual(a)
        if best.active[cols].any():
            warnings.warn(f"{self.name}: conjugate gradient did not converge in max_iter={self.max_iter} "
                          f"iterations for the chosen {_kernel_grid.shown(self.grid.candidates[g])}, "
                          f"alpha={self.grid.alphas[a]:g}; increase max_iter.", ConvergenceWarning, stacklevel=3)
        self.seconds["refit"] = time.perf_counter() - t0
        return dual

    def _first_pass(self):
        """The right-hand sides of every column and each fold's sums: the columns start."""
        grid, n_g, F, t = self.grid, self.n_g, self.grid.n_folds, self.grid.targets.n_targets
        colfold, coltarget = np.repeat(np.arange(F + 1), t), np.tile(np.arange(t), F + 1)
        state = grid.cg_state(range(n_g), [None] * n_g, [colfold] * n_g, [coltarget] * n_g, [None] * n_g,
                              first=True, check=self.check)
        products, _, (sums, positives, counts) = self._pass(state)
        c = grid.constant
        self.sums = sums * c
        check_folds(self.sums, positives, counts, self.n_samples, F, grid.classes)
        total = float(self.sums[:, 0, 0].sum())
        self.columns = [cg.GammaColumns(grid.factors[g], grid.alphas, F, t, total, total * (F - 1) / F)
                        for g in range(n_g)]
        everything = np.arange(self.n_a * (F + 1) * t)
        for g, gc in enumerate(self.columns):
            gc.start(np.tile(products[g] * c, (1, self.n_a)), everything)

    def _advance(self, run, score):
        """One pass: CG steps for ``run[g]`` columns, scores of the candidates ``score`` picked; the largest
        relative residual reached. The driver's m x m algebra runs on one BLAS thread: its solves are small,
        and threaded they wait on BLAS threads while the workers' tasks hold the cores."""
        grid, columns, c = self.grid, self.columns, self.grid.constant
        live = [g for g in range(self.n_g) if run[g].size or score[g][0].size]
        with threadpool_limits(1):
            V = [columns[g].directions(run[g]) if run[g].size else None for g in live]
        state = grid.cg_state(live, V, [columns[g].colfold[run[g]] for g in live],
                              [columns[g].coltarget[run[g]] for g in live], [score[g][1] for g in live])
        data, raw, _ = self._pass(state)
        residual = 0.0
        with threadpool_limits(1):
            for i, g in enumerate(live):
                if run[g].size:
                    residual = max(residual, columns[g].step(data[i] * c, run[g], self.tol))
                cands = score[g][0]
                if cands.size:
                    self.scores[g, cands] = cg.fold_scores(raw[i], cands, self.sums, c, grid.classes is not None,
                                                           grid.scoring, self.sums[:, 0, 0], grid.targets.n_targets)
        return residual

    def _to_score(self):
        """Per kernel candidate: the live candidates whose held-out iterates moved, and their duals."""
        with threadpool_limits(1):
            return [gc.to_score() for gc in self.columns]

    def _pass(self, state):
        self.passes += 1
        return data_pass(self.arrays, state, self.lazy, cg.cg_partial, cg.combine_cg)
