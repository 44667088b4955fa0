"""Helpers of the console tests: configs whose nodes serve HTTP, and a small cookie-keeping HTTP
session that does not follow redirects (so a test sees each 303 and its Location)."""

from __future__ import annotations

import http.client
import re
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from raftsched.testing.cluster import free_ports

SECRET = "local-cluster-secret-0123456789"


def write_http_config(path: Path, nodes: int, extra: str = "") -> dict[str, str]:
    """A cluster config with ``nodes`` nodes, each with an ``http`` listener; returns node id →
    HTTP address."""
    ports = free_ports(nodes * 3)
    lines = ["[cluster]", 'name = "console"', f'secret = "{SECRET}"', ""]
    http: dict[str, str] = {}
    for i in range(nodes):
        nid = f"n{i + 1}"
        raft, grpc, web = ports[3 * i : 3 * i + 3]
        http[nid] = f"127.0.0.1:{web}"
        lines += [
            "[[nodes]]",
            f'id = "{nid}"',
            f'raft = "127.0.0.1:{raft}"',
            f'grpc = "127.0.0.1:{grpc}"',
            f'http = "{http[nid]}"',
            f'data_dir = "data/{nid}"',
            "",
        ]
    path.write_text("\n".join(lines) + "\n" + extra)
    return http


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    text: str

    @property
    def location(self) -> str:
        return self.headers.get("location", "")


@dataclass
class WebSession:
    """One browser-like client of the console at ``address`` (``host:port``)."""

    address: str
    cookies: dict[str, str] = field(default_factory=dict)
    timeout: float = 30.0

    def request(
        self,
        method: str,
        path: str,
        form: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        host, port = self.address.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=self.timeout)
        sent = dict(headers or {})
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            text = response.read().decode("utf-8", "replace")
            got = {k.lower(): v for k, v in response.getheaders()}
            for value in response.headers.get_all("Set-Cookie") or []:
                name, _, rest = value.partition("=")
                self.cookies[name] = rest.split(";", 1)[0]
            return Reply(response.status, got, text)
        finally:
            conn.close()

    def get(self, path: str, *, live: bool = False) -> Reply:
        return self.request("GET", path, headers={"X-Console-Live": "1"} if live else None)

    def post(self, path: str, form: dict[str, str], headers: dict[str, str] | None = None) -> Reply:
        return self.request("POST", path, form, headers)

    def csrf(self, path: str = "/login") -> str:
        """The CSRF token of this session, read from a form on ``path``."""
        return csrf_of(self.get(path).text)

    def sign_in(self, token: str) -> Reply:
        reply = self.post("/login", {"csrf": self.csrf("/login"), "token": token, "next": "/"})
        assert reply.status == 303, reply.text
        return reply


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m is not None, "no CSRF field on the page"
    return m.group(1)
