"""TCP proxies on loopback that the chaos harness cuts and heals: network partitions without
network namespaces, iptables or root.

One :class:`ProxyNet` runs every proxy of a chaos run on one asyncio loop in a daemon thread.
Each proxy (a *link*) listens on an OS-assigned loopback port and forwards every connection to
one target address. :meth:`ProxyNet.cut` partitions links the way a dropped network does, not the
way a crashed peer does: nothing is refused or reset, bytes simply stop moving.

* A connection open across the cut stalls in both directions: the proxy stops reading either
  socket, so what the peers send waits in kernel buffers (TCP's retransmission, in effect), and
  each side learns of the partition only from its own timeouts (pysyncobj's connection timeout,
  gRPC deadlines).
* A connection accepted while cut is held silent: no upstream connection, nothing forwarded.
* :meth:`ProxyNet.heal` resumes every stalled connection (what waited is delivered, late, as TCP
  would after a partition heals) and connects the held ones upstream. A side that gave up during
  the cut closes its socket; the proxy sees that once it reads again and closes the other side.

Thread model: :meth:`add`, :meth:`cut` and :meth:`heal` may be called from any thread; each
returns once the loop has applied it, so after :meth:`cut` returns no further byte crosses the
link. :meth:`close` stops the loop and closes every socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

_CLIENT, _UPSTREAM = 0, 1


class _Side(asyncio.Protocol):
    """One socket of a proxied connection."""

    def __init__(self, pipe: _Pipe, which: int) -> None:
        self.pipe = pipe
        self.which = which

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.pipe.attach(self.which, transport)

    def data_received(self, data: bytes) -> None:
        self.pipe.forward(self.which, data)

    def eof_received(self) -> bool:
        self.pipe.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.pipe.close()

    def pause_writing(self) -> None:
        self.pipe.flow(1 - self.which, paused=True)  # stop reading what fills our buffer

    def resume_writing(self) -> None:
        self.pipe.flow(1 - self.which, paused=False)


class _Pipe:
    """An accepted connection and its upstream connection."""

    def __init__(self, link: _Link) -> None:
        self.link = link
        self.transports: list[asyncio.Transport | None] = [None, None]
        self.flow_paused = [False, False]
        self.connecting = False
        self.closed = False

    def attach(self, which: int, transport: asyncio.Transport) -> None:
        self.transports[which] = transport
        if which == _CLIENT:
            transport.pause_reading()  # nothing is read before the upstream side exists
            self.link.pipes.add(self)
            if not self.link.cut:
                self.connect()
        else:
            self.connecting = False
            if self.closed:
                transport.close()
                return
            self.update()

    def connect(self) -> None:
        if self.connecting or self.transports[_UPSTREAM] is not None or self.closed:
            return
        self.connecting = True
        loop = asyncio.get_running_loop()
        host, port = self.link.target
        task = loop.create_task(loop.create_connection(lambda: _Side(self, _UPSTREAM), host, port))
        task.add_done_callback(self._connected)

    def _connected(self, task: asyncio.Task[tuple[asyncio.BaseTransport, asyncio.BaseProtocol]]) -> None:
        if task.cancelled() or task.exception() is not None:
            self.connecting = False
            self.close()  # the target is down: the client sees its connection closed

    def reading_allowed(self, which: int) -> bool:
        return (
            not self.link.cut
            and not self.flow_paused[which]
            and self.transports[_CLIENT] is not None
            and self.transports[_UPSTREAM] is not None
        )

    def update(self) -> None:
        """Pause or resume reading each side after a cut, a heal or a flow-control change."""
        if self.closed:
            return
        if not self.link.cut and self.transports[_UPSTREAM] is None:
            self.connect()
        for which, transport in enumerate(self.transports):
            if transport is None or transport.is_closing():
                continue
            if self.reading_allowed(which):
                if not transport.is_reading():
                    transport.resume_reading()
            elif transport.is_reading():
                transport.pause_reading()

    def flow(self, which: int, paused: bool) -> None:
        self.flow_paused[which] = paused
        self.update()

    def forward(self, which: int, data: bytes) -> None:
        other = self.transports[1 - which]
        if other is not None and not other.is_closing():
            other.write(data)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.link.pipes.discard(self)
        for transport in self.transports:
            if transport is not None and not transport.is_closing():
                transport.close()  # flushes what was already forwarded


@dataclass(eq=False)
class _Link:
    name: str
    target: tuple[str, int]
    cut: bool = False
    server: asyncio.Server | None = None
    pipes: set[_Pipe] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class Link:
    """A proxy: connect to ``address`` ("host:port") to reach ``target``."""

    name: str
    address: str
    target: str


class ProxyNet:
    """Named TCP proxies on loopback that can be cut and healed (see the module docstring).

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self._links: dict[str, _Link] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chaos-proxies", daemon=True)
        self._thread.start()

    def __enter__(self) -> ProxyNet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, coro: Coroutine[object, object, T], timeout: float = 10.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def add(self, name: str, target: str) -> Link:
        """Start a proxy named ``name`` forwarding to ``target`` ("host:port"); it listens on an
        OS-assigned port of this net's host."""
        if name in self._links:
            raise ValueError(f"a link named {name!r} exists")
        host, _, port = target.rpartition(":")
        link = _Link(name, (host.strip("[]"), int(port)))

        async def start() -> int:
            link.server = await self._loop.create_server(lambda: _Side(_Pipe(link), _CLIENT), self.host, 0)
            return int(link.server.sockets[0].getsockname()[1])

        port_no = self._call(start())
        self._links[name] = link
        return Link(name, f"{self.host}:{port_no}", target)

    def names(self) -> list[str]:
        return list(self._links)

    def is_cut(self, name: str) -> bool:
        return self._links[name].cut

    def cut(self, names: Iterable[str]) -> None:
        """Partition these links: from the moment this returns no byte crosses them."""
        self._set([self._links[n] for n in names], cut=True)

    def heal(self, names: Iterable[str] | None = None) -> None:
        """Reconnect these links (default: every link)."""
        links = list(self._links.values()) if names is None else [self._links[n] for n in names]
        self._set(links, cut=False)

    def _set(self, links: list[_Link], cut: bool) -> None:
        async def apply() -> None:
            for link in links:
                link.cut = cut
                for pipe in list(link.pipes):
                    pipe.update()

        self._call(apply())

    def close(self) -> None:
        """Stop every proxy and close every connection; idempotent."""
        if self._loop.is_closed():
            return

        async def shutdown() -> None:
            for link in self._links.values():
                if link.server is not None:
                    link.server.close()
                for pipe in list(link.pipes):
                    pipe.close()

        with contextlib.suppress(Exception):
            self._call(shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()


__all__ = ["Link", "ProxyNet"]
