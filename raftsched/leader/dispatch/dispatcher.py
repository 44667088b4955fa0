"""The leader's dispatcher: committed attempts → executors, with leases, backpressure and retries.

Pure core (no IO, no clock; randomness enters as an injected ``random.Random``), driven by:

* :meth:`on_effects` ← effects of applied commands: ``AttemptReady`` (an attempt waits for an
  executor), ``DispatchAttempt`` (its assignment committed: send it), ``ExecutorChanged``;
* :meth:`heartbeat`, :meth:`results` ← executors (through the gRPC service);
* :meth:`stream_opened`, :meth:`stream_closed` ← an executor's dispatch stream: a stream that
  closes and is not reopened within ``stream_grace_ms`` declares its executor dead, well before
  the lease would (the lease stays the backstop for executors that vanish without a close);
* :meth:`poll(now)` → commands to propose (:class:`DispatchProposal` values): expired leases and
  silent executors (as lost attempts / a dead executor), and assignments of waiting attempts to
  the executor the ring picks, never beyond its free slots, in start order
  (:mod:`raftsched.leader.queue`: priority, then nominal time), and only where the task's quotas
  and locks allow (:mod:`raftsched.fsm.policy`; an attempt held back is named in the command with
  the reason; :mod:`.placement`);
  :meth:`release` ← an assignment proposal that failed;
* :meth:`take_work` → work to push to executor streams (a ``WorkItem``, or a hot row that a
  ``Session`` stream encodes as it is: :mod:`.work`); :meth:`take_outbox` the same as work items.

Commit before dispatch: a work item is produced only from a ``DispatchAttempt`` effect, i.e.
after the ``AssignAttempts`` entry naming that executor is committed and applied here. Leases
are leader-local (heartbeats are not replicated); a new leader grants every assigned attempt a
fresh lease and re-sends it to the same executor, whose execution log deduplicates it.

State reads: every read of the replicated state goes through a
:meth:`~raftsched.fsm.state.SchedulerState.view`, one per batch (a poll; up to EFFECTS_PER_VIEW
effects or pending attempts of a takeover), never one per attempt; the internal methods that read
take that view as ``v``. The applier thread changes the state between views, so nothing read in
one is trusted in the next without reading it again.

Leadership-scoped state: everything a leadership learns (waiting attempts, leases, what it heard
from executors, the attempts it inherited) lives in one :class:`Term`, built when this node takes
over and dropped when it steps down; a new leadership starts from a fresh one and the state.
The rooms of a term: :mod:`.placement` (the ring, the queues, the one admission check),
:mod:`.leases` (leases and what attempts hold, released in one place), :mod:`.liveness`
(heartbeats, streams, dead executors), :mod:`.takeover` (attempts a new leader inherited, the
overlap decisions they hold). :mod:`.hub` is the asyncio shell that proposes what this decides.

Unstarted attempts: an attempt lost while known unstarted (see :class:`.leases.Lease`) is
reported with ``unstarted``: the state machine re-places it under the next attempt number (so
the dead executor's late start or result is refused) without consuming a retry.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from raftsched import codec
from raftsched.fsm.effects import (
    AttemptReady,
    DispatchAttempt,
    DispatchColumns,
    Effect,
    ExecutorChanged,
    ReadyColumns,
    RunCancelled,
)
from raftsched.fsm.state import SchedulerState
from raftsched.fsm.view import StateView
from raftsched.leader import columns
from raftsched.leader.dispatch.leases import Holdings, Key, Lease
from raftsched.leader.dispatch.liveness import ExecutorHealth, Liveness
from raftsched.leader.dispatch.placement import HotAssignments, Placement, Waiting
from raftsched.leader.dispatch.settings import EFFECTS_PER_VIEW, DispatchSettings
from raftsched.leader.dispatch.takeover import Takeover
from raftsched.leader.dispatch.work import Work, WorkDef, to_item
from raftsched.model import execution_id
from raftsched.sharding.placement import NO_NEED, Need
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb

T = TypeVar("T")

# Cancels re-sent (see Dispatcher._stop_cancelled) remembered per term, at most.
_MAX_CANCELS_REMEMBERED = 10_000

# Parsed task specs kept at most (see Dispatcher._spec).
SPEC_CACHE_MAX = 50_000


@dataclass(frozen=True, slots=True)
class DispatchProposal:
    """A command the dispatcher asks its shell to propose, stamped with the term's epoch and the
    leader time it was decided at. It stays a message until :meth:`encode`, once, on its way
    into the log (the message is not to be changed).

    ``kind``: "assign" (assignments and wait reasons; give it back to :meth:`Dispatcher.release`
    once its proposal has completed, whatever the outcome), "lost" (attempts whose lease expired
    or whose timeout backstop passed), "dead" (an executor declared dead), "results" (an
    executor's reported results)."""

    kind: Literal["assign", "lost", "dead", "results"]
    command: logpb.Command
    # "assign": the ``((run id, shard), executor)`` pairs its assignments reserved, in the
    # command's order (kept here so :meth:`Dispatcher.release` need not read them back from it).
    assigned: tuple[tuple[Key, str], ...] = ()
    # "results" of a ResultColumns: the positions, in the executor's report, of its rows (see
    # :meth:`Dispatcher.refused_hot`).
    rows: tuple[int, ...] = ()

    def encode(self) -> bytes:
        return codec.encode_command(self.command)


class Term:
    """What one leadership knows, built when this node takes over and dropped when it steps down
    (nothing of it is carried into the next leadership)."""

    __slots__ = (
        "cancels_sent",
        "epoch",
        "holdings",
        "hot_assigned",
        "liveness",
        "outbox",
        "placement",
        "takeover",
    )

    def __init__(self, epoch: int, takeover_until_ms: int) -> None:
        self.epoch = epoch
        self.holdings = Holdings()
        self.placement = Placement(self.holdings)
        self.liveness = Liveness()
        self.takeover = Takeover(takeover_until_ms)
        # Work for executor streams, in order: work items, and rows of plain attempts (.work).
        self.outbox: list[tuple[str, Work]] = []
        # Cancels sent to executors that still listed a cancelled attempt: execution id -> when.
        self.cancels_sent: dict[str, int] = {}
        # Seqs of the AssignColumns rows proposed and not yet seen applied -> their run ids (a
        # run promoted to the cold path before its DispatchColumns is read is still sent).
        self.hot_assigned: dict[int, str] = {}


class Dispatcher:
    """Not thread-safe: one thread (the node's event loop) drives it, except
    :meth:`overlap_unknown`, which any thread may ask."""

    def __init__(
        self,
        state: SchedulerState,
        settings: DispatchSettings | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.state = state
        self.settings = settings or DispatchSettings()
        self.rng = rng or random.Random(0)
        self.epoch = 0  # of the last leadership taken (kept after stepping down)
        self._term: Term | None = None
        # task -> (its current version's stored spec bytes, the spec parsed from them, the work
        # items' fields from it): see _spec.
        self._specs: dict[str, tuple[bytes, pb.TaskSpec, WorkDef]] = {}
        # Every voting member applies the columnar bodies (raftsched.leader.formats); asked once
        # per poll and per report. The node's core sets it; alone, a dispatcher builds today's.
        self.columns_allowed: Callable[[], bool] = _never

    # -- leadership ----------------------------------------------------------------------------

    @property
    def leading(self) -> bool:
        return self._term is not None

    @property
    def term(self) -> Term | None:
        """The current leadership's state (None while not leading)."""
        return self._term

    def become_leader(self, epoch: int, now_ms: int) -> None:
        """Take over: every attempt in the state is waiting or re-sent with a fresh lease.

        The new term is published last, once every inherited attempt is registered: the driver's
        thread asks :meth:`overlap_unknown` meanwhile, and must not see this epoch led with the
        inherited attempts not counted yet (a fire decided in that window was skipped against a
        run that had finished: the failover test caught it).

        A second barrier of the same leadership (the driver proposes another when the first's
        outcome was unknown) changes nothing: the term goes on, with its reservations and the
        proposals in flight that made them."""
        if self._term is not None and self._term.epoch == epoch:
            return
        self.step_down()
        self.epoch = epoch
        # Takeover grace: executors first have to notice the old leader is gone (it may be paused,
        # not dead) and find this one. Give them one extra lease before declaring them, or their
        # attempts, lost (without it the chaos suite saw healthy executors declared dead).
        grace = now_ms + self.settings.lease_ms
        t = Term(epoch, grace + self.settings.lease_ms)
        with self.state.view() as v:
            t.placement.rebuild(v)
            pending = v.pending_attempts()
        t.liveness.take_over(t.placement.members, grace)
        for chunk in _chunks(pending):
            with self.state.view() as v:
                for eff in chunk:
                    if isinstance(eff, AttemptReady):
                        t.placement.wait(v, eff)
                        # Due to start (not in a retry's backoff) with an executor to start it:
                        # the old leader may have stopped before assigning it.
                        if eff.not_before_ms <= now_ms and t.placement.members:
                            t.takeover.unresolved(
                                eff.task, eff.run_id, eff.shard, eff.attempt, t.takeover.until_ms
                            )
                        continue
                    if not _assigned_now(v, eff):
                        continue  # resolved since ``pending`` was read (a report applied meanwhile)
                    self._lease_and_send(t, v, eff, grace, None)  # the old leader may have sent it
                    lease = t.holdings.leases.get(execution_id(eff.run_id, eff.shard, eff.attempt))
                    if lease is not None:
                        t.takeover.unresolved(eff.task, eff.run_id, eff.shard, eff.attempt, lease.expires_ms)
        self._term = t

    def step_down(self) -> None:
        """Stop leading: everything this leadership knew is dropped with its term."""
        self._term = None

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
        t = self._term  # one read: the loop's thread may replace it meanwhile
        if epoch and (t is None or t.epoch != epoch):
            return True
        return t is not None and task in t.takeover.unknown_tasks

    # -- what a reader sees (empty while not leading) --------------------------------------------

    @property
    def members(self) -> frozenset[str]:
        """Live executors, draining ones included."""
        return self._term.placement.members if self._term is not None else frozenset()

    @property
    def waiting(self) -> Mapping[Key, Waiting]:
        return self._term.placement.waiting if self._term is not None else {}

    @property
    def leases(self) -> Mapping[str, Lease]:
        return self._term.holdings.leases if self._term is not None else {}

    @property
    def used(self) -> Mapping[str, int]:
        """Slots per executor taken by leased and reserved attempts."""
        return self._term.holdings.used if self._term is not None else {}

    @property
    def backlog(self) -> int:
        """Attempts waiting for an executor slot (their lateness is visible in run state). Any
        thread may ask (the leader driver's does)."""
        t = self._term  # one read: the loop's thread may replace it meanwhile
        return len(t.placement.waiting) if t is not None else 0

    def waiting_tasks(self) -> Mapping[str, int]:
        """Tasks with attempts waiting for a slot, and how many (empty while not leading). The
        leader driver asks it from its own thread and reads it a key at a time (one dict lookup,
        atomic under the GIL); it never iterates it."""
        t = self._term  # one read: the loop's thread may replace it meanwhile
        return t.placement.waiting_per_task if t is not None else {}

    # -- effects of applied commands -------------------------------------------------------------

    def on_effects(self, effects: Iterable[Effect], now_ms: int) -> None:
        t = self._term
        if t is None:
            return
        for chunk in _chunks(tuple(effects)):
            with self.state.view() as v:
                self._on_effects(t, v, chunk, now_ms)
        if t.takeover.settling:
            with self.state.view() as v:
                t.takeover.settle(v, None)

    def _on_effects(self, t: Term, v: StateView, effects: Sequence[Effect], now_ms: int) -> None:
        for eff in effects:
            if isinstance(eff, AttemptReady):
                self._ready(t, v, eff, now_ms)
            elif isinstance(eff, DispatchAttempt):
                t.placement.unwait((eff.run_id, eff.shard))
                self._lease_and_send(t, v, eff, now_ms)
            elif isinstance(eff, ReadyColumns):
                # The hot runs a FireColumns entry made (the columnar path): each waits as the
                # AttemptReady it stands for. Such an entry is proposed by this leadership only.
                rows = columns.ready_rows(v, eff, t.epoch)
                t.placement.wait_rows(v, rows)
                if t.liveness.unconfirmed:
                    for ready, _seq in rows:
                        self._unconfirmed(t, ready, now_ms)
            elif isinstance(eff, DispatchColumns):
                self._dispatch_columns(t, v, eff, now_ms)
            elif isinstance(eff, RunCancelled):
                self._cancel(t, eff, now_ms)
            elif isinstance(eff, ExecutorChanged):
                t.placement.rebuild(v)
                if eff.alive:
                    t.liveness.joined(eff.name, now_ms)
                else:
                    t.liveness.unconfirmed.discard(eff.name)
                    # The state machine has re-queued (or failed) every attempt it held: its
                    # leases are void. Keeping them re-sent lost attempts when it reconnected.
                    for exec_id in t.holdings.void(eff.name):
                        t.takeover.known(exec_id, "applied")  # the state is current for it

    def _ready(self, t: Term, v: StateView, eff: AttemptReady, now_ms: int) -> None:
        t.placement.wait(v, eff)
        self._unconfirmed(t, eff, now_ms)

    def _unconfirmed(self, t: Term, eff: AttemptReady, now_ms: int) -> None:
        if t.liveness.unconfirmed and eff.not_before_ms <= now_ms < t.takeover.until_ms:
            # An executor has not found this leader yet: the attempt may wait for it.
            t.takeover.unresolved(eff.task, eff.run_id, eff.shard, eff.attempt, t.takeover.until_ms)

    def _cancel(self, t: Term, eff: RunCancelled, now_ms: int) -> None:
        """A task run was cancelled (CancelRuns, a killed workflow run, overlap=replace): forget
        its attempts, stop the running ones. The one path every cancel takes; an executor that
        still lists a cancelled attempt later is told again (:meth:`_stop_cancelled`)."""
        for shard, attempt, executor in eff.attempts:
            t.placement.unwait((eff.run_id, shard))
            if executor:
                exec_id = execution_id(eff.run_id, shard, attempt)
                t.holdings.drop(exec_id)
                t.takeover.known(exec_id, "applied")  # the run is cancelled
                item = pb.WorkItem(
                    execution_id=exec_id,
                    run_id=eff.run_id,
                    epoch=t.epoch,
                    cancel=True,
                    cancel_reason=eff.reason,
                )
                t.outbox.append((executor, item))
                t.cancels_sent[exec_id] = now_ms

    def _dispatch_columns(self, t: Term, v: StateView, eff: DispatchColumns, now_ms: int) -> None:
        """The assignments a DispatchColumns committed: each row still a live hot run is leased
        and sent from the slot table's facts (:func:`columns.dispatched_rows`), as a known
        ``DispatchAttempt`` of it would be; one promoted to the cold path since, from its run.

        The common row (a first dispatch of a live hot run whose task's current version is the
        run's and already parsed) is leased and queued here, doing exactly what :meth:`_send`
        does for it with what is the same for every row read once per entry (issue 31: one call
        of 17 arguments and a dozen look-ups per attempt on the leader's loop); any other row
        (a re-send over an existing lease, an older task version, a spec not parsed yet) goes
        through :meth:`_send`."""
        unwait = t.placement.unwait
        holdings = t.holdings
        leases, used = holdings.leases, holdings.used
        last_seen = t.liveness.last_seen
        append = t.outbox.append
        tasks = v.tasks
        lease_ms = self.settings.lease_ms
        grace_ms = self.settings.grace_ms + lease_ms
        epoch = t.epoch
        for row in columns.dispatched_rows(v, eff, epoch, t.hot_assigned):
            if isinstance(row, DispatchAttempt):
                unwait((row.run_id, row.shard))
                self._lease_and_send(t, v, row, now_ms)
                continue
            seq, run_id, task, nominal, attempt, executor, version, assigned_ms = row
            # Its reservation's slot on that executor becomes its lease's (Placement.unwait).
            kept = unwait((run_id, 0), executor)
            exec_id = f"{run_id}/0/{attempt}"  # execution_id(run_id, 0, attempt)
            # _spec's cache hit, inline (self._specs is read per row: _send may replace it).
            st = tasks.get(task)
            hit = self._specs.get(task)
            if (
                hit is None
                or st is None
                or st.version != version
                or hit[0] is not st.spec_bytes
                or exec_id in leases
            ):
                # A live hot run's task is hot (raftsched.fsm.hot_slots.is_hot; a task that stops
                # being hot has its hot runs promoted): it declares no cpu, memory or labels, so
                # its need is NO_NEED, what StateView.need_hint would answer.
                self._send(
                    t,
                    v,
                    run_id,
                    task,
                    nominal,
                    0,
                    attempt,
                    executor,
                    version,
                    False,
                    assigned_ms,
                    None,
                    now_ms,
                    False,
                    NO_NEED,
                    seq,
                    kept,
                )
                continue
            # _send for a first dispatch (no lease yet) of a plain, not backfill attempt:
            wdef = hit[2]
            timeout = wdef.timeout_ms  # the spec's (WorkDef: the same value)
            if not kept:
                used[executor] = used.get(executor, 0) + 1  # Holdings.take, need NO_NEED
            heard = last_seen.get(executor, now_ms)
            expires = (heard if heard > now_ms else now_ms) + lease_ms
            budget = timeout + grace_ms if timeout else 0
            deadline = now_ms + budget if timeout else 0
            leases[exec_id] = Lease(
                exec_id,
                run_id,
                task,
                0,
                attempt,
                executor,
                expires,
                deadline,
                False,
                assigned_ms or now_ms,
                False,
                seq,
                budget,
            )
            # Holdings.lease's check_at, inline
            due = deadline if deadline and deadline < expires else expires
            if due < holdings.check_at:
                holdings.check_at = due
            # A hot run's id is task@nominal (run_id_of) and it has nothing of its own: a row.
            append((executor, (exec_id, run_id, nominal, 0, attempt, epoch, wdef)))
        hot_assigned = t.hot_assigned
        for seq in eff.seqs:
            hot_assigned.pop(seq, None)

    def _lease_and_send(
        self, t: Term, v: StateView, eff: DispatchAttempt, now_ms: int, started: bool | None = False
    ) -> None:
        """Lease the attempt to its executor and queue its work item. ``started``: what is known
        of it (False for a first dispatch: nothing has been sent yet).

        A dispatch that carries its run's facts (``eff.known``: a plain task's, straight from its
        assignment) is sent without a copy of the run; any other reads the run."""
        if eff.known:
            run = None
            version, backfill, assigned_ms = eff.task_version, eff.backfill, eff.assigned_ms
        else:
            run = v.active_run(eff.run_id)
            shard = run.shards[eff.shard] if run is not None and eff.shard < len(run.shards) else None
            version = run.task_version if run is not None else 0
            backfill = run is not None and run.backfill
            assigned_ms = shard.assigned_ms if shard is not None else 0
        self._send(
            t,
            v,
            eff.run_id,
            eff.task,
            eff.nominal_ms,
            eff.shard,
            eff.attempt,
            eff.executor,
            version,
            backfill,
            assigned_ms,
            run,
            now_ms,
            started,
        )

    def _send(
        self,
        t: Term,
        v: StateView,
        run_id: str,
        task: str,
        nominal_ms: int,
        shard: int,
        attempt: int,
        executor: str,
        version: int,
        backfill: bool,
        assigned_ms: int,
        run: pb.Run | None,
        now_ms: int,
        started: bool | None,
        need: Need | None = None,
        seq: int = 0,
        slot_kept: bool = False,
    ) -> None:
        """:meth:`_lease_and_send` once the run's facts are known (``run``: its copy, when the
        work item takes its command, params or environment from it). ``need``: what the attempt
        holds besides its slot, when the caller knows it (None: :meth:`StateView.need_hint`);
        ``seq``: a hot run's seq (kept in the lease for its report); ``slot_kept``: its
        reservation's slot on ``executor`` was kept for this lease (:meth:`Placement.unwait`).

        A plain attempt (run id ``task@nominal``, nothing taken from the run) is queued as a
        row (:mod:`.work`), anything else as its work item."""
        spec, wdef = self._spec(v, task, version)
        exec_id = execution_id(run_id, shard, attempt)
        key = (run_id, shard)
        timeout = spec.timeout_ms if spec is not None else 0
        budget = timeout + self.settings.grace_ms + self.settings.lease_ms if timeout else 0
        deadline = now_ms + budget if timeout else 0
        old = t.holdings.leases.get(exec_id)
        if old is None:
            if not slot_kept:
                t.holdings.take(key, executor, v.need_hint(task, run_id) if need is None else need)
        else:
            if slot_kept:
                t.holdings.give_back_slot(executor)  # the lease holds one already
            if old.started is not None:
                started = old.started  # a re-send: what the executor said of it still holds
        # Silence counts from the assignment, or from the end of the executor's takeover grace if
        # this leader has not heard from it yet: an attempt assigned while its executor is still
        # finding the new leader must not expire before the executor itself would be declared dead
        # (the chaos soak lost a no-retry fire that way, 100 ms before the executor registered).
        heard = t.liveness.last_seen.get(executor, now_ms)
        t.holdings.lease(
            Lease(
                exec_id,
                run_id,
                task,
                shard,
                attempt,
                executor,
                max(now_ms, heard) + self.settings.lease_ms,
                deadline,
                backfill,
                assigned_ms or now_ms,
                started,
                seq,
                budget,
            )
        )
        if backfill:
            t.holdings.backfill_busy.add(key)
        row = (exec_id, run_id, nominal_ms, shard, attempt, t.epoch, wdef)
        plain = run is None or not (run.command or run.params_json or run.env)
        if plain and run_id == f"{task}@{nominal_ms}":
            t.outbox.append((executor, row))
            return
        item = to_item(row)
        if run is not None:
            if run.command:  # a workflow task: its templates rendered for this run
                item.command = run.command
            if run.params_json:
                item.params_json = run.params_json
            for name, value in run.env.items():
                item.env[name] = value
        t.outbox.append((executor, item))

    def _spec(self, v: StateView, task: str, version: int) -> tuple[pb.TaskSpec | None, WorkDef]:
        """The spec a run of ``task`` at ``version`` executes and its work items' part of it (a
        :class:`~.work.WorkDef` of :func:`_item_fields`), parsed once per task version: the
        current version's are kept, checked by the identity of its stored bytes
        (:meth:`StateView.current_spec_bytes`: a new version or a task created again under the
        same name brings new bytes). An older version is read as before (runs that span an
        update). Never to be changed by the caller: shared."""
        current = v.current_spec_bytes(task)
        if current is None or current[0] != version:
            spec = v.spec_for(task, version)
            return spec, WorkDef(task, version, _item_fields(spec))
        raw = current[1]
        hit = self._specs.get(task)
        if hit is not None and hit[0] is raw:
            return hit[1], hit[2]
        spec = v.spec_for(task, version)
        if spec is None:
            return None, WorkDef(task, version, {})
        wdef = WorkDef(task, version, _item_fields(spec))
        if len(self._specs) >= SPEC_CACHE_MAX:
            self._specs = {}  # a bound: a miss costs what every dispatch cost before
        self._specs[task] = (raw, spec, wdef)
        return spec, wdef

    def take_work(self) -> list[tuple[str, Work]]:
        """The outbox, emptied: ``(executor, work)`` in the order decided (:mod:`.work`: a row
        stays a row; the hub hands each executor's to its stream, which encodes them)."""
        t = self._term
        if t is None:
            return []
        out, t.outbox = t.outbox, []
        return out

    def take_outbox(self) -> list[tuple[str, pb.WorkItem]]:
        """:meth:`take_work` with every row as its work item (:func:`.work.to_item`)."""
        return [(executor, to_item(w) if isinstance(w, tuple) else w) for executor, w in self.take_work()]

    # -- executor events ---------------------------------------------------------------------------

    def resend_to(self, executor: str, now_ms: int) -> list[pb.WorkItem]:
        """Work items of every attempt leased to ``executor`` (it reconnected: its stream is new).

        Each lease starts afresh: the attempt may never have reached the executor before (it was
        assigned while the executor was still looking for this leader), and an old expiry would
        declare it lost the moment it starts - a duplicate run the chaos suite caught."""
        t = self._term
        if t is None:
            return []
        leased = [lease for lease in t.holdings.leases.values() if lease.executor == executor]
        with self.state.view() as v:
            return self._resend(t, v, leased, now_ms)

    def _resend(self, t: Term, v: StateView, leased: list[Lease], now_ms: int) -> list[pb.WorkItem]:
        """Lease afresh and send again every lease of ``leased`` the log still has assigned to its
        executor; returns their work items (taken out of the outbox)."""
        before = len(t.outbox)
        for lease in leased:
            eff = self._still_assigned(t, v, lease)
            if eff is None:
                continue  # superseded in the log: never re-send a lost or finished attempt
            # lease.started stays as it was: the heartbeat may have left before the attempt
            # arrived on a newly opened stream, and a loss is a try unless known unstarted.
            self._lease_and_send(t, v, eff, now_ms, None)
        items = [to_item(w) if isinstance(w, tuple) else w for _, w in t.outbox[before:]]
        del t.outbox[before:]
        return items

    def heartbeat(
        self,
        executor: str,
        running: Iterable[str],
        now_ms: int,
        started: Iterable[str] | None = None,
        finished: Iterable[str] = (),
        partial: bool = False,
    ) -> bool:
        """Renew the leases the executor still holds. False: it is not a live member (re-register).

        ``started`` (None from an executor that does not report it): which of ``running`` have
        started; the others are known unstarted. Without it every running attempt counts as
        started (a loss is then always a try). ``finished``: which of ``running`` have ended
        there and wait for their report to be acknowledged (leases renewed, but not taken as
        still running).

        The executor's first heartbeat to this leader says which attempts it holds: an attempt
        leased to it that it does not list never reached it (the old leader committed it and
        stopped before its dispatch went out), so it is sent again at once, not after a lease.

        ``partial`` (issue 31 P2): ``running`` lists only the attempts started since the
        executor's previous heartbeat; those are renewed and marked started as above, and an
        attempt it does not list means nothing (neither unheld nor stopped). It does not count
        as the first heartbeat (the executor's first to a leader is full)."""
        t = self._term
        if t is None or executor not in t.placement.members:
            return False
        t.liveness.last_seen[executor] = now_ms
        began = None if started is None else set(started)
        ended = set(finished)
        held = list(running)
        if executor in t.liveness.unconfirmed and not partial:
            t.liveness.unconfirmed.discard(executor)
            self._resend_unheld(t, executor, set(held), now_ms)
        leases = t.holdings.leases
        renewed = now_ms + self.settings.lease_ms
        t.holdings.renewed(renewed)
        for exec_id in held:
            lease = leases.get(exec_id)
            if lease is not None and lease.executor == executor:
                lease.expires_ms = renewed
                is_started = began is None or exec_id in began
                if t.takeover.inherited and exec_id not in ended and is_started:
                    t.takeover.known(exec_id, "running")  # it runs: an overlap with it is real
                if is_started:
                    if lease.started is not True and lease.budget_ms:
                        # The timeout backstop counts from the start this leader learns of (a
                        # prefetched attempt waits for a slot of its executor: rungate).
                        later = now_ms + lease.budget_ms
                        if later > lease.deadline_ms:
                            lease.deadline_ms = later
                    lease.started = True
                elif lease.started is not True:
                    lease.started = False  # it holds the attempt and says it has not started it
                    if lease.budget_ms:
                        lease.deadline_ms = now_ms + lease.budget_ms  # no backstop before a start
        strays = [e for e in held if e not in ended and (e not in leases or leases[e].executor != executor)]
        if strays:
            self._stop_cancelled(t, executor, strays, now_ms)
        return True

    def executor_report(self, executor: str, health: ExecutorHealth) -> None:
        """What ``executor``'s heartbeat said of its clock, disk and execution log (kept for this
        leadership: ``raftsched executors``, the clock-offset metric and the health alerts)."""
        t = self._term
        if t is not None and executor in t.placement.members:
            t.liveness.health[executor] = health

    def health_drained(self, executor: str) -> bool:
        """Whether the state has ``executor`` drained by its own health drain (it registers
        again after a restart or a leader change, and must know it may undo it)."""
        with self.state.view() as v:
            rec = v.executors.get(executor)
            return rec is not None and rec.alive and rec.draining and rec.health_drain

    @property
    def executor_health(self) -> Mapping[str, ExecutorHealth]:
        """The last health each live executor reported to this leader (empty while not leading)."""
        return self._term.liveness.health if self._term is not None else {}

    @property
    def declared_dead(self) -> frozenset[str]:
        """Executors this leadership declared dead (until they join again)."""
        return frozenset(self._term.liveness.declared_dead) if self._term is not None else frozenset()

    @property
    def last_seen(self) -> Mapping[str, int]:
        """Each executor's last heartbeat (or the end of its takeover grace), leader time."""
        return self._term.liveness.last_seen if self._term is not None else {}

    def _stop_cancelled(self, t: Term, executor: str, strays: list[str], now_ms: int) -> None:
        """``executor`` runs attempts this leader holds no lease of: tell it to stop each one the
        log has cancelled. This is how a cancel committed just before a leader died is carried
        out by the next one (the old leader's cancel may never have left it), and how a cancel
        lost with a broken stream is sent again: at most once per lease while it runs on."""
        with self.state.view() as v:
            for exec_id in strays:
                sent = t.cancels_sent.get(exec_id)
                if sent is not None and now_ms - sent < self.settings.lease_ms:
                    continue
                run_id, shard, attempt = _split(exec_id)
                if run_id is None or not v.attempt_cancelled(run_id, shard, attempt):
                    continue
                t.cancels_sent[exec_id] = now_ms
                item = pb.WorkItem(execution_id=exec_id, run_id=run_id, epoch=t.epoch, cancel=True)
                t.outbox.append((executor, item))
        if len(t.cancels_sent) > _MAX_CANCELS_REMEMBERED:
            t.cancels_sent.clear()  # a bound: forgetting only means one more cancel, sooner

    def _resend_unheld(self, t: Term, executor: str, held: set[str], now_ms: int) -> None:
        """Send again every attempt leased to ``executor`` that it does not hold (they stay in the
        outbox: they go out with the next flush)."""
        unheld = [
            (exec_id, lease)
            for exec_id, lease in sorted(t.holdings.leases.items())
            if lease.executor == executor and exec_id not in held
        ]
        if not unheld:
            return
        with self.state.view() as v:
            for exec_id, lease in unheld:
                eff = self._still_assigned(t, v, lease)
                if eff is None:
                    continue
                self._lease_and_send(t, v, eff, now_ms, None)
                if exec_id in t.takeover.inherited:
                    t.takeover.resent_unheld += 1

    def _still_assigned(self, t: Term, v: StateView, lease: Lease) -> DispatchAttempt | None:
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
            lease.run_id, lease.task, run.nominal_ms, lease.shard, lease.attempt, lease.executor, t.epoch
        )

    def stream_opened(self, executor: str) -> None:
        """``executor`` opened a dispatch stream (it is reachable again)."""
        if self._term is not None:
            self._term.liveness.stream_gone.pop(executor, None)

    def stream_closed(self, executor: str, now_ms: int) -> None:
        """``executor``'s current dispatch stream closed (not replaced by a newer one): unless it
        opens another within ``stream_grace_ms``, :meth:`poll` declares it dead."""
        t = self._term
        if t is not None and executor in t.placement.members:
            t.liveness.stream_closed(executor, now_ms + self.settings.stream_grace_ms)

    def unstarted_of(self, executor: str) -> list[str]:
        """Execution ids leased to ``executor`` that it is known not to have started, sorted."""
        return self._term.holdings.unstarted_of(executor) if self._term is not None else []

    def results(
        self,
        executor: str,
        results: Sequence[pb.ExecResult],
        now_ms: int,
        ids: Sequence[tuple[str | None, int, int]] | None = None,
    ) -> DispatchProposal | None:
        """A ReportResults command for the executor's results (None if none are known here).

        ``ids``: each result's execution id already split into ``(run id, shard, attempt)`` (the
        servicer checks them so), in the same order; None: split here, skipping a malformed one."""
        t = self._term
        cmd = logpb.Command(epoch=self.epoch, now_ms=now_ms)
        cmd.report_results.SetInParent()
        add = cmd.report_results.results.add
        for i, res in enumerate(results):
            run_id, shard, attempt = _split(res.execution_id) if ids is None else ids[i]
            if run_id is None:
                continue
            add(
                run_id=run_id,
                shard=shard,
                attempt=attempt,
                executor=executor,
                success=res.success,
                error=res.error,
                exit_code=res.exit_code,
                stdout_tail=res.stdout_tail,
                stderr_tail=res.stderr_tail,
                # Only a failure may be retried: a success's retry time is never read by apply
                # (runs.settle), so none is drawn for it (0 is omitted from the entry's bytes).
                retry_at_ms=0 if res.success else self.retry_at(attempt, now_ms),
                timed_out=res.timed_out,
                duration_ms=res.duration_ms,
                start_lateness_ms=res.start_lateness_ms if res.HasField("start_lateness_ms") else None,
            )
            if t is not None:
                t.holdings.drop(res.execution_id)
                if t.takeover.inherited:  # (an attempt this leadership inherited: known once applied)
                    t.takeover.proposed(res.execution_id, now_ms, self.settings.lease_ms)
        return DispatchProposal("results", cmd) if cmd.report_results.results else None

    def report(
        self,
        executor: str,
        results: Sequence[pb.ExecResult],
        now_ms: int,
        ids: Sequence[tuple[str | None, int, int]] | None = None,
    ) -> list[DispatchProposal]:
        """The commands for an executor's reported results: while every voting member applies
        the columns (:attr:`columns_allowed`), the successes of live hot runs as one
        ``ResultColumns`` (:func:`raftsched.leader.columns.split_results`), and everything else
        as a ReportResults (:meth:`results`). Results in a ResultColumns are settled here as
        :meth:`results` settles its own."""
        if not self.columns_allowed():
            cold = self.results(executor, results, now_ms, ids)
            return [cold] if cold is not None else []
        split = [_split(r.execution_id) for r in results] if ids is None else list(ids)
        t = self._term
        known: list[int] | None = None
        if t is not None:
            # The seqs the leases kept (a hot run dispatched from its AssignColumns row).
            leases = t.holdings.leases
            known = [lease.seq if (lease := leases.get(r.execution_id)) is not None else 0 for r in results]
        with self.state.view() as v:
            hot, rest = columns.split_results(v, executor, results, split, now_ms, self.epoch, known)
        out: list[DispatchProposal] = []
        if hot is not None:
            others = set(rest)
            taken = [i for i in range(len(results)) if i not in others]
            if t is not None:
                inherited = t.takeover.inherited
                for i in taken:
                    exec_id = results[i].execution_id
                    t.holdings.drop(exec_id)
                    if inherited:
                        t.takeover.proposed(exec_id, now_ms, self.settings.lease_ms)
            out.append(DispatchProposal("results", hot, rows=tuple(taken)))
        if rest:
            if len(rest) == len(results):
                cold = self.results(executor, results, now_ms, ids)
            else:
                cold = self.results(executor, [results[i] for i in rest], now_ms, [split[i] for i in rest])
            if cold is not None:
                out.append(cold)
        return out

    def results_columns(
        self,
        executor: str,
        ids: Sequence[tuple[str, int, int]],
        exec_ids: Sequence[str],
        durations: Sequence[int],
        lateness: Sequence[int],
        cold: Sequence[pb.ExecResult],
        cold_ids: Sequence[tuple[str, int, int]],
        now_ms: int,
    ) -> list[DispatchProposal]:
        """:meth:`report` for the results of a ``SessionReport`` (the one seam where a session's
        batch of results enters): its rows (successes with nothing to say but ``durations`` and
        start ``lateness``; ``ids`` their execution ids ``exec_ids`` split) and its ``cold``
        results (split as ``cold_ids``). While every voting member applies the columns, the rows
        of live hot runs go as one ``ResultColumns`` straight from the columns (no result object
        per row; its ``rows`` are positions among the rows); everything else as a ReportResults
        (:meth:`results`). Leases are dropped as :meth:`results` drops them."""
        out: list[DispatchProposal] = []
        rest: Sequence[int] = range(len(ids))
        if ids and self.columns_allowed():
            t = self._term
            known: list[int] | None = None
            if t is not None:  # the seqs the leases kept (as in report)
                leases = t.holdings.leases
                known = [lease.seq if (lease := leases.get(e)) is not None else 0 for e in exec_ids]
            with self.state.view() as v:
                hot, rest = columns.split_result_columns(
                    v, executor, ids, durations, lateness, now_ms, self.epoch, known
                )
            if hot is not None:
                others = set(rest)
                taken = [i for i in range(len(ids)) if i not in others]
                if t is not None:
                    drop = t.holdings.drop
                    inherited = t.takeover.inherited
                    for i in taken:
                        drop(exec_ids[i])
                        if inherited:
                            t.takeover.proposed(exec_ids[i], now_ms, self.settings.lease_ms)
                out.append(DispatchProposal("results", hot, rows=tuple(taken)))
        if rest or cold:
            results = [
                pb.ExecResult(
                    execution_id=exec_ids[i],
                    success=True,
                    duration_ms=durations[i],
                    start_lateness_ms=lateness[i],
                )
                for i in rest
            ]
            results.extend(cold)
            split: list[tuple[str | None, int, int]] = [ids[i] for i in rest]
            split.extend(cold_ids)
            proposal = self.results(executor, results, now_ms, split)
            if proposal is not None:
                out.append(proposal)
        return out

    def refused_hot(
        self,
        proposal: DispatchProposal,
        refused: int,
        executor: str,
        results: Sequence[pb.ExecResult],
        now_ms: int,
        ids: Sequence[tuple[str | None, int, int]] | None = None,
    ) -> DispatchProposal | None:
        """A ReportResults for the results of a ResultColumns ``proposal`` that applied with
        ``refused`` rows (None if it is not one, or none was refused).

        A row is refused when its run is no longer a live hot run on that attempt: a cold event
        (an update, a quota, a disable...) promoted it to the cold path between the report and its
        apply. Its success must not be lost (the executor forgets a result once the report is
        acknowledged), so every result of the proposal is reported again by run id: the ones whose
        row did apply are refused there as stale (their run has finished)."""
        if not proposal.rows or not refused:
            return None
        rows = proposal.rows
        return self.results(
            executor, [results[i] for i in rows], now_ms, None if ids is None else [ids[i] for i in rows]
        )

    def retry_at(self, attempt: int, now_ms: int) -> int:
        """Exponential backoff with a cap and jitter; the jitter is drawn here, on the leader."""
        s = self.settings
        # The exponent is capped: base x 2**62 is past any cap, and an attempt number near 2**32
        # would otherwise build a half-gigabyte integer on the leader's event loop.
        delay = min(s.retry_cap_ms, s.retry_base_ms * 2 ** min(max(0, attempt - 1), 62))
        return now_ms + int(delay * (1 + self.rng.random() * s.retry_jitter))

    # -- timers ------------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> list[DispatchProposal]:
        """Commands to propose now: lost attempts, dead executors, and new assignments."""
        t = self._term
        if t is None:
            return []
        out: list[DispatchProposal] = []
        lost = logpb.Command(epoch=t.epoch, now_ms=now_ms)
        lost.report_results.SetInParent()
        for lease in t.holdings.due(now_ms):  # (every lease is looked at only once one may be due)
            exec_id = lease.execution_id
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
                t.holdings.drop(exec_id)
                t.takeover.proposed(exec_id, now_ms, self.settings.lease_ms)
        if lost.report_results.results:
            out.append(DispatchProposal("lost", lost))
        for name, reason in t.liveness.dead(t.placement.members, now_ms, self.settings):
            cmd = logpb.Command(epoch=t.epoch, now_ms=now_ms)
            cmd.executor_leave.name = name
            cmd.executor_leave.dead = True
            cmd.executor_leave.reason = reason
            cmd.executor_leave.retry_at_ms = now_ms
            cmd.executor_leave.unstarted.extend(t.holdings.unstarted_of(name))
            out.append(DispatchProposal("dead", cmd))
        if not (t.takeover.inherited or t.placement.waiting):
            return out  # nothing to read the state for (the applier holds its lock for whole entries)
        with self.state.view() as v:  # one view for the tick: settling and every assignment
            if t.takeover.inherited:
                t.takeover.settle(v, now_ms)
            if t.placement.waiting:
                cmd = logpb.Command(epoch=t.epoch, now_ms=now_ms)
                cmd.assign_attempts.SetInParent()
                # The hot runs' assignments go straight into AssignColumns rows (what
                # columns.split_assignments would move out of the command); each proposal gives
                # back its own.
                rows = HotAssignments() if self.columns_allowed() else None
                assigned = t.placement.assign(
                    v, now_ms, t.liveness.declared_dead, self.settings.max_assign_per_command, cmd, rows
                )
                if rows is not None and rows.seqs:
                    hot = logpb.Command(epoch=cmd.epoch, now_ms=cmd.now_ms, origin=cmd.origin)
                    cols = hot.assign_columns
                    cols.seq.extend(rows.seqs)
                    cols.shard.extend([0] * len(rows.seqs))
                    cols.attempt.extend(rows.attempts)
                    cols.executor.extend(rows.executors)
                    t.hot_assigned.update(zip(rows.seqs, (key[0] for key, _ in rows.assigned), strict=True))
                    out.append(DispatchProposal("assign", hot, tuple(rows.assigned)))
                if assigned or cmd.assign_attempts.waits:
                    out.append(DispatchProposal("assign", cmd, tuple(assigned)))
        return out

    def release(self, proposal: DispatchProposal) -> None:
        """An "assign" proposal completed (failed, refused or applied): whatever it did not turn
        into a lease may be placed again. A proposal of an earlier leadership is ignored: its
        reservations died with its term, and the same attempts may be reserved by this one."""
        t = self._term
        if t is None or proposal.command.epoch != t.epoch:
            return
        for seq in proposal.command.assign_columns.seq:  # (its DispatchColumns, if any, was read)
            t.hot_assigned.pop(seq, None)
        waiting = t.placement.waiting
        # Only what still waits reserved for that executor has anything to give back: an
        # assignment that applied was unwaited by its dispatch. Most proposals apply whole, and
        # then no state view is opened (the applier holds the state's lock for whole entries).
        left = [
            (key, executor)
            for key, executor in proposal.assigned
            if (w := waiting.get(key)) is not None and w.reserved_for == executor
        ]
        if left:
            with self.state.view() as v:
                t.placement.release(v, left)


def _never() -> bool:
    return False


def _assigned_now(v: StateView, eff: DispatchAttempt) -> bool:
    """Whether the log still has ``eff``'s attempt RUNNING on its executor (the takeover reads
    its pending attempts in one view and handles them in later ones)."""
    run = v.active_run(eff.run_id)
    if run is None or eff.shard >= len(run.shards):
        return False
    shard = run.shards[eff.shard]
    return shard.attempt == eff.attempt and shard.executor == eff.executor and shard.state == pb.RUNNING


def _item_fields(spec: pb.TaskSpec | None) -> dict[str, Any]:
    """A work item's fields from its task's spec, those not at their default (one constructor
    call with these is cheaper than six assignments per attempt)."""
    if spec is None:
        return {}
    fields: dict[str, Any] = {
        "shards": spec.shards or 1,
        "command": spec.command,
        "handler": spec.handler,
        "params_json": spec.params_json,
        "timeout_ms": spec.timeout_ms,
        "runner": spec.runner,
    }
    return {name: value for name, value in fields.items() if value}


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
