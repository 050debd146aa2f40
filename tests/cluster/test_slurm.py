"""dkapprox on a real (one-node) SLURM: sbatch'ed workers, scancel mid-run, a partition that is down.

The cluster is Debian's slurm-wlm and munge, started for this module by
``_slurm.OneNodeSlurm`` (munged, slurmctld, slurmd on loopback, in a temporary
folder) and stopped by pid at the end. It needs root and the packages
(``.ci/install-slurm``, which ``.ci/run`` calls): under ``CI=true`` a setup
that fails fails these tests; elsewhere they skip, saying why.

No slurmdbd runs, so ``sacct`` has no accounting to read ("accounting storage
is disabled"); the worker jobs are followed with ``squeue`` while they run and
``scontrol show job`` after they end.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import dask
import numpy as np
import pytest
import zarr

from dkapprox import io
from dkapprox.cluster import connect, load_config
from dkapprox.errors import WorkersNeverStarted
from dkapprox.kernel_approximation import RBFSampler

sys.path.insert(0, str(Path(__file__).parent))
from _slurm import DOWN, UP, OneNodeSlurm, SlurmSetupError, ensure_installed, missing_programs, site_config  # noqa: E402

pytestmark = pytest.mark.slow

IN_CI = os.environ.get("CI", "").lower() == "true"
ROWS, FEATURES, BLOCK = 150_000, 16, 250   # 600 blocks: a few seconds on two single-core workers
#: a cancelled worker's job is replaced after distributed's lost-worker timeout (15 s by default) and the
#: next adaptive check (every 1 s): 0.2 s each here, so that the replacement is submitted within about a
#: second, well before the surviving worker ends the ~560 blocks left (one task a block, 2-5 ms each)
REPLACE_FAST = {"distributed.deploy.lost-worker-timeout": "200ms", "distributed.adaptive.interval": "200ms"}


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A running one-node SLURM; SLURM_CONF points this process (and its children) at it."""
    try:
        if os.geteuid() != 0:
            raise SlurmSetupError("needs root to run slurmd and munged")
        if missing_programs():
            if not IN_CI:
                raise SlurmSetupError(f"{', '.join(missing_programs())} not installed: run .ci/install-slurm "
                                      "as root (Debian's slurm-wlm and munge)")
            ensure_installed()
        cluster = OneNodeSlurm(tmp_path_factory.mktemp("slurm")).start()
    except SlurmSetupError as exc:
        if IN_CI:
            pytest.fail(f"one-node SLURM setup failed under CI=true: {exc}")
        pytest.skip(f"no one-node SLURM: {exc}")
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        cluster.stop()
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous
    assert not _our_daemons_running(cluster), "a daemon of the test SLURM outlived stop()"


def _our_daemons_running(cluster):
    return [p for p in cluster.procs.values() if p.poll() is None]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The input store and a LocalCluster run of the same job (two single-threaded workers)."""
    base = tmp_path_factory.mktemp("slurm-data")
    X = np.random.default_rng(7).standard_normal((ROWS, FEATURES)).astype(np.float32)
    zarr.create_array(str(base / "in.zarr"), shape=X.shape, chunks=(BLOCK, FEATURES), dtype=X.dtype)[:] = X
    local = base / "local.yaml"
    local.write_text("kind: local\nn_workers: 2\nthreads_per_worker: 1\nmemory_limit: 1GiB\n"
                     "dashboard_address: null\n")
    started = time.monotonic()
    done = cli("featurize", base / "in.zarr", "--method", "rbf", "--n-components", 64, "--out",
               base / "local.zarr", "--cluster", local)
    assert done.returncode == 0, done.stderr
    return {"input": base / "in.zarr", "local": base / "local.zarr", "X": X, "base": base,
            "local_seconds": time.monotonic() - started}


def env(**extra):
    return dict(os.environ, PYTHONUNBUFFERED="1", **extra)


def cli(*args, timeout=240, **extra_env):
    return subprocess.run([sys.executable, "-m", "dkapprox", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env(**extra_env))


def blocks_done(out) -> int:
    folder = Path(out) / "blocks_done" / "c"
    return sum(1 for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def assert_same_blocks(out, reference):
    """The same chunk files with the same bytes, and the same array metadata."""
    ours = sorted(p.relative_to(out) for p in (Path(out) / "features").rglob("*") if p.is_file())
    theirs = sorted(p.relative_to(reference) for p in (Path(reference) / "features").rglob("*") if p.is_file())
    assert ours == theirs
    assert len(ours) == ROWS // BLOCK + 1  # one file per block, plus zarr.json
    for rel in ours:
        assert (Path(out) / rel).read_bytes() == (Path(reference) / rel).read_bytes(), rel


class JobWatch:
    """Polls squeue (every 0.2 s, for at most ``limit`` s) for the jobs named ``name`` while a job runs."""

    def __init__(self, slurm, name, limit=240):
        self.slurm, self.name, self.limit = slurm, name, limit
        self.seen = {}  # job id -> set of states
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        deadline = time.monotonic() + self.limit
        while not self._stop.wait(0.2) and time.monotonic() < deadline:
            done = self.slurm.run("squeue", "-h", "-n", self.name, "-o", "%i %T", check=False)
            for line in done.stdout.splitlines():
                job, state = line.split()
                self.seen.setdefault(job, set()).add(state)

    def running(self):
        return sorted((j for j, s in self.seen.items() if "RUNNING" in s), key=int)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _joined_jobs(stderr):
    """Job ids in dkapprox's log lines 'first worker connected ... (SLURM job N)' / 'worker joined (SLURM job N)'."""
    return re.findall(r"(?:first worker connected .*?\(SLURM job (\d+)\)|worker joined \(SLURM job (\d+)\))",
                      stderr)


def test_featurize_on_slurm_equals_a_local_cluster_block_for_block(slurm, data, tmp_path):
    config = site_config(tmp_path / "slurm.yaml", "dkx-featurize")
    with JobWatch(slurm, "dkx-featurize") as jobs:
        done = cli("featurize", data["input"], "--method", "rbf", "--n-components", 64, "--out",
                   tmp_path / "out.zarr", "--cluster", config)
    assert done.returncode == 0, done.stderr
    assert "first worker connected" in done.stderr and "(SLURM job " in done.stderr
    # two worker jobs, sbatch'ed to the debug partition, ran and were cancelled when the job ended
    assert len(jobs.running()) == 2, jobs.seen
    for job in jobs.running():
        info = slurm.job(job)
        assert info["JobName"] == "dkx-featurize" and info["Partition"] == UP
        assert info["JobState"] in ("CANCELLED", "COMPLETED"), info["JobState"]
        assert info["NumCPUs"] == "1" and info["MinMemoryNode"] == "1200M"
    assert not slurm.run("squeue", "-h", "-n", "dkx-featurize").stdout.strip()  # nothing left queued
    sacct = slurm.run("sacct", "-n", "-j", ",".join(jobs.running()), check=False)
    assert sacct.returncode != 0 and "accounting storage is disabled" in sacct.stderr  # no slurmdbd here
    assert_same_blocks(tmp_path / "out.zarr", data["local"])


def test_a_worker_job_cancelled_mid_run_is_resubmitted_and_the_output_is_byte_identical(slurm, data, tmp_path):
    config = site_config(tmp_path / "slurm.yaml", "dkx-scancel",
                          scale="adapt: {minimum_jobs: 2, maximum_jobs: 2}")
    out = tmp_path / "out.zarr"
    proc = subprocess.Popen([sys.executable, "-m", "dkapprox", "featurize", str(data["input"]), "--method", "rbf",
                             "--n-components", "64", "--out", str(out), "--cluster", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env(DASK_DISTRIBUTED__DEPLOY__LOST_WORKER_TIMEOUT=REPLACE_FAST[
                                "distributed.deploy.lost-worker-timeout"],
                                DASK_DISTRIBUTED__ADAPTIVE__INTERVAL=REPLACE_FAST["distributed.adaptive.interval"]))
    try:
        with JobWatch(slurm, "dkx-scancel") as jobs:
            for _ in range(600):  # until both workers run and 10 blocks are written (at most 120 s)
                if len(jobs.running()) == 2 and blocks_done(out) >= 10 or proc.poll() is not None:
                    break
                time.sleep(0.2)
            first = jobs.running()
            assert len(first) == 2 and proc.poll() is None, (jobs.seen, blocks_done(out))
            slurm.run("scancel", first[0])
            cancelled_at = blocks_done(out)
            stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    assert cancelled_at < ROWS // BLOCK  # the cancel landed mid-run
    assert slurm.job(first[0])["JobState"] == "CANCELLED"
    # adaptive scaling replaced the job with a new sbatch submission (on a busy machine this short job can
    # end before the replacement's worker connects: benchmarks/bench_slurm.py times that on a longer one)
    new = [j for j in jobs.seen if int(j) > int(first[-1])]
    assert new and slurm.job(new[0])["JobName"] == "dkx-scancel", jobs.seen
    joined = {a or b for a, b in _joined_jobs(stderr)}
    assert set(first) <= joined <= set(first) | set(new), stderr  # workers of our jobs only, by job id
    assert_same_blocks(out, data["local"])


class BlockRuns:
    """A scheduler plugin counting how often each block's write task was started."""

    name = "count-block-runs"

    def __init__(self):
        self.runs = {}

    def transition(self, key, start, finish, *args, **kwargs):
        if finish == "processing" and isinstance(key, tuple) and str(key[0]).startswith("dkapprox-write-"):
            self.runs[key] = self.runs.get(key, 0) + 1


def test_python_api_connect_runs_on_slurm_and_survives_a_cancelled_job(slurm, data, tmp_path):
    from distributed.diagnostics.plugin import SchedulerPlugin

    config = load_config(site_config(tmp_path / "slurm.yaml", "dkx-api",
                                      scale="adapt: {minimum_jobs: 2, maximum_jobs: 2}"))
    plugin = type("Counter", (BlockRuns, SchedulerPlugin), {})()
    out = tmp_path / "out.zarr"
    X = io.open_array(data["input"])
    est = RBFSampler(n_components=64, random_state=0).fit(X)
    with dask.config.set(REPLACE_FAST), connect(config) as client:
        assert type(client.cluster).__name__ == "SLURMCluster"
        client.cluster.scheduler.add_plugin(plugin)
        pending = io.write_features(est.transform(X), out, plan={"test": "slurm api"}, compute=False)
        future = client.compute(pending.delayed)
        for _ in range(600):
            if len(client.scheduler_info()["workers"]) == 2 and blocks_done(out) >= 10 or future.done():
                break
            time.sleep(0.2)
        jobs = sorted((j.job_id for j in client.cluster.workers.values()), key=int)
        assert len(jobs) == 2 and not future.done()
        slurm.run("scancel", jobs[0])
        assert future.result() == ROWS // BLOCK
        report = pending.finalize()
        replacements = [j.job_id for j in client.cluster.workers.values() if int(j.job_id) > int(jobs[-1])]
    assert report.blocks_written == ROWS // BLOCK
    assert replacements, "no new job was submitted for the cancelled one"
    recomputed = sum(1 for n in plugin.runs.values() if n > 1)
    assert len(plugin.runs) == ROWS // BLOCK and recomputed < ROWS // BLOCK
    assert_same_blocks(out, data["local"])


def test_a_job_scheduler_speaks_tls_and_refuses_a_client_without_its_credentials(slurm, tmp_path):
    """Issue 39: the scheduler of a SLURM job, by default: TLS with this cluster's own credentials."""
    from _intruder import visitors

    config = load_config(site_config(tmp_path / "slurm.yaml", "dkx-tls", scale="jobs: 1"))
    with connect(config) as client:
        client.wait_for_workers(1, timeout=120)
        address = client.cluster.scheduler_address
        workers = list(client.scheduler_info()["workers"])
        assert client.submit(sum, [20, 22]).result(timeout=60) == 42
        job = next(iter(client.cluster.workers.values())).job_id
        stored = slurm.run("scontrol", "write", "batch_script", str(job), "-").stdout  # what SLURM's spool keeps
        folder = client.cluster._dkapprox_credentials.directory
        modes = sorted(oct(os.stat(p).st_mode & 0o777) for p in [folder, *folder.iterdir()])
        knocks = visitors(address)
    assert address.startswith("tls://") and workers and all(w.startswith("tls://") for w in workers), workers
    assert all(knocks.values()), knocks  # each visitor was stopped, none got an answer
    assert f"--tls-key {folder}/key.pem" in stored and "PRIVATE KEY" not in stored, stored
    assert modes == ["0o600", "0o600", "0o700"] and folder.parent == tmp_path / "credentials"
    assert not folder.exists()  # removed when the cluster closed
    logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "logs").glob("*"))
    assert "PRIVATE KEY" not in logs


def test_a_partition_that_is_down_exits_75_in_one_line_and_leaves_nothing_queued(slurm, data, tmp_path):
    config = site_config(tmp_path / "slurm.yaml", "dkx-down", queue=DOWN)
    started = time.monotonic()
    done = cli("featurize", data["input"], "--method", "rbf", "--n-components", 64, "--out",
               tmp_path / "out.zarr", "--cluster", config, "--start-timeout", "3s", timeout=120)
    seconds = time.monotonic() - started
    assert done.returncode == 75, (done.returncode, done.stderr)
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    line = errors[0]
    ids = re.search(r"SLURM jobs (\d+) (\d+) pending \(PartitionDown\)", line)
    assert ids, line
    assert "no dask worker connected within 3 s" in line and f"sinfo -p {DOWN}" in line
    assert f"cancelled SLURM job(s) {ids.group(1)} {ids.group(2)}" in line
    assert not slurm.run("squeue", "-h", "-n", "dkx-down").stdout.strip()  # nothing stays queued
    assert slurm.job(ids.group(1))["JobState"] == "CANCELLED"
    assert seconds < 60


def test_a_full_node_exits_75_naming_resources_and_says_to_wait_longer(slurm, data, tmp_path):
    # another user's job holds every core: ours pend with reason Resources (or Priority behind it)
    blocker = slurm.run("sbatch", "--parsable", "-J", "dkx-blocker", "-c", str(slurm.cpus), "-o", "/dev/null",
                        "--wrap", "sleep 120").stdout.strip()
    try:
        for _ in range(100):  # until it runs (at most 20 s)
            if slurm.job(blocker)["JobState"] == "RUNNING":
                break
            time.sleep(0.2)
        config = site_config(tmp_path / "slurm.yaml", "dkx-full", extra="start_timeout: 3s\n")
        done = cli("featurize", data["input"], "--method", "rbf", "--n-components", 64, "--out",
                   tmp_path / "out.zarr", "--cluster", config, timeout=120)
    finally:
        slurm.run("scancel", blocker, check=False)
    assert done.returncode == 75, done.stderr
    line = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert len(line) == 1, done.stderr
    # the first job waits for the cores (Resources), the second behind it (Priority)
    assert re.search(r"SLURM jobs? \d+( \d+)? pending \(Resources\)", line[0]), line[0]
    assert "the queue is busy" in line[0] and "start_timeout in the config, --start-timeout" in line[0]
    assert not slurm.run("squeue", "-h", "-n", "dkx-full").stdout.strip()


def test_a_partition_sbatch_refuses_exits_75_at_once_with_its_message(slurm, data, tmp_path):
    config = site_config(tmp_path / "slurm.yaml", "dkx-typo", queue="debgu")  # a typo: no such partition
    started = time.monotonic()
    done = cli("featurize", data["input"], "--method", "rbf", "--n-components", 64, "--out",
               tmp_path / "out.zarr", "--cluster", config, timeout=120)  # the default start_timeout: 10 min
    seconds = time.monotonic() - started
    assert done.returncode == 75, (done.returncode, done.stderr)
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert errors[0].startswith("dkapprox: error: sbatch refused the worker jobs (sbatch: error: invalid partition")
    assert seconds < 60  # not the 10 minutes of start_timeout


def test_python_api_raises_workers_never_started_with_the_config_key(slurm, tmp_path):
    config = load_config(site_config(tmp_path / "slurm.yaml", "dkx-down-api", queue=DOWN,
                                      scale="adapt: {minimum_jobs: 0, maximum_jobs: 1}", extra="start_timeout: 2s\n"))
    with pytest.raises(WorkersNeverStarted) as caught:
        with connect(config) as client:
            client.submit(sum, [1, 2]).result()
    error = caught.value
    assert len(error.job_ids) == 1 and error.reasons == {error.job_ids[0]: ("PENDING", "PartitionDown")}
    assert error.timeout == 2
    assert not slurm.run("squeue", "-h", "-n", "dkx-down-api").stdout.strip()
