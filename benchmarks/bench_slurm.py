"""dkapprox on a one-node SLURM: worker start-up, wall time against a LocalCluster, scancel, partition down.

Starts the same one-node SLURM as tests/cluster/test_slurm.py (munged, slurmctld,
slurmd on loopback in a temporary folder; needs root and .ci/install-slurm) and
stops it at the end. Input: N(0, 1) float32 rows x 16 features in 250-row
blocks; the job is ``dkapprox featurize --method rbf --n-components 64``.

Printed:

1. ``featurize --cluster slurm.yaml`` (2 jobs x 1 core x 1 worker): seconds
   from starting the command until the first worker connected (the time
   dkapprox's log line "first worker connected" appears on stderr), and the
   command's wall time; median of ``--repeats``.
2. The same command on a LocalCluster of the same size (2 workers x 1
   thread): wall time, and the ratio.
3. Python API, adaptive (2 jobs), one worker job ``scancel``led after
   ``--cancel-after`` blocks are written: seconds from the scancel until a
   worker of a new submission connects (with distributed's default
   ``lost-worker-timeout`` of 15 s, which dominates it, and with 2 s), and
   how many blocks were computed more than once (a scheduler plugin counts
   each block's write task going to ``processing``).
4. A config whose partition is DOWN, ``--start-timeout 5s``: seconds from
   starting the command until it exits 75.

    sudo .venv/bin/python benchmarks/bench_slurm.py              # about 2 minutes on 2 cores
    sudo .venv/bin/python benchmarks/bench_slurm.py --rows 300000 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "cluster"))
from _common import print_table  # noqa: E402
from _slurm import DOWN, OneNodeSlurm, site_config  # noqa: E402

BLOCK, FEATURES = 250, 16


def slurm_yaml(path, name, *, queue="debug", scale="jobs: 2"):
    """The tests' site config with a longer walltime and lifetime for the benchmark's larger jobs."""
    return site_config(path, name, queue=queue, scale=scale, walltime="00:30:00", lifetime="25m")


def timed_cli(args, env):
    """Run ``dkapprox ARGS``; (exit code, wall seconds, seconds until 'first worker connected', stderr, write s).

    The write seconds are those of the command's summary line ("...; 4.4 s (... rows/s)"): the
    blocks' computation and writing, without starting the cluster.
    """
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "dkapprox", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    first, lines = None, []
    for line in proc.stderr:
        lines.append(line)
        if first is None and "first worker connected" in line:
            first = time.monotonic() - started
    proc.wait(timeout=600)
    summary = re.search(r"; ([0-9.]+) s \(", proc.stdout.read())
    return (proc.returncode, time.monotonic() - started, first, "".join(lines),
            float(summary.group(1)) if summary else float("nan"))


def blocks_done(out) -> int:
    folder = Path(out) / "blocks_done" / "c"
    return sum(1 for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def scancel_run(slurm, base, data, lost_worker_timeout, cancel_after):
    """Python API, adaptive 2 jobs; scancel one after ``cancel_after`` blocks.

    Returns (seconds to a new worker, blocks recomputed, blocks).
    """
    import dask
    from distributed.diagnostics.plugin import SchedulerPlugin

    from dkapprox import io
    from dkapprox.cluster import connect, load_config
    from dkapprox.kernel_approximation import RBFSampler

    class BlockRuns(SchedulerPlugin):
        def __init__(self):
            self.runs = {}

        def transition(self, key, start, finish, *args, **kwargs):
            if finish == "processing" and isinstance(key, tuple) and str(key[0]).startswith("dkapprox-write-"):
                self.runs[key] = self.runs.get(key, 0) + 1

    tag = f"lwt{lost_worker_timeout}"
    config = load_config(slurm_yaml(base / f"{tag}.yaml", f"bench-{tag}",
                                    scale="adapt: {minimum_jobs: 2, maximum_jobs: 2}"))
    out = base / f"{tag}.zarr"
    X = io.open_array(data)
    est = RBFSampler(n_components=64, random_state=0).fit(X)
    plugin = BlockRuns()
    with dask.config.set({"distributed.deploy.lost-worker-timeout": lost_worker_timeout}), \
            connect(config) as client:
        client.cluster.scheduler.add_plugin(plugin)
        watch = client.cluster._dkapprox_watch
        pending = io.write_features(est.transform(X), out, plan={"bench": tag}, compute=False)
        future = client.compute(pending.delayed)
        for _ in range(3000):
            if len(client.scheduler_info()["workers"]) == 2 and blocks_done(out) >= cancel_after or future.done():
                break
            time.sleep(0.1)
        jobs = sorted((j.job_id for j in client.cluster.workers.values()), key=int)
        cancelled_at = time.monotonic() - watch.started
        slurm.run("scancel", jobs[0])
        written_at_cancel = blocks_done(out)
        future.result()
        pending.finalize()
        replaced = [t for t, _, job in watch.joined if job is not None and int(job) > int(jobs[-1])]
    recomputed = sum(1 for n in plugin.runs.values() if n > 1)
    return (replaced[0] - cancelled_at) if replaced else float("nan"), recomputed, len(plugin.runs), \
        written_at_cancel


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=150_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cancel-after", type=int, default=40, help="blocks written before the scancel")
    parser.add_argument("--scancel-rows", type=int, default=1_500_000,
                        help="rows of the scancel runs (long enough for a 15 s lost-worker-timeout)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="dkapprox-bench-slurm-") as tmp, \
            OneNodeSlurm(Path(tmp) / "slurm") as slurm:
        base = Path(tmp)
        env = dict(slurm.env, PYTHONUNBUFFERED="1")
        os.environ["SLURM_CONF"] = str(slurm.conf)
        X = np.random.default_rng(0).standard_normal((args.rows, FEATURES)).astype(np.float32)
        data = base / "in.zarr"
        zarr.create_array(str(data), shape=X.shape, chunks=(BLOCK, FEATURES), dtype=X.dtype)[:] = X
        blocks = -(-args.rows // BLOCK)
        local = base / "local.yaml"
        local.write_text("kind: local\nn_workers: 2\nthreads_per_worker: 1\nmemory_limit: 1GiB\n"
                         "dashboard_address: null\n")
        job = ["featurize", data, "--method", "rbf", "--n-components", 64, "--overwrite"]

        runs = {"slurm": [], "local": []}
        for i in range(args.repeats):
            runs["slurm"].append(timed_cli(job + ["--out", base / "s.zarr", "--cluster",
                                                  slurm_yaml(base / "s.yaml", "bench")], env))
            runs["local"].append(timed_cli(job + ["--out", base / "l.zarr", "--cluster", local], env))
        for kind, results in runs.items():
            assert all(r[0] == 0 for r in results), [r[3] for r in results]
        med = {kind: [statistics.median(r[i] for r in results) if i != 2 or kind == "slurm" else float("nan")
                      for i in (1, 2, 4)] for kind, results in runs.items()}
        print_table(f"featurize rbf(64), {args.rows:,} x {FEATURES} in {blocks} blocks; median of {args.repeats}",
                    ["cluster", "s to first worker", "wall s", "x local", "write s", "x local"],
                    [["SLURM, 2 jobs x 1 worker", med["slurm"][1], med["slurm"][0], med["slurm"][0] / med["local"][0],
                      med["slurm"][2], med["slurm"][2] / med["local"][2]],
                     ["LocalCluster, 2 workers", float("nan"), med["local"][0], 1.0, med["local"][2], 1.0]])

        rows = []
        big = base / "big.zarr"
        Xb = np.random.default_rng(1).standard_normal((args.scancel_rows, FEATURES)).astype(np.float32)
        zarr.create_array(str(big), shape=Xb.shape, chunks=(BLOCK, FEATURES), dtype=Xb.dtype)[:] = Xb
        for timeout in ("15s", "2s"):
            seconds, recomputed, total, at = scancel_run(slurm, base, big, timeout, args.cancel_after)
            rows.append([f"lost-worker-timeout {timeout}", at, seconds, f"{recomputed} of {total}"])
        print_table(f"scancel of one of 2 adaptive worker jobs mid-run (Python API), {args.scancel_rows:,} rows",
                    ["setting", "blocks written at scancel", "s to a new job's worker", "blocks recomputed"], rows)

        down = []
        for timeout in ("5s", "30s"):
            code, wall, _, err, _ = timed_cli(job + ["--out", base / "d.zarr", "--start-timeout", timeout,
                                                     "--cluster", slurm_yaml(base / "d.yaml", "bench-down",
                                                                             queue=DOWN)], env)
            assert code == 75, err
            down.append([timeout, wall, err.strip().splitlines()[-1][:110] + "..."])
        print_table(f"partition {DOWN!r} is DOWN", ["--start-timeout", "s to exit 75", "the line"], down)
        assert not slurm.job_ids(), slurm.squeue()


if __name__ == "__main__":
    main()
