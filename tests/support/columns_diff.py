"""The differential harness of the columnar hot path (docs/dev/columnar.md, step 11).

Two single-node leaders (:class:`World`), each its own ``SchedulerState`` over a ``MemoryStore``
with the node's real leader parts (:class:`raftsched.server.core.Core`: driver, dispatcher, gate,
replica), take the same stream of events: time passing (the driver fires, the dispatcher
assigns), executors reporting (success, success with output, failure, timeout), executors going
silent (lost attempts), leaving and joining, and client writes (cancels, updates that change the
overlap or the trigger, disables, enables, deletes, creates) and reloads of the state from its
store. One world's leader may build columns (``columns=True``: its members' format gate open),
the other builds today's bodies only. The columnar bodies are thus built by the leader's own code
(:mod:`raftsched.leader.columns`, ``BatchBuilder.add_hot_many``), not by a copy of it.

:func:`differences` compares what the API shows of the two: task records and counters as reads
see them (``number`` aside: only the numbering world numbers), run show with its timeline for
every run either world knows, the run lists, fire accounting and recent fires, executor usage,
the attempts the executors hold, and the meaning of each step's effects (``ReadyColumns`` and
``DispatchColumns`` read as the ``AttemptReady``, ``TaskArmed`` and ``DispatchAttempt`` values
they stand for, by the same functions the leader reads them with).

Seeded from ``bench/attempt_apply.py``'s ``check_equivalence`` (its per-task counters and
finished-run records) and widened to every view a user reads.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from raftsched import codec
from raftsched.fsm import queries
from raftsched.fsm.effects import (
    AttemptReady,
    BarrierCommitted,
    DispatchAttempt,
    DispatchColumns,
    Effect,
    ExecutorChanged,
    ReadyColumns,
    RunCancelled,
    TaskArmed,
)
from raftsched.fsm.state import SchedulerState
from raftsched.leader import columns, writes
from raftsched.leader.dispatch.dispatcher import DispatchProposal
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.leader.formats import MemberFormats
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.server.core import Core
from raftsched.storage.memory import MemoryStore
from raftsched.timing.clock import ManualClock
from raftsched.timing.schedule import MisfireSettings
from raftsched.v1 import log_pb2 as pb
from raftsched.v1 import raftsched_pb2 as rpb

T0 = 1_800_000_000_000  # a whole minute
EXECUTORS = ("ex-a", "ex-b")
SLOTS = 3
SETTINGS = DispatchSettings(lease_ms=4000, heartbeat_ms=1000, grace_ms=1000)


def columns_apply() -> bool:
    """Whether this build's state machine applies the columnar bodies (NumberEntities is the first
    of them a leader proposes)."""
    state = SchedulerState.load(MemoryStore())
    return bool(state.apply(columns.number_entities(T0, 1, "n1")).result.ok)


def task_spec(i: int, variant: str = "hot") -> TaskSpec:
    """Task ``i`` in one of the shapes the stream switches between (``hot`` is the hot one)."""
    name = f"t{i}"
    if variant == "every2":
        return TaskSpec(name, CronTrigger("*/2 * * * * *"), overlap=Overlap.ALLOW, handler="noop")
    if variant == "skip":
        return TaskSpec(name, CronTrigger("* * * * * *"), overlap=Overlap.SKIP, handler="noop")
    if variant == "replace":
        return TaskSpec(name, CronTrigger("* * * * * *"), overlap=Overlap.REPLACE, handler="noop")
    if variant == "retry":
        return TaskSpec(
            name, CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, handler="noop", max_retries=2
        )
    return TaskSpec(name, CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, handler="noop")


@dataclass
class World:
    """One leader and its state; ``columns``: whether its gate lets it build columns."""

    columns: bool
    clock: ManualClock = field(default_factory=lambda: ManualClock(T0))
    store: MemoryStore = field(default_factory=MemoryStore)
    index: int = 0
    # What the executors hold: executor -> execution id -> its work item (in dispatch order).
    held: dict[str, dict[str, rpb.WorkItem]] = field(default_factory=dict)
    silent: set[str] = field(default_factory=set)
    step_effects: list[tuple[object, ...]] = field(default_factory=list)
    refused: int = 0
    bodies: Counter[str] = field(default_factory=Counter)  # entries the log took, by body

    def __post_init__(self) -> None:
        own = codec.COMMAND_FORMAT if self.columns else 0
        self.formats = MemberFormats(lambda: (), own_format=lambda: own)
        self.core = Core(
            "n1",
            self.store,
            SchedulerState.load(self.store),
            clock=self.clock,
            consensus=lambda: None,
            dispatch=SETTINGS,
            rng=random.Random(7),
            misfire=MisfireSettings(),
            max_skew_ms=10**12,
            members=lambda: 1,
            member_formats=self.formats,
        )
        self.core.to_driver = self._driver_effects
        self.core.to_dispatcher = self._dispatcher_effects
        # While set, the dispatcher's effects wait (a node's hub reads them on its event loop,
        # after the applier may have applied more entries: see tick_racing).
        self.holding: list[tuple[Effect, ...]] | None = None

    def _dispatcher_effects(self, effects: tuple[Effect, ...]) -> None:
        if self.holding is not None:
            self.holding.append(effects)
        else:
            self.core.dispatch_effects(effects, self.now)

    @property
    def state(self) -> SchedulerState:
        return self.core.state

    @property
    def now(self) -> int:
        return self.core.gate.now_ms()

    def _driver_effects(self, effects: tuple[Effect, ...]) -> None:
        self.step_effects.extend(meaning(self.state, effects, self.core.driver.epoch))
        self.core.driver.on_effects(effects)

    # -- the log ----------------------------------------------------------------------------------

    def commit(self, data: bytes) -> pb.CommandResult:
        self.index += 1
        raw = self.core.replica.apply_entry(self.index, data)
        self.core.replica.end_of_tick()
        result = pb.CommandResult.FromString(raw or b"")
        self.refused += result.refused
        return result

    def propose(self, data: bytes) -> pb.CommandResult:
        self.bodies[codec.decode_command(data).WhichOneof("body") or ""] += 1
        return self.commit(data)

    # -- the stream's events ------------------------------------------------------------------------

    def start(self, tasks: int) -> None:
        for name in EXECUTORS:
            self.join(name)
        specs = [(task_spec(i), False) for i in range(tasks)]
        commands, refused = writes.create_tasks(specs, now_ms=self.now, epoch=1, origin="n1", key="")
        assert not refused
        for data in commands:
            assert self.propose(data).ok
        driver = self.core.driver
        self.propose(driver.become_leader(1, self.clock.now_ms()).data)
        assert driver.ready and self.core.dispatcher.leading
        for name in EXECUTORS:
            self.core.dispatcher.stream_opened(name)
        self.settle()

    def join(self, name: str) -> None:
        self.propose(writes.executor_join(name, SLOTS, {}, now_ms=self.now, epoch=1, origin="n1"))
        self.held.setdefault(name, {})
        self.silent.discard(name)
        if self.core.dispatcher.leading:
            self.core.dispatcher.stream_opened(name)

    def settle(self) -> None:
        """Everything the leader decides now: fires, then lost attempts, dead executors and
        assignments, until it proposes nothing more; the work items go to their executors."""
        core = self.core
        for _ in range(20):
            proposed = False
            for p in core.driver.poll(self.clock.now_ms()):
                self.propose(p.data)
                core.driver.on_proposal_committed(p)
                proposed = True
            for dp in core.dispatcher.poll(self.now):
                self.propose(dp.encode())
                if dp.kind == "assign":
                    core.dispatcher.release(dp)
                proposed = True
            for executor, item in core.dispatcher.take_outbox():
                items = self.held.setdefault(executor, {})
                if item.cancel:
                    items.pop(item.execution_id, None)
                elif executor not in self.silent:
                    items[item.execution_id] = item
            if not proposed:
                return

    def tick(self, ms: int) -> None:
        self.clock.advance(ms)
        d = self.core.dispatcher
        for name, items in self.held.items():
            if name not in self.silent and name in d.members:
                d.heartbeat(name, list(items), self.now, started=list(items))
        self.settle()

    def tick_racing(self, ms: int, between: Callable[[int], bytes]) -> None:
        """As :meth:`tick`, but ``between(now)`` commits after the dispatcher's assignments and
        before the dispatcher reads their effects (its hub is on another thread than the applier)."""
        self.clock.advance(ms)
        core = self.core
        for name, items in self.held.items():
            if name not in self.silent and name in core.dispatcher.members:
                core.dispatcher.heartbeat(name, sorted(items), self.now, started=sorted(items))
        for p in core.driver.poll(self.clock.now_ms()):
            self.propose(p.data)
            core.driver.on_proposal_committed(p)
        self.holding = []
        proposals = core.dispatcher.poll(self.now)
        for dp in proposals:
            self.propose(dp.encode())
        self.propose(between(self.now))
        held, self.holding = self.holding, None
        for effects in held:
            core.dispatch_effects(effects, self.now)
        for dp in proposals:
            if dp.kind == "assign":
                core.dispatcher.release(dp)
        self.settle()

    def report(
        self, executor: str, count: int, outcome: str, lateness: int, duration: int, between: bytes = b""
    ) -> None:
        """``executor`` reports its first ``count`` attempts; ``between``: a command that commits
        after the leader built the report's commands and before they commit (a race)."""
        items = self.held.get(executor, {})
        # By execution id: a cycle's hot and cold assignments are two commands, so an executor
        # may receive them in another order (they start at the same time either way).
        done = sorted(items)[:count]
        if not done or executor in self.silent:
            return
        results = []
        for exec_id in done:
            del items[exec_id]
            res = rpb.ExecResult(execution_id=exec_id, duration_ms=duration, start_lateness_ms=lateness)
            if outcome == "ok":
                res.success = True
            elif outcome == "ok_output":
                res.success = True
                res.stdout_tail = "hello\n"
            elif outcome == "timeout":
                res.timed_out = True
                res.error = "timed out"
            else:
                res.exit_code = 3
                res.error = "exit code 3"
            results.append(res)
        proposals = self.core.dispatcher.report(executor, results, self.now)
        if between:
            self.propose(between)
        self.propose_report(executor, results, proposals)

    def propose_report(
        self, executor: str, results: list[rpb.ExecResult], proposals: list[DispatchProposal]
    ) -> None:
        """Propose a report's commands as the executor service does (a ResultColumns whose rows
        were refused is reported again by run id: Dispatcher.refused_hot), then settle."""
        d = self.core.dispatcher
        for proposal in proposals:
            refused = self.propose(proposal.encode()).refused
            again = d.refused_hot(proposal, refused, executor, results, self.now)
            if again is not None:
                self.propose(again.encode())
        self.settle()

    def go_silent(self, executor: str) -> None:
        """The executor stops heartbeating and loses what it held (its leases expire)."""
        self.silent.add(executor)
        self.held[executor] = {}

    def leave(self, executor: str) -> None:
        cmd = pb.Command(epoch=1, now_ms=self.now, origin="n1")
        cmd.executor_leave.name = executor
        cmd.executor_leave.reason = "removed"
        cmd.executor_leave.retry_at_ms = self.now
        self.propose(codec.encode_command(cmd))
        self.held[executor] = {}
        self.silent.add(executor)
        self.settle()

    def client(self, data: bytes) -> None:
        self.propose(data)
        self.settle()

    def reload(self) -> None:
        """The state rebuilt from its store (as after a snapshot install)."""
        self.state.reload()
        self.settle()


def meaning(state: SchedulerState, effects: Iterable[Effect], epoch: int) -> list[tuple[object, ...]]:
    """What ``effects`` ask the leader to do, as comparable values: a ``ReadyColumns`` is the
    ``AttemptReady`` and ``TaskArmed`` of each row, a ``DispatchColumns`` the ``DispatchAttempt``
    of each (read with the leader's own functions, :mod:`raftsched.leader.columns`)."""
    out: list[tuple[object, ...]] = []
    for eff in effects:
        if isinstance(eff, ReadyColumns):
            with state.view() as v:
                ready = columns.ready_attempts(v, eff, epoch)
                armed = [(name, nf, v.tasks[name].version) for name, nf in columns.armed_rows(v, eff)]
            out.extend(("ready", r.run_id, r.shard, r.attempt, r.not_before_ms) for r in ready)
            out.extend(("armed", name, version, nf) for name, nf, version in armed)
        elif isinstance(eff, DispatchColumns):
            with state.view() as v:
                sent = columns.dispatched_attempts(v, eff, epoch)
            out.extend(("dispatch", d.run_id, d.shard, d.attempt, d.executor) for d in sent)
        elif isinstance(eff, AttemptReady):
            out.append(("ready", eff.run_id, eff.shard, eff.attempt, eff.not_before_ms))
        elif isinstance(eff, TaskArmed):
            out.append(("armed", eff.task, eff.version, eff.next_fire_ms))
        elif isinstance(eff, DispatchAttempt):
            out.append(("dispatch", eff.run_id, eff.shard, eff.attempt, eff.executor))
        elif isinstance(eff, RunCancelled):
            out.append(("cancelled", eff.run_id, tuple(sorted(eff.attempts)), eff.reason))
        elif isinstance(eff, ExecutorChanged):
            out.append(("executor", eff.name, eff.alive))
        elif isinstance(eff, BarrierCommitted):
            out.append(("barrier", eff.node_id, eff.epoch))
        else:
            out.append(("other", repr(eff)))
    return out


def _armed_last(values: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    """Effects with only the last ``armed`` of each task kept (what the wheel ends with)."""
    last: dict[object, tuple[object, ...]] = {}
    rest: list[tuple[object, ...]] = []
    for value in values:
        if value[0] == "armed":
            last[value[1]] = value
        else:
            rest.append(value)
    return sorted(rest, key=repr) + sorted(last.values(), key=repr)


def _task(rec: pb.TaskRecord) -> pb.TaskRecord:
    """A task record as compared: without its number (only the numbering world numbers) and its
    ``kept_fires`` (a retention counter of stored FireRecords, which a hot FIRED fire does not
    write, by design: docs/dev/columnar.md, "Equivalent work"; the fire queries are compared)."""
    rec = pb.TaskRecord.FromString(rec.SerializeToString())
    rec.ClearField("number")
    rec.ClearField("kept_fires")
    return rec


def _pending(p: AttemptReady | DispatchAttempt) -> tuple[object, ...]:
    """A pending attempt as a new leader takes it over (a DispatchAttempt's copied run facts,
    ``known`` and the rest, are not part of what it is)."""
    if isinstance(p, AttemptReady):
        return (
            "ready",
            p.run_id,
            p.task,
            p.nominal_ms,
            p.shard,
            p.attempt,
            p.not_before_ms,
            p.backfill_share,
        )
    return ("assigned", p.run_id, p.nominal_ms, p.shard, p.attempt, p.executor)


def _of(live: list[pb.Run], task: str) -> list[pb.Run]:
    return [run for run in live if run.task == task]


def views(world: World, run_ids: Iterable[str]) -> dict[str, object]:
    """Every API-visible view of ``world`` this harness compares, as plain values."""
    state = world.state
    out: dict[str, object] = {}
    out["tasks"] = [_task(r).SerializeToString(deterministic=True) for r in state.list_tasks()]
    names = state.user_task_names()
    # As the admin servicer reads them (raftsched/rpc/admin.py GetRun, ListRuns, FireAccounting,
    # ListTasks' recent fires): the store, and the live hot runs, which have no record yet.
    live = state.live_hot_runs(names, 0, 0, 0)
    with world.store.reader() as r:
        out["runs"] = {
            run_id: (run.SerializeToString(deterministic=True) if run is not None else None)
            for run_id in sorted(run_ids)
            for run in [queries.stored_run(r, run_id) or state.live_hot_run(run_id)]
        }
        runs = [*queries.list_runs(r, names, 0, 0, 0, 10_000), *live]
        runs.sort(key=lambda x: (x.nominal_ms, x.run_id), reverse=True)
        out["list_runs"] = [x.SerializeToString(deterministic=True) for x in runs]
        out["fires"] = {
            name: [
                f.SerializeToString(deterministic=True)
                for f in queries.fire_records(r, name, 0, 0, 10_000, False, _of(live, name))
            ]
            for name in names
        }
        out["recent"] = {
            name: [
                (f.SerializeToString(deterministic=True), s)
                for f, s in queries.recent_fires(r, name, 20, _of(live, name))
            ]
            for name in names
        }
    with state.view() as v:
        out["usage"] = [(rec.name, rec.alive, used) for rec, used in v.executor_usage(True)]
        out["pending"] = sorted(_pending(p) for p in v.pending_attempts())
    out["held"] = {name: sorted(items) for name, items in sorted(world.held.items())}
    return out


def run_ids_of(*worlds: World) -> set[str]:
    """Every run id either world has dispatched or stores."""
    ids: set[str] = set()
    for w in worlds:
        for items in w.held.values():
            ids.update(item.run_id for item in items.values())
        with w.store.reader() as r:
            ids.update(run.run_id for run in queries.list_runs(r, w.state.user_task_names(), 0, 0, 0, 10_000))
    return ids


def differences(today: World, cols: World, skip: Iterable[str] = ()) -> list[str]:
    """Every view in which the two worlds differ (but those in ``skip``), and the meaning of this
    step's effects."""
    problems: list[str] = []
    ids = run_ids_of(today, cols)
    a, b = views(today, ids), views(cols, ids)
    for key in a:
        if key not in skip and a[key] != b[key]:
            problems.append(f"{key}: today {a[key]!r}\n  columns {b[key]!r}")
    ea, eb = _armed_last(today.step_effects), _armed_last(cols.step_effects)
    if ea != eb:
        problems.append(f"effects: today {ea!r}\n  columns {eb!r}")
    today.step_effects.clear()
    cols.step_effects.clear()
    return problems
