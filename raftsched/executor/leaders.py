"""Who leads, as an executor finds out (issue 35 §1).

An executor asks with its heartbeat: a node that accepts it leads; one that refuses it names the
leader it knows, which is followed only if it accepts the heartbeat in turn. A node that accepts
in an epoch older than the one the executor served is a deposed leader that has not noticed yet
(a node resumed from a SIGSTOP answers until its Raft tick steps it down). :func:`who_leads` asks
a set of nodes at once; :func:`find_leader` keeps asking every node after the leader was lost,
each again as soon as it answers that it knows none. The agent's leader watch
(:meth:`raftsched.executor.agent.Executor._watch`) and its registration loop call them.
:func:`call_leader` makes one call at the leader (a drain, a leave), following redirects.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from raftsched.abc import ExecutorTransport, TransportError
from raftsched.v1 import raftsched_pb2 as pb

# The agent's own logger, as batched.py: an executor's lines keep one name (log filters, and
# the tests that read an executor's log, match it).
log = logging.getLogger("raftsched.executor.agent")

WATCH_POLL_S = 0.05  # how often the leader watch looks at the heartbeat in flight
FIND_TIMEOUT_S = 0.3  # each node's answer to "who leads?" after the leader was lost
FIND_FOR_S = 7.0  # how long to keep asking every node before trying them one by one


@dataclass(frozen=True, slots=True)
class Asker:
    """The executor that asks: its transport, its name, its heartbeat (the question) and the
    newest epoch it has served (read at each answer)."""

    transport: ExecutorTransport
    name: str
    request: Callable[[], pb.HeartbeatRequest]
    served_epoch: Callable[[], int]


async def find_leader(
    asker: Asker, targets: Sequence[str], rpc_timeout_s: float, stop: asyncio.Event, lost: str
) -> str | None:
    """After losing ``lost``: ask every node, each again as soon as it answers that it knows
    no leader, until one leads or names the leader (an election takes a second or so); None
    after :data:`FIND_FOR_S`, and the agent's ``run`` goes through the nodes one by one as
    before. Asking them one by one alone let a paused node hold each pass for a whole register
    timeout; asking them in rounds let it hold each round for :data:`FIND_TIMEOUT_S`, so a
    leader elected meanwhile was found up to that much later. ``lost`` is asked too, even if
    it is not among the configured nodes (it joined later): it counts as the leader of a
    newer epoch only (see :func:`who_leads`). A leader that steps down and is elected again
    in a newer term (a resumed node's campaign forces that; pysyncobj has no pre-vote) was
    otherwise not found: the others' answers naming it are discarded, and when it was not
    configured it was never asked, for :data:`FIND_FOR_S`, while it expired the leases of
    the attempts running here and ran them again (the chaos CI duplicates)."""
    timeout = min(rpc_timeout_s, FIND_TIMEOUT_S)
    nodes = list(targets) if lost in targets else [*targets, lost]
    finding = asyncio.ensure_future(who_leads(asker, nodes, timeout, silent=lost, for_s=FIND_FOR_S))
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([finding, stopped], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (finding, stopped):
            task.cancel()
        await asyncio.gather(finding, stopped, return_exceptions=True)
    return finding.result() if finding.done() and not finding.cancelled() else None


async def who_leads(
    asker: Asker, nodes: list[str], timeout_s: float, silent: str = "", for_s: float = 0.0
) -> str | None:
    """Ask ``nodes`` at once, with a heartbeat, who leads: the first that accepts it (it
    leads, whether or not it knows this executor yet), or a leader other than ``silent`` that
    one names and that accepts it in turn; None if none does within ``timeout_s`` (an
    election under way). One that accepts it in an epoch older than one served already is a
    deposed leader, and ``silent`` itself (if among ``nodes``) counts in the epoch served
    only once another node names it (a hiccup, not a new leadership), in a newer one always.
    With ``for_s``, each node is asked again
    :data:`WATCH_POLL_S` after each answer that names no leader (or after its own timeout)
    until ``for_s`` has passed: a node that does not answer holds up only its own questions."""
    loop = asyncio.get_running_loop()
    until = loop.time() + for_s
    vouched = False  # another node named ``silent`` as the leader

    async def ask(node: str, follow: bool = True) -> str | None:
        nonlocal vouched
        try:
            reply = await asker.transport.heartbeat(node, asker.request(), timeout_s=timeout_s)
        except TransportError as exc:
            vouched = vouched or (bool(silent) and exc.leader == silent)
            if not (follow and exc.leader and exc.leader != silent):
                return None
            # A lagging node may name a leader that is gone: only one that accepts counts.
            # One naming ``silent`` is not followed: a paused node would hold this node's
            # questions for the whole timeout; ``silent`` is asked on its own if it may lead.
            return await ask(exc.leader, follow=False)
        # A leader of an older epoch than one we have served is deposed and has not noticed
        # yet: one resumed from a SIGSTOP answers until its Raft tick steps it down; so may
        # ``silent`` be in the epoch we served it in. Following it left the real leader. But
        # ``silent`` still leads that epoch (its loop stalled, its stream broke) when the
        # others name it: a newer leader they would name instead. Refusing it then left the
        # executor without a leader until it declared the executor dead (review of §1).
        served = asker.served_epoch()
        if reply.epoch < served or (node == silent and reply.epoch == served and not vouched):
            return None
        log.info("%s: %s answers as the leader (epoch %d)", asker.name, node, reply.epoch)
        return node

    async def keep_asking(node: str) -> str | None:
        while True:
            found = await ask(node)
            if found is not None or loop.time() + WATCH_POLL_S >= until:
                return found
            await asyncio.sleep(WATCH_POLL_S)

    asks = [asyncio.ensure_future(keep_asking(n)) for n in nodes]
    try:
        for done in asyncio.as_completed(asks):
            answer = await done
            if answer is not None:
                return answer
        return None
    finally:
        for a in asks:
            a.cancel()
        await asyncio.gather(*asks, return_exceptions=True)


async def call_leader(
    call: Callable[[str, float], Awaitable[object]],
    first: str,
    targets: Sequence[str],
    rpc_timeout_s: Callable[[], float],
    deadline: float,
) -> bool:
    """``await call(target, timeout_s)`` at the leader, from ``first`` on, following redirects
    and trying each of ``targets`` in turn, until it succeeds (True) or ``deadline`` (loop time)
    passes (False), each try bounded by three ``rpc_timeout_s()`` (read at each try: a
    registration meanwhile sets it from the leader's lease). A leader that does not know this
    executor (``not_found``) counts as done: it is no member, so there is nothing to drain or
    leave."""
    loop = asyncio.get_running_loop()
    target, tried = first, 0
    while True:
        left = deadline - loop.time()
        if left <= 0:
            return False
        try:
            await call(target, max(0.2, min(left, rpc_timeout_s() * 3)))
            return True
        except TransportError as exc:
            if exc.code == "not_found":
                return True
            if exc.leader and exc.leader != target:
                target = exc.leader
                continue
            tried += 1
            target = targets[tried % len(targets)]
            await asyncio.sleep(0.1)
