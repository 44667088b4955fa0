"""A node compares the checksum of its replicated content with its peers' at one log index.

Every node records its store's content checksum after each entry it applies
(:attr:`raftsched.replica.Replica.recent_sums`) and reports it for a requested index in
``NodeStatusReply.content_sum_at_index``; replicas at the same index hold the same content. The
check asks each peer for its applied index (a status call), takes the lowest index every
answering node has applied, asks for the checksums there and compares: when a strict majority
of the nodes that answered (this one included) agree on a value that is not this node's, this
node's state diverged (it applied differently, or loaded a store damaged before it kept a
checksum) and :meth:`PeerCheck.check_once` returns why. A peer that is the odd one finds that
itself. Cheap: two small status calls per peer, no store read.

Apply prunes history by each node's retention settings (``[scheduler]`` history and idempotency
keeps, ``[auth] audit_keep``), so two nodes with different settings hold different content
without either being damaged: the check compares only with peers that report the same settings
(``NodeStatusReply.retention``) and logs the others as a config mismatch.

Peers are dialled as the CLI dials them, with the node's TLS settings (:func:`node_client_tls`);
with ``[auth]`` tokens and no certificate a peer refuses the call and the check has nothing to
compare (status refused calls count as no answer).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import grpc

from raftsched.security.tls import TlsConfig, aio_channel
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

__all__ = ["PeerCheck", "same_settings", "verdict"]

log = logging.getLogger("raftsched.node")


@dataclass(frozen=True, slots=True)
class Seen:
    """What the peers reported at one index: ``sums`` by node id, this node's included."""

    index: int
    sums: dict[str, str]


def same_settings(
    retention: str, replies: Sequence[pb.NodeStatusReply]
) -> tuple[list[pb.NodeStatusReply], list[str]]:
    """The replies of peers that prune as this node does (``retention`` is its fingerprint; a
    peer of a build that does not report it counts as the same), and the ids of the others."""
    same = [r for r in replies if not r.retention or not retention or r.retention == retention]
    other = sorted(r.node_id for r in replies if r not in same)
    return same, other


def verdict(node_id: str, seen: Seen) -> str:
    """Why ``node_id``'s content diverged at ``seen.index`` ("" if a majority does not say so)."""
    mine = seen.sums.get(node_id)
    if not mine or len(seen.sums) < 2:
        return ""
    value, votes = Counter(seen.sums.values()).most_common(1)[0]
    if value == mine or votes * 2 <= len(seen.sums):
        return ""
    agreeing = sorted(n for n, v in seen.sums.items() if v == value)
    return (
        f"its replicated content at log index {seen.index} differs from that of {', '.join(agreeing)} "
        f"(checksum {mine[:12]}, theirs {value[:12]})"
    )


class PeerCheck:
    """One node's comparison with its peers; use on the node's event loop, :meth:`close` at the end.

    ``peers()`` gives ``(node id, gRPC address)`` of every other member; ``own_applied()`` and
    ``own_sum(index)`` (hex, or "" when not known) read this node's replica."""

    def __init__(
        self,
        node_id: str,
        peers: Callable[[], Sequence[tuple[str, str]]],
        own_applied: Callable[[], int],
        own_sum: Callable[[int], str],
        tls: TlsConfig | None,
        timeout_s: float = 5.0,
        retention: str = "",
    ) -> None:
        self.node_id = node_id
        self._retention = retention
        self._mismatch_logged: tuple[str, ...] = ()
        self._peers = peers
        self._own_applied = own_applied
        self._own_sum = own_sum
        self._tls = tls
        self._timeout_s = timeout_s
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _stub(self, address: str) -> pb_grpc.AdminStub:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = aio_channel(address, self._tls)
        return pb_grpc.AdminStub(channel)

    async def _ask(self, peers: Sequence[tuple[str, str]], index: int) -> list[pb.NodeStatusReply]:
        request = pb.NodeStatusRequest(chain_at_index=index)
        calls = [self._stub(address).NodeStatus(request, timeout=self._timeout_s) for _, address in peers]
        replies = await asyncio.gather(*calls, return_exceptions=True)
        return [r for r in replies if isinstance(r, pb.NodeStatusReply)]

    async def look(self) -> Seen | None:
        """The checksums at the lowest index every answering node applied (None: nobody answered)."""
        peers = list(self._peers())
        first, other = same_settings(self._retention, await self._ask(peers, 0))
        if other and tuple(other) != self._mismatch_logged:
            self._mismatch_logged = tuple(other)
            log.warning(
                "node %s: the retention settings of %s differ from this node's (%s): apply prunes "
                "by them, so their content is not compared; give every node the same [scheduler] "
                "history/idempotency keeps and [auth] audit_keep",
                self.node_id,
                ", ".join(other),
                self._retention,
            )
        if not first:
            return None
        peers = [(n, a) for n, a in peers if n not in other]
        index = min([self._own_applied(), *(r.applied_index for r in first)])
        sums = {r.node_id: r.content_sum_at_index for r in await self._ask(peers, index)}
        sums[self.node_id] = self._own_sum(index)
        return Seen(index, {n: v for n, v in sums.items() if v})

    async def formats(self) -> dict[str, int]:
        """The command format each peer that answered reports (``NodeStatus.command_format``),
        by node id; a peer that does not answer, or answers with another node's id, is left out
        (raftsched.leader.formats counts it as old)."""
        peers = list(self._peers())
        replies = await self._ask(peers, 0)
        dialled = {node_id for node_id, _ in peers}
        return {r.node_id: r.command_format for r in replies if r.node_id in dialled}

    async def check_once(self) -> str:
        """Why this node's content diverged from its peers' majority ("" if it did not, or
        nothing could be compared)."""
        seen = await self.look()
        return verdict(self.node_id, seen) if seen is not None else ""

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
