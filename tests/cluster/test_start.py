"""Configs really start and connect: LocalCluster, an existing scheduler (plain and TLS)."""

import asyncio
import os
import socket
import ssl

import dask
import pytest
from distributed import LocalCluster, Worker
from distributed.security import Security

from dkapprox.cluster import ClusterConfigError, ClusterConnectError, connect, default_config, parse_config


def _pid():
    return os.getpid()


def test_local_config_starts_worker_processes_and_closes_them():
    config = parse_config("kind: local\nn_workers: 1\nthreads_per_worker: 1\nmemory_limit: 512MiB\n"
                          "dashboard_address: null\n")
    with connect(config) as client:
        info = client.scheduler_info()["workers"]
        assert len(info) == 1
        assert [w["memory_limit"] for w in info.values()] == [512 * 2**20]
        worker_pid = client.submit(_pid, pure=False).result()
        assert worker_pid != os.getpid()  # a real worker process
        cluster = client.cluster
        # a lost worker's nanny is kept (it restarts the worker), not closed 15 s after the loss
        assert dask.config.get("distributed.deploy.lost-worker-timeout") == "1 hour"
    assert cluster.status.name == "closed"
    assert dask.config.get("distributed.deploy.lost-worker-timeout") != "1 hour"  # only while connected


def test_default_is_one_single_threaded_worker_per_core():
    config = default_config()
    assert config.kind == "local"
    assert config.options["threads_per_worker"] == 1
    assert config.options["n_workers"] == len(os.sched_getaffinity(0))


def test_scheduler_config_connects_to_a_running_scheduler_and_leaves_it_running():
    with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster:
        config = parse_config(f"kind: scheduler\naddress: {cluster.scheduler_address}\ntimeout: 5s\n")
        with connect(config) as client:
            assert client.submit(sum, [1, 2, 3]).result() == 6
        with connect(scheduler=cluster.scheduler_address) as client:  # the --scheduler form
            assert client.submit(sum, [4]).result() == 4
        assert cluster.status.name == "running"


def test_unreachable_scheduler_is_a_connection_error_naming_the_address():
    config = parse_config("kind: scheduler\naddress: tcp://127.0.0.1:9\ntimeout: 1s\n")
    with pytest.raises(ClusterConnectError, match=r"cannot reach the scheduler at tcp://127.0.0.1:9"):
        with connect(config):
            pass


@pytest.fixture(scope="module")
def tls_cluster(pki):
    good = pki["good"]
    security = Security(
        tls_ca_file=str(good["ca"]), require_encryption=True,
        tls_scheduler_cert=str(good["scheduler_cert"]), tls_scheduler_key=str(good["scheduler_key"]),
        tls_worker_cert=str(good["worker_cert"]), tls_worker_key=str(good["worker_key"]),
        tls_client_cert=str(good["client_cert"]), tls_client_key=str(good["client_key"]),
    )
    with LocalCluster(n_workers=1, processes=False, protocol="tls://", host="127.0.0.1",
                      security=security, dashboard_address=":0") as cluster:
        yield cluster


def _tls_config(address, tls_lines):
    return parse_config(f"kind: scheduler\naddress: {address}\ntimeout: 2s\ntls:\n{tls_lines}")


def test_tls_config_with_certificates_connects(tls_cluster, pki):
    good = pki["good"]
    assert tls_cluster.scheduler_address.startswith("tls://")
    config = _tls_config(tls_cluster.scheduler_address,
                         f"  ca_file: {good['ca']}\n  cert: {good['client_cert']}\n  key: {good['client_key']}\n")
    with connect(config) as client:
        assert client.submit(sum, [20, 22]).result() == 42


def _raw_tls_exchange(address, ca, cert=None, key=None):
    """Handshake with the scheduler as a bare TLS client; what happens to the first read."""
    host, port = address.removeprefix("tls://").rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert:
        ctx.load_cert_chain(str(cert), str(key))
    with socket.create_connection((host, int(port)), timeout=2) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname=host) as tls:
                tls.settimeout(0.5)
                return "closed" if tls.recv(1) == b"" else "data"
        except TimeoutError:
            return "open"  # the scheduler accepted us and waits for a dask message
        except (ssl.SSLError, ConnectionResetError) as exc:
            return f"refused: {exc}"


def test_tls_client_without_a_certificate_is_refused(tls_cluster, pki):
    good = pki["good"]
    address = tls_cluster.scheduler_address
    accepted = _raw_tls_exchange(address, good["ca"], good["client_cert"], good["client_key"])
    assert accepted in ("open", "data"), accepted
    outcome = _raw_tls_exchange(address, good["ca"])
    assert outcome == "closed" or outcome.startswith("refused"), outcome


def test_tls_section_without_a_client_certificate_is_a_config_error():
    with pytest.raises(ClusterConfigError, match="missing required key 'tls.cert'"):
        parse_config("kind: scheduler\naddress: tls://h:1\ntls: {ca_file: ca.pem}\n")


def test_tls_client_with_a_certificate_from_another_ca_is_refused(tls_cluster, pki):
    other = pki["other"]
    config = _tls_config(tls_cluster.scheduler_address,
                         f"  ca_file: {pki['good']['ca']}\n  cert: {other['client_cert']}\n"
                         f"  key: {other['client_key']}\n")
    with pytest.raises(ClusterConnectError):
        with connect(config):
            pass


def test_plain_tcp_to_a_tls_scheduler_is_refused(tls_cluster):
    plain = tls_cluster.scheduler_address.replace("tls://", "tcp://")
    with pytest.raises(ClusterConnectError):
        with connect(parse_config(f"kind: scheduler\naddress: {plain}\ntimeout: 2s\n")):
            pass


def test_worker_with_a_certificate_from_another_ca_cannot_join(tls_cluster, pki):
    other = pki["other"]
    security = Security(tls_ca_file=str(pki["good"]["ca"]), tls_worker_cert=str(other["worker_cert"]),
                        tls_worker_key=str(other["worker_key"]), require_encryption=True)

    async def join():
        async with Worker(tls_cluster.scheduler_address, nthreads=1, dashboard=False,
                          security=security, death_timeout=2):
            pass

    with pytest.raises((OSError, TimeoutError, RuntimeError)):
        asyncio.run(join())
    assert len(tls_cluster.scheduler_info["workers"]) == 1
