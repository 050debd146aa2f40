"""A grid of length scales searched in one pass: every candidate's statistics gathered at once, each one's bound
profiled over the signal variance and the noise on the driver (as L-BFGS-B's steps are), the best kept.

A candidate's pass partial is m x m, so the pass holds ``n_candidates`` of them a task (two in a fold of the tree):
:func:`check_size` refuses more than ``dkapprox.cv-statistics-bytes`` (2 GiB), KernelRidgeCV's limit for its grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import numpy as np

from ..learning import STATISTICS_BYTES
from ..utils import format_size
from . import _bound
from ._kernels import read_kernel
from ._sparse import _indices, profiled


@dataclass(frozen=True)
class Found:
    """The grid's outcome: each candidate's bound and θ at its best signal variance and noise, and the best's."""

    scores: np.ndarray  # (n_candidates,): -inf where a candidate's K_mm or B is not positive definite
    thetas: np.ndarray  # (n_candidates, n_dims): NaN rows where -inf
    best: int


def candidates(grid, kernel, n_features):
    """``kernel.theta`` of each candidate (its length scales replaced), or a ValueError saying what is wrong."""
    try:
        scales = np.asarray(grid, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"length_scale_grid must be an array of numbers: {exc}") from None
    if scales.ndim not in (1, 2) or scales.shape[0] == 0 or 0 in scales.shape:
        raise ValueError("length_scale_grid must have shape (n_candidates,) or (n_candidates, n_features) with "
                         f"at least one candidate; got shape {scales.shape}.")
    if not (np.isfinite(scales).all() and (scales > 0).all()):
        raise ValueError(f"length_scale_grid must hold positive, finite length scales; got {scales.tolist()}.")
    params = read_kernel(kernel, n_features)
    name = dict(params.names)["length_scale"]
    where = _indices(kernel, name)
    if not where:
        raise ValueError(f"length_scale_grid searches the kernel's length scale, but {name} is fixed "
                         "(length_scale_bounds='fixed', the default kernel's): give a kernel whose length scale is "
                         "free, such as ConstantKernel() * RBF(1.0) + WhiteKernel(), or leave length_scale_grid=None.")
    width = len(where)
    if scales.ndim == 2 and (width == 1 or scales.shape[1] != width):
        kind = ("one length scale: give length_scale_grid of shape (n_candidates,), or a kernel with one length "
                f"scale a feature (RBF(np.ones({n_features})))" if width == 1 else f"{width} length scales, one a "
                f"feature of X: give length_scale_grid of shape (n_candidates, {width}), or (n_candidates,) for "
                "one length scale shared by every feature")
        raise ValueError(f"length_scale_grid has shape {scales.shape}, but the kernel has {kind}.")
    logs = np.log(scales.reshape(scales.shape[0], -1)) * np.ones(width)  # a scalar candidate on every feature
    low, high = kernel.bounds[where, 0], kernel.bounds[where, 1]
    outside = np.flatnonzero(((logs < low) | (logs > high)).any(axis=1))
    if outside.size:
        bounds = ", ".join(f"{b:.6g}" for b in np.exp([low.min(), high.max()]))
        raise ValueError(f"length_scale_grid's candidate(s) {scales[outside].tolist()} lie outside the kernel's "
                         f"length_scale_bounds ({bounds}): widen the bounds or drop them.")
    thetas = np.tile(kernel.theta, (scales.shape[0], 1))
    thetas[:, where] = logs
    return thetas


def check_size(n_candidates, m):
    """Refuse a pass whose partial, ``n_candidates`` m x m float64, would not fit ``dkapprox.cv-statistics-bytes``."""
    limit = int(dask.config.get("dkapprox.cv-statistics-bytes", STATISTICS_BYTES))
    size = n_candidates * m * m * 8
    if size > limit:
        most = max(0, limit // (8 * m * m))
        raise ValueError(
            f"length_scale_grid's one pass would hold {format_size(size)} of statistics a task ({n_candidates} "
            f"candidates x n_centers^2={m}^2 float64), more than dkapprox.cv-statistics-bytes={format_size(limit)}: "
            f"use at most {most} candidates with {m} centers, or fewer centers, or split the grid over several "
            "fits (or raise the limit where the workers have the memory).")


def search(training, kernel, thetas, n_features) -> Found:
    """One pass for every candidate's statistics, then each one's profiled bound on the driver; the best's
    statistics stay in ``training`` as its last pass's, so the fit at the best candidate reads nothing again."""
    kernels = [kernel.clone_with_theta(theta) for theta in thetas]
    params = [read_kernel(k, n_features) for k in kernels]
    found = training.grid_statistics(params)
    scores, fitted = np.full(len(thetas), -np.inf), np.full(thetas.shape, np.nan)
    for g, (theta, stats) in enumerate(zip(thetas, found)):
        if stats is None:
            continue
        try:
            full = profiled(kernel, theta, _bound.Profile(stats[0]), training.alpha, n_features)
            scores[g] = training.bound_from(stats, read_kernel(kernel.clone_with_theta(full), n_features)).value
        except np.linalg.LinAlgError:
            continue
        fitted[g] = full
    if not np.isfinite(scores).any():
        raise ValueError("No candidate of length_scale_grid gives a positive definite kernel matrix of the centers "
                         "and a bound: try other length scales, or a larger noise (WhiteKernel, alpha).")
    best = int(np.argmax(scores))
    training.keep(params[best], found[best])
    return Found(scores, fitted, best)
