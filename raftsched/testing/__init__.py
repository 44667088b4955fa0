"""Test support shipped with raftsched: a manual clock and a whole simulated cluster in one thread.

``SimHarness`` wires, per node, the real :class:`SchedulerState`, :class:`Replica` and
:class:`LeaderDriver` to an in-memory log (:class:`raftsched.consensus.memory.SimCluster`) and a
:class:`ManualClock`. Executors are the real :class:`raftsched.Executor`, each on its own event
loop whose time is the manual clock, talking to the simulated nodes over the in-memory transport
(:class:`raftsched.executor.memory.MemoryTransport`) and keeping an in-memory execution log;
only running a command is simulated (it takes ``duration_ms`` and succeeds). Nothing sleeps and
nothing is random unless a seed says so: a scenario reproduces exactly. Users can drive their
own schedules through it to check what fires when.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import random
import selectors
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from raftsched import codec
from raftsched.abc import ProposeError, TransportError
from raftsched.alerts.config import HealthSettings
from raftsched.alerts.health import HealthMonitor, fleet_view
from raftsched.clockwatch import DEFAULT_MAX_SKEW_MS, ClockWatch
from raftsched.consensus.memory import SimCluster
from raftsched.errors import error_for_code
from raftsched.executor.agent import Executor
from raftsched.executor.memory import MemoryStream, MemoryTransport
from raftsched.executor.retention import DEFAULT_EXECUTION_LOG_KEEP
from raftsched.executor.runners import AttemptContext, AttemptResult
from raftsched.fsm import keys
from raftsched.fsm.records import Retention
from raftsched.fsm.state import SchedulerState
from raftsched.fsm.timeline import expand
from raftsched.leader import writes
from raftsched.leader.dispatch.dispatcher import Dispatcher, DispatchProposal
from raftsched.leader.dispatch.liveness import executor_health
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.leader.driver import LeaderDriver, Proposal
from raftsched.leader.formats import MemberFormats
from raftsched.leader.gate import Stamp, epoch_verdict, leader_time
from raftsched.model import TaskSpec
from raftsched.replica import Replica
from raftsched.server.core import Core
from raftsched.storage.memory import MemoryExecutionLog, MemoryStore
from raftsched.timing.clock import ManualClock
from raftsched.timing.schedule import MisfireSettings
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb

__all__ = ["ManualClock", "SimExecutorProcess", "SimHarness", "SimNodeState"]


@dataclass
class SimNodeState:
    node_id: str
    store: MemoryStore
    state: SchedulerState
    replica: Replica
    driver: LeaderDriver
    dispatcher: Dispatcher
    clock_offset_ms: int = 0
    watch: ClockWatch | None = None  # this node's view of the others' clocks (set at boot)


class _NodeClock:
    """A simulated node's clock: the harness's manual clock plus the node's skew (see skew())."""

    def __init__(self, sim: SimHarness, node_id: str) -> None:
        self.sim = sim
        self.node_id = node_id

    def now_ms(self) -> int:
        return self.sim.now(self.node_id)

    def monotonic(self) -> float:
        return self.sim.clock.monotonic()


class _IdleSelector(selectors.DefaultSelector):
    """Never blocks. The loop asks to wait (a timeout other than 0) only when nothing is ready
    and no timer is due: then the simulated process is idle until the clock moves."""

    def __init__(self) -> None:
        super().__init__()
        self.on_idle: Callable[[], None] | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if (timeout is None or timeout > 0) and self.on_idle is not None:
            self.on_idle()
        return super().select(0)


class _SimLoop(asyncio.SelectorEventLoop):
    """An event loop whose time is a :class:`ManualClock`, stepped by :meth:`run_until_idle`."""

    def __init__(self, clock: ManualClock) -> None:
        selector = _IdleSelector()
        super().__init__(selector)
        selector.on_idle = self.stop
        self._sim_clock = clock
        self._origin_ms = clock.now_ms()

    def time(self) -> float:
        # Seconds since the loop started, not since the epoch: the loop runs a timer when its
        # time is below now + the clock's resolution (1 ns), and at 1.7e9 s a float cannot hold
        # that difference, so a timer due exactly now would never run.
        return (self._sim_clock.now_ms() - self._origin_ms) / 1000

    def run_until_idle(self) -> None:
        """Run every callback that is ready, and every timer due by the clock's current time."""
        self.run_forever()


class _SimCommands:
    """The simulated part of an executor: a command takes ``duration_ms`` (those of
    ``durations``: their own) and succeeds, unless it is one of ``failing`` (then it exits 1)."""

    def __init__(
        self,
        clock: ManualClock,
        duration_ms: int,
        executions: list[tuple[str, int]],
        failing: set[str] | None = None,
        durations: dict[str, int] | None = None,
    ) -> None:
        self.clock = clock
        self.duration_ms = duration_ms
        self.executions = executions
        self.failing = failing if failing is not None else set()
        self.durations = durations if durations is not None else {}

    async def run(self, command: str, ctx: AttemptContext) -> AttemptResult:
        self.executions.append((ctx.execution_id, self.clock.now_ms()))
        took = self.durations.get(command, self.duration_ms)
        await asyncio.sleep(took / 1000)
        if command in self.failing:
            return AttemptResult(ctx.execution_id, False, 1, error="exit code 1", duration_ms=took)
        return AttemptResult(ctx.execution_id, True, 0, duration_ms=took)


@dataclass
class SimExecutorProcess:
    """One simulated executor process: a real :class:`Executor` while it is up.

    ``log`` is its execution log, which survives a crash (a restarted agent finds what was
    running and reports it failed). ``executions`` records every start of a command as
    ``(execution id, start ms)``, across restarts, so a test can prove nothing ran twice.
    """

    name: str
    slots: int
    duration_ms: int
    log: MemoryExecutionLog = field(default_factory=MemoryExecutionLog)
    executions: list[tuple[str, int]] = field(default_factory=list)
    cpu: float = 0.0  # declared capacity (0: not declared)
    memory_mb: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    execution_log_keep: str | float | None = DEFAULT_EXECUTION_LOG_KEEP  # the agent's option
    # Commands that fail (exit 1) on this executor; a test may change the set at any time.
    failing: set[str] = field(default_factory=set)
    # What its health probe reads (issue 36 §3): the fractions of its disk and execution-log map
    # in use. Set them to fill its disk: at 0.9 it drains itself, below 0.8 it takes work again.
    disk_used: float = 0.0
    log_used: float = 0.0
    prefetch: int = 0  # the agent's prefetch: attempts assigned beyond its slots wait for one
    durations: dict[str, int] = field(default_factory=dict)  # commands that take their own time (ms)
    agent: Executor | None = None
    loop: _SimLoop | None = None
    task: asyncio.Task[None] | None = None

    @property
    def up(self) -> bool:
        return self.agent is not None


def _address(node_id: str) -> str:
    return f"{node_id}.sim:7000"


class _SimEndpoint:
    """The simulated nodes' executor service, as ``rpc/executor_service.py`` serves it: only the
    leader whose dispatcher leads accepts calls; others redirect to the leader."""

    def __init__(self, sim: SimHarness) -> None:
        self.sim = sim
        self.streams: dict[tuple[str, str], MemoryStream] = {}  # (node id, executor) -> stream
        # The next this many Report calls fail as "not confirmed in time" (a commit that timed
        # out), to put a delay between an executor's first heartbeat and its result's commit.
        self.refuse_reports = 0
        # Nodes whose dispatches never reach an executor: "committed, never delivered" (a leader
        # stopped after committing an assignment and before its stream write went out).
        self.undelivered: set[str] = set()

    def _node(self, target: str) -> SimNodeState:
        node_id = target.split(".sim:")[0]
        sim_node = self.sim.cluster.nodes[node_id]
        if not sim_node.up:
            raise TransportError("unavailable", f"{node_id} is down")
        if node_id in self.sim.paused:
            raise TransportError("deadline_exceeded", f"{node_id} does not answer (paused)")
        node = self.sim.nodes[node_id]
        verdict = epoch_verdict(sim_node, node.dispatcher.leading, node.dispatcher.epoch)
        if verdict == "ok" and node.watch is not None and node.watch.faulty():
            # As LeaderGate.require_epoch: nothing is stamped with a clock off the majority's.
            raise TransportError("unavailable", f"{node_id}'s clock is off the majority's; retry shortly")
        if verdict == "changing":
            raise TransportError("unavailable", f"{node_id} is changing leadership; retry shortly")
        if verdict == "no":
            leader = self.sim.leader
            hint = _address(leader) if leader is not None and leader != node_id else ""
            raise TransportError("failed_precondition", f"{node_id} is not the leader", hint)
        return node

    def _now(self, node: SimNodeState) -> int:
        return leader_time(self.sim.now(node.node_id), node.state.max_now_ms)

    def _commit(self, node: SimNodeState, data: bytes) -> logpb.CommandResult:
        """Propose ``data`` on ``node`` and settle; the state machine's result."""
        errors: list[ProposeError] = []
        done: list[bytes | None] = []
        self.sim.cluster.nodes[node.node_id].propose(
            data, lambda r, e: errors.append(e) if e is not None else done.append(r)
        )
        self.sim.settle()
        if errors:
            raise TransportError("unavailable", str(errors[0]))
        if not done:
            raise TransportError("deadline_exceeded", "the command did not commit")
        return logpb.CommandResult.FromString(done[0] or b"")

    def register(self, target: str, request: pb.RegisterRequest) -> pb.RegisterReply:
        node = self._node(target)
        d = node.dispatcher
        stamp = Stamp(self._now(node), d.epoch, node.node_id).as_kwargs()
        self._commit(
            node,
            writes.executor_join(
                request.name,
                request.slots,
                request.labels,
                cpu=request.cpu,
                memory_mb=request.memory_mb,
                **stamp,
            ),
        )
        s = d.settings
        return pb.RegisterReply(
            epoch=d.epoch,
            lease_ms=s.lease_ms,
            heartbeat_ms=s.heartbeat_ms,
            leader_now_ms=self.sim.now(node.node_id),
            health_drained=d.health_drained(request.name),
            partial_heartbeats=True,
        )

    def open_stream(self, stream: MemoryStream) -> None:
        node = self._node(stream.target)
        if stream.name not in node.dispatcher.members:
            raise TransportError("not_found", f"executor {stream.name!r} is not registered")
        old = self.streams.get((node.node_id, stream.name))
        if old is not None:
            old.close()  # a newer stream of the same executor replaces the old one
        self.streams[(node.node_id, stream.name)] = stream
        node.dispatcher.stream_opened(stream.name)
        stream.on_cancel = functools.partial(self._hung_up, node.node_id, stream)
        stream.push(node.dispatcher.resend_to(stream.name, self._now(node)))

    def _hung_up(self, node_id: str, stream: MemoryStream) -> None:
        """The executor closed its stream (it stopped or crashed): tell the dispatcher, as the
        gRPC service does when a dispatch stream ends without a newer one replacing it."""
        if self.streams.get((node_id, stream.name)) is stream:
            del self.streams[(node_id, stream.name)]
            node = self.sim.nodes[node_id]
            if self.sim.cluster.nodes[node_id].up:
                node.dispatcher.stream_closed(stream.name, self._now(node))

    def heartbeat(self, target: str, request: pb.HeartbeatRequest) -> pb.HeartbeatReply:
        node = self._node(target)
        d = node.dispatcher
        started = request.started if request.reports_started else None
        ok = d.heartbeat(
            request.name, request.running, self._now(node), started, request.finished, partial=request.partial
        )
        if ok:
            d.executor_report(request.name, executor_health(request))
        return pb.HeartbeatReply(epoch=d.epoch, registered=ok, leader_now_ms=self.sim.now(node.node_id))

    def report(self, target: str, request: pb.ReportRequest) -> pb.ReportReply:
        node = self._node(target)
        if self.refuse_reports > 0:
            self.refuse_reports -= 1
            raise TransportError("unavailable", "the write was not confirmed in time; its outcome is unknown")
        now = self._now(node)
        for proposal in node.dispatcher.report(request.name, request.results, now):
            refused = self._commit(node, proposal.encode()).refused
            again = node.dispatcher.refused_hot(proposal, refused, request.name, request.results, now)
            if again is not None:
                self._commit(node, again.encode())
        return pb.ReportReply(acknowledged=[r.execution_id for r in request.results])

    def drain(self, target: str, request: pb.DrainRequest) -> pb.DrainReply:
        node = self._node(target)
        cmd = logpb.Command(epoch=node.dispatcher.epoch, now_ms=self._now(node), origin=node.node_id)
        cmd.drain_executor.name = request.name
        cmd.drain_executor.reason = request.reason or "executor shutting down"
        cmd.drain_executor.health = request.health
        cmd.drain_executor.resume = request.resume
        self._commit(node, codec.encode_command(cmd))
        return pb.DrainReply()

    def leave(self, target: str, request: pb.LeaveRequest) -> pb.LeaveReply:
        node = self._node(target)
        now = self._now(node)
        cmd = logpb.Command(epoch=node.dispatcher.epoch, now_ms=now, origin=node.node_id)
        cmd.executor_leave.name = request.name
        cmd.executor_leave.reason = "left"
        cmd.executor_leave.retry_at_ms = now
        self._commit(node, codec.encode_command(cmd))
        return pb.LeaveReply()

    def deliver(self, node_id: str, executor: str, item: pb.WorkItem) -> None:
        """Send a dispatched item down the executor's stream to ``node_id``, if it has one open;
        otherwise it is re-sent when the executor reconnects, or its lease expires."""
        stream = self.streams.get((node_id, executor))
        if stream is not None and stream.open and node_id not in self.undelivered:
            stream.push([item])

    def hang_up(self, node_id: str, crashed: bool) -> None:
        """Every stream to ``node_id`` ends (it stopped leading) or breaks (it crashed)."""
        for key in [k for k in self.streams if k[0] == node_id]:
            stream = self.streams.pop(key)
            if crashed:
                stream.fail(TransportError("unavailable", f"{node_id} is down"))
            else:
                stream.close()


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
        max_skew_ms: int = DEFAULT_MAX_SKEW_MS,
        health: HealthSettings | None = None,
        columns: bool = False,
        max_dispatch_backlog: int = 0,
    ) -> None:
        # ``max_dispatch_backlog``: the leader holds fire planning at this many waiting attempts
        # ([scheduler] max_dispatch_backlog; 0, no limit, unless asked for: old scenarios stay).
        self.max_dispatch_backlog = max_dispatch_backlog
        # ``columns``: every node is of this build and reports its command format, so a leader
        # builds the columnar hot-path bodies (raftsched.leader.formats); off unless asked for
        # (old scenarios' logs and the golden digests stay).
        self.columns = columns
        self.dispatch = dispatch or DispatchSettings(
            lease_ms=2000, heartbeat_ms=300, retry_base_ms=200, stream_grace_ms=600
        )
        self.seed = seed
        self.max_skew_ms = max_skew_ms
        # Fleet-health and clock-skew alerts (raftsched.alerts.health), checked by the leader
        # every tick as a node's alert loop does; off unless asked for (old scenarios' logs stay).
        self.health = HealthMonitor(health) if health is not None else None
        self._health_epoch = 0
        self.executors: dict[str, SimExecutorProcess] = {}
        self.endpoint = _SimEndpoint(self)
        self.clock = ManualClock(start_ms)
        self.cluster = SimCluster(list(node_ids))
        self.misfire = misfire or MisfireSettings()
        self.retention = retention or Retention()
        self.step_ms = step_ms
        self.nodes: dict[str, SimNodeState] = {}
        self.paused: set[str] = set()  # SIGSTOPped: see pause()
        # Nodes to pause in the next round right after their fire batches commit, before their
        # dispatcher assigns the new runs: "committed, not dispatched" (see pause_after_fires).
        self._pause_after_fires: set[str] = set()
        self._keys = itertools.count(1)
        for n in self.cluster.nodes:
            self._boot(n, MemoryStore())
        self.cluster.on_role_change = self._role_changed
        self.cluster.install_snapshot = self._install_snapshot

    # -- nodes -----------------------------------------------------------------------------------

    def _boot(self, node_id: str, store: MemoryStore) -> None:
        offset = self.nodes[node_id].clock_offset_ms if node_id in self.nodes else 0
        core = Core(
            node_id,
            store,
            SchedulerState.load(store, self.retention),
            clock=_NodeClock(self, node_id),
            consensus=lambda: self.cluster.nodes[node_id],
            dispatch=self.dispatch,
            rng=random.Random(self.seed),
            misfire=self.misfire,
            max_skew_ms=self.max_skew_ms,
            max_dispatch_backlog=self.max_dispatch_backlog,
            members=lambda: len(self.nodes),
            member_formats=MemberFormats(lambda: (), own_format=lambda: codec.COMMAND_FORMAT)
            if self.columns
            else None,
        )
        # Effects reach the dispatcher at once (a node hands them to its event loop).
        core.to_dispatcher = lambda effects: core.dispatch_effects(effects, self.now(node_id))
        node = SimNodeState(
            node_id,
            store,
            core.state,
            core.replica,
            core.driver,
            core.dispatcher,
            offset,
            core.clock_watch,
        )
        self.nodes[node_id] = node
        replica = node.replica
        self.cluster.restart(node_id, replica.apply_entry, replica.last_applied, replica.end_of_tick)

    def _install_snapshot(self, target: str, source: str) -> int:
        """A snapshot install (SimFaults.snapshot_catch_up): ``target``'s store becomes a copy of
        ``source``'s and its state is reloaded from it, as a real node's ``_load_snapshot``."""
        image = self.nodes[source].store
        node = self.nodes[target]
        node.store.replace_all(image.scan(b"", b"\xff" * 512), image.applied_index())
        node.replica.reset_from_store()  # one thread: no reader to hold off with the state's lock
        return node.store.applied_index()

    def _role_changed(self, node_id: str, leader: bool, term: int) -> None:
        node = self.nodes[node_id]
        if leader:
            self._propose(node, node.driver.become_leader(term, self.now(node_id)))
        else:
            node.driver.step_down()
            node.dispatcher.step_down()
            self.endpoint.hang_up(node_id, crashed=False)

    def now(self, node_id: str) -> int:
        return self.clock.now_ms() + self.nodes[node_id].clock_offset_ms

    def elect(self, node_id: str) -> int:
        term = self.cluster.elect(node_id)
        self.settle()
        return term

    def crash(self, node_id: str) -> None:
        self.nodes[node_id].driver.step_down()
        self.cluster.crash(node_id)
        self.endpoint.hang_up(node_id, crashed=True)

    def pause(self, node_id: str) -> None:
        """SIGSTOP the node: it does nothing and answers nobody (executors' calls time out), and
        it is cut off from the log; if it led, it still believes it does (nobody can tell it)."""
        self.paused.add(node_id)
        self.cluster.partition(node_id)

    def pause_after_fires(self, node_id: str) -> None:
        """In the next :meth:`tick`, pause ``node_id`` just after the fires it plans commit: its
        runs are in the log, their attempts not assigned or sent to any executor."""
        self._pause_after_fires.add(node_id)

    def resume(self, node_id: str) -> None:
        """SIGCONT: the node hears the current term (a leader of an older one steps down) and
        catches up on the log."""
        self.paused.discard(node_id)
        self.cluster.heal(node_id)
        node = self.cluster.nodes[node_id]
        if node.believes_leader and self.cluster.leader != node_id:
            node.term = self.cluster.term
            self.cluster.step_down(node_id)
        self.settle()

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
        driver; the leader's dispatcher places work and sends it down the executors' streams;
        then each executor's event loop runs until it is idle at this time (it takes work,
        finishes commands, heartbeats, reports and reconnects as its own timers say)."""
        self._clock_round()
        for node in self.nodes.values():
            sim_node = self.cluster.nodes[node.node_id]
            if sim_node.up and sim_node.believes_leader and node.node_id not in self.paused:
                for proposal in node.driver.poll(self.now(node.node_id)):
                    self._propose(node, proposal)
        self.settle()
        for node_id in sorted(self._pause_after_fires):
            self.pause(node_id)
        self._pause_after_fires.clear()
        if self.executors:
            self._executors_round()
        if self.health is not None:
            self._health_round()

    def _health_round(self) -> None:
        """The leader's fleet-health check, as :class:`raftsched.alerts.delivery.AlertLoop` runs
        it: its events are proposed in one RaiseAlerts."""
        leader = self.leader
        monitor = self.health
        if monitor is None or leader is None or not self._reachable(leader):
            return
        node = self.nodes[leader]
        d = node.dispatcher
        if not d.leading or node.watch is None:
            return
        if d.epoch != self._health_epoch:
            self._health_epoch = d.epoch
            monitor.reset()
        now = leader_time(self.now(leader), node.state.max_now_ms)
        events = monitor.check(fleet_view(d, now, node.watch.view(leading=True)))
        if events:
            data = writes.raise_alerts(events, now_ms=now, epoch=d.epoch, origin=leader, key="")
            self.cluster.nodes[leader].propose(data, _ignore)
            self.settle()

    def _reachable(self, node_id: str) -> bool:
        return (
            self.cluster.nodes[node_id].up and self.cluster.connected(node_id) and node_id not in self.paused
        )

    def _clock_round(self) -> None:
        """The clock exchange the leader's Raft appends carry (raftsched.clockwatch), with no
        network delay: the leader samples every reachable follower's clock and tells each its
        offset and skew. A leader whose clock is off the majority's hands leadership to a
        reachable follower whose clock is not (Raft TimeoutNow), as a real node does."""
        leader = self.leader
        if leader is None or not self._reachable(leader):
            return
        watch = self.nodes[leader].watch
        assert watch is not None
        followers = [n for n in self.nodes if n != leader and self._reachable(n)]
        for f in followers:
            watch.peer_sample(f, self.now(f), self.clock.monotonic())
        for f in followers:
            fw = self.nodes[f].watch
            assert fw is not None
            fw.told(*watch.advice_for(f))
        if not self.cluster.nodes[leader].believes_leader or not watch.view(leading=True).faulty:
            return
        for f in followers:
            fw = self.nodes[f].watch
            assert fw is not None
            if not fw.view(leading=False).faulty:
                self.elect(f)
                old = self.cluster.nodes[leader]
                if old.believes_leader:  # the new term reaches it at once (TimeoutNow's election)
                    old.term = self.cluster.term
                    self.cluster.step_down(leader)
                return

    # -- executors --------------------------------------------------------------------------------

    def add_executor(
        self,
        name: str,
        slots: int = 4,
        duration_ms: int = 300,
        *,
        cpu: float = 0.0,
        memory_mb: int = 0,
        labels: dict[str, str] | None = None,
        execution_log_keep: str | float | None = DEFAULT_EXECUTION_LOG_KEEP,
        failing: set[str] | None = None,
        prefetch: int = 0,
        durations: dict[str, int] | None = None,
    ) -> SimExecutorProcess:
        """Start an executor process (it registers with the leader at once, if there is one),
        declaring ``cpu``/``memory_mb`` capacity and ``labels`` if given; its execution log
        forgets acknowledged ids after ``execution_log_keep`` (the agent's option); the commands
        of ``failing`` fail on it (exit 1); those of ``durations`` take their own time, not
        ``duration_ms``; ``prefetch``: the agent's (slots + prefetch registered, at most ``slots``
        run at once)."""
        proc = SimExecutorProcess(
            name,
            slots,
            duration_ms,
            cpu=cpu,
            memory_mb=memory_mb,
            labels=dict(labels or {}),
            execution_log_keep=execution_log_keep,
            failing=failing if failing is not None else set(),
            prefetch=prefetch,
            durations=dict(durations or {}),
        )
        self.executors[name] = proc
        self._start(proc)
        return proc

    def _start(self, proc: SimExecutorProcess) -> None:
        loop = _SimLoop(self.clock)
        agent = Executor(
            [_address(n) for n in self.nodes],
            proc.name,
            slots=proc.slots,
            cpu=proc.cpu,
            memory_mb=proc.memory_mb,
            labels=proc.labels,
            clock=self.clock,
            transport=MemoryTransport(self.endpoint, silent=self._silent),
            execution_log=proc.log,
            command_runner=_SimCommands(
                self.clock, proc.duration_ms, proc.executions, proc.failing, proc.durations
            ),
            execution_log_keep=proc.execution_log_keep,
            health_probe=lambda: (proc.disk_used, proc.log_used),
            prefetch=proc.prefetch,
        )
        proc.agent, proc.loop = agent, loop
        proc.task = loop.create_task(agent.run())
        loop.run_until_idle()

    def _silent(self, target: str) -> bool:
        """A paused node answers no call: it times out (as a SIGSTOPped process's do)."""
        return target.split(".sim:")[0] in self.paused

    def crash_executor(self, name: str) -> None:
        """Kill the executor process: its attempts stop where they are; its log survives."""
        proc = self.executors[name]
        if proc.loop is None or proc.task is None:
            return
        proc.task.cancel()
        proc.loop.run_until_idle()
        proc.loop.close()
        proc.agent = proc.loop = proc.task = None

    def restart_executor(self, name: str) -> None:
        """Start a crashed executor again on its surviving log (it reports what was interrupted)."""
        proc = self.executors[name]
        if not proc.up:
            self._start(proc)

    def close(self) -> None:
        """Stop every executor process (call at the end of a test that added executors)."""
        for name in self.executors:
            self.crash_executor(name)

    def _executors_round(self) -> None:
        leader = self.leader
        if leader is not None and self.cluster.nodes[leader].believes_leader:
            d = self.nodes[leader].dispatcher
            watch = self.nodes[leader].watch
            if d.leading and not (watch is not None and watch.faulty()):  # as ExecutorHub._tick
                now = self.now(leader)
                for proposal in d.poll(now):
                    if proposal.kind == "assign":
                        # Whatever the assignment did not turn into a lease may be placed again.
                        self.cluster.nodes[leader].propose(
                            proposal.encode(), functools.partial(_release, d, proposal)
                        )
                    else:
                        self.cluster.nodes[leader].propose(proposal.encode(), _ignore)
                self.settle()
                for executor, item in d.take_outbox():
                    self.endpoint.deliver(leader, executor, item)
        for proc in self.executors.values():
            if proc.loop is not None:
                proc.loop.run_until_idle()

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
        return [expand(_parse(pb.Run, v)) for v in self._scan(keys.RUN, task, node_id)]

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


def _release(
    d: Dispatcher, proposal: DispatchProposal, result: bytes | None, error: ProposeError | None
) -> None:
    d.release(proposal)
