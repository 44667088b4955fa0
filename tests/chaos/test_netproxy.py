"""The chaos suite's partition proxies: forward, stall across a cut, deliver after the heal."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from raftsched.testing.chaos.netproxy import ProxyNet
from raftsched.testing.cluster import wait_until


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


@pytest.fixture
def echo() -> Iterator[str]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _dial(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=5)


def _silent(sock: socket.socket, seconds: float = 0.3) -> bool:
    """Nothing arrives within ``seconds`` (asserting an absence needs a bounded wait)."""
    sock.settimeout(seconds)
    try:
        return not sock.recv(1)
    except TimeoutError:
        return True
    finally:
        sock.settimeout(5)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def test_a_link_forwards_stalls_while_cut_and_delivers_after_the_heal(echo: str) -> None:
    with ProxyNet() as net:
        link = net.add("a->b", echo)
        assert link.address.startswith("127.0.0.1:") and link.target == echo
        with _dial(link.address) as s:
            s.sendall(b"hello")
            assert _recv_exactly(s, 5) == b"hello"

            net.cut(["a->b"])
            assert net.is_cut("a->b")
            s.sendall(b"during the cut")
            assert _silent(s), "a byte crossed a cut link"
            with _dial(link.address) as held:  # a new connection is accepted but held silent
                held.sendall(b"held")
                assert _silent(held)

                net.heal()
                assert _recv_exactly(s, 14) == b"during the cut"  # late, as TCP would deliver it
                assert _recv_exactly(held, 4) == b"held"


def test_a_connection_to_a_dead_target_is_closed_and_other_links_are_unaffected(echo: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{probe.getsockname()[1]}"  # bound, never listening: refused
    with ProxyNet() as net:
        to_dead = net.add("x", dead)
        alive = net.add("y", echo)
        net.cut(["x"])
        with _dial(alive.address) as s:
            s.sendall(b"ok")
            assert _recv_exactly(s, 2) == b"ok"
        net.heal(["x"])
        with _dial(to_dead.address) as s:
            s.settimeout(5)
            assert wait_until(lambda: s.recv(1) == b"" or None, 5, 0.05, "the proxy to close the connection")
