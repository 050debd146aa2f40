"""Batch-system clusters (SLURM, PBS through dask-jobqueue): config checks, start, workers that never start.

Three things a site's users run into, handled here:

- **Contradictory memory and time settings** are refused when the config is
  read (:func:`check`): a job whose ``--mem`` is less than the sum of its
  workers' memory limits is killed by SLURM before dask's limits act, and a
  worker ``--lifetime`` (plus stagger) not shorter than the walltime means
  SLURM kills the worker before it retires and hands its data over.
- **Workers that never start** (a partition that is down, a typo in
  ``queue``, a full queue): distributed's scheduler fails the waiting tasks
  after ``start_timeout`` without a running worker
  (``distributed.scheduler.no-workers-timeout``); :func:`explain` turns that
  into :class:`~dkapprox.errors.WorkersNeverStarted` (exit 75), one line naming
  the pending job ids and the batch system's reason, after cancelling the
  queued jobs. The same applies when every worker is lost mid-job (walltime)
  and no replacement starts in time.
- **Workers coming and going** are logged (``dkapprox.cluster``): the first
  worker's delay after the cluster started, and every worker that joins or
  leaves with its batch job id.
"""

from __future__ import annotations

import logging
import re
import shlex
import shutil
import subprocess
import time

import dask
from dask.utils import parse_bytes, parse_timedelta

from ..errors import WorkersNeverStarted
from ._extras import require
from ._schema import ClusterConfigError
from ._security import LOOPBACK_DASHBOARD, for_jobqueue, warn_insecure

logger = logging.getLogger("dkapprox.cluster")

#: How long a job waits for its first worker before giving up (exit 75, queued jobs cancelled).
#: Ten minutes: a one-node job on a partition that is up usually starts within a minute or two
#: (SLURM schedules at submission and its backfill pass runs every 30 s by default), while a nightly
#: job should fail with the reason well inside its hour, not hang. A cancelled job loses its place
#: in the queue (age priority), so sites whose queues are busy should raise it (``start_timeout``).
DEFAULT_START_TIMEOUT = 600.0

#: Config keys that are dkapprox's own, not dask-jobqueue constructor keywords.
OWN_KEYS = ("jobs", "adapt", "start_timeout", "tls", "insecure", "shared_temp_directory")


def cluster_kwargs(options: dict) -> dict:
    """Constructor keywords of SLURMCluster/PBSCluster: the config without dkapprox's own keys.

    The scheduler's dashboard listens on loopback unless ``scheduler_options`` names another address
    (dask-jobqueue's default is every interface).
    """
    kw = {k: v for k, v in options.items() if k not in OWN_KEYS}
    kw["scheduler_options"] = {"dashboard_address": LOOPBACK_DASHBOARD, **(kw.get("scheduler_options") or {})}
    return kw


# -- config checks ----------------------------------------------------------------------

_SLURM_UNITS = {"": 2**20, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def slurm_bytes(text: str) -> int:
    """A SLURM memory size ('32G', '4000', '512M': binary units, MiB without a suffix) in bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)B?\s*", str(text), flags=re.IGNORECASE)
    if match is None:
        raise ValueError(text)
    return int(match.group(1)) * _SLURM_UNITS[match.group(2).upper()]


def walltime_seconds(text: str) -> float:
    """SLURM/PBS walltime in seconds: 'MM', 'MM:SS', 'HH:MM:SS', 'D-HH', 'D-HH:MM', 'D-HH:MM:SS'."""
    text = str(text).strip()
    days, _, rest = text.rpartition("-")
    parts = rest.split(":")
    if not all(p.isdigit() for p in parts) or (days and not days.isdigit()) or not 1 <= len(parts) <= 3:
        raise ValueError(text)
    numbers = [int(p) for p in parts]
    if days:  # D-HH[:MM[:SS]]
        numbers += [0] * (3 - len(numbers))
        hours, minutes, seconds = numbers
        return ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds
    if len(numbers) == 1:  # minutes
        return numbers[0] * 60
    if len(numbers) == 2:  # minutes:seconds
        return numbers[0] * 60 + numbers[1]
    return (numbers[0] * 60 + numbers[1]) * 60 + numbers[2]


def _arg(args: list, name: str):
    """The value of ``--name V`` or ``--name=V`` in a worker command line (the last one wins, as in click)."""
    value = None
    for i, item in enumerate(args):
        if item == name and i + 1 < len(args):
            value = args[i + 1]
        elif item.startswith(name + "="):
            value = item.split("=", 1)[1]
    return value


def check(kind: str, options: dict) -> None:
    """Refuse settings of a slurm/pbs config that contradict each other (ClusterConfigError, a ValueError).

    - ``processes`` more than ``cores`` (a worker needs a thread);
    - ``adapt.minimum_jobs`` more than ``adapt.maximum_jobs``;
    - the job's memory (SLURM ``job_mem``, PBS ``mem=`` in ``resource_spec``)
      less than ``memory``, which dask-jobqueue splits into the workers'
      memory limits (``memory / processes`` each); memory given a second way
      (``--mem``/``--mem-per-cpu`` in ``job_extra_directives``, a bigger
      ``--memory-limit`` in ``worker_extra_args``);
    - a worker ``--lifetime`` plus ``--lifetime-stagger`` not shorter than
      ``walltime``.
    """
    cores, processes = options.get("cores"), options.get("processes")
    memory = parse_bytes(options["memory"]) if "memory" in options else None
    if cores is not None and processes is not None and processes > cores:
        raise ClusterConfigError(
            f"processes: {processes} worker processes cannot share {cores} cores (each needs a thread); "
            f"make processes at most cores")
    adapt = options.get("adapt") or {}
    if adapt.get("minimum_jobs", 0) > adapt.get("maximum_jobs", float("inf")):
        raise ClusterConfigError(
            f"adapt: minimum_jobs {adapt['minimum_jobs']} is more than maximum_jobs {adapt['maximum_jobs']}")
    per_worker = f"{_gib(memory / (processes or 1))} per worker" if memory else ""
    if kind == "slurm" and options.get("job_mem") is not None and memory is not None:
        try:
            granted = slurm_bytes(options["job_mem"])
        except ValueError:
            raise ClusterConfigError(f"job_mem must be a SLURM memory size such as '32G' "
                                     f"(got {options['job_mem']!r})") from None
        if granted < memory:
            raise ClusterConfigError(
                f"job_mem {options['job_mem']} (the --mem SLURM grants each job) is less than memory "
                f"{options['memory']} (the workers' memory limits added up: {per_worker}); SLURM would kill "
                f"the job before dask's limits act: make job_mem at least memory, or lower memory")
    if kind == "pbs" and options.get("resource_spec") and memory is not None:
        match = re.search(r"\bmem=(\d+\s*[kmgt]?b?)\b", options["resource_spec"], flags=re.IGNORECASE)
        if match:
            granted = slurm_bytes(match.group(1).upper().replace("B", "") or "0")
            if granted < memory:
                raise ClusterConfigError(
                    f"resource_spec asks PBS for mem={match.group(1)}, less than memory {options['memory']} "
                    f"(the workers' memory limits added up: {per_worker}); make them agree")
    for line in options.get("job_extra_directives") or []:
        words = line.split()
        if kind == "slurm" and any(re.match(r"--mem(-per-cpu|-per-gpu)?(=|$)", w) for w in words):
            raise ClusterConfigError(
                f"job_extra_directives: {line!r} sets the job's memory a second way; give it with memory "
                f"(split into the workers' limits) and job_mem (SLURM's --mem, if it must be larger)")
    args = [str(a) for a in options.get("worker_extra_args") or []]
    limit = _arg(args, "--memory-limit")
    if limit is not None and memory is not None:
        try:
            limit_bytes = parse_bytes(limit)
        except ValueError:
            raise ClusterConfigError(f"worker_extra_args: --memory-limit {limit!r} is not a byte size") from None
        if limit_bytes * (processes or 1) > memory:
            raise ClusterConfigError(
                f"worker_extra_args: --memory-limit {limit} for each of {processes or 1} worker processes "
                f"adds up to more than the job's memory {options['memory']}; leave the limit to memory "
                f"({per_worker})")
    lifetime = _arg(args, "--lifetime")
    if lifetime is not None:
        stagger = _arg(args, "--lifetime-stagger") or "0"
        try:
            life, jitter = parse_timedelta(lifetime, "seconds"), parse_timedelta(stagger, "seconds")
        except (ValueError, TypeError, KeyError):
            raise ClusterConfigError(f"worker_extra_args: --lifetime {lifetime!r} / --lifetime-stagger "
                                     f"{stagger!r} must be durations such as '55m'") from None
        if options.get("walltime"):
            try:
                wall = walltime_seconds(options["walltime"])
            except ValueError:
                raise ClusterConfigError(f"walltime must be like '02:00:00' or '1-00:00:00' "
                                         f"(got {options['walltime']!r})") from None
            if life + jitter >= wall:
                raise ClusterConfigError(
                    f"worker_extra_args: --lifetime {lifetime} plus --lifetime-stagger {stagger} is not shorter "
                    f"than walltime {options['walltime']}: the batch system would kill workers before they "
                    f"retire and hand their results over; make lifetime + stagger a few minutes shorter")


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.2f} GiB"


# -- start, watch, explain -----------------------------------------------------------


def start(config, start_timeout=None, log_level=logging.WARNING):
    """Start the SLURMCluster/PBSCluster of ``config`` (jobs submitted or adaptive) with a start watch."""
    jq = require(config.kind)
    cls = jq.SLURMCluster if config.kind == "slurm" else jq.PBSCluster
    opts = config.options
    timeout = float(start_timeout or opts.get("start_timeout") or DEFAULT_START_TIMEOUT)
    watch = StartWatch(config, timeout)
    credentials = for_jobqueue(opts)  # TLS unless insecure: true (the scheduler listens beyond loopback)
    try:
        # read once by the scheduler (which runs in this process) when it is created
        with dask.config.set({"distributed.scheduler.no-workers-timeout": timeout}):
            # silence_logs: dask-jobqueue's default ("error"), or quieter: the command line passes CRITICAL,
            # so that the scheduler's "task failed without workers" lines do not precede its one-line error
            cluster = cls(**dict(cluster_kwargs(opts), silence_logs=max(log_level, logging.ERROR),
                                 job_cls=_watched_job_cls(cls.job_cls, watch), security=credentials.security,
                                 protocol=credentials.protocol))
    except BaseException:
        credentials.close()
        raise
    cluster._dkapprox_credentials = credentials  # removed by connect() after the cluster closes
    if credentials.security is None:
        warn_insecure(config.kind, cluster.scheduler_address)
    watch.cluster = cluster
    cluster.scheduler.add_plugin(watch)
    cluster._dkapprox_watch = watch
    if "adapt" in opts:
        cluster.adapt(**opts["adapt"])
    else:
        cluster.scale(jobs=opts.get("jobs", 1))
    return cluster


def _watched_job_cls(base, watch):
    """dask-jobqueue's job class, telling ``watch`` when sbatch/qsub refuses a job (a typo in queue)."""
    from distributed.deploy.spec import ProcessInterface

    class WatchedJob(base):
        async def start(self):
            try:
                await super().start()
            except RuntimeError as exc:  # dask-jobqueue: "Command exited with non-zero exit code ..."
                # kept from asyncio's "Task exception was never retrieved" traceback; the job's error says it
                watch.submission_failed(exc)
                await ProcessInterface.start(self)  # "started" with no job: SpecCluster asserts a status

    WatchedJob.__name__ = WatchedJob.__qualname__ = base.__name__
    return WatchedJob


def _scheduler_plugin_base():
    from distributed.diagnostics.plugin import SchedulerPlugin

    return SchedulerPlugin


class StartWatch(_scheduler_plugin_base()):
    """A scheduler plugin: when workers joined and left, by batch job; the timeout's explanation."""

    name = "dkapprox-start-watch"

    def __init__(self, config, timeout, cluster=None):
        self.cluster, self.config, self.timeout = cluster, config, timeout
        self.refused = []          # what the batch system said when it refused a job
        self.started = time.monotonic()
        self.first_worker = None   # seconds after start
        self.joined = []           # (seconds after start, worker name, job id)
        self.left = []
        self._jobs = {}            # worker address -> job id (a lost job leaves cluster.workers)

    def job_of(self, name) -> str | None:
        """The batch job id of a worker name now (a replacement job reuses its predecessor's name)."""
        name = str(name)
        job = self.cluster.workers.get(name)
        if job is None and "-" in name:  # processes > 1: workers are named <job name>-<i>
            job = self.cluster.workers.get(name.rsplit("-", 1)[0])
        return getattr(job, "job_id", None)

    def _closing(self):
        return getattr(self.cluster.status, "name", "") in ("closing", "closed")

    def add_worker(self, scheduler, worker):
        now = time.monotonic() - self.started
        ws = scheduler.workers.get(worker)
        name = ws.name if ws is not None else worker
        job = self._jobs[worker] = self.job_of(name)
        self.joined.append((now, name, job))
        if self.first_worker is None:
            self.first_worker = now
            logger.info("first worker connected %.1f s after the cluster started (%s job %s)", now,
                        self.config.kind.upper(), job)
        else:
            logger.info("worker joined (%s job %s) %.1f s after the cluster started; %d connected",
                        self.config.kind.upper(), job, now, len(self.joined) - len(self.left))

    def remove_worker(self, scheduler, worker, **kwargs):
        now = time.monotonic() - self.started
        ws = scheduler.workers.get(worker)
        name = ws.name if ws is not None else worker
        job = self._jobs.get(worker)
        self.left.append((now, name, job))
        if not self._closing():
            logger.info("worker left (%s job %s) %.1f s after the cluster started; %d still connected",
                        self.config.kind.upper(), job, now, len(self.joined) - len(self.left))

    def submission_failed(self, exc):
        """A job was refused (sbatch exited non-zero): before any worker ran, fail the waiting work now."""
        text = str(exc)
        said = text.split("stderr:", 1)[1] if "stderr:" in text else text
        self.refused.append("; ".join(" ".join(line.split()) for line in said.splitlines() if line.strip())
                            or "no message")
        scheduler = getattr(self.cluster, "scheduler", None)
        if self.first_worker is None and scheduler is not None:
            scheduler.no_workers_timeout = 1e-3  # the scheduler fails waiting tasks on its next check

    # -- the timeout ----------------------------------------------------------------

    def job_ids(self) -> list[str]:
        return [str(j.job_id) for j in list(self.cluster.workers.values()) if getattr(j, "job_id", None)]

    def explain(self, exc) -> WorkersNeverStarted | None:
        """The error for a task failed by the no-workers timeout (None for any other exception).

        Asks the batch system about this cluster's jobs, cancels those still
        queued or running, and says in one line what to check.
        """
        if not _is_no_worker_error(exc):
            return None
        scheduler = self.cluster.scheduler
        connected = len(getattr(scheduler, "workers", {}))
        kind = self.config.kind.upper()
        ids = self.job_ids()
        states = _slurm_states(ids) if self.config.kind == "slurm" else {}
        cancelled, cancel_note = _cancel(self.cluster, ids)
        wait = _seconds(self.timeout)
        command = self.cluster.job_cls.submit_command.split()[0]
        if self.refused and self.first_worker is None and not connected:
            return WorkersNeverStarted(
                f"{command} refused the worker jobs ({self.refused[-1]}), so no dask worker can start; check "
                f"queue, account, walltime, cores and memory against the site's partitions and limits "
                f"(`dkapprox cluster-script CONFIG` prints the job script to submit by hand)",
                job_ids=ids, reasons=states, timeout=self.timeout)
        if connected:
            head = (f"{connected} worker(s) connected but none could run a task for {wait} (all paused above "
                    f"dask's memory pause line?)")
        elif self.first_worker is None:
            head = f"no dask worker connected within {wait} (start_timeout)"
        else:
            head = f"every dask worker was lost and none came back within {wait}"
        parts = [head]
        if states:
            groups = {}
            for i, state_reason in sorted(states.items(), key=lambda item: int(item[0])
                                          if item[0].isdigit() else item[0]):
                groups.setdefault(state_reason, []).append(i)
            parts.append(", ".join(f"{kind} job{'s' if len(g) > 1 else ''} {' '.join(g)} {state.lower()} ({reason})"
                                   for (state, reason), g in groups.items()))
        elif ids:
            parts.append(f"{kind} job(s) {' '.join(ids)} " + ("not listed by squeue any more"
                                                              if self.config.kind == "slurm" else "submitted"))
        else:
            parts.append(f"no {kind} job of this run is queued")
        parts.append(_advice(self.config, states, ids))
        if cancelled:
            ordered = sorted(cancelled, key=lambda i: (not str(i).isdigit(), int(i) if str(i).isdigit() else 0, str(i)))
            parts.append(f"cancelled {kind} job(s) {' '.join(ordered)} so that nothing stays queued"
                         + cancel_note)
        return WorkersNeverStarted("; ".join(parts), job_ids=ids, reasons=states, timeout=self.timeout)


def _seconds(seconds: float) -> str:
    if seconds >= 120 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def _is_no_worker_error(exc) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if type(exc).__name__ in ("NoWorkerError", "NoValidWorkerError"):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _slurm_states(ids) -> dict:
    """{job id: (state, reason)} from ``squeue -j`` for the given jobs (those it still lists)."""
    if not ids or shutil.which("squeue") is None:
        return {}
    try:
        done = subprocess.run(["squeue", "-h", "-j", ",".join(ids), "-o", "%i %T %r"], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    states = {}
    for line in done.stdout.splitlines():
        fields = line.split(None, 2)
        if len(fields) == 3 and fields[0] in ids:
            states[fields[0]] = (fields[1], fields[2].strip())
    return states


def _cancel(cluster, ids):
    """Cancel the jobs (scancel/qdel) now; dask-jobqueue's close would too, but the message says so."""
    if not ids:
        return [], ""
    command = shlex.split(cluster.job_cls.cancel_command) + list(ids)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ids, f" (tried: {' '.join(command)} failed: {exc})"
    if done.returncode != 0 and done.stderr.strip():
        return ids, f" ({' '.join(command)}: {' '.join(done.stderr.split())})"
    return ids, ""


_DOWN = ("PartitionDown", "PartitionInactive", "NodeDown", "ReqNodeNotAvail", "PartitionConfig",
         "InactiveLimit")
_BUSY = ("Resources", "Priority", "ReqNodeNotAvail, Reserved", "Reservation", "BeginTime", "JobHeldAdmin",
         "Licenses", "Dependency")


def _advice(config, states, ids) -> str:
    opts = config.options
    queue = opts.get("queue")
    reasons = {reason for _, reason in states.values()}
    running = [i for i, (state, _) in states.items() if state == "RUNNING"]
    logs = f" in {opts['log_directory']}" if opts.get("log_directory") else " (set log_directory to keep them)"
    longer = "or allow a longer wait (start_timeout in the config, --start-timeout)"
    if running:
        return (f"job(s) {' '.join(running)} run but their workers never reached this scheduler: check the job "
                f"logs{logs} for the python on the nodes (python, job_script_prologue) and the network "
                f"(interface, a firewall between the nodes and this machine)")
    if any(r.startswith(_DOWN) for r in reasons):
        where = f"partition '{queue}'" if queue else "the default partition"
        return (f"{where} is down or its nodes are unavailable: check `sinfo -p {queue or '<partition>'}`, set "
                f"queue to a partition that is up, or rerun when it is back")
    if reasons and all(r.startswith(_BUSY) for r in reasons):
        return (f"the queue is busy: ask for less (cores, memory, walltime; `squeue --start -j "
                f"{','.join(states)}` estimates the start) {longer}")
    if reasons:
        return (f"check queue, account, walltime, cores and memory against the site's limits "
                f"(`scontrol show partition {queue or ''}`, `scontrol show job {next(iter(states))}`) {longer}")
    if config.kind == "pbs" and ids:
        return f"check `qstat -f {ids[0]}` (its comment says why it waits) {longer}"
    return f"check the job logs{logs} and the batch system's accounting (`sacct -j <id>`) {longer}"
