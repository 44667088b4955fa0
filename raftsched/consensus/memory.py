"""A deterministic in-memory replicated log for simulating whole clusters in one thread.

It models what matters to raftsched's invariants, not Raft's internals:

* one committed log; the scenario decides who leads (``elect``) and when entries commit
  (``deliver``), so every run is reproducible from its script (or seed);
* partitions: a node cut off from the majority cannot commit; its proposals fail with
  ``unavailable``; it stops applying until healed, then catches up;
* a *deposed* leader keeps believing it leads until told otherwise (pysyncobj keeps
  ``_isLeader()`` true for ``leaderFallbackTimeout``); if it is connected, its proposals are
  forwarded to the real leader and committed under the new term — exactly the case epoch
  fencing exists for;
* crash and restart: a crashed node loses its in-memory state; its store (the "disk") survives,
  and on restart it replays the log from the store's applied index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from raftsched.abc import BarrierCallback, CommitHook, PeerStatus, ProposeCallback, ProposeError, RaftStatus

ApplyFn = Callable[[int, bytes], bytes | None]


@dataclass
class _Pending:
    origin: str
    data: bytes
    callback: ProposeCallback
    on_commit: CommitHook | None = None
    barrier: BarrierCallback | None = None


@dataclass
class SimNode:
    """One node of a :class:`SimCluster`: a :class:`raftsched.abc.ConsensusNode`."""

    node_id: str
    cluster: SimCluster
    apply_fn: ApplyFn | None = None
    end_of_tick: Callable[[], None] | None = None
    applied: int = 0
    believes_leader: bool = False
    term: int = 0
    up: bool = True
    waiting: dict[int, ProposeCallback] = field(default_factory=dict)
    barriers: dict[int, BarrierCallback] = field(default_factory=dict)

    def propose(self, data: bytes, callback: ProposeCallback, on_commit: CommitHook | None = None) -> None:
        self.cluster.submit(self, data, callback, on_commit)

    def propose_barrier(self, data: bytes, callback: BarrierCallback) -> None:
        """As pysyncobj's: ``callback(index, None)`` after the entry is applied here and the
        node's ``end_of_tick`` (the store commit) has run; a deposed leader cut off from the
        majority never hears back until it is healed (its entry never commits: the caller's
        bound refuses the read), and fails at once if it knows it cannot commit."""

        def failed(_result: bytes | None, error: ProposeError | None) -> None:
            callback(0, error or ProposeError("unavailable", "the barrier's outcome is unknown"))

        if not self.up or (self.cluster.leader is None and self.cluster.connected(self.node_id)):
            failed(None, ProposeError("unavailable", "no leader reachable"))
            return
        self.cluster.pending_barriers.append(_Pending(self.node_id, data, failed, barrier=callback))

    def is_leader(self) -> bool:
        return self.believes_leader

    def epoch(self) -> int:
        return self.term

    def leader_id(self) -> str | None:
        return self.cluster.leader

    def status(self) -> RaftStatus:
        cluster = self.cluster
        connected = cluster.connected(self.node_id)
        return RaftStatus(
            role="leader" if self.believes_leader else "follower",
            term=self.term,
            commit_index=len(cluster.log) if connected else self.applied,
            log_len=len(cluster.log),
            contact_age_ms=0 if connected else -1,  # the simulation has no clock of its own
            peers=tuple(
                PeerStatus(
                    address=other.node_id,
                    connected=connected and cluster.connected(other.node_id),
                    match_index=other.applied if self.believes_leader else -1,
                )
                for other in cluster.nodes.values()
                if other is not self
            ),
        )

    def destroy(self) -> None:
        """Leave the cluster: as a crash, pending proposals fail and nothing more is applied."""
        self.cluster.crash(self.node_id)


class SimCluster:
    def __init__(self, node_ids: list[str]) -> None:
        self.nodes = {n: SimNode(n, self) for n in node_ids}
        self.log: list[tuple[int, bytes]] = []  # (term, data); index = position + 1
        self.term = 0
        self.leader: str | None = None
        self.isolated: set[str] = set()
        self.pending: list[_Pending] = []
        # Barriers wait here, whoever proposed them, until deliver(): one from a node cut off
        # from the majority stays until it is healed (or fails when it crashes).
        self.pending_barriers: list[_Pending] = []
        self.on_role_change: Callable[[str, bool, int], None] | None = None

    # -- topology --------------------------------------------------------------------------------

    def connected(self, node_id: str) -> bool:
        return self.nodes[node_id].up and node_id not in self.isolated

    def has_quorum(self) -> bool:
        live = sum(1 for n in self.nodes if self.connected(n))
        return live * 2 > len(self.nodes)

    def elect(self, node_id: str) -> int:
        """Make ``node_id`` leader of a new term. The old leader is *not* told (see module doc)."""
        if not self.connected(node_id) or not self.has_quorum():
            raise RuntimeError(f"{node_id} cannot be elected: not connected to a majority")
        self.term += 1
        self.leader = node_id
        node = self.nodes[node_id]
        node.term = self.term
        node.believes_leader = True
        self._fail_pending("leader changed")
        for other in self.nodes.values():
            if other.node_id != node_id and self.connected(other.node_id):
                other.term = self.term
                self._set_role(other, False)
        self._set_role(node, True, force=True)
        return self.term

    def step_down(self, node_id: str) -> None:
        """Tell a (deposed) node it no longer leads — pysyncobj's leaderFallbackTimeout expiring."""
        self._set_role(self.nodes[node_id], False)

    def _set_role(self, node: SimNode, leader: bool, force: bool = False) -> None:
        changed = node.believes_leader != leader or force
        node.believes_leader = leader
        if changed and node.up and self.on_role_change is not None:
            self.on_role_change(node.node_id, leader, node.term)

    def partition(self, *node_ids: str) -> None:
        self.isolated.update(node_ids)
        if self.leader in self.isolated:
            self.leader = None

    def heal(self, *node_ids: str) -> None:
        """Reconnect ``node_ids`` (default: every node)."""
        if node_ids:
            self.isolated.difference_update(node_ids)
        else:
            self.isolated.clear()

    def crash(self, node_id: str) -> None:
        node = self.nodes[node_id]
        node.up = False
        node.believes_leader = False
        for cb in node.waiting.values():
            cb(None, ProposeError("unavailable", "node crashed"))
        node.waiting.clear()
        for bcb in node.barriers.values():
            bcb(0, ProposeError("unavailable", "node crashed"))
        node.barriers.clear()
        for p in self.pending_barriers:
            if p.origin == node_id:
                p.callback(None, ProposeError("unavailable", "node crashed"))
        self.pending_barriers = [p for p in self.pending_barriers if p.origin != node_id]
        self.pending = [p for p in self.pending if p.origin != node_id]
        if self.leader == node_id:
            self.leader = None

    def restart(self, node_id: str, apply_fn: ApplyFn, applied: int, end_of_tick: Callable[[], None]) -> None:
        node = self.nodes[node_id]
        node.up = True
        node.apply_fn = apply_fn
        node.end_of_tick = end_of_tick
        node.applied = applied
        node.term = self.term

    # -- the log ---------------------------------------------------------------------------------

    def submit(
        self, node: SimNode, data: bytes, callback: ProposeCallback, on_commit: CommitHook | None = None
    ) -> None:
        """``node.propose``: queue ``data`` for the next :meth:`deliver` (or fail at once)."""
        if not node.up:
            callback(None, ProposeError("unavailable", "node is down"))
        elif not self.connected(node.node_id) or self.leader is None:
            callback(None, ProposeError("unavailable", "no leader reachable"))
        else:
            self.pending.append(_Pending(node.node_id, data, callback, on_commit))

    def _fail_pending(self, why: str) -> None:
        pending, self.pending = self.pending, []
        for p in pending:
            p.callback(None, ProposeError("unavailable", why))

    def deliver(self) -> int:
        """Commit every pending proposal (in order) and let every connected node apply. Returns #entries."""
        committed = 0
        if self.leader is not None and self.has_quorum():
            ready = [p for p in self.pending_barriers if self.connected(p.origin)]
            self.pending_barriers = [p for p in self.pending_barriers if not self.connected(p.origin)]
            pending, self.pending = self.pending + ready, []
            for p in pending:
                self.log.append((self.term, p.data))
                origin = self.nodes[p.origin]
                if p.barrier is not None:
                    origin.barriers[len(self.log)] = p.barrier
                else:
                    origin.waiting[len(self.log)] = p.callback
                committed += 1
                if p.on_commit is not None:
                    p.on_commit()
        for node in self.nodes.values():
            if self.connected(node.node_id):
                self._catch_up(node)
        return committed

    def _catch_up(self, node: SimNode) -> None:
        if node.apply_fn is None:
            return
        while node.applied < len(self.log):
            index = node.applied + 1
            result = node.apply_fn(index, self.log[index - 1][1])
            node.applied = index
            cb = node.waiting.pop(index, None)
            if cb is not None:
                cb(result if result is not None else b"", None)
        if node.end_of_tick is not None:
            node.end_of_tick()
        for index in sorted(i for i in node.barriers if i <= node.applied):
            node.barriers.pop(index)(index, None)
