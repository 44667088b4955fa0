"""Test support shipped with raftsched: a manual clock and a whole simulated cluster in one thread.

``SimHarness`` wires, per node, the real :class:`SchedulerState`, :class:`Replica` and
:class:`LeaderDriver` to an in-memory log (:class:`raftsched.consensus.memory.SimCluster`) and a
:class:`ManualClock`. Nothing sleeps and nothing is random unless a seed says so: a scenario
reproduces exactly. Users can drive their own schedules through it to check what fires when.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from raftsched import codec
from raftsched.abc import ProposeError
from raftsched.consensus.memory import SimCluster
from raftsched.errors import error_for_code
from raftsched.fsm import keys
from raftsched.fsm.state import BarrierCommitted, Effect, Retention, SchedulerState
from raftsched.leader import writes
from raftsched.leader.dispatcher import Dispatcher, DispatchSettings
from raftsched.leader.driver import LeaderDriver, Proposal
from raftsched.leader.gate import leader_time
from raftsched.model import TaskSpec
from raftsched.replica import Replica
from raftsched.storage.memory import MemoryStore
from raftsched.timing.clock import ManualClock
from raftsched.timing.schedule import MisfireSettings
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb

__all__ = ["ManualClock", "SimHarness", "SimNodeState"]


@dataclass
class SimNodeState:
    node_id: str
    store: MemoryStore
    state: SchedulerState
    replica: Replica
    driver: LeaderDriver
    dispatcher: Dispatcher
    clock_offset_ms: int = 0


@dataclass
class SimExecutor:
    """A simulated executor: takes work items, 'runs' each for ``duration_ms``, reports results.

    It keeps the real agent's rules: dispatches from an epoch older than the newest seen are
    refused, and an execution id already running or done is never run again (``executions``
    records every start, so a test can prove nothing ran twice).
    """

    name: str
    slots: int
    duration_ms: int = 300
    up: bool = True
    max_epoch: int = 0
    running: dict[str, int] = field(default_factory=dict)  # execution id -> finishes at
    done: dict[str, bool] = field(default_factory=dict)  # execution id -> success
    unreported: list[str] = field(default_factory=list)
    executions: list[tuple[str, int]] = field(default_factory=list)  # (execution id, start ms)
    refused_stale: int = 0

    def accept(self, item: pb.WorkItem, now_ms: int) -> None:
        if not self.up:
            return
        if item.epoch < self.max_epoch:
            self.refused_stale += 1
            return
        self.max_epoch = item.epoch
        if item.execution_id in self.running:
            return
        if item.execution_id in self.done:
            if item.execution_id not in self.unreported:
                self.unreported.append(item.execution_id)
            return
        self.running[item.execution_id] = now_ms + self.duration_ms
        self.executions.append((item.execution_id, now_ms))

    def progress(self, now_ms: int) -> None:
        for exec_id, finish in list(self.running.items()):
            if finish <= now_ms:
                del self.running[exec_id]
                self.done[exec_id] = True
                self.unreported.append(exec_id)


class SimHarness:
    """A simulated cluster. Typical use::

    sim = SimHarness(["n1", "n2", "n3"])
    sim.elect("n1")
    sim.add_task(TaskSpec("t", CronTrigger("* * * * * *"), command="true"))
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
        dispatch: DispatchSettings | None = None,
        seed: int = 0,
    ) -> None:
        self.dispatch = dispatch or DispatchSettings(lease_ms=2000, heartbeat_ms=300, retry_base_ms=200)
        self.seed = seed
        self.executors: dict[str, SimExecutor] = {}
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
        dispatcher = Dispatcher(state, self.dispatch, random.Random(self.seed))
        node = SimNodeState(node_id, store, state, None, driver, dispatcher)  # type: ignore[arg-type]

        def sink(effects: tuple[Effect, ...]) -> None:
            driver.on_effects(effects)
            for eff in effects:
                if isinstance(eff, BarrierCommitted) and eff.node_id == node_id:
                    dispatcher.become_leader(eff.epoch, self.now(node_id))
            dispatcher.on_effects(effects, self.now(node_id))

        node.replica = Replica(state, store, effect_sink=sink)
        self.nodes[node_id] = node
        replica = node.replica
        self.cluster.restart(node_id, replica.apply_entry, replica.last_applied, replica.end_of_tick)

    def _role_changed(self, node_id: str, leader: bool, term: int) -> None:
        node = self.nodes[node_id]
        if leader:
            self._propose(node, node.driver.become_leader(term, self.now(node_id)))
        else:
            node.driver.step_down()
            node.dispatcher.step_down()

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
        """One scheduling round at the current time: every node that believes it leads polls its
        driver and its dispatcher; executors progress, heartbeat and report to the real leader."""
        for node in self.nodes.values():
            sim_node = self.cluster.nodes[node.node_id]
            if sim_node.up and sim_node.believes_leader:
                for proposal in node.driver.poll(self.now(node.node_id)):
                    self._propose(node, proposal)
        self.settle()
        if self.executors:
            self._executors_round()

    # -- executors --------------------------------------------------------------------------------

    def add_executor(self, name: str, slots: int = 4, duration_ms: int = 300) -> SimExecutor:
        ex = SimExecutor(name, slots, duration_ms)
        self.executors[name] = ex
        self._register(ex)
        return ex

    def _register(self, ex: SimExecutor) -> None:
        leader = self.leader
        if leader is None:
            return
        cmd = logpb.Command(
            epoch=self.nodes[leader].dispatcher.epoch or self.cluster.term, now_ms=self.now(leader)
        )
        cmd.executor_join.name = ex.name
        cmd.executor_join.slots = ex.slots
        self.cluster.nodes[leader].propose(codec.encode_command(cmd), _ignore)
        self.settle()

    def crash_executor(self, name: str) -> None:
        ex = self.executors[name]
        ex.up = False
        # Its processes die with it; the execution log survives, and (like the real agent's
        # recover()) marks what was running as finished unsuccessfully, to be reported.
        for exec_id in ex.running:
            ex.done[exec_id] = False
            ex.unreported.append(exec_id)
        ex.running.clear()

    def restart_executor(self, name: str) -> None:
        self.executors[name].up = True
        self._register(self.executors[name])

    def _executors_round(self) -> None:
        leader = self.leader
        if leader is None or not self.cluster.nodes[leader].believes_leader:
            return
        node = self.nodes[leader]
        d = node.dispatcher
        if not d.leading:
            return
        now = self.now(leader)
        for ex in self.executors.values():
            if not ex.up:
                continue
            ex.progress(now)
            if not d.heartbeat(ex.name, [*ex.running, *ex.unreported], now):
                self._register(ex)
                continue
            if ex.unreported:
                results = [pb.ExecResult(execution_id=i, success=ex.done[i]) for i in ex.unreported]
                data = d.results(ex.name, results, now)
                ex.unreported.clear()
                if data is not None:
                    self.cluster.nodes[leader].propose(data, _ignore)
        for data in d.poll(now):
            if codec.decode_command(data).WhichOneof("body") == "assign_attempts":
                # Whatever the assignment did not turn into a lease may be placed again.
                self.cluster.nodes[leader].propose(data, functools.partial(_release, d, data))
            else:
                self.cluster.nodes[leader].propose(data, _ignore)
        self.settle()
        for executor, item in d.take_outbox():
            target = self.executors.get(executor)
            if target is not None:
                target.accept(item, now)

    def resend_all(self) -> None:
        """Executors reconnecting to a (new) leader: it re-sends what it has leased to them."""
        leader = self.leader
        if leader is None:
            return
        d = self.nodes[leader].dispatcher
        now = self.now(leader)
        for ex in self.executors.values():
            if ex.up:
                for item in d.resend_to(ex.name, now):
                    ex.accept(item, now)

    def run_for(self, ms: int, step_ms: int | None = None) -> None:
        step = step_ms or self.step_ms
        end = self.clock.now_ms() + ms
        while self.clock.now_ms() < end:
            self.clock.advance(min(step, end - self.clock.now_ms()))
            self.tick()

    # -- client writes (stamped as the leader's servicer would) ----------------------------------

    def write(
        self, build: str, *args: object, via: str | None = None, **kwargs: object
    ) -> logpb.CommandResult:
        """Propose a client write through ``via`` (default: the leader) and settle. Raises on rejection."""
        node_id = via or self.leader
        if node_id is None:
            raise RuntimeError("no leader")
        node = self.nodes[node_id]
        fn = getattr(writes, build)
        key = f"sim-{next(self._keys)}"
        # Stamped as the leader gate does: never below the committed leader time, whatever the clock.
        now_ms = leader_time(self.now(node_id), node.state.max_now_ms)
        epoch = node.driver.epoch or self.cluster.term
        stamp = {"now_ms": now_ms, "epoch": epoch, "origin": node_id, "key": key}
        if build in ("update_task", "set_enabled") or next(iter(inspect.signature(fn).parameters)) == "state":
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
        result = logpb.CommandResult()
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

    def workflow_runs(self, workflow: str, node_id: str | None = None) -> list[pb.WorkflowRun]:
        """Every run of ``workflow`` on a node (default: the leader), newest first."""
        node = self.nodes[node_id or self.leader or next(iter(self.nodes))]
        return node.state.list_workflow_runs(workflow, limit=100_000)

    def digests(self) -> dict[str, str]:
        """State digest per live node (they must all be equal once every node has caught up)."""
        return {n: s.state.digest() for n, s in self.nodes.items() if self.cluster.nodes[n].up}


M = TypeVar("M", pb.FireRecord, pb.Run)


def _parse(cls: type[M], data: bytes) -> M:
    msg = cls()
    msg.ParseFromString(data)
    return msg


def _ignore(result: bytes | None, error: ProposeError | None) -> None:
    return None


def _release(d: Dispatcher, data: bytes, result: bytes | None, error: ProposeError | None) -> None:
    d.release(data)
