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

Thread model: ``apply`` runs on one thread (the applier). Other threads read the in-memory state
only through :meth:`SchedulerState.view` (``raftsched.fsm.view``), which holds :attr:`lock`, or
through the read methods below, which take it themselves.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ClassVar, Final

from raftsched import bounds, codec
from raftsched.abc import StateStore
from raftsched.errors import InvalidSpec, RaftschedError, quote
from raftsched.fsm import alerts as alerts_mod
from raftsched.fsm import keys, queries, snapshot, wire
from raftsched.fsm import workflows as wf_mod
from raftsched.fsm.access import TokenBook, prune_audit, record_audit
from raftsched.fsm.calendars import CalendarBook
from raftsched.fsm.effects import (
    Applied,
    AttemptReady,
    BarrierCommitted,
    DispatchAttempt,
    Effect,
    ExecutorChanged,
    RunCancelled,
    TaskArmed,
    rejected,
)
from raftsched.fsm.membership import MembershipBook
from raftsched.fsm.policy import LockView, PolicyBook
from raftsched.fsm.records import AGE_PRUNE_EVERY, FINISHED, Retention, TaskState, pending_shards, spec_bytes
from raftsched.fsm.rules import Reject, check_next_fire, check_nothing_due
from raftsched.fsm.timeline import note
from raftsched.fsm.view import StateView
from raftsched.model import (
    MAX_RETRIES,
    Overlap,
    TaskSpec,
    execution_id,
    run_id_for,
    validate_name,
    validate_params,
)
from raftsched.observability.tally import ApplyTally
from raftsched.sharding.placement import (
    NO_NEED,
    ExecutorUsage,
    Need,
    could_ever_fit,
    fits_now,
    need_of,
    validate_capacity,
)
from raftsched.timing.calendar import Calendar
from raftsched.v1 import log_pb2 as pb

log = logging.getLogger(__name__)

Handled = tuple[pb.CommandResult, tuple[Effect, ...]]
"""What a command handler returns: the result, and the effects for the leader."""

MAX_EXECUTOR_SLOTS = bounds.MAX_SLOTS
# Re-placements of a shard's attempts that its executors never started, granted without
# consuming a retry. Past this they count as tries: "unstarted" is the leader's belief from the
# last heartbeat, and an executor that dies while starting the same attempt every time must not
# have it re-placed forever.
MAX_FREE_REPLACEMENTS = 3
# Fire outcomes that raise an alert (a disabled task's skipped fires are what its owner asked for).
_ALERTED_FIRES = frozenset({pb.COALESCED, pb.SKIPPED_OVERLAP, pb.SKIPPED_MISFIRE})
_LEADER_OUTCOMES = frozenset({pb.FIRED, pb.COALESCED, pb.SKIPPED_MISFIRE})  # what a leader may decide
VERSIONS_KEPT = 20

# Label values of the applier's tally (see raftsched.observability.tally).
_BUFFERED = "buffered"  # _overlap's marker: create the run held behind the running one

_OUTCOME_NAMES: dict[int, str] = {
    pb.FIRED: "fired",
    pb.COALESCED: "coalesced",
    pb.SKIPPED_OVERLAP: "skipped_overlap",
    pb.SKIPPED_MISFIRE: "skipped_misfire",
    pb.SKIPPED_DISABLED: "skipped_disabled",
    pb.SKIPPED_CALENDAR: "skipped_calendar",
}
_RUN_STATE_NAMES: dict[int, str] = {pb.SUCCEEDED: "succeeded", pb.FAILED: "failed", pb.CANCELLED: "cancelled"}


class SchedulerState:
    """The FSM. Build with :meth:`load` over a store (empty or not)."""

    def __init__(self, store: StateStore, retention: Retention | None = None) -> None:
        self.store = store
        self.retention = retention or Retention()
        self.lock = threading.RLock()
        self.tasks: dict[str, TaskState] = {}
        # run_id -> serialized Run, for runs not finished. Bytes, not messages: a message costs
        # several hundred bytes of RAM and a microsecond-scale build per fire.
        self.active: dict[str, bytes] = {}
        self.active_per_task: dict[str, int] = {}  # derived from `active`; kept for O(1) lookups
        self.executors: dict[str, pb.ExecutorRecord] = {}
        self.max_epoch = 0
        self.max_now_ms = 0
        self.manual_seq = 0
        self.alert_seq = 0
        self.applied_commands = 0
        self.chain = b""
        self.state_format = codec.SNAPSHOT_FORMAT  # of the stored state (Meta.state_format; 0 reads as 1)
        self.alerts = alerts_mod.AlertBook(store, self.retention, self)
        # Node-local counts of what apply did, for metrics: never replicated, never read by
        # apply, so replicas agree whether or not a node counts (None: it does not).
        self.tally: ApplyTally | None = None
        # Whether the command being applied builds the effects only a leader consumes (runs
        # ready to place, attempts to send, tasks re-armed, executors changed, runs cancelled):
        # the ``leader_effects`` argument of apply, set by apply for its handlers (applier
        # thread only; see raftsched.replica for who decides). BarrierCommitted is always built.
        # Effects are not replicated state: the choice changes nothing stored or hashed.
        self.leader_effects = True
        self.wf = wf_mod.WorkflowBook(self)
        self.access = TokenBook(store)
        # Derived from the active runs (never stored): slots, cpu and memory each executor's
        # running attempts hold, so an assignment that would over-commit one is refused.
        self.usage = ExecutorUsage()
        self._needs: dict[tuple[str, int], Need] = {}  # (task, version) -> need (versions are immutable)
        self.unplaceable: set[str] = set()  # tasks flagged unplaceable (derived from their records)
        self.policy = PolicyBook(store)
        self.calendars = CalendarBook(store)
        self.membership = MembershipBook(store)
        self._load()

    # -----------------------------------------------------------------------------------------
    # loading, snapshot, restore

    @classmethod
    def load(cls, store: StateStore, retention: Retention | None = None) -> SchedulerState:
        return cls(store, retention)

    def _load(self) -> None:
        self.tasks.clear()
        self.active.clear()
        self.active_per_task.clear()
        self.executors.clear()
        self.access.load()
        self.policy.load()
        self.calendars.load()
        self.membership.load()
        for _, value in self.store.scan(keys.EXECUTOR, keys.EXECUTOR + keys.END):
            executor = pb.ExecutorRecord()
            executor.ParseFromString(value)
            self.executors[executor.name] = executor
        meta_bytes = self.store.get(keys.META)
        if meta_bytes:
            meta = pb.Meta()
            meta.ParseFromString(meta_bytes)
            self.max_epoch = meta.max_epoch
            self.max_now_ms = meta.max_leader_now_ms
            self.manual_seq = meta.manual_seq
            self.alert_seq = meta.alert_seq
            self.applied_commands = meta.applied_commands
            self.chain = meta.chain
            self.state_format = meta.state_format or 1
            snapshot.refuse_newer("the stored state has format", meta.state_format)
        else:
            self.max_epoch = self.max_now_ms = self.manual_seq = self.applied_commands = 0
            self.alert_seq = 0
            self.chain = b""
        for _, value in self.store.scan(keys.TASK, keys.task_prefix_end()):
            rec = pb.TaskRecord()
            rec.ParseFromString(value)
            st = TaskState(wf_mod.spec_from_record(rec.spec), spec_bytes(rec.spec))
            for name in TaskState.__slots__:
                if name not in TaskState.NOT_STORED:
                    setattr(st, name, getattr(rec, name))
            self.tasks[st.spec.name] = st
        for _, value in self.store.scan(keys.RUN, keys.RUN + keys.END):
            run = pb.Run()
            run.ParseFromString(value)
            if run.state not in FINISHED:
                self.active[run.run_id] = value
                self.active_per_task[run.task] = self.active_per_task.get(run.task, 0) + 1
                for shard in run.shards:
                    if shard.holds or shard.waiting:
                        task = self.tasks.get(run.task)
                        self.policy.load_shard(run, shard, task.spec.locks if task is not None else ())
        self.wf.load()
        self.usage.clear()
        self._needs.clear()
        self.unplaceable = {name for name, st in self.tasks.items() if st.unplaceable}
        for run_id in sorted(self.active):
            run = pb.Run.FromString(self.active[run_id])
            for shard in run.shards:
                if shard.state == pb.RUNNING:
                    self.usage.take((run_id, shard.shard), shard.executor, self.need_for_run(run))

    def _save_meta(self) -> None:
        meta = pb.Meta(
            max_epoch=self.max_epoch,
            max_leader_now_ms=self.max_now_ms,
            manual_seq=self.manual_seq,
            alert_seq=self.alert_seq,
            applied_commands=self.applied_commands,
            chain=self.chain,
            state_format=codec.SNAPSHOT_FORMAT,
        )
        self.state_format = codec.SNAPSHOT_FORMAT
        self.store.put(keys.META, meta.SerializeToString(deterministic=True))

    def snapshot(self) -> bytes:
        """The canonical image of the replicated state: equal on every replica at the same index."""
        return snapshot.encode(self.replicated_items())

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
                applied = Applied(rejected(rej.code, rej.message))
            except RaftschedError as exc:  # InvalidSpec, NotFound, Conflict... raised before mutating
                applied = Applied(rejected(exc.code, str(exc)))
            except Exception as exc:  # a bug: log loudly, but never wedge every replica
                if self.store.failure() is not None:
                    raise  # the store cannot take writes: the replica stops this node's applying
                log.critical("apply failed on a %s command: %r", cmd.WhichOneof("body"), exc, exc_info=True)
                applied = Applied(rejected("internal", f"internal error applying command: {exc!r}"))
            self.wf.flush()  # workflow runs changed by this command, written once
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
        result, effects = handler(self, cmd, now)
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

    def _prune_idempotency(self) -> None:
        horizon = self.max_now_ms - self.retention.idempotency_keep_ms
        if horizon <= 0:
            return
        end = keys.IDEM_EXPIRY + f"{horizon:016x}".encode()
        for k, _ in self.store.scan(keys.IDEM_EXPIRY, end, limit=self.retention.prune_step):
            self.store.delete(k)
            self.store.delete(keys.IDEM + k[len(keys.IDEM_EXPIRY) + 17 :])

    # -----------------------------------------------------------------------------------------
    # task commands

    def _task(self, name: str) -> TaskState:
        st = self.tasks.get(name)
        if st is None or wf_mod.is_internal(name):
            raise Reject("not_found", f"task {name!r} does not exist")
        return st

    # -- the task side the workflow book works through (apply thread only) ----------------------

    def task_state(self, name: str) -> TaskState | None:
        """The in-memory state of task ``name`` (internal tasks included), or None."""
        return self.tasks.get(name)

    def add_task(self, st: TaskState) -> None:
        """Register a task new to the state machine (:meth:`put_task` stores it)."""
        # Runs of a deleted task of the same name may still be active (delete leaves them to
        # finish); they count here, or their completion would drive the counter below zero.
        st.active_runs = self.active_per_task.get(st.spec.name, 0)
        self.tasks[st.spec.name] = st

    def put_task(self, st: TaskState) -> None:
        """Store the task's record as it is now."""
        self.store.put(keys.task_key(st.spec.name), st.record_bytes())

    def next_sequence(self) -> int:
        """The next value of the replicated sequence that makes manual run ids unique."""
        self.manual_seq += 1
        return self.manual_seq

    def next_alert_seq(self) -> int:
        """The next value of the replicated sequence of alert events (their ids)."""
        self.alert_seq += 1
        return self.alert_seq

    def raise_alert(self, kind: str, reason: str, now: int, **fields: str) -> None:
        """Record an alert event of ``kind`` (one of :data:`raftsched.fsm.alerts.KINDS`)."""
        alert = pb.AlertRecord(kind=kind, error=reason)
        for name, value in fields.items():
            setattr(alert, name, value)
        self.alerts.raise_(alert, now)

    def add_run(self, st: TaskState, run_id: str, data: bytes) -> None:
        """A new unfinished run of ``st`` (``data``: the serialised run): counted and stored, with
        the task's record."""
        name = st.spec.name
        self.active[run_id] = data
        self.active_per_task[name] = self.active_per_task.get(name, 0) + 1
        st.active_runs += 1
        st.runs_total += 1
        self.put_task(st)
        self.store.put(keys.run_key_for_id(run_id), data)

    def put_version(self, st: TaskState) -> None:
        """Keep every version's spec: a run executes the definition it fired with. Only the newest
        VERSIONS_KEPT versions are kept (older runs than that fall back to the newest spec)."""
        name = st.spec.name
        self.store.put(keys.version_key(name, st.version), st.spec_bytes)
        if st.version > VERSIONS_KEPT:
            self.store.delete(keys.version_key(name, st.version - VERSIONS_KEPT))

    def _armed(self, st: TaskState) -> TaskArmed:
        return TaskArmed(st.spec.name, st.version, st.next_fire_ms if st.enabled else 0)

    def _create(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        st = self._create_one(cmd.create_task, now)
        return pb.CommandResult(ok=True, task=st.record()), (self._armed(st),)

    def _create_many(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        """Bulk create: every item is created or refused on its own; refusals change nothing."""
        result = pb.CommandResult(ok=True)
        effects: list[Effect] = []
        for item in cmd.create_tasks.items:
            try:
                st = self._create_one(item, now)
            except Reject as rej:
                result.items.add(name=item.spec.name, ok=False, code=rej.code, message=rej.message)
            except InvalidSpec as exc:
                result.items.add(name=item.spec.name, ok=False, code=InvalidSpec.code, message=str(exc))
            else:
                result.items.add(name=st.spec.name, ok=True, version=st.version, next_fire_ms=st.next_fire_ms)
                effects.append(self._armed(st))
        return result, tuple(effects)

    def _create_one(self, body: pb.CreateTask, now: int) -> TaskState:
        spec = codec.spec_from_pb(body.spec)
        if spec.name in self.tasks:
            raise Reject("already_exists", f"task {spec.name!r} already exists")
        self.calendars.require(spec.exclude, f"task {spec.name!r}")
        check_next_fire(body.next_fire_ms, now)
        st = TaskState(spec, spec_bytes(codec.spec_to_pb(spec)))
        st.version = 1
        st.enabled = not body.disabled
        st.created_ms = st.updated_ms = now
        st.watermark_ms = now
        st.next_fire_ms = body.next_fire_ms
        self.add_task(st)
        self.put_task(st)
        self.put_version(st)
        return st

    def _update(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        body = cmd.update_task
        spec = codec.spec_from_pb(body.spec)
        st = self._task(spec.name)
        if body.expected_version and body.expected_version != st.version:
            raise Reject(
                "conflict", f"task {spec.name!r} is at version {st.version}, not {body.expected_version}"
            )
        check_next_fire(body.next_fire_ms, max(st.watermark_ms, now))
        check_nothing_due(st, now)
        self.calendars.require(spec.exclude, f"task {spec.name!r}")
        st.spec = spec
        st.spec_bytes = spec_bytes(codec.spec_to_pb(spec))
        st.run_template = st.fire_template = None
        st.version += 1
        st.updated_ms = now
        # Fires up to now were owed under the old trigger and the leader accounted them before
        # proposing this update only if they were due; from here on the new trigger governs.
        st.watermark_ms = max(st.watermark_ms, now)
        st.next_fire_ms = body.next_fire_ms
        self.put_task(st)
        self.put_version(st)
        return pb.CommandResult(ok=True, task=st.record()), (self._armed(st),)

    def _delete(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        name = cmd.delete_task.name
        st = self._task(name)
        self.remove_task(name)
        return pb.CommandResult(ok=True), (TaskArmed(name, st.version, 0),)

    def remove_task(self, name: str) -> None:
        """Forget task ``name`` with its history; its active runs are left to finish (their
        results are still accepted) but nothing new is created."""
        del self.tasks[name]
        self.store.delete(keys.task_key(name))
        for kind in (keys.FIRE, keys.RUN, keys.VERSION):
            for k, v in self.store.scan(keys.per_task_prefix(kind, name), keys.per_task_end(kind, name)):
                if kind == keys.RUN:
                    run = pb.Run()
                    run.ParseFromString(v)
                    if run.run_id in self.active:
                        continue
                self.store.delete(k)

    def task_names(self, prefix: str) -> list[str]:
        """Names of the tasks (internal ones included) that start with ``prefix``, sorted."""
        return sorted(name for name in self.tasks if name.startswith(prefix))

    def _set_enabled(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        body = cmd.set_enabled
        st = self._task(body.name)
        if body.enabled:
            check_next_fire(body.next_fire_ms, max(st.watermark_ms, now))
        else:
            check_nothing_due(st, now)
        if st.enabled != body.enabled:
            st.enabled = body.enabled
            st.updated_ms = now
            if body.enabled:
                # Fires that fell due while disabled are not owed: start accounting from now.
                st.watermark_ms = max(st.watermark_ms, now)
                st.next_fire_ms = body.next_fire_ms
            self.put_task(st)
        return pb.CommandResult(ok=True, task=st.record()), (self._armed(st),)

    def _trigger_now(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        body = cmd.trigger_now
        st = self._task(body.name)
        if body.params_json:
            validate_params(body.params_json)
        run_id, data, effects = self._new_run(st, now, now, cmd.epoch, manual_seq=self.next_sequence())
        run = pb.Run()
        run.ParseFromString(data)
        if body.params_json:
            run.params_json = body.params_json
            data = run.SerializeToString(deterministic=True)
            self.active[run_id] = data
            self.store.put(keys.run_key_for_id(run_id), data)
        self.put_task(st)
        return pb.CommandResult(ok=True, run=run), effects

    def _barrier(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
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
    # fires and runs

    def _overlap(self, st: TaskState, now: int, epoch: int, effects: list[Effect]) -> tuple[int, str]:
        """The outcome of a fire while ``st`` has an unfinished run, by its overlap policy
        (``allow`` never gets here): ``(FIRED, "")``, ``(FIRED, _BUFFERED)`` (the run is created
        held) or ``(SKIPPED_OVERLAP, reason)``."""
        policy = st.spec.overlap
        if policy == Overlap.BUFFER_ONE and st.spec.handler != "workflow":
            if st.held_run:
                return (
                    pb.SKIPPED_OVERLAP,
                    f"run {st.held_run} already waits for the running one (overlap=buffer_one)",
                )
            return pb.FIRED, _BUFFERED
        if policy == Overlap.REPLACE and st.spec.handler != "workflow":
            self._cancel_task_runs(st, now, epoch, effects)
            return pb.FIRED, "replaced the unfinished run (overlap=replace)"
        return pb.SKIPPED_OVERLAP, f"an earlier run was still unfinished (overlap={policy})"

    def _cancel_task_runs(self, st: TaskState, now: int, epoch: int, effects: list[Effect]) -> None:
        """overlap=replace: every unfinished run of ``st`` is cancelled (its running attempts are
        stopped by the leader). Scans the active runs: only replace tasks with a run pay for it."""
        name = st.spec.name
        for run_id in sorted(self.active):
            run = self.active_run(run_id)
            assert run is not None
            if run.task != name:
                continue
            attempts: list[tuple[int, int, str]] = []
            for shard in run.shards:
                if shard.state not in FINISHED:
                    attempts.append(
                        (shard.shard, shard.attempt, shard.executor if shard.state == pb.RUNNING else "")
                    )
                    shard.state = pb.CANCELLED
                    shard.finished_ms = now
                    shard.error = "replaced by a newer fire (overlap=replace)"
                    note(run, "cancelled", now, shard, reason="replaced by a newer fire (overlap=replace)")
            run.state = pb.CANCELLED
            run.finished_ms = now
            run.held = False
            self.finish_run(run, now)
            effects.append(RunCancelled(run_id, tuple(attempts), epoch))
        st.held_run = ""

    def need_for_run(self, run: pb.Run) -> Need:
        """What each attempt of ``run`` holds on its executor besides its slot."""
        key = (run.task, run.task_version)
        need = self._needs.get(key)
        if need is None:
            if run.workflow_run:
                wspec = self.wf.task_spec(run)
                need = (
                    need_of(wspec.resource_cpu, wspec.resource_memory_mb, wspec.selector)
                    if wspec is not None
                    else NO_NEED
                )
            else:
                spec = self.spec_for(run.task, run.task_version)
                need = need_of(spec.resource_cpu, spec.resource_memory_mb, spec.selector) if spec else NO_NEED
            self._needs[key] = need
        return need

    def check_placeable(self, st: TaskState, need: Need, now: int) -> None:
        """:meth:`_check_placeable` for the workflow book (its task runs)."""
        self._check_placeable(st, need, now)

    def _check_placeable(self, st: TaskState, need: Need, now: int) -> None:
        """Flag ``st`` (and alert once) when no live executor could ever run an attempt needing
        ``need``; clear the flag when one could."""
        fits = any(
            rec.alive and could_ever_fit(need, rec.cpu, rec.memory_mb, rec.labels)
            for rec in self.executors.values()
        )
        if fits:
            if st.unplaceable:
                st.unplaceable = ""
                self.unplaceable.discard(st.spec.name)
                self.put_task(st)
            return
        if st.unplaceable:
            return
        live = sum(1 for rec in self.executors.values() if rec.alive)
        st.unplaceable = f"needs {need.text()}: none of the {live} live executors could ever run it"
        self.unplaceable.add(st.spec.name)
        self.put_task(st)
        workflow = wf_mod.split_internal(st.spec.name)[0] if wf_mod.is_internal(st.spec.name) else ""
        self.raise_alert(
            alerts_mod.UNPLACEABLE,
            f"task {st.spec.name} is unplaceable: {st.unplaceable}; its attempts wait for a fitting executor",
            now,
            task=st.spec.name,
            workflow=workflow,
            owner=st.spec.owner,
            namespace=st.spec.namespace,
        )

    def _release_held(self, task: str, now: int, effects: list[Effect]) -> None:
        """overlap=buffer_one: the task's running run finished; its buffered run may start."""
        st = self.tasks.get(task)
        if st is None or not st.held_run:
            return
        run = self.active_run(st.held_run)
        st.held_run = ""
        self.put_task(st)
        if run is None:
            return
        run.held = False
        note(run, "released", now, reason="the run it waited for finished (overlap=buffer_one)")
        data = run.SerializeToString(deterministic=True)
        self.active[run.run_id] = data
        self.store.put(keys.run_key_for_id(run.run_id), data)
        effects.extend(self._attempt_ready(run, shard, run.epoch) for shard in run.shards)

    def _new_run(
        self, st: TaskState, nominal: int, now: int, epoch: int, manual_seq: int = 0, hold: bool = False
    ) -> tuple[str, bytes, tuple[Effect, ...]]:
        """Create a run; returns ``(run_id, serialized run, dispatch effects)``.

        Hot path (one call per fire): the fields that are the same for every run of this task
        version are serialized once (``TaskState.run_template``) and concatenated with the
        per-fire fields; concatenated messages parse as one, and every replica produces the same
        bytes.
        """
        name = st.spec.name
        shards = st.spec.shards
        run_id = run_id_for(name, nominal, manual_seq)
        template = st.run_template
        if template is None:
            template = st.run_template = pb.Run(
                task=name,
                task_version=st.version,
                state=pb.PENDING,
                params_json=st.spec.params_json,
                shards=pending_shards(shards),
            ).SerializeToString(deterministic=True)
        data = template + wire.run_fields(run_id, nominal, now, epoch, bool(manual_seq), hold)
        self.active[run_id] = data
        self.active_per_task[name] = self.active_per_task.get(name, 0) + 1
        st.active_runs += 1
        st.runs_total += 1
        suffix = f"~m{manual_seq}" if manual_seq else ""
        self.store.put(keys.time_key(keys.RUN, name, nominal, suffix), data)
        if self.unplaceable or st.spec.resource_cpu or st.spec.resource_memory_mb or st.spec.selector:
            need = self._needs.get((name, st.version))
            if need is None:
                s = st.spec
                need = self._needs[(name, st.version)] = need_of(
                    s.resource_cpu, s.resource_memory_mb, dict(s.selector)
                )
            if need.declared or st.unplaceable:
                self._check_placeable(st, need, now)
        if hold:
            st.held_run = run_id
            return run_id, data, ()
        if not self.leader_effects:
            return run_id, data, ()
        if shards == 1:
            return run_id, data, (AttemptReady(run_id, name, nominal, 0, 1, epoch),)
        return run_id, data, tuple(AttemptReady(run_id, name, nominal, i, 1, epoch) for i in range(shards))

    def active_run(self, run_id: str) -> pb.Run | None:
        """A fresh copy of the unfinished run ``run_id``, or None (apply thread, or hold the lock)."""
        data = self.active.get(run_id)
        if data is None:
            return None
        run = pb.Run()
        run.ParseFromString(data)
        return run

    def _fire_batch(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        # Never early is checked per fire against the stamping leader's clock (cmd.now_ms), not the
        # max committed time: one leader pipelines commands stamped by several threads, so they
        # may commit slightly out of stamp order. A *new* leader never stamps below the committed
        # max (the driver starts from it after its barrier), which is what invariant 3 asks.
        now = cmd.now_ms
        effects: list[Effect] = []
        lead = self.leader_effects
        fired = accounted = refused = 0
        for tf in cmd.fire_batch.tasks:
            st = self.tasks.get(tf.task)
            problem = self._check_task_fires(st, tf, now)
            if problem or st is None:
                refused += 1
                log.debug("fire batch entry for %s refused: %s", tf.task, problem)
                continue
            exclude = st.spec.exclude
            for fire in tf.fires:
                outcome: int = fire.outcome
                reason, run_id, calendar = fire.reason, "", ""
                if not st.enabled:
                    outcome, reason = pb.SKIPPED_DISABLED, "task disabled when the fire was committed"
                elif (
                    outcome == pb.FIRED
                    and exclude
                    and (cal := self.calendars.excluding(exclude, fire.nominal_ms)) is not None
                ):
                    # Decided here from the nominal time and the replicated calendar (its zone's
                    # offsets travel with it), so every replica skips the same fires.
                    outcome, reason, calendar = pb.SKIPPED_CALENDAR, cal.why(fire.nominal_ms), cal.name
                elif outcome == pb.FIRED and st.active_runs > 0 and st.spec.overlap != Overlap.ALLOW:
                    outcome, reason = self._overlap(st, now, cmd.epoch, effects)
                if outcome == pb.FIRED:
                    if st.spec.handler == "workflow" and st.spec.name.endswith(wf_mod.SEP):
                        run_id = self.wf.start_scheduled(st, fire.nominal_ms, now, cmd.epoch, effects)
                    else:
                        hold = reason == _BUFFERED
                        run_id, _, run_effects = self._new_run(st, fire.nominal_ms, now, cmd.epoch, hold=hold)
                        if lead:
                            effects.extend(run_effects)
                        if hold:
                            reason = f"buffered behind the running run (overlap=buffer_one): {run_id} waits"
                    fired += 1
                self._account(st, fire, outcome, reason, run_id, now, cmd.epoch, calendar)
                accounted += 1
            st.watermark_ms = max(st.watermark_ms, tf.watermark_ms)
            st.next_fire_ms = tf.next_fire_ms
            self.put_task(st)
            if lead:
                effects.append(self._armed(st))
        return pb.CommandResult(ok=True, fired=fired, accounted=accounted, refused=refused), tuple(effects)

    @staticmethod
    def _check_task_fires(st: TaskState | None, tf: pb.TaskFires, now: int) -> str:
        if st is None:
            return "task no longer exists"
        if tf.version != st.version:
            return f"computed for version {tf.version}, task is at {st.version}"
        last = st.watermark_ms
        # Nominal, through and watermark times are in range by the checks below (after the
        # watermark, at most now); a count is bounded here, and so is the total it adds.
        counted = st.fires_total
        for fire in tf.fires:
            # Each field read once: a protobuf attribute read is the cost here (every fire).
            nominal, through, outcome, count = fire.nominal_ms, fire.through_ms, fire.outcome, fire.count
            if count > bounds.MAX_FIRE_COUNT:
                return f"count {count} out of range (0..{bounds.MAX_FIRE_COUNT})"
            counted += count or 1
            if nominal <= last:
                return f"fire at {nominal} is not after {last} (already accounted)"
            end = through if through > nominal else nominal
            if end > now:
                return f"fire at {end} is later than now {now} (never early)"
            if outcome not in _LEADER_OUTCOMES:
                return f"leader cannot decide outcome {outcome}"
            if through:
                if through <= nominal:
                    return f"range {nominal}..{through} is empty"
                if outcome == pb.FIRED:
                    # One run per fire id: a fired record that claimed a range would account
                    # fires as run that never got a run.
                    return f"a fired record covers one fire, not {nominal}..{through}"
            elif outcome == pb.FIRED and count > 1:
                return f"a fired record covers one fire, not {nominal}..{through}"
            last = end
        if tf.watermark_ms < last or tf.watermark_ms > now:
            return f"watermark {tf.watermark_ms} outside [{last}, {now}]"
        if tf.next_fire_ms and tf.next_fire_ms <= tf.watermark_ms:
            return f"next fire {tf.next_fire_ms} is not after the watermark {tf.watermark_ms}"
        if tf.next_fire_ms > bounds.MAX_TIME_MS:
            return f"next fire {tf.next_fire_ms} out of range ({bounds.TIME.text()})"
        if counted > bounds.MAX_COUNTER:
            return f"fires accounted would pass {bounds.MAX_COUNTER}"
        return ""

    def _account(
        self,
        st: TaskState,
        fire: pb.Fire,
        outcome: int,
        reason: str,
        run_id: str,
        now: int,
        epoch: int,
        calendar: str = "",
    ) -> None:
        name = st.spec.name
        count = fire.count or 1
        # Like runs, the per-version fields are serialized once and concatenated (hot path).
        template = st.fire_template
        if template is None:
            template = st.fire_template = pb.FireRecord(task=name, task_version=st.version).SerializeToString(
                deterministic=True
            )
        rec = wire.fire_fields(
            fire.nominal_ms, outcome, reason, now, epoch, run_id, fire.through_ms, count, calendar
        )
        self.store.put(keys.time_key(keys.FIRE, name, fire.nominal_ms), template + rec)
        st.fires_total += count
        if self.tally is not None:
            spec = st.spec
            self.tally.fire(_OUTCOME_NAMES.get(outcome, "unknown"), spec.owner, spec.namespace, name, count)
        st.kept_fires += 1
        self._prune_fires(st, now)
        if outcome in _ALERTED_FIRES:
            self._fire_alert(st, fire, outcome, reason, now)

    def _fire_alert(self, st: TaskState, fire: pb.Fire, outcome: int, reason: str, now: int) -> None:
        kind = alerts_mod.FIRE_COALESCED if outcome == pb.COALESCED else alerts_mod.FIRE_SKIPPED
        name = st.spec.name
        workflow = wf_mod.split_internal(name)[0] if wf_mod.is_internal(name) else ""
        what = pb.FireOutcome.Name(outcome).lower()
        count = fire.count or 1
        span = f"{count} fires from {fire.nominal_ms}" if count > 1 else f"fire at {fire.nominal_ms}"
        self.raise_alert(
            kind,
            f"{span} {what}: {reason}" if reason else f"{span} {what}",
            now,
            task=name,
            workflow=workflow,
            owner=st.spec.owner,
            namespace=st.spec.namespace,
        )

    def _prune_fires(self, st: TaskState, now: int) -> None:
        # Over the count limit: prune now. Age is checked every 64th record only (it needs a
        # read of the oldest record); both conditions are deterministic, so replicas agree.
        age_check = st.fires_total % 64 == 0
        if st.kept_fires <= self.retention.keep_count and not age_check:
            return
        name = st.spec.name
        horizon = now - self.retention.keep_ms
        lo, hi = keys.per_task_prefix(keys.FIRE, name), keys.per_task_end(keys.FIRE, name)
        # An age check must be able to drop every record that aged out since the previous one
        # (up to 64), or age retention falls further behind on every check.
        limit = self.retention.prune_step + (64 if age_check else 0)
        for k, v in self.store.scan(lo, hi, limit=limit):
            if st.kept_fires <= self.retention.keep_count:
                rec = pb.FireRecord()
                rec.ParseFromString(v)
                if rec.decided_ms >= horizon:
                    break
            self.store.delete(k)
            st.kept_fires -= 1

    def _report_results(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        """Attempt outcomes, batched: from executors (``executor`` set) or the leader (``lost``).

        Fencing: a result for an attempt that is not the shard's current one, for a finished
        shard, or from an executor other than the one the attempt is assigned to, is refused and
        changes nothing. A failure with retries left re-queues the shard as attempt N+1, not before
        the leader's ``retry_at_ms`` (backoff with jitter chosen by the leader, so replicas agree).
        """
        accepted = refused = 0
        effects: list[Effect] = []
        for res in cmd.report_results.results:
            run = self.active_run(res.run_id)
            shard = run.shards[res.shard] if run is not None and res.shard < len(run.shards) else None
            if (
                run is None
                or shard is None
                or shard.attempt != res.attempt
                or shard.state in FINISHED
                or (not res.lost and shard.executor and res.executor != shard.executor)
                or not _result_in_range(res)
            ):
                refused += 1  # stale attempt, unknown run, wrong executor, out of range: fenced off
                continue
            if res.lost:
                note(run, "lease_expired", now, shard, executor=shard.executor, reason=res.error)
            self._settle_shard(run, shard, res, now, cmd.epoch, effects)
            accepted += 1
        return pb.CommandResult(ok=True, accounted=accepted, refused=refused), tuple(effects)

    def _settle_shard(
        self,
        run: pb.Run,
        shard: pb.ShardAttempt,
        res: pb.AttemptResult,
        now: int,
        epoch: int,
        effects: list[Effect],
    ) -> None:
        self.usage.release((run.run_id, shard.shard))
        self.release_holds(run, shard)
        st = self.tasks.get(run.task)
        max_retries = st.spec.max_retries if st is not None else 0
        if run.workflow_run:
            wspec = self.wf.task_spec(run)  # the version the workflow run is pinned to
            max_retries = wspec.max_retries if wspec is not None else max_retries
        shard.error = res.error
        shard.timed_out = res.timed_out
        shard.exit_code = res.exit_code
        shard.stdout_tail = res.stdout_tail
        shard.stderr_tail = res.stderr_tail
        free = res.lost and res.unstarted and shard.unstarted < MAX_FREE_REPLACEMENTS
        if free:
            # Its executor died before starting it: not a try. The next attempt number fences
            # the dead executor's late start or result; the retry budget is left as it was.
            shard.unstarted += 1
            shard.retry_base += 1
        elif res.lost:
            shard.lost += 1
        else:
            _note_outcome(run, shard, res, now)
        if not free and (res.lost or res.timed_out) and not res.success:
            self._attempt_alert(run, shard, res, st, now)
        retry = not res.success and shard.attempt - shard.retry_base <= max_retries
        if self.tally is not None:
            _tally_attempt(self.tally, st, run.task, res, retry)
        if res.success:
            shard.state = pb.SUCCEEDED
            shard.finished_ms = now
        elif retry:
            shard.attempt += 1
            shard.state = pb.PENDING
            shard.executor = ""
            shard.assigned_ms = 0
            shard.not_before_ms = max(res.retry_at_ms, now)
            note(run, "retry_scheduled", now, shard, retry_at_ms=shard.not_before_ms)
            effects.append(self._attempt_ready(run, shard, epoch))
            if run.workflow_run:
                self.wf.task_run_retrying(run, shard, res.error, now)
        else:
            shard.state = pb.FAILED
            shard.finished_ms = now
        if all(s.state in FINISHED for s in run.shards):
            failed = [s for s in run.shards if s.state != pb.SUCCEEDED]
            run.state = pb.FAILED if failed else pb.SUCCEEDED
            run.finished_ms = now
            if failed:
                self._run_failed_alert(run, failed[0], st, now)
            self.finish_run(run, now)
            if run.workflow_run:
                self.wf.task_run_finished(run, now, epoch, effects)
            elif st is not None and st.held_run and st.held_run != run.run_id:
                self._release_held(run.task, now, effects)
            return
        if run.state == pb.PENDING and any(s.state != pb.PENDING for s in run.shards):
            run.state = pb.RUNNING
        data = run.SerializeToString(deterministic=True)
        self.active[run.run_id] = data
        self.store.put(keys.run_key_for_id(run.run_id), data)

    def release_holds(self, run: pb.Run, shard: pb.ShardAttempt) -> None:
        """``shard``'s attempt stops running (or waiting): give back its quota places and locks."""
        if shard.holds:
            self.policy.release(shard.holds, execution_id(run.run_id, shard.shard, shard.attempt))
            del shard.holds[:]
        if shard.waiting:
            shard.waiting = ""
            shard.waiting_since_ms = 0
            self.policy.forget_wait(run.run_id, shard.shard)

    def finish_run(self, run: pb.Run, now: int) -> None:
        """``run`` reached a final state: it leaves the active set, and its task's counters."""
        if self.tally is not None:
            done = self.tasks.get(run.task)
            owner, namespace = (done.spec.owner, done.spec.namespace) if done is not None else ("", "")
            self.tally.run_finished(_RUN_STATE_NAMES.get(run.state, "unknown"), owner, namespace, run.task)
        del self.active[run.run_id]
        for shard in run.shards:
            self.usage.release((run.run_id, shard.shard))
        left = self.active_per_task[run.task] - 1
        if left:
            self.active_per_task[run.task] = left
        else:
            del self.active_per_task[run.task]
        st = self.tasks.get(run.task)
        if st is not None:
            st.active_runs -= 1
            st.kept_runs += 1
            self._prune_runs(st, now)
            self.put_task(st)
        self.store.put(keys.run_key_for_id(run.run_id), run.SerializeToString(deterministic=True))

    def _attempt_ready(self, run: pb.Run, shard: pb.ShardAttempt, epoch: int) -> AttemptReady:
        """The effect that makes ``shard``'s current attempt dispatchable from its ``not_before_ms``."""
        return AttemptReady(
            run.run_id,
            run.task,
            run.nominal_ms,
            shard.shard,
            shard.attempt,
            epoch,
            shard.not_before_ms,
            self.wf.backfill_share(run),
        )

    def _alert_subject(self, run: pb.Run, shard: pb.ShardAttempt, st: TaskState | None) -> dict[str, str]:
        workflow = wf_mod.split_internal(run.task)[0] if run.workflow_run else ""
        return {
            "task": run.task,
            "workflow": workflow,
            "workflow_run": run.workflow_run,
            "owner": st.spec.owner if st is not None else "",
            "namespace": st.spec.namespace if st is not None else "",
            "run_id": run.run_id,
            "execution_id": execution_id(run.run_id, shard.shard, shard.attempt),
            "output_tail": alerts_mod.output_tail(shard.stdout_tail, shard.stderr_tail),
        }

    def _attempt_alert(
        self, run: pb.Run, shard: pb.ShardAttempt, res: pb.AttemptResult, st: TaskState | None, now: int
    ) -> None:
        """An attempt timed out or was lost with its executor (whether or not a retry follows)."""
        kind = alerts_mod.LOST if res.lost else alerts_mod.TIMEOUT
        reason = res.error or ("attempt lost" if res.lost else "attempt timed out")
        self.raise_alert(kind, reason, now, **self._alert_subject(run, shard, st))

    def _run_failed_alert(self, run: pb.Run, shard: pb.ShardAttempt, st: TaskState | None, now: int) -> None:
        """A run failed after its last retry: owner, execution id of the failed attempt, last error."""
        reason = shard.error or (f"exit code {shard.exit_code}" if shard.exit_code else "failed")
        self.raise_alert(alerts_mod.RUN_FAILED, reason, now, **self._alert_subject(run, shard, st))

    # -----------------------------------------------------------------------------------------
    # alerts (fsm/alerts.py)

    def _raise_alerts(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        raised = self.alerts.raise_leader_alerts(cmd.raise_alerts, now)
        return pb.CommandResult(ok=True, accounted=raised), ()

    def _alerts_delivered(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        self.alerts.delivered(cmd.alerts_delivered, now, self.alert_seq)
        return pb.CommandResult(ok=True), ()

    def _ack_alert(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        return pb.CommandResult(ok=True, alert=self.alerts.ack(cmd.ack_alert, now)), ()

    def _retry_run(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        """Forced retry of a failed run: its failed shards get a new attempt, with a fresh retry count."""
        run_id = cmd.retry_run.run_id
        raw = self.store.get(keys.run_key_for_id(run_id)) if "@" in run_id else None
        if raw is None:
            raise Reject("not_found", f"run {run_id!r} does not exist (or its history was pruned)")
        run = pb.Run.FromString(raw)
        if run.workflow_run:
            raise Reject(
                "conflict",
                f"run {run_id!r} is a task of workflow run {run.workflow_run!r}: rerun the task in the "
                "workflow run instead (its downstream tasks follow)",
            )
        if run.run_id in self.active or run.state != pb.FAILED:
            raise Reject("conflict", f"run {run_id!r} is {pb.RunState.Name(run.state).lower()}, not failed")
        st = self.tasks.get(run.task)
        if st is None:
            raise Reject("not_found", f"task {run.task!r} of run {run_id!r} no longer exists")
        # A forced retry gives a shard up to max_retries + free re-placements more attempts:
        # their numbers must stay in range (bounds.MAX_ATTEMPT), checked before anything changes.
        headroom = bounds.MAX_ATTEMPT - MAX_RETRIES - MAX_FREE_REPLACEMENTS - 1
        if any(s.state != pb.SUCCEEDED and s.attempt >= headroom for s in run.shards):
            raise Reject(
                "invalid_argument",
                f"run {run_id!r} has used its attempt numbers (at most {bounds.MAX_ATTEMPT} per shard)",
            )
        effects: list[Effect] = []
        for shard in run.shards:
            if shard.state != pb.SUCCEEDED:
                shard.attempt += 1
                shard.retry_base = shard.attempt - 1
                shard.state = pb.PENDING
                shard.executor = ""
                shard.not_before_ms = now
                shard.finished_ms = 0
                note(run, "retry_requested", now, shard)
                effects.append(self._attempt_ready(run, shard, cmd.epoch))
        run.state = pb.RUNNING
        run.finished_ms = 0
        data = run.SerializeToString(deterministic=True)
        self.active[run.run_id] = data
        self.active_per_task[run.task] = self.active_per_task.get(run.task, 0) + 1
        st.active_runs += 1
        st.kept_runs = max(0, st.kept_runs - 1)
        self.put_task(st)
        self.store.put(keys.run_key_for_id(run.run_id), data)
        return pb.CommandResult(ok=True, run=run), tuple(effects)

    # -----------------------------------------------------------------------------------------
    # executors

    def _executor_join(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        body = cmd.executor_join
        validate_name(body.name, "executor.name")
        if not 1 <= body.slots <= MAX_EXECUTOR_SLOTS:
            raise InvalidSpec("executor.slots", f"{body.slots} out of range (1-{MAX_EXECUTOR_SLOTS})")
        if len(body.labels) > 32 or any(len(k) > 128 or len(v) > 128 for k, v in body.labels.items()):
            raise InvalidSpec("executor.labels", "at most 32 labels, keys and values at most 128 characters")
        validate_capacity(body.cpu, body.memory_mb)
        old = self.executors.get(body.name)
        if old is not None and body.principal and self._bound_elsewhere(old, body.principal, now):
            # The name is bound to the identity that first registered it (auth on).
            raise Reject(
                "permission_denied",
                f"executor name {body.name!r} is bound to another principal ({old.principal})",
            )
        rec = pb.ExecutorRecord(
            name=body.name,
            slots=body.slots,
            labels=dict(body.labels),
            alive=True,
            joined_ms=now,
            principal=body.principal or (old.principal if old is not None else ""),
            namespaces=sorted(body.namespaces),
            cpu=body.cpu,
            memory_mb=body.memory_mb,
        )
        if old is not None and old.alive and old.draining:
            # Registering again (a reconnect after a leader change) does not undo a drain; a
            # drained executor gets work again only after it has left and joins anew.
            rec.draining, rec.draining_ms, rec.draining_reason = True, old.draining_ms, old.draining_reason
        self.executors[body.name] = rec
        self.store.put(keys.executor_key(body.name), rec.SerializeToString(deterministic=True))
        for name in sorted(self.unplaceable):  # a fitting executor clears the flag
            st = self.tasks.get(name)
            if st is None:
                self.unplaceable.discard(name)
                continue
            s = st.spec
            if could_ever_fit(
                need_of(s.resource_cpu, s.resource_memory_mb, dict(s.selector)),
                rec.cpu,
                rec.memory_mb,
                rec.labels,
            ):
                st.unplaceable = ""
                self.unplaceable.discard(name)
                self.put_task(st)
        return pb.CommandResult(ok=True), (ExecutorChanged(body.name, True),)

    def _bound_elsewhere(self, old: pb.ExecutorRecord, principal: str, now: int) -> bool:
        """Whether ``old``'s name is bound to a principal other than ``principal``. A name bound to
        a token is freed when that token is revoked or expires (so an executor can move to a new
        token); a certificate subject keeps its names."""
        if not old.principal or old.principal == principal:
            return False
        if old.principal.startswith("token:"):
            tok = self.access.get(old.principal.removeprefix("token:"))
            if tok is None or tok.info.revoked or (tok.info.expires_ms and tok.info.expires_ms <= now):
                return False
        return True

    def _drain_executor(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        """No new attempts for a live executor; the ones it runs go on (and end by the usual
        rules). Draining one that already drains changes nothing (same result)."""
        body = cmd.drain_executor
        rec = self.executors.get(body.name)
        if rec is None or not rec.alive:
            raise Reject("not_found", f"executor {quote(body.name)} is not a live member")
        if len(body.reason) > 500:
            raise InvalidSpec("reason", "at most 500 characters")
        if not rec.draining:
            rec.draining = True
            rec.draining_ms = now
            rec.draining_reason = body.reason or "drained"
            self.store.put(keys.executor_key(body.name), rec.SerializeToString(deterministic=True))
        return pb.CommandResult(ok=True), (ExecutorChanged(body.name, True),)

    # -- tokens (raftsched.fsm.access) --------------------------------------------------------

    def _create_token(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        return self.access.create(cmd.create_token, now), ()

    def _revoke_token(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        return self.access.revoke(cmd.revoke_token, now), ()

    def _executor_leave(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        """An executor left (or was declared dead): every attempt assigned to it is lost and retried
        by policy. Scans the active runs: membership changes are rare."""
        body = cmd.executor_leave
        rec = self.executors.get(body.name)
        if rec is None:
            raise Reject("not_found", f"executor {body.name!r} is not registered")
        rec.alive = False
        rec.left_ms = now
        rec.left_reason = body.reason or ("declared dead" if body.dead else "left")
        rec.draining = False
        self.store.put(keys.executor_key(body.name), rec.SerializeToString(deterministic=True))
        effects: list[Effect] = [ExecutorChanged(body.name, False)]
        why = f"executor {body.name} {'died' if body.dead else 'left'}: {rec.left_reason}"
        unstarted = set(body.unstarted)
        # The runs with an attempt running on it, from the usage the state keeps (exactly the
        # RUNNING shards, by executor), in run id order: the same runs, in the same order, as
        # walking every active run, without parsing a backlog of pending ones.
        running = self.usage.running.items()
        on_it = sorted({run_id for (run_id, _shard), (ex, _need) in running if ex == body.name})
        for run_id in on_it:
            run = self.active_run(run_id)
            if run is None:
                continue  # finished by an earlier one's settlement (a workflow's)
            for shard in run.shards:
                if shard.state == pb.RUNNING and shard.executor == body.name:
                    note(run, "executor_lost", now, shard, executor=body.name, reason=why)
                    lost = pb.AttemptResult(
                        run_id=run_id,
                        shard=shard.shard,
                        attempt=shard.attempt,
                        error=why,
                        lost=True,
                        retry_at_ms=body.retry_at_ms,
                        unstarted=execution_id(run_id, shard.shard, shard.attempt) in unstarted,
                    )
                    self._settle_shard(run, shard, lost, now, cmd.epoch, effects)
                    if run_id not in self.active:
                        break
        return pb.CommandResult(ok=True), tuple(effects)

    def _assign(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        """Record which executor runs which attempt; only then may the leader send it.

        An attempt starts only if its task's quotas and locks allow it now (raftsched.fsm.policy);
        otherwise the assignment is refused and the reason recorded on the shard. The leader's
        ``waits`` record why attempts it held back wait (run show, explain, locks)."""
        accepted = refused = 0
        effects: list[Effect] = []
        policy = self.policy
        for wait in cmd.assign_attempts.waits:
            run = self.active_run(wait.run_id)
            shard = run.shards[wait.shard] if run is not None and wait.shard < len(run.shards) else None
            if run is None or shard is None or shard.attempt != wait.attempt or shard.state != pb.PENDING:
                continue  # started or finished meanwhile: nothing waits any more
            st = self.tasks.get(run.task)
            locks = st.spec.locks if st is not None else ()
            if policy.note_wait(run, shard, wait.reason[:300], now, locks):
                data = run.SerializeToString(deterministic=True)
                self.active[wait.run_id] = data
                self.store.put(keys.run_key_for_id(wait.run_id), data)
        for a in cmd.assign_attempts.assignments:
            run = self.active_run(a.run_id)
            shard = run.shards[a.shard] if run is not None and a.shard < len(run.shards) else None
            executor = self.executors.get(a.executor)
            if (
                run is None
                or shard is None
                or shard.attempt != a.attempt
                or shard.state != pb.PENDING
                or shard.not_before_ms > cmd.now_ms  # a retry never starts before its backoff ends
                or executor is None
                or not executor.alive
                or run.held
                or executor.draining  # drained after the leader chose it: the attempt waits on
            ):
                refused += 1
                continue
            res_need = self.need_for_run(run)
            key = (a.run_id, a.shard)
            if not fits_now(
                res_need,
                executor.slots,
                executor.cpu,
                executor.memory_mb,
                executor.labels,
                self.usage.used(a.executor),
            ):
                refused += 1  # it would over-commit the executor's slots, cpu or memory
                continue
            st = self.tasks.get(run.task)
            need = policy.need(st.spec.owner, st.spec.namespace, st.spec.locks) if st is not None else None
            if need is not None:
                why = policy.check(need, now)
                if why:
                    # The leader thought it could start; a policy says not yet (it stays pending).
                    refused += 1
                    if policy.note_wait(run, shard, why, now, need.locks):
                        data = run.SerializeToString(deterministic=True)
                        self.active[a.run_id] = data
                        self.store.put(keys.run_key_for_id(a.run_id), data)
                    continue
                shard.holds[:] = policy.acquire(
                    need, now, execution_id(a.run_id, a.shard, a.attempt), run.task
                )
            if shard.waiting:
                shard.waiting = ""
                shard.waiting_since_ms = 0
                policy.forget_wait(a.run_id, a.shard)
            self.usage.take(key, a.executor, res_need)
            shard.state = pb.RUNNING
            shard.executor = a.executor
            shard.assigned_ms = now
            run.state = pb.RUNNING
            note(run, "assigned", now, shard, executor=a.executor)
            data = run.SerializeToString(deterministic=True)
            self.active[a.run_id] = data
            self.store.put(keys.run_key_for_id(a.run_id), data)
            if self.leader_effects:
                effects.append(
                    DispatchAttempt(
                        a.run_id, run.task, run.nominal_ms, a.shard, a.attempt, a.executor, cmd.epoch
                    )
                )
            if run.workflow_run:
                self.wf.task_run_assigned(run, shard, now)
            accepted += 1
        return pb.CommandResult(ok=True, accounted=accepted, refused=refused), tuple(effects)

    # -----------------------------------------------------------------------------------------
    # quotas (fsm/policy.py)

    def _set_quota(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        """Create or replace a quota. A new one counts the attempts of its owner or namespace
        that are running already (they hold a place from now, given back when they end)."""
        body = cmd.set_quota.quota
        q, new = self.policy.set_quota(body, now)
        if new:
            hold = f"{'o' if q.kind == 'owner' else 'n'}:{q.name}"
            for run_id in sorted(self.active):
                run = self.active_run(run_id)
                assert run is not None
                st = self.tasks.get(run.task)
                if st is None or (st.spec.owner if q.kind == "owner" else st.spec.namespace) != q.name:
                    continue
                changed = False
                for shard in run.shards:
                    if shard.state == pb.RUNNING and hold not in shard.holds:
                        shard.holds.append(hold)
                        q.running += 1
                        changed = True
                    elif shard.state == pb.RUNNING:
                        q.running += 1
                if changed:
                    data = run.SerializeToString(deterministic=True)
                    self.active[run_id] = data
                    self.store.put(keys.run_key_for_id(run_id), data)
        return pb.CommandResult(ok=True, quota=q), ()

    def _delete_quota(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        body = cmd.delete_quota
        q = self.policy.delete_quota(body.kind, body.name)
        if q is None:
            raise Reject("not_found", f"no quota for {body.kind} {body.name!r}")
        return pb.CommandResult(ok=True, quota=q), ()

    def quotas(self) -> list[pb.QuotaRecord]:
        """Every quota (copies), buckets refilled to the newest applied leader time."""
        with self.lock:
            return self.policy.quota_view(self.max_now_ms)

    def locks(self) -> list[LockView]:
        """Every resource lock held or waited for, with its holders and waiters."""
        with self.lock:
            return self.policy.lock_view()

    # -----------------------------------------------------------------------------------------
    # workflows (fsm/workflows.py)

    def _apply_workflow(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        spec = cmd.apply_workflow.spec
        self.calendars.require(spec.exclude, f"workflow {spec.name!r}")
        return self.wf.apply_workflow(cmd, now)

    def _stage_workflow_tasks(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        return self.wf.stage_tasks(cmd, now)

    def _start_workflow_run(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        return self.wf.start_run_cmd(cmd, now)

    def _workflow_run_op(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        return self.wf.run_op(cmd, now)

    def _start_backfill(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        return self.wf.start_backfill(cmd, now)

    def _set_workflow_paused(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        return self.wf.set_paused(cmd, now)

    def _delete_workflow(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        return self.wf.delete(cmd, now)

    # -----------------------------------------------------------------------------------------
    # calendars

    def _set_calendar(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        return pb.CommandResult(ok=True, calendar=self.calendars.set(cmd.set_calendar, now)), ()

    def _delete_calendar(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        name = cmd.delete_calendar.name
        self.calendars.delete(name, self.calendar_users(name))
        return pb.CommandResult(ok=True), ()

    def calendar_users(self, name: str) -> list[str]:
        """Who excludes calendar ``name``: ``task NAME`` and ``workflow NAME`` entries, sorted."""
        with self.lock:  # readers (the admin service) call it too
            return self._calendar_users(name)

    def _calendar_users(self, name: str) -> list[str]:
        users: set[str] = set()
        for task, st in self.tasks.items():
            if name not in st.spec.exclude:
                continue
            if wf_mod.is_internal(task):
                users.add(f"workflow {wf_mod.split_internal(task)[0]}")
            else:
                users.add(f"task {task}")
        for workflow in self.wf.workflows.values():
            if name in workflow.spec.exclude:
                users.add(f"workflow {workflow.spec.name}")
        return sorted(users)

    def _seed_membership(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        return self.membership.seed(cmd.seed_membership), ()

    def _begin_member_change(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        return self.membership.begin(cmd.begin_member_change, now), ()

    def _end_member_change(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        return self.membership.end(cmd.end_member_change), ()

    def _prune_runs(self, st: TaskState, now: int) -> None:
        name = st.spec.name
        horizon = now - self.retention.keep_ms
        lo, hi = keys.per_task_prefix(keys.RUN, name), keys.per_task_end(keys.RUN, name)
        # Unfinished runs are skipped, not pruned; widen the scan by their number (+1: the run
        # finishing now is stored after this) so runs stuck at the head of the range never stop
        # the finished ones behind them from being pruned.
        if st.kept_runs <= self.retention.keep_count and st.kept_runs % AGE_PRUNE_EVERY:
            return  # within the count: the (slower) age check runs on every AGE_PRUNE_EVERY-th finish
        limit = self.retention.prune_step * 2 + st.active_runs + 1
        for k, v in self.store.scan(lo, hi, limit=limit):
            if keys.run_id_from_key(keys.RUN, k) in self.active:
                continue  # unfinished (told from the key: parsing hundreds of active runs was slow)
            run = pb.Run()
            run.ParseFromString(v)
            if run.state not in FINISHED:
                continue
            if st.kept_runs <= self.retention.keep_count and run.finished_ms >= horizon:
                break
            self.store.delete(k)
            st.kept_runs -= 1

    # -----------------------------------------------------------------------------------------
    # reads (any thread; take the lock for in-memory state)

    @contextmanager
    def view(self) -> Iterator[StateView]:
        """Hold the lock and read through the view it yields (``raftsched.fsm.view``): the one
        read path for threads other than the applier. The view is dead after the block."""
        with self.lock:
            v = StateView(self)
            try:
                yield v
            finally:
                v.close()

    def get_task(self, name: str) -> pb.TaskRecord | None:
        with self.lock:
            return queries.task_record(self.tasks, name)

    def list_tasks(self, prefix: str = "", limit: int = 0) -> list[pb.TaskRecord]:
        # Choose the names off the lock (the applier takes it for every entry): copying the keys
        # is one C call; filtering and ordering a million of them is not.
        with self.lock:
            names = list(self.tasks)
        chosen = queries.first_task_names(names, prefix, limit)
        with self.lock:
            return queries.task_records(self.tasks, chosen)

    def list_tasks_page(
        self, prefix: str = "", after: str = "", size: int = 500
    ) -> tuple[list[pb.TaskRecord], bool]:
        """One page of :meth:`list_tasks` (names after ``after``) and whether more follow.

        The lock is held only to copy the names and then the page's record bytes, never while
        sorting or parsing, so concurrent readers do not hold up apply.
        """
        with self.lock:
            names = list(self.tasks)
        page, more = queries.task_page(names, prefix, after, size)
        with self.lock:
            raw = queries.record_bytes_of(self.tasks, page)
        return [pb.TaskRecord.FromString(b) for b in raw], more

    def user_task_names(self) -> list[str]:
        """The user task names, by name (the lock is held only to copy the names)."""
        with self.lock:
            names = list(self.tasks)
        return queries.task_page(names, "", "", len(names))[0]

    def armed_tasks(self) -> list[tuple[str, int]]:
        """``(name, next_fire_ms)`` of every enabled task with a next fire (the leader rebuilds its
        wheel from this). In creation order, not sorted: sorting a million names is one C call
        that holds the GIL for most of a second, long enough to stall Raft heartbeats."""
        with self.lock:
            return queries.armed_tasks(self.tasks)

    def task_for_planning(self, name: str) -> tuple[TaskSpec, int, int, int] | None:
        """``(spec, version, watermark_ms, next_fire_ms)`` of an enabled task, or None."""
        with self.lock:
            return queries.task_for_planning(self.tasks, name)

    def spec_for(self, task: str, version: int) -> pb.TaskSpec | None:
        """The spec a run of ``task`` at ``version`` executes (None if the task is gone)."""
        # Any thread may ask (the dispatcher runs on the event loop): an older version is read
        # from committed data through a reader, never the apply thread's open write batch.
        with self.lock:
            return queries.spec_for(self.tasks, self.store.reader, task, version)

    def pending_attempts(self) -> list[AttemptReady | DispatchAttempt]:
        """Unfinished attempts in run-id order: ``AttemptReady`` for those waiting for an executor,
        ``DispatchAttempt`` for those assigned (a new leader re-sends these to the same executor,
        whose execution log deduplicates them)."""
        with self.lock:
            return queries.pending_attempts(self.active, self.wf)

    # -- workflow reads ---------------------------------------------------------------------------

    def get_calendar(self, name: str) -> pb.CalendarRecord | None:
        with self.lock:
            rec = self.calendars.records.get(name)
            return None if rec is None else _copy_calendar(rec)

    def list_calendars(self) -> list[pb.CalendarRecord]:
        with self.lock:
            return [_copy_calendar(self.calendars.records[n]) for n in sorted(self.calendars.records)]

    def calendar_for(self, name: str) -> Calendar | None:
        """The calendar ``name`` as apply decides with it (a frozen value), or None."""
        with self.lock:
            return self.calendars.calendars.get(name)

    def get_workflow(self, name: str, version: int = 0) -> pb.WorkflowRecord | None:
        """A workflow's record; ``version`` > 0 gives that version's definition (None if gone)."""
        with self.lock:
            return queries.workflow_record(self.wf, self.store.reader, name, version)

    def list_workflows(self, prefix: str = "", limit: int = 0) -> list[pb.WorkflowRecord]:
        with self.lock:
            return queries.workflow_records(self.wf, self.store.reader, prefix, limit)

    def get_workflow_run(self, run_id: str) -> pb.WorkflowRun | None:
        with self.lock:
            return queries.workflow_run(self.wf, self.store.reader, run_id)

    def list_workflow_runs(
        self, workflow: str, limit: int = 100, active_only: bool = False
    ) -> list[pb.WorkflowRun]:
        """Runs of ``workflow``, newest logical time first (retained history plus active runs)."""
        with self.lock:
            return queries.workflow_runs(self.wf, self.store.reader, workflow, limit, active_only)

    def get_backfill(self, backfill_id: str) -> pb.BackfillRecord | None:
        with self.lock, self.store.reader() as r:
            return queries.backfill(r, backfill_id)

    def list_backfills(self, workflow: str) -> list[pb.BackfillRecord]:
        with self.lock, self.store.reader() as r:
            return queries.backfills(r, workflow)

    def task_namespace(self, task: str) -> str:
        """The namespace of ``task`` ("default" if it is gone)."""
        with self.lock:
            st = self.tasks.get(task)
            return st.spec.namespace if st is not None else "default"

    def executor_usage(self, include_left: bool = False) -> list[tuple[pb.ExecutorRecord, int]]:
        """Executors by name (members only unless ``include_left``), each with the number of
        attempts assigned to it and not finished."""
        with self.lock:
            # The running-attempt counts come from ``usage`` (kept by apply as attempts start and
            # settle), not from parsing every active run: that parse took ~0.1 s per call on the
            # event loop of a node with 2,000 active runs.
            return queries.executor_usage(self.executors, lambda name: self.usage.used(name)[0], include_left)

    def live_executors(self) -> dict[str, int]:
        """``name -> slots`` of executors alive in the replicated membership (draining included)."""
        with self.lock:
            return queries.live_executors(self.executors)

    def placeable_executors(self) -> dict[str, int]:
        """``name -> slots`` of live executors that are not draining: where new attempts go."""
        with self.lock:
            return queries.placeable_executors(self.executors)

    # Command handlers by ``Command.body`` field (plain functions here, called with the state).
    _HANDLERS: ClassVar[dict[str, Callable[[SchedulerState, pb.Command, int], Handled]]] = {
        "create_task": _create,
        "create_tasks": _create_many,
        "executor_join": _executor_join,
        "executor_leave": _executor_leave,
        "drain_executor": _drain_executor,
        "assign_attempts": _assign,
        "retry_run": _retry_run,
        "update_task": _update,
        "delete_task": _delete,
        "set_enabled": _set_enabled,
        "trigger_now": _trigger_now,
        "barrier": _barrier,
        "fire_batch": _fire_batch,
        "report_results": _report_results,
        "apply_workflow": _apply_workflow,
        "stage_workflow_tasks": _stage_workflow_tasks,
        "start_workflow_run": _start_workflow_run,
        "workflow_run_op": _workflow_run_op,
        "start_backfill": _start_backfill,
        "raise_alerts": _raise_alerts,
        "alerts_delivered": _alerts_delivered,
        "ack_alert": _ack_alert,
        "create_token": _create_token,
        "revoke_token": _revoke_token,
        "set_workflow_paused": _set_workflow_paused,
        "delete_workflow": _delete_workflow,
        "set_quota": _set_quota,
        "delete_quota": _delete_quota,
        "set_calendar": _set_calendar,
        "delete_calendar": _delete_calendar,
        "seed_membership": _seed_membership,
        "begin_member_change": _begin_member_change,
        "end_member_change": _end_member_change,
    }


_CHECKED_PER_ENTRY: Final = frozenset({"fire_batch", "report_results", "assign_attempts"})


def _result_in_range(res: pb.AttemptResult) -> bool:
    """The integers of a result that apply computes with (``not_before = max(retry_at, now)``,
    the timeline's ``nominal + start_lateness``, its duration) inside their ranges; shard and
    attempt are fenced (equal to the shard's current ones), the exit code may be any int32."""
    return (
        0 <= res.retry_at_ms <= bounds.MAX_TIME_MS
        and 0 <= res.duration_ms <= bounds.MAX_DURATION_MS
        and -bounds.MAX_DURATION_MS <= res.start_lateness_ms <= bounds.MAX_DURATION_MS
    )


def _check_ranges(cmd: pb.Command, body: str) -> None:
    """Refuse a command with an integer outside its range (:mod:`raftsched.bounds`): the servicers
    refused it already, so this is a leader bug or a hand-made entry, and it must stay a value.

    The three batches of the hot path (every attempt makes one entry of each) are checked entry
    by entry instead, and an entry out of range is refused like a stale one (counted in
    ``refused``), not the whole batch: a fire batch's by :meth:`SchedulerState._check_task_fires`,
    a result's by :func:`_result_in_range`, an assignment's or a wait's shard and attempt by
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


def _copy_calendar(rec: pb.CalendarRecord) -> pb.CalendarRecord:
    out = pb.CalendarRecord()
    out.CopyFrom(rec)
    return out


def _note_outcome(run: pb.Run, shard: pb.ShardAttempt, res: pb.AttemptResult, now: int) -> None:
    """An executor's result: when it started (if it did) and how it ended."""
    if res.HasField("start_lateness_ms"):
        # The executor's clock: nominal + its measured lateness, as it reported it.
        note(run, "started", run.nominal_ms + res.start_lateness_ms, shard, executor=res.executor)
    event = "succeeded" if res.success else "timed_out" if res.timed_out else "failed"
    note(
        run,
        event,
        now,
        shard,
        executor=res.executor,
        reason=res.error,
        exit_code=res.exit_code,
        duration_ms=res.duration_ms,
    )


def _tally_attempt(
    tally: ApplyTally, st: TaskState | None, task: str, res: pb.AttemptResult, retry: bool
) -> None:
    owner, namespace = (st.spec.owner, st.spec.namespace) if st is not None else ("", "")
    result = "succeeded" if res.success else "lost" if res.lost else "timeout" if res.timed_out else "failed"
    tally.attempt(result, owner, namespace, task)
    if retry:
        tally.attempt("retried", owner, namespace, task)


# A remembered key is ``stamp(8) [0x01 sha256(32)] CommandResult``. 0x01 cannot start an encoded
# CommandResult (it would be field 0), so entries written before fingerprints still read.
_IDEM_FINGERPRINTED: Final = b"\x01"


def _split_idem(value: bytes) -> tuple[bytes, bytes]:
    """``(request fingerprint or b"", encoded CommandResult)`` of a remembered idempotency key."""
    if value[8:9] == _IDEM_FINGERPRINTED:
        return value[9:41], value[41:]
    return b"", value[8:]
