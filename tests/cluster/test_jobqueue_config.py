"""SLURM/PBS configs whose memory or time settings contradict each other are refused when read."""

import pytest

from dkapprox.cluster import ClusterConfigError, parse_config
from dkapprox.cluster._jobqueue import DEFAULT_START_TIMEOUT, slurm_bytes, walltime_seconds

BASE = "kind: slurm\ncores: 4\nprocesses: 4\nmemory: 16GiB\nwalltime: '01:00:00'\n"


@pytest.mark.parametrize("extra, expected", [
    ("job_mem: 8G\n", "job_mem 8G (the --mem SLURM grants each job) is less than memory 16GiB "
                      "(the workers' memory limits added up: 4.00 GiB per worker)"),
    ("job_mem: '16000'\n", "job_mem 16000"),  # SLURM's default unit is MiB: 15.6 GiB < 16 GiB
    ("job_mem: lots\n", "job_mem must be a SLURM memory size"),
    ("job_extra_directives: ['--mem=64G']\n", "sets the job's memory a second way"),
    ("job_extra_directives: ['--mem-per-cpu 4G']\n", "sets the job's memory a second way"),
    ("worker_extra_args: ['--memory-limit', '8GiB']\n", "--memory-limit 8GiB for each of 4 worker processes adds "
                                                       "up to more than the job's memory 16GiB"),
    ("worker_extra_args: ['--lifetime', '55m', '--lifetime-stagger', '5m']\n",
     "--lifetime 55m plus --lifetime-stagger 5m is not shorter than walltime 01:00:00"),
    ("worker_extra_args: ['--lifetime=2h']\n", "--lifetime 2h plus --lifetime-stagger 0 is not shorter"),
    ("worker_extra_args: ['--lifetime', 'soon']\n", "must be durations such as '55m'"),
    ("processes: 8\n", "processes: 8 worker processes cannot share 4 cores"),
    ("adapt: {minimum_jobs: 3, maximum_jobs: 2}\n", "minimum_jobs 3 is more than maximum_jobs 2"),
    ("start_timeout: never\n", "start_timeout must be a duration"),
])
def test_contradictions_are_refused_by_name(extra, expected):
    text = BASE.replace("processes: 4\n", "") if extra.startswith("processes") else BASE
    with pytest.raises(ClusterConfigError, match=None) as caught:
        parse_config(text + extra, source="site/slurm.yaml")
    message = str(caught.value)
    assert message.startswith("site/slurm.yaml: ") and expected in message, message
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("extra", [
    "job_mem: 16G\n", "job_mem: 20G\n",
    "worker_extra_args: ['--memory-limit', '3GiB']\n",  # smaller limits than memory / processes: headroom
    "worker_extra_args: ['--lifetime', '50m', '--lifetime-stagger', '5m']\n",
    "job_extra_directives: ['--exclusive', '--constraint=skylake']\n",
    "start_timeout: 30m\n",
])
def test_consistent_settings_pass(extra):
    parse_config(BASE + extra)


def test_pbs_resource_spec_memory_must_cover_memory():
    base = "kind: pbs\ncores: 4\nmemory: 16GiB\n"
    with pytest.raises(ClusterConfigError, match=r"resource_spec asks PBS for mem=8GB, less than memory 16GiB"):
        parse_config(base + "resource_spec: 'select=1:ncpus=4:mem=8GB'\n")
    parse_config(base + "resource_spec: 'select=1:ncpus=4:mem=16GB'\n")


def test_start_timeout_is_seconds_and_not_passed_to_dask_jobqueue():
    from dkapprox.cluster._start import jobqueue_kwargs

    config = parse_config(BASE + "start_timeout: 10m\n")
    assert config.options["start_timeout"] == 600
    assert "start_timeout" not in jobqueue_kwargs(config.options)
    assert DEFAULT_START_TIMEOUT == 600


@pytest.mark.parametrize("text, seconds", [
    ("30", 1800), ("30:15", 1815), ("02:00:00", 7200), ("1-00", 86400), ("1-02:30", 95400),
    ("2-00:00:10", 172810),
])
def test_walltime_formats(text, seconds):
    assert walltime_seconds(text) == seconds


@pytest.mark.parametrize("text, nbytes", [("32G", 32 * 2**30), ("4000", 4000 * 2**20), ("512M", 512 * 2**20),
                                          ("1T", 2**40), ("64gb", 64 * 2**30)])
def test_slurm_memory_units_are_binary_and_mib_by_default(text, nbytes):
    assert slurm_bytes(text) == nbytes


def test_start_timeout_flag_takes_a_duration(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "dkapprox", "featurize", str(tmp_path / "in.zarr"), "--method",
                           "rbf", "--out", str(tmp_path / "o.zarr"), "--start-timeout", "soon"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "--start-timeout must be a duration such as '30s' (got 'soon')" in done.stderr
