"""A real SMTP server for tests (aiosmtpd, in a thread on loopback) that requires STARTTLS and
AUTH, with a certificate from a CA made for the test (``raftsched.security.certs``)."""

from __future__ import annotations

import datetime as dt
import email
import email.policy
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from raftsched.security.certs import new_ca
from raftsched.testing.cluster import free_ports

USER = "alerts"
PASSWORD = "s3cret-for-the-test"


@dataclass
class Mailbox:
    """What the server took: each message with the login that sent it."""

    host: str
    port: int
    ca_file: Path
    messages: list[tuple[str, EmailMessage]] = field(default_factory=list)
    refused_logins: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def received(self) -> list[EmailMessage]:
        with self.lock:
            return [m for _, m in self.messages]


class _Handler:
    def __init__(self, box: Mailbox) -> None:
        self.box = box

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        login = session.auth_data.login.decode() if isinstance(session.auth_data, LoginPassword) else ""
        msg = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(msg, EmailMessage)
        with self.box.lock:
            self.box.messages.append((login, msg))
        return "250 OK"


@contextmanager
def smtp_server(directory: Path) -> Iterator[Mailbox]:
    """A server on 127.0.0.1 that offers STARTTLS, refuses mail before it and refuses AUTH
    before TLS; the login is :data:`USER` / :data:`PASSWORD`."""
    now = dt.datetime.now(dt.UTC)
    ca = new_ca("smtp test CA", now=now)
    pair = ca.issue("smtp", ["127.0.0.1"], now=now, client=False)
    directory.mkdir(parents=True, exist_ok=True)
    cert, key, ca_file = directory / "smtp.pem", directory / "smtp.key", directory / "ca.pem"
    pair.write(cert, key)
    ca_file.write_bytes(ca.cert_pem)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    [port] = free_ports(1)
    box = Mailbox("127.0.0.1", port, ca_file)

    def authenticate(
        server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        ok = isinstance(data, LoginPassword) and (data.login, data.password) == (
            USER.encode(),
            PASSWORD.encode(),
        )
        if not ok:
            with box.lock:
                box.refused_logins += 1
        return AuthResult(success=ok, handled=False)

    controller = Controller(
        _Handler(box),
        hostname="127.0.0.1",
        port=port,
        tls_context=context,
        require_starttls=True,
        authenticator=authenticate,
        auth_required=True,
        auth_require_tls=True,
    )
    controller.start()
    try:
        yield box
    finally:
        controller.stop()
