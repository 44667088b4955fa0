"""Email over SMTP for ``[[alerts.email]]`` targets: the one module that imports ``smtplib``.

One connection per message: connect, ``EHLO``, ``STARTTLS`` (unless ``starttls = false``; the
server's certificate is verified against the system's CAs or ``ca_file``), ``AUTH`` when a user
is configured, send, quit. Any failure (connection, TLS, a refused login or recipient, timeout)
is :class:`raftsched.alerts.delivery.DeliveryFailed`'s cause: the delivery loop retries it with
backoff like a failed POST. Blocking: the loop runs :func:`send_blocking` in its executor.
"""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from raftsched.alerts.config import EmailTarget


class SendFailed(Exception):
    """The message was not accepted (the reason is the message)."""


def message(target: EmailTarget, subject: str, body: str, alert_id: str, at_ms: int) -> EmailMessage:
    """The mail for one event (``X-Raftsched-Alert-Id`` carries the id receivers dedupe on)."""
    msg = EmailMessage()
    msg["From"] = target.sender
    msg["To"] = ", ".join(target.to)
    msg["Subject"] = subject
    msg["Date"] = formatdate(at_ms / 1000, usegmt=True)
    msg["Message-ID"] = make_msgid(idstring=alert_id.replace("@", "."), domain="raftsched")
    msg["X-Raftsched-Alert-Id"] = alert_id
    msg.set_content(body)
    return msg


def send_blocking(target: EmailTarget, msg: EmailMessage) -> list[str]:
    """Deliver ``msg`` through ``target``'s server; returns the recipients the server refused
    while it took the others (the caller logs them: retrying would repeat the mail to the rest).
    Raises :class:`SendFailed` if no recipient took it."""
    timeout = target.timeout_ms / 1000
    try:
        with smtplib.SMTP(target.host, target.port, timeout=timeout) as smtp:
            smtp.ehlo()
            if target.starttls:
                context = ssl.create_default_context(cafile=target.ca_file or None)
                smtp.starttls(context=context)
                smtp.ehlo()
            if target.user:
                smtp.login(target.user, target.password)
            refused = smtp.send_message(msg)
    except (OSError, smtplib.SMTPException, ssl.SSLError) as exc:
        raise SendFailed(f"{type(exc).__name__}: {exc}") from None
    return sorted(refused)


async def send(target: EmailTarget, msg: EmailMessage) -> list[str]:
    """:func:`send_blocking` in the running loop's default executor."""
    return await asyncio.get_running_loop().run_in_executor(None, send_blocking, target, msg)
