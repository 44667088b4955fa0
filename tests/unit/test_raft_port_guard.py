"""The Raft port guard: refusals logged once per source and kind per period, and shown in status."""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Callable

import pytest
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.tcp_connection import CONNECTION_STATE

from raftsched.consensus.pysyncobj.status import decode_status
from raftsched.consensus.pysyncobj.transport import (
    AUTH_TIMEOUT_S,
    REFUSAL_LOG_EVERY_S,
    REFUSAL_SHOWN_S,
    GuardedServer,
    GuardedTransport,
    RaftPortGuard,
    bind_address,
)
from raftsched.testing.cluster import free_ports


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_refusals_are_rate_limited_per_source_and_kind(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    guard = RaftPortGuard("n1", {"127.0.0.1:7003": "n3"}.get, clock)
    caplog.set_level(logging.WARNING, logger="raftsched.consensus.pysyncobj.transport")
    for port in range(40000, 40010):
        guard.refused(f"10.0.0.9:{port}", f"frame length {port} outside 1..65536 bytes")
    guard.refused("10.0.0.9:41000", "did not authenticate within 3 s")
    guard.refused("127.0.0.1:7003", "peer closed the connection during the handshake", "127.0.0.1:7003")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "n1: raft port refused 10.0.0.9:40000: frame length 40000 outside 1..65536 bytes",
        "n1: raft port refused 10.0.0.9:41000: did not authenticate within 3 s",
        "n1: raft port refused 127.0.0.1:7003 (peer n3): peer closed the connection during the handshake",
    ]
    assert guard.refusals == 12
    clock.now += REFUSAL_LOG_EVERY_S + 1
    guard.refused("10.0.0.9:40100", "frame length 9 outside 1..65536 bytes")
    assert caplog.records[-1].getMessage().endswith("(9 more like it since the last report)")


def test_a_refused_peer_shows_in_status_while_disconnected() -> None:
    clock = FakeClock()
    guard = RaftPortGuard("n1", clock=clock)
    peers = ["127.0.0.1:7002", "127.0.0.1:7003"]
    guard.refused("127.0.0.1:7003", "peer closed the connection during the handshake", "127.0.0.1:7003")
    raw = {"state": 2, "partner_node_status_server_127.0.0.1:7002": 2}
    status = decode_status(raw, peers, guard.refusal_for)
    assert status.peer("127.0.0.1:7002").refused == ""  # connected: never refused
    assert status.peer("127.0.0.1:7003").refused == "peer closed the connection during the handshake"
    clock.now += REFUSAL_SHOWN_S + 1
    assert decode_status(raw, peers, guard.refusal_for).peer("127.0.0.1:7003").refused == ""
    # A refusal from an unidentified connection counts for a disconnected peer on that host.
    guard.refused("127.0.0.1:53211", "garbage or a wrong cluster secret (frame does not decrypt)")
    assert "wrong cluster secret" in guard.refusal_for("127.0.0.1:7003")
    assert decode_status(raw, peers).peer("127.0.0.1:7003").refused == ""


def test_the_bind_address_is_the_configured_one() -> None:
    assert bind_address("127.0.0.1:7001") == "127.0.0.1:7001"
    assert bind_address("[::1]:7001") == "::1:7001"
    assert bind_address("node-a.internal:7001") == "node-a.internal:7001"


class _Conn:
    """A connection as pysyncobj's transport sees it: TCP state and the peer's session key."""

    def __init__(self, send_key: bytes | None) -> None:
        self.state = CONNECTION_STATE.CONNECTED
        self.sendRandKey = send_key
        self.sent: list[object] = []

    def send(self, message: object) -> None:
        self.sent.append(message)


def _transport(conn: _Conn, **others: _Conn) -> GuardedTransport:
    transport: GuardedTransport = GuardedTransport.__new__(GuardedTransport)
    conf = type("C", (), {"connectionTimeout": 3.5})()
    transport._syncObj = type("S", (), {"encryptor": object(), "conf": conf})()
    transport._connections = {"n2": conn, **others}
    transport._nodes = set(transport._connections)
    transport._send_random_sleep_duration = 0
    transport._raftsched_sent_at = {}
    return transport


def test_idle_links_carry_a_keepalive_and_busy_ones_do_not() -> None:
    """pysyncobj closes a link on which nothing was read for connection_timeout when something
    next arrives, dropping that message: between two followers, the first request_vote after the
    leader died (every failover took two terms, tests/integration/test_election_links.py). Every
    link that carried nothing for a quarter of the timeout carries a message pysyncobj ignores."""
    busy, idle, handshaking = _Conn(send_key=b"k" * 32), _Conn(send_key=b"k" * 32), _Conn(send_key=None)
    transport = _transport(busy, n3=idle, n4=handshaking)
    transport._keepalive(100.0)
    assert len(busy.sent) == len(idle.sent) == 1 and handshaking.sent == []
    transport._raftsched_sent_at["n2"] = 100.5  # the leader's append went out meanwhile
    transport._keepalive(100.5)
    assert (len(busy.sent), len(idle.sent), len(handshaking.sent)) == (1, 1, 0)
    handshaking.sendRandKey = b"k" * 32  # its handshake is done
    transport._keepalive(100.9)  # a quarter of 3.5 s after the keepalives: not the busy link
    assert (len(busy.sent), len(idle.sent), len(handshaking.sent)) == (1, 2, 1)


def test_nothing_is_sent_on_a_dialled_connection_before_the_peer_sent_its_session_key() -> None:
    """pysyncobj sends a candidate's request_vote on a connection TCP has just connected; without
    the peer's session key the frame goes out unwrapped and the peer drops the connection
    (seen at cluster start: "raft port refused ...: an authenticated frame does not decode")."""
    handshaking = _Conn(send_key=None)
    assert _transport(handshaking).send("n2", {"type": "request_vote", "term": 1}) is False
    assert handshaking.sent == []  # dropped, as on a link that is down
    ready = _Conn(send_key=b"k" * 32)
    assert _transport(ready).send("n2", {"type": "request_vote", "term": 1}) is True
    assert ready.sent == [{"type": "request_vote", "term": 1}]


class _DialledConn(_Conn):
    def __init__(self) -> None:
        super().__init__(send_key=None)
        self.refused: list[str] = []

    def _refuse(self, why: str) -> None:
        self.refused.append(why)
        self.state = CONNECTION_STATE.DISCONNECTED


def test_a_dialled_connection_whose_peer_never_answers_the_handshake_is_closed() -> None:
    """Nothing is sent before the key exchange, so pysyncobj's own timeout (checked only when
    something is sent or arrives) never fires on it: the transport closes it itself."""
    silent, answered = _DialledConn(), _DialledConn()
    transport = _transport(silent)
    transport._raftsched_dialled_at = {silent: 100.0, answered: 100.0}
    transport._expire_dialled_handshakes(100.0 + AUTH_TIMEOUT_S - 0.1)
    assert silent.refused == [] and answered.refused == []
    answered.sendRandKey = b"k" * 32  # its peer's key arrived
    transport._expire_dialled_handshakes(100.0 + AUTH_TIMEOUT_S + 0.1)
    assert silent.refused == [f"no answer to the handshake within {AUTH_TIMEOUT_S:g} s"]
    assert answered.refused == [] and transport._raftsched_dialled_at == {}


class _Poller:
    def __init__(self) -> None:
        self.subscribed: dict[int, Callable[[int, int], None]] = {}

    def subscribe(self, fd: int, callback: Callable[[int, int], None], events: int) -> None:
        self.subscribed[fd] = callback

    def unsubscribe(self, fd: int) -> None:
        del self.subscribed[fd]


class _FailingAccept:
    """A listening socket whose accept() fails as it does when descriptors run out."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def accept(self) -> object:
        raise OSError(errno.EMFILE, "Too many open files")

    def close(self) -> None:
        self._sock.close()


def _rebinding_transport() -> GuardedTransport:
    """A transport with what :meth:`GuardedTransport._rebind` reads (bindRetryTime 0.5 s)."""
    transport: GuardedTransport = GuardedTransport.__new__(GuardedTransport)
    transport._syncObj = type("S", (), {"conf": type("C", (), {"bindRetryTime": 0.5})()})()
    transport._raftsched_guard = RaftPortGuard("n1")
    transport._raftsched_rebind_at = 0.0
    transport._raftsched_listener_logged_at = None
    transport._raftsched_listener_unlogged = 0
    transport._raftsched_loss_logged = False
    return transport


def test_a_listening_socket_closed_by_a_failed_accept_binds_again(caplog: pytest.LogCaptureFixture) -> None:
    """pysyncobj unbinds its server on any accept() error but EAGAIN and never binds it again once
    ready; the transport names the error and binds it again every bindRetryTime, closing the
    socket of a bind that failed."""
    poller = _Poller()
    server = GuardedServer(poller, "127.0.0.1", 0, onNewConnection=lambda conn: None)
    server._TcpServer__port = free_ports(1)[0]
    server.bind()
    assert server.bound and len(poller.subscribed) == 1
    server._TcpServer__socket = _FailingAccept(server._TcpServer__socket)
    (on_readable,) = poller.subscribed.values()
    on_readable(0, POLL_EVENT_TYPE.READ)
    assert not server.bound and poller.subscribed == {}
    assert server.lost == "its accept handler failed: [Errno 24] Too many open files"

    transport = _rebinding_transport()
    port = server._TcpServer__port
    caplog.set_level(logging.INFO)
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", port))
        squatter.listen(1)  # someone else listens there meanwhile: binding fails
        transport._rebind(server, 100.0)
        assert "n1: the Raft port stopped listening (its accept handler failed: [Errno 24]" in caplog.text
        assert not server.bound  # not before bindRetryTime
        transport._rebind(server, 100.6)
        assert not server.bound and server._TcpServer__socket.fileno() == -1  # closed, not leaked
        # Within REFUSAL_LOG_EVERY_S of the loss's line: counted for the next line, not logged.
        assert "cannot bind" not in caplog.text and transport._raftsched_listener_unlogged == 1
    transport._rebind(server, 100.8)
    assert not server.bound  # the failed attempt set the next one bindRetryTime later
    transport._rebind(server, 101.2)
    assert server.bound and len(poller.subscribed) == 1
    assert "n1: the Raft port is listening again" in caplog.text
    server.lost = "stale"
    server.unbind()
    assert server.lost == "stale"  # a deliberate unbind (not from the accept handler) records nothing
    server.lost = ""


def test_a_listener_that_keeps_closing_is_logged_once_per_period(caplog: pytest.LogCaptureFixture) -> None:
    """Descriptors stay exhausted: each re-bind succeeds on the descriptor the close freed, and the
    next dial closes it again. One warning and one "listening again" per period, then a count."""
    poller = _Poller()
    server = GuardedServer(poller, "127.0.0.1", free_ports(1)[0], onNewConnection=lambda conn: None)
    transport = _rebinding_transport()
    caplog.set_level(logging.INFO)
    server.bind()
    now = 100.0
    for _ in range(10):  # ten losses, a second apart
        server._TcpServer__socket = _FailingAccept(server._TcpServer__socket)
        (on_readable,) = poller.subscribed.values()
        on_readable(0, POLL_EVENT_TYPE.READ)
        transport._rebind(server, now)
        transport._rebind(server, now + 0.6)
        assert server.bound
        now += 1.0
    stopped = [r.getMessage() for r in caplog.records if "stopped listening" in r.getMessage()]
    again = [r.getMessage() for r in caplog.records if "listening again" in r.getMessage()]
    assert len(stopped) == 1 and len(again) == 1
    now = 100.0 + REFUSAL_LOG_EVERY_S + 1
    server._TcpServer__socket = _FailingAccept(server._TcpServer__socket)
    (on_readable,) = poller.subscribed.values()
    on_readable(0, POLL_EVENT_TYPE.READ)
    transport._rebind(server, now)
    assert "(9 more listener events since the last report)" in caplog.records[-1].getMessage()
    transport._rebind(server, now + 0.6)
    assert "listening again" in caplog.records[-1].getMessage()
    server.unbind()
