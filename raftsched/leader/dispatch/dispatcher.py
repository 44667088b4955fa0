"""The leader's dispatcher: committed attempts → executors, with leases, backpressure and retries.

Pure core (no IO, no clock; randomness enters as an injected ``random.Random``), driven by:

* :meth:`on_effects` ← effects of applied commands: ``AttemptReady`` (an attempt waits for an
  executor), ``DispatchAttempt`` (its assignment committed: send it), ``ExecutorChanged``;
* :meth:`heartbeat`, :meth:`results` ← executors (through the gRPC service);
* :meth:`stream_opened`, :meth:`stream_closed` ← an executor's dispatch stream: a stream that
  closes and is not reopened within ``stream_grace_ms`` declares its executor dead, well before
  the lease would (the lease stays the backstop for executors that vanish without a close);
* :meth:`poll(now)` → commands to propose: expired leases and silent executors (as lost
  attempts / a dead executor), and assignments of waiting attempts to the executor the ring
  picks, never beyond its free slots, in start order (:mod:`raftsched.leader.queue`: priority,
  then nominal time), and only where the task's quotas and locks allow
  (:mod:`raftsched.fsm.policy`; an attempt held back is named in the command with the reason);
* :meth:`take_outbox` → work items to push to executor streams.

Commit before dispatch: a work item is produced only from a ``DispatchAttempt`` effect, i.e.
after the ``AssignAttempts`` entry naming that executor is committed and applied here. Leases
are leader-local (heartbeats are not replicated); a new leader grants every assigned attempt a
fresh lease and re-sends it to the same executor, whose execution log deduplicates it.

State reads: every read of the replicated state goes through a
:meth:`~raftsched.fsm.state.SchedulerState.view`, one per batch (a poll; up to EFFECTS_PER_VIEW
effects or pending attempts of a takeover), never one per attempt; the internal methods that read
take that view as ``v``. The applier thread changes the state between views, so nothing read in
one is trusted in the next without reading it again.

Takeover: every attempt of an unfinished run is *unresolved* for the new leader until an executor
says it has started it (a heartbeat lists it as started: an overlap with it is real), or its
result, loss or cancellation is applied, or a bound passes (see :meth:`Dispatcher.overlap_unknown`;
the driver holds the overlap decisions of its task meanwhile). That covers attempts the old
leader committed and never delivered: assigned to an executor whose first heartbeat to this
leader does not list it (it is sent again at once, the executor deduplicates), or committed and
not assigned yet (placed now). Attempts that become ready while some executor has not reached
this leader yet are unresolved the same way: a run waiting for its executor to find this leader
has not started, and a fire decided against it would be skipped on a run that never ran.

Unstarted attempts: a lease knows whether its attempt started (``Lease.started``: False from
the dispatch until a heartbeat lists it as started, None when this leader cannot know, e.g.
after a takeover, until a heartbeat says). An attempt lost while known unstarted is reported
with ``unstarted``: the state machine re-places it under the next attempt number (so the dead
executor's late start or result is refused) without consuming a retry.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from raftsched import codec
from raftsched.fsm.effects import AttemptReady, DispatchAttempt, Effect, ExecutorChanged, RunCancelled
from raftsched.fsm.policy import Need as PolicyNeed
from raftsched.fsm.policy import Reservations, lock_reason
from raftsched.fsm.state import SchedulerState
from raftsched.fsm.view import StateView
from raftsched.fsm.workflows import is_internal, split_internal, trigger_name
from raftsched.leader.queue import StartOrder, WaitQueue, start_order
from raftsched.model import Lock, execution_id
from raftsched.sharding.placement import NO_NEED, ExecutorUsage, Need, fits_now
from raftsched.sharding.ring import ShardRing, shard_order
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb

# Effects (or a takeover's pending attempts) handled per state view: the applier waits while a
# view is open, so a batch of thousands is taken in pieces.
EFFECTS_PER_VIEW = 256

# Wait reasons named in one AssignAttempts command: bounded, to keep the entry well under the
# Raft entry size limit when a whole backlog starts waiting at once.
MAX_WAITS_PER_COMMAND = 200
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class DispatchSettings:
    lease_ms: int = 10_000  # an assigned attempt whose executor stays silent this long is lost
    heartbeat_ms: int = 2_000  # executors heartbeat this often
    grace_ms: int = 5_000  # SIGTERM -> SIGKILL grace; part of the timeout backstop
    retry_base_ms: int = 10_000  # first retry after ~this long, doubling per attempt...
    retry_cap_ms: int = 900_000  # ...up to this (15 min)
    retry_jitter: float = 0.2  # plus up to 20 % random jitter, drawn here and written to the log
    max_assign_per_command: int = 1000
    # A dispatch stream that closed (its executor's process died, or its connection reset) and
    # was not reopened this long declares the executor dead. Longer than a reconnect takes
    # (register + stream: well under a second), shorter than the lease.
    stream_grace_ms: int = 3_000


@dataclass(slots=True)
class Lease:
    execution_id: str
    run_id: str
    task: str
    shard: int
    attempt: int
    executor: str
    expires_ms: int
    deadline_ms: int  # timeout backstop (0 = none): lost even if heartbeats continue
    backfill: bool = False
    assigned_ms: int = 0  # when the attempt was assigned (replicated; survives leader changes)
    # Whether the executor has started it: False from this leader's first dispatch until a
    # heartbeat lists it as started; None when unknown (re-sent after a takeover). Only False
    # makes a loss "unstarted" (not a try); True never goes back.
    started: bool | None = None


def _held_names(task: str) -> tuple[str, ...]:
    """The tasks whose overlap decisions an inherited attempt of ``task`` holds: the task itself
    and, for a workflow task, its workflow's trigger (a scheduled workflow's next fire is skipped
    while a run of it is unfinished, and the attempt's result may be what finishes that run)."""
    if is_internal(task):
        workflow, _ = split_internal(task)
        return (task, trigger_name(workflow))
    return (task,)


@dataclass(slots=True)
class _Inherited:
    """An unresolved attempt (see the module docstring): RUNNING in the log when this leader
    took over with no word yet from its executor (its result may be on the way, or it never
    reached the executor), or waiting to be placed and started. Overlap decisions for its task
    wait (see :meth:`Dispatcher.overlap_unknown`)."""

    task: str
    run_id: str
    shard: int
    attempt: int
    # The wait ends here whatever happens: the takeover grace plus one lease, the moment its
    # first lease would expire unheard (a later result or loss proposal gets one lease to apply).
    until_ms: int
    # Its result or loss has been proposed: the wait ends once the state no longer has the
    # attempt RUNNING (applied), not before - a fire planned earlier would enter the log ahead.
    settling: bool = False


@dataclass(slots=True)
class _Waiting:
    ready: AttemptReady
    order: StartOrder  # its place in the executor's queue (raftsched.leader.queue)
    owner: str = ""  # the ring's executor for this shard (cached; recomputed when the ring changes)
    reserved_for: str = ""  # an AssignAttempts naming this executor is in flight
    need: Need = NO_NEED  # cpu, memory and labels it needs (NO_NEED: slots only, owner first)
    candidates: tuple[str, ...] = ()  # for a declared need: executors in ring order it may use
    task_owner: str = ""  # the task's owner, namespace and locks (quota and lock checks)
    namespace: str = ""
    locks: tuple[Lock, ...] = ()
    reason: str = ""  # the wait reason last proposed for it (sent again only when it changes)


@dataclass
class Dispatcher:
    state: SchedulerState
    settings: DispatchSettings = field(default_factory=DispatchSettings)
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    epoch: int = 0
    leading: bool = False
    ring: ShardRing = field(default_factory=lambda: ShardRing(()))  # where new attempts go
    # Live members, draining ones included: they heartbeat, hold leases and can be declared
    # dead, but the ring (placement) leaves them out.
    members: frozenset[str] = frozenset()
    waiting: dict[tuple[str, int], _Waiting] = field(default_factory=dict)
    # The same attempts by executor, in start order: a tick looks only at executors with free
    # slots and at the head of their queues (sorting and hashing every waiting attempt on every
    # tick made dispatch slow down as a backlog grew: bench/executors.py).
    queues: dict[str, WaitQueue[_Waiting]] = field(default_factory=dict)
    # Quotas and locks taken by assignments proposed but not applied yet.
    reserved: Reservations = field(default_factory=Reservations)
    used: dict[str, int] = field(default_factory=dict)  # leases + reservations per executor
    leases: dict[str, Lease] = field(default_factory=dict)  # by execution id
    last_seen: dict[str, int] = field(default_factory=dict)  # executor -> last heartbeat
    outbox: list[tuple[str, pb.WorkItem]] = field(default_factory=list)
    declared_dead: set[str] = field(default_factory=set)
    # Backfill attempts reserved or leased, by (run id, shard): capped at the workflow's share of
    # all executor slots, and placed only where regular work left a slot free.
    backfill_busy: set[tuple[str, int]] = field(default_factory=set)
    backfill_waiting: int = 0  # waiting attempts that are backfill (skip their pass when none)
    # Executors that may only receive work of some namespaces (their token's, auth on); the
    # others take any task. Empty in a cluster without auth, so placement pays nothing for it.
    restricted: dict[str, frozenset[str]] = field(default_factory=dict)
    # Waiting attempts that declare cpu, memory or labels, in arrival order: they walk the ring
    # to the first executor with room, so they are kept apart from the per-owner queues.
    sized: dict[tuple[str, int], _Waiting] = field(default_factory=dict)
    # cpu and memory held per executor by leased and reserved attempts (slots are in `used`).
    held: ExecutorUsage = field(default_factory=ExecutorUsage)
    # Attempts whose state a new leader does not know yet, by execution id (see _Inherited), and
    # how many of them each task has: its fires wait (overlap_unknown) instead of being decided
    # on stale state. Written on the dispatcher's thread; the driver's thread reads unknown_tasks.
    inherited: dict[str, _Inherited] = field(default_factory=dict)
    unknown_tasks: dict[str, int] = field(default_factory=dict)
    settling: set[str] = field(default_factory=set)  # of inherited: result or loss proposed
    # Since the takeover, how the wait for inherited attempts ended: "running" (a heartbeat
    # said so), "applied" (their result, loss, executor's death or cancellation applied),
    # "bound" (the takeover grace plus one lease passed). For the leader's log line.
    hold_ends: dict[str, int] = field(default_factory=dict)
    # Executors whose dispatch stream closed: declared dead at this time unless they reopen one.
    stream_gone: dict[str, int] = field(default_factory=dict)
    # Members that have not heartbeated this leader since it took over, and until when attempts
    # that become ready meanwhile are unresolved (the takeover grace plus one lease).
    unconfirmed: set[str] = field(default_factory=set)
    takeover_until_ms: int = 0
    # Attempts assigned to an executor whose first heartbeat to this leader did not list them
    # (committed, never delivered): sent again at once. For the leader's log line.
    resent_unheld: int = 0

    # -- leadership ----------------------------------------------------------------------------

    def become_leader(self, epoch: int, now_ms: int) -> None:
        """Take over: every attempt in the state is waiting or re-sent with a fresh lease.

        ``leading`` turns True last, once every inherited attempt is registered: the driver's
        thread asks :meth:`overlap_unknown` meanwhile, and must not see this epoch led with the
        inherited attempts not counted yet (a fire decided in that window was skipped against a
        run that had finished: the failover test caught it)."""
        self.step_down()
        self.epoch = epoch
        with self.state.view() as v:
            self._rebuild_ring(v)
            pending = v.pending_attempts()
        # Takeover grace: executors first have to notice the old leader is gone (it may be paused,
        # not dead) and find this one. Give them one extra lease before declaring them, or their
        # attempts, lost (without it the chaos suite saw healthy executors declared dead).
        grace = now_ms + self.settings.lease_ms
        for name in sorted(self.members):
            self.last_seen[name] = grace
        self.unconfirmed = set(self.members)
        self.takeover_until_ms = grace + self.settings.lease_ms
        for chunk in _chunks(pending):
            with self.state.view() as v:
                for eff in chunk:
                    if isinstance(eff, AttemptReady):
                        self._wait(v, eff)
                        # Due to start (not in a retry's backoff) with an executor to start it:
                        # the old leader may have stopped before assigning it.
                        if eff.not_before_ms <= now_ms and self.members:
                            self._unresolved(
                                eff.task, eff.run_id, eff.shard, eff.attempt, self.takeover_until_ms
                            )
                        continue
                    if not self._assigned_now(v, eff):
                        continue  # resolved since ``pending`` was read (a report applied meanwhile)
                    self._lease_and_send(v, eff, grace, None)  # the old leader may have sent it
                    lease = self.leases.get(execution_id(eff.run_id, eff.shard, eff.attempt))
                    if lease is not None:
                        self._unresolved(eff.task, eff.run_id, eff.shard, eff.attempt, lease.expires_ms)
        self.leading = True

    def _unresolved(self, task: str, run_id: str, shard: int, attempt: int, until_ms: int) -> None:
        """Hold the overlap decisions of ``task`` until this attempt is resolved (module docstring)."""
        exec_id = execution_id(run_id, shard, attempt)
        if exec_id not in self.inherited:
            self.inherited[exec_id] = _Inherited(task, run_id, shard, attempt, until_ms)
            for name in _held_names(task):
                self.unknown_tasks[name] = self.unknown_tasks.get(name, 0) + 1

    def overlap_unknown(self, task: str, epoch: int = 0) -> bool:
        """Whether an attempt of ``task`` was running when this node took over and its state is
        not known here yet: an overlap decision for a new fire would rest on stale state.

        Known means: its executor listed it as started and still running in a heartbeat (the
        overlap is real), or its result, its loss or its executor's death has been *applied* (the
        state is current for it), or the bound passed (the takeover grace plus one lease). A
        heartbeat that lists it among results waiting to be acknowledged does not count: the run
        has ended, its result is on the way; nor does one that lists it as held but not started,
        or does not list it (it was never delivered: it is sent again, and known once it starts
        or ends). An attempt that became ready while an executor had not reached this leader yet
        is unknown the same way until it starts.

        With ``epoch`` (the leader driver's), also True while this dispatcher has not taken over
        for that epoch yet (it learns of the barrier on another thread). Any thread may ask."""
        if epoch and (not self.leading or self.epoch != epoch):
            return True
        return task in self.unknown_tasks

    def _known(self, exec_id: str, why: str) -> None:
        """The state of inherited attempt ``exec_id`` is known now (``why``: see
        :attr:`hold_ends`): stop waiting for it."""
        h = self.inherited.pop(exec_id, None)
        if h is not None:
            self.settling.discard(exec_id)
            self.hold_ends[why] = self.hold_ends.get(why, 0) + 1
            for name in _held_names(h.task):
                left = self.unknown_tasks.get(name, 0) - 1
                if left > 0:
                    self.unknown_tasks[name] = left
                else:
                    self.unknown_tasks.pop(name, None)

    def _settling(self, exec_id: str, now_ms: int) -> None:
        """The result or loss of ``exec_id`` is proposed: it is known once applied."""
        h = self.inherited.get(exec_id)
        if h is not None and not h.settling:
            h.settling = True
            h.until_ms = max(h.until_ms, now_ms + self.settings.lease_ms)
            self.settling.add(exec_id)

    def _settle(self, v: StateView, now_ms: int | None) -> None:
        """Stop waiting for inherited attempts whose proposed result or loss is applied (the
        state no longer has them RUNNING), and, with ``now_ms``, for those past their bound."""
        for exec_id in sorted(self.settling):
            if not self._running(v, self.inherited[exec_id]):
                self._known(exec_id, "applied")
        if now_ms is not None:
            for exec_id, h in list(self.inherited.items()):
                if h.until_ms <= now_ms:
                    self._known(exec_id, "bound")

    def _running(self, v: StateView, h: _Inherited) -> bool:
        run = v.active_run(h.run_id)
        if run is None or h.shard >= len(run.shards):
            return False
        shard = run.shards[h.shard]
        return shard.attempt == h.attempt and shard.state == pb.RUNNING

    def step_down(self) -> None:
        self.leading = False
        self.waiting.clear()
        self.queues.clear()
        self.used.clear()
        self.leases.clear()
        self.last_seen.clear()
        self.outbox.clear()
        self.declared_dead.clear()
        self.stream_gone.clear()
        self.backfill_busy.clear()
        self.backfill_waiting = 0
        self.sized.clear()
        self.held.clear()
        self.unknown_tasks.clear()
        self.inherited.clear()
        self.settling.clear()
        self.hold_ends.clear()
        self.reserved.clear()
        self.unconfirmed.clear()
        self.resent_unheld = 0

    def _rebuild_ring(self, v: StateView) -> None:
        # Derived from the replicated membership on every change: identical on every node.
        self.ring = ShardRing(v.placeable_executors())
        self.members = frozenset(v.live_executors())
        self.restricted = v.restricted_executors()
        self.queues.clear()
        for key, w in self.waiting.items():
            if w.need is not NO_NEED:
                w.candidates = self._candidates(v, w.ready.task, w.ready.shard)
                continue
            w.owner = self._owner(v, w.ready.task, w.ready.shard)
            self._queue(w.owner).add(key, w)

    def _queue(self, executor: str) -> WaitQueue[_Waiting]:
        queue = self.queues.get(executor)
        if queue is None:
            queue = self.queues[executor] = WaitQueue()
        return queue

    def _candidates(self, v: StateView, task: str, shard: int) -> tuple[str, ...]:
        """Where the shard may go, best first: the task's ring walk without executors barred from
        its namespace, rotated to start at the shard's own place (:func:`shard_order`), so the
        shards of one run spread over distinct executors among those allowed."""
        walk = self.ring.walk(task)
        if self.restricted:
            namespace = v.task_namespace(task)
            walk = tuple(n for n in walk if (a := self.restricted.get(n)) is None or namespace in a)
        return shard_order(walk, shard)

    def _owner(self, v: StateView, task: str, shard: int) -> str:
        """The executor whose queue the shard waits in: the first of :meth:`_candidates` ("" if
        none may take it: the attempt waits for one to join)."""
        if not self.restricted:
            return self.ring.owner(task, shard) or ""
        candidates = self._candidates(v, task, shard)
        return candidates[0] if candidates else ""

    def _wait(self, v: StateView, ready: AttemptReady) -> None:
        key = (ready.run_id, ready.shard)
        self._unwait(key)
        spec = v.task_spec(ready.task)
        w = _Waiting(
            ready,
            start_order(
                spec.priority if spec is not None else 5, ready.nominal_ms, ready.run_id, ready.shard
            ),
            self._owner(v, ready.task, ready.shard),
        )
        if spec is not None:
            w.task_owner, w.namespace, w.locks = spec.owner, spec.namespace, spec.locks
        self.waiting[key] = w
        need = v.need_hint(ready.task, ready.run_id)
        if need is not NO_NEED:
            # Declared cpu, memory or labels: it walks the ring instead of waiting for its owner.
            w.need, w.candidates, w.owner = need, self._candidates(v, ready.task, ready.shard), ""
            self.sized[key] = w
        else:
            self._queue(w.owner).add(key, w)
        if ready.backfill_share:
            self.backfill_waiting += 1

    def _unwait(self, key: tuple[str, int]) -> None:
        w = self.waiting.pop(key, None)
        if w is not None:
            if w.need is not NO_NEED:
                del self.sized[key]
                self.held.release(key)
            else:
                queue = self.queues.get(w.owner)
                if queue is not None:
                    queue.remove(key)
            if w.ready.backfill_share:
                self.backfill_waiting -= 1
            if w.reserved_for:
                self._use(w.reserved_for, -1)
                self.backfill_busy.discard(key)
                self.reserved.remove(key)

    def _drop_lease(self, exec_id: str) -> Lease | None:
        lease = self.leases.pop(exec_id, None)
        if lease is not None:
            self._use(lease.executor, -1)
            self.held.release((lease.run_id, lease.shard))
            self.backfill_busy.discard((lease.run_id, lease.shard))
        return lease

    def _use(self, executor: str, delta: int) -> None:
        self.used[executor] = max(0, self.used.get(executor, 0) + delta)

    # -- effects of applied commands -------------------------------------------------------------

    def on_effects(self, effects: Iterable[Effect], now_ms: int) -> None:
        if not self.leading:
            return
        for chunk in _chunks(tuple(effects)):
            with self.state.view() as v:
                self._on_effects(v, chunk, now_ms)
        if self.settling:
            with self.state.view() as v:
                self._settle(v, None)

    def _on_effects(self, v: StateView, effects: Sequence[Effect], now_ms: int) -> None:
        for eff in effects:
            if isinstance(eff, AttemptReady):
                self._wait(v, eff)
                if self.unconfirmed and eff.not_before_ms <= now_ms and now_ms < self.takeover_until_ms:
                    # An executor has not found this leader yet: the attempt may wait for it.
                    self._unresolved(eff.task, eff.run_id, eff.shard, eff.attempt, self.takeover_until_ms)
            elif isinstance(eff, DispatchAttempt):
                self._unwait((eff.run_id, eff.shard))
                self._lease_and_send(v, eff, now_ms)
            elif isinstance(eff, RunCancelled):
                self._cancel(eff)
            elif isinstance(eff, ExecutorChanged):
                self._rebuild_ring(v)
                if eff.alive:
                    self.last_seen[eff.name] = now_ms
                    self.declared_dead.discard(eff.name)
                    self.stream_gone.pop(eff.name, None)
                else:
                    self.unconfirmed.discard(eff.name)
                    # The state machine has re-queued (or failed) every attempt it held: its
                    # leases are void. Keeping them re-sent lost attempts when it reconnected.
                    for exec_id, lease in list(self.leases.items()):
                        if lease.executor == eff.name:
                            del self.leases[exec_id]
                            self.backfill_busy.discard((lease.run_id, lease.shard))
                            self.held.release((lease.run_id, lease.shard))
                            self._known(exec_id, "applied")  # the state is current for it
                    self.used.pop(eff.name, None)

    def _cancel(self, eff: RunCancelled) -> None:
        """A killed workflow run cancelled a task run: forget its attempts, stop the running ones."""
        for shard, attempt, executor in eff.attempts:
            self._unwait((eff.run_id, shard))
            if executor:
                exec_id = execution_id(eff.run_id, shard, attempt)
                self._drop_lease(exec_id)
                self._known(exec_id, "applied")  # the run is cancelled
                item = pb.WorkItem(execution_id=exec_id, run_id=eff.run_id, epoch=self.epoch, cancel=True)
                self.outbox.append((executor, item))

    def _lease_and_send(
        self, v: StateView, eff: DispatchAttempt, now_ms: int, started: bool | None = False
    ) -> None:
        """Lease the attempt to its executor and queue its work item. ``started``: what is known
        of it (False for a first dispatch: nothing has been sent yet)."""
        run = v.active_run(eff.run_id)
        spec = v.spec_for(eff.task, run.task_version if run is not None else 0)
        exec_id = execution_id(eff.run_id, eff.shard, eff.attempt)
        timeout = spec.timeout_ms if spec is not None else 0
        deadline = now_ms + timeout + self.settings.grace_ms + self.settings.lease_ms if timeout else 0
        old = self.leases.get(exec_id)
        if old is None:
            self._use(eff.executor, +1)
            need = v.need_hint(eff.task, eff.run_id)
            if need is not NO_NEED:
                self.held.take((eff.run_id, eff.shard), eff.executor, need)
        elif old.started is not None:
            started = old.started  # a re-send: what the executor said of it still holds
        # Silence counts from the assignment, or from the end of the executor's takeover grace if
        # this leader has not heard from it yet: an attempt assigned while its executor is still
        # finding the new leader must not expire before the executor itself would be declared dead
        # (the chaos soak lost a no-retry fire that way, 100 ms before the executor registered).
        heard = self.last_seen.get(eff.executor, now_ms)
        shard = run.shards[eff.shard] if run is not None and eff.shard < len(run.shards) else None
        self.leases[exec_id] = Lease(
            exec_id,
            eff.run_id,
            eff.task,
            eff.shard,
            eff.attempt,
            eff.executor,
            max(now_ms, heard) + self.settings.lease_ms,
            deadline,
            run is not None and run.backfill,
            (shard.assigned_ms if shard is not None else 0) or now_ms,
            started,
        )
        if run is not None and run.backfill:
            self.backfill_busy.add((eff.run_id, eff.shard))
        item = pb.WorkItem(
            execution_id=exec_id,
            run_id=eff.run_id,
            task=eff.task,
            nominal_ms=eff.nominal_ms,
            shard=eff.shard,
            attempt=eff.attempt,
            epoch=self.epoch,
        )
        if spec is not None:
            item.shards = spec.shards or 1
            item.command = spec.command
            item.handler = spec.handler
            item.params_json = spec.params_json
            item.timeout_ms = spec.timeout_ms
            item.runner = spec.runner
        if run is not None:
            if run.command:  # a workflow task: its templates rendered for this run
                item.command = run.command
            if run.params_json:
                item.params_json = run.params_json
            for key, value in run.env.items():
                item.env[key] = value
        self.outbox.append((eff.executor, item))

    def take_outbox(self) -> list[tuple[str, pb.WorkItem]]:
        out, self.outbox = self.outbox, []
        return out

    def resend_to(self, executor: str, now_ms: int) -> list[pb.WorkItem]:
        """Work items of every attempt leased to ``executor`` (it reconnected: its stream is new).

        Each lease starts afresh: the attempt may never have reached the executor before (it was
        assigned while the executor was still looking for this leader), and an old expiry would
        declare it lost the moment it starts - a duplicate run the chaos suite caught."""
        with self.state.view() as v:
            return self._resend_to(v, executor, now_ms)

    def _resend_to(self, v: StateView, executor: str, now_ms: int) -> list[pb.WorkItem]:
        items: list[pb.WorkItem] = []
        for lease in list(self.leases.values()):
            if lease.executor == executor:
                eff = self._still_assigned(v, lease)
                if eff is None:
                    continue  # superseded in the log: never re-send a lost or finished attempt
                before = len(self.outbox)
                self._lease_and_send(v, eff, now_ms, None)
                items.extend(item for _, item in self.outbox[before:])
                del self.outbox[before:]
        return items

    # -- executor events ---------------------------------------------------------------------------

    def heartbeat(
        self,
        executor: str,
        running: Iterable[str],
        now_ms: int,
        started: Iterable[str] | None = None,
        finished: Iterable[str] = (),
    ) -> bool:
        """Renew the leases the executor still holds. False: it is not a live member (re-register).

        ``started`` (None from an executor that does not report it): which of ``running`` have
        started; the others are known unstarted. Without it every running attempt counts as
        started (a loss is then always a try). ``finished``: which of ``running`` have ended
        there and wait for their report to be acknowledged (leases renewed, but not taken as
        still running).

        The executor's first heartbeat to this leader says which attempts it holds: an attempt
        leased to it that it does not list never reached it (the old leader committed it and
        stopped before its dispatch went out), so it is sent again at once, not after a lease."""
        if executor not in self.members:
            return False
        self.last_seen[executor] = now_ms
        began = None if started is None else set(started)
        ended = set(finished)
        held = list(running)
        if executor in self.unconfirmed:
            self.unconfirmed.discard(executor)
            self._resend_unheld(executor, set(held), now_ms)
        for exec_id in held:
            lease = self.leases.get(exec_id)
            if lease is not None and lease.executor == executor:
                lease.expires_ms = now_ms + self.settings.lease_ms
                is_started = began is None or exec_id in began
                if self.inherited and exec_id not in ended and is_started:
                    self._known(exec_id, "running")  # it runs: an overlap with it is real
                if is_started:
                    lease.started = True
                elif lease.started is None:
                    lease.started = False  # it holds the attempt and says it has not started it
        return True

    def _resend_unheld(self, executor: str, held: set[str], now_ms: int) -> None:
        """Send again every attempt leased to ``executor`` that it does not hold."""
        unheld = [
            (exec_id, lease)
            for exec_id, lease in sorted(self.leases.items())
            if lease.executor == executor and exec_id not in held
        ]
        if not unheld:
            return
        with self.state.view() as v:
            self._resend_leases(v, unheld, now_ms)

    def _resend_leases(self, v: StateView, unheld: list[tuple[str, Lease]], now_ms: int) -> None:
        for exec_id, lease in unheld:
            eff = self._still_assigned(v, lease)
            if eff is None:
                continue
            # lease.started stays as it was: the heartbeat may have left before the attempt
            # arrived on a newly opened stream, and a loss is a try unless known unstarted.
            self._lease_and_send(v, eff, now_ms, None)
            if exec_id in self.inherited:
                self.resent_unheld += 1

    @staticmethod
    def _assigned_now(v: StateView, eff: DispatchAttempt) -> bool:
        """Whether the log still has ``eff``'s attempt RUNNING on its executor (the takeover reads
        its pending attempts in one view and handles them in later ones)."""
        run = v.active_run(eff.run_id)
        if run is None or eff.shard >= len(run.shards):
            return False
        shard = run.shards[eff.shard]
        return shard.attempt == eff.attempt and shard.executor == eff.executor and shard.state == pb.RUNNING

    def _still_assigned(self, v: StateView, lease: Lease) -> DispatchAttempt | None:
        """The dispatch of ``lease``'s attempt if the log still has it RUNNING on that executor,
        None if it was superseded (lost, finished, re-placed): never re-send such an attempt."""
        run = v.active_run(lease.run_id)
        shard = run.shards[lease.shard] if run is not None and lease.shard < len(run.shards) else None
        if (
            run is None
            or shard is None
            or shard.attempt != lease.attempt
            or shard.executor != lease.executor
            or shard.state != pb.RUNNING
        ):
            return None
        return DispatchAttempt(
            lease.run_id, lease.task, run.nominal_ms, lease.shard, lease.attempt, lease.executor, self.epoch
        )

    def stream_opened(self, executor: str) -> None:
        """``executor`` opened a dispatch stream (it is reachable again)."""
        self.stream_gone.pop(executor, None)

    def stream_closed(self, executor: str, now_ms: int) -> None:
        """``executor``'s current dispatch stream closed (not replaced by a newer one): unless it
        opens another within ``stream_grace_ms``, :meth:`poll` declares it dead."""
        if self.leading and executor in self.members:
            self.stream_gone.setdefault(executor, now_ms + self.settings.stream_grace_ms)

    def unstarted_of(self, executor: str) -> list[str]:
        """Execution ids leased to ``executor`` that it is known not to have started, sorted."""
        return sorted(
            i for i, lease in self.leases.items() if lease.executor == executor and lease.started is False
        )

    def results(self, executor: str, results: Iterable[pb.ExecResult], now_ms: int) -> bytes | None:
        """A ReportResults command for the executor's results (None if none are known here)."""
        cmd = logpb.Command(epoch=self.epoch, now_ms=now_ms)
        cmd.report_results.SetInParent()
        for res in results:
            run_id, shard, attempt = _split(res.execution_id)
            if run_id is None:
                continue
            cmd.report_results.results.add(
                run_id=run_id,
                shard=shard,
                attempt=attempt,
                executor=executor,
                success=res.success,
                error=res.error,
                exit_code=res.exit_code,
                stdout_tail=res.stdout_tail,
                stderr_tail=res.stderr_tail,
                retry_at_ms=self.retry_at(attempt, now_ms),
                timed_out=res.timed_out,
                duration_ms=res.duration_ms,
                start_lateness_ms=res.start_lateness_ms if res.HasField("start_lateness_ms") else None,
            )
            self._drop_lease(res.execution_id)
            self._settling(res.execution_id, now_ms)
        return codec.encode_command(cmd) if cmd.report_results.results else None

    def retry_at(self, attempt: int, now_ms: int) -> int:
        """Exponential backoff with a cap and jitter; the jitter is drawn here, on the leader."""
        s = self.settings
        # The exponent is capped: base x 2**62 is past any cap, and an attempt number near 2**32
        # would otherwise build a half-gigabyte integer on the leader's event loop.
        delay = min(s.retry_cap_ms, s.retry_base_ms * 2 ** min(max(0, attempt - 1), 62))
        return now_ms + int(delay * (1 + self.rng.random() * s.retry_jitter))

    # -- timers ------------------------------------------------------------------------------------

    def poll(self, now_ms: int, free_slots: dict[str, int] | None = None) -> list[bytes]:
        """Commands to propose now: lost attempts, dead executors, and new assignments."""
        if not self.leading:
            return []
        out: list[bytes] = []
        lost = logpb.Command(epoch=self.epoch, now_ms=now_ms)
        lost.report_results.SetInParent()
        for exec_id, lease in list(self.leases.items()):
            silent = lease.expires_ms <= now_ms
            overdue = lease.deadline_ms and lease.deadline_ms <= now_ms
            if silent or overdue:
                why = (
                    f"lease expired: executor {lease.executor} silent for {self.settings.lease_ms} ms"
                    if silent
                    else f"timeout backstop: {lease.executor} did not finish in time"
                )
                unstarted = silent and lease.started is False
                lost.report_results.results.add(
                    run_id=lease.run_id,
                    shard=lease.shard,
                    attempt=lease.attempt,
                    lost=True,
                    error=why + (" before starting it" if unstarted else ""),
                    # Not a try: placed again at once (no backoff), elsewhere if the ring says so.
                    retry_at_ms=now_ms if unstarted else self.retry_at(lease.attempt, now_ms),
                    unstarted=unstarted,
                )
                self._drop_lease(exec_id)
                self._settling(exec_id, now_ms)
        if lost.report_results.results:
            out.append(codec.encode_command(lost))
        for name in sorted(self.members):
            seen = self.last_seen.get(name, now_ms)
            gone = self.stream_gone.get(name)
            if name in self.declared_dead:
                continue
            if now_ms - seen > self.settings.lease_ms:
                reason = f"no heartbeat for {now_ms - seen} ms"
            elif gone is not None and gone <= now_ms:
                reason = f"dispatch stream closed and not reopened within {self.settings.stream_grace_ms} ms"
            else:
                continue
            self.declared_dead.add(name)
            self.stream_gone.pop(name, None)
            cmd = logpb.Command(epoch=self.epoch, now_ms=now_ms)
            cmd.executor_leave.name = name
            cmd.executor_leave.dead = True
            cmd.executor_leave.reason = reason
            cmd.executor_leave.retry_at_ms = now_ms
            cmd.executor_leave.unstarted.extend(self.unstarted_of(name))
            out.append(codec.encode_command(cmd))
        with self.state.view() as v:  # one view for the tick: settling and every assignment
            if self.inherited:
                self._settle(v, now_ms)
            assign = self._assignments(v, now_ms, free_slots)
        if assign is not None:
            out.append(assign)
        return out

    def free_slots(self) -> dict[str, int]:
        """Slots per live executor that is not draining, minus its leased and reserved attempts
        (never negative)."""
        with self.state.view() as v:
            return self._free_slots(v.placeable_executors())

    def _free_slots(self, placeable: dict[str, int]) -> dict[str, int]:
        return {
            name: max(0, slots - self.used.get(name, 0))
            for name, slots in placeable.items()
            if name not in self.declared_dead
        }

    def _assignments(self, v: StateView, now_ms: int, free_slots: dict[str, int] | None) -> bytes | None:
        if not self.waiting:
            return None
        placeable = v.placeable_executors()
        free = free_slots if free_slots is not None else self._free_slots(placeable)
        cmd = logpb.Command(epoch=self.epoch, now_ms=now_ms)
        cmd.assign_attempts.SetInParent()
        budget = self.settings.max_assign_per_command
        total_slots = sum(placeable.values())
        remaining = dict(free) if self.sized else free
        admission = _Admission(v, now_ms, self.reserved, cmd)
        for owner in sorted(free):
            slots = free[owner]
            queue = self.queues.get(owner)
            if slots <= 0 or not queue:
                continue  # backpressure: its attempts wait for a free slot
            # Regular work first; backfill only in the slots it leaves, within its share.
            for backfill in (False, True) if self.backfill_waiting else (False,):
                for w in queue:
                    r = w.ready
                    if w.reserved_for or r.not_before_ms > now_ms or (r.backfill_share > 0) != backfill:
                        continue
                    need = admission.admit(w)
                    if need is False:
                        continue
                    if backfill:
                        cap = max(1, total_slots * r.backfill_share // 100)
                        if len(self.backfill_busy) >= cap:
                            break
                        self.backfill_busy.add((r.run_id, r.shard))
                    if need is not None:
                        self.reserved.add((r.run_id, r.shard), need)
                    w.reserved_for = owner
                    self._use(owner, +1)
                    cmd.assign_attempts.assignments.add(
                        run_id=r.run_id, shard=r.shard, attempt=r.attempt, executor=owner
                    )
                    slots -= 1
                    budget -= 1
                    if slots <= 0 or budget <= 0:
                        break
                if slots <= 0 or budget <= 0:
                    break
            if self.sized:
                remaining[owner] = slots
            if budget <= 0:
                break
        if self.sized and budget > 0:
            self._place_sized(v, now_ms, remaining, total_slots, budget, cmd, admission)
        if cmd.assign_attempts.assignments or cmd.assign_attempts.waits:
            return codec.encode_command(cmd)
        return None

    def _place_sized(
        self,
        v: StateView,
        now_ms: int,
        free: dict[str, int],
        total_slots: int,
        budget: int,
        cmd: logpb.Command,
        admission: _Admission,
    ) -> None:
        """Attempts with a declared need, oldest first: each goes to the first executor in ring
        order from its shard's position that has a free slot and the cpu, memory and labels it
        needs now (the check the state machine repeats at apply); none has room: it waits."""
        if not any(count > 0 for count in free.values()):
            return
        executors = v.executors
        for w in sorted(self.sized.values(), key=lambda w: w.order):  # priority, then oldest
            r = w.ready
            key = (r.run_id, r.shard)
            if w.reserved_for or r.not_before_ms > now_ms:
                continue
            policy = admission.admit(w)
            if policy is False:
                continue  # over quota or a lock is held: it waits (the state machine would refuse)
            if r.backfill_share and len(self.backfill_busy) >= max(1, total_slots * r.backfill_share // 100):
                continue
            target = ""
            for name in w.candidates:
                if free.get(name, 0) <= 0:
                    continue
                rec = executors.get(name)
                if rec is None or not rec.alive or rec.draining:
                    continue
                _, cpu, mem = self.held.used(name)
                if fits_now(w.need, rec.slots, rec.cpu, rec.memory_mb, rec.labels, (0, cpu, mem)):
                    target = name
                    break
            if not target:
                continue
            if r.backfill_share:
                self.backfill_busy.add(key)
            if policy is not None:
                self.reserved.add(key, policy)
            w.reserved_for = target
            self._use(target, +1)
            self.held.take(key, target, w.need)
            free[target] -= 1
            cmd.assign_attempts.assignments.add(
                run_id=r.run_id, shard=r.shard, attempt=r.attempt, executor=target
            )
            budget -= 1
            if budget <= 0:
                return

    def release(self, data: bytes) -> None:
        """An AssignAttempts proposal failed or was refused: its attempts may be placed again."""
        cmd = codec.decode_command(data)
        with self.state.view() as v:
            for a in cmd.assign_attempts.assignments:
                w = self.waiting.get((a.run_id, a.shard))
                if w is not None and w.reserved_for == a.executor:
                    w.reserved_for = ""
                    self._use(a.executor, -1)
                    self.held.release((a.run_id, a.shard))
                    self.backfill_busy.discard((a.run_id, a.shard))
                    self.reserved.remove((a.run_id, a.shard))
                    # Refused: perhaps the task's owner or locks changed since it started waiting.
                    spec = v.task_spec(w.ready.task)
                    if spec is not None:
                        w.task_owner, w.namespace, w.locks = spec.owner, spec.namespace, spec.locks

    @property
    def backlog(self) -> int:
        """Attempts waiting for an executor slot (their lateness is visible in run state)."""
        return len(self.waiting)


class _Admission:
    """The quota and lock check of one placement walk, the one every placement path asks (the
    ring owner's queues and the ring walk of attempts with a declared need alike).

    An attempt over a quota or wanting a held lock waits, named in the command with its reason
    (once per reason: sent again only when it changes). A lock an earlier attempt of the walk
    waits for is held for the later ones too, so a stream of shared holders cannot starve an
    exclusive waiter."""

    __slots__ = ("_has_quotas", "_now_ms", "_queued_locks", "_reserved", "_v", "_waits")

    def __init__(
        self,
        v: StateView,
        now_ms: int,
        reserved: Reservations,
        cmd: logpb.Command,
    ) -> None:
        self._v = v
        self._now_ms = now_ms
        self._reserved = reserved
        self._has_quotas = v.has_quotas
        self._queued_locks: set[str] = set()
        self._waits = cmd.assign_attempts.waits  # where the wait reasons are named

    def admit(self, w: _Waiting) -> PolicyNeed | Literal[False] | None:
        """False: ``w`` waits. Otherwise the policies to reserve for it (None: none apply)."""
        if not (self._has_quotas or w.locks):
            return None
        need = self._v.policy_need(w.task_owner, w.namespace, w.locks)
        if need is None:
            return None
        why = next((lock_reason(lk.name) for lk in need.locks if lk.name in self._queued_locks), "")
        why = why or self._v.policy_check(need, self._now_ms, self._reserved)
        if not why:
            return need
        self._queued_locks.update(lk.name for lk in need.locks if why == lock_reason(lk.name))
        if why != w.reason and len(self._waits) < MAX_WAITS_PER_COMMAND:
            w.reason = why  # (the rest are named in the next commands)
            r = w.ready
            self._waits.add(run_id=r.run_id, shard=r.shard, attempt=r.attempt, reason=why)
        return False


def _chunks(items: Sequence[T]) -> Iterator[Sequence[T]]:
    """``items`` in pieces of at most EFFECTS_PER_VIEW."""
    for i in range(0, len(items), EFFECTS_PER_VIEW):
        yield items[i : i + EFFECTS_PER_VIEW]


def _split(exec_id: str) -> tuple[str | None, int, int]:
    run_id, _, rest = exec_id.partition("/")
    shard, _, attempt = rest.partition("/")
    try:
        return run_id, int(shard), int(attempt)
    except ValueError:
        return None, 0, 0
