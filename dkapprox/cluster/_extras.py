"""The optional packages behind some cluster kinds, imported on demand with an install hint.

A leaf of the cluster package: starting a cluster (``_start``) and dask-jobqueue's
clusters (``_jobqueue``) both need it, and neither may import the other for it.
"""

from __future__ import annotations

import importlib

from ..errors import ClusterConfigError, MissingPackageError

# kind -> (module, extra, package on PyPI, error raised without it). slurm/pbs/kubernetes have
# always refused as a bad config (exit 78); a 'cuda' cluster's missing dask-cuda is a package to
# install (MissingPackageError, exit 69), as for a URL's fsspec backend.
_EXTRAS = {
    "slurm": ("dask_jobqueue", "jobqueue", "dask-jobqueue", ClusterConfigError),
    "pbs": ("dask_jobqueue", "jobqueue", "dask-jobqueue", ClusterConfigError),
    "kubernetes": ("dask_kubernetes", "kubernetes", "dask-kubernetes", ClusterConfigError),
    "cuda": ("dask_cuda", "gpu", "dask-cuda", MissingPackageError),
}


def require(kind):
    """The module a cluster kind needs, or an error naming the extra to install.

    Imported only here, when a cluster of that kind is rendered or started: never at the import
    of dkapprox (dask_cuda, for one, initialises CUDA libraries).
    """
    module, extra, package, error = _EXTRAS[kind]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name == module:
            message = f"a '{kind}' cluster needs {package}, which is not installed: pip install 'dkapprox[{extra}]'"
        else:  # the package is there but one of its own dependencies is not
            message = (f"a '{kind}' cluster needs {package}, which is installed but cannot be imported "
                       f"({exc}): pip install 'dkapprox[{extra}]'")
        if error is MissingPackageError:
            raise MissingPackageError(message, package=package) from None
        raise error(message) from None
