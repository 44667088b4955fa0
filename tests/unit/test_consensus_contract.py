"""The :class:`raftsched.abc.ConsensusNode` contract, run over both implementations: the in-memory
node of the simulation (:mod:`raftsched.consensus.memory`) and the pysyncobj node (a real
three-node cluster in this process, loopback, OS-assigned ports, real snapshots).

Each test drives a :class:`Cluster` (one per implementation) through the same steps and checks
the same things: committed entries apply in one order on every node, once; a proposer hears the
apply result after its commit hook; a new leader takes over with a higher epoch; a node that
catches up by a snapshot install never applies the entries the snapshot holds and ends in the
same state; a proposal whose outcome is unknown is answered at most once and applied at most
once. The simulation decides when entries commit (``deliver``) and who leads (``elect``), pysyncobj
decides by itself: :meth:`Cluster.until` pumps the one and polls the other with a deadline.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from raftsched.abc import ConsensusNode, Leadership, ProposeError
from raftsched.config.types import RaftTuning
from raftsched.consensus.memory import SimCluster
from raftsched.consensus.pysyncobj.node import PySyncObjNode
from raftsched.testing.cluster import free_ports, wait_until

NODES = ("a", "b", "c")
COMPACT_AFTER = 40  # pysyncobj compacts its log beyond this many entries (the snapshot test)


class App:
    """One node's state machine and store: the list of entries applied, in order.

    ``seen`` is what ``apply`` was called with (an entry a snapshot install covered is in
    ``state`` without ever having been seen); the result of applying ``x`` is ``b"r:" + x``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state: list[bytes] = []
        self.seen: list[tuple[int, bytes]] = []
        self.applied = 0
        self.installed: int | None = None

    def apply(self, index: int, data: bytes) -> bytes | None:
        with self.lock:
            if index <= self.applied:
                return None  # replayed after a restart
            self.seen.append((index, data))
            self.state.append(data)
            self.applied = index
        return b"r:" + data

    def image(self) -> bytes:
        with self.lock:
            return json.dumps({"applied": self.applied, "state": [d.hex() for d in self.state]}).encode()

    def install(self, image: bytes) -> None:
        decoded = json.loads(image)
        with self.lock:
            self.applied = self.installed = int(decoded["applied"])
            self.state = [bytes.fromhex(d) for d in decoded["state"]]

    def data(self) -> list[bytes]:
        with self.lock:
            return list(self.state)


class Cluster:
    """Three consensus nodes of one implementation and their apps."""

    nodes: dict[str, ConsensusNode]
    apps: dict[str, App]

    def until(self, condition: Callable[[], object], what: str) -> None:
        """Let the cluster work until ``condition()`` holds (fail after a deadline)."""
        raise NotImplementedError

    def leader(self) -> str:
        """The node every live node agrees leads (elected first where the test must elect)."""
        raise NotImplementedError

    def kill(self, node_id: str) -> None:
        """The node leaves for good (a crash)."""
        raise NotImplementedError

    def stop_for_snapshot(self, node_id: str) -> None:
        """The node goes down; the others' logs will be compacted past what it has."""
        raise NotImplementedError

    def start_empty(self, node_id: str) -> None:
        """The node comes back with an empty store: it can only catch up by a snapshot."""
        raise NotImplementedError

    def allow_unknown_outcomes(self, node_id: str, count: int) -> None:
        """Where the implementation can be told to, let ``count`` of the node's next committed
        proposals end with outcome unknown (pysyncobj produces them by itself)."""

    def close(self) -> None:
        pass

    def live(self) -> list[str]:
        return list(self.nodes)


class MemoryCluster(Cluster):
    def __init__(self, _tmp: Path) -> None:
        self.sim = SimCluster(list(NODES))
        self.apps = {n: App() for n in NODES}
        self.nodes = dict(self.sim.nodes)
        self.down: set[str] = set()
        for n in NODES:
            self.sim.restart(n, self.apps[n].apply, 0, lambda: None)
        self.sim.install_snapshot = self._install

    def _install(self, target: str, source: str) -> int:
        self.apps[target].install(self.apps[source].image())
        return self.apps[target].applied

    def until(self, condition: Callable[[], object], what: str) -> None:
        for _ in range(50):
            if condition():
                return
            self.sim.deliver()
        raise AssertionError(f"the simulated cluster never reached: {what}")

    def leader(self) -> str:
        if self.sim.leader is None:
            self.sim.elect(next(n for n in NODES if n not in self.down))
        assert self.sim.leader is not None
        return self.sim.leader

    def kill(self, node_id: str) -> None:
        self.sim.crash(node_id)
        self.down.add(node_id)
        self.sim.elect(next(n for n in NODES if n not in self.down))

    def stop_for_snapshot(self, node_id: str) -> None:
        self.sim.crash(node_id)
        self.down.add(node_id)

    def start_empty(self, node_id: str) -> None:
        self.apps[node_id] = App()
        self.down.discard(node_id)
        self.sim.restart(node_id, self.apps[node_id].apply, 0, lambda: None)
        self.sim.faults.snapshot_catch_up.add(node_id)  # as behind a compacted log

    def allow_unknown_outcomes(self, node_id: str, count: int) -> None:
        self.sim.faults.unknown_outcomes[node_id] = count
        self.sim.faults.late_outcomes = True

    def live(self) -> list[str]:
        return [n for n in NODES if n not in self.down]


class PySyncObjCluster(Cluster):
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        ports = free_ports(len(NODES))
        self.addr = {n: f"127.0.0.1:{p}" for n, p in zip(NODES, ports, strict=True)}
        self.ids = {a: n for n, a in self.addr.items()}
        self.tuning = RaftTuning(
            append_entries_period=0.02,
            auto_tick_period=0.005,
            raft_min_timeout=0.4,
            raft_max_timeout=1.0,
            connection_timeout=1.5,
            connection_retry_time=0.3,
            leader_fallback_timeout=1.5,
            log_compaction_min_entries=COMPACT_AFTER,
        )
        self.apps = {}
        self.nodes = {}
        self.leaderships: dict[str, list[Leadership]] = {}
        self.starts = 0
        for n in NODES:
            self._start(n)

    def _start(self, node_id: str) -> None:
        app = self.apps[node_id] = App()
        self.starts += 1
        self.leaderships[node_id] = []

        def write_snapshot(f: BinaryIO) -> None:
            f.write(app.image())

        def load_snapshot(path: Path, offset: int) -> None:
            with open(path, "rb") as f:
                f.seek(offset)
                app.install(f.read())

        self.nodes[node_id] = PySyncObjNode(
            node_id,
            self.addr[node_id],
            [a for n, a in self.addr.items() if n != node_id],
            "contract-test-secret-0123456789",
            self.tmp / f"{node_id}-{self.starts}",
            self.tuning,
            apply_fn=app.apply,
            on_tick=lambda: None,
            on_leadership=self.leaderships[node_id].append,
            write_snapshot=write_snapshot,
            load_snapshot=load_snapshot,
            applied_index=lambda: app.applied,
            addr_to_id=self.ids.get,
        )

    def until(self, condition: Callable[[], object], what: str) -> None:
        wait_until(condition, 30, 0.02, what)

    def leader(self) -> str:
        def agreed() -> str | None:
            leaders = [n for n in self.nodes.values() if n.is_leader()]
            if len(leaders) != 1:
                return None
            leader = leaders[0].node_id
            return leader if all(n.leader_id() == leader for n in self.nodes.values()) else None

        return wait_until(agreed, 30, 0.02, "one leader every live node follows")

    def kill(self, node_id: str) -> None:
        self.nodes.pop(node_id).destroy()

    def stop_for_snapshot(self, node_id: str) -> None:
        self.kill(node_id)

    def start_empty(self, node_id: str) -> None:
        # The others' logs must be compacted past what the node has, or it replays entries.
        self.until(
            lambda: all(n.status().log_len < COMPACT_AFTER for n in self.nodes.values()),
            "every live node compacted its log",
        )
        self._start(node_id)

    def close(self) -> None:
        for node in self.nodes.values():
            node.destroy()

    def live(self) -> list[str]:
        return list(self.nodes)


@pytest.fixture(params=[MemoryCluster, PySyncObjCluster], ids=["memory", "pysyncobj"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    made: Cluster = request.param(tmp_path)
    try:
        yield made
    finally:
        made.close()


class Answers:
    """What the proposer heard: each proposal's answers, in the order they came."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.got: dict[bytes, list[tuple[bytes | None, ProposeError | None]]] = {}
        self.events: list[str] = []

    def propose(self, node: ConsensusNode, data: bytes) -> None:
        with self.lock:
            self.got[data] = []

        def on_commit() -> None:
            with self.lock:
                self.events.append(f"commit {data!r}")

        def done(result: bytes | None, error: ProposeError | None) -> None:
            with self.lock:
                self.got[data].append((result, error))
                self.events.append(f"answer {data!r}")

        node.propose(data, done, on_commit)

    def answered(self, data: list[bytes]) -> bool:
        with self.lock:
            return all(self.got.get(d) for d in data)

    def once(self) -> dict[bytes, tuple[bytes | None, ProposeError | None]]:
        with self.lock:
            twice = {d: a for d, a in self.got.items() if len(a) > 1}
            assert not twice, f"answered more than once: {twice}"
            return {d: a[0] for d, a in self.got.items() if a}


def _converged(cluster: Cluster, data: list[bytes]) -> Callable[[], bool]:
    def check() -> bool:
        return all(set(data) <= set(cluster.apps[n].data()) for n in cluster.live())

    return check


def test_committed_entries_apply_once_in_one_order_on_every_node(cluster: Cluster) -> None:
    leader = cluster.nodes[cluster.leader()]
    answers = Answers()
    data = [b"e%02d" % i for i in range(20)]
    for d in data:
        answers.propose(leader, d)
    cluster.until(lambda: answers.answered(data), "every proposal answered")
    cluster.until(_converged(cluster, data), "every node applied every entry")
    for n in cluster.live():
        app = cluster.apps[n]
        assert app.data() == data, f"{n} applied {app.data()}"
        indexes = [i for i, _ in app.seen]
        assert indexes == sorted(set(indexes)), f"{n}: indexes not strictly increasing: {indexes}"
    assert len({tuple(cluster.apps[n].seen) for n in cluster.live()}) == 1, "nodes disagree on indexes"


def test_the_proposer_hears_the_apply_result_once_after_its_commit_hook(cluster: Cluster) -> None:
    leader_id = cluster.leader()
    follower = cluster.nodes[next(n for n in cluster.live() if n != leader_id)]
    answers = Answers()
    data = [b"from-leader", b"from-follower"]
    answers.propose(cluster.nodes[leader_id], data[0])
    answers.propose(follower, data[1])  # forwarded to the leader
    cluster.until(lambda: answers.answered(data), "both proposals answered")
    heard = answers.once()
    assert heard == {d: (b"r:" + d, None) for d in data}
    for d in data:
        assert answers.events.index(f"commit {d!r}") < answers.events.index(f"answer {d!r}")


def test_a_new_leader_takes_over_with_a_higher_epoch_and_keeps_what_was_committed(cluster: Cluster) -> None:
    old = cluster.leader()
    old_epoch = cluster.nodes[old].epoch()
    answers = Answers()
    answers.propose(cluster.nodes[old], b"before")
    cluster.until(lambda: answers.answered([b"before"]), "the first entry answered")
    cluster.until(_converged(cluster, [b"before"]), "every node applied the first entry")
    cluster.kill(old)
    new = cluster.leader()
    assert new != old
    assert all(cluster.nodes[n].epoch() > old_epoch for n in cluster.live())
    answers.propose(cluster.nodes[new], b"after")
    cluster.until(lambda: answers.answered([b"after"]), "the new leader's entry answered")
    cluster.until(_converged(cluster, [b"before", b"after"]), "the survivors applied both")
    assert answers.once()[b"after"] == (b"r:after", None)
    for n in cluster.live():
        assert cluster.apps[n].data() == [b"before", b"after"]


def test_a_node_that_catches_up_by_a_snapshot_skips_the_applies_and_converges(cluster: Cluster) -> None:
    leader_id = cluster.leader()
    lagging = next(n for n in NODES if n != leader_id)
    cluster.stop_for_snapshot(lagging)
    leader = cluster.nodes[cluster.leader()]
    answers = Answers()
    data = [b"s%03d" % i for i in range(3 * COMPACT_AFTER)]
    for d in data:
        answers.propose(leader, d)
    cluster.until(lambda: answers.answered(data), "every proposal answered")
    cluster.start_empty(lagging)
    app = cluster.apps[lagging]
    cluster.until(_converged(cluster, data), "the restarted node caught up")
    assert app.installed is not None, "it caught up without a snapshot"
    assert app.data() == cluster.apps[leader_id].data() == data
    skipped = {d for d in data if d not in {s for _, s in app.seen}}
    assert skipped, "the snapshot covered no entry"
    assert all(i > app.installed for i, _ in app.seen), "applied an entry the snapshot covered"
    after = Answers()
    after.propose(cluster.nodes[lagging], b"after-install")  # it works as a member again
    cluster.until(lambda: after.answered([b"after-install"]), "a proposal after the install answered")
    assert after.once()[b"after-install"] == (b"r:after-install", None)


def test_a_proposal_of_unknown_outcome_is_answered_at_most_once_and_applied_at_most_once(
    cluster: Cluster,
) -> None:
    """Proposals from a follower in flight when its leader dies: each is answered once, with the
    result (then applied exactly once everywhere) or an error (outcome unknown: applied once or
    not at all, never twice)."""
    old = cluster.leader()
    follower_id = next(n for n in cluster.live() if n != old)
    follower = cluster.nodes[follower_id]
    cluster.allow_unknown_outcomes(follower_id, 3)
    answers = Answers()
    data = [b"u%02d" % i for i in range(30)]
    for i, d in enumerate(data):
        answers.propose(follower, d)
        if i == 10:
            cluster.until(lambda: answers.answered(data[3:8]), "some proposals answered")
    cluster.kill(old)
    new = cluster.leader()
    flush = Answers()
    flush.propose(cluster.nodes[new], b"flush")
    cluster.until(lambda: flush.answered([b"flush"]), "the new leader's entry answered")
    cluster.until(lambda: answers.answered(data), "every in-flight proposal answered")
    cluster.until(_converged(cluster, [b"flush"]), "the survivors applied the new leader's entry")
    heard = answers.once()
    states = {n: cluster.apps[n].data() for n in cluster.live()}
    assert len({tuple(s) for s in states.values()}) == 1, f"the survivors disagree: {states}"
    state = next(iter(states.values()))
    for d, (result, error) in heard.items():
        times = state.count(d)
        if error is None:
            assert (result, times) == (b"r:" + d, 1), f"{d!r}: answered {result!r}, applied {times}x"
        else:
            assert error.code in ("unavailable", "not_leader") and times <= 1, f"{d!r}: {error}, {times}x"


def test_pysyncobj_answers_the_proposals_a_snapshot_install_covers(tmp_path: Path) -> None:
    """The stalled-leader bug of wave 2, end to end on real pysyncobj: a leader appends a
    proposal, stalls (its tick thread held) and is deposed; the new leader commits and compacts
    past it; the old leader catches up by a snapshot install. pysyncobj keeps the proposal's
    callback until it applies that index itself, which the install skips: without the adapter's
    patch (patches.py: snapshot-install-callbacks) the callback never fires."""
    cluster = PySyncObjCluster(tmp_path)
    try:
        old = cluster.leader()
        raft = cluster.nodes[old]._raft  # type: ignore[attr-defined]
        held, release = threading.Event(), threading.Event()

        def hold_once_appended() -> None:  # runs on the old leader's tick thread, after appends
            if raft._SyncObj__commandsWaitingCommit and not release.is_set():
                held.set()
                release.wait(30)

        raft.addOnTickCallback(hold_once_appended)
        answers = Answers()
        answers.propose(cluster.nodes[old], b"in-flight")
        wait_until(held.is_set, 10, 0.01, "the old leader held with the proposal appended")
        others = [n for n in NODES if n != old]

        def new_leader() -> str | None:
            leaders = [n for n in others if cluster.nodes[n].is_leader()]
            agreed = leaders and all(cluster.nodes[n].leader_id() == leaders[0] for n in others)
            return leaders[0] if agreed else None

        new = wait_until(new_leader, 30, 0.02, "a new leader among the others")
        more = Answers()
        data = [b"m%03d" % i for i in range(3 * COMPACT_AFTER)]
        for d in data:
            more.propose(cluster.nodes[new], d)
        cluster.until(lambda: more.answered(data), "the new leader's entries answered")
        cluster.until(
            lambda: all(cluster.nodes[n].status().log_len < COMPACT_AFTER for n in others),
            "the others compacted their logs",
        )
        # Until the new leader drops its link to the held node, what it sent sits in the socket
        # buffers and the held node would catch up from them, not by a snapshot.
        cluster.until(
            lambda: not cluster.nodes[new].status().peer(cluster.addr[old]).connected,
            "the new leader dropped the held node's connection",
        )
        release.set()
        cluster.until(lambda: answers.answered([b"in-flight"]), "the covered proposal answered")
        cluster.until(_converged(cluster, data), "the old leader caught up")
        assert cluster.apps[old].installed is not None, "the old leader caught up without a snapshot"
        result, error = answers.once()[b"in-flight"]
        assert error is not None and error.code == "unavailable", (result, error)
        assert all(cluster.apps[n].data().count(b"in-flight") <= 1 for n in NODES)
    finally:
        cluster.close()
