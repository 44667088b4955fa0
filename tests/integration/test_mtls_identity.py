"""Identity by client certificate, end to end: under mutual TLS with ``[auth.subjects]``, a
certificate's common name is the principal. An executor registers with its certificate alone and
runs work; an admin certificate writes without a token; a certificate no role is granted to gets
nothing; and another principal cannot take over the certificate-bound executor name."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import grpc
import pytest

from raftsched.client import Client
from raftsched.errors import Unauthenticated
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.security.certs import new_ca
from raftsched.security.tls import TlsConfig
from raftsched.security.tokens import new_token
from raftsched.testing.cluster import wait_until
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc
from tests.integration.conftest import ClusterFactory
from tests.support.procs import executor_argv, start_executor

pytestmark = pytest.mark.integration

NOW = dt.datetime.now(dt.UTC)  # gRPC checks certificates against the real clock


def test_certificate_subjects_are_principals(make_cluster: ClusterFactory, tmp_path: Path) -> None:
    pki = tmp_path / "pki"
    pki.mkdir()
    ca = new_ca("test CA", now=NOW)
    (pki / "ca.pem").write_bytes(ca.cert_pem)
    ca.issue("node", ["127.0.0.1", "localhost"], now=NOW).write(pki / "node.pem", pki / "node.key")
    for cn in ("worker-cert", "ops", "stranger"):
        ca.issue(cn, now=NOW, server=False).write(pki / f"{cn}.pem", pki / f"{cn}.key")
    base = tmp_path / "cluster"
    base.mkdir()
    admin = new_token()
    (base / "admin.token").write_text(admin + "\n")
    config = (
        f'[tls]\ncert_file = "{pki / "node.pem"}"\nkey_file = "{pki / "node.key"}"\n'
        f'ca_file = "{pki / "ca.pem"}"\nrequire_client_cert = true\n'
        '[auth]\nbootstrap_token_file = "admin.token"\n'
        '[auth.subjects]\n"worker-cert" = "executor"\n"ops" = "admin"\n'
    )
    cluster = make_cluster(extra_config=config, start=False)
    cluster.token = admin
    cluster.start()
    cluster.wait_for_leader(60)

    def tls(cn: str) -> TlsConfig:
        return TlsConfig(pki / "ca.pem", pki / f"{cn}.pem", pki / f"{cn}.key")

    marker = tmp_path / "ran.txt"
    # An admin certificate writes without any token.
    with Client(cluster.targets(), tls=tls("ops")) as ops:
        ops.add_task(TaskSpec("hello", ManualTrigger(), command=f"echo hi >> {marker}"))
        # A certificate the configuration grants nothing to is not a principal.
        with (
            Client(cluster.targets(), tls=tls("stranger"), timeout=5) as stranger,
            pytest.raises(Unauthenticated),
        ):
            stranger.list_tasks()

        # A real executor process that authenticates with its certificate alone.
        env = {k: v for k, v in os.environ.items() if k != "RAFTSCHED_TOKEN"}
        proc = start_executor(
            executor_argv(
                cluster.targets(),
                "worker",
                tmp_path / "worker",
                "--tls-ca",
                str(pki / "ca.pem"),
                "--tls-cert",
                str(pki / "worker-cert.pem"),
                "--tls-key",
                str(pki / "worker-cert.key"),
                slots=2,
            ),
            cluster.log_dir / "worker.log",
            env=env,
        )
        try:
            run = ops.trigger("hello")
            wait_until(
                lambda: any(r.state == pb.SUCCEEDED for r in ops.runs("hello") if r.run_id == run.run_id),
                60,
                0.1,
                "the run to succeed on the certificate-authenticated executor",
            )
            registers = [r for r in ops.audit() if r.rpc.endswith("/Register") and r.target == "worker"]
            assert registers and registers[0].principal == "cert:worker-cert"

            # Another principal (an executor token over another certificate) cannot take the name.
            executor_token, _ = ops.create_token("executor")
            leader = cluster.grpc_of(cluster.wait_for_leader())
            creds = grpc.ssl_channel_credentials(
                (pki / "ca.pem").read_bytes(),
                (pki / "stranger.key").read_bytes(),
                (pki / "stranger.pem").read_bytes(),
            )
            with grpc.secure_channel(leader, creds) as channel:
                stub = pb_grpc.ExecutorServiceStub(channel)
                md = [("authorization", f"Bearer {executor_token}")]
                for call, request in (
                    (stub.Register, pb.RegisterRequest(name="worker", slots=10)),
                    (stub.Leave, pb.LeaveRequest(name="worker")),
                ):
                    with pytest.raises(grpc.RpcError) as refused:
                        call(request, metadata=md, timeout=10)
                    assert refused.value.code() in {
                        grpc.StatusCode.PERMISSION_DENIED,
                        grpc.StatusCode.UNAUTHENTICATED,
                    }, refused.value
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert marker.read_text().strip() == "hi"
