"""The replicated state machine: the whole replicated truth of a raftsched cluster.

``SchedulerState.apply(data)`` takes one encoded :class:`raftsched.v1.log_pb2.Command` and
returns an :class:`Applied` — the result to hand back to the proposer plus the *effects* the
leader carries out after commit (runs to dispatch, tasks to re-arm in the timing wheel).

Contract (every replica, every time):

* deterministic: no clock, no randomness, no IO except the injected store, and no iteration
  order that leaks into results — the same log gives byte-identical snapshots;
* never raises for bad input: user errors and stale leader commands become a rejection in the
  result (``ok=False, code, message``) and leave stored state unchanged;
* time enters as the command's ``now_ms``, stamped by the leader; fencing by the command's
  ``epoch`` (the Raft term of the stamping leader);
* fire times are *values in the command*: apply never runs croniter.

This module holds ``apply`` (decoding, format, idempotency, epoch fencing, the apply chain), the
table that hands each command to the book that owns it — tasks (:mod:`~raftsched.fsm.tasks`),
fires (:mod:`~raftsched.fsm.fires`), runs (:mod:`~raftsched.fsm.runs`), executors
(:mod:`~raftsched.fsm.executors`), workflows, quotas, calendars, alerts, tokens, membership —
loading, and the locked read methods. Each book works over a narrow host protocol that
:class:`SchedulerState` implements; the snapshot format and digests are in
:mod:`~raftsched.fsm.snapshot`.

Thread model: ``apply`` runs on one thread (the applier). Other threads read the in-memory state
only through :meth:`SchedulerState.view` (``raftsched.fsm.view``), which holds :attr:`lock`, or
through the read methods below, which take it themselves.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import ClassVar, Final

from raftsched import bounds, codec
from raftsched.abc import StateStore
from raftsched.errors import RaftschedError
from raftsched.fsm import alerts as alerts_mod
from raftsched.fsm import keys, snapshot, taskbackfill
from raftsched.fsm import workflows as wf_mod
from raftsched.fsm.access import TokenBook, prune_audit, record_audit
from raftsched.fsm.calendars import CalendarBook
from raftsched.fsm.effects import Applied, BarrierCommitted, Effect, rejected
from raftsched.fsm.events import EventBook
from raftsched.fsm.executors import ExecutorBook
from raftsched.fsm.fires import FireBook
from raftsched.fsm.hot import HotBook
from raftsched.fsm.hot_slots import Numbering, seq_of
from raftsched.fsm.membership import MembershipBook
from raftsched.fsm.policy import PolicyBook, validate_quota
from raftsched.fsm.records import Retention, TaskState
from raftsched.fsm.rules import Reject
from raftsched.fsm.runs import RunBook, StartSink
from raftsched.fsm.tally import ApplyTally
from raftsched.fsm.tasks import TaskBook
from raftsched.fsm.view import LockedReads
from raftsched.sharding.placement import Need
from raftsched.v1 import log_pb2 as pb

log = logging.getLogger(__name__)

Handled = tuple[pb.CommandResult, tuple[Effect, ...]]
"""What a command handler returns: the result, and the effects for the leader."""

DERIVED_TIMELINES_FORMAT: Final = 3
"""The stored state format from which hot runs keep their timelines as fields (fsm.timeline);
loading an older state migrates its runs (:meth:`RunBook.migrate_timelines`)."""
HOT_STATE_FORMAT: Final = 4
"""The stored state format of a state that numbered its tasks (the columnar hot path,
raftsched.fsm.hot): written from the NumberEntities on; before it, DERIVED_TIMELINES_FORMAT."""
PROMOTIONS_STATE_FORMAT: Final = 5
"""The stored state format of a state that logs its hot promotions (``Meta.promotions_logged``,
``hp/`` records): written from the first PromoteHotRuns on; before it, HOT_STATE_FORMAT."""


class SchedulerState(LockedReads):
    """The FSM. Build with :meth:`load` over a store (empty or not)."""

    def __init__(
        self,
        store: StateStore,
        retention: Retention | None = None,
        on_phase: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.retention = retention or Retention()
        self.lock = threading.RLock()
        self.max_epoch = 0
        self.max_now_ms = 0
        self.manual_seq = 0
        self.alert_seq = 0
        self.event_seq = 0
        self.applied_commands = 0
        self.chain = b""
        # Of the stored state (Meta.state_format; 0 reads as 1); see _written_format.
        self.state_format = DERIVED_TIMELINES_FORMAT
        self.alerts: alerts_mod.AlertBook = alerts_mod.AlertBook(store, self.retention, self)
        # Node-local counts of what apply did, for metrics: never replicated, never read by
        # apply, so replicas agree whether or not a node counts (None: it does not).
        self.tally: ApplyTally | None = None
        # Node-local sink of reported attempt starts (the start-delay alert's samples); like the
        # tally, never read by apply.
        self.on_start: StartSink | None = None
        # Whether the command being applied builds the effects only a leader consumes (runs
        # ready to place, attempts to send, tasks re-armed, executors changed, runs cancelled):
        # the ``leader_effects`` argument of apply, set by apply for its handlers (applier
        # thread only; see raftsched.replica for who decides). BarrierCommitted is always built.
        # Effects are not replicated state: the choice changes nothing stored or hashed.
        self.leader_effects = True
        # Whether the command being applied prunes history in batches (its format; see
        # raftsched.fsm.records.PRUNE_BATCH), set by apply for the books like leader_effects.
        self.batched_prune = True
        # The books, each over this state as its host. Their tables are shared here under the
        # names the readers use (never rebound: loading refills them in place).
        # Task and executor numbers of the columnar hot path (raftsched.fsm.hot), derived from
        # their records; refilled in place on load.
        self.numbering = Numbering()
        self.task_book: TaskBook = TaskBook(self)
        self.tasks = self.task_book.tasks
        # The host's ``put_task`` (store the task's record as it is now) is the task book's own
        # method, not a method of this class that calls it: the fire batch calls it once per task
        # entry, and the books reach it through their host, so the hop would cost a call each.
        self.put_task: Callable[[TaskState], None] = self.task_book.put
        # ... and ``touch_task`` (only its counters changed: stored once per command, see
        # TaskBook.flush), likewise bound directly.
        self.touch_task: Callable[[TaskState], None] = self.task_book.touch
        self.runs: RunBook = RunBook(self)
        self.fires: FireBook = FireBook(self)
        self.executor_book: ExecutorBook = ExecutorBook(self)
        self.active = self.runs.active  # run_id -> serialized Run, for runs not finished
        self.active_per_task = self.runs.active_per_task
        self.usage = self.runs.usage
        self.executors = self.executor_book.executors
        self.unplaceable = self.executor_book.unplaceable
        self.hot: HotBook = HotBook(self)
        self.wf: wf_mod.WorkflowBook = wf_mod.WorkflowBook(self)
        self.access: TokenBook = TokenBook(store)
        self.policy: PolicyBook = PolicyBook(store)
        self.calendars: CalendarBook = CalendarBook(store)
        self.membership: MembershipBook = MembershipBook(store)
        self.events: EventBook = EventBook(self)
        # Called with the name of each loading phase as it ends (the node times them: this
        # module reads no clock); None outside the first load.
        self._on_phase = on_phase
        self._load()
        self._on_phase = None

    # -----------------------------------------------------------------------------------------
    # loading, snapshot, restore

    @classmethod
    def load(
        cls,
        store: StateStore,
        retention: Retention | None = None,
        on_phase: Callable[[str], None] | None = None,
    ) -> SchedulerState:
        """The state held in ``store`` (empty or not). ``on_phase(name)``, if given, is called as
        each phase of loading ends (``small books``, ``tasks``, ``runs``, ``workflows``,
        ``usage``, ``hot path``), so the caller can time a restart phase by phase."""
        return cls(store, retention, on_phase)

    def _phase(self, name: str) -> None:
        if self._on_phase is not None:
            self._on_phase(name)

    def _load(self) -> None:
        self.runs.clear()
        self.access.load()
        self.policy.load()
        self.calendars.load()
        self.membership.load()
        self.executor_book.load()
        meta_bytes = self.store.get(keys.META)
        if meta_bytes:
            meta = pb.Meta()
            meta.ParseFromString(meta_bytes)
            self.max_epoch = meta.max_epoch
            self.max_now_ms = meta.max_leader_now_ms
            self.manual_seq = meta.manual_seq
            self.alert_seq = meta.alert_seq
            self.event_seq = meta.event_seq
            self.applied_commands = meta.applied_commands
            self.chain = meta.chain
            self.state_format = meta.state_format or 1
            self.numbering.clear()
            self.numbering.next_task_no = meta.next_task_no
            self.numbering.next_executor_no = meta.next_executor_no
            self.numbering.numbered_ms = meta.numbered_ms
            self.hot.next_seq = meta.next_seq or 1
            self.hot.promotions_logged = meta.promotions_logged
            hot_checkpoint_index = meta.hot_checkpoint_index
            snapshot.refuse_newer("the stored state has format", meta.state_format)
            if self.state_format < DERIVED_TIMELINES_FORMAT and self.runs.migrate_timelines():
                # Kept at once (the index unchanged), not with the next command: a snapshot or a
                # digest taken before one must already show the migrated runs.
                self.store.commit(self.store.applied_index())
        else:
            self.max_epoch = self.max_now_ms = self.manual_seq = self.applied_commands = 0
            self.alert_seq = self.event_seq = 0
            self.chain = b""
            self.numbering.clear()
            self.hot.next_seq = 1
            self.hot.promotions_logged = False
            hot_checkpoint_index = 0
            self.state_format = DERIVED_TIMELINES_FORMAT
        self._phase("small books")
        self.task_book.load()
        self._phase("tasks")
        self.events.invalidate()
        self.runs.load()
        self._phase("runs")
        self.wf.load()
        self.executor_book.load_flags()
        self._phase("workflows")
        self.runs.load_usage()
        self._phase("usage")
        self.hot.load(self.task_book.counter_index, hot_checkpoint_index)
        self._phase("hot path")

    def _save_meta(self) -> None:
        meta = pb.Meta(
            max_epoch=self.max_epoch,
            max_leader_now_ms=self.max_now_ms,
            manual_seq=self.manual_seq,
            alert_seq=self.alert_seq,
            applied_commands=self.applied_commands,
            chain=self.chain,
            state_format=self._written_format(),
            event_seq=self.event_seq,
        )
        numbering = self.numbering
        if numbering.on:  # zeros before (a state that never numbered keeps its bytes)
            meta.next_seq = self.hot.next_seq
            meta.next_task_no = numbering.next_task_no
            meta.next_executor_no = numbering.next_executor_no
            meta.hot_checkpoint_index = self.hot.checkpoint_index
            meta.numbered_ms = numbering.numbered_ms
        meta.promotions_logged = self.hot.promotions_logged  # false (unwritten) until format 19
        self.state_format = meta.state_format
        self.store.put(keys.META, meta.SerializeToString(deterministic=True))

    def _written_format(self) -> int:
        """The state format this build writes for this state: PROMOTIONS_STATE_FORMAT once it
        logs hot promotions (a PromoteHotRuns applied), HOT_STATE_FORMAT once it numbered (a
        NumberEntities applied), else DERIVED_TIMELINES_FORMAT (the bytes of the builds before)."""
        if self.hot.promotions_logged:
            return PROMOTIONS_STATE_FORMAT
        return HOT_STATE_FORMAT if self.numbering.on else DERIVED_TIMELINES_FORMAT

    def snapshot(self) -> bytes:
        """The canonical image of the replicated state: equal on every replica at the same index."""
        return snapshot.encode(self.replicated_items(), self._written_format())

    def digest(self) -> str:
        return snapshot.digest(self.replicated_items())

    def content_digest(self) -> tuple[str, int]:
        """``(digest, accepted)``: :meth:`digest` with the apply chain left out of the metadata,
        and the count of accepted commands, both read from one view of the store.

        A command apply refuses moves the chain and nothing else, so this digest is unchanged by
        it; while ``accepted`` stays the same, the digest must too."""
        return snapshot.content_digest(self.replicated_items())

    def replicated_items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every replicated ``(key, value)`` of committed data, in key order (node-local keys excluded)."""
        with self.store.reader() as r:
            items = list(r.scan(b"", keys.LOCAL_PREFIX))
        return iter(items)

    def restore(self, data: bytes, applied_index: int) -> None:
        """Discard all state and load a canonical snapshot.

        Raises :class:`SnapshotFormatError`, with nothing changed, for a snapshot of a newer
        format (its ``format`` or the state format stored in it)."""
        snap = pb.Snapshot()
        snap.ParseFromString(data)
        snapshot.check_snapshot_format(snap)
        with self.lock:
            self.store.replace_all(iter([(e.key, e.value) for e in snap.entries]), applied_index)
            self._load()

    def committed(self) -> None:
        """The store committed everything applied so far (the applier's thread, after
        ``store.commit``): store readers see every run record now (see :meth:`read_run`)."""
        self.runs.flushed()

    def reload(self) -> None:
        """Rebuild in-memory state from the store (after the store was replaced underneath)."""
        with self.lock:
            self._load()

    # -----------------------------------------------------------------------------------------
    # apply

    def apply(self, data: bytes, leader_effects: bool = True) -> Applied:
        """Apply one encoded command. Never raises for any input (see module docstring); only a
        store that cannot take writes (``store.failure()`` set) propagates its error.

        ``leader_effects``: whether to build the effects only a leader consumes (False on a node
        that does not lead: its driver and dispatcher would ignore them). The result, the stored
        state and the apply chain are the same either way.

        A command of a newer format than this build's (``Command.format > COMMAND_FORMAT``) is
        not applied at all: the result is a ``format_too_new`` rejection and *nothing* changes,
        not even the apply chain, because an upgraded replica would apply it. The caller must
        stop applying there (the replica does) until this node runs a newer build."""
        with self.lock:
            self.leader_effects = leader_effects
            try:
                cmd = codec.decode_command(data)
            except Exception as exc:
                applied = Applied(rejected("invalid_argument", f"undecodable command: {exc}"))
                self.chain = hashlib.sha256(
                    self.chain + hashlib.sha256(data).digest() + applied.encode()
                ).digest()
                self._save_meta()
                return applied
            self.batched_prune = cmd.format >= codec.BATCHED_PRUNE_FORMAT
            if cmd.format > codec.COMMAND_FORMAT:
                return Applied(
                    rejected(
                        codec.FORMAT_TOO_NEW,
                        f"command format {cmd.format} is newer than this build applies "
                        f"({codec.COMMAND_FORMAT})",
                    )
                )
            try:
                applied = self._apply(cmd)
            except Reject as rej:
                applied = Applied(rejected(rej.code, rej.message), rej.effects)
            except RaftschedError as exc:  # InvalidSpec, NotFound, Conflict... raised before mutating
                applied = Applied(rejected(exc.code, str(exc)))
            except Exception as exc:  # a bug: log loudly, but never wedge every replica
                if self.store.failure() is not None:
                    raise  # the store cannot take writes: the replica stops this node's applying
                log.critical("apply failed on a %s command: %r", cmd.WhichOneof("body"), exc, exc_info=True)
                applied = Applied(rejected("internal", f"internal error applying command: {exc!r}"))
            self.wf.flush()  # workflow runs changed by this command, written once
            self.hot.flush()  # the hot runs it promoted (before the task book's checkpoint)
            self.task_book.flush()  # the counters of the tasks it changed, one record
            self.policy.flush()  # quota records changed by this command, written once
            # The apply chain: a cheap fingerprint of everything applied so far, comparable between
            # replicas at the same log index even while the cluster is busy.
            self.chain = hashlib.sha256(
                self.chain + hashlib.sha256(data).digest() + applied.encode()
            ).digest()
            self._save_meta()
            return applied

    def _apply(self, cmd: pb.Command) -> Applied:
        key = cmd.idempotency_key
        if key:
            prior = self.store.get(keys.idem_key(key))
            if prior is not None:
                fingerprint, stored = _split_idem(prior)
                if fingerprint and cmd.request_fingerprint and fingerprint != cmd.request_fingerprint:
                    # Answering with the first outcome would silently drop this different write.
                    raise Reject("invalid_argument", "idempotency key reused for a different request")
                res = pb.CommandResult()
                res.ParseFromString(stored)
                return Applied(res)
        if cmd.epoch < self.max_epoch:
            # A deposed leader's command (forwarded by pysyncobj after a newer leader committed).
            # Refused like any other rejection: nothing stored changes (no counter, no pruning, no
            # clock), and its idempotency key is not remembered, so the client's retry through the
            # new leader applies.
            raise Reject("stale_epoch", f"epoch {cmd.epoch} is older than {self.max_epoch}")
        body = cmd.WhichOneof("body")
        handler = self._HANDLERS.get(body or "")
        if handler is None:
            raise Reject("invalid_argument", f"unknown command body {body!r}")
        _check_ranges(cmd, body or "")
        # Validate and compute first; mutate only once nothing can reject any more.
        now = max(cmd.now_ms, self.max_now_ms)
        if body == "barrier" and self._clock_fault(cmd):
            now = cmd.now_ms
        if body in EventBook.CHANGES_TASKS:
            self.events.invalidate()  # before: a rejection may have changed nothing, or part
        result, effects = handler(self, cmd, now)
        if body in _HOT_BIT_BODIES and self.numbering.on:
            self._refresh_hot(cmd, body or "")
        if not self.leader_effects and body != "barrier":
            effects = ()
        return self._finish(cmd, result, effects)

    def _finish(self, cmd: pb.Command, result: pb.CommandResult, effects: tuple[Effect, ...]) -> Applied:
        self.max_epoch = max(self.max_epoch, cmd.epoch)
        if cmd.WhichOneof("body") == "barrier" and self._clock_fault(cmd):
            self.max_now_ms = cmd.now_ms  # the new leader's clock, not the faulty time (_barrier)
        else:
            self.max_now_ms = max(self.max_now_ms, cmd.now_ms)
        self.applied_commands += 1
        if cmd.idempotency_key:
            stamp = self.max_now_ms.to_bytes(8, "big")
            if cmd.request_fingerprint:
                stamp += _IDEM_FINGERPRINTED + cmd.request_fingerprint
            self.store.put(
                keys.idem_key(cmd.idempotency_key), stamp + result.SerializeToString(deterministic=True)
            )
            self.store.put(keys.idem_expiry_key(self.max_now_ms, cmd.idempotency_key), b"")
        self._prune_idempotency()
        if cmd.HasField("audit"):
            record_audit(self.store, cmd.audit, self.max_now_ms, self.applied_commands)
            prune_audit(self.store, self.max_now_ms - self.retention.audit_keep_ms, self.retention.prune_step)
        return Applied(result, effects)

    def _refresh_hot(self, cmd: pb.Command, body: str) -> None:
        """The hot bits of the tasks a command may have changed (raftsched.fsm.hot_slots.is_hot): a task
        that is no longer hot has its live hot runs promoted to the cold path."""
        if body in ("set_quota", "delete_quota"):
            self.hot.refresh_all()
            return
        if body == "create_tasks":
            names = [item.spec.name for item in cmd.create_tasks.items]
        elif body == "set_enabled":
            names = [cmd.set_enabled.name]
        else:
            names = [getattr(cmd, body).spec.name]
        for name in names:
            st = self.tasks.get(name)
            if st is not None:
                self.hot.refresh(st, name)

    def _prune_idempotency(self) -> None:
        horizon = self.max_now_ms - self.retention.idempotency_keep_ms
        if horizon <= 0:
            return
        end = keys.IDEM_EXPIRY + f"{horizon:016x}".encode()
        for k, _ in self.store.scan(keys.IDEM_EXPIRY, end, limit=self.retention.prune_step):
            self.store.delete(k)
            self.store.delete(keys.IDEM + k[len(keys.IDEM_EXPIRY) + 17 :])

    def _barrier(self, cmd: pb.Command, now: int) -> Handled:
        # Commits the new leader's epoch (fencing every older leader) and its first timestamp.
        if self._clock_fault(cmd):
            # The new leader found the committed leader time further ahead of its clock than
            # max_skew (it decided, and stamped the decision: see LeaderDriver.become_leader).
            # A clock fault, not a floor: leader time goes back to its clock. Nothing fires
            # twice for it: a task's watermark still bounds every fire from below.
            ahead = cmd.barrier.clock_fault_ms - cmd.now_ms
            self.raise_alert(
                alerts_mod.CLOCK_FAULT,
                f"committed leader time was {ahead / 1000:.1f} s ahead of the clock of the new "
                f"leader {cmd.barrier.node_id} (epoch {cmd.epoch}): an earlier leader's clock was "
                "wrong; leader time follows the new leader's clock again. Fires already accounted "
                "up to that time stay accounted; runs committed for later start at their times",
                now,
            )
        if not cmd.barrier.node_id:
            # A read barrier (leader/reads.py): it only moves the applied index. No node may
            # take it for a takeover barrier (the replica decides leader effects from those).
            return pb.CommandResult(ok=True), ()
        return pb.CommandResult(ok=True), (BarrierCommitted(cmd.barrier.node_id, cmd.epoch),)

    def _clock_fault(self, cmd: pb.Command) -> bool:
        """A barrier that abandons the committed leader time (only ever lowers it), and only the
        faulty time its leader saw: a leader elected before it applied an earlier fault barrier
        decided against a time already abandoned, and lowering the newer, sound time to its
        clock would put leader time back (invariant 3). Such a barrier is an ordinary one."""
        fault = cmd.barrier.clock_fault_ms
        return fault > 0 and cmd.now_ms < self.max_now_ms and self.max_now_ms >= fault

    # -----------------------------------------------------------------------------------------
    # the host the books work through (apply thread only): shared sequences, alerts, and each
    # book's side that another book needs (the workflow book's TaskHost, the RunHost, ...)

    def next_sequence(self) -> int:
        """The next value of the replicated sequence that makes manual run ids unique."""
        self.manual_seq += 1
        return self.manual_seq

    def next_alert_seq(self) -> int:
        """The next value of the replicated sequence of alert events (their ids)."""
        self.alert_seq += 1
        return self.alert_seq

    def raise_event(self, alert: pb.AlertRecord, now: int) -> None:
        """Record ``alert`` as an event (dropped if its dedupe key was raised before)."""
        self.alerts.raise_(alert, now)

    def next_event_seq(self) -> int:
        """The next value of the replicated sequence of accepted events."""
        self.event_seq += 1
        return self.event_seq

    def emit_for_run(self, st: TaskState, run: pb.Run, now: int, epoch: int, effects: list[Effect]) -> None:
        """A run of ``st`` succeeded: emit the events its task declares (``emits``)."""
        self.events.emit_for_run(st, run, now, epoch, effects)

    def emit_task_events(
        self,
        task: str,
        names: Sequence[str],
        namespace: str,
        logical_ms: int,
        now: int,
        epoch: int,
        effects: list[Effect],
    ) -> None:
        """A workflow task marked succeeded by hand emits its ``emits`` (issue 28 §3)."""
        self.events.emit_keyed(task, names, namespace, logical_ms, now, epoch, effects)

    def emit_for_workflow_run(
        self, spec: pb.WorkflowSpec, wr: pb.WorkflowRun, now: int, effects: list[Effect]
    ) -> None:
        """A workflow run succeeded: emit its workflow's ``emits`` (the command's epoch is the
        newest applied one: a stale leader's command was refused before it got here)."""
        self.events.emit_for_workflow_run(spec, wr, now, max(self.max_epoch, 1), effects)

    def raise_alert(self, kind: str, reason: str, now: int, **fields: str) -> None:
        """Record an alert event of ``kind`` (one of :data:`raftsched.model.ALERT_KINDS`)."""
        alert = pb.AlertRecord(kind=kind, error=reason)
        for name, value in fields.items():
            setattr(alert, name, value)
        self.alerts.raise_(alert, now)

    def task_state(self, name: str) -> TaskState | None:
        """The in-memory state of task ``name`` (internal tasks included), or None."""
        return self.tasks.get(name)

    def add_task(self, st: TaskState) -> None:
        """Register a task new to the state machine (:meth:`put_task` stores it)."""
        self.task_book.add(st)

    def put_version(self, st: TaskState) -> None:
        """Store the spec of the task's current version (see :meth:`TaskBook.put_version`)."""
        self.task_book.put_version(st)

    def remove_task(self, name: str) -> None:
        """Forget task ``name`` with its history (see :meth:`TaskBook.remove`)."""
        self.task_book.remove(name)

    def task_names(self, prefix: str) -> list[str]:
        """Names of the tasks (internal ones included) that start with ``prefix``, sorted."""
        return self.task_book.names(prefix)

    def add_run(self, st: TaskState, run_id: str, data: bytes) -> None:
        """A new unfinished run of ``st`` (``data``: the serialised run): counted and stored, with
        the task's record."""
        self.runs.add(st, run_id, data)

    def cancel_run(self, run: pb.Run, reason: str, now: int, epoch: int, effects: list[Effect]) -> None:
        """Cancel the unfinished ``run`` (see :meth:`RunBook.cancel`)."""
        self.runs.cancel(run, reason, now, epoch, effects)

    def put_executor(self, rec: pb.ExecutorRecord) -> None:
        """Store an executor's record as it is now."""
        self.executor_book.put(rec)

    def hot_checkpoint(self, applied: int) -> None:
        self.hot.checkpoint(applied)

    def checkpoint_at_end(self) -> None:
        """Take the task and hot checkpoint at the end of this command (TaskBook.flush)."""
        self.task_book.checkpoint_due = True

    def number_task(self, st: TaskState) -> None:
        self.hot.number_task(st)

    def forget_hot_task(self, st: TaskState) -> None:
        self.hot.forget_task(st)

    def forget_unplaceable(self, name: str) -> None:
        self.executor_book.unplaceable.discard(name)

    def number_executor(self, rec: pb.ExecutorRecord) -> None:
        self.hot.number_executor(rec)

    def promote_hot_on(self, executor: str) -> None:
        self.hot.promote_executor(executor)

    def promote_hot(self, run_id: str) -> pb.Run | None:
        return self.hot.promote_id(run_id)

    def peek_hot(self, run_id: str) -> pb.Run | None:
        seq = seq_of(self.runs.slots, self.tasks, run_id)
        return self.hot.synthesise(seq) if seq else None

    def hot_touched(self, names: Iterable[str]) -> None:
        """Tasks whose counters a hot entry changed: re-put at the next checkpoint (TaskBook)."""
        self.task_book.hot_since.update(names)

    def check_placeable(self, st: TaskState, need: Need, now: int) -> None:
        """Flag ``st`` unplaceable (and alert once) when no live executor could ever run it."""
        self.executor_book.check_placeable(st, need, now)

    # -----------------------------------------------------------------------------------------
    # the commands this module handles itself (the rest: the books, by the table below)

    def _apply_workflow(self, cmd: pb.Command, now: int) -> Handled:
        spec = cmd.apply_workflow.spec
        self.calendars.require(spec.exclude, f"workflow {spec.name!r}")
        return self.wf.defs.apply_workflow(cmd, now)

    def _set_quota(self, cmd: pb.Command, now: int) -> Handled:
        """Create or replace a quota. A new one counts the attempts of its owner or namespace
        that are running already (they hold a place from now, given back when they end)."""
        body = cmd.set_quota.quota
        validate_quota(body)  # before anything changes: a refused quota promotes nothing
        if self.runs.slots.state:
            # A new quota counts the running attempts of its owner or namespace (hold_for_quota
            # walks the cold runs): the hot ones go to the cold path first.
            self.hot.promote_all()
        q, new = self.policy.set_quota(body, now)
        if new:
            self.runs.hold_for_quota(q)
        return pb.CommandResult(ok=True, quota=q), ()

    def _delete_quota(self, cmd: pb.Command, now: int) -> Handled:
        body = cmd.delete_quota
        q = self.policy.delete_quota(body.kind, body.name)
        if q is None:
            raise Reject("not_found", f"no quota for {body.kind} {body.name!r}")
        return pb.CommandResult(ok=True, quota=q), ()

    def _set_pool(self, cmd: pb.Command, now: int) -> Handled:
        return pb.CommandResult(ok=True, pool=self.policy.set_pool(cmd.set_pool.pool, now)), ()

    def _delete_pool(self, cmd: pb.Command, now: int) -> Handled:
        """Delete a pool; refused while a task or workflow task names it (its attempts would wait
        for a pool that no longer exists, or, if deleting freed them, run unlimited)."""
        name = cmd.delete_pool.name
        if name not in self.policy.pools:
            raise Reject("not_found", f"pool {name!r} does not exist")
        users = self._pool_users(name)
        if users:
            shown = ", ".join(users[:20]) + (f" and {len(users) - 20} more" if len(users) > 20 else "")
            raise Reject(
                "conflict", f"pool {name!r} is used by {shown}; give them another pool (or none) first"
            )
        p = self.policy.delete_pool(name)
        return pb.CommandResult(ok=True, pool=p), ()

    # -- task backfills (raftsched.fsm.taskbackfill's host) -------------------------------------

    def user_task(self, name: str) -> TaskState:
        return self.task_book.user_task(name)

    def new_backfill_run(
        self, st: TaskState, nominal: int, now: int, epoch: int, backfill_id: str, params_json: str
    ) -> tuple[Effect, ...]:
        return self.runs.new_backfill(st, nominal, now, epoch, backfill_id, params_json)

    def has_run_at(self, task: str, nominal: int) -> bool:
        return self.runs.has_run_at(task, nominal)

    def put_backfill(self, rec: pb.BackfillRecord) -> None:
        self.store.put(keys.backfill_key(rec.backfill_id), rec.SerializeToString(deterministic=True))

    def _delete_calendar(self, cmd: pb.Command, now: int) -> Handled:
        name = cmd.delete_calendar.name
        self.calendars.delete(name, self._calendar_users(name))
        return pb.CommandResult(ok=True), ()

    def _alerts_delivered(self, cmd: pb.Command, now: int) -> Handled:
        self.alerts.delivered(cmd.alerts_delivered, now, self.alert_seq)
        return pb.CommandResult(ok=True), ()

    # Command handlers by ``Command.body`` field: which book applies which command (called with
    # the state, the command and the leader time ``now``).
    _HANDLERS: ClassVar[dict[str, Callable[[SchedulerState, pb.Command, int], Handled]]] = {
        "create_task": lambda s, cmd, now: s.task_book.create(cmd, now),
        "create_tasks": lambda s, cmd, now: s.task_book.create_many(cmd, now),
        "update_task": lambda s, cmd, now: s.task_book.update(cmd, now),
        "delete_task": lambda s, cmd, now: s.task_book.delete(cmd, now),
        "set_enabled": lambda s, cmd, now: s.task_book.set_enabled(cmd, now),
        "trigger_now": lambda s, cmd, now: s.task_book.trigger_now(cmd, now),
        "fire_batch": lambda s, cmd, now: s.fires.fire_batch(cmd, now),
        "report_results": lambda s, cmd, now: s.runs.report_results(cmd, now),
        "retry_run": lambda s, cmd, now: s.runs.retry_run(cmd, now),
        "executor_join": lambda s, cmd, now: s.executor_book.join(cmd, now),
        "executor_leave": lambda s, cmd, now: s.executor_book.leave(cmd, now),
        "drain_executor": lambda s, cmd, now: s.executor_book.drain(cmd, now),
        "assign_attempts": lambda s, cmd, now: s.executor_book.assign(cmd, now),
        "barrier": _barrier,
        "apply_workflow": _apply_workflow,
        "stage_workflow_tasks": lambda s, cmd, now: s.wf.defs.stage_tasks(cmd, now),
        "start_workflow_run": lambda s, cmd, now: s.wf.start_run_cmd(cmd, now),
        "workflow_run_op": lambda s, cmd, now: s.wf.run_op(cmd, now),
        "start_backfill": lambda s, cmd, now: s.wf.start_backfill(cmd, now),
        "workflow_waits_due": lambda s, cmd, now: s.wf.waits_due(cmd, now),
        "set_workflow_paused": lambda s, cmd, now: s.wf.defs.set_paused(cmd, now),
        "delete_workflow": lambda s, cmd, now: s.wf.delete(cmd, now),
        "raise_alerts": lambda s, cmd, now: (
            pb.CommandResult(ok=True, accounted=s.alerts.raise_leader_alerts(cmd.raise_alerts, now)),
            (),
        ),
        "alerts_delivered": _alerts_delivered,
        "ack_alert": lambda s, cmd, now: (
            pb.CommandResult(ok=True, alert=s.alerts.ack(cmd.ack_alert, now)),
            (),
        ),
        "create_token": lambda s, cmd, now: (s.access.create(cmd.create_token, now), ()),
        "revoke_token": lambda s, cmd, now: (s.access.revoke(cmd.revoke_token, now), ()),
        "set_quota": _set_quota,
        "delete_quota": _delete_quota,
        "set_calendar": lambda s, cmd, now: (
            pb.CommandResult(ok=True, calendar=s.calendars.set(cmd.set_calendar, now)),
            (),
        ),
        "delete_calendar": _delete_calendar,
        "seed_membership": lambda s, cmd, now: (s.membership.seed(cmd.seed_membership), ()),
        "begin_member_change": lambda s, cmd, now: (s.membership.begin(cmd.begin_member_change, now), ()),
        "end_member_change": lambda s, cmd, now: (s.membership.end(cmd.end_member_change), ()),
        "emit_event": lambda s, cmd, now: s.events.emit(cmd, now),
        "set_pool": _set_pool,
        "delete_pool": _delete_pool,
        "start_task_backfill": lambda s, cmd, now: taskbackfill.start(s, cmd, now),
        "cancel_runs": lambda s, cmd, now: s.runs.cancel_runs(cmd, now),
        "number_entities": lambda s, cmd, now: s.hot.number_entities(cmd, now),
        "fire_columns": lambda s, cmd, now: s.hot.fire_columns(cmd, now),
        "assign_columns": lambda s, cmd, now: s.hot.assign_columns(cmd, now),
        "result_columns": lambda s, cmd, now: s.hot.result_columns(cmd, now),
        "promote_hot_runs": lambda s, cmd, now: s.hot.promote_hot_runs(cmd, now),
    }


# Commands that may change a task's hot bit (SchedulerState._refresh_hot).
_HOT_BIT_BODIES: Final = frozenset(
    {"create_task", "create_tasks", "update_task", "set_enabled", "set_quota", "delete_quota"}
)

# The columns' rows are range-checked by their own validation pass (raftsched.fsm.hot).
_CHECKED_PER_ENTRY: Final = frozenset(
    {"fire_batch", "report_results", "assign_attempts", "fire_columns", "assign_columns", "result_columns"}
)


def _check_ranges(cmd: pb.Command, body: str) -> None:
    """Refuse a command with an integer outside its range (:mod:`raftsched.bounds`): the servicers
    refused it already, so this is a leader bug or a hand-made entry, and it must stay a value.

    The three batches of the hot path (every attempt makes one entry of each) are checked entry
    by entry instead, and an entry out of range is refused like a stale one (counted in
    ``refused``), not the whole batch: a fire batch's by :func:`raftsched.fsm.fires.check_task_fires`,
    a result's by :func:`raftsched.fsm.runs.result_in_range`, an assignment's or a wait's shard and attempt by
    fencing (they must equal the shard's current ones, which are in range). Walking every
    entry's fields cost 2-3 us per attempt (bench/attempt_apply.py); the rest is walked."""
    if not 0 <= cmd.now_ms <= bounds.MAX_TIME_MS:
        raise Reject("invalid_argument", f"now_ms: {cmd.now_ms} out of range ({bounds.TIME.text()})")
    if cmd.epoch > bounds.MAX_COUNTER:
        raise Reject("invalid_argument", f"epoch: {cmd.epoch} out of range ({bounds.COUNTER.text()})")
    if body not in _CHECKED_PER_ENTRY:
        problem = bounds.violation(getattr(cmd, body), body + ".")
        if problem is not None:
            raise Reject(problem.code, str(problem))


# A remembered key is ``stamp(8) [0x01 sha256(32)] CommandResult``. 0x01 cannot start an encoded
# CommandResult (it would be field 0), so entries written before fingerprints still read.
_IDEM_FINGERPRINTED: Final = b"\x01"


def _split_idem(value: bytes) -> tuple[bytes, bytes]:
    """``(request fingerprint or b"", encoded CommandResult)`` of a remembered idempotency key."""
    if value[8:9] == _IDEM_FINGERPRINTED:
        return value[9:41], value[41:]
    return b"", value[8:]
