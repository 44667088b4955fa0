"""A small HTTP/JSON client for the API tests: one request, no redirect following, JSON decoded."""

from __future__ import annotations

import http.client
import json
import ssl
from dataclasses import dataclass
from typing import Any


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any

    @property
    def location(self) -> str:
        return self.headers.get("location", "")


def call(
    address: str,
    method: str,
    path: str,
    body: Any = None,
    token: str | None = None,
    headers: dict[str, str] | None = None,
    context: ssl.SSLContext | None = None,
    timeout: float = 30.0,
) -> Answer:
    """``method path`` on ``address`` (``host:port``); over TLS when ``context`` is given."""
    host, port = address.rsplit(":", 1)
    conn: http.client.HTTPConnection
    if context is not None:
        conn = http.client.HTTPSConnection(host, int(port), timeout=timeout, context=context)
    else:
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    sent = dict(headers or {})
    if token:
        sent["Authorization"] = f"Bearer {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        sent["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=sent)
        response = conn.getresponse()
        raw = response.read()
        got = {k.lower(): v for k, v in response.getheaders()}
    finally:
        conn.close()
    try:
        decoded = json.loads(raw) if raw else None
    except ValueError:
        decoded = raw.decode("utf-8", "replace")
    return Answer(response.status, got, decoded)
