"""The consensus adapter: the only module in raftsched that imports pysyncobj.

Decisions forced by pysyncobj (docs/architecture.md, "Facts about the libraries"):

* ONE replicated entry point, ``_raftsched_apply(data: bytes)``; ``data`` is our protobuf command.
  pysyncobj numbers replicated methods by sorted name, so a single stable name can never break a
  stored journal;
* batch mode with short periods and callbacks; nothing here blocks on ``sync=True``;
* a cluster secret is mandatory: without pysyncobj's ``password`` the Raft port accepts pickle
  from anyone (remote code execution);
* a custom snapshot serializer that copies LMDB (no fork, so no clash with gRPC threads); the
  snapshot file's header is JSON, never pickle. The copy runs on a thread of its own
  (pysyncobj's ``serializeChecker`` protocol): on the tick thread, a 1M-task copy (~1 s) stalled
  heartbeats past the election timeout (bench/scale.py: 14 stalls, 4 elections per run);
* the SyncObj is built on the calling thread, which must be the main thread and stay alive (the
  tick thread exits when its constructing thread does);
* a guard against a pysyncobj Raft safety bug (0.3.17, ``SyncObj.__onMessageReceived``): an
  ``append_entries`` message that carries no ``prevLogIdx`` - a snapshot chunk, or the empty
  message sent while the leader's snapshot is not ready - still makes the follower raise its
  commit index to ``min(leader's commit index, own log end)``, although nothing checked that
  its log matches the leader's. A deposed leader that appended entries while partitioned then
  *commits and applies its own uncommitted entries* when the new leader starts sending it a
  snapshot (the chaos suite's 5-node soak: a FireBatch of epoch 92 applied on the old leader
  only, while the cluster fired the same second in epoch 93; replicas diverged). The guard caps
  such a message's ``commit_index`` at the follower's own; a verified ``append_entries`` (with
  ``prevLogIdx``) raises it a heartbeat later;
* the Raft port is hardened (:class:`_GuardedTransport`, :class:`_GuardedConnection`): it binds
  the configured address (pysyncobj's default is every interface); a frame's length prefix is
  checked before its body is read (at most :data:`MAX_PREAUTH_FRAME` bytes until the peer has
  authenticated, :data:`MAX_FRAME` after), since pysyncobj buffered a 2 GiB claim on the tick
  thread (a 16 MiB body stalled it 3 s and forced elections); a connection that has not
  authenticated within :data:`AUTH_TIMEOUT_S` is closed (pysyncobj kept idle ones forever); and
  every refused peer (garbage, oversized frame, wrong secret, no handshake) is logged with its
  address, at most once per :data:`REFUSAL_LOG_EVERY_S` per address, and shown in ``status``;
* the listening socket comes back (:class:`_GuardedServer`): pysyncobj closes it for good on any
  ``accept()`` error but EAGAIN (EMFILE when the process runs out of descriptors, ENFILE,
  ENOBUFS, ECONNABORTED) or a poll error on it, and binds only until it is first ready; the node
  went on leading or following over the connections it had, while every peer that dials it was
  refused until it restarted. The transport logs why it closed and binds it again from its tick.
* no linearizable read is possible through pysyncobj's own API (no ReadIndex, no lease: a leader
  cut off from its followers keeps ``_isLeader()`` for ``leaderFallbackTimeout``). Reads are
  made linearizable above this module by a read barrier through the one entry point
  (:meth:`PySyncObjNode.propose_barrier`, :mod:`raftsched.leader.reads`); pysyncobj's
  ``__lastResponseTime`` is read only to *report* how recently a majority answered
  (``RaftStatus.contact_age_ms``), never to decide whether to answer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import logging
import os
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import pysyncobj.pickle as _pysyncobj_pickle
from pysyncobj import FAIL_REASON, SERIALIZER_STATE, SyncObj, SyncObjConf, SyncObjException, replicated
from pysyncobj.node import TCPNode
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection
from pysyncobj.tcp_server import SERVER_STATE, TcpServer
from pysyncobj.transport import TCPTransport

from raftsched.abc import (
    ROLES,
    BarrierCallback,
    CommitHook,
    FormatTooNew,
    Leadership,
    PeerStatus,
    ProposeCallback,
    ProposeError,
    RaftStatus,
)
from raftsched.clockwatch import ClockWatch
from raftsched.config import RaftTuning
from raftsched.consensus.applier import Applier
from raftsched.errors import CannotStart, SnapshotFormatError, StoreDamaged
from raftsched.logfields import leadership_fields

log = logging.getLogger(__name__)


class _NoBindTraceback(logging.Filter):
    """pysyncobj logs a traceback when its Raft port cannot be bound; PySyncObjNode raises
    CannotStart naming the address instead, so that record is dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "failed to perform initialization"


logging.getLogger("pysyncobj.syncobj").addFilter(_NoBindTraceback())

_FAIL_CODES = {
    FAIL_REASON.QUEUE_FULL: "unavailable",
    FAIL_REASON.MISSING_LEADER: "unavailable",
    FAIL_REASON.DISCARDED: "unavailable",
    FAIL_REASON.NOT_LEADER: "not_leader",
    FAIL_REASON.LEADER_CHANGED: "unavailable",
    FAIL_REASON.REQUEST_DENIED: "unavailable",
    FAIL_REASON.UNKNOWN_OUTCOME: "unavailable",
}

_SNAPSHOT_MAGIC = b"RSNAP1\n"
_RAFT_STATES = dict(enumerate(ROLES))  # pysyncobj's _RAFT_STATE values
_CONNECTED = 2  # getStatus()'s partner_node_status_server_<addr> value for a live connection


MAX_PREAUTH_FRAME = 64 << 10
"""Largest frame accepted before the peer has authenticated (the handshake needs ~200 bytes)."""
MAX_FRAME = 64 << 20
"""Largest frame accepted from an authenticated peer (entries stay below 64 KB; snapshot chunks too)."""
AUTH_TIMEOUT_S = 3.0
CLOCK_KEY = "raftsched_clock"  # the clock stamp's key in pysyncobj messages (see _GuardedTransport.send)
"""A connection that has not completed the handshake within this many seconds is closed."""
KEEPALIVE = {"type": "raftsched_keepalive"}  # a message pysyncobj ignores (see _GuardedTransport._keepalive)
REFUSAL_LOG_EVERY_S = 30.0
"""A refused address is logged at most once per this many seconds."""
REFUSAL_SHOWN_S = 30.0
"""For this long after a refusal, a disconnected peer shows as refused in ``status``."""

_FRAME_HEADER = struct.Struct("i")  # pysyncobj's: native-endian signed 32-bit length
_pickle_loads: Callable[[bytes], Any] = _pysyncobj_pickle.loads


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


class _GuardedConnection(TcpConnection):  # type: ignore[misc]
    """pysyncobj's TcpConnection with a bounded frame size, a linear read buffer and a report of
    every frame it refuses. Made by changing an accepted or dialling connection's class (see
    :class:`_GuardedTransport`); the attributes below are set there."""

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
            message = _pickle_loads(zlib.decompress(data))
            if self.recvRandKey:
                rand_key, message = message
                if rand_key != self.recvRandKey:
                    raise ValueError("session key mismatch")
        except Exception:
            self._refuse("an authenticated frame does not decode")
            return None
        del buf[: _FRAME_HEADER.size + size]
        return message


class _GuardedServer(TcpServer):  # type: ignore[misc]
    """pysyncobj's listening socket, remembering why it closed itself.

    pysyncobj's accept handler unbinds the server on any ``accept()`` error but EAGAIN and on a
    poll error, and nothing binds it again once the transport was ready: :class:`_GuardedTransport`
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


class _GuardedTransport(TCPTransport):  # type: ignore[misc]
    """pysyncobj's TCP transport with :class:`_GuardedConnection` for every connection, a
    handshake deadline for incoming ones, and refusals reported to the node's guard."""

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
        self._server.__class__ = _GuardedServer

    def destroy(self) -> None:
        self._raftsched_closed = True
        super().destroy()

    def _guard(self, conn: Any, address: str, node: str | None) -> None:
        conn.__class__ = _GuardedConnection
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
        if isinstance(conn, _GuardedConnection):
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

    def _rebind(self, server: _GuardedServer, now: float) -> None:
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


class _Raft(SyncObj):  # type: ignore[misc]
    """The SyncObj subclass. Its only replicated method hands bytes to the applier."""

    _raftsched_votes_after: int | None = None  # see _raftsched_may_vote (set in __init__)

    def __init__(
        self,
        enqueue: Callable[[int, bytes], None],
        *args: Any,
        guard: RaftPortGuard | None = None,
        hold: Callable[[], bool] | None = None,
        leader_heard: Callable[[], None] | None = None,
        clock_stamp: Callable[[str, str], tuple[Any, ...] | None] | None = None,
        clock_heard: Callable[[str, str, Any], None] | None = None,
        rebuilding: bool = False,
        **kwargs: Any,
    ) -> None:
        # The hooks are in place before SyncObj.__init__ starts the tick thread.
        self._raftsched_clock_stamp: Callable[[str, str], tuple[Any, ...] | None] = clock_stamp or (
            lambda _peer, _kind: None
        )
        self._raftsched_clock_heard: Callable[[str, str, Any], None] = clock_heard or (
            lambda _peer, _kind, _stamp: None
        )
        self._raftsched_enqueue = enqueue
        self._raftsched_guard = guard or RaftPortGuard("raft")
        self._raftsched_dial: Callable[[str], str] = lambda addr: addr
        self._raftsched_hold: Callable[[], bool] = hold or (lambda: False)
        self._raftsched_leader_heard: Callable[[], None] = leader_heard or (lambda: None)
        self._raftsched_heard_at: float | None = None  # monotonic; an append from a leader
        # A node rebuilt from nothing (see PySyncObjNode): None once it has caught up; -1 until a
        # leader is heard; then the leader's commit index it must apply before it votes again.
        self._raftsched_votes_after: int | None = -1 if rebuilding else None
        super().__init__(*args, transportClass=_GuardedTransport, **kwargs)

    def _SyncObj__connectedToAnyone(self) -> bool:
        # pysyncobj campaigns only while this is true. A node that joins, is being stopped, or
        # was removed must not campaign: without pre-vote its higher term would depose the
        # leader (a joining node times out before the leader's first append reaches it).
        if self._raftsched_hold():
            return False
        return bool(super()._SyncObj__connectedToAnyone())

    def _SyncObj__parseChangeClusterRequest(self, command: Any) -> Any:
        # A membership entry names a node by its own Raft address; this node may dial that peer
        # elsewhere (a raft_via proxy), and pysyncobj knows the peer by the dialled address.
        request = super()._SyncObj__parseChangeClusterRequest(command)
        if not isinstance(request, list) or len(request) < 2:
            return request
        try:
            raw = str(request[2].address) if len(request) >= 3 else str(request[1])
            dial = self._raftsched_dial(raw)
        except Exception:
            log.exception("mapping a membership entry's address failed")
            return request
        return [request[0], dial, TCPNode(dial)]

    def _SyncObj__onBecomeLeader(self) -> None:
        # pysyncobj keeps a snapshot transmission to a follower (an open file and an offset) when
        # this node stops leading, and a later term of this node resumes it mid-file, while the
        # follower has meanwhile begun another leader's transmission: it appends the rest of
        # this one to that file, and the snapshot it loads is garbage (the CI chaos run: a
        # joined node's install failed "not a raftsched LMDB store" after leadership went
        # n3 -> n1 -> n3 during its catch-up). A new term starts every transmission afresh.
        serializer = self._SyncObj__serializer
        for node in list(self._SyncObj__otherNodes | self._SyncObj__readonlyNodes):
            serializer.cancelTransmisstion(node)
        super()._SyncObj__onBecomeLeader()

    def member_addresses(self) -> list[str]:
        """Every voter's address as this node dials it, self included (a copy; any thread)."""
        for _ in range(5):
            try:
                others = [str(n.address) for n in list(self._SyncObj__otherNodes)]
                break
            except RuntimeError:  # the set changed size while the tick thread applied a change
                continue
        else:
            others = []
        return sorted({*others, str(self._SyncObj__selfNode.address)})

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:
        # Overrides pysyncobj's name-mangled handler (SyncObj binds self.__onMessageReceived in
        # __init__, so this runs for every message).
        if self._raftsched_votes_after is not None and not self._raftsched_may_vote(message):
            return  # a rebuilt node's vote could elect a leader without committed entries
        if (
            isinstance(message, dict)
            and message.get("type") == "append_entries"
            and "prevLogIdx" not in message
            and "commit_index" in message
        ):
            own = int(self.raftCommitIndex)
            if message["commit_index"] > own:
                message = {**message, "commit_index": own}  # see the module docstring
        if isinstance(message, dict) and CLOCK_KEY in message:
            try:
                self._raftsched_clock_heard(str(node.address), str(message.get("type")), message[CLOCK_KEY])
            except Exception:  # a malformed stamp from an authenticated peer: ignore it
                log.exception("clock stamp from %s not understood", node)
        super()._SyncObj__onMessageReceived(node, message)
        # The moment a leader is heard from counts, not whether one is known when the election
        # timer next fires: a candidate's request_vote of a higher term clears pysyncobj's
        # leader before then (see PySyncObjNode.hold_elections).
        heard = isinstance(message, dict) and message.get("type") == "append_entries"
        if heard and self._getLeader() is not None:
            self._raftsched_heard_at = time.monotonic()
            self._raftsched_leader_heard()

    def contact_age(self, now: float, leading: bool) -> float | None:
        """Seconds since this node's view was confirmed (None: never; a report, not a decision).

        A leader: the age of the newest answer it holds from a majority, itself included (read
        from pysyncobj's ``__lastResponseTime``, which its own ``leaderFallbackTimeout`` check
        uses, syncobj.py:_onTick); a follower: since the leader's last ``append_entries``."""
        if not leading:
            heard: float | None = self._raftsched_heard_at
            return None if heard is None else max(0.0, now - heard)
        try:
            times: list[float] = sorted(dict(self._SyncObj__lastResponseTime).values(), reverse=True)
            voters = len(self._SyncObj__otherNodes) + 1
        except (AttributeError, RuntimeError):  # not started yet, or changed under us
            return None
        need = voters // 2  # answers from others that make a majority with this node
        if need == 0:
            return 0.0
        if len(times) < need:
            return None
        return max(0.0, now - times[need - 1])

    def _raftsched_may_vote(self, message: Any) -> bool:
        """A rebuilt node (its journal moved aside) has forgotten the entries it acknowledged and
        the vote it cast: granting a vote now could elect a candidate that lacks committed
        entries (Raft counts on a voter's log to refuse it) or vote twice in a term. So it drops
        vote requests until it has applied the commit index of the first leader it hears from;
        False: drop ``message``."""
        target = self._raftsched_votes_after
        if target is None or not isinstance(message, dict):
            return True
        kind = message.get("type")
        if kind == "append_entries" and target == -1 and "commit_index" in message:
            target = self._raftsched_votes_after = int(message["commit_index"])
        if target >= 0 and int(self.raftLastApplied) >= target:
            self._raftsched_votes_after = None
            log.info("rebuilt node caught up with the leader's commit index %d: it votes again", target)
            return True
        return kind != "request_vote"

    # Plain (not replicated) methods: the adapter's way to pysyncobj's underscore-named API.

    def propose_entry(self, data: bytes, callback: Callable[[object, int], None]) -> None:
        """Append ``data`` through the one replicated entry point; ``callback(result, error)``."""
        self._raftsched_apply(data, callback=callback)

    def leads(self) -> bool:
        return bool(self._isLeader())

    def leader_address(self) -> str | None:
        leader = self._getLeader()
        return None if leader is None else str(leader.address)

    @replicated  # type: ignore[untyped-decorator]
    def _raftsched_apply(self, data: bytes) -> int:
        # raftLastApplied + 1 is the index of the entry being applied (docs/architecture.md §10).
        # The entry is applied on the applier thread; the proposer gets its result through
        # Applier.on_result(index). Returning the index is all the tick thread does.
        index = int(self.raftLastApplied) + 1
        try:
            if isinstance(data, bytes):
                self._raftsched_enqueue(index, data)
        except Exception:  # an exception here would wedge every node of the cluster
            log.critical("replicated apply raised at index %d", index, exc_info=True)
        return index


class PySyncObjNode:
    """A :class:`raftsched.abc.ConsensusNode` over pysyncobj, with LMDB-backed snapshots.

    ``apply_fn(index, data)`` is called for each committed entry, in log order, on the applier
    thread (see :mod:`raftsched.consensus.applier`); ``on_tick`` commits the store batch, on the
    same thread; ``on_leadership`` is called on pysyncobj's tick thread on every role change.
    ``write_snapshot(file)`` must write the store image at the current applied index;
    ``load_snapshot(path, offset)`` must replace the store with the image at ``offset``.
    ``hold_until_leader``: a node joining an existing cluster, which does not campaign until a
    leader's ``append_entries`` reaches it (see :meth:`hold_elections`). ``rebuilding``: a node
    whose journal was moved aside (``raftsched-node --rebuild``); it also grants no vote until it
    has caught up with the first leader it hears from (see ``_Raft._raftsched_may_vote``).
    """

    def __init__(
        self,
        node_id: str,
        self_addr: str,
        peers: list[str],
        secret: str,
        data_dir: Path,
        tuning: RaftTuning,
        apply_fn: Callable[[int, bytes], bytes | None],
        on_tick: Callable[[], None],
        on_leadership: Callable[[Leadership], None],
        write_snapshot: Callable[[BinaryIO], None],
        load_snapshot: Callable[[Path, int], None],
        applied_index: Callable[[], int],
        addr_to_id: Callable[[str], str | None],
        on_store_failure: Callable[[BaseException], None] | None = None,
        dial_address: Callable[[str], str] | None = None,
        cluster_view: Callable[[], list[str] | None] | None = None,
        bind_addr: str | None = None,
        hold_until_leader: bool = False,
        clock_watch: ClockWatch | None = None,
        rebuilding: bool = False,
    ) -> None:
        if not secret or len(secret) < 16:
            raise ValueError("a cluster secret of at least 16 characters is required")
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError(
                "PySyncObjNode must be constructed on the main thread (pysyncobj's tick thread "
                "stops when its constructing thread exits)"
            )
        self.node_id = node_id
        self.self_addr = self_addr
        self._peers = tuple(peers)
        self._cluster_view = cluster_view or (lambda: None)
        self._holding = False  # campaigns held (see hold_elections)
        # Clocks (raftsched.clockwatch): stamped on appends and their replies; a node whose
        # clock the leader found off the majority's does not campaign (see _campaigns_held).
        self.clock_watch = clock_watch
        self._clock_held_logged = False
        self._transfer_asked = False  # step_down wants a TimeoutNow sent (on the tick thread)
        # Held until a leader has been heard from: a node joining an existing cluster (set
        # before the tick thread starts, so a leader heard at once is not missed).
        self._hold_until_leader = hold_until_leader
        self._on_leadership = on_leadership
        self._write_snapshot = write_snapshot
        self._load_snapshot = load_snapshot
        self._applied_index = applied_index
        self._addr_to_id = addr_to_id
        self._last_role = -1
        self._last_tick = time.monotonic()
        self._stall_warn_s = tuning.raft_min_timeout / 2
        self._dump_file = data_dir / "raft.dump"
        # The asynchronous snapshot writer (see _serialize): its thread, its outcome for the
        # checker (None while it runs), and a generation that a snapshot install bumps so a copy
        # begun before the install never replaces the installed file.
        self._snap_thread: threading.Thread | None = None
        self._snap_outcome: int | None = None  # a SERIALIZER_STATE
        self._snap_generation = 0
        data_dir.mkdir(parents=True, exist_ok=True)
        self.port_guard = RaftPortGuard(node_id, addr_to_id)
        conf = SyncObjConf(
            # Listen where the config says, not on every interface (pysyncobj's default).
            bindAddress=_bind_address(bind_addr or self_addr),
            appendEntriesUseBatch=True,
            appendEntriesPeriod=tuning.append_entries_period,
            autoTickPeriod=tuning.auto_tick_period,
            raftMinTimeout=tuning.raft_min_timeout,
            raftMaxTimeout=tuning.raft_max_timeout,
            connectionTimeout=tuning.connection_timeout,
            connectionRetryTime=tuning.connection_retry_time,
            leaderFallbackTimeout=tuning.leader_fallback_timeout,
            logCompactionMinEntries=tuning.log_compaction_min_entries,
            logCompactionMinTime=tuning.log_compaction_min_time,
            journalFile=str(data_dir / "raft.journal"),
            fullDumpFile=str(data_dir / "raft.dump"),
            serializer=self._serialize,
            deserializer=self._deserialize,
            serializeChecker=self._snapshot_state,
            password=secret,
            commandsWaitLeader=False,
            dynamicMembershipChange=True,
            onStateChanged=self._state_changed,
            # A Raft port in use fails the start (waitBinded below) after three attempts half a
            # second apart, instead of pysyncobj retrying every second forever while the rest of
            # the node runs; the retries ride out a port that is only briefly taken.
            maxBindRetries=3,
            bindRetryTime=0.5,
        )
        self._on_store_failure = on_store_failure
        self._failed: BaseException | None = None
        self._applier = Applier(apply_fn, on_tick, on_fatal=self._store_failed)
        self._applier.start()
        self._raft = _Raft(
            self._applier.enqueue,
            self_addr,
            peers,
            conf,
            guard=self.port_guard,
            hold=self._campaigns_held,
            leader_heard=self._leader_heard,
            clock_stamp=self._clock_stamp,
            clock_heard=self._clock_heard,
            rebuilding=rebuilding,
        )
        if dial_address is not None:
            self._raft._raftsched_dial = dial_address
        try:
            self._raft.waitBinded()
        except SyncObjException:
            self._raft.destroy()
            self._applier.stop()
            raise CannotStart(
                f"cannot listen on the Raft address {bind_addr or self_addr}: the port is in use "
                "(or the address is not on this host)"
            ) from None
        self._raft.addOnTickCallback(self._tick)

    # -- ConsensusNode ---------------------------------------------------------------------------

    def propose(self, data: bytes, callback: ProposeCallback, on_commit: CommitHook | None = None) -> None:
        """Propose ``data``. ``on_commit`` (optional) runs on the tick thread the moment the entry
        is committed, before it is applied; ``callback`` gets the apply result afterwards."""

        def done(result: object, err: int) -> None:
            if err == FAIL_REASON.SUCCESS and isinstance(result, int):
                if on_commit is not None:
                    try:
                        on_commit()
                    except Exception:
                        log.exception("on-commit hook failed")
                self._applier.on_result(result, lambda applied: callback(applied or b"", None))
            elif err == FAIL_REASON.SUCCESS:
                callback(b"", None)  # outcome unknown
            else:
                code = _FAIL_CODES.get(err, "unavailable")
                callback(None, ProposeError(code, f"raft: {FAIL_REASON_NAMES.get(err, err)}"))

        try:
            self._raft.propose_entry(data, done)
        except Exception as exc:  # e.g. the SyncObj is being destroyed
            callback(None, ProposeError("unavailable", f"raft: {exc}"))

    def propose_barrier(self, data: bytes, callback: BarrierCallback) -> None:
        """Propose ``data`` and answer ``callback(index, None)`` once it is committed, applied
        here and the store committed through it (see :class:`raftsched.abc.ConsensusNode`)."""

        def durable(index: int, ok: bool) -> None:
            if ok:
                callback(index, None)
            else:
                callback(0, ProposeError("unavailable", "the barrier was not applied on this node"))

        def done(result: object, err: int) -> None:
            if err == FAIL_REASON.SUCCESS and isinstance(result, int):
                index = result
                self._applier.on_durable(index, lambda ok: durable(index, ok))
            elif err == FAIL_REASON.SUCCESS:
                callback(0, ProposeError("unavailable", "raft: the barrier's outcome is unknown"))
            else:
                code = _FAIL_CODES.get(err, "unavailable")
                callback(0, ProposeError(code, f"raft: {FAIL_REASON_NAMES.get(err, err)}"))

        try:
            self._raft.propose_entry(data, done)
        except Exception as exc:  # e.g. the SyncObj is being destroyed
            callback(0, ProposeError("unavailable", f"raft: {exc}"))

    def is_leader(self) -> bool:
        return self._failed is None and self._raft.leads()

    @property
    def failed(self) -> BaseException | None:
        """The store failure that made this node leave the cluster (see :meth:`_store_failed`)."""
        return self._failed

    def epoch(self) -> int:
        return int(self._raft.raftCurrentTerm)

    def leader_addr(self) -> str | None:
        return self._raft.leader_address()

    def leader_id(self) -> str | None:
        addr = self.leader_addr()
        return None if addr is None else self._addr_to_id(addr)

    def status(self) -> RaftStatus:
        """pysyncobj's ``getStatus()`` decoded; its raw keys never leave this module."""
        peers = [a for a in self._raft.member_addresses() if a != self.self_addr]
        status = decode_status(self._raft.getStatus(), peers, self.port_guard.refusal_for)
        age = self._raft.contact_age(time.monotonic(), status.role == "leader")
        return dataclasses.replace(status, contact_age_ms=-1 if age is None else int(age * 1000))

    def commit_index(self) -> int:
        return int(self._raft.raftCommitIndex)

    # -- membership and leadership hand-over ---------------------------------------------------

    def member_addresses(self) -> list[str]:
        """The Raft layer's voters, as this node dials them, self included."""
        return self._raft.member_addresses()

    def change_membership(
        self, kind: str, raft_addr: str, callback: Callable[[ProposeError | None], None]
    ) -> None:
        """Append pysyncobj's own membership entry adding or removing the node whose Raft
        identity is ``raft_addr``; ``callback(None)`` once committed, else with the error.

        Leader only. pysyncobj applies the change when the entry is *appended* (single-server
        change) and refuses (``unavailable: raft: request_denied``) while a previous change or the
        leader's first entry of its term is uncommitted, or when the change changes nothing.
        """

        def done(_result: object, err: int) -> None:
            if err == FAIL_REASON.SUCCESS:
                callback(None)
            else:
                code = _FAIL_CODES.get(err, "unavailable")
                callback(ProposeError(code, f"raft: {FAIL_REASON_NAMES.get(err, err)}"))

        try:
            if kind == "add":
                self._raft.addNodeToCluster(raft_addr, callback=done)
            else:
                self._raft.removeNodeFromCluster(raft_addr, callback=done)
        except Exception as exc:
            callback(ProposeError("unavailable", f"raft: {exc}"))

    def hold_elections(self, held: bool = True, until_leader: bool = False) -> None:
        """Stop (or resume) campaigning. ``until_leader``: hold only until a leader is heard
        from (a node joining an existing cluster); from the first ``append_entries`` of a
        leader on, this node campaigns like any member.

        That moment has to be caught when it happens. Checking "is a leader known?" only when
        the election timer fires (as this did first) misses it when the leader dies and another
        follower's ``request_vote`` of a higher term arrives first: pysyncobj then forgets the
        leader, the check finds none, and the hold never ends. If that follower's log is
        shorter than this node's, this node refuses it its vote and never campaigns itself, and
        the cluster has no leader at all (the CI chaos run: a replacement node, then a leader
        SIGKILL just after the other follower restarted)."""
        self._holding = held and not until_leader
        self._hold_until_leader = held and until_leader

    def _leader_heard(self) -> None:
        """Tick thread: an ``append_entries`` from a leader was just handled."""
        if self._hold_until_leader:
            self._hold_until_leader = False
            log.info("%s: heard from the leader; campaigns are no longer held", self.node_id)

    def _campaigns_held(self) -> bool:
        raft = getattr(self, "_raft", None)  # None while SyncObj.__init__ runs
        if self._hold_until_leader and raft is not None and raft._getLeader() is not None:
            self._leader_heard()
        return self._holding or self._hold_until_leader or self._clock_holds()

    def _clock_holds(self) -> bool:
        """This node's clock is off the majority's by more than max_clock_skew (the leader said
        so, or its own clock stepped since): leading with it would stamp a time the others do
        not share, so it does not campaign. It still votes (Raft's safety needs no clock)."""
        w = self.clock_watch
        faulty = w is not None and w.view(leading=False).faulty
        if faulty != self._clock_held_logged:
            self._clock_held_logged = faulty
            if faulty:
                log.warning(
                    "%s: this node's clock is off the majority's by more than max_clock_skew; it "
                    "does not campaign until it agrees again",
                    self.node_id,
                )
            else:
                log.info("%s: its clock agrees with the majority again; it may campaign", self.node_id)
        return faulty

    def _clock_stamp(self, peer: str, kind: str) -> tuple[Any, ...] | None:
        """Tick thread: the stamp on a message to ``peer`` (see _GuardedTransport.send)."""
        w = self.clock_watch
        if w is None:
            return None
        if kind == "append_entries":  # we lead: our clock, and what we measured of theirs
            offset, skew = w.advice_for(peer)
            return ("a", w.wall_ms(), round(w.mono_s() * 1_000_000), offset, skew)
        echo = w.echo_for(peer)  # a reply: our clock, and the leader's stamp it answers
        return None if echo is None else ("r", w.wall_ms(), echo)

    def _clock_heard(self, peer: str, kind: str, stamp: Any) -> None:
        """Tick thread: a stamp from ``peer`` (checked: it comes over the network)."""
        w = self.clock_watch
        if w is None or not isinstance(stamp, tuple) or not stamp:
            return
        if stamp[0] == "a" and kind == "append_entries" and len(stamp) == 5:
            _, _wall, mono_us, offset, skew = stamp
            if isinstance(mono_us, int):
                w.leader_stamp(peer, mono_us)
            if isinstance(offset, int) and (skew is None or isinstance(skew, int)):
                w.told(offset, skew)
        elif stamp[0] == "r" and kind == "next_node_idx" and len(stamp) == 3:
            _, wall, echo = stamp
            if isinstance(wall, int) and isinstance(echo, int):
                w.round_trip(peer, wall, echo)

    def step_down(self, timeout_s: float) -> str | None:
        """Hand leadership to the most caught-up connected follower (Raft TimeoutNow) and stop
        campaigning. Returns the new leader's address, or None if this node did not lead or no
        follower took over within ``timeout_s`` (then the followers' election timeout elects one,
        because this node no longer campaigns; its leadership lapses after
        ``leader_fallback_timeout`` at the latest).

        Blocks the calling thread (polls); never call it on the tick thread."""
        was_leader = self._raft.leads()
        self.hold_elections(True)
        if not was_leader:
            return None
        return self.hand_over(timeout_s)

    def hand_over(self, timeout_s: float) -> str | None:
        """Hand leadership to the most caught-up connected follower (Raft TimeoutNow) without
        holding campaigns for good (a leader whose clock is off: it campaigns again once its
        clock agrees). Returns the new leader's address, or None (see :meth:`step_down`).

        Blocks the calling thread (polls); never call it on the tick thread."""
        if not self._raft.leads():
            return None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not any(p.connected for p in self.status().peers):
                return None  # nobody to hand over to (a one-node cluster, or the peers are down)
            if self._raft.leads():
                # Sent by the tick thread (pysyncobj's transport is not thread-safe); denied
                # while no follower has everything, so asked again until one has caught up.
                self._transfer_asked = True
            else:
                leader = self._raft.leader_address()
                if leader is not None and leader != self.self_addr:
                    return leader
            time.sleep(0.01)
        return None

    def destroy(self) -> None:
        if self._failed is not None:
            self._raft.destroy()  # already leaving (a store failure); the tick thread ends itself
            self._applier.stop()
            return
        if hasattr(self._raft, "destroy_synchronous"):
            self._raft.destroy_synchronous()
        else:
            self._raft.destroy()
        self._join_snapshot_writer()
        self._applier.stop()

    @property
    def apply_backlog(self) -> int:
        """Committed entries waiting to be applied on this node."""
        return self._applier.backlog

    def force_compaction(self) -> None:
        self._raft.forceLogCompaction()

    # -- a store that cannot take writes ---------------------------------------------------------

    def _store_failed(self, exc: BaseException) -> None:
        """The applier stopped on a store failure (applier thread): leave the cluster at once.

        A node that cannot apply must not lead, nor vote or acknowledge entries it will not
        apply: it reports itself not leading, then the SyncObj is destroyed (the tick thread
        closes every connection and the journal, and ends), so the peers elect a healthy
        leader. Entries committed but not applied here stay in the journal and in the peers'
        logs; a restart replays them. ``on_store_failure`` then tells the node.
        """
        self._failed = exc
        term = int(self._raft.raftCurrentTerm)
        try:
            self._on_leadership(Leadership(False, term, None))
        except Exception:
            log.exception("leadership hook failed")
        self._raft.destroy()
        if self._on_store_failure is not None:
            self._on_store_failure(exc)

    # -- callbacks on the tick thread ----------------------------------------------------------

    def _tick(self) -> None:
        if self._transfer_asked:
            self._transfer_asked = False
            if self._raft.leads():
                self._raft.transferLeadership(callback=lambda _r, _e: None)
        now = time.monotonic()
        gap, self._last_tick = now - self._last_tick, now
        # A tick thread that stalls longer than the election timeout costs the cluster a leader.
        if gap > self._stall_warn_s:
            log.warning("%s: raft tick thread stalled for %.0f ms", self.node_id, gap * 1000)

    def _state_changed(self, old: int, new: int) -> None:
        if new == self._last_role or self._failed is not None:
            return
        self._last_role = new
        term = int(self._raft.raftCurrentTerm) if hasattr(self, "_raft") else 0
        log.info(
            "%s: raft role %s -> %s (term %d)",
            self.node_id,
            _RAFT_STATES.get(old, old),
            _RAFT_STATES.get(new, new),
            term,
            extra=leadership_fields(term, node=self.node_id),
        )
        try:
            self._on_leadership(
                Leadership(new == 2, term, self.leader_id() if hasattr(self, "_raft") else None)
            )
        except Exception:
            log.exception("leadership hook failed")

    # -- snapshots: JSON header + LMDB copy ------------------------------------------------------

    def _serialize(self, tmp_path: str, data: tuple[Any, Any, Any]) -> None:
        """pysyncobj's serializer: ``data = (last_applied_entry, prev_entry, cluster)``.

        Runs on the tick thread, so it only starts the copy: with everything up to
        raftLastApplied applied and committed (quiesce), the applier is paused - the store then
        holds exactly the state at that index - and a writer thread copies it to a file of its
        own, fsyncs it and renames it onto the dump file. The tick thread goes on with heartbeats
        and commits meanwhile; only applying waits for the copy. ``tmp_path`` is deliberately
        not created: pysyncobj's rename of it fails, and :meth:`_snapshot_state` reports the
        outcome instead (pysyncobj truncates its log only after SUCCESS).
        """
        if self._snap_thread is not None:
            return  # pysyncobj asks only when the checker says NOT_SERIALIZING; be safe anyway
        last, prev, cluster = data
        header = json.dumps(
            {
                "last": [last[0].hex(), last[1], last[2]],
                "prev": [prev[0].hex(), prev[1], prev[2]],
                "cluster": sorted(str(n.address) for n in cluster),
            }
        ).encode()
        # Everything up to raftLastApplied is queued; apply and commit it so the copy is exact.
        if not self._applier.quiesce():
            log.warning("%s: applier did not drain in time; snapshot skipped", self.node_id)
            self._snap_outcome = SERIALIZER_STATE.FAILED
            return
        self._applier.pause()
        self._snap_outcome = None
        thread = threading.Thread(
            target=self._write_snapshot_file,
            args=(header, int(last[1]), self._snap_generation),
            name="raftsched-snapshot",
            daemon=True,
        )
        self._snap_thread = thread
        thread.start()

    def _write_snapshot_file(self, header: bytes, index: int, generation: int) -> None:
        started = time.monotonic()
        tmp = self._dump_file.with_name(self._dump_file.name + ".writing")
        outcome = SERIALIZER_STATE.FAILED
        try:
            try:
                with open(tmp, "wb") as f:
                    f.write(_SNAPSHOT_MAGIC + len(header).to_bytes(8, "big") + header)
                    self._write_snapshot(f)
                    self._applier.resume()  # the copy is complete; fsync without holding applies
                    f.flush()
                    os.fsync(f.fileno())
                    size = f.tell()
            finally:
                self._applier.resume()
            if generation != self._snap_generation:
                # A snapshot from the leader was installed meanwhile: it is newer than this copy.
                tmp.unlink(missing_ok=True)
                log.info("%s: snapshot at index %d dropped (an install superseded it)", self.node_id, index)
                return
            os.replace(tmp, self._dump_file)
            outcome = SERIALIZER_STATE.SUCCESS
            log.info(
                "%s: snapshot written at index %d: %d bytes in %.0f ms",
                self.node_id,
                index,
                size,
                (time.monotonic() - started) * 1000,
            )
        except Exception:
            log.exception("%s: writing the snapshot at index %d failed", self.node_id, index)
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        finally:
            self._snap_outcome = outcome

    def _snapshot_state(self) -> int:
        """pysyncobj's serializeChecker (tick thread): SERIALIZING while the writer runs, then
        its outcome exactly once, then NOT_SERIALIZING."""
        thread = self._snap_thread
        if thread is None:
            outcome, self._snap_outcome = self._snap_outcome, None
            return int(SERIALIZER_STATE.NOT_SERIALIZING if outcome is None else outcome)
        if thread.is_alive() or self._snap_outcome is None:
            return int(SERIALIZER_STATE.SERIALIZING)
        self._snap_thread = None
        outcome, self._snap_outcome = self._snap_outcome, None
        return int(outcome)

    def _release_covered_proposals(self, last_index: int) -> int:
        """Answer this node's proposals whose log entries an installed snapshot covers (tick
        thread), with outcome unknown; returns how many.

        pysyncobj keeps a proposal's callback until it applies that log index itself
        (``commandsWaitingCommit``), and a snapshot install skips the applying: the callback
        is never called. A leader deposed with fire batches in flight that then catches up by a
        snapshot kept them in flight for good; when it led again its driver, its pipeline full,
        never proposed another fire (the chaos soak: a new leader elected, heartbeats fine,
        nothing fired for 60 s). An unknown outcome is what it is: the entry may be in the
        snapshot or may have been replaced; a proposer re-plans or retries, and the state
        machine refuses what was already applied."""
        raft = getattr(self, "_raft", None)
        waiting = getattr(raft, "_SyncObj__commandsWaitingCommit", None) if raft is not None else None
        if not waiting:
            return 0
        callbacks = release_covered(waiting, last_index)
        for callback in callbacks:
            try:
                callback(None, FAIL_REASON.UNKNOWN_OUTCOME)
            except Exception:
                log.exception("%s: a proposal's callback failed", self.node_id)
        return len(callbacks)

    def _join_snapshot_writer(self, timeout: float = 120.0) -> None:
        thread = self._snap_thread
        if thread is not None:
            thread.join(timeout)

    def _deserialize(self, path: str) -> tuple[Any, Any, Any]:
        with open(path, "rb") as f:
            magic = f.read(len(_SNAPSHOT_MAGIC))
            if magic != _SNAPSHOT_MAGIC:
                raise ValueError(f"{path}: not a raftsched snapshot")
            size = int.from_bytes(f.read(8), "big")
            header = json.loads(f.read(size))
            offset = f.tell()
        last = (bytes.fromhex(header["last"][0]), header["last"][1], header["last"][2])
        prev = (bytes.fromhex(header["prev"][0]), header["prev"][1], header["prev"][2])
        cluster = {TCPNode(a) for a in header["cluster"]}
        if self._applied_index() < last[1]:
            # Our store is behind the snapshot (new or wiped node, or a follower that fell behind
            # the leader's compacted log): install the leader's copy. A copy of our own still
            # being written must finish first (it pauses the applier) and must not replace it.
            started = time.monotonic()
            self._snap_generation += 1
            self._join_snapshot_writer()
            self._applier.quiesce()
            try:
                self._load_snapshot(Path(path), offset)
            except SnapshotFormatError as exc:
                # A newer leader's state this build cannot read: nothing was installed; stop
                # like a store failure (leave the cluster) instead of running on stale state.
                self._applier.halt(FormatTooNew(int(last[1]), exc))
                raise
            self._applier.reset(last[1])
            log.info(
                "%s: installed snapshot at index %d in %.0f ms",
                self.node_id,
                last[1],
                (time.monotonic() - started) * 1000,
            )
        # pysyncobj moves its applied index to the snapshot's: whatever of this node's proposals
        # it covers is never applied through pysyncobj, so their callbacks must be answered here.
        released = self._release_covered_proposals(int(last[1]))
        if released:
            log.info(
                "%s: %d proposal(s) of this node covered by the snapshot at index %d: outcome unknown",
                self.node_id,
                released,
                last[1],
            )
        # pysyncobj adopts the returned cluster (dynamic membership). The header holds the
        # membership as the *writer* dialled it (its raft_via proxies), so the replicated
        # membership just installed, as this node dials it, replaces it; before the membership
        # is recorded, the Raft layer's current view stays.
        view = self._cluster_view()
        if view is None:
            view = self._raft.member_addresses() if hasattr(self, "_raft") else sorted(header["cluster"])
        cluster = {TCPNode(a) for a in {*view, self.self_addr}}
        return last, prev, cluster


_JOURNAL_HEADER = struct.Struct("<24s8sII")  # pysyncobj's: app name, version, format, end offset
_JOURNAL_RECORD = struct.Struct("<IQQ")  # a record: its size, then index and term
_LMDB_MAGIC_AT = 16  # an LMDB meta page: a 16-byte page header, then the magic
_LMDB_MAGIC = 0xBEEFC0DE


def check_raft_files(data_dir: Path) -> None:
    """Check the Raft journal, its meta file and the snapshot file in ``data_dir`` before
    pysyncobj reads them; raises :class:`StoreDamaged` naming the file and what is wrong.

    pysyncobj checks none of them: a damaged journal either raises deep inside its constructor
    or is read as entries that never were, a damaged meta file is silently replaced by term 0
    and no vote, and a damaged snapshot is logged with a traceback and skipped. The checks read
    the framing only (pysyncobj keeps no checksums): the journal's header, that every record's
    two length fields agree and fit, and that the indexes follow each other; the meta file
    decodes; the snapshot's header is ours and an LMDB copy follows it."""
    _check_journal(data_dir / "raft.journal")
    _check_journal_meta(data_dir / "raft.journal.meta")
    _check_dump(data_dir / "raft.dump")


def _check_journal(path: Path) -> None:
    if not path.exists():
        return
    data = path.read_bytes()

    def damaged(problem: str) -> StoreDamaged:
        return StoreDamaged(str(path), f"Raft journal: {problem}")

    if len(data) < _JOURNAL_HEADER.size:
        raise damaged(f"{len(data)} bytes, shorter than its header")
    name, _version, fmt, end = _JOURNAL_HEADER.unpack_from(data)
    if name.rstrip(b"\0") != b"PYSYNCOBJ" or fmt != 1:
        raise damaged("its header is not a pysyncobj journal's")
    if not _JOURNAL_HEADER.size <= end <= len(data):
        raise damaged(f"its end offset {end} lies outside the file ({len(data)} bytes)")
    offset, previous = _JOURNAL_HEADER.size, None
    while offset < end:
        if offset + _JOURNAL_RECORD.size > end:
            raise damaged(f"the record at byte {offset} is cut off")
        size, index, term = _JOURNAL_RECORD.unpack_from(data, offset)
        if size < 16 or offset + 8 + size > end:
            raise damaged(f"the record at byte {offset} claims an impossible size ({size} bytes)")
        if struct.unpack_from("<I", data, offset + 4 + size)[0] != size:
            raise damaged(f"the record at byte {offset}: its two length fields differ")
        if previous is not None and (index != previous[0] + 1 or term < previous[1]):
            raise damaged(
                f"the record at byte {offset} holds index {index} (term {term}) after index "
                f"{previous[0]} (term {previous[1]})"
            )
        previous = (index, term)
        offset += size + 8


def _check_journal_meta(path: Path) -> None:
    if not path.exists():
        return
    try:
        meta = _pickle_loads(path.read_bytes())  # pysyncobj's own file, read as pysyncobj reads it
    except Exception as exc:
        raise StoreDamaged(str(path), f"Raft term and vote record does not decode: {exc}") from None
    if not isinstance(meta, dict):
        raise StoreDamaged(str(path), "Raft term and vote record does not decode")


def _check_dump(path: Path) -> None:
    if not path.exists():
        return
    with open(path, "rb") as f:
        magic = f.read(len(_SNAPSHOT_MAGIC))
        size = int.from_bytes(f.read(8), "big")
        problem = ""
        if magic != _SNAPSHOT_MAGIC:
            problem = "not a raftsched snapshot (its magic is gone)"
        elif not 0 < size <= 1 << 20:
            problem = f"its header claims {size} bytes"
        else:
            try:
                header = json.loads(f.read(size))
                missing = [key for key in ("last", "prev", "cluster") if key not in header]
                if missing:
                    raise KeyError(missing[0])
            except (ValueError, KeyError, TypeError) as exc:
                problem = f"its header does not decode: {exc!r}"
            else:
                page = f.read(_LMDB_MAGIC_AT + 4)
                if len(page) < _LMDB_MAGIC_AT + 4 or (
                    struct.unpack_from("=I", page, _LMDB_MAGIC_AT)[0] != _LMDB_MAGIC
                ):
                    problem = "no LMDB copy follows its header"
    if problem:
        raise StoreDamaged(str(path), f"Raft snapshot file: {problem}")


def release_covered(waiting: dict[int, list[tuple[int, Any]]], last_index: int) -> list[Any]:
    """Take the callbacks of entries at or below ``last_index`` out of pysyncobj's
    ``commandsWaitingCommit`` (log index -> [(term, callback), ...]); the caller calls them."""
    covered = sorted(index for index in waiting if index <= last_index)
    return [callback for index in covered for _term, callback in waiting.pop(index)]


def _bind_address(self_addr: str) -> str:
    """pysyncobj's ``bindAddress`` for our Raft address (it wants IPv6 hosts without brackets)."""
    host, port = self_addr.rsplit(":", 1)
    return f"{host.strip('[]')}:{port}"


def decode_status(
    raw: Mapping[str, Any], peers: Sequence[str], refusal: Callable[[str], str] | None = None
) -> RaftStatus:
    """Decode a pysyncobj ``getStatus()`` dict for a node configured with ``peers`` (addresses).

    pysyncobj names a peer by its address in keys ``partner_node_status_server_<addr>`` (2 when
    connected) and, on the leader only, ``match_idx_server_<addr>``; a missing key reads as
    disconnected and match index -1. An unknown role number reads as follower. ``refusal(addr)``
    says why a peer was refused lately ("" if it was not); it is shown for disconnected peers.
    """
    return RaftStatus(
        role=_RAFT_STATES.get(int(raw.get("state", 0)), "follower"),
        term=int(raw.get("raft_term", 0)),
        commit_index=int(raw.get("commit_idx", 0)),
        log_len=int(raw.get("log_len", 0)),
        peers=tuple(_peer_status(raw, addr, refusal) for addr in peers),
    )


def _peer_status(raw: Mapping[str, Any], addr: str, refusal: Callable[[str], str] | None) -> PeerStatus:
    connected = raw.get(f"partner_node_status_server_{addr}", 0) == _CONNECTED
    return PeerStatus(
        address=addr,
        connected=connected,
        match_index=int(raw.get(f"match_idx_server_{addr}", -1)),
        refused="" if connected or refusal is None else refusal(addr),
    )


FAIL_REASON_NAMES = {getattr(FAIL_REASON, n): n.lower() for n in dir(FAIL_REASON) if n.isupper()}
