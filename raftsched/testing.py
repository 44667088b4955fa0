"""Test support shipped with raftsched: a manual clock and a whole simulated cluster in one thread.

``SimHarness`` wires, per node, the real :class:`SchedulerState`, :class:`Replica` and
:class:`LeaderDriver` to an in-memory log (:class:`raftsched.consensus.memory.SimCluster`) and a
:class:`ManualClock`. Nothing sleeps and nothing is random unless a seed says so: a scenario
reproduces exactly. Users can drive their own schedules through it to check what fires when.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from raftsched.abc import ProposeError
from raftsched.consensus.memory import SimCluster
from raftsched.errors import error_for_code
from raftsched.fsm import keys
from raftsched.fsm.state import Retention, SchedulerState
from raftsched.leader import writes
from raftsched.leader.driver import LeaderDriver, Proposal
from raftsched.model import TaskSpec
from raftsched.replica import Replica
from raftsched.storage.memory import MemoryStore
from raftsched.timing.clock import ManualClock
from raftsched.timing.schedule import MisfireSettings
from raftsched.v1 import raftsched_pb2 as pb

__all__ = ["ManualClock", "SimHarness", "SimNodeState"]


@dataclass
class SimNodeState:
    node_id: str
    store: MemoryStore
    state: SchedulerState
    replica: Replica
    driver: LeaderDriver
    clock_offset_ms: int = 0


class SimHarness:
    """A simulated cluster. Typical use::

    sim = SimHarness(["n1", "n2", "n3"])
    sim.elect("n1")
    sim.add_task(TaskSpec("t", CronTrigger("* * * * * *")))
    sim.run_for(10_000)
    assert sim.outcomes("t") ...
    """

    def __init__(
        self,
        node_ids: Iterable[str] = ("n1", "n2", "n3"),
        start_ms: int = 1_700_000_000_000,
        misfire: MisfireSettings | None = None,
        retention: Retention | None = None,
        step_ms: int = 100,
    ) -> None:
        self.clock = ManualClock(start_ms)
        self.cluster = SimCluster(list(node_ids))
        self.misfire = misfire or MisfireSettings()
        self.retention = retention or Retention()
        self.step_ms = step_ms
        self.nodes: dict[str, SimNodeState] = {}
        self.failed_proposals = 0
        self._keys = itertools.count(1)
        for n in self.cluster.nodes:
            self._boot(n, MemoryStore())
        self.cluster.on_role_change = self._role_changed

    # -- nodes -----------------------------------------------------------------------------------

    def _boot(self, node_id: str, store: MemoryStore) -> None:
        state = SchedulerState.load(store, self.retention)
        driver = LeaderDriver(state, node_id, self.misfire)
        replica = Replica(state, store, effect_sink=driver.on_effects)
        self.nodes[node_id] = SimNodeState(node_id, store, state, replica, driver)
        self.cluster.restart(node_id, replica.apply_entry, replica.last_applied, replica.end_of_tick)

    def _role_changed(self, node_id: str, leader: bool, term: int) -> None:
        node = self.nodes[node_id]
        if leader:
            self._propose(node, node.driver.become_leader(term, self.now(node_id)))
        else:
            node.driver.step_down()

    def now(self, node_id: str) -> int:
        return self.clock.now_ms() + self.nodes[node_id].clock_offset_ms

    def elect(self, node_id: str) -> int:
        term = self.cluster.elect(node_id)
        self.settle()
        return term

    def crash(self, node_id: str) -> None:
        self.nodes[node_id].driver.step_down()
        self.cluster.crash(node_id)

    def restart(self, node_id: str, wipe: bool = False) -> None:
        store = MemoryStore() if wipe else self.nodes[node_id].store
        self._boot(node_id, store)

    def skew(self, node_id: str, offset_ms: int) -> None:
        self.nodes[node_id].clock_offset_ms = offset_ms

    @property
    def leader(self) -> str | None:
        return self.cluster.leader

    # -- driving ---------------------------------------------------------------------------------

    def _propose(self, node: SimNodeState, proposal: Proposal) -> None:
        driver = node.driver

        def done(result: bytes | None, error: ProposeError | None) -> None:
            if error is not None:
                self.failed_proposals += 1
                if proposal.barrier:
                    return
                driver.on_proposal_failed(proposal)
            else:
                driver.on_proposal_committed(proposal)

        self.cluster.nodes[node.node_id].propose(proposal.data, done)

    def settle(self) -> None:
        """Commit and apply until nothing is pending."""
        for _ in range(100):
            if not self.cluster.pending and self.cluster.deliver() == 0:
                break
            self.cluster.deliver()

    def tick(self) -> None:
        """One scheduling round at the current time: every node that believes it leads polls."""
        for node in self.nodes.values():
            sim_node = self.cluster.nodes[node.node_id]
            if sim_node.up and sim_node.believes_leader:
                for proposal in node.driver.poll(self.now(node.node_id)):
                    self._propose(node, proposal)
        self.settle()

    def run_for(self, ms: int, step_ms: int | None = None) -> None:
        step = step_ms or self.step_ms
        end = self.clock.now_ms() + ms
        while self.clock.now_ms() < end:
            self.clock.advance(min(step, end - self.clock.now_ms()))
            self.tick()

    # -- client writes (stamped as the leader's servicer would) ----------------------------------

    def write(self, build: str, *args: object, via: str | None = None, **kwargs: object) -> pb.CommandResult:
        """Propose a client write through ``via`` (default: the leader) and settle. Raises on rejection."""
        node_id = via or self.leader
        if node_id is None:
            raise RuntimeError("no leader")
        node = self.nodes[node_id]
        fn = getattr(writes, build)
        key = f"sim-{next(self._keys)}"
        # Stamped as rpc/admin.py does: never below the committed leader time, whatever the clock.
        now_ms = max(self.now(node_id), node.state.max_now_ms)
        epoch = node.driver.epoch or self.cluster.term
        stamp = {"now_ms": now_ms, "epoch": epoch, "origin": node_id, "key": key}
        if build in ("update_task", "set_enabled"):
            data = fn(node.state, *args, **kwargs, **stamp)
        else:
            data = fn(*args, **kwargs, **stamp)
        box: list[bytes | None] = []
        errors: list[ProposeError] = []
        self.cluster.nodes[node_id].propose(data, lambda r, e: errors.append(e) if e else box.append(r))
        self.settle()
        if errors:
            raise errors[0]
        if not box or box[0] is None:
            raise RuntimeError("write did not apply")
        result = pb.CommandResult()
        result.ParseFromString(box[0])
        if not result.ok:
            raise error_for_code(result.code, result.message)
        return result

    def add_task(self, spec: TaskSpec, disabled: bool = False) -> pb.TaskRecord:
        return self.write("create_task", spec, disabled=disabled).task

    # -- observation -----------------------------------------------------------------------------

    def fires(self, task: str, node_id: str | None = None) -> list[pb.FireRecord]:
        """The task's fire accounting records on a node (default: the leader), in time order."""
        return [_parse(pb.FireRecord, v) for v in self._scan(keys.FIRE, task, node_id)]

    def runs(self, task: str, node_id: str | None = None) -> list[pb.Run]:
        """The task's stored runs on a node (default: the leader), in nominal-time order."""
        return [_parse(pb.Run, v) for v in self._scan(keys.RUN, task, node_id)]

    def _scan(self, kind: bytes, task: str, node_id: str | None) -> list[bytes]:
        node = self.nodes[node_id or self.leader or next(iter(self.nodes))]
        lo, hi = keys.per_task_prefix(kind, task), keys.per_task_end(kind, task)
        return [value for _, value in node.store.scan(lo, hi)]

    def digests(self) -> dict[str, str]:
        """State digest per live node (they must all be equal once every node has caught up)."""
        return {n: s.state.digest() for n, s in self.nodes.items() if self.cluster.nodes[n].up}


M = TypeVar("M", pb.FireRecord, pb.Run)


def _parse(cls: type[M], data: bytes) -> M:
    msg = cls()
    msg.ParseFromString(data)
    return msg
