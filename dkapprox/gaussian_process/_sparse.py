"""The sparse GP's fit: the training data held while hyperparameters are searched, the bound at each θ.

:class:`Training` is not part of the fitted model (a model file keeps no training data): the estimator
keeps one in a weak table while it lives in this process, so that ``log_marginal_likelihood(theta)`` can
read the data again, as scikit-learn's reads ``X_train_``.
"""

from __future__ import annotations

import weakref

import numpy as np
import scipy.optimize
from sklearn.utils import check_random_state

from . import _bound, _passes
from ._kernels import read_kernel

#: estimator -> its Training, while both live (a loaded or unpickled model has none)
TRAINING = weakref.WeakKeyDictionary()


class Training:
    """The rows, the centers and the targets' normalization of one fit; ``passes`` counts its passes."""

    def __init__(self, X, y, lazy, centers, y_mean, y_std, alpha, check, passes):
        self.X, self.y, self.lazy, self.centers = X, y, lazy, centers
        self.y_mean, self.y_std, self.alpha, self.check = y_mean, y_std, alpha, check
        self.passes = passes
        self._last = None  # (θ, Bound): L-BFGS-B asks for the gradient where it just asked for the value

    def evaluate(self, kernel, gradient):
        """``(Bound, params)`` at ``kernel`` (a pass), or with ``gradient`` ``(Bound, ∂F/∂θ)`` (a second pass if a
        length scale is free)."""
        params = read_kernel(kernel, self.X.shape[1])
        theta = np.asarray(kernel.theta, dtype=np.float64)
        sigma2 = params.noise + self.alpha
        if self._last is None or not np.array_equal(self._last[0], theta):
            A, L = _bound.center_factor(params, self.centers)
            state = _passes.PassState(params, self.centers, self.y_mean, self.y_std, L, self.check)
            C, U, yy, rows = _passes.data_pass(self.X, self.y, state, _passes.statistics_partial, self.lazy)
            self.passes += 1
            stats = _bound.Statistics(0.5 * (C + C.T), U, yy, int(rows))
            self._last = (theta, _bound.bound(stats, A, L, sigma2, stats.n * params.variance))
        bound = self._last[1]
        if not gradient:
            return bound, params
        parts = {"variance": bound.d_variance, "noise": bound.d_noise * params.noise}
        free = {hp.name for hp in kernel.hyperparameters if not hp.fixed}
        if dict(params.names)["length_scale"] in free:
            state = _passes.PassState(params, self.centers, self.y_mean, self.y_std, bound.L, None, bound.G_C,
                                      bound.beta / sigma2)
            data = _passes.data_pass(self.X, self.y, state, _passes.gradient_partial, self.lazy)
            self.passes += 1
            _, slope, zs, _ = params.cross_and_slope(self.centers, self.centers)
            parts["length_scale"] = data + params.length_scale_gradient(bound.G_A * slope, zs, zs)
        else:
            parts["length_scale"] = np.zeros(np.size(params.length_scale))
        return bound, params.gradient_in_theta(kernel, parts)

    def optimize(self, kernel, optimizer, n_restarts, random_state):
        """scikit-learn's search: ``optimizer`` from ``kernel.theta``, then from ``n_restarts`` draws within the
        bounds; ``(θ, F)`` of the best."""

        def objective(theta):
            try:
                bound, grad = self.evaluate(kernel.clone_with_theta(theta), gradient=True)
            except np.linalg.LinAlgError:
                return np.inf, np.zeros_like(theta)
            return -bound.value, -grad

        optima = [_minimize(optimizer, objective, kernel.theta, kernel.bounds)]
        if n_restarts > 0:
            if not np.isfinite(kernel.bounds).all():
                raise ValueError("Multiple optimizer restarts (n_restarts_optimizer>0) requires that all bounds "
                                 "are finite.")
            rng = check_random_state(random_state)
            for _ in range(n_restarts):
                start = rng.uniform(kernel.bounds[:, 0], kernel.bounds[:, 1])
                optima.append(_minimize(optimizer, objective, start, kernel.bounds))
        best = min(optima, key=lambda o: o[1])
        return best[0], -best[1]


def _minimize(optimizer, objective, theta, bounds):
    if optimizer == "fmin_l_bfgs_b":
        result = scipy.optimize.minimize(objective, theta, method="L-BFGS-B", jac=True, bounds=bounds)
        return result.x, float(result.fun)
    theta_opt, func_min = optimizer(objective, theta, bounds=bounds)
    return theta_opt, float(func_min)
