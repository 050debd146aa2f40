"""Cluster configs -> a distributed Client.

A config is a small YAML file with a ``kind``: ``local`` (LocalCluster),
``scheduler`` (an existing scheduler, TLS optional), ``slurm`` and ``pbs``
(dask-jobqueue, the ``jobqueue`` extra), ``kubernetes`` (dask-kubernetes,
the ``kubernetes`` extra) or ``cuda`` (dask-cuda's LocalCUDACluster, one
single-threaded worker per GPU, the ``gpu`` extra). Files are read with ``yaml.safe_load`` and checked
against a schema per kind; unknown keys are refused by name. A template of each
kind ships with the package (``cluster_configs/`` at the repository's top, package data in the
wheel): :func:`template_names`, :func:`template`, ``dkapprox cluster-config NAME``.
"""

from ..errors import ClusterConfigError, ClusterConnectError
from ._config import ClusterConfig, load_config, parse_config
from ._memory import WorkerMemory, active_client, check_memory, explain_worker_deaths
from ._run import WorkerReport, WorkerWatch, run
from ._schema import SCHEMAS, duration
from ._security import LOOPBACK_DASHBOARD
from ._start import connect, dashboard_link, default_config, render
from ._templates import template, template_names

__all__ = ["SCHEMAS", "ClusterConfig", "ClusterConfigError", "ClusterConnectError", "connect",
           "WorkerReport", "WorkerWatch", "default_config", "load_config", "parse_config", "render", "run",
           "template", "template_names"]
