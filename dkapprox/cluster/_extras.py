"""The optional packages behind some cluster kinds, imported on demand with an install hint.

A leaf of the cluster package: starting a cluster (``_start``) and dask-jobqueue's
clusters (``_jobqueue``) both need it, and neither may import the other for it.
"""

from __future__ import annotations

from ..errors import ClusterConfigError

_EXTRAS = {
    "slurm": ("dask_jobqueue", "jobqueue", "dask-jobqueue"),
    "pbs": ("dask_jobqueue", "jobqueue", "dask-jobqueue"),
    "kubernetes": ("dask_kubernetes", "kubernetes", "dask-kubernetes"),
}


def require(kind):
    """The module a cluster kind needs, or a ClusterConfigError naming the extra to install."""
    module, extra, package = _EXTRAS[kind]
    try:
        return __import__(module)
    except ImportError:
        raise ClusterConfigError(
            f"a '{kind}' cluster needs {package}, which is not installed: "
            f"pip install 'dkapprox[{extra}]'"
        ) from None
