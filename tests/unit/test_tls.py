"""TLS on a real gRPC aio server (the node's server kind) with the SDK client: trust, mutual TLS,
plaintext/TLS mismatches refused quickly with a message saying what to pass, and certificates
reloaded without a restart."""

from __future__ import annotations

import asyncio
import datetime as dt
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from raftsched.abc import TransportError
from raftsched.client import Client
from raftsched.config.types import ClusterConfig, NodeConfig, TlsSettings
from raftsched.errors import ConfigError, InvalidSpec, TlsError, Unavailable
from raftsched.executor.agent import Executor
from raftsched.rpc.executor_client import TLS_CODE, GrpcExecutorTransport
from raftsched.security.certs import CertificateAuthority, KeyPair, new_ca
from raftsched.security.tls import ServerTls, TlsConfig, client_tls, diagnose_handshake, speaks_tls
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
QUICK_S = 3.0  # a misconfiguration is reported well within this (no retry loop, no hang)
SECRET = "unit-test-secret-0123456789"


@dataclass(frozen=True)
class Pki:
    """Two unrelated CAs, each with a node (server) and a client certificate, as files."""

    dir: Path
    ca_a: Path
    ca_b: Path
    node_a: tuple[Path, Path]
    node_b: tuple[Path, Path]
    client_a: tuple[Path, Path]
    client_b: tuple[Path, Path]


def _write(directory: Path, name: str, pair: KeyPair) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    pair.write(cert, key)
    return cert, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    hosts = ["127.0.0.1", "localhost"]
    cas: dict[str, CertificateAuthority] = {"a": new_ca("CA a", now=NOW), "b": new_ca("CA b", now=NOW)}
    for name, ca in cas.items():
        (d / f"ca-{name}.pem").write_bytes(ca.cert_pem)
    return Pki(
        d,
        d / "ca-a.pem",
        d / "ca-b.pem",
        _write(d, "node-a", cas["a"].issue("node-a", hosts, now=NOW)),
        _write(d, "node-b", cas["b"].issue("node-b", hosts, now=NOW)),
        _write(d, "client-a", cas["a"].issue("client-a", now=NOW, server=False)),
        _write(d, "client-b", cas["b"].issue("client-b", now=NOW, server=False)),
    )


class _Admin(pb_grpc.AdminServicer):  # type: ignore[misc]  # generated, untyped
    async def NodeStatus(self, request: pb.NodeStatusRequest, context: Any) -> pb.NodeStatusReply:
        return pb.NodeStatusReply(node_id="t", role="leader")

    async def ListTasks(self, request: pb.ListTasksRequest, context: Any) -> pb.ListTasksReply:
        return pb.ListTasksReply()


class Server:
    """A grpc.aio server on its own thread and loop, TLS from ``settings`` (plaintext if None)."""

    def __init__(self, settings: TlsSettings | None) -> None:
        self.tls = ServerTls(settings) if settings is not None else None
        self.address = ""
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self._thread.start()
        assert self._ready.wait(10), "server did not start"

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = grpc.aio.server()
        pb_grpc.add_AdminServicer_to_server(_Admin(), server)
        if self.tls is not None:
            port = server.add_secure_port("127.0.0.1:0", self.tls.credentials())
        else:
            port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self.address = f"127.0.0.1:{port}"
        self._ready.set()
        await self._stop.wait()
        await server.stop(None)

    def close(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


@pytest.fixture
def serve() -> Iterator[Callable[[TlsSettings | None], Server]]:
    servers: list[Server] = []

    def make(settings: TlsSettings | None) -> Server:
        servers.append(Server(settings))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def _settings(node: tuple[Path, Path], ca: Path | None = None, mtls: bool = False) -> TlsSettings:
    return TlsSettings(cert_file=node[0], key_file=node[1], ca_file=ca, require_client_cert=mtls)


def _status(server: Server, tls: TlsConfig | None) -> pb.NodeStatusReply:
    with Client(server.address, tls=tls, timeout=QUICK_S, retries=3) as c:
        return c.node_status(server.address)


def _refused(server: Server, tls: TlsConfig | None) -> str:
    """The TlsError message of a write-path call (with its retry loop), which must come quickly."""
    started = time.monotonic()
    with Client(server.address, tls=tls, timeout=QUICK_S, retries=8) as c, pytest.raises(TlsError) as info:
        c.list_tasks()
    assert time.monotonic() - started < QUICK_S, "a TLS misconfiguration must not be retried for long"
    return str(info.value)


# --------------------------------------------------------------------------------------------
# Trust and mutual TLS
# --------------------------------------------------------------------------------------------


def test_tls_with_the_right_ca_works(pki: Pki, serve: Callable[[TlsSettings | None], Server]) -> None:
    server = serve(_settings(pki.node_a))
    assert _status(server, TlsConfig(ca_file=pki.ca_a)).node_id == "t"


def test_a_server_certificate_from_another_ca_is_refused(
    pki: Pki, serve: Callable[[TlsSettings | None], Server]
) -> None:
    server = serve(_settings(pki.node_a))
    message = _refused(server, TlsConfig(ca_file=pki.ca_b))
    assert message.startswith(f"TLS handshake failed with {server.address}: ")
    assert "not trusted" in message and str(pki.ca_b) in message and "--tls-ca" in message


def test_mutual_tls_accepts_a_client_certificate_from_its_ca(
    pki: Pki, serve: Callable[[TlsSettings | None], Server]
) -> None:
    server = serve(_settings(pki.node_a, pki.ca_a, mtls=True))
    tls = TlsConfig(ca_file=pki.ca_a, cert_file=pki.client_a[0], key_file=pki.client_a[1])
    assert _status(server, tls).role == "leader"


def test_mutual_tls_without_a_client_certificate_is_refused(
    pki: Pki, serve: Callable[[TlsSettings | None], Server]
) -> None:
    server = serve(_settings(pki.node_a, pki.ca_a, mtls=True))
    message = _refused(server, TlsConfig(ca_file=pki.ca_a))
    assert "requires a client certificate" in message and "--tls-cert" in message


def test_mutual_tls_with_a_client_certificate_from_another_ca_is_refused(
    pki: Pki, serve: Callable[[TlsSettings | None], Server]
) -> None:
    server = serve(_settings(pki.node_a, pki.ca_a, mtls=True))
    tls = TlsConfig(ca_file=pki.ca_a, cert_file=pki.client_b[0], key_file=pki.client_b[1])
    message = _refused(server, tls)
    assert "refused the client certificate" in message and str(pki.client_b[0]) in message


# --------------------------------------------------------------------------------------------
# Plaintext against TLS and the reverse
# --------------------------------------------------------------------------------------------


def test_plaintext_against_a_tls_port_says_the_server_requires_tls(
    pki: Pki, serve: Callable[[TlsSettings | None], Server]
) -> None:
    server = serve(_settings(pki.node_a))
    message = _refused(server, None)
    assert message == (
        f"TLS handshake failed with {server.address}: the server requires TLS; "
        "pass --tls-ca (RAFTSCHED_TLS_CA; TlsConfig(ca_file=...) in the SDK)"
    )
    started = time.monotonic()
    with Client(server.address, timeout=QUICK_S) as c, pytest.raises(TlsError):
        c.node_status(server.address)
    assert time.monotonic() - started < QUICK_S


def test_tls_against_a_plaintext_port_says_the_server_does_not_use_tls(
    pki: Pki, serve: Callable[[TlsSettings | None], Server]
) -> None:
    server = serve(None)
    message = _refused(server, TlsConfig(ca_file=pki.ca_a))
    assert "the server does not use TLS (a plaintext port)" in message


def test_plaintext_against_plaintext_still_works(serve: Callable[[TlsSettings | None], Server]) -> None:
    assert _status(serve(None), None).node_id == "t"


def test_a_node_that_is_down_is_unavailable_not_a_tls_error(pki: Pki) -> None:
    with Client("127.0.0.1:1", tls=TlsConfig(ca_file=pki.ca_a), retries=0) as c, pytest.raises(Unavailable):
        c.list_tasks()


def test_status_of_every_node_names_the_tls_problem(
    pki: Pki, serve: Callable[[TlsSettings | None], Server]
) -> None:
    server = serve(_settings(pki.node_a))
    with Client(server.address, timeout=QUICK_S) as c:
        view = c.cluster_status()
    assert "the server requires TLS" in view.nodes[0].error


def test_speaks_tls_tells_tls_from_plaintext_from_nothing(
    pki: Pki, serve: Callable[[TlsSettings | None], Server]
) -> None:
    assert speaks_tls(serve(_settings(pki.node_a, pki.ca_a, mtls=True)).address) is True
    assert speaks_tls(serve(None).address) is False
    assert speaks_tls("127.0.0.1:1") is None


def test_diagnosis_leaves_other_failures_alone() -> None:
    never: Callable[[str], bool | None] = lambda target: pytest.fail("no probe for this")  # noqa: E731
    refused = "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Connection refused"
    assert diagnose_handshake(refused, "127.0.0.1:1", None, never) is None
    assert diagnose_handshake(refused, "127.0.0.1:1", TlsConfig(), never) is None
    # A closed connection is a TLS problem only if the server turns out to speak TLS.
    closed = "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:9: Socket closed"
    assert diagnose_handshake(closed, "127.0.0.1:9", None, lambda t: None) is None
    assert diagnose_handshake(closed, "127.0.0.1:9", None, lambda t: False) is None
    assert "requires TLS" in (diagnose_handshake(closed, "127.0.0.1:9", None, lambda t: True) or "")


# --------------------------------------------------------------------------------------------
# Reload without restart
# --------------------------------------------------------------------------------------------


def test_reload_serves_the_new_certificate_to_new_connections(
    pki: Pki, tmp_path: Path, serve: Callable[[TlsSettings | None], Server]
) -> None:
    live = (tmp_path / "node.pem", tmp_path / "node.key")
    shutil.copy(pki.node_a[0], live[0])
    shutil.copy(pki.node_a[1], live[1])
    server = serve(_settings(live))
    assert server.tls is not None
    assert _status(server, TlsConfig(ca_file=pki.ca_a)).node_id == "t"

    shutil.copy(pki.node_b[0], live[0])
    shutil.copy(pki.node_b[1], live[1])
    assert "CN=node-b" in server.tls.reload()

    assert _status(server, TlsConfig(ca_file=pki.ca_b)).node_id == "t"
    assert "not trusted" in _refused(server, TlsConfig(ca_file=pki.ca_a))


def test_a_bad_reload_keeps_the_certificate_in_use(
    pki: Pki, tmp_path: Path, serve: Callable[[TlsSettings | None], Server]
) -> None:
    live = (tmp_path / "node.pem", tmp_path / "node.key")
    shutil.copy(pki.node_a[0], live[0])
    shutil.copy(pki.node_a[1], live[1])
    server = serve(_settings(live))
    assert server.tls is not None
    shutil.copy(pki.node_b[0], live[0])  # the new certificate, but still the old key
    with pytest.raises(ConfigError) as info:
        server.tls.reload()
    assert info.value.problems == [
        f"tls.cert_file: {live[0]} with tls.key_file {live[1]}: "
        "the private key does not belong to the certificate"
    ]
    assert _status(server, TlsConfig(ca_file=pki.ca_a)).node_id == "t"


# --------------------------------------------------------------------------------------------
# Files and where the client's TLS comes from
# --------------------------------------------------------------------------------------------


def test_server_tls_names_each_unusable_file(pki: Pki, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN NOTHING-----\n")
    with pytest.raises(ConfigError) as info:
        ServerTls(TlsSettings(tmp_path / "missing.pem", pki.node_a[1], ca_file=garbage))
    assert info.value.problems == [
        f"tls.cert_file: cannot read {tmp_path / 'missing.pem'}: No such file or directory",
        f"tls.ca_file: {garbage}: not a PEM certificate",
    ]
    with pytest.raises(ConfigError) as info:
        ServerTls(TlsSettings(pki.node_a[0], pki.node_b[1]))
    assert "the private key does not belong to the certificate" in str(info.value)
    key_text = pki.node_b[1].read_text()
    assert key_text.splitlines()[1] not in str(info.value)  # never any key material in a message


def test_client_tls_files_are_checked_when_the_client_is_made(pki: Pki, tmp_path: Path) -> None:
    with pytest.raises(InvalidSpec) as info:
        Client("127.0.0.1:1", tls=TlsConfig(ca_file=tmp_path / "nope.pem"))
    assert info.value.field == "tls.ca_file" and "cannot read" in info.value.reason
    with pytest.raises(InvalidSpec) as info:
        Client("127.0.0.1:1", tls=TlsConfig(cert_file=pki.client_a[0], key_file=pki.client_b[1]))
    assert info.value.field == "tls.cert_file" and "does not belong" in info.value.reason
    with pytest.raises(InvalidSpec, match=r"tls\.key_file: required with tls\.cert_file"):
        TlsConfig(cert_file=pki.client_a[0])


def _config_with_tls(pki: Pki, tmp_path: Path) -> ClusterConfig:
    return ClusterConfig(
        name="c",
        secret=SECRET,
        nodes=(NodeConfig("n1", "127.0.0.1:7001", "127.0.0.1:7101", tmp_path / "n1"),),
        tls=_settings(pki.node_a, pki.ca_a, mtls=True),
    )


def test_client_tls_takes_each_part_from_the_option_then_the_environment_then_the_config(
    pki: Pki, tmp_path: Path
) -> None:
    config = _config_with_tls(pki, tmp_path)
    assert client_tls(environ={}) is None
    assert client_tls(config=config, environ={}) == TlsConfig(pki.ca_a, pki.node_a[0], pki.node_a[1])
    env = {"RAFTSCHED_TLS_CA": str(pki.ca_b)}
    assert client_tls(config=config, environ=env) == TlsConfig(pki.ca_b, pki.node_a[0], pki.node_a[1])
    env |= {"RAFTSCHED_TLS_CERT": str(pki.client_b[0]), "RAFTSCHED_TLS_KEY": str(pki.client_b[1])}
    assert client_tls(config=config, environ=env) == TlsConfig(pki.ca_b, *pki.client_b)
    assert client_tls(str(pki.ca_a), environ=env) == TlsConfig(pki.ca_a, *pki.client_b)
    assert client_tls(str(pki.ca_a), environ={}) == TlsConfig(pki.ca_a)
    with pytest.raises(InvalidSpec, match=r"tls\.cert_file: required with tls\.key_file"):
        client_tls(key=str(pki.client_a[1]), environ={})


TLS_GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "tls.md"


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_the_documented_openssl_commands_make_working_mutual_tls_certificates(
    tmp_path: Path, serve: Callable[[TlsSettings | None], Server]
) -> None:
    section = TLS_GUIDE.read_text().split("## Setting up certificates", 1)[1]
    script = section.split("```sh\n", 1)[1].split("```", 1)[0]
    done = subprocess.run(["bash", "-euc", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((tmp_path / "n1.key").stat().st_mode) == 0o600
    server = serve(TlsSettings(tmp_path / "n1.pem", tmp_path / "n1.key", tmp_path / "ca.pem", True))
    tls = TlsConfig(tmp_path / "ca.pem", tmp_path / "executor-1.pem", tmp_path / "executor-1.key")
    assert _status(server, tls).node_id == "t"
    assert "requires a client certificate" in _refused(server, TlsConfig(tmp_path / "ca.pem"))


def test_the_executor_transport_reports_a_tls_problem_as_such(
    pki: Pki, serve: Callable[[TlsSettings | None], Server]
) -> None:
    server = serve(_settings(pki.node_a, pki.ca_a, mtls=True))

    async def register(tls: TlsConfig | None) -> TransportError:
        transport = GrpcExecutorTransport(tls)
        try:
            with pytest.raises(TransportError) as info:
                await transport.register(
                    server.address, pb.RegisterRequest(name="x", slots=1), timeout_s=QUICK_S
                )
            return info.value
        finally:
            await transport.close()

    plaintext = asyncio.run(register(None))
    assert plaintext.code == TLS_CODE and "the server requires TLS" in plaintext.details
    no_cert = asyncio.run(register(TlsConfig(pki.ca_a)))
    assert no_cert.code == TLS_CODE and "requires a client certificate" in no_cert.details
    # With the right certificate the handshake passes (this test server has no ExecutorService).
    ok = asyncio.run(register(TlsConfig(pki.ca_a, *pki.client_a)))
    assert ok.code == "unimplemented"
    with pytest.raises(InvalidSpec, match="give tls or a transport"):
        Executor("127.0.0.1:1", "x", tls=TlsConfig(pki.ca_a), transport=GrpcExecutorTransport())
