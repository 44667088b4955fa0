"""TLS on a node's HTTP listener (``tls.http``): the API over HTTPS with the node's certificate,
``/metrics`` for scrapers with a client certificate only, the console's cookie marked Secure,
and the certificate reloaded on SIGHUP with the gRPC port's."""

from __future__ import annotations

import http.client
import os
import signal
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from raftsched.security.tokens import new_token
from raftsched.testing.cluster import LocalCluster, wait_until
from tests.integration.console_support import write_http_config
from tests.integration.http_api_support import call
from tests.integration.test_tls import Pki, _tls_table
from tests.integration.test_tls import pki as pki

pytestmark = pytest.mark.integration


@dataclass
class TlsNode:
    cluster: LocalCluster
    http: str
    admin: str
    pki: Pki

    def context(self, ca: Path | None = None, client: bool = False) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(ca or self.pki.ca))
        if client:
            ctx.load_cert_chain(str(self.pki.client[0]), str(self.pki.client[1]))
        return ctx


def tls_config(certs: Pki, token_file: str) -> str:
    """``[tls]`` with TLS on the HTTP listener and client certificates for /metrics, and ``[auth]``."""
    return (
        _tls_table(certs, mtls=False)
        + "http = true\nhttp_metrics_client_cert = true\n\n"
        + f'[auth]\nbootstrap_token_file = "{token_file}"\n\n'
        + '[auth.subjects]\n"client" = "viewer"\n'  # the test client certificate's common name
    )


def start_tls_node(base: Path, certs: Pki) -> TlsNode:
    """A one-node cluster process with ``tls_config``, its HTTPS listener answering."""
    base.mkdir(parents=True, exist_ok=True)
    admin = new_token()
    (base / "admin.token").write_text(admin + "\n")
    http = write_http_config(base / "cluster.toml", 1, tls_config(certs, "admin.token"))
    cluster = LocalCluster(base / "cluster.toml", base / "logs", token=admin)
    cluster.start()
    node = TlsNode(cluster, http["n1"], admin, certs)
    try:
        cluster.wait_for_leader(60)

        def serving() -> bool:
            # A leader-gated read: elected is not yet leading, and until its first entry applies
            # the node answers 503 "taking over as leader" (a write right after it failed under load).
            try:
                return (
                    call(node.http, "GET", "/api/v1/tasks", token=admin, context=node.context()).status == 200
                )
            except OSError:
                return False

        wait_until(serving, 60, 0.1, "the HTTPS listener, the admin token and the leader taking over")
    except BaseException:
        cluster.stop()
        raise
    return node


@pytest.fixture
def tls_node(tmp_path: Path, pki: Pki) -> Iterator[TlsNode]:
    node = start_tls_node(tmp_path / "cluster", pki)
    try:
        yield node
    finally:
        node.cluster.stop()


def test_the_api_speaks_tls_only_and_metrics_want_a_client_certificate(tls_node: TlsNode) -> None:
    n = tls_node
    made = call(
        n.http,
        "POST",
        "/api/v1/tasks",
        {"spec": {"name": "tls-task", "trigger": {"manual": {}}, "command": "true"}},
        n.admin,
        context=n.context(),
    )
    assert made.status == 200, made.body
    with pytest.raises((OSError, http.client.HTTPException)):
        call(n.http, "GET", "/api/v1/tasks", token=n.admin)  # plaintext to a TLS port
    with pytest.raises(ssl.SSLError):
        call(n.http, "GET", "/healthz", context=n.context(ca=n.pki.other_ca))  # a CA that did not sign it

    assert call(n.http, "GET", "/metrics", context=n.context()).status == 403
    scraped = call(n.http, "GET", "/metrics", context=n.context(client=True))
    assert scraped.status == 200 and "raftsched_" in str(scraped.body)
    assert call(n.http, "GET", "/healthz", context=n.context()).status == 200  # no certificate needed

    # A client certificate granted a role in [auth.subjects] is a principal here as on gRPC.
    by_cert = call(n.http, "GET", "/api/v1/tasks/tls-task", context=n.context(client=True))
    assert by_cert.status == 200, by_cert.body
    refused = call(n.http, "POST", "/api/v1/tasks/tls-task:trigger", {}, context=n.context(client=True))
    assert refused.status == 403 and refused.body["permission"] == "runs.operate"
    assert "cert:client (role viewer)" in refused.body["detail"]
    assert call(n.http, "GET", "/api/v1/tasks/tls-task", context=n.context()).status == 401

    page = call(n.http, "GET", "/", context=n.context())
    cookie = page.headers.get("set-cookie", "")
    assert "HttpOnly" in cookie and cookie.endswith("; Secure"), cookie


def test_sighup_reloads_the_http_listeners_certificate(tls_node: TlsNode) -> None:
    n = tls_node
    with pytest.raises(ssl.SSLError):
        call(n.http, "GET", "/healthz", context=n.context(ca=n.pki.other_ca))
    rotated = n.pki.dir / "rotated-http"
    rotated.mkdir()
    n.pki.node_from_other_ca.write(rotated / "node.pem", rotated / "node.key")
    os.replace(rotated / "node.key", n.pki.node[1])
    os.replace(rotated / "node.pem", n.pki.node[0])
    pid = n.cluster.procs["n1"].pid
    n.cluster.kill("n1", signal.SIGHUP)

    def rotated_served() -> bool:
        try:
            return call(n.http, "GET", "/healthz", context=n.context(ca=n.pki.other_ca)).status == 200
        except ssl.SSLError:
            return False

    wait_until(rotated_served, 30, 0.1, "the HTTP listener to present the rotated certificate")
    assert n.cluster.procs["n1"].pid == pid and n.cluster.procs["n1"].poll() is None
    with pytest.raises(ssl.SSLError):
        call(n.http, "GET", "/healthz", context=n.context())
