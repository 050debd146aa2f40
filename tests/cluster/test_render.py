"""SLURM/PBS configs render the job script dask-jobqueue submits; Kubernetes its DaskCluster."""

import warnings
from pathlib import Path

import pytest
import yaml

from dkapprox.cluster import connect, load_config, parse_config, render
from dkapprox.errors import InsecureClusterWarning

CONFIGS = Path(__file__).resolve().parents[2] / "cluster_configs"  # the templates' one copy (wheel: package data)


def test_slurm_script_carries_every_setting():
    script = render(load_config(CONFIGS / "slurm.yaml"))
    for line in ["#SBATCH -J dkapprox", "#SBATCH -p normal", "#SBATCH -A my-project",
                 "#SBATCH --cpus-per-task=8", "#SBATCH --mem=32G", "#SBATCH -t 02:00:00",
                 "#SBATCH -e logs/dkapprox/dkapprox-%J.err",
                 "module load python/3.12", "source ~/venvs/dkapprox/bin/activate"]:
        assert line in script.splitlines(), line
    worker = script.splitlines()[-1]
    # TLS by default (issue 39): the workers read this cluster's credentials from files, named, never inlined
    assert worker.startswith("python -m distributed.cli.dask_worker tls://")
    folder = "~/.dkapprox/credentials/dkapprox-tls-<made-at-start>"
    assert worker.endswith(f"--protocol tls:// --tls-ca-file {folder}/cert.pem --tls-cert {folder}/cert.pem "
                           f"--tls-key {folder}/key.pem")
    assert "PRIVATE KEY" not in script and "BEGIN" not in script
    assert "--nworkers 8" in worker and "--nthreads 1" in worker
    # memory 30GiB split between 8 workers, inside the job's --mem=32G (headroom for the nannies)
    assert "--memory-limit 3.75GiB" in worker and "--local-directory $TMPDIR" in worker
    # workers retire before the 2 h walltime, staggered, and adapt replaces them
    assert "--lifetime 110m --lifetime-stagger 5m --protocol" in worker


def test_pbs_script_carries_every_setting():
    script = render(load_config(CONFIGS / "pbs.yaml"))
    for line in ["#PBS -N dkapprox", "#PBS -q workq", "#PBS -A my-project",
                 "#PBS -l select=1:ncpus=8:mem=32GB", "#PBS -l walltime=02:00:00"]:
        assert line in script.splitlines(), line
    assert "--nworkers 8" in script.splitlines()[-1]


@pytest.mark.parametrize("name, cluster_cls", [("slurm", "SLURMCluster"), ("pbs", "PBSCluster")])
@pytest.mark.parametrize("security", ["", "insecure: true\n"])
def test_rendered_script_is_the_one_the_cluster_would_submit(name, cluster_cls, security, tmp_path):
    text = (CONFIGS / f"{name}.yaml").read_text().replace("~/.dkapprox/credentials", str(tmp_path))
    config = parse_config(text + security)
    # The real cluster as dkapprox starts it (its scheduler runs here; the adaptive minimum of 0 jobs submits none)
    options = dict(config.options, scheduler_options={"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureClusterWarning)  # tests/cluster/test_security.py checks it
        with connect(type(config)(config.kind, options, config.source)) as client:
            assert type(client.cluster).__name__ == cluster_cls
            submitted = client.cluster.job_script()
            address = client.cluster.scheduler.address
            credentials = client.cluster._dkapprox_credentials.directory
    protocol = "tcp" if security else "tls"
    submitted = submitted.replace(address, f"{protocol}://<insert-scheduler-address-here>:8786")
    if credentials is not None:
        submitted = submitted.replace(credentials.name, "dkapprox-tls-<made-at-start>")
    assert submitted == render(config)


def test_adapt_and_jobs_reach_the_cluster_without_a_batch_system(tmp_path):
    # scale(jobs=0) submits nothing, so the whole start path runs here.
    config = parse_config("kind: slurm\ncores: 1\nmemory: 1GiB\njobs: 0\n"
                          f"scheduler_options: {{host: 127.0.0.1, dashboard_address: ':0'}}\n"
                          f"shared_temp_directory: {tmp_path}\n")
    with connect(config) as client:
        assert type(client.cluster).__name__ == "SLURMCluster"
        assert client.scheduler_info()["workers"] == {}


def test_kubernetes_renders_the_daskcluster_resource():
    spec = yaml.safe_load(render(load_config(CONFIGS / "kubernetes.yaml")))
    assert spec["kind"] == "DaskCluster"
    assert spec["metadata"] == {"name": "dkapprox", "namespace": "data-jobs"}
    assert spec["spec"]["idleTimeout"] == 3600
    worker = spec["spec"]["worker"]
    assert worker["replicas"] == 8
    container = worker["spec"]["containers"][0]
    assert container["image"] == "ghcr.io/dask/dask:latest"
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "4Gi"}
    assert {"name": "EXTRA_PIP_PACKAGES", "value": "dkapprox s3fs"} in container["env"]


def test_local_and_scheduler_render_a_summary():
    text = render(load_config(CONFIGS / "local.yaml"))
    assert yaml.safe_load(text)["n_workers"] == 2
