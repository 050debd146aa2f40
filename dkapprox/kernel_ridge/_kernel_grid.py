"""A kernel ridge search's kernel candidates: every point of ``kernel_params``'s grid crossed with the gammas.

A candidate is one full set of the kernel's parameters (gamma, degree, coef0): both routes of the search
(:mod:`._cv_stats`, :mod:`._cv_cg`) take one :class:`..nystroem.kernels.Kernel` per candidate and never
ask which parameter varies. Candidates of rbf and laplacian differ in gamma alone (those kernels take no
other), and the statistics pass shares their distance computation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral, Real

import numpy as np
from sklearn.metrics.pairwise import KERNEL_PARAMS
from sklearn.model_selection import ParameterGrid

from ..kernels import Kernel

#: the named kernels' parameters besides gamma (scikit-learn's KERNEL_PARAMS) that a search takes a grid of
SEARCHABLE = ("coef0", "degree")


def _names(names):
    return ", ".join(repr(n) for n in names) if names else "none"


def kernel_points(kernel, kernel_params):
    """The points of ``kernel_params``'s grid in scikit-learn's ``ParameterGrid`` order (``[{}]`` for None),
    each value a Python int or float; ValueError, in scikit-learn's wording, for a grid the kernel cannot take."""
    if kernel_params is None:
        return [{}]
    takes = sorted(set(KERNEL_PARAMS.get(kernel, ())) - {"gamma"})
    grid = {}
    for name, values in kernel_params.items():
        if name == "gamma":
            raise ValueError("kernel_params cannot hold 'gamma': give the bandwidths to search as gammas.")
        if name not in SEARCHABLE:
            raise ValueError(f"kernel_params has an unknown parameter {name!r}: the parameters of the named kernels "
                             f"besides gamma are {_names(SEARCHABLE)}, and kernel={kernel!r} takes "
                             f"{_names(takes)}.")
        if name not in takes:
            raise ValueError(f"kernel_params names {name!r}, which kernel={kernel!r} does not take: the "
                             f"parameters it takes besides gamma are {_names(takes)}.")
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, (Sequence, np.ndarray)):
            raise ValueError(f"Parameter grid for parameter {name!r} of kernel_params needs to be a list or a numpy "
                             f"array, but got {values!r} (of type {type(values).__name__}) instead. Single values "
                             "need to be wrapped in a list with one element.")
        values = list(np.asarray(values, dtype=object).ravel()) if isinstance(values, np.ndarray) else list(values)
        if not values:
            raise ValueError(f"Parameter grid for parameter {name!r} of kernel_params need to be a non-empty "
                             f"sequence, got: {values!r}.")
        if not all(isinstance(v, Real) and not isinstance(v, bool) and np.isfinite(v) for v in values):
            raise ValueError(f"kernel_params[{name!r}] must hold finite numbers; got {values!r}.")
        if name == "degree" and any(v < 0 for v in values):
            raise ValueError(f"kernel_params['degree'] must hold numbers >= 0, as degree; got {values!r}.")
        grid[name] = [int(v) if isinstance(v, Integral) else float(v) for v in values]
    return list(ParameterGrid(grid))


def kernel_candidates(kernel, fixed, points, gammas):
    """``(candidates, kernels)``: each candidate's searched parameters (``{**point, 'gamma': g}``, the point
    slowest) and its :class:`Kernel`, whose other parameters are ``fixed`` (degree, coef0)."""
    candidates = tuple({**point, "gamma": float(g)} for point in points for g in gammas)
    return candidates, tuple(kernel_of(kernel, fixed, c) for c in candidates)


def kernel_of(kernel, fixed, params):
    return Kernel(kernel, tuple(sorted({**fixed, **params}.items())))


def shown(candidate):
    """A candidate's parameters as a log line names them: gamma first."""
    rest = [f"{k}={v:g}" for k, v in sorted(candidate.items()) if k not in ("gamma", "alpha")]
    return ", ".join([f"gamma={candidate['gamma']:g}"] + rest)
