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
  and on restart it replays the log from the store's applied index;
* the failure modes of pysyncobj the chaos soaks found, as fault switches (:class:`SimFaults`, off
  unless a scenario arms them): a node that catches up by a *snapshot install* jumps to another
  node's state and never applies the entries it covers, and its proposals among them are
  answered "outcome unknown" (as the adapter answers them, raftsched/consensus/pysyncobj/
  patches.py ``snapshot-install-callbacks``); a proposal whose *outcome is unknown* commits and
  applies, but its callback never fires, or fires "outcome unknown" only once the leadership it
  went through has ended.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from raftsched.abc import BarrierCallback, CommitHook, PeerStatus, ProposeCallback, ProposeError, RaftStatus

ApplyFn = Callable[[int, bytes], bytes | None]
# install(target node, source node): replace the target's store and state with the source's
# (a snapshot); returns the log index the installed state is at.
InstallFn = Callable[[str, str], int]

UNKNOWN_OUTCOME = "the proposal's outcome is unknown"


@dataclass
class SimFaults:
    """pysyncobj's failure modes, armed per node; a fault is spent when it strikes.

    ``snapshot_catch_up``: nodes whose next catch-up installs a snapshot from the most advanced
    connected node instead of applying the entries (needs :attr:`SimCluster.install_snapshot`).
    ``unknown_outcomes``: node -> how many of its next proposals that commit lose their outcome
    (their entry commits and applies; ``on_commit`` is not called). ``late_outcomes``: True, those
    callbacks fire "outcome unknown" once the leadership they went through has ended (the next
    election; pysyncobj's LEADER_CHANGED) or their proposer crashed; False, never.
    """

    snapshot_catch_up: set[str] = field(default_factory=set)
    unknown_outcomes: dict[str, int] = field(default_factory=dict)
    late_outcomes: bool = False
    installed: list[tuple[str, int]] = field(default_factory=list)  # (node, index) per install
    lost: int = 0  # callbacks dropped or deferred by unknown_outcomes


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
    unanswered: list[ProposeCallback] = field(default_factory=list)  # SimFaults.late_outcomes

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
        self.faults = SimFaults()
        self.install_snapshot: InstallFn | None = None

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
        for other in self.nodes.values():  # the leadership they went through has ended
            self._answer_unanswered(other, UNKNOWN_OUTCOME)
        return self.term

    def step_down(self, node_id: str) -> None:
        """Tell a (deposed) node it no longer leads — pysyncobj's leaderFallbackTimeout expiring."""
        self._set_role(self.nodes[node_id], False)

    def _set_role(self, node: SimNode, leader: bool, force: bool = False) -> None:
        changed = node.believes_leader != leader or force
        node.believes_leader = leader
        if changed and node.up and self.on_role_change is not None:
            self.on_role_change(node.node_id, leader, node.term)

    def _answer_unanswered(self, node: SimNode, why: str) -> None:
        unanswered, node.unanswered = node.unanswered, []
        for cb in unanswered:
            cb(None, ProposeError("unavailable", why))

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
        self._answer_unanswered(node, "node crashed")
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
                committed += 1
                if p.barrier is not None:
                    origin.barriers[len(self.log)] = p.barrier
                elif self._loses_outcome(origin):
                    if self.faults.late_outcomes:
                        origin.unanswered.append(p.callback)
                    continue  # the entry commits; its proposer never hears so
                else:
                    origin.waiting[len(self.log)] = p.callback
                if p.on_commit is not None:
                    p.on_commit()
        for node in self.nodes.values():
            if self.connected(node.node_id):
                self._catch_up(node)
        return committed

    def _loses_outcome(self, node: SimNode) -> bool:
        """SimFaults.unknown_outcomes: True (and one spent) if ``node``'s proposal loses its outcome."""
        left = self.faults.unknown_outcomes.get(node.node_id, 0)
        if left <= 0:
            return False
        self.faults.unknown_outcomes[node.node_id] = left - 1
        self.faults.lost += 1
        return True

    def _install(self, node: SimNode) -> None:
        """SimFaults.snapshot_catch_up: ``node`` jumps to the state of the most advanced connected
        node (a snapshot) without applying the entries it covers. Its proposals and barriers
        among them are answered "outcome unknown", as the pysyncobj adapter answers them."""
        install = self.install_snapshot
        sources = [
            n for n in self.nodes.values() if n is not node and self.connected(n.node_id) and n.apply_fn
        ]
        source = max(sources, key=lambda n: n.applied, default=None)
        if install is None or source is None or source.applied <= node.applied:
            return
        self.faults.snapshot_catch_up.discard(node.node_id)
        index = install(node.node_id, source.node_id)
        node.applied = index
        self.faults.installed.append((node.node_id, index))
        for i in sorted(i for i in node.waiting if i <= index):
            node.waiting.pop(i)(None, ProposeError("unavailable", UNKNOWN_OUTCOME))
        for i in sorted(i for i in node.barriers if i <= index):
            node.barriers.pop(i)(0, ProposeError("unavailable", UNKNOWN_OUTCOME))

    def _catch_up(self, node: SimNode) -> None:
        if node.apply_fn is None:
            return
        if node.node_id in self.faults.snapshot_catch_up and node.applied < len(self.log):
            self._install(node)
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
