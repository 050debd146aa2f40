"""Start (or reach) the cluster a config describes and hand back a Client."""

from __future__ import annotations

import contextlib
import logging
import warnings

import dask
import yaml

from ..errors import ClusterConfigError, ClusterConnectError
from ..utils import available_cpus
from ._config import ClusterConfig
from ._extras import require as _require
from ._security import LOOPBACK_DASHBOARD, for_jobqueue, is_loopback

logger = logging.getLogger("dkapprox.cluster")

def default_config() -> ClusterConfig:
    """A LocalCluster sized to the machine: one single-threaded worker per core.

    One thread per worker is fastest for our blocks (BLAS runs one thread
    per worker; several Python threads per worker oversubscribe the cores).
    """
    return ClusterConfig("local", {"n_workers": available_cpus(), "threads_per_worker": 1,
                                   "memory_limit": "auto"}, "<default local cluster>")


def security(tls: dict | None):
    """distributed's Security for a ``tls`` section (None without one)."""
    if not tls:
        return None
    from distributed.security import Security

    return Security(
        tls_ca_file=tls["ca_file"],
        tls_client_cert=tls.get("cert"),
        tls_client_key=tls.get("key"),
        require_encryption=tls.get("require_encryption", True),
    )


def jobqueue_kwargs(options: dict) -> dict:
    """Constructor keywords of SLURMCluster/PBSCluster (sizes, adapt and start_timeout removed)."""
    from ._jobqueue import cluster_kwargs

    return cluster_kwargs(options)


def kubernetes_kwargs(options: dict) -> dict:
    return {k: v for k, v in options.items() if k != "adapt"}


def render(config: ClusterConfig) -> str:
    """What starting ``config`` would submit, without submitting anything.

    slurm/pbs: the batch script dask-jobqueue writes for each job (the
    scheduler address is a placeholder until the scheduler starts);
    kubernetes: the DaskCluster resource as YAML; local/cuda/scheduler: a summary
    (cuda: without importing dask-cuda, so it works on a machine without it).
    """
    if config.kind in ("slurm", "pbs"):
        jq = _require(config.kind)
        job_cls = jq.SLURMCluster.job_cls if config.kind == "slurm" else jq.PBSCluster.job_cls
        kw = jobqueue_kwargs(config.options)
        kw.pop("scheduler_options", None)
        security = _rendered_security(config.options)
        protocol = "tcp://" if security is None else "tls://"
        return job_cls(f"{protocol}<insert-scheduler-address-here>:8786", name="dummy-name",
                       config_name=config.kind, protocol=protocol, security=security, **kw).job_script()
    if config.kind == "kubernetes":
        _require("kubernetes")
        from dask_kubernetes.operator import make_cluster_spec

        kw = {k: v for k, v in kubernetes_kwargs(config.options).items()
              if k in ("n_workers", "resources", "env", "worker_command", "image",
                       "idle_timeout", "scheduler_service_type")}
        spec = make_cluster_spec(config.options["name"], **kw)
        if config.options.get("namespace"):
            spec["metadata"]["namespace"] = config.options["namespace"]
        return yaml.dump(spec, Dumper=_NoAliasDumper, sort_keys=False)
    return yaml.safe_dump({"kind": config.kind, **config.options}, sort_keys=False)


def _rendered_security(options: dict):
    """The TLS arguments a job script gets, without making credentials: site files, or placeholders."""
    if options.get("insecure") or options.get("tls"):
        return for_jobqueue(options).security  # None, or the site's files (checked to exist)
    from distributed.security import Security

    from ._security import DEFAULT_CREDENTIALS_DIRECTORY

    folder = f"{options.get('shared_temp_directory') or DEFAULT_CREDENTIALS_DIRECTORY}/dkapprox-tls-<made-at-start>"
    return Security(tls_ca_file=f"{folder}/cert.pem", tls_worker_cert=f"{folder}/cert.pem",
                    tls_worker_key=f"{folder}/key.pem", require_encryption=True)


class _NoAliasDumper(yaml.SafeDumper):
    """Writes a shared dict twice instead of as a YAML anchor (kubectl users read this)."""

    def ignore_aliases(self, data):
        return True


def local_kwargs(options: dict, worker_log_level) -> dict:
    """Constructor keywords of LocalCluster (and LocalCUDACluster, a LocalCluster of GPU workers)."""
    kw = dict(options, silence_logs=worker_log_level)
    kw.setdefault("threads_per_worker", 1)
    # loopback unless the config names another address (":8787" is every interface: anyone on the network
    # could read task names, worker addresses and logs); the workers' own pages follow their 127.0.0.1
    kw.setdefault("dashboard_address", LOOPBACK_DASHBOARD)
    if kw["dashboard_address"] is None:
        # the scheduler serves /health on 8787 even without a dashboard; any free port of loopback will do
        kw["dashboard_address"] = None
        kw["scheduler_kwargs"] = {"dashboard_address": "127.0.0.1:0"}
    return kw


def _start_local(cls, kw):
    with warnings.catch_warnings():
        # "Port 8787 is already in use ... Hosting on port N instead": the link we log has N
        warnings.filterwarnings("ignore", message="Port .* is already in use", category=UserWarning)
        return cls(**kw)


def _start_cluster(config: ClusterConfig, worker_log_level, start_timeout=None):
    """The cluster object for a config (None for an existing scheduler)."""
    opts = config.options
    if config.kind == "local":
        from distributed import LocalCluster

        return _start_local(LocalCluster, local_kwargs(opts, worker_log_level))
    if config.kind == "cuda":
        # dask_cuda only now, never at import: without it this is a MissingPackageError (exit 69)
        dask_cuda = _require("cuda")
        # one single-threaded worker per GPU (threads_per_worker is checked to be 1: dask-cuda #1262);
        # n_workers/device_memory_limit/CUDA_VISIBLE_DEVICES/rmm_pool_size: null means dask-cuda's default
        kw = {k: v for k, v in local_kwargs(opts, worker_log_level).items()
              if v is not None or k == "dashboard_address"}
        return _start_local(dask_cuda.LocalCUDACluster, kw)
    if config.kind in ("slurm", "pbs"):
        from . import _jobqueue

        return _jobqueue.start(config, start_timeout, log_level=worker_log_level)
    if config.kind == "kubernetes":
        _require("kubernetes")
        from dask_kubernetes.operator import KubeCluster

        cluster = KubeCluster(**kubernetes_kwargs(opts))
        if "adapt" in opts:
            cluster.adapt(**opts["adapt"])
        return cluster
    return None


@contextlib.contextmanager
def connect(config: ClusterConfig | None = None, *, scheduler: str | None = None,
            worker_log_level=logging.WARNING, start_timeout=None):
    """A distributed Client for ``config`` (or a scheduler address), closed on exit.

    Without either, a LocalCluster sized to the machine. The cluster is shut
    down on exit if this function started it; an existing scheduler is left
    running. ``worker_log_level`` applies to the workers of a local cluster
    (the command line raises it so that a failing task logs no traceback).

    slurm/pbs: when no worker runs for ``start_timeout`` seconds (default:
    the config's ``start_timeout``, else 10 minutes) while tasks wait, the
    computation inside raises :class:`~dkapprox.errors.WorkersNeverStarted`
    (exit 75 on the command line) naming the pending jobs and the batch
    system's reason, and the queued jobs are cancelled.

    Examples
    --------
    >>> from dkapprox.cluster import connect, parse_config
    >>> with connect(parse_config("kind: local\\nn_workers: 1\\nprocesses: false\\n"
    ...                           "dashboard_address: null")) as client:
    ...     client.submit(sum, [1, 2]).result()
    3
    """
    if config is not None and scheduler is not None:
        raise ClusterConfigError("give a cluster config or a scheduler address, not both")
    if scheduler is not None:
        config = ClusterConfig("scheduler", {"address": scheduler}, "--scheduler")
    config = config or default_config()
    with contextlib.ExitStack() as stack:
        if config.kind in ("local", "cuda"):  # LocalCUDACluster is a LocalCluster too
            stack.enter_context(dask.config.set(KEEP_NANNIES))
        yield from _connected(config, worker_log_level, start_timeout)


#: A LocalCluster closes a worker's nanny for good when, 15 s (distributed's default) after the
#: worker was lost, no worker of its name is connected. Under repeated worker deaths (memory
#: kills, an operator's SIGKILLs) that moment can fall in the middle of the nanny's restart of
#: the same worker, and the cluster would stay a worker short for the rest of the job. The nanny
#: restarts its worker itself: keep it. tests/faults/test_churn.py
#: (test_sigkill_loop_during_a_streamed_transform_gives_the_known_checksum) kills workers in a
#: loop and needs every one of them back.
KEEP_NANNIES = {"distributed.deploy.lost-worker-timeout": "1 hour"}


def dashboard_link(client, config: ClusterConfig) -> str:
    """The dashboard's link as it can be opened: one on loopback is not at the scheduler's host.

    (distributed builds the link from the scheduler's address: the cluster network's interface of a
    slurm/pbs scheduler, the host's address for an in-process LocalCluster.)
    """
    link = client.dashboard_link
    if config.kind in ("slurm", "pbs"):
        from ._jobqueue import cluster_kwargs

        address = cluster_kwargs(config.options)["scheduler_options"]["dashboard_address"]
    elif config.kind in ("local", "cuda"):
        address = config.options.get("dashboard_address", LOOPBACK_DASHBOARD) or "127.0.0.1:0"
    else:
        return link
    host = str(address).rpartition(":")[0]
    if not is_loopback(host):
        return link
    scheme, _, rest = link.partition("://")
    netloc, slash, path = rest.partition("/")
    return f"{scheme}://{host}:{netloc.rpartition(':')[2]}{slash}{path}"


def _connected(config, worker_log_level, start_timeout=None):
    from distributed import Client

    cluster = _start_cluster(config, worker_log_level, start_timeout)
    try:
        if cluster is None:
            address = config.options["address"]
            try:
                client = Client(address, security=security(config.options.get("tls")),
                                timeout=config.options.get("timeout", 30))
            except (OSError, TimeoutError) as exc:
                raise ClusterConnectError(f"cannot reach the scheduler at {address}: {exc}") from None
        else:
            client = Client(cluster)
        try:
            logger.info("dask dashboard: %s", dashboard_link(client, config))
            try:
                yield client
            except Exception as exc:
                watch = getattr(cluster, "_dkapprox_watch", None)  # slurm/pbs: workers that never ran
                explained = watch.explain(exc) if watch is not None else None
                if explained is None:
                    raise
                raise explained from exc
        finally:
            client.close()
    finally:
        if cluster is not None:
            try:
                cluster.close()
            finally:
                credentials = getattr(cluster, "_dkapprox_credentials", None)  # slurm/pbs: TLS files
                if credentials is not None:
                    credentials.close()
