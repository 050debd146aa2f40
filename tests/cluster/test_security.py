"""Who may talk to the clusters dkapprox starts (issue 39): TLS for slurm/pbs schedulers, dashboards on loopback.

The schedulers here are the real ones dkapprox starts for a slurm config (``jobs: 0`` submits no
job, so no batch system is needed); their worker is the job script's own command line, run as a
node would run it. The real SLURM (tests/cluster/test_slurm.py) and the network namespaces of the
multi-host bed (tests/cluster/test_multihost.py) test the same from outside.
"""

from __future__ import annotations

import logging
import os
import shlex
import socket
import stat
import subprocess
import sys
import urllib.request
import warnings
from pathlib import Path

import pytest
from distributed.security import Security
from distributed.utils import get_ip

sys.path.insert(0, str(Path(__file__).parent))
from _intruder import knock, visitors  # noqa: E402

from dkapprox.cluster import ClusterConfigError, connect, parse_config, render
from dkapprox.cluster._start import dashboard_link
from dkapprox.errors import InsecureClusterWarning

SLURM = "kind: slurm\ncores: 1\nprocesses: 1\nmemory: 1GiB\njobs: 0\nwalltime: '00:10:00'\n"


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_slurm_scheduler_speaks_tls_with_credentials_of_its_own_and_refuses_everyone_else(tmp_path):
    config = parse_config(SLURM + f"shared_temp_directory: {tmp_path / 'creds'}\npython: {sys.executable}\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", InsecureClusterWarning)  # no insecure warning without insecure: true
        with connect(config) as client:
            address = client.cluster.scheduler_address
            folder = client.cluster._dkapprox_credentials.directory
            files = sorted(folder.iterdir())
            modes = {p.name: mode(p) for p in [folder, *files]}
            script = client.cluster.job_script()
            # the job script's worker, as a node runs it, joins with the files it names, and a task runs
            worker = subprocess.Popen(shlex.split(script.splitlines()[-1].replace("--nanny", "--no-nanny")),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
            try:
                client.wait_for_workers(1, timeout=60)
                assert client.submit(sum, [20, 22]).result(timeout=60) == 42
            finally:
                worker.terminate()
                worker.wait(30)
            knocks = visitors(address)
            ours = knock(address, client.cluster.security.get_connection_args("client"))
    assert address.startswith("tls://")
    assert ours == "" and all(knocks.values()), (ours, knocks)  # the cluster's credentials get in, no others
    # where the credentials lived: a folder only we can enter, files only we can read, gone after the run
    assert folder.parent == tmp_path / "creds" and os.stat(folder.parent).st_uid == os.getuid()
    assert modes == {folder.name: 0o700, "cert.pem": 0o600, "key.pem": 0o600}
    assert not folder.exists()
    # the job script names the files and holds no secret
    assert f"--tls-key {folder}/key.pem" in script and "PRIVATE KEY" not in script and "BEGIN" not in script


def test_site_certificates_are_used_by_scheduler_workers_and_client(tmp_path, pki):
    good = pki["good"]
    config = parse_config(SLURM + f"tls: {{ca_file: {good['ca']}, cert: {good['client_cert']}, "
                                  f"key: {good['client_key']}}}\n")
    with connect(config) as client:
        address = client.cluster.scheduler_address
        assert client.cluster._dkapprox_credentials.directory is None  # nothing written: the site's files
        assert client.run_on_scheduler(lambda: 1) == 1
        other = pki["other"]
        foreign = Security(tls_ca_file=str(other["ca"]), tls_client_cert=str(other["client_cert"]),
                           tls_client_key=str(other["client_key"]), require_encryption=True)
        assert knock(address, foreign.get_connection_args("client"))  # a certificate of another CA
        assert all(visitors(address).values())
    assert address.startswith("tls://")
    assert f"--tls-cert {good['client_cert']}" in render(config)


def test_insecure_true_warns_naming_the_risk_and_only_then_plain_tcp(tmp_path, caplog):
    config = parse_config(SLURM + "insecure: true\n")
    caplog.set_level(logging.WARNING, logger="dkapprox.cluster")
    with pytest.warns(InsecureClusterWarning, match="anyone who can reach this port can connect a Client and run "
                                                    "any code on the workers as you"):
        with connect(config) as client:
            address = client.cluster.scheduler_address
            assert client.cluster._dkapprox_credentials.directory is None
    assert address.startswith("tcp://")
    assert any("insecure: true" in r.getMessage() and address in r.getMessage() for r in caplog.records)
    assert "--protocol tcp://" in render(config) and "--tls" not in render(config)


@pytest.mark.parametrize("extra, expected", [
    ("insecure: true\ntls: {ca_file: ca.pem, cert: c.pem}\n", "give either 'tls' (site certificates) or "
                                                               "'insecure: true', not both"),
    ("insecure: yes please\n", "insecure must be true or false"),
    ("tls: {ca_file: ca.pem}\n", "missing required key 'tls.cert'"),
    ("tls: {ca_file: ca.pem, cert: c.pem, require_encryption: false}\n", "unknown key 'tls.require_encryption'"),
    ("secure: false\n", "unknown key 'secure'"),
])
def test_security_settings_are_checked_by_name(extra, expected):
    with pytest.raises(ClusterConfigError) as caught:
        parse_config(SLURM + extra, source="site.yaml")
    assert expected in str(caught.value), str(caught.value)


def test_missing_site_certificates_are_refused_at_start(tmp_path):
    config = parse_config(SLURM + f"tls: {{ca_file: {tmp_path / 'ca.pem'}, cert: {tmp_path / 'c.pem'}}}\n")
    with pytest.raises(ClusterConfigError, match="no such certificate or key file"):
        with connect(config):
            pass


def _listens_only_on_loopback(link):
    """The dashboard answers /health on 127.0.0.1 and refuses the host's other address, if it has one."""
    port = int(link.split("://")[1].split("/")[0].rsplit(":", 1)[1])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as answer:
        assert answer.read() == b"ok"
    outside = get_ip()  # the address of the interface of the default route (distributed's own pick)
    if not outside.startswith("127."):
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((outside, port), timeout=5).close()


@pytest.mark.parametrize("text", [
    "kind: local\nn_workers: 1\nprocesses: false\n",            # the dashboard by default
    "kind: local\nn_workers: 1\nprocesses: false\ndashboard_address: null\n",  # no dashboard: /health
    SLURM + "insecure: true\n",
])
def test_dashboards_listen_on_loopback_and_the_printed_link_works(text):
    config = parse_config(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureClusterWarning)
        with connect(config) as client:
            link = dashboard_link(client, config)
            assert link.startswith("http://127.0.0.1:")
            _listens_only_on_loopback(link)
