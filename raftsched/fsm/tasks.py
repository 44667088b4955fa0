"""Tasks inside the state machine: their records and versions, and the task commands.

The :class:`TaskBook` keeps every task's in-memory state (:class:`TaskState`, internal workflow
tasks included), stores its record and the spec of each version (a run executes the version it
fired with), and applies create (one or many), update, delete, enable/disable and trigger-now.
Like the rest of the FSM it is deterministic and reaches the runs and calendars only through
the :class:`TaskBookHost` protocol.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Protocol

from raftsched import codec
from raftsched.abc import StateStore
from raftsched.errors import InvalidSpec
from raftsched.fsm import keys
from raftsched.fsm.calendars import CalendarBook
from raftsched.fsm.effects import Effect, TaskArmed
from raftsched.fsm.records import STORED_FIELDS, TaskState, armed, spec_bytes, stored_spec_bytes
from raftsched.fsm.rules import Reject, check_next_fire, check_nothing_due
from raftsched.fsm.runs import RunBook
from raftsched.fsm.timeline import expand
from raftsched.fsm.workflow_model import is_internal
from raftsched.model import validate_params
from raftsched.v1 import log_pb2 as pb

VERSIONS_KEPT = 20

# The counters a fire or a run's end changes (TaskState slots = TaskCounters columns). They are
# stored in one TaskCounters record per command instead of re-putting every changed TaskRecord
# (a TaskRecord build and a put per task per entry, on every node); see TaskBook.flush.
COUNTERS = (
    "watermark_ms",
    "next_fire_ms",
    "active_runs",
    "fires_total",
    "runs_total",
    "kept_fires",
    "kept_runs",
)
# A checkpoint (the TaskRecords of every task named since, then the counter records deleted) is
# taken after every CHECKPOINT_EVERY-th accepted command (Meta.applied_commands): it bounds what
# loading replays. It is aligned on the count of commands, not on the records written, so that
# replicas upgraded from format 2 at different log indexes (whose stored counters differ until
# then) hold the same bytes again from the first checkpoint after the last one upgraded.
CHECKPOINT_EVERY = 1024
# ... and as soon as the records name this many tasks: a checkpoint re-puts every task they name
# in one command (about 4 us each), so this bounds that command's extra work (~15 ms) however
# many tasks there are. Replicas that ran this build since the last aligned checkpoint take
# these at the same commands too (the records they hold are the same).
CHECKPOINT_TASKS = 4096

Handled = tuple[pb.CommandResult, tuple[Effect, ...]]

# The stored fields of a TaskRecord in the order TaskBook.load unpacks them; every stored
# TaskState field exactly once (checked here, so a field added to one and not the other fails
# at import instead of loading as its default).
_LOADED = (
    "version",
    "enabled",
    "created_ms",
    "updated_ms",
    "watermark_ms",
    "next_fire_ms",
    "active_runs",
    "fires_total",
    "runs_total",
    "kept_fires",
    "kept_runs",
    "unplaceable",
    "held_run",
    "last_success_ms",
    "last_success_run",
    "number",
)
if sorted(_LOADED) != sorted(STORED_FIELDS):
    raise RuntimeError(f"TaskBook.load unpacks {sorted(_LOADED)}, TaskState stores {sorted(STORED_FIELDS)}")
_READ_RECORD = attrgetter(*_LOADED)


class TaskBookHost(Protocol):
    """What the task book needs from the rest of the state machine (``SchedulerState``).

    Called on the apply thread only, while a command applies."""

    @property
    def store(self) -> StateStore: ...
    @property
    def calendars(self) -> CalendarBook: ...
    @property
    def runs(self) -> RunBook: ...
    @property
    def applied_commands(self) -> int:
        """Accepted commands so far (replicated: the same at the same log index everywhere)."""
        ...

    def next_sequence(self) -> int: ...
    def hot_checkpoint(self, applied: int) -> None:
        """The hot path's checkpoint, taken with the task checkpoint (raftsched.fsm.hot)."""
        ...

    def number_task(self, st: TaskState) -> None:
        """A new task: its hot-path number if numbering is on (raftsched.fsm.hot)."""
        ...

    def forget_hot_task(self, st: TaskState) -> None:
        """A task being deleted: its live hot runs go to the cold path first (raftsched.fsm.hot)."""
        ...

    def forget_unplaceable(self, name: str) -> None:
        """A task being deleted: its name leaves the unplaceable flags (raftsched.fsm.executors)."""
        ...


class TaskBook:
    """The tasks and the task commands (see module doc)."""

    def __init__(self, host: TaskBookHost) -> None:
        self.host = host
        self.store = host.store  # the state's store, never replaced (a restore refills it)
        self.tasks: dict[str, TaskState] = {}
        # Tasks whose counters the command being applied may have changed (insertion order: the
        # order rows are written in); written by flush at the end of the command.
        self.dirty: dict[str, TaskState] = {}
        # The key of the newest counter record, and the tasks the records name (since the last
        # checkpoint).
        self.last_key = b""
        self.since_checkpoint: set[str] = set()
        # Tasks whose counters hot entries changed since (raftsched.fsm.hot: replayed from their
        # records on load): re-put at the next checkpoint too, but they do not bring it forward
        # (CHECKPOINT_TASKS bounds the work of the counter records' replay, which these have not).
        self.hot_since: set[str] = set()
        # A command asked for a checkpoint at its end (the hot path turning its promotion log on).
        self.checkpoint_due = False
        # Loading: the command index of each task's last counter record (the hot path's replay
        # takes a hot record's rows for a task only if they are newer, raftsched.fsm.hot).
        self.counter_index: dict[str, int] = {}

    def load(self) -> None:
        """The task records from the store, then the counter records written after them (in
        apply order: a task's last row holds its counters at the end of the last command that
        changed them, or stored its record)."""
        self.tasks.clear()
        self.dirty.clear()
        tasks = self.tasks
        read = _READ_RECORD
        # Equal timestamps (a bulk import's created, updated and watermark times, the next fire
        # of tasks on one schedule) share one int object instead of one each (32 bytes).
        shared: dict[int, int] = {}
        one = shared.setdefault
        for _, value in self.store.scan(keys.TASK, keys.task_prefix_end()):
            rec = pb.TaskRecord.FromString(value)
            # The spec stays bytes until something reads it (TaskState.stored).
            st = TaskState.stored(stored_spec_bytes(value) or spec_bytes(rec.spec))
            (
                st.version,
                st.enabled,
                created,
                updated,
                watermark,
                next_fire,
                st.active_runs,
                st.fires_total,
                st.runs_total,
                st.kept_fires,
                st.kept_runs,
                st.unplaceable,
                st.held_run,
                st.last_success_ms,
                st.last_success_run,
                st.number,
            ) = read(rec)
            st.created_ms = one(created, created)
            st.updated_ms = one(updated, updated)
            st.watermark_ms = one(watermark, watermark)
            st.next_fire_ms = one(next_fire, next_fire)
            tasks[rec.spec.name] = st
        self.last_key = b""
        self.since_checkpoint.clear()
        self.hot_since.clear()
        index = self.counter_index
        index.clear()
        start = len(keys.TASK_COUNTERS)
        for key, value in self.store.scan(keys.TASK_COUNTERS, keys.TASK_COUNTERS + keys.END):
            counters = pb.TaskCounters.FromString(value)
            self.last_key = key
            self.since_checkpoint.update(counters.task)
            applied = int(key[start:], 16)
            index.update(dict.fromkeys(counters.task, applied))
            columns = [getattr(counters, name) for name in COUNTERS]
            for i, name in enumerate(counters.task):
                found = tasks.get(name)  # None: deleted since (a task created again has a later row)
                if found is not None:
                    for field, column in zip(COUNTERS, columns, strict=True):
                        setattr(found, field, column[i])

    # -- records -----------------------------------------------------------------------------------

    def user_task(self, name: str) -> TaskState:
        """The user task ``name``; refused as not found if there is none (or it is internal)."""
        st = self.tasks.get(name)
        if st is None or is_internal(name):
            raise Reject("not_found", f"task {name!r} does not exist")
        return st

    def add(self, st: TaskState) -> None:
        """Register a task new to the state machine (:meth:`put` stores it)."""
        # Runs of a deleted task of the same name may still be active (delete leaves them to
        # finish); they count here, or their completion would drive the counter below zero.
        st.active_runs = self.host.runs.active_per_task.get(st.spec.name, 0)
        self.host.number_task(st)
        self.tasks[st.spec.name] = st
        # A row for it in this command: rows of a deleted task of the same name are older.
        self.dirty[st.spec.name] = st

    def put(self, st: TaskState) -> None:
        """Store the task's record as it is now (a field other than the counters changed)."""
        self.store.put(keys.task_key(st.spec.name), st.record_bytes())
        # Also a row in this command's counter record: counter rows written before this record
        # must not win over it when loading replays them.
        self.dirty[st.spec.name] = st

    def touch(self, st: TaskState) -> None:
        """Only ``st``'s counters (:data:`COUNTERS`) changed: they are stored by :meth:`flush`
        at the end of the command, in one record for every task the command changed."""
        self.dirty[st.spec.name] = st

    def flush(self) -> None:
        """End of a command: store the counters of the tasks it changed (one TaskCounters record,
        keyed by the count of accepted commands), and take a checkpoint on every
        CHECKPOINT_EVERY-th accepted command or once they name CHECKPOINT_TASKS tasks."""
        applied = self.host.applied_commands
        if self.dirty:
            self._write_counters(applied)
        since = self.since_checkpoint
        due, self.checkpoint_due = self.checkpoint_due, False
        if due or (
            (since or self.hot_since) and (applied % CHECKPOINT_EVERY == 0 or len(since) >= CHECKPOINT_TASKS)
        ):
            self.checkpoint()

    def _write_counters(self, applied: int) -> None:
        names = list(self.dirty)  # the keys: a task's spec may be bytes only (TaskState.stored)
        rows = list(self.dirty.values())
        self.dirty.clear()
        rec = pb.TaskCounters(
            task=names,
            watermark_ms=[st.watermark_ms for st in rows],
            next_fire_ms=[st.next_fire_ms for st in rows],
            active_runs=[st.active_runs for st in rows],
            fires_total=[st.fires_total for st in rows],
            runs_total=[st.runs_total for st in rows],
            kept_fires=[st.kept_fires for st in rows],
            kept_runs=[st.kept_runs for st in rows],
        )
        key = keys.counters_key(applied)
        if key == self.last_key:
            # A refused command changed counters (a bug's partial work, or a rejection after a
            # change): it has the count of the command before it, whose rows come first.
            prior = pb.TaskCounters.FromString(self.store.get(key) or b"")
            prior.MergeFrom(rec)
            rec = prior
        self.store.put(key, rec.SerializeToString(deterministic=True))
        self.last_key = key
        self.since_checkpoint.update(rec.task)

    def checkpoint(self) -> None:
        """Store the TaskRecord of every task named in a counter record since the last checkpoint
        (sorted: the order of puts is not stored, but keep it fixed), then delete the records."""
        store, tasks = self.store, self.tasks
        for name in sorted(self.since_checkpoint | self.hot_since):
            st = tasks.get(name)
            if st is not None:
                store.put(keys.task_key(name), st.record_bytes())
        lo, hi = keys.TASK_COUNTERS, keys.TASK_COUNTERS + keys.END
        while stale := store.scan_keys(lo, hi, limit=CHECKPOINT_EVERY):  # keys only: no record read
            for key in stale:
                store.delete(key)
        self.last_key = b""
        self.since_checkpoint.clear()
        self.hot_since.clear()
        self.counter_index.clear()
        self.host.hot_checkpoint(self.host.applied_commands)

    def put_version(self, st: TaskState) -> None:
        """Keep every version's spec: a run executes the definition it fired with. Only the newest
        VERSIONS_KEPT versions are kept (older runs than that fall back to the newest spec)."""
        name = st.spec.name
        store = self.store
        store.put(keys.version_key(name, st.version), st.spec_bytes)
        if st.version > VERSIONS_KEPT:
            store.delete(keys.version_key(name, st.version - VERSIONS_KEPT))

    def remove(self, name: str) -> None:
        """Forget task ``name`` with its history; its active runs are left to finish (their
        results are still accepted) but nothing new is created."""
        st = self.tasks[name]
        self.host.forget_hot_task(st)
        # What the apply thread derived from it goes too: a task created again under this name
        # starts at version 1, and a node restarted meanwhile has none of it.
        self.host.runs.forget_needs(name, st.version)
        self.host.forget_unplaceable(name)
        del self.tasks[name]
        self.dirty.pop(name, None)
        store, active = self.store, self.host.runs.active
        store.delete(keys.task_key(name))
        for kind in (keys.FIRE, keys.RUN, keys.VERSION):
            for k, v in store.scan(keys.per_task_prefix(kind, name), keys.per_task_end(kind, name)):
                if kind == keys.RUN:
                    run = pb.Run()
                    run.ParseFromString(v)
                    if run.run_id in active:
                        continue
                store.delete(k)

    def names(self, prefix: str) -> list[str]:
        """Names of the tasks (internal ones included) that start with ``prefix``, sorted."""
        return sorted(name for name in self.tasks if name.startswith(prefix))

    # -- commands ----------------------------------------------------------------------------------

    def create(self, cmd: pb.Command, now: int) -> Handled:
        st = self._create_one(cmd.create_task, now)
        return pb.CommandResult(ok=True, task=st.record()), (armed(st),)

    def create_many(self, cmd: pb.Command, now: int) -> Handled:
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
                effects.append(armed(st))
                # A bulk import's tasks keep their specs as bytes, as loaded ones do, until read
                # (TaskState.stored): a million imported tasks would otherwise hold ~700 B each.
                del st.spec
        return result, tuple(effects)

    def _create_one(self, body: pb.CreateTask, now: int) -> TaskState:
        spec = codec.spec_from_pb(body.spec)
        if spec.name in self.tasks:
            raise Reject("already_exists", f"task {spec.name!r} already exists")
        self.host.calendars.require(spec.exclude, f"task {spec.name!r}")
        check_next_fire(body.next_fire_ms, now)
        st = TaskState(spec, spec_bytes(codec.spec_to_pb(spec)))
        st.version = 1
        st.enabled = not body.disabled
        st.created_ms = st.updated_ms = now
        st.watermark_ms = now
        st.next_fire_ms = body.next_fire_ms
        self.add(st)
        self.put(st)
        self.put_version(st)
        return st

    def update(self, cmd: pb.Command, now: int) -> Handled:
        body = cmd.update_task
        spec = codec.spec_from_pb(body.spec)
        st = self.user_task(spec.name)
        if body.expected_version and body.expected_version != st.version:
            raise Reject(
                "conflict", f"task {spec.name!r} is at version {st.version}, not {body.expected_version}"
            )
        check_next_fire(body.next_fire_ms, max(st.watermark_ms, now))
        check_nothing_due(st, now)
        self.host.calendars.require(spec.exclude, f"task {spec.name!r}")
        st.spec = spec
        st.spec_bytes = spec_bytes(codec.spec_to_pb(spec))
        st.run_template = st.fire_template = None
        st.version += 1
        st.updated_ms = now
        # Fires up to now were owed under the old trigger and the leader accounted them before
        # proposing this update only if they were due; from here on the new trigger governs.
        st.watermark_ms = max(st.watermark_ms, now)
        st.next_fire_ms = body.next_fire_ms
        self.put(st)
        self.put_version(st)
        return pb.CommandResult(ok=True, task=st.record()), (armed(st),)

    def delete(self, cmd: pb.Command, now: int) -> Handled:
        name = cmd.delete_task.name
        st = self.user_task(name)
        self.remove(name)
        return pb.CommandResult(ok=True), (TaskArmed(name, st.version, 0),)

    def set_enabled(self, cmd: pb.Command, now: int) -> Handled:
        body = cmd.set_enabled
        st = self.user_task(body.name)
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
            self.put(st)
        return pb.CommandResult(ok=True, task=st.record()), (armed(st),)

    def trigger_now(self, cmd: pb.Command, now: int) -> Handled:
        body = cmd.trigger_now
        st = self.user_task(body.name)
        if body.params_json:
            validate_params(body.params_json)
        runs = self.host.runs
        _, data, effects = runs.new(st, now, now, cmd.epoch, manual_seq=self.host.next_sequence())
        run = pb.Run()
        run.ParseFromString(data)
        if body.params_json:
            run.params_json = body.params_json
            runs.save(run)
        self.put(st)
        return pb.CommandResult(ok=True, run=expand(run)), effects
