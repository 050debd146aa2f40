"""The sparse GP's fit: the training data held while hyperparameters are searched, the bound at each θ.

:class:`Training` is not part of the fitted model (a model file keeps no training data): the estimator
keeps one in a weak table while it lives in this process, so that ``log_marginal_likelihood(theta)`` can
read the data again, as scikit-learn's reads ``X_train_``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import weakref

import numpy as np
import scipy.optimize
from sklearn.utils import check_random_state

from .. import utils
from . import _bound, _passes
from ._kernels import read_kernel

#: the inner search's stopping rules (scipy's L-BFGS-B options), far tighter than its defaults
INNER_TOLERANCES = {"ftol": 1e-15, "gtol": 1e-10, "maxiter": 500}
#: estimator -> its Training, while both live (a loaded or unpickled model has none)
TRAINING = weakref.WeakKeyDictionary()
log = logging.getLogger("dkapprox.gaussian_process")


class Training:
    """The rows, the centers and the targets' normalization of one fit; ``passes`` counts its passes.

    A pass gathers the statistics at unit signal variance: with ``K = s² k0`` and the jitter relative to
    s², ``Φ = s Φ0``, so ``C = s² C0`` and ``U = s U0``, and the bound at any signal variance and noise is
    driver algebra on one pass's sums. Only new length scales read the data again.
    """

    def __init__(self, X, y, lazy, centers, y_mean, y_std, alpha, check, passes):
        self.X, self.y, self.lazy, self.centers = X, y, lazy, centers
        self.y_mean, self.y_std, self.alpha, self.check = y_mean, y_std, alpha, check
        self.passes = passes
        self.evaluations, self._started = 0, time.perf_counter()
        self._last = None  # (length scales, Statistics, A0, L0) at unit signal variance

    def _statistics(self, params):
        scales = np.atleast_1d(np.asarray(params.length_scale, dtype=np.float64))
        if self._last is None or not np.array_equal(self._last[0], scales):
            unit = dataclasses.replace(params, variance=1.0)
            A, L = _bound.center_factor(unit, self.centers)
            state = _passes.PassState(unit, self.centers, self.y_mean, self.y_std, L, self.check)
            C, U, yy, rows = _passes.data_pass(self.X, self.y, state, _passes.statistics_partial, self.lazy)
            self.passes += 1
            self._last = (scales, _bound.Statistics(0.5 * (C + C.T), U, yy, int(rows)), A, L)
        return self._last[1:]

    def grid_statistics(self, candidates):
        """Each candidate's ``(Statistics, A0, L0)`` at unit signal variance from ONE pass (None where its K_mm is
        not positive definite): every block's partials of all of them, folded as one candidate's are."""
        units, found = [], [None] * len(candidates)
        for g, params in enumerate(candidates):
            unit = dataclasses.replace(params, variance=1.0)
            try:
                found[g] = _bound.center_factor(unit, self.centers)
            except np.linalg.LinAlgError:
                continue
            units.append((g, unit))
        if units:
            state = _passes.GridState(tuple(u for _, u in units), self.centers, self.y_mean, self.y_std,
                                      np.stack([found[g][1] for g, _ in units]), self.check)
            C, U, yy, rows = _passes.data_pass(self.X, self.y, state, _passes.grid_statistics_partial, self.lazy)
            self.passes += 1
            for i, (g, _) in enumerate(units):
                stats = _bound.Statistics(0.5 * (C[i] + C[i].T), U[i], yy, int(rows))
                found[g] = (stats, *found[g])
        return found

    def keep(self, params, found):
        """Take one candidate's ``(Statistics, A0, L0)`` as the last pass's, so its length scales need no other."""
        self._last = (np.atleast_1d(np.asarray(params.length_scale, dtype=np.float64)), *found)

    def bound(self, params):
        """The bound at ``params`` (a pass only for length scales not seen last)."""
        return self.bound_from(self._statistics(params), params)

    def bound_from(self, found, params):
        """The bound at ``params`` from its length scales' ``(Statistics, A0, L0)``: driver algebra, no pass."""
        stats, A, L = found
        s2 = params.variance
        scaled = _bound.Statistics(s2 * stats.C, np.sqrt(s2) * stats.U, stats.yy, stats.n)
        return _bound.bound(scaled, s2 * A, np.sqrt(s2) * L, params.noise + self.alpha, stats.n * s2)

    def evaluate(self, kernel, gradient, length_scales=True):
        """``(Bound, params)`` at ``kernel``, or with ``gradient`` ``(Bound, ∂F/∂θ)``: a second pass for a free length
        scale's part, unless ``length_scales=False`` (then that part is 0)."""
        params = read_kernel(kernel, self.X.shape[1])
        bound = self.bound(params)
        if not gradient:
            return bound, params
        parts = {"variance": bound.d_variance, "noise": bound.d_noise * params.noise,
                 "length_scale": np.zeros(np.size(params.length_scale))}
        free = {hp.name for hp in kernel.hyperparameters if not hp.fixed}
        if length_scales and dict(params.names)["length_scale"] in free:
            sigma2 = params.noise + self.alpha
            state = _passes.PassState(params, self.centers, self.y_mean, self.y_std, bound.L, None, bound.G_C,
                                      bound.beta / sigma2)
            data = _passes.data_pass(self.X, self.y, state, _passes.gradient_partial, self.lazy)
            self.passes += 1
            _, slope, zs, _ = params.cross_and_slope(self.centers, self.centers)
            parts["length_scale"] = data + params.length_scale_gradient(bound.G_A * slope, zs, zs)
        self.evaluations += 1
        utils.news(log, "GaussianProcessRegressor: evaluation %d, bound %.8g, %d passes, %.1f s", self.evaluations,
                   bound.value, self.passes, time.perf_counter() - self._started)
        return bound, params.gradient_in_theta(kernel, parts)

    def optimize(self, kernel, optimizer, n_restarts, random_state):
        """scikit-learn's search: ``optimizer`` from ``kernel.theta``, then from ``n_restarts`` draws within the
        bounds; ``(θ, F)`` of the best.

        With L-BFGS-B the signal variance and the noise are profiled out: for each
        length scale L-BFGS-B asks for, they are optimized on the driver from that pass's sums, and the
        length scales' gradient is taken there (the envelope theorem: at the inner optimum F's derivative in
        the length scales is the partial one). A step then moves only the length scales, two passes each.
        """
        length = _indices(kernel, dict(read_kernel(kernel, self.X.shape[1]).names)["length_scale"])
        if optimizer == "fmin_l_bfgs_b":
            search = _Profile(self, kernel, length)
        else:
            search = _Joint(self, kernel, optimizer)
        optima = [search.run(kernel.theta)]
        if n_restarts > 0:
            if not np.isfinite(kernel.bounds).all():
                raise ValueError("Multiple optimizer restarts (n_restarts_optimizer>0) requires that all bounds "
                                 "are finite.")
            rng = check_random_state(random_state)
            for _ in range(n_restarts):
                optima.append(search.run(rng.uniform(kernel.bounds[:, 0], kernel.bounds[:, 1])))
        best = min(optima, key=lambda o: o[1])
        return best[0], -best[1]


def _indices(kernel, name) -> list:
    """Where hyperparameter ``name`` sits in ``kernel.theta`` ([] if it is fixed)."""
    start = 0
    for hp in kernel.hyperparameters:
        if hp.fixed:
            continue
        if hp.name == name:
            return list(range(start, start + hp.n_elements))
        start += hp.n_elements
    return []


class _Joint:
    """Every free hyperparameter moved at once by ``optimizer`` (scikit-learn's way; any callable optimizer)."""

    def __init__(self, training, kernel, optimizer):
        self.training, self.kernel, self.optimizer = training, kernel, optimizer

    def objective(self, theta):
        try:
            bound, grad = self.training.evaluate(self.kernel.clone_with_theta(theta), gradient=True)
        except np.linalg.LinAlgError:
            return np.inf, np.zeros_like(theta)
        return -bound.value, -grad

    def run(self, theta):
        return _minimize(self.optimizer, self.objective, theta, self.kernel.bounds)


class _Profile:
    """L-BFGS-B over the length scales, the signal variance and the noise optimized for each on the driver."""

    def __init__(self, training, kernel, length):
        self.training, self.kernel, self.length = training, kernel, length
        self.others = [i for i in range(kernel.theta.size) if i not in length]
        self.bounds = kernel.bounds
        self.found = {}  # length scales (a tuple) -> the whole θ at their inner optimum
        self._profile = None  # (statistics, their Profile): one eigendecomposition a pass

    def inner(self, theta):
        """θ with its signal variance and noise at their best for θ's length scales (:func:`profiled`), no pass."""
        if not self.others:
            return theta
        params = read_kernel(self.kernel.clone_with_theta(theta), self.training.X.shape[1])
        stats, _, _ = self.training._statistics(params)
        if self._profile is None or self._profile[0] is not stats:
            self._profile = (stats, _bound.Profile(stats))
        return profiled(self.kernel, theta, self._profile[1], self.training.alpha, self.training.X.shape[1])

    def run(self, theta):
        start = np.asarray(theta, dtype=np.float64).copy()
        if not self.length:  # the length scales fixed: one pass's sums are all there is to search
            full = self.inner(start)
            bound, _ = self.training.evaluate(self.kernel.clone_with_theta(full), gradient=False)
            return full, -bound.value

        def objective(x):
            full = start.copy()
            full[self.length] = x
            try:
                full = self.inner(full)
                bound, grad = self.training.evaluate(self.kernel.clone_with_theta(full), gradient=True)
            except np.linalg.LinAlgError:
                return np.inf, np.zeros_like(x)
            self.found[tuple(x)] = full
            start[self.others] = full[self.others]  # the next inner search starts where this one ended
            return -bound.value, -grad[self.length]

        result = scipy.optimize.minimize(objective, start[self.length], method="L-BFGS-B", jac=True,
                                         bounds=self.bounds[self.length])
        full = self.found.get(tuple(result.x))
        if full is None:
            full = start.copy()
            full[self.length] = result.x
            full = self.inner(full)
        return full, float(result.fun)


def profiled(kernel, theta, profile, alpha, n_features):
    """θ with its free signal variance and noise at their best for θ's length scales: one pass's sums searched on
    the driver (:class:`~._bound.Profile`, O(m) a step) within ``kernel.bounds``; θ itself where both are fixed."""
    params = read_kernel(kernel.clone_with_theta(theta), n_features)
    names = dict(params.names)
    where = {part: _indices(kernel, names[part])[0] for part in ("variance", "noise")
             if part in names and _indices(kernel, names[part])}
    free = [part for part in ("variance", "noise") if part in where]
    if not free:
        return theta
    at = [where[part] for part in free]

    def objective(x):
        values = dict(zip(free, np.exp(x)))
        u, noise = values.get("variance", params.variance), values.get("noise", params.noise)
        value, d_u, d_v = profile(u, noise + alpha)
        grads = {"variance": d_u * u, "noise": d_v * noise}  # in log parameters
        return -value, -np.array([grads[part] for part in free])

    result = scipy.optimize.minimize(objective, theta[at], method="L-BFGS-B", jac=True, bounds=kernel.bounds[at],
                                     options=INNER_TOLERANCES)
    full = np.array(theta, dtype=np.float64)
    full[at] = result.x
    return full


def _minimize(optimizer, objective, theta, bounds):
    if optimizer == "fmin_l_bfgs_b":
        result = scipy.optimize.minimize(objective, theta, method="L-BFGS-B", jac=True, bounds=bounds)
        return result.x, float(result.fun)
    theta_opt, func_min = optimizer(objective, theta, bounds=bounds)
    return theta_opt, float(func_min)
