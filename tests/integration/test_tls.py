"""TLS on real node processes: the CLI and executors over mutual TLS, misconfigurations refused
quickly with a message saying what to pass, certificates reloaded on SIGHUP, the demo's TLS, the
safe-defaults refusal, and no private key material in any log."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from raftsched.client import Client
from raftsched.errors import TlsError
from raftsched.security.certs import KeyPair, new_ca
from raftsched.security.tls import TlsConfig
from raftsched.testing.cluster import LocalCluster, wait_until, write_config
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.conftest import ClusterFactory
from tests.support.procs import executor_argv

pytestmark = pytest.mark.integration

CLI = (sys.executable, "-m", "raftsched.cli")
NOW = dt.datetime.now(dt.UTC)  # certificates are checked against the real clock by gRPC
QUICK_S = 5.0  # generous under a loaded machine; a hang or a retry loop takes far longer
PEM_BODY = re.compile(r"^[A-Za-z0-9+/=]{40,}$")


@dataclass(frozen=True)
class Pki:
    dir: Path
    ca: Path
    other_ca: Path
    node: tuple[Path, Path]
    node_from_other_ca: KeyPair
    client: tuple[Path, Path]

    def key_lines(self) -> set[str]:
        """Every base64 line of every private key made here."""
        keys = [
            self.node[1].read_text(),
            self.client[1].read_text(),
            self.node_from_other_ca.key_pem.decode(),
        ]
        return {line for key in keys for line in key.splitlines() if PEM_BODY.match(line)}


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    d = tmp_path / "pki"
    d.mkdir()
    ca, other = new_ca("test CA", now=NOW), new_ca("other CA", now=NOW)
    (d / "ca.pem").write_bytes(ca.cert_pem)
    (d / "other-ca.pem").write_bytes(other.cert_pem)
    ca.issue("node", ["127.0.0.1", "localhost"], now=NOW).write(d / "node.pem", d / "node.key")
    ca.issue("client", now=NOW, server=False).write(d / "client.pem", d / "client.key")
    return Pki(
        d,
        d / "ca.pem",
        d / "other-ca.pem",
        (d / "node.pem", d / "node.key"),
        other.issue("node-rotated", ["127.0.0.1"], now=NOW),
        (d / "client.pem", d / "client.key"),
    )


def _tls_table(pki: Pki, mtls: bool = True) -> str:
    return (
        f'[tls]\ncert_file = "{pki.node[0]}"\nkey_file = "{pki.node[1]}"\nca_file = "{pki.ca}"\n'
        f"require_client_cert = {'true' if mtls else 'false'}\n"
    )


def _client_flags(pki: Pki) -> list[str]:
    return ["--tls-ca", str(pki.ca), "--tls-cert", str(pki.client[0]), "--tls-key", str(pki.client[1])]


def _cli(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAFTSCHED_")}
    started = time.monotonic()
    done = subprocess.run(
        [*CLI, "--timeout", "3", *args],
        capture_output=True,
        text=True,
        env={**clean, **(env or {})},
        timeout=60,
    )
    return done, time.monotonic() - started


def _assert_no_key_material(pki: Pki, *dirs: Path) -> None:
    secrets = pki.key_lines()
    for d in dirs:
        for log in d.rglob("*.log"):
            text = log.read_text(errors="replace")
            assert "PRIVATE KEY" not in text, f"{log} holds a private key"
            leaked = [line for line in text.splitlines() if line.strip() in secrets]
            assert not leaked, f"{log} holds private key material"


@pytest.fixture
def tls_cluster(make_cluster: ClusterFactory, pki: Pki) -> Iterator[LocalCluster]:
    cluster = make_cluster(extra_config=_tls_table(pki))
    cluster.wait_for_leader(60)
    yield cluster
    _assert_no_key_material(pki, cluster.log_dir)


def test_cli_and_executors_work_over_mutual_tls(tls_cluster: LocalCluster, pki: Pki, tmp_path: Path) -> None:
    targets = ",".join(tls_cluster.targets())
    done, _ = _cli(
        "--cluster", targets, *_client_flags(pki), "task", "add", "hello", "--manual", "--command", "echo hi"
    )
    assert done.returncode == 0, done.stderr
    env = {"RAFTSCHED_TLS_CA": str(pki.ca), "RAFTSCHED_TLS_CERT": str(pki.client[0])}
    env["RAFTSCHED_TLS_KEY"] = str(pki.client[1])
    done, _ = _cli("--cluster", targets, "status", env=env)
    assert done.returncode == 0 and "leader" in done.stdout, done.stderr
    # --config supplies the CA and the node certificate (a node's host runs the CLI like this).
    done, _ = _cli("--config", str(tls_cluster.config_path), "task", "show", "hello")
    assert done.returncode == 0, done.stderr

    executor = tls_cluster.start_executor("tls-ex", data_dir=tmp_path / "ex")  # dials with --tls-*
    try:
        tls = TlsConfig(pki.ca, *pki.client)
        with Client(tls_cluster.targets(), tls=tls) as client:
            run = client.trigger("hello")

            def succeeded() -> bool:
                (latest,) = [r for r in client.runs("hello") if r.run_id == run.run_id]
                return latest.state == pb.SUCCEEDED

            wait_until(succeeded, 60, 0.1, "the run to succeed on the TLS executor")
    finally:
        executor.terminate()
        executor.wait(30)


def test_misconfigured_clients_get_a_clear_error_quickly(tls_cluster: LocalCluster, pki: Pki) -> None:
    target = tls_cluster.targets()[0]
    cases = [
        ([], "the server requires TLS; pass --tls-ca"),
        (["--tls-ca", str(pki.ca)], "the server requires a client certificate (mutual TLS); pass --tls-cert"),
        (
            [
                "--tls-ca",
                str(pki.other_ca),
                "--tls-cert",
                str(pki.client[0]),
                "--tls-key",
                str(pki.client[1]),
            ],
            "not trusted",
        ),
    ]
    # What a CLI process costs before it dials anything, measured now: on a loaded machine the
    # interpreter's start-up alone has taken several seconds.
    _, start_up = _cli("--version")
    for flags, expected in cases:
        done, took = _cli("--cluster", target, *flags, "task", "list")
        assert done.returncode == 1, (flags, done.stdout, done.stderr)
        assert done.stderr.startswith(f"raftsched: error: TLS handshake failed with {target}: "), done.stderr
        assert expected in done.stderr, done.stderr
        assert took < QUICK_S + 2 * start_up, f"{flags}: {took:.1f}s (start-up {start_up:.1f}s)"


def test_tls_client_against_a_plaintext_cluster_gets_a_clear_error(
    make_cluster: ClusterFactory, pki: Pki
) -> None:
    cluster = make_cluster(nodes=1)
    cluster.wait_for_leader(60)
    started = time.monotonic()
    with (
        Client(cluster.targets(), tls=TlsConfig(pki.ca), timeout=3) as client,
        pytest.raises(TlsError) as info,
    ):
        client.list_tasks()
    assert "the server does not use TLS (a plaintext port)" in str(info.value)
    assert time.monotonic() - started < QUICK_S


def test_sighup_reloads_the_certificate_without_a_restart(make_cluster: ClusterFactory, pki: Pki) -> None:
    cluster = make_cluster(nodes=1, extra_config=_tls_table(pki))
    cluster.wait_for_leader(60)
    target = cluster.targets()[0]
    old = TlsConfig(pki.ca, *pki.client)
    new = TlsConfig(pki.other_ca, *pki.client)  # client certificates are still checked against ca.pem
    with Client(target, tls=new, timeout=3) as c, pytest.raises(TlsError, match="not trusted"):
        c.node_status(target)
    pid = cluster.procs["n1"].pid

    # Rotate: new files in place (renamed in, as a deployment tool would), then SIGHUP.
    rotated = pki.dir / "rotated"
    rotated.mkdir()
    pki.node_from_other_ca.write(rotated / "node.pem", rotated / "node.key")
    os.replace(rotated / "node.key", pki.node[1])
    os.replace(rotated / "node.pem", pki.node[0])
    cluster.kill("n1", signal.SIGHUP)

    def new_certificate_served() -> bool:
        with Client(target, tls=new, timeout=3, retries=0) as c:
            return c.node_status(target).node_id == "n1"

    wait_until(new_certificate_served, 30, 0.1, "the node to present the rotated certificate")
    assert cluster.procs["n1"].pid == pid and cluster.procs["n1"].poll() is None  # same process
    with Client(target, tls=old, timeout=3) as c, pytest.raises(TlsError, match="not trusted"):
        c.node_status(target)
    log = (cluster.log_dir / "n1.log").read_text()
    assert "TLS certificates reloaded: new handshakes present CN=node-rotated" in log
    _assert_no_key_material(pki, cluster.log_dir)


def test_a_bad_certificate_file_stops_the_node_before_it_starts(tmp_path: Path, pki: Pki) -> None:
    path = tmp_path / "cluster.toml"
    bad = tmp_path / "bad.key"
    bad.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    table = _tls_table(pki).replace(str(pki.node[1]), str(bad))
    config = write_config(path, 1, extra=table)
    done = subprocess.run(
        [sys.executable, "-m", "raftsched.cli.node", "--config", str(path), "--node-id", "n1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert f"tls.cert_file: {pki.node[0]} with tls.key_file {bad}: not a PEM private key" in done.stderr
    assert "not a key" not in done.stderr
    assert not (config.nodes[0].data_dir / "raft.journal").exists()


def test_a_node_refuses_an_exposed_plaintext_api_unless_insecure_is_set(
    tmp_path: Path, make_cluster: ClusterFactory
) -> None:
    path = tmp_path / "exposed.toml"
    write_config(path, 1)
    text = path.read_text()
    exposed = re.sub(r'grpc = "127\.0\.0\.1:(\d+)"', r'grpc = "192.0.2.10:\1"', text)
    path.write_text(exposed)
    done = subprocess.run(
        [sys.executable, "-m", "raftsched.cli.node", "--config", str(path), "--node-id", "n1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "is not a loopback address" in done.stderr and "cluster.insecure = true" in done.stderr

    # insecure = true is a loud choice: every start logs a warning (loopback here, so it binds).
    cluster = make_cluster(nodes=1, start=False)
    cluster.config_path.write_text(
        cluster.config_path.read_text().replace('name = "local"', 'name = "local"\ninsecure = true')
    )
    cluster = LocalCluster(cluster.config_path, cluster.log_dir)
    cluster.start()
    try:
        cluster.wait_for_leader(60)
        log = (cluster.log_dir / "n1.log").read_text()
        assert "WARNING raftsched.node: cluster.insecure = true: the gRPC API on" in log
    finally:
        cluster.stop()


def test_the_demo_runs_with_mutual_tls_and_prints_how_to_use_it(tmp_path: Path) -> None:
    config = tmp_path / "cluster.toml"
    write_config(config, 3)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAFTSCHED_")}
    demo = subprocess.Popen(
        [*CLI, "demo", "--config", str(config), "--duration", "120"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=clean,
    )
    lines: list[str] = []
    try:
        assert demo.stdout is not None
        command: list[str] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = demo.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.strip().startswith("raftsched --cluster"):
                command = line.split()[1:]
            if command and " ran " in line and " ok on " in line:
                break
        output = "".join(lines)
        assert "TLS is on (mutual: clients need a certificate)" in output, output
        assert "authentication is on" in output and "--token-file" in command, output
        assert command and " ok on " in output, output
        # The command the demo printed works; the same without the TLS options is refused.
        done, _ = _cli(*command)
        assert done.returncode == 0 and "leader" in done.stdout, done.stderr
        plain = [a for a in command if not a.startswith("--tls") and not a.endswith((".pem", ".key"))]
        done, _ = _cli(*plain)
        assert done.returncode == 1 and "the server requires TLS" in done.stderr, done.stderr
        # ... and without the token, refused as unauthenticated (exit status 3).
        at = command.index("--token-file")
        done, _ = _cli(*command[:at], *command[at + 2 :])
        assert done.returncode == 3 and "not authenticated" in done.stderr, done.stderr
    finally:
        demo.send_signal(signal.SIGINT)
        try:
            demo.wait(60)
        except subprocess.TimeoutExpired:
            demo.kill()
            demo.wait(10)
    data = tmp_path / "demo-data"  # the demo's own directory, apart from the config's data dirs
    keys = {
        line
        for f in (data / "tls").glob("*.key")
        for line in f.read_text().splitlines()
        if PEM_BODY.match(line)
    }
    assert keys
    for log in (data / "logs").glob("*.log"):
        text = log.read_text(errors="replace")
        assert "PRIVATE KEY" not in text and not keys & {line.strip() for line in text.splitlines()}, log
    assert "PRIVATE KEY" not in "".join(lines)
    token_file = data / "admin.token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    secret = token_file.read_text().strip().split("_", 2)[2]
    for log in (data / "logs").glob("*.log"):
        assert secret not in log.read_text(errors="replace"), log
    assert secret not in "".join(lines)
    shutil.rmtree(data, ignore_errors=True)


def test_health_is_served_over_tls_too(tls_cluster: LocalCluster, pki: Pki) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    tls = TlsConfig(pki.ca, *pki.client)
    channel = grpc.secure_channel(tls_cluster.targets()[0], tls.channel_credentials())
    try:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        channel.close()


def test_an_executor_without_tls_stops_with_the_diagnosis(tls_cluster: LocalCluster, tmp_path: Path) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAFTSCHED_")}
    started = time.monotonic()
    done = subprocess.run(
        executor_argv(tls_cluster.targets(), "no-tls", tmp_path / "no-tls"),
        capture_output=True,
        text=True,
        env=clean,
        timeout=60,
    )
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("raftsched-executor: error: TLS handshake failed with 127.0.0.1:"), done.stderr
    assert "the server requires TLS; pass --tls-ca" in last
    assert took < QUICK_S + 5, f"{took:.1f}s"
