"""A one-node SLURM for the tests: munged, slurmctld and slurmd of Debian's slurm-wlm, on loopback.

(Nodes, controller and workers talk over 127.0.0.1; the daemons also listen only there when the host
name resolves to a loopback address, see ``_bind_loopback``.)

Everything lives in one temporary folder: a fresh munge key, ``slurm.conf`` for
this host, state, spool, logs and pid files. The daemons run in the foreground
as children of this process and are stopped by pid (``stop()``), after every
job of the cluster is cancelled. ``SLURM_CONF`` in ``env`` points sbatch,
squeue and friends at this cluster, never at a site's.

Two partitions share the node: ``debug`` (up, the default) and ``down``
(DOWN: jobs sent there pend with reason PartitionDown forever).

Accounting: there is no slurmdbd, so ``AccountingStorageType=accounting_storage/none``
and ``sacct`` answers "Slurm accounting storage is disabled"; finished jobs stay
visible to ``scontrol show job`` for ``MinJobAge`` seconds, which is what the
tests read.

Used by tests/cluster/test_slurm.py and benchmarks/bench_slurm.py; run as a
script (``python tests/cluster/_slurm.py``) it starts the cluster, prints
``sinfo`` and stops it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INSTALL = REPO / ".ci" / "install-slurm"
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "sinfo")
UP, DOWN = "debug", "down"


class SlurmSetupError(RuntimeError):
    """The one-node SLURM could not be installed or started; the message says which step."""


def missing_programs() -> list[str]:
    return [p for p in PROGRAMS if shutil.which(p) is None]


def ensure_installed() -> None:
    """Run .ci/install-slurm if a program is missing (it needs root and apt-get)."""
    if not missing_programs():
        return
    try:
        done = subprocess.run([str(INSTALL)], capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmSetupError(f"{INSTALL} failed: {exc}") from None
    if done.returncode != 0 or missing_programs():
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise SlurmSetupError(f"{INSTALL} exited {done.returncode}, still missing "
                              f"{', '.join(missing_programs())}: {tail}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what, ready, *, timeout, interval=0.2, log=None):
    """Poll ``ready()`` until true, at most ``timeout`` seconds (and so a bounded number of times)."""
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / interval) + 1):
        if ready():
            return
        if time.monotonic() > deadline:
            break
        time.sleep(interval)
    tail = ""
    if log is not None and Path(log).exists():
        tail = ": " + " | ".join(Path(log).read_text(errors="replace").strip().splitlines()[-4:])
    raise SlurmSetupError(f"{what} not ready after {timeout:.0f} s{tail}")


class OneNodeSlurm:
    """munged + slurmctld + slurmd for this host, in ``directory``; a context manager.

    ``cpus`` defaults to the machine's cores and ``memory_mb`` is the node's
    RealMemory (SLURM does not enforce it here: ``SelectTypeParameters=CR_Core``).
    """

    def __init__(self, directory, *, cpus=None, memory_mb=8192):
        self.dir = Path(directory)
        self.cpus = cpus or len(os.sched_getaffinity(0))
        self.memory_mb = memory_mb
        self.node = socket.gethostname().split(".")[0]
        self.conf = self.dir / "slurm.conf"
        self.socket = self.dir / "munge" / "munge.socket"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        self.procs: dict[str, subprocess.Popen] = {}

    # -- start and stop ------------------------------------------------------------

    def start(self, timeout=60):
        if os.geteuid() != 0:
            raise SlurmSetupError("a one-node SLURM needs root (slurmd runs jobs as their users)")
        ensure_installed()
        try:
            self._munge(timeout)
            self._write_conf()
            self._daemon("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
            _wait("slurmctld", lambda: self.run("scontrol", "ping", check=False).stdout.count("UP") > 0,
                  timeout=timeout, log=self.dir / "slurmctld.log")
            self._daemon("slurmd", ["slurmd", "-D", "-f", str(self.conf), "-N", self.node])
            _wait(f"slurmd on node {self.node}", self._node_idle, timeout=timeout, log=self.dir / "slurmd.log")
        except BaseException:
            self.stop()
            raise
        return self

    def _munge(self, timeout):
        (self.dir / "munge").mkdir(mode=0o700, parents=True, exist_ok=True)
        key = self.dir / "munge" / "munge.key"
        with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(os.urandom(1024))
        self._daemon("munged", ["munged", "--foreground", "--force", f"--socket={self.socket}",
                                f"--key-file={key}", f"--pid-file={self.dir / 'munge' / 'munged.pid'}",
                                f"--log-file={self.dir / 'munge' / 'munged.log'}",
                                f"--seed-file={self.dir / 'munge' / 'munged.seed'}"])
        _wait("munged", self.socket.exists, timeout=timeout, log=self.dir / "munge" / "munged.log")

    def _write_conf(self):
        for sub in ("state", "spool", "jobs"):
            (self.dir / sub).mkdir(exist_ok=True)
        d = self.dir
        self.conf.write_text(f"""\
# one-node SLURM for dkapprox's tests: loopback, a fresh munge key, no accounting daemon
ClusterName=dkapproxtest
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.socket}
StateSaveLocation={d / 'state'}
SlurmdSpoolDir={d / 'spool'}
SlurmctldPidFile={d / 'slurmctld.pid'}
SlurmdPidFile={d / 'slurmd.pid'}
SlurmctldLogFile={d / 'slurmctld.log'}
SlurmdLogFile={d / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
{self._bind_loopback()}ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=600
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={self.memory_mb} State=UNKNOWN
PartitionName={UP} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
PartitionName={DOWN} Nodes={self.node} MaxTime=INFINITE State=DOWN
""")

    def _bind_loopback(self) -> str:
        """Daemons listen on loopback only if this host's name resolves there (then they bind to it).

        SLURM has no listen-address option: with NoInAddrAny/NoCtldInAddrAny they bind to the address
        the host name resolves to, which must be the 127.0.0.1 the config gives them. Elsewhere they
        listen on every interface (as SLURM does by default), guarded by this run's fresh munge key.
        """
        try:
            address = socket.gethostbyname(self.node)
        except OSError:
            return ""
        return "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny\n" if address.startswith("127.") else ""

    def _daemon(self, name, argv):
        log = open(self.dir / f"{name}.out", "wb")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=self.env, cwd=self.dir, start_new_session=True)
        log.close()
        time.sleep(0.1)
        if self.procs[name].poll() is not None:
            out = (self.dir / f"{name}.out").read_text(errors="replace").strip().splitlines()[-3:]
            raise SlurmSetupError(f"{name} exited {self.procs[name].returncode} at start: {' | '.join(out)}")

    def _node_idle(self):
        state = self.run("sinfo", "-h", "-n", self.node, "-p", UP, "-o", "%T", check=False).stdout.strip()
        if state.startswith(("down", "drain")):
            self.run("scontrol", "update", f"nodename={self.node}", "state=resume", check=False)
        return state == "idle"

    def stop(self, timeout=30):
        """Cancel every job of this cluster, then stop slurmd, slurmctld and munged by pid."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            with contextlib.suppress(Exception):
                jobs = self.job_ids()
                if jobs:
                    self.run("scancel", *jobs, check=False)
                    with contextlib.suppress(SlurmSetupError):
                        _wait("jobs cancelled", lambda: not self.job_ids(), timeout=timeout)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    # -- asking SLURM --------------------------------------------------------------

    def run(self, *argv, check=True, timeout=30):
        done = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=timeout)
        if check and done.returncode != 0:
            raise SlurmSetupError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def job_ids(self):
        """Ids of the jobs squeue lists (pending, running, completing)."""
        return self.run("squeue", "-h", "-o", "%i", check=False).stdout.split()

    def squeue(self, fmt="%i %j %T %r"):
        return [line.split() for line in self.run("squeue", "-h", "-o", fmt).stdout.splitlines()]

    def job(self, job_id) -> dict:
        """``scontrol show job`` as a dict (finished jobs too, for MinJobAge seconds)."""
        out = self.run("scontrol", "-o", "show", "job", str(job_id)).stdout
        fields = {}
        for item in out.split():
            key, _, value = item.partition("=")
            fields[key] = value
        return fields

    def jobs(self) -> list[dict]:
        out = self.run("scontrol", "-o", "show", "job", check=False).stdout
        result = []
        for line in out.splitlines():
            if line.startswith("JobId="):
                result.append(dict(item.partition("=")[::2] for item in line.split()))
        return result


if __name__ == "__main__":  # start, show, run one job, stop: a quick check of a machine
    import tempfile

    with tempfile.TemporaryDirectory(prefix="dkapprox-slurm-") as tmp, OneNodeSlurm(tmp) as slurm:
        print(slurm.run("sinfo").stdout)
        job = slurm.run("sbatch", "--parsable", "-o", f"{tmp}/hostname.out", "--wrap", "hostname").stdout.strip()
        _wait(f"job {job}", lambda: slurm.job(job).get("JobState") == "COMPLETED", timeout=60)
        print(f"job {job} COMPLETED; sacct says:", slurm.run("sacct", "-j", job, check=False).stderr.strip())


def site_config(path, name, *, queue=UP, scale="jobs: 2", walltime="00:10:00", lifetime="8m", extra=""):
    """A site config as slurm.yaml's comments say to write one, for this machine (1 core, 1 worker per job)."""
    path.write_text(f"""\
kind: slurm
cores: 1
processes: 1
memory: 1GiB
job_mem: 1200M
{scale}
queue: {queue}
walltime: "{walltime}"
job_name: {name}
python: {sys.executable}
interface: lo
local_directory: {path.parent / 'spill'}
log_directory: {path.parent / 'logs'}
shared_temp_directory: {path.parent / 'credentials'}
death_timeout: 60s
worker_extra_args: ["--lifetime", "{lifetime}", "--lifetime-stagger", "1m"]
scheduler_options: {{dashboard_address: ":0"}}
{extra}""")
    return path
