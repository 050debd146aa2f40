"""What a cluster config may say, per kind, and the checks that enforce it.

Each kind has a flat table ``key -> Field``; a field's ``check`` returns the
value (normalised) or raises :class:`ClusterConfigError` naming the key and
what was expected.  Unknown keys are refused by name, with the closest known
key suggested, because a misspelt ``memroy:`` silently ignored is how a
nightly job ends up with the default 2 GB workers.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dask.utils import parse_bytes, parse_timedelta

from ..errors import ClusterConfigError


@dataclass(frozen=True)
class Field:
    check: Callable[[str, Any], Any]
    doc: str
    required: bool = False


def _fail(where, expected, value):
    raise ClusterConfigError(f"{where} must be {expected} (got {value!r})")


def integer(minimum=0):
    def check(where, value):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            _fail(where, f"an integer >= {minimum}", value)
        return value
    return check


def boolean(where, value):
    if not isinstance(value, bool):
        _fail(where, "true or false", value)
    return value


def string(where, value):
    if not isinstance(value, str) or not value:
        _fail(where, "a non-empty string", value)
    return value


def optional(check):
    def wrapped(where, value):
        return None if value is None else check(where, value)
    return wrapped


def byte_size(where, value, *, allow_auto=False):
    """An int of bytes or a string such as '4GiB' (kept as given: dask parses it)."""
    if allow_auto and value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        _fail(where, "a byte size such as '4GiB'", value)
    try:
        if parse_bytes(value) <= 0:
            raise ValueError
    except (ValueError, TypeError):
        _fail(where, "a positive byte size such as '4GiB'", value)
    return value


def memory_limit(where, value):
    return byte_size(where, value, allow_auto=True)


def duration(where, value):
    """Seconds as a number or a string such as '30s'; returned in seconds."""
    if isinstance(value, bool):
        _fail(where, "a duration such as '30s'", value)
    try:
        seconds = parse_timedelta(value, default="seconds")
    except (ValueError, TypeError, KeyError):
        _fail(where, "a duration such as '30s'", value)
    if seconds is None or seconds <= 0:
        _fail(where, "a positive duration such as '30s'", value)
    return seconds


def string_list(where, value):
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        _fail(where, "a list of strings", value)
    return list(value)


def string_map(where, value):
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, (str, int, float)) and not isinstance(v, bool)
        for k, v in value.items()
    ):
        _fail(where, "a mapping of names to strings", value)
    return {k: str(v) for k, v in value.items()}


def mapping(schema):
    def check(where, value):
        return check_mapping(schema, value, where)
    return check


def check_mapping(schema: dict, value, where: str) -> dict:
    """Check every key of ``value`` against ``schema``; unknown keys fail by name."""
    if not isinstance(value, dict):
        _fail(where or "the config", "a mapping of keys to values", value)
    out = {}
    for key, item in value.items():
        path = f"{where}.{key}" if where else str(key)
        if key not in schema:
            close = difflib.get_close_matches(str(key), list(schema), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ClusterConfigError(
                f"unknown key '{path}'{hint}; allowed here: {', '.join(sorted(schema))}"
            )
        out[key] = schema[key].check(path, item)
    missing = [k for k, f in schema.items() if f.required and k not in value]
    if missing:
        prefix = f"{where}." if where else ""
        raise ClusterConfigError(f"missing required key '{prefix}{missing[0]}'")
    return out


TLS = {
    "ca_file": Field(string, "PEM file of the CA that signed the scheduler's certificate", required=True),
    # dask's TLS is mutual: the scheduler refuses a client without a certificate
    "cert": Field(string, "PEM certificate of this client", required=True),
    "key": Field(optional(string), "PEM private key of this client (may be inside cert)"),
    "require_encryption": Field(boolean, "refuse plain tcp:// (default true)"),
}

#: Site certificates of a scheduler dkapprox starts (slurm/pbs): one certificate for scheduler, workers and client
SITE_TLS = {
    "ca_file": Field(string, "PEM file of the CA that signed cert", required=True),
    "cert": Field(string, "PEM certificate of the scheduler, the workers and this client", required=True),
    "key": Field(optional(string), "its PEM private key (may be inside cert); mode 0600"),
}

LOCAL = {
    "n_workers": Field(integer(1), "worker processes (default: one per core)"),
    "threads_per_worker": Field(integer(1), "threads per worker (default 1: BLAS per block is fastest)"),
    "memory_limit": Field(memory_limit, "per worker, e.g. '4GiB', or 'auto' (machine memory / workers)"),
    "processes": Field(boolean, "workers in processes (default true); false runs threads in this process"),
    "dashboard_address": Field(optional(string), "default '127.0.0.1:8787' (loopback); ':8787' for every "
                                                 "interface; null for no dashboard"),
    "local_directory": Field(optional(string), "where workers spill to disk"),
}

#: dask-cuda runs one thread per GPU worker; with more, computations have failed intermittently
DASK_CUDA_THREADS_ISSUE = "https://github.com/rapidsai/dask-cuda/issues/1262"


def one_thread(where, value):
    """threads_per_worker of a 'cuda' cluster: 1, the only value dask-cuda supports."""
    if isinstance(value, bool) or not isinstance(value, int) or value != 1:
        raise ClusterConfigError(
            f"{where} must be 1 for a 'cuda' cluster (got {value!r}): dask-cuda runs one thread per "
            f"GPU worker, and more have failed intermittently (dask-cuda #1262, {DASK_CUDA_THREADS_ISSUE}); "
            "for more parallelism give the cluster more GPUs"
        )
    return value


def device_size(where, value):
    """GPU memory: a fraction of the device's (0 < x <= 1) or a byte size such as '16GiB'."""
    if isinstance(value, float):
        if not 0 < value <= 1:
            _fail(where, "a fraction of the GPU's memory in (0, 1] such as 0.8, or a byte size such as '16GiB'",
                  value)
        return value
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        _fail(where, "a fraction of the GPU's memory such as 0.8, or a byte size such as '16GiB'", value)
    return byte_size(where, value)


def device_memory_limit(where, value):
    """dask-cuda's spilling threshold; 'auto' or 0: no spilling, the whole GPU."""
    if value == "auto" or (value == 0 and not isinstance(value, bool)):
        return value
    return device_size(where, value)


def cuda_devices(where, value):
    """GPUs by index or UUID: '0,1', 0 or [0, 1] (UUIDs: 'GPU-...', 'MIG-...'); returned as a list."""
    expected = "GPU indices or UUIDs, such as '0,1' or [0, 1]"
    if isinstance(value, bool):
        _fail(where, expected, value)
    if isinstance(value, int):
        items = [value]
    elif isinstance(value, str):
        items = [item.strip() for item in value.split(",")]
    elif isinstance(value, list) and value:
        items = list(value)
    else:
        _fail(where, expected, value)
    devices = []
    for item in items:
        if isinstance(item, str) and item.isdigit():
            item = int(item)
        if isinstance(item, bool) or not (
            (isinstance(item, int) and item >= 0)
            or (isinstance(item, str) and item.startswith(("GPU-", "MIG-")))
        ):
            _fail(where, expected, value)
        if item in devices:
            raise ClusterConfigError(f"{where} names GPU {item!r} twice (got {value!r}): "
                                     "dask-cuda runs one worker per GPU")
        devices.append(item)
    return devices


CUDA = {
    "n_workers": Field(optional(integer(1)), "GPU workers (default null: one per visible GPU)"),
    "threads_per_worker": Field(one_thread, "must be 1: one thread per GPU worker (dask-cuda #1262)"),
    "memory_limit": Field(memory_limit, "host memory per worker, e.g. '16GiB', or 'auto' "
                                        "(machine memory / workers)"),
    "device_memory_limit": Field(optional(device_memory_limit), "GPU memory per worker before it spills to "
                                                                "host memory: e.g. 0.8 or '30GiB'; 'auto': "
                                                                "no spilling"),
    "CUDA_VISIBLE_DEVICES": Field(optional(cuda_devices), "the GPUs to use, e.g. '0,1' or [0, 1] "
                                                          "(default: all visible)"),
    "rmm_pool_size": Field(optional(device_size), "an RMM memory pool per worker, e.g. '24GiB' or 0.9 "
                                                  "(needs RAPIDS's rmm)"),
    "dashboard_address": Field(optional(string), "default '127.0.0.1:8787' (loopback); ':8787' for every "
                                                 "interface; null for no dashboard"),
    "local_directory": Field(optional(string), "where workers spill to disk"),
}

SCHEDULER = {
    "address": Field(string, "e.g. 'tls://scheduler.example.org:8786'", required=True),
    "timeout": Field(duration, "how long to try connecting (default '30s')"),
    "tls": Field(mapping(TLS), "certificates for a tls:// scheduler"),
}

_JOBQUEUE = {
    "cores": Field(integer(1), "cores per job", required=True),
    "memory": Field(byte_size, "memory per job, e.g. '64GiB'", required=True),
    "processes": Field(integer(1), "worker processes per job"),
    "jobs": Field(integer(0), "jobs to submit now (fixed size)"),
    "adapt": Field(mapping({
        "minimum_jobs": Field(integer(0), "jobs kept when idle"),
        "maximum_jobs": Field(integer(1), "most jobs at once"),
    }), "scale between these job counts with the load"),
    "queue": Field(optional(string), "queue or partition"),
    "account": Field(optional(string), "account to charge"),
    "walltime": Field(optional(string), "e.g. '02:00:00'"),
    "job_name": Field(optional(string), "name of the batch jobs"),
    "interface": Field(optional(string), "network interface, e.g. 'ib0'"),
    "local_directory": Field(optional(string), "fast local disk on the nodes, e.g. '$TMPDIR'"),
    "log_directory": Field(optional(string), "where the batch system writes job logs"),
    "python": Field(optional(string), "Python on the nodes (default: this one)"),
    "death_timeout": Field(duration, "how long a worker waits for the scheduler"),
    "start_timeout": Field(duration, "give up (exit 75, queued jobs cancelled) when no worker runs for this "
                                     "long, e.g. '10m' (default)"),
    "job_extra_directives": Field(string_list, "extra #SBATCH/#PBS lines"),
    "job_script_prologue": Field(string_list, "shell lines before the worker starts, e.g. 'module load ...'"),
    "worker_extra_args": Field(string_list, "extra arguments of the dask worker command"),
    "scheduler_options": Field(mapping({
        "host": Field(string, "address the scheduler listens on"),
        "port": Field(integer(0), "scheduler port"),
        "interface": Field(string, "network interface of the scheduler"),
        "dashboard_address": Field(string, "default '127.0.0.1:8787' (loopback); ':8787' for every interface"),
    }), "where the scheduler (on this machine) listens"),
    "tls": Field(mapping(SITE_TLS), "site certificates (default: temporary credentials made for each cluster)"),
    "insecure": Field(boolean, "true: plain tcp:// with no authentication, warned at start (default false: TLS)"),
    "shared_temp_directory": Field(optional(string), "where temporary TLS credentials are written, at the same "
                                                     "path on the nodes (default ~/.dkapprox/credentials)"),
}

SLURM = dict(_JOBQUEUE, **{
    "job_cpu": Field(optional(integer(1)), "--cpus-per-task, if not cores"),
    "job_mem": Field(optional(string), "--mem, if not memory"),
})

PBS = dict(_JOBQUEUE, **{
    "resource_spec": Field(optional(string), "e.g. 'select=1:ncpus=8:mem=64GB'"),
})

KUBERNETES = {
    "name": Field(string, "name of the DaskCluster resource", required=True),
    "namespace": Field(optional(string), "Kubernetes namespace"),
    "image": Field(string, "container image with dkapprox installed"),
    "n_workers": Field(integer(0), "workers to start"),
    "adapt": Field(mapping({
        "minimum": Field(integer(0), "workers kept when idle"),
        "maximum": Field(integer(1), "most workers at once"),
    }), "scale between these worker counts with the load"),
    "resources": Field(mapping({
        "requests": Field(string_map, "e.g. {cpu: '2', memory: 8Gi}"),
        "limits": Field(string_map, "e.g. {cpu: '2', memory: 8Gi}"),
    }), "per worker pod"),
    "env": Field(string_map, "environment of scheduler and workers"),
    "worker_command": Field(string, "default 'dask-worker'"),
    "idle_timeout": Field(integer(0), "seconds before an idle cluster is removed (0: never)"),
    "scheduler_service_type": Field(string, "ClusterIP, NodePort or LoadBalancer"),
}

SCHEMAS = {"local": LOCAL, "scheduler": SCHEDULER, "slurm": SLURM, "pbs": PBS,
           "kubernetes": KUBERNETES, "cuda": CUDA}
