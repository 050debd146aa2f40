"""A multi-host test bed on one machine: Linux network namespaces joined by a bridge.

    client (this process, root namespace) 198.18.77.1 ──┐
    dkb-s3     object store: moto server  198.18.77.10 ─┤
    dkb-sched  dask scheduler             198.18.77.11 ─┤ bridge dkb0 (root namespace)
    dkb-w1..3  dask workers               198.18.77.21+ ┘

198.18.0.0/15 is the range set aside for network benchmarks (RFC 2544): no
real network uses it, and nothing here has a route out (no default route in
any namespace, forwarding untouched), so every packet stays on this machine.

Each worker host runs in its own mount namespace too, where a private tmpfs
covers pytest's base temporary folder: the worker sees none of the client's
working folders (every test's tmp_path lives there) and has its own scratch
folder inside that tmpfs, which only it can see (``worker_files`` looks in
through ``nsenter``). It has its own ``/dev/shm`` as well, so the named
semaphores of its nanny's queues go with the host when ``kill_host`` SIGKILLs
it (their owner and its resource tracker die together and unlink nothing).
The repository and its venv stay visible, as a shared software install would be.

Links can be rate-shaped with ``tc tbf`` (``shape``); this kernel has no
``netem``, so latency is not emulated. ``cut``/``mend`` set a host's link down
and up. Everything started is stopped by ``close()``: processes by process
group, then namespaces, links and the bridge; leftovers of an earlier run that
died are removed at start. Every wait is bounded in count and time.

Needs root (ip, tc, unshare, nsenter). ``BedSetupError`` says which step failed.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

PREFIX = "dkb"
BRIDGE = f"{PREFIX}0"
SUBNET = "198.18.77"
CLIENT_IP = f"{SUBNET}.1"
S3_IP, SCHED_IP = f"{SUBNET}.10", f"{SUBNET}.11"
S3_PORT, SCHED_PORT = 5000, 8786
START_TIMEOUT = 60.0
# a worker whose link is cut is declared dead after this (distributed's default is 300 s), and the
# scheduler's attempt to restart it through its (unreachable) nanny gives up after CONNECT_TIMEOUT
WORKER_TTL = "5s"
CONNECT_TIMEOUT = "3s"


class BedSetupError(RuntimeError):
    """The bed could not be built; the message names the step."""


def run(*cmd, check=True, timeout=30):
    try:
        done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BedSetupError(f"{shlex.join(map(str, cmd))}: {exc}") from None
    if check and done.returncode != 0:
        raise BedSetupError(f"{shlex.join(map(str, cmd))}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def usable() -> str | None:
    """None if this machine can build the bed, else why not."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, a bridge, mount namespaces)"
    for tool in ("ip", "tc", "unshare", "nsenter"):
        if run("which", tool, check=False).returncode != 0:
            return f"{tool} is not installed (iproute2 / util-linux)"
    return None


class Host:
    def __init__(self, name, ip):
        self.name, self.ip = name, ip
        self.ns = f"{PREFIX}-{name}"
        self.veth = f"{PREFIX}v-{name}"  # the root namespace's end, on the bridge
        self.procs: list[subprocess.Popen] = []

    def exec(self, *cmd):
        return ["ip", "netns", "exec", self.ns, *map(str, cmd)]


class NetBed:
    """The bed: ``with NetBed(tmp, n_workers=2) as bed:`` then ``bed.scheduler_address`` etc."""

    def __init__(self, directory, *, n_workers=2, hidden=None, nthreads=1, memory_limit="2GiB", rate=None):
        self.dir = Path(directory)
        self.hidden = Path(hidden) if hidden else None  # the client's folders the workers must not see
        self.n_workers, self.nthreads, self.memory_limit, self.rate = n_workers, nthreads, memory_limit, rate
        self.s3 = Host("s3", S3_IP)
        self.sched = Host("sched", SCHED_IP)
        self.workers = [Host(f"w{i + 1}", f"{SUBNET}.{21 + i}") for i in range(n_workers)]
        self.moto = None

    # -- addresses and environment ---------------------------------------------------

    @property
    def hosts(self):
        return [self.s3, self.sched, *self.workers]

    @property
    def scheduler_address(self) -> str:
        return f"tcp://{SCHED_IP}:{SCHED_PORT}"

    @property
    def s3_endpoint(self) -> str:
        return f"http://{S3_IP}:{S3_PORT}"

    def env(self) -> dict:
        """Variables for every process of the bed and the client: where S3 is, and the test keys."""
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from _s3 import ACCESS_KEY, REGION, SECRET_KEY

        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_DEFAULT_REGION": REGION, "AWS_ENDPOINT_URL": self.s3_endpoint}

    # -- building ----------------------------------------------------------------------

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self):
        why = usable()
        if why:
            raise BedSetupError(why)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._remove_leftovers()
        run("ip", "link", "add", BRIDGE, "type", "bridge")
        run("ip", "addr", "add", f"{CLIENT_IP}/24", "dev", BRIDGE)
        run("ip", "link", "set", BRIDGE, "up")
        for host in self.hosts:
            self._add_host(host)
        if self.rate:
            for host in self.workers:
                self.shape(host, self.rate)
        self._start_moto()
        self._start_scheduler()
        for host in self.workers:
            self._start_worker(host)
        self.wait_for_workers(self.n_workers)

    def _add_host(self, host):
        run("ip", "netns", "add", host.ns)
        run("ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.ns)
        run("ip", "link", "set", host.veth, "master", BRIDGE)
        run("ip", "link", "set", host.veth, "up")
        run(*host.exec("ip", "addr", "add", f"{host.ip}/24", "dev", "eth0"))
        run(*host.exec("ip", "link", "set", "eth0", "up"))
        run(*host.exec("ip", "link", "set", "lo", "up"))

    def _spawn(self, host, cmd, log, env=None):
        with open(self.dir / log, "ab") as out:
            proc = subprocess.Popen(host.exec(*cmd), stdout=out, stderr=subprocess.STDOUT,
                                    env={**os.environ, **self.env(), **(env or {})}, start_new_session=True)
        host.procs.append(proc)
        return proc

    def _start_moto(self):
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from _s3 import MotoServer

        self.moto = MotoServer(S3_IP, S3_PORT, prefix=self.s3.exec(), log=self.dir / "moto.log")
        self.moto.start()  # it polls the server from the client, through the bridge
        self.s3.procs.append(self.moto.proc)

    def _start_scheduler(self):
        cmd = [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", SCHED_IP,
               "--port", SCHED_PORT, "--no-dashboard"]
        self._spawn(self.sched, cmd, "scheduler.log",
                    env={"DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL": WORKER_TTL,
                         "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": CONNECT_TIMEOUT})
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:  # bounded: START_TIMEOUT / 0.2 polls
            if run("ip", "netns", "exec", self.sched.ns, "ss", "-ltn", f"sport = :{SCHED_PORT}",
                   check=False).stdout.count("LISTEN"):
                return
            if self.sched.procs[-1].poll() is not None:
                raise BedSetupError(f"the scheduler exited: {self.tail('scheduler.log')}")
            time.sleep(0.2)
        raise BedSetupError(f"the scheduler did not listen within {START_TIMEOUT:.0f} s")

    def worker_scratch(self, host) -> str:
        base = self.hidden if self.hidden else self.dir / "private"
        return str(base / f"scratch-{host.name}")

    def _start_worker(self, host):
        """A dask worker in its own network and mount namespace, with a private tmpfs over ``hidden``."""
        hidden = self.hidden if self.hidden else self.dir / "private"
        hidden.mkdir(parents=True, exist_ok=True)
        scratch = self.worker_scratch(host)
        worker = [sys.executable, "-m", "distributed.cli.dask_worker", self.scheduler_address,
                  "--host", host.ip, "--name", host.name, "--nworkers", "1", "--nthreads", self.nthreads,
                  "--memory-limit", self.memory_limit, "--local-directory", scratch, "--no-dashboard"]
        script = (f"mount --make-rprivate / && mount -t tmpfs -o size=4g dkb-private {shlex.quote(str(hidden))}"
                  f" && mount -t tmpfs -o size=64m,mode=1777 dkb-shm /dev/shm"
                  f" && mkdir -p {shlex.quote(scratch)} && exec {shlex.join(map(str, worker))}")
        self._spawn(host, ["unshare", "--mount", "--", "sh", "-c", script], f"worker-{host.name}.log",
                    env={"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": CONNECT_TIMEOUT})

    def start_worker(self, name):
        """Start a worker host's worker again (after ``kill_host``)."""
        host = self.host(name)
        self._start_worker(host)
        return host

    def wait_for_workers(self, n, timeout=START_TIMEOUT):
        from distributed import Client

        with Client(self.scheduler_address, timeout="20s") as client:
            try:
                client.wait_for_workers(n, timeout=timeout)
            except TimeoutError:
                logs = " | ".join(self.tail(f"worker-{w.name}.log") for w in self.workers)
                raise BedSetupError(f"{n} workers did not join within {timeout:.0f} s: {logs}") from None

    # -- faults and shaping ------------------------------------------------------------

    def host(self, name) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def cut(self, name):
        """Set the host's link down (both ends): its packets go nowhere, no connection is closed."""
        host = self.host(name)
        run("ip", "link", "set", host.veth, "down")

    def mend(self, name):
        host = self.host(name)
        run("ip", "link", "set", host.veth, "up")

    def shape(self, host, rate):
        """Rate-shape the host's link both ways with tbf (no netem on this kernel: no latency)."""
        burst = "256kb"
        run("tc", "qdisc", "replace", "dev", host.veth, "root", "tbf", "rate", rate, "burst", burst,
            "latency", "50ms")
        run(*host.exec("tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", rate, "burst", burst,
                       "latency", "50ms"))

    def bytes_received(self, name) -> int:
        """Bytes the host has received on its link (the root end's transmit counter)."""
        return int(Path(f"/sys/class/net/{self.host(name).veth}/statistics/tx_bytes").read_text())

    def kill_host(self, name, sig=signal.SIGKILL):
        """Kill every process started on the host (whole process groups)."""
        host = self.host(name)
        for proc in host.procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
        for proc in host.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        host.procs = [p for p in host.procs if p.poll() is None]

    def worker_files(self, name, path) -> list[str]:
        """Files at ``path`` as the worker host sees it (through its mount namespace)."""
        host = self.host(name)
        alive = [p for p in host.procs if p.poll() is None]
        if not alive:
            raise BedSetupError(f"worker host {name} has no process to look through")
        ns_pid = _descendant_python(alive[0].pid)
        done = run("nsenter", "--target", ns_pid, "--mount", "--", "find", path, "-mindepth", "1", check=False)
        return [] if done.returncode else sorted(done.stdout.split())

    def tail(self, log, lines=5) -> str:
        try:
            return " | ".join((self.dir / log).read_text(errors="replace").strip().splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # -- teardown ---------------------------------------------------------------------

    def close(self):
        for host in reversed(self.hosts):
            self.kill_host(host.name)
        self._remove_leftovers()

    def _remove_leftovers(self):
        listed = run("ip", "netns", "list", check=False).stdout.split()
        for ns in listed:
            if ns.startswith(f"{PREFIX}-"):
                for pid in run("ip", "netns", "pids", ns, check=False).stdout.split():
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.kill(int(pid), signal.SIGKILL)
                run("ip", "netns", "del", ns, check=False)
        links = run("ip", "-o", "link", "show", check=False).stdout
        for line in links.splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name.startswith(f"{PREFIX}v-") or name == BRIDGE:
                run("ip", "link", "del", name, check=False)


def _descendant_python(pid, depth=5) -> int:
    """The worker's python (the unshare'd shell execs into it), found through /proc children."""
    current = pid
    for _ in range(depth):  # ip netns exec -> unshare -> (sh exec'd into) python
        try:
            cmdline = Path(f"/proc/{current}/cmdline").read_bytes()
        except OSError:
            break
        if b"dask_worker" in cmdline:
            return current
        children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        if not children:
            break
        current = int(children[0])
    return current


if __name__ == "__main__":  # python tests/cluster/_netbed.py: build the bed, show it, tear it down
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, NetBed(tmp, n_workers=2) as bed:
        print(run("ip", "-br", "addr", "show", "master", BRIDGE).stdout)
        from distributed import Client

        with Client(bed.scheduler_address) as c:
            print({w["name"]: a for a, w in c.scheduler_info()["workers"].items()})
