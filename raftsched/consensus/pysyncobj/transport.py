"""The Raft port: pysyncobj's TCP transport, hardened (see ``patches.py`` for the private
members it overrides and reads).

* it binds the configured address (pysyncobj's default is every interface);
* a frame's length prefix is checked before its body is read (at most :data:`MAX_PREAUTH_FRAME`
  bytes until the peer has authenticated, :data:`MAX_FRAME` after), since pysyncobj buffered a
  2 GiB claim on the tick thread (a 16 MiB body stalled it 3 s and forced elections);
* a connection that has not authenticated within :data:`AUTH_TIMEOUT_S` is closed (pysyncobj
  kept idle ones forever);
* every refused peer (garbage, oversized frame, wrong secret, no handshake) is logged with its
  address, at most once per :data:`REFUSAL_LOG_EVERY_S` per address, and shown in ``status``
  (:class:`RaftPortGuard`);
* the listening socket comes back (:class:`GuardedServer`): pysyncobj closes it for good on any
  ``accept()`` error but EAGAIN (EMFILE when the process runs out of descriptors, ENFILE,
  ENOBUFS, ECONNABORTED) or a poll error on it, and binds only until it is first ready; the node
  went on leading or following over the connections it had, while every peer that dials it was
  refused until it restarted. The transport logs why it closed and binds it again from its tick;
* the leader's ``append_entries`` and the follower's reply carry a clock stamp (:data:`CLOCK_KEY`,
  :mod:`raftsched.clockwatch`).
"""

from __future__ import annotations

import errno
import logging
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

import pysyncobj.pickle as _pysyncobj_pickle
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection
from pysyncobj.tcp_server import SERVER_STATE, TcpServer
from pysyncobj.transport import TCPTransport

log = logging.getLogger(__name__)


MAX_PREAUTH_FRAME = 64 << 10
"""Largest frame accepted before the peer has authenticated (the handshake needs ~200 bytes)."""
MAX_FRAME = 64 << 20
"""Largest frame accepted from an authenticated peer (entries stay below 64 KB; snapshot chunks too)."""
AUTH_TIMEOUT_S = 3.0
"""A connection that has not completed the handshake within this many seconds is closed."""
CLOCK_KEY = "raftsched_clock"  # the clock stamp's key in pysyncobj messages (see GuardedTransport.send)
KEEPALIVE = {"type": "raftsched_keepalive"}  # a message pysyncobj ignores (see GuardedTransport._keepalive)
REFUSAL_LOG_EVERY_S = 30.0
"""A refused address is logged at most once per this many seconds."""
REFUSAL_SHOWN_S = 30.0
"""For this long after a refusal, a disconnected peer shows as refused in ``status``."""

_FRAME_HEADER = struct.Struct("i")  # pysyncobj's: native-endian signed 32-bit length
pickle_loads: Callable[[bytes], Any] = _pysyncobj_pickle.loads
"""pysyncobj's own unpickler (frames, and its journal's meta file): never used on our formats."""


class RaftPortGuard:
    """Refusals on the Raft port: logged (rate-limited, per address) and kept for ``status``.

    Called on the tick thread; :meth:`refusal_for` may be called from any thread.
    """

    def __init__(
        self,
        node_id: str,
        name_of: Callable[[str], str | None] = lambda _addr: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.node_id = node_id
        self._name_of = name_of
        self._clock = clock
        self._lock = threading.Lock()
        # (source, kind) -> (when last logged, how many were not logged since)
        self._logged: dict[tuple[str, str], tuple[float | None, int]] = {}
        self._by_node: dict[str, tuple[float, str]] = {}  # peer raft address -> (when, why)
        self._by_host: dict[str, tuple[float, str]] = {}  # source host -> (when, why)
        self.refusals = 0

    def refused(self, address: str, why: str, node: str | None = None) -> None:
        """Record that ``address`` (``host:port`` it came from or was dialled at) was refused;
        ``node`` is the configured peer address when the connection is known to be to it."""
        now = self._clock()
        with self._lock:
            self.refusals += 1
            if node is not None:
                self._by_node[node] = (now, why)
            else:
                self._by_host[address.rsplit(":", 1)[0]] = (now, why)
            # One line per source and kind of refusal per period: a flood from one host (or a
            # misconfigured peer retrying every second) cannot flood the log.
            key = (node or _host_of(address), _kind(why))
            last, suppressed = self._logged.get(key, (None, 0))
            if last is not None and now - last < REFUSAL_LOG_EVERY_S:
                self._logged[key] = (last, suppressed + 1)
                return
            self._logged[key] = (now, 0)
        more = f" ({suppressed} more like it since the last report)" if suppressed else ""
        name = self._name_of(node) if node else None
        peer = f" (peer {name})" if name else ""
        log.warning("%s: raft port refused %s%s: %s%s", self.node_id, address, peer, why, more)

    def refusal_for(self, peer: str) -> str:
        """Why ``peer`` (a configured raft address) was refused lately, or "". A refusal from an
        unidentified connection counts for a peer on the same host."""
        now = self._clock()
        with self._lock:
            found = [r for r in (self._by_node.get(peer), self._by_host.get(_host_of(peer))) if r]
        seen = max(found) if found else None
        if seen is None or now - seen[0] > REFUSAL_SHOWN_S:
            return ""
        return seen[1]


def _kind(why: str) -> str:
    """A refusal's kind: its text without digits, so lengths and ports do not make new kinds."""
    return "".join(c for c in why if not c.isdigit())


def _host_of(address: str) -> str:
    return address.rsplit(":", 1)[0].strip("[]")


class GuardedConnection(TcpConnection):  # type: ignore[misc]
    """pysyncobj's TcpConnection with a bounded frame size, a linear read buffer and a report of
    every frame it refuses (patches.py: frame-guard). Made by changing an accepted or dialling
    connection's class (see :class:`GuardedTransport`); the attributes below are set there."""

    _TcpConnection__readBuffer: Any  # pysyncobj's attributes, untyped there
    _TcpConnection__socket: Any
    _TcpConnection__recvBufferSize: int
    recvLastTimestamp: Any
    _raftsched_guard: RaftPortGuard
    _raftsched_address: str = "?"  # where the other end is
    _raftsched_node: str | None = None  # the configured peer, when known
    _raftsched_authed = False  # completed the handshake

    _raftsched_dialled = False  # an outgoing connection that reached the peer
    _raftsched_refusing = False  # this side is closing it as refused

    def _refuse(self, why: str) -> None:
        self._raftsched_guard.refused(self._raftsched_address, why, self._raftsched_node)
        self._raftsched_refusing = True
        self.disconnect()

    def _TcpConnection__processRead(self) -> bool:
        try:
            incoming = self._TcpConnection__socket.recv(self._TcpConnection__recvBufferSize)
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                self.disconnect()
            return False
        if not incoming:
            self.disconnect()
            return False
        buf = self._TcpConnection__readBuffer
        if not isinstance(buf, bytearray):  # pysyncobj resets it to bytes(); += on bytes is quadratic
            buf = bytearray(buf)
            self._TcpConnection__readBuffer = buf
        buf += incoming
        if len(buf) >= _FRAME_HEADER.size:
            size = _FRAME_HEADER.unpack_from(buf)[0]
            limit = MAX_FRAME if self._raftsched_authed else MAX_PREAUTH_FRAME
            if not 0 < size <= limit:
                self._refuse(f"frame length {size} outside 1..{limit} bytes")
                return False
        return True

    def _TcpConnection__processParseMessage(self) -> Any:
        buf = self._TcpConnection__readBuffer
        if len(buf) < _FRAME_HEADER.size:
            return None
        size = _FRAME_HEADER.unpack_from(buf)[0]
        limit = MAX_FRAME if self._raftsched_authed else MAX_PREAUTH_FRAME
        if not 0 < size <= limit:
            self._refuse(f"frame length {size} outside 1..{limit} bytes")
            return None
        if len(buf) - _FRAME_HEADER.size < size:
            return None
        data = bytes(buf[_FRAME_HEADER.size : _FRAME_HEADER.size + size])
        try:
            if self.encryptor:
                stamp = self.encryptor.extract_timestamp(data)
                if stamp < self.recvLastTimestamp:
                    raise ValueError("replayed frame")
                self.recvLastTimestamp = stamp
                data = self.encryptor.decrypt(data)
        except Exception:
            why = "garbage or a wrong cluster secret (frame does not decrypt)"
            self._refuse(why if not self._raftsched_authed else "a frame does not decrypt")
            return None
        try:
            message = pickle_loads(zlib.decompress(data))
            if self.recvRandKey:
                rand_key, message = message
                if rand_key != self.recvRandKey:
                    raise ValueError("session key mismatch")
        except Exception:
            self._refuse("an authenticated frame does not decode")
            return None
        del buf[: _FRAME_HEADER.size + size]
        return message


class GuardedServer(TcpServer):  # type: ignore[misc]
    """pysyncobj's listening socket, remembering why it closed itself (patches.py: listener-rebind).

    pysyncobj's accept handler unbinds the server on any ``accept()`` error but EAGAIN and on a
    poll error, and nothing binds it again once the transport was ready: :class:`GuardedTransport`
    does, from its tick. ``lost`` is the reason of the last such close ("" when the server was
    unbound by a deliberate :meth:`unbind`, or is bound)."""

    _raftsched_accepting = False
    lost = ""

    def _TcpServer__onNewConnection(self, descr: int, event: int) -> None:
        # bind() subscribes self.__onNewConnection, which resolves to this override.
        self._raftsched_accepting = True
        try:
            TcpServer._TcpServer__onNewConnection(self, descr, event)
        finally:
            self._raftsched_accepting = False

    def unbind(self) -> None:
        if self._raftsched_accepting:
            # Called from the handler's ``except socket.error`` clause (the error is the one
            # being handled), or for a poll error on the socket (no error being handled).
            error = sys.exc_info()[1]
            # pysyncobj's except clause also covers the accepted socket's setsockopt calls and
            # the new-connection callback, so this is "the handler", not always accept() itself.
            self.lost = (
                f"its accept handler failed: {error}"
                if error
                else "the poller reported an error on the socket"
            )
        super().unbind()

    @property
    def bound(self) -> bool:
        return bool(self._TcpServer__state == SERVER_STATE.BINDED)

    def rebind(self) -> None:
        """Bind again; raises OSError (and leaves no socket open) when that fails."""
        try:
            self.bind()
        except OSError:
            sock = self._TcpServer__socket
            if sock is not None:
                sock.close()  # pysyncobj's bind() leaves a socket it could not bind open
            raise
        self.lost = ""


class GuardedTransport(TCPTransport):  # type: ignore[misc]
    """pysyncobj's TCP transport with :class:`GuardedConnection` for every connection, a
    handshake deadline for incoming ones, and refusals reported to the node's guard (patches.py:
    transport-guard)."""

    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any) -> None:
        self._raftsched_guard: RaftPortGuard = syncObj._raftsched_guard
        self._raftsched_since: dict[Any, float] = {}
        self._raftsched_dialled_at: dict[Any, float] = {}  # dialled, the peer's key not yet in
        self._raftsched_closed = False
        self._raftsched_rebind_at = 0.0  # when the lost listening socket is bound again next
        self._raftsched_listener_logged_at: float | None = None  # the last listener line logged
        self._raftsched_listener_unlogged = 0  # listener events not logged since (rate limit)
        self._raftsched_loss_logged = False  # "listening again" follows a logged loss
        self._raftsched_sent_at: dict[Any, float] = {}  # peer -> when a message last went to it
        super().__init__(syncObj, selfNode, otherNodes)

    def _createServer(self) -> None:
        super()._createServer()
        self._server.__class__ = GuardedServer

    def destroy(self) -> None:
        self._raftsched_closed = True
        super().destroy()

    def _guard(self, conn: Any, address: str, node: str | None) -> None:
        conn.__class__ = GuardedConnection
        conn._raftsched_guard = self._raftsched_guard
        conn._raftsched_address = address
        conn._raftsched_node = node
        conn._raftsched_authed = False

    def addNode(self, node: Any) -> None:
        super().addNode(node)
        conn = self._connections.get(node)
        if conn is not None:
            self._guard(conn, str(node.address), str(node.address))

    def _onNewIncomingConnection(self, conn: Any) -> None:
        try:
            host, port = conn._TcpConnection__socket.getpeername()[:2]
            address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        except OSError:
            address = "?"
        self._guard(conn, address, None)
        self._raftsched_since[conn] = time.monotonic()
        super()._onNewIncomingConnection(conn)

    def _onIncomingMessageReceived(self, conn: Any, message: Any) -> None:
        handshake = bool(self._syncObj.encryptor) and not conn.sendRandKey
        super()._onIncomingMessageReceived(conn, message)
        if handshake or conn.state == CONNECTION_STATE.DISCONNECTED:
            if conn.state == CONNECTION_STATE.DISCONNECTED and not handshake:
                self._raftsched_since.pop(conn, None)
                self._raftsched_guard.refused(conn._raftsched_address, "not a configured peer")
            return
        if conn not in self._unknownConnections:  # identified as a peer (or a utility client)
            self._raftsched_since.pop(conn, None)
            conn._raftsched_authed = True
            node = self._connToNode(conn)
            if node is not None and node in self._nodes:
                conn._raftsched_node = str(node.address)

    def send(self, node: Any, message: Any) -> bool:
        """pysyncobj's send, except on a connection whose key exchange is not finished.

        pysyncobj counts a dialled connection as open once TCP connects, before the peer's
        session key has arrived, and sends a ``request_vote`` to every member (an election),
        ``apply_command`` to the leader or ``timeout_now`` on it: without the key such a frame
        goes out without the session key the peer now expects, and the peer drops the
        connection as garbage ("an authenticated frame does not decode"), a peer's first
        connection lost to its own election. Such a message is dropped here instead, as on a
        link that is down (``False``, which pysyncobj treats as not sent); the handshake then
        completes and the next message goes through."""
        conn = self._connections.get(node)
        if conn is not None and self._syncObj.encryptor and not conn.sendRandKey:
            return False
        # Every message to a peer passes here on the tick thread. The leader's append_entries
        # and the follower's reply (next_node_idx) carry a clock stamp (raftsched.clockwatch):
        # the leader gets each follower's clock with the round trip halved, each follower its
        # offset and skew, for the price of a small tuple on messages Raft sends anyway.
        # pysyncobj reads only the keys it knows, so a peer of an older build ignores it.
        # (syncobj.py builds these dicts in _sendAppendEntries and __sendNextNodeIdx; shown by
        # tests/unit/test_raft_membership.py::test_clock_stamps_ride_on_appends_and_their_replies
        # and, end to end, tests/integration/test_clock_step.py.)
        if isinstance(message, dict):
            kind = message.get("type")
            if kind == "append_entries" or kind == "next_node_idx":
                try:
                    stamp = self._syncObj._raftsched_clock_stamp(str(node.address), kind)
                except Exception:  # never let a measurement break replication
                    log.exception("clock stamp failed")
                    stamp = None
                if stamp is not None:
                    message[CLOCK_KEY] = stamp
        sent = bool(super().send(node, message))
        if sent:
            self._raftsched_sent_at[node] = time.monotonic()
        return sent

    def _onOutgoingConnected(self, conn: Any) -> None:
        conn._raftsched_authed = False
        conn._raftsched_dialled = True
        if self._syncObj.encryptor:  # without one there is no key exchange to wait for
            self._raftsched_dialled_at[conn] = time.monotonic()
        super()._onOutgoingConnected(conn)

    def _onOutgoingMessageReceived(self, conn: Any, message: Any) -> None:
        conn._raftsched_authed = True
        self._raftsched_dialled_at.pop(conn, None)
        super()._onOutgoingMessageReceived(conn, message)

    def _onDisconnected(self, conn: Any) -> None:
        self._raftsched_since.pop(conn, None)
        self._raftsched_dialled_at.pop(conn, None)
        node = getattr(conn, "_raftsched_node", None)
        if (
            node is not None
            and self._syncObj.encryptor
            and getattr(conn, "_raftsched_dialled", False)
            and not conn._raftsched_authed
            and not conn._raftsched_refusing
        ):
            # The peer accepted the TCP connection, then closed it without answering the
            # handshake: it refused our secret (or is not a raftsched node).
            self._raftsched_guard.refused(node, "peer closed the connection during the handshake", node)
        if isinstance(conn, GuardedConnection):
            conn._raftsched_dialled = conn._raftsched_refusing = conn._raftsched_authed = False
        super()._onDisconnected(conn)

    def _onTick(self) -> None:
        super()._onTick()
        now = time.monotonic()
        self._keepalive(now)
        server = self._server
        if self._ready and server is not None and not server.bound and not self._raftsched_closed:
            self._rebind(server, now)
        if self._raftsched_dialled_at:
            self._expire_dialled_handshakes(now)
        if not self._raftsched_since:
            return
        for conn, since in list(self._raftsched_since.items()):
            if conn not in self._unknownConnections:
                self._raftsched_since.pop(conn, None)
            elif now - since > AUTH_TIMEOUT_S:
                self._raftsched_since.pop(conn, None)
                self._unknownConnections.discard(conn)
                conn._refuse(f"did not authenticate within {AUTH_TIMEOUT_S:g} s")

    def _keepalive(self, now: float) -> None:
        """Send :data:`KEEPALIVE` to every connected peer nothing was sent to for a quarter of
        ``connection_timeout``.

        pysyncobj closes a connection when something arrives on it (or is sent) after nothing was
        read from it for ``connection_timeout``, before reading what arrived. Two followers send
        each other nothing while a leader lives, so the first request_vote between them after a
        leader's death or stall was dropped with the connection, on both sides: the candidate
        got no vote, the other follower timed out in the same term (a split vote), and the
        election took a second election timeout (measured: new leader 1.1-1.7 s after a SIGSTOP
        instead of 0.4-1.4 s, tests/integration/test_stall_overlap.py). With a message both ways
        every quarter of the timeout, every link stays open; links in use (the leader's appends,
        the followers' replies) carry no extra message."""
        every = self._syncObj.conf.connectionTimeout / 4
        for node in list(self._nodes):
            conn = self._connections.get(node)
            if (
                conn is None
                or conn.state != CONNECTION_STATE.CONNECTED
                or now - self._raftsched_sent_at.get(node, 0.0) < every
            ):
                continue
            self.send(node, dict(KEEPALIVE))  # False before the handshake: tried again later
            self._raftsched_sent_at[node] = now

    def _rebind(self, server: GuardedServer, now: float) -> None:
        """Bind the listening socket pysyncobj closed after an error, every ``bindRetryTime``.

        While descriptors stay exhausted, the bind fails (EMFILE), or it succeeds on the descriptor
        the close freed and the next peer's dial closes the socket again: a loss and a failed bind
        are logged at most once per :data:`REFUSAL_LOG_EVERY_S` (with a count of the others), and
        "listening again" follows each loss that was logged."""
        if server.lost:
            self._raftsched_loss_logged = self._listener_log(
                now, logging.WARNING, "the Raft port stopped listening (%s); binding it again", server.lost
            )
            server.lost = ""
            self._raftsched_rebind_at = now + self._syncObj.conf.bindRetryTime
        if now < self._raftsched_rebind_at:
            return
        try:
            server.rebind()
        except OSError as exc:
            self._raftsched_rebind_at = now + self._syncObj.conf.bindRetryTime
            self._listener_log(now, logging.WARNING, "cannot bind the Raft port again yet: %s", exc)
            return
        if self._raftsched_loss_logged:
            self._raftsched_loss_logged = False
            log.info("%s: the Raft port is listening again", self._raftsched_guard.node_id)

    def _listener_log(self, now: float, level: int, message: str, *args: object) -> bool:
        """Log a listener event unless one was logged less than :data:`REFUSAL_LOG_EVERY_S` ago
        (then count it for the next line); True if it was logged."""
        last = self._raftsched_listener_logged_at
        if last is not None and now - last < REFUSAL_LOG_EVERY_S:
            self._raftsched_listener_unlogged += 1
            return False
        more = self._raftsched_listener_unlogged
        self._raftsched_listener_logged_at, self._raftsched_listener_unlogged = now, 0
        suffix = f" ({more} more listener events since the last report)" if more else ""
        log.log(level, "%s: " + message + suffix, self._raftsched_guard.node_id, *args)
        return True

    def _expire_dialled_handshakes(self, now: float) -> None:
        """Close a dialled connection whose peer has not answered the handshake within
        :data:`AUTH_TIMEOUT_S`; it is dialled again after ``connection_retry_time``.

        pysyncobj checks a connection's timeout only when something arrives on it or is sent on
        it, and :meth:`send` sends nothing before the key exchange: a peer that accepted the
        connection and then went silent (a paused process, a proxy that holds a connection
        open while its far side is unreachable) would keep this link dead for good."""
        for conn, since in list(self._raftsched_dialled_at.items()):
            if conn.sendRandKey or conn.state == CONNECTION_STATE.DISCONNECTED:
                self._raftsched_dialled_at.pop(conn, None)
            elif now - since > AUTH_TIMEOUT_S:
                self._raftsched_dialled_at.pop(conn, None)
                conn._refuse(f"no answer to the handshake within {AUTH_TIMEOUT_S:g} s")


def bind_address(self_addr: str) -> str:
    """pysyncobj's ``bindAddress`` for our Raft address (it wants IPv6 hosts without brackets)."""
    host, port = self_addr.rsplit(":", 1)
    return f"{host.strip('[]')}:{port}"
