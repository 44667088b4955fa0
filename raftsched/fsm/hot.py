"""The columnar hot path of the state machine (issue 31 P1; docs/dev/columnar.md).

A *hot* task (:func:`is_hot`: one shard, ``overlap = allow``, no locks, pool, resources,
selector, calendar, jitter, SLA, freshness, ``emits``, not a workflow task, enabled) fires on
the hot path: the leader proposes its single on-time fires as one ``FireColumns`` entry,
their assignments as ``AssignColumns`` and their first-try successes as ``ResultColumns``
(command format :data:`raftsched.codec.COLUMNS_FORMAT`). Their unfinished runs are not
``pb.Run`` records in ``RunBook.active``: each is a *slot* of the :class:`SlotTable`, indexed
by the run's ``seq`` (allocated at apply, ``Meta.next_seq``). The numbers and the slot table
are :mod:`raftsched.fsm.hot_slots`; the records built from wire pieces :mod:`raftsched.fsm.hot_wire`.

Numbers. Tasks and executors have dense numbers from 1 (``TaskRecord.number``,
``ExecutorRecord.number``; 0 = none), never reused. They are given by the ``NumberEntities``
command (every entity without one, in key order) and, from then on, at creation and at first
join. :class:`Numbering` maps them back.

How the leader maps what the columns name (pure, under a state view; see
:class:`raftsched.fsm.view.StateView`'s ``hot_*`` and ``*_number`` methods):

* task number ``n`` -> its :class:`TaskState` (name ``st.spec.name``, version ``st.version``):
  ``view.task_by_number(n)``; name -> number: ``view.tasks[name].number``;
* executor number -> name: ``view.executor_name(n)``; name -> number: ``view.executor_number(name)``;
* run ``seq`` -> run id: :func:`~raftsched.fsm.hot_slots.run_id_of` ``(task name, nominal_ms)``
  -- the same id today's ``FireBatch`` gives the run of that fire (``raftsched.model.run_id_for``),
  so run ids, run keys and execution ids (:func:`raftsched.model.execution_id` ``(run_id, 0,
  attempt)``) are those of the cold path. For a :class:`~raftsched.fsm.effects.ReadyColumns`,
  run ``seq_base + i`` is the run of ``tasks[i]`` at ``nominals[i]``; for any live seq,
  ``view.hot_run(seq)`` returns its :class:`~raftsched.fsm.hot_slots.HotRef`;
* run id -> seq (a reported result): ``view.hot_seq(run_id)`` (0: not a live hot run -- it
  finished, was promoted to the cold path, or was never hot: report it as today).

Pure: no clock, no IO but the host's store, no randomness.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from operator import attrgetter, gt, lt
from typing import TYPE_CHECKING, Final, NamedTuple, Protocol

from raftsched import bounds
from raftsched.abc import StateStore
from raftsched.fsm import keys, wire
from raftsched.fsm.effects import AttemptReady, DispatchAttempt, DispatchColumns, Effect, ReadyColumns
from raftsched.fsm.hot_slots import (
    LIVE,
    PENDING,
    PROMOTED,
    RUNNING,
    SUCCEEDED,
    Numbering,
    SlotTable,
    add_seq,
    drop_seq,
    is_hot,
    run_id_of,
    seq_of,
)
from raftsched.fsm.hot_wire import (
    ID_TAGS,
    FinishedHead,
    checkpoint_bytes,
    finished_head,
    finished_times,
    id_tag,
    int_field,
    shard_field,
)
from raftsched.fsm.records import AGE_PRUNE_EVERY, PRUNE_BATCH, Retention, TaskState, keeps, pending_shards
from raftsched.fsm.rules import Reject
from raftsched.fsm.tally import ApplyTally
from raftsched.model import TaskSpec
from raftsched.sharding.placement import NO_NEED, ExecutorUsage
from raftsched.v1 import log_pb2 as pb

if TYPE_CHECKING:
    from raftsched.fsm.policy import PolicyBook

TRIM_EVERY: Final = 4096
"""Finished slots at the head of the slot table before it is trimmed."""

MAX_HOT_SPAN: Final = 1 << 18
"""How many seqs a live hot run may fall behind ``next_seq`` before the leader promotes it to
the cold path (``PromoteHotRuns``, command format 19). The table is trimmed only at its head, so
without it one long attempt would keep every later slot in memory and in each hot checkpoint
(4,000 attempts a second for an hour: 14 million slots, gigabytes). Above the default
``max_dispatch_backlog`` (100,000), so waiting attempts are not promoted in an overload."""

PROMOTE_BATCH: Final = 1 << 14
"""How far past :data:`MAX_HOT_SPAN` the oldest live hot run may be before the leader proposes a
``PromoteHotRuns``: promotions (and the trim after them) come in batches, not one per fire."""


StartSink = Callable[[int, str, int], None]
"""``raftsched.fsm.runs.StartSink``: a reported start's leader time, namespace and lateness."""


class HotRuns(Protocol):
    """What the hot path uses of the run book (``raftsched.fsm.runs.RunBook``)."""

    @property
    def active(self) -> MutableMapping[str, bytes]: ...
    @property
    def active_per_task(self) -> MutableMapping[str, int]: ...
    @property
    def usage(self) -> ExecutorUsage: ...
    @property
    def slots(self) -> SlotTable: ...
    def prune(self, st: TaskState, now: int, finishing: str = "") -> None: ...
    def write(self, run_id: str, data: bytes, unfinished: bool, key: bytes = b"") -> None: ...
    def write_keyed(self, run_id: str, data: bytes, key: bytes, unfinished: bool) -> None: ...


class HotHost(Protocol):
    """What the hot path needs from the state machine (``SchedulerState``; apply thread only)."""

    @property
    def store(self) -> StateStore: ...
    @property
    def tasks(self) -> Mapping[str, TaskState]: ...
    @property
    def numbering(self) -> Numbering: ...
    @property
    def runs(self) -> HotRuns: ...
    @property
    def policy(self) -> PolicyBook: ...
    @property
    def executors(self) -> Mapping[str, pb.ExecutorRecord]: ...
    @property
    def leader_effects(self) -> bool: ...
    @property
    def applied_commands(self) -> int: ...
    @property
    def tally(self) -> ApplyTally | None: ...
    @property
    def on_start(self) -> StartSink | None: ...
    @property
    def retention(self) -> Retention: ...

    def put_task(self, st: TaskState) -> None: ...
    def touch_task(self, st: TaskState) -> None: ...
    def put_executor(self, rec: pb.ExecutorRecord) -> None: ...
    def spec_for(self, task: str, version: int) -> pb.TaskSpec | None: ...
    def hot_touched(self, names: Iterable[str]) -> None:
        """Tasks whose counters a hot entry changed (replayed from its record on load; their
        records are re-put at the next checkpoint)."""
        ...

    def checkpoint_at_end(self) -> None:
        """Take the task and hot checkpoint at the end of this command."""
        ...


Handled = tuple[pb.CommandResult, tuple[Effect, ...]]

_MAX_TIME: Final = bounds.MAX_TIME_MS
_MAX_DURATION: Final = bounds.MAX_DURATION_MS
_version = attrgetter("version")
_hot = attrgetter("hot")
_watermark = attrgetter("watermark_ms")


def _rows(keep: list[int], *columns: list[int]) -> list[list[int]]:
    """Rows ``keep`` of each column (the rows of an entry its per-row check accepted)."""
    return [[column[i] for i in keep] for column in columns]


def _invalid(message: str) -> Handled:
    """A malformed entry: refused whole, before anything changed (a value: apply catches it)."""
    raise Reject("invalid_argument", message)


class HotBook:
    """The hot path's commands, its slot table, promotion to the cold path, replay (module doc)."""

    def __init__(self, host: HotHost) -> None:
        self.host = host
        self.store = host.store
        self.numbering = host.numbering
        self.slots: SlotTable = host.runs.slots
        self.next_seq = 1  # Meta.next_seq (0 stored: numbering off, nothing hot yet)
        # Both caches are keyed by (task number, the run's version, the task's current version):
        # what they hold is read through _params, whose answer for a version no longer kept is
        # the *current* spec's params, so it changes with the current version. Keyed so, a cache
        # hit is what a replica that restarted (its caches empty) reads: replicas cannot differ.
        self.templates: dict[tuple[int, int, int], bytes] = {}  # -> the pending Run's head
        self.checkpoint_index = 0  # Meta.hot_checkpoint_index
        # Meta.promotions_logged: the seqs each command promotes are stored (hp/, flush), so a
        # replica that loads its store knows them once their run records are pruned. Turned on
        # by the first PromoteHotRuns (command format 19), so a format-18 cluster keeps its bytes.
        self.promotions_logged = False
        self._promoted: list[int] = []  # seqs this command promoted (stored by flush)
        # -> the finished run's per-version wire pieces (finished_head)
        self.finished_heads: dict[tuple[int, int, int], FinishedHead] = {}

    # -- numbers -------------------------------------------------------------------------------

    def number_entities(self, cmd: pb.Command, now: int) -> Handled:
        """NumberEntities: every task and executor without a number gets one, in key order, and
        numbering is on from now (idempotent: a second one numbers what has none)."""
        numbering, host = self.numbering, self.host
        if not numbering.on:
            numbering.next_task_no = numbering.next_executor_no = 1
            numbering.numbered_ms = now
        count = 0
        for name in sorted(host.tasks):
            st = host.tasks[name]
            if not st.number:
                self.number_task(st)
                host.put_task(st)
                count += 1
        for name in sorted(host.executors):
            rec = host.executors[name]
            if not rec.number:
                self.number_executor(rec)
                host.put_executor(rec)
                count += 1
        self.refresh_all()
        return pb.CommandResult(ok=True, accounted=count), ()

    def number_task(self, st: TaskState) -> None:
        """Give ``st`` the next task number if numbering is on (creation; NumberEntities)."""
        numbering = self.numbering
        if numbering.on and not st.number:
            st.number = numbering.next_task_no
            numbering.next_task_no += 1
            numbering.set_task(st)

    def number_executor(self, rec: pb.ExecutorRecord) -> None:
        numbering = self.numbering
        if numbering.on and not rec.number:
            rec.number = numbering.next_executor_no
            numbering.next_executor_no += 1
            numbering.set_executor(rec.name, rec.number)

    # -- the hot bit ---------------------------------------------------------------------------

    def refresh(self, st: TaskState, name: str) -> None:
        """Recompute ``st.hot`` (task ``name``); a task that stops being hot has its live hot runs
        promoted, so every run of a task that is not hot is on the cold path."""
        hot = is_hot(st, self.host.policy, name)
        if st.hot and not hot:
            self.promote_task(st)
        st.hot = hot

    def refresh_all(self) -> None:
        tasks = self.host.tasks
        for name in sorted(tasks):
            self.refresh(tasks[name], name)

    def forget_task(self, st: TaskState) -> None:
        """``st`` is being deleted: its live hot runs go to the cold path (delete keeps unfinished
        runs to finish), then its number maps to nothing."""
        self.promote_task(st)
        st.hot = False
        self.numbering.drop_task(st)

    # -- FireColumns -----------------------------------------------------------------------------

    def fire_columns(self, cmd: pb.Command, now: int) -> Handled:
        fc = cmd.fire_columns
        stamp = cmd.now_ms  # never early is checked against the stamping leader's clock (fire_batch)
        tasks = list(fc.task)
        versions = list(fc.version)
        deltas = list(fc.nominal_delta)
        nexts = list(fc.next_delta)
        n = len(tasks)
        if not (len(versions) == len(deltas) == len(nexts) == n):
            return _invalid("fire columns of different lengths")
        if not n:
            return pb.CommandResult(ok=True), ()
        by_number = self.numbering.tasks
        if min(tasks) < 1 or max(tasks) >= self.numbering.next_task_no:
            return _invalid("fire columns name an unknown task number")
        if min(deltas) < 0 or max(deltas) > stamp:
            return _invalid("fire columns: a nominal time is after now or before the epoch")
        if max(nexts) > _MAX_TIME:
            return _invalid("fire columns: a next fire is out of range")
        nominals = [stamp - d for d in deltas]
        if max(map(int.__add__, nominals, nexts)) > _MAX_TIME:
            return _invalid("fire columns: a next fire is out of range")
        sts = [by_number[t] if t < len(by_number) else None for t in tasks]
        fast = (
            None not in sts
            and len(set(tasks)) == n  # one row per task: rows are independent
            and list(map(_version, sts)) == versions
            and all(map(_hot, sts))
            and all(map(lt, map(_watermark, sts), nominals))  # never twice
            and all(map(gt, nexts, deltas))  # next fire after now
        )
        refused = 0
        if not fast:
            keep = _check_fires(sts, versions, deltas, nexts, nominals)
            refused = n - len(keep)
            tasks, versions, deltas, nexts, nominals = _rows(keep, tasks, versions, deltas, nexts, nominals)
            sts = [sts[i] for i in keep]
            n = len(tasks)
            if not n:
                return pb.CommandResult(ok=True, refused=refused), ()
        # -- mutate (nothing can refuse any more) --
        runs = self.host.runs
        per_task = runs.active_per_task
        seq = seq_base = self.next_seq
        next_fires = list(map(int.__add__, nominals, nexts))
        specs: list[TaskSpec] = []
        names: list[str] = []
        for st, nf in zip(sts, next_fires, strict=True):
            assert st is not None
            st.watermark_ms = stamp
            st.next_fire_ms = nf
            st.active_runs += 1
            st.fires_total += 1
            st.runs_total += 1
            spec = st.spec
            specs.append(spec)
            name = spec.name
            names.append(name)
            per_task[name] = per_task.get(name, 0) + 1
            add_seq(st, seq)
            seq += 1
        self.next_seq = seq
        slots = self.slots
        if not slots.state:
            slots.base = seq_base
        slots.task += tasks
        slots.version += versions
        slots.nominal += nominals
        slots.state += [PENDING] * n
        slots.executor += [0] * n
        slots.attempt += [1] * n
        slots.assigned += [0] * n
        slots.created += [stamp] * n
        slots.epoch += [cmd.epoch] * n
        rows = pb.FireColumns(task=tasks, version=versions, nominal_delta=deltas, next_delta=nexts)
        record = pb.HotFires(seq_base=seq_base, now_ms=stamp, epoch=cmd.epoch, rows=rows)
        self.store.put(
            keys.hot_key(keys.HOT_FIRES, self.host.applied_commands + 1),
            record.SerializeToString(deterministic=True),
        )
        host = self.host
        host.hot_touched(names)
        tally = host.tally
        if tally is not None:
            tally.hot_fired(specs)
        effects: tuple[Effect, ...] = ()
        if host.leader_effects:
            effects = (ReadyColumns(seq_base, tasks, nominals, next_fires),)
        return pb.CommandResult(ok=True, fired=n, accounted=n, refused=refused), effects

    # -- AssignColumns ---------------------------------------------------------------------------

    def _slot_indexes(self, seqs: list[int]) -> list[int] | None:
        """Slot positions of ``seqs`` if every one is a slot of the table and none repeats."""
        base = self.slots.base
        idx = [s - base for s in seqs]
        if min(idx) < 0 or max(idx) >= len(self.slots.state) or len(set(idx)) != len(idx):
            return None
        return idx

    def assign_columns(self, cmd: pb.Command, now: int) -> Handled:
        ac = cmd.assign_columns
        seqs = list(ac.seq)
        shards = list(ac.shard)
        attempts = list(ac.attempt)
        execs = list(ac.executor)
        n = len(seqs)
        if not (len(shards) == len(attempts) == len(execs) == n):
            return _invalid("assign columns of different lengths")
        if not n:
            return pb.CommandResult(ok=True), ()
        numbering = self.numbering
        if min(execs) < 1 or max(execs) >= numbering.next_executor_no:
            return _invalid("assign columns name an unknown executor number")
        if max(seqs) >= self.next_seq:
            return _invalid("assign columns name a run seq not allocated yet")
        names = numbering.executors
        counts = Counter(execs)
        records = {e: self.host.executors.get(names[e] or "") for e in counts}
        usage = self.host.runs.usage
        slots = self.slots
        idx = self._slot_indexes(seqs)
        fast = (
            idx is not None
            and max(shards) == 0
            and list(map(slots.state.__getitem__, idx)).count(PENDING) == n
            and list(map(slots.attempt.__getitem__, idx)) == attempts
            and all(
                rec is not None
                and rec.alive
                and not rec.draining
                and usage.used(rec.name)[0] + counts[e] <= rec.slots
                for e, rec in records.items()
            )
        )
        refused = 0
        if not fast:
            keep = self._check_assigns(seqs, shards, attempts, execs, records)
            refused = n - len(keep)
            seqs, attempts, execs = _rows(keep, seqs, attempts, execs)
            n = len(seqs)
            if not n:
                return pb.CommandResult(ok=True, refused=refused), ()
            base = slots.base
            idx = [s - base for s in seqs]
            counts = Counter(execs)
        assert idx is not None
        # -- mutate --
        state, executor, assigned = slots.state, slots.executor, slots.assigned
        for j, e in zip(idx, execs, strict=True):
            state[j] = RUNNING
            executor[j] = e
            assigned[j] = now
        hot = usage.hot
        for e, c in counts.items():
            name = names[e] or ""
            hot[name] = hot.get(name, 0) + c
        rows = pb.AssignColumns(seq=seqs, shard=[0] * n, attempt=attempts, executor=execs)
        record = pb.HotAssigns(now_ms=now, rows=rows)
        self.store.put(
            keys.hot_key(keys.HOT_ASSIGNS, self.host.applied_commands + 1),
            record.SerializeToString(deterministic=True),
        )
        effects: tuple[Effect, ...] = ()
        if self.host.leader_effects:
            effects = (DispatchColumns(seqs, attempts, execs),)
        return pb.CommandResult(ok=True, accounted=n, refused=refused), effects

    def _check_assigns(
        self,
        seqs: list[int],
        shards: list[int],
        attempts: list[int],
        execs: list[int],
        records: Mapping[int, pb.ExecutorRecord | None],
    ) -> list[int]:
        slots = self.slots
        base, size = slots.base, len(slots.state)
        usage = self.host.runs.usage
        taken = Counter[int]()
        seen: set[int] = set()
        keep: list[int] = []
        for i, s in enumerate(seqs):
            j, e = s - base, execs[i]
            rec = records.get(e)
            if (
                not 0 <= j < size
                or j in seen
                or shards[i] != 0
                or slots.state[j] != PENDING
                or slots.attempt[j] != attempts[i]
                or rec is None
                or not rec.alive
                or rec.draining
                or usage.used(rec.name)[0] + taken[e] >= rec.slots
            ):
                continue
            seen.add(j)
            taken[e] += 1
            keep.append(i)
        return keep

    # -- ResultColumns ---------------------------------------------------------------------------

    def result_columns(self, cmd: pb.Command, now: int) -> Handled:
        rc = cmd.result_columns
        seqs = list(rc.seq)
        attempts = list(rc.attempt)
        execs = list(rc.executor)
        durations = list(rc.duration_ms)
        lateness = list(rc.lateness_ms)
        n = len(seqs)
        if not (len(attempts) == len(execs) == len(durations) == len(lateness) == n):
            return _invalid("result columns of different lengths")
        if not n:
            return pb.CommandResult(ok=True), ()
        if min(execs) < 1 or max(execs) >= self.numbering.next_executor_no:
            return _invalid("result columns name an unknown executor number")
        if max(seqs) >= self.next_seq:
            return _invalid("result columns name a run seq not allocated yet")
        if max(durations) > _MAX_DURATION or min(lateness) < -_MAX_DURATION or max(lateness) > _MAX_DURATION:
            return _invalid("result columns: a duration or start lateness is out of range")
        slots = self.slots
        idx = self._slot_indexes(seqs)
        fast = (
            idx is not None
            and list(map(slots.state.__getitem__, idx)).count(RUNNING) == n
            and list(map(slots.attempt.__getitem__, idx)) == attempts
            and list(map(slots.executor.__getitem__, idx)) == execs
        )
        refused = 0
        if not fast:
            keep = self._check_results(seqs, attempts, execs)
            refused = n - len(keep)
            seqs, attempts, execs, durations, lateness = _rows(
                keep, seqs, attempts, execs, durations, lateness
            )
            n = len(seqs)
            if not n:
                return pb.CommandResult(ok=True, refused=refused), ()
            base = slots.base
            idx = [s - base for s in seqs]
        assert idx is not None
        # -- mutate --
        host = self.host
        runs, numbering = host.runs, self.numbering
        per_task, hot_usage = runs.active_per_task, runs.usage.hot
        by_number, names = numbering.tasks, numbering.executors
        state, task_col, nominal_col = slots.state, slots.task, slots.nominal
        sink, tally, retention = host.on_start, host.tally, host.retention
        touched: list[str] = []
        finished: list[TaskSpec] = []  # counted in the tally once per entry
        # The per-row work below is inlined and its lookups hoisted (drop_seq, run_id_of, the
        # default branch of keeps, the end-of-run record of _finished): each is the computation
        # it replaces. Applying results is most of the apply's CPU on every node (issue 31).
        version_col, created_col, epoch_col, assigned_col = (
            slots.version,
            slots.created,
            slots.epoch,
            slots.assigned,
        )
        heads, params_of = self.finished_heads, self._params
        write, prune, touch = runs.write_keyed, runs.prune, host.touch_task
        nominals: dict[int, tuple[bytes, bytes]] = {}  # Run.nominal_ms, the key's time
        times_of: dict[tuple[int, int], tuple[bytes, bytes]] = {}  # by (created, epoch)
        shards: dict[tuple[int, int, int, int], bytes] = {}  # by (executor, assigned, started, duration)
        keep_count, slack = retention.keep_count, PRUNE_BATCH // 2
        for j, seq, e, dur, late in zip(idx, seqs, execs, durations, lateness, strict=True):
            state[j] = SUCCEEDED
            st = by_number[task_col[j]]
            assert st is not None  # a deleted task's slots were promoted
            spec = st.spec
            name = spec.name
            st.active_runs -= 1
            kept = st.kept_runs = st.kept_runs + 1
            live = st.hot_seqs
            if isinstance(live, list) and seq in live:
                live.remove(seq)
            left = per_task[name] - 1
            if left:
                per_task[name] = left
            else:
                del per_task[name]
            if sink is not None:
                sink(now, spec.namespace, late if late > 0 else 0)
            if tally is not None:
                finished.append(spec)
            nominal = nominal_col[j]
            run_id = f"{name}@{nominal}"  # run_id_of(name, nominal)
            # RunBook.prune decides nothing below this (the count rule deletes only past
            # keep_count + PRUNE_BATCH - phase, phase < PRUNE_BATCH / 2; the age rule runs on
            # every AGE_PRUNE_EVERY-th finish): the call is left out then. (The count is
            # records.keeps's first half: the cluster's keep_count unless the task sets its own.)
            keep_runs, keep_for_ms = spec.keep_runs, spec.keep_for_ms
            if (
                kept % AGE_PRUNE_EVERY == 0
                or kept
                - (keeps(retention, keep_runs, keep_for_ms)[0] if keep_runs or keep_for_ms else keep_count)
                > slack
            ):
                prune(st, now, run_id)
                if st.kept_runs != kept:
                    # Pruning is not replayed from the hot records: the task's counters are
                    # stored as of the end of this command instead (a TaskCounters row, which
                    # loading prefers over the hot records up to it).
                    touch(st)
            # The end-of-run record of slot j (stage B): the bytes today's cold path stores for
            # the same run when it succeeds on its first attempt, built from wire pieces
            # (see FinishedHead; tests/unit/test_fsm_hot.py checks them against protobuf).
            version = version_col[j]
            head = heads.get((st.number, version, st.version))
            if head is None:
                if len(heads) > 4096:
                    heads.clear()
                head = heads[(st.number, version, st.version)] = finished_head(
                    name, version, params_of(st, version)
                )
            # With keys.time_key inlined: the pieces the rows of one entry share (their nominal
            # times, created times and epochs, shards) are built once per entry.
            nom = nominals.get(nominal)
            if nom is None:
                nom = nominals[nominal] = (int_field(3, nominal), f"{nominal:016x}".encode())
            created, epoch = created_col[j], epoch_col[j]
            times = times_of.get((created, epoch))
            if times is None:
                times = times_of[(created, epoch)] = finished_times(created, now, epoch)
            assigned, started = assigned_col[j], nominal + late
            shard = shards.get((e, assigned, started, dur))
            if shard is None:
                shard = shards[(e, assigned, started, dur)] = shard_field(
                    now, names[e] or "", assigned, started, dur
                )
            rid = run_id.encode()
            size = len(rid)
            write(
                run_id,
                b"".join(
                    (
                        ID_TAGS[size] if size < 128 else id_tag(size),
                        rid,
                        head.task_field,
                        nom[0],
                        head.version_field,
                        times[0],
                        shard,
                        head.params_field,
                        times[1],
                    )
                ),
                head.key_prefix + nom[1],
                False,
            )
            touched.append(name)
        host.hot_touched(touched)
        if tally is not None:
            tally.hot_succeeded(finished)
        for e, c in Counter(execs).items():
            ename = names[e] or ""
            left = hot_usage[ename] - c
            if left:
                hot_usage[ename] = left
            else:
                del hot_usage[ename]
        rows = pb.ResultColumns(
            seq=seqs, attempt=attempts, executor=execs, duration_ms=durations, lateness_ms=lateness
        )
        record = pb.HotResults(now_ms=now, rows=rows)
        self.store.put(
            keys.hot_key(keys.HOT_RESULTS, host.applied_commands + 1),
            record.SerializeToString(deterministic=True),
        )
        slots.finished += n
        if slots.finished >= TRIM_EVERY:
            slots.trim()
        return pb.CommandResult(ok=True, accounted=n, refused=refused), ()

    def _check_results(self, seqs: list[int], attempts: list[int], execs: list[int]) -> list[int]:
        slots = self.slots
        base, size = slots.base, len(slots.state)
        seen: set[int] = set()
        keep: list[int] = []
        for i, s in enumerate(seqs):
            j = s - base
            if (
                not 0 <= j < size
                or j in seen
                or slots.state[j] != RUNNING
                or slots.attempt[j] != attempts[i]
                or slots.executor[j] != execs[i]
            ):
                continue
            seen.add(j)
            keep.append(i)
        return keep

    def _params(self, st: TaskState, version: int) -> str:
        if version == st.version:
            return st.spec.params_json
        spec = self.host.spec_for(st.spec.name, version)
        return spec.params_json if spec is not None else st.spec.params_json

    # -- promotion to the cold path ----------------------------------------------------------------

    def _template(self, st: TaskState, version: int) -> bytes:
        """``TaskState.run_template`` of ``st`` at ``version`` (the version a slot fired with)."""
        key = (st.number, version, st.version)
        found = self.templates.get(key)
        if found is None:
            found = pb.Run(
                task=st.spec.name,
                task_version=version,
                state=pb.PENDING,
                params_json=self._params(st, version),
                shards=pending_shards(1),
            ).SerializeToString(deterministic=True)
            if len(self.templates) > 4096:
                self.templates.clear()
            self.templates[key] = found
        return found

    def _pending_bytes(self, j: int, st: TaskState, run_id: str) -> bytes:
        """The bytes today's ``RunBook.new`` stores for the run of slot ``j`` when it is created."""
        slots = self.slots
        return self._template(st, slots.version[j]) + wire.run_fields(
            run_id, slots.nominal[j], slots.created[j], slots.epoch[j], False, False, True
        )

    def _run_bytes(self, j: int, st: TaskState, run_id: str) -> bytes:
        """The bytes today's cold path would hold for the live run of slot ``j``: as created, or
        (running) as ``ExecutorBook.assign`` saves it."""
        slots = self.slots
        data = self._pending_bytes(j, st, run_id)
        if slots.state[j] != RUNNING:
            return data
        run = pb.Run.FromString(data)
        shard = run.shards[0]
        shard.state = pb.RUNNING
        shard.executor = self.numbering.executor_name(slots.executor[j]) or ""
        shard.assigned_ms = slots.assigned[j]
        run.state = pb.RUNNING
        return run.SerializeToString(deterministic=True)

    def promote(self, seq: int) -> pb.Run | None:
        """Move the live hot run ``seq`` to the cold path: its ``pb.Run`` (the bytes the cold path
        would hold for it now) is stored under its key and kept in ``RunBook.active``, a running
        attempt's slot is held in the usage as a cold attempt's, and the slot is finished here
        (with :attr:`promotions_logged`, its seq is stored by :meth:`flush`). Pure: every replica
        promotes the same runs at the same entries. Returns the run."""
        data = self._promote(seq)
        return None if data is None else pb.Run.FromString(data)

    def _promote(self, seq: int) -> bytes | None:
        """:meth:`promote`, returning the run's bytes (None: ``seq`` is not a live hot run)."""
        slots = self.slots
        j = slots.live(seq)
        if j < 0:
            return None
        st = self.numbering.task(slots.task[j])
        if st is None:
            return None
        runs = self.host.runs
        name = st.spec.name
        run_id = run_id_of(name, slots.nominal[j])
        data = self._run_bytes(j, st, run_id)
        runs.write(run_id, data, True)
        if slots.state[j] == RUNNING:
            ename = self.numbering.executor_name(slots.executor[j]) or ""
            hot_usage = runs.usage.hot
            hot_usage[ename] -= 1
            if not hot_usage[ename]:
                del hot_usage[ename]
            runs.usage.take((run_id, 0), ename, NO_NEED)
        slots.state[j] = PROMOTED
        slots.finished += 1
        drop_seq(st, seq)
        if self.promotions_logged:
            self._promoted.append(seq)
        return data

    def promote_id(self, run_id: str) -> pb.Run | None:
        """Promote the live hot run ``run_id`` if there is one (a cold event names it)."""
        if not self.slots.state:
            return None
        seq = seq_of(self.slots, self.host.tasks, run_id)
        return self.promote(seq) if seq else None

    def promote_all(self) -> None:
        """Every live hot run (a rare command that walks the cold runs needs them there)."""
        slots = self.slots
        for j, state in enumerate(list(slots.state)):
            if state in (PENDING, RUNNING):
                self._promote(slots.base + j)

    def promote_bound(self) -> int:
        """The ``before_seq`` of the ``PromoteHotRuns`` the leader should propose now, or 0: 1
        until one has applied (it turns :attr:`promotions_logged` on and promotes nothing);
        then, once the oldest live hot run is more than :data:`MAX_HOT_SPAN` +
        :data:`PROMOTE_BATCH` seqs behind ``next_seq``, every live one more than
        ``MAX_HOT_SPAN`` behind. O(1) unless the table reaches that far back."""
        if not self.promotions_logged:
            return 1  # the first one (it promotes nothing below seq 1) turns the hp/ records on
        floor = self.next_seq - MAX_HOT_SPAN
        slots = self.slots
        if slots.base >= floor - PROMOTE_BATCH:
            return 0  # nothing in the table is that old (its base is at most the oldest live seq)
        oldest = slots.oldest_live()
        return floor if 0 < oldest < floor - PROMOTE_BATCH else 0

    def promotion_applied(self, before_seq: int) -> bool:
        """Whether a ``PromoteHotRuns`` up to ``before_seq`` has applied (or was made moot): the
        first one (1) once promotions are logged; another once no live hot run is below it."""
        if before_seq <= 1:
            return self.promotions_logged
        oldest = self.slots.oldest_live()
        return not 0 < oldest < before_seq

    def promote_hot_runs(self, cmd: pb.Command, now: int) -> Handled:
        """PromoteHotRuns: every live hot run with a seq below ``before_seq`` moves to the cold
        path (:meth:`promote`; the table's finished head is trimmed by :meth:`flush`). The first
        one also turns :attr:`promotions_logged` on. Idempotent: a second one finds nothing live
        below the bound. The leader's dispatcher already handles a run promoted under it (a
        refused row of its AssignColumns or ResultColumns goes the cold way)."""
        before = cmd.promote_hot_runs.before_seq
        if not 0 < before <= self.next_seq:
            return _invalid(f"promote_hot_runs.before_seq: {before} is not in 1-{self.next_seq} (next_seq)")
        if not self.promotions_logged:
            # Promotions before this command have no hp/ record: the checkpoint at its end holds
            # them as promoted, so none is taken for live on load once its run record is pruned.
            self.promotions_logged = True
            self.host.checkpoint_at_end()
        slots = self.slots
        state, base = slots.state, slots.base
        end = min(len(state), before - base)
        live: list[int] = []
        for mark in LIVE:  # found by list.index (C), not a Python loop over the span
            j = 0
            while j < end:
                try:
                    j = state.index(mark, j, end)
                except ValueError:
                    break
                live.append(j)
                j += 1
        live.sort()
        for j in live:
            self._promote(base + j)
        return pb.CommandResult(ok=True, accounted=len(live)), ()

    def promote_task(self, st: TaskState) -> None:
        for seq in list(st.hot_seqs):
            self._promote(seq)

    def promote_executor(self, name: str) -> None:
        """Every live hot run with an attempt running on executor ``name`` (it leaves or dies)."""
        number = self.numbering.executor_number(name)
        if not number or not self.host.runs.usage.hot.get(name):
            return
        slots = self.slots
        running = [
            slots.base + j
            for j, (state, e) in enumerate(zip(slots.state, slots.executor, strict=True))
            if state == RUNNING and e == number
        ]
        for seq in running:
            self._promote(seq)

    def flush(self) -> None:
        """End of a command (before the task book's flush, whose checkpoint folds the record in):
        the seqs it promoted in one ``hp/`` record (with :attr:`promotions_logged`), and the
        table's finished head trimmed once :data:`TRIM_EVERY` slots have finished (promotions
        and cold reports finish slots too, not only ResultColumns)."""
        if self._promoted:
            seqs, self._promoted = self._promoted, []
            key = keys.hot_key(keys.HOT_PROMOTED, self.host.applied_commands)
            rec = pb.HotPromoted()
            prior = self.store.get(key)  # a refused command that promoted shares the key before it
            if prior is not None:
                rec.ParseFromString(prior)
            rec.seq.extend(seqs)
            self.store.put(key, rec.SerializeToString(deterministic=True))
        if self.slots.finished >= TRIM_EVERY:
            self.slots.trim()

    # -- checkpoint and load -----------------------------------------------------------------------

    def checkpoint(self, applied: int) -> None:
        """With the task checkpoint (``TaskBook.checkpoint``, which re-puts the records of the
        tasks hot entries changed): the live slots to ``hc/s`` and every hot entry record deleted.
        Written from the first live slot, so a replica that trimmed its table at other moments
        (it restarted) writes the same bytes."""
        if not self.numbering.on:
            return  # nothing hot ever: the state keeps the bytes it had before the hot path
        slots = self.slots
        k = 0
        state = slots.state
        while k < len(state) and state[k] not in (PENDING, RUNNING):
            k += 1
        store = self.store
        store.put(
            keys.HOT_SLOTS_KEY,
            checkpoint_bytes(slots.base + k if k < len(state) else self.next_seq, slots.columns(), k),
        )
        for prefix in (keys.HOT_FIRES, keys.HOT_ASSIGNS, keys.HOT_RESULTS, keys.HOT_PROMOTED):
            while stale := store.scan_keys(prefix, prefix + keys.END, limit=4096):
                for key in stale:
                    store.delete(key)
        self.checkpoint_index = applied

    def load(self, counter_index: Mapping[str, int], checkpoint_index: int) -> None:
        """Rebuild the numbers, the slot table and the hot bits from the store (after the tasks,
        executors, unfinished cold runs and their usage): the checkpoint's slots, then every hot
        entry record after it, in log order. A task's counters take a record's rows only if the
        record is newer than the task's last counter record (``counter_index``: that record holds
        the counters at the end of its command, those rows included)."""
        host, numbering, slots, store = self.host, self.numbering, self.slots, self.store
        self.checkpoint_index = checkpoint_index
        self._promoted = []
        self.templates.clear()
        self.finished_heads.clear()
        numbering.tasks[:] = [None]
        numbering.executors[:] = [None]
        numbering.executor_no.clear()
        policy = host.policy
        for name, st in host.tasks.items():
            numbering.set_task(st)
            st.hot_seqs = ()
            st.hot = is_hot(st, policy, name)
        for name, rec in host.executors.items():
            numbering.set_executor(name, rec.number)
        slots.clear(self.next_seq)
        raw = store.get(keys.HOT_SLOTS_KEY)
        if raw is not None:
            cp = pb.HotCheckpoint.FromString(raw)
            slots.base = cp.seq_base
            slots.task[:] = cp.task
            slots.version[:] = cp.version
            slots.nominal[:] = cp.nominal_ms
            slots.state[:] = cp.state
            slots.executor[:] = cp.executor
            slots.attempt[:] = cp.attempt
            slots.assigned[:] = cp.assigned_ms
            slots.created[:] = cp.created_ms
            slots.epoch[:] = cp.epoch
        touched: set[str] = set()
        for index, kind, value in _hot_records(store):
            if kind == 0:
                self._replay_fires(index, pb.HotFires.FromString(value), counter_index, touched)
            elif kind == 1:
                arec = pb.HotAssigns.FromString(value)
                for seq, e in zip(arec.rows.seq, arec.rows.executor, strict=True):
                    j = slots.index(seq)
                    if j >= 0:
                        slots.state[j], slots.executor[j], slots.assigned[j] = RUNNING, e, arec.now_ms
            else:
                self._replay_results(index, pb.HotResults.FromString(value), counter_index, touched)
        host.hot_touched(sorted(touched))
        # Promoted since the checkpoint (hp/ records, once promotions are logged): their run
        # records may be pruned already, so they are not inferred from those.
        promoted = {
            seq
            for _, value in store.scan(keys.HOT_PROMOTED, keys.HOT_PROMOTED + keys.END)
            for seq in pb.HotPromoted.FromString(value).seq
        }
        # A live slot whose run has a record under its key was promoted (a live hot run has none).
        runs = host.runs
        for j, state in enumerate(slots.state):
            if state not in (PENDING, RUNNING):
                continue
            owner = numbering.task(slots.task[j])
            run_id = run_id_of(owner.spec.name, slots.nominal[j]) if owner is not None else ""
            if (
                owner is None
                or slots.base + j in promoted
                or store.get(keys.run_key_for_id(run_id)) is not None
            ):
                slots.state[j] = PROMOTED
                continue
            add_seq(owner, slots.base + j)
            name = owner.spec.name
            runs.active_per_task[name] = runs.active_per_task.get(name, 0) + 1
            if state == RUNNING:
                ename = numbering.executor_name(slots.executor[j]) or ""
                runs.usage.hot[ename] = runs.usage.hot.get(ename, 0) + 1
        slots.finished = sum(1 for state in slots.state if state not in (PENDING, RUNNING))
        slots.trim()

    def _replay_fires(
        self, index: int, rec: pb.HotFires, counter_index: Mapping[str, int], touched: set[str]
    ) -> None:
        slots, numbering = self.slots, self.numbering
        rows = rec.rows
        tasks = list(rows.task)
        n = len(tasks)
        if not slots.state:
            slots.base = rec.seq_base
        nominals = [rec.now_ms - d for d in rows.nominal_delta]
        for t, nominal, nd in zip(tasks, nominals, rows.next_delta, strict=True):
            st = numbering.task(t)
            if st is None:
                continue
            name = st.spec.name
            touched.add(name)
            if index > counter_index.get(name, 0):
                st.watermark_ms = rec.now_ms
                st.next_fire_ms = nominal + nd
                st.active_runs += 1
                st.fires_total += 1
                st.runs_total += 1
        slots.task += tasks
        slots.version += rows.version
        slots.nominal += nominals
        slots.state += [PENDING] * n
        slots.executor += [0] * n
        slots.attempt += [1] * n
        slots.assigned += [0] * n
        slots.created += [rec.now_ms] * n
        slots.epoch += [rec.epoch] * n

    def _replay_results(
        self, index: int, rec: pb.HotResults, counter_index: Mapping[str, int], touched: set[str]
    ) -> None:
        slots, numbering = self.slots, self.numbering
        for seq in rec.rows.seq:
            j = slots.index(seq)
            if j < 0:
                continue
            slots.state[j] = SUCCEEDED
            st = numbering.task(slots.task[j])
            if st is None:
                continue
            name = st.spec.name
            touched.add(name)
            if index > counter_index.get(name, 0):
                st.active_runs -= 1
                st.kept_runs += 1

    # -- reads (never mutate: the caller holds the lock) -------------------------------------------

    def synthesise(self, seq: int) -> pb.Run | None:
        """The live hot run ``seq`` as the cold path would hold it (nothing stored)."""
        slots = self.slots
        j = slots.live(seq)
        st = self.numbering.task(slots.task[j]) if j >= 0 else None
        if st is None:
            return None
        return pb.Run.FromString(self._run_bytes(j, st, run_id_of(st.spec.name, slots.nominal[j])))

    def live_count(self) -> int:
        """How many hot runs are live (pending or running): O(1), for status counts (synthesising
        them all is O(live runs), and a leader with no executor holds a growing backlog)."""
        slots = self.slots
        return len(slots) - slots.finished

    def live_runs_of(self, names: Iterable[str]) -> dict[str, bytes]:
        """The live hot runs of tasks ``names`` (as :meth:`live_runs`), found through each task's
        live seqs: a read of a few tasks costs their runs, not every live run."""
        slots, tasks, out = self.slots, self.host.tasks, {}
        for name in names:
            st = tasks.get(name)
            if st is None or not st.hot_seqs:
                continue
            for seq in st.hot_seqs:
                j = slots.live(seq)
                if j >= 0:
                    run_id = run_id_of(name, slots.nominal[j])
                    out[run_id] = self._run_bytes(j, st, run_id)
        return out

    def live_runs(self) -> dict[str, bytes]:
        """Every live hot run, serialised as the cold path would hold it, by run id."""
        slots, out = self.slots, {}
        for j, state in enumerate(slots.state):
            if state in (PENDING, RUNNING):
                st = self.numbering.task(slots.task[j])
                if st is not None:
                    run_id = run_id_of(st.spec.name, slots.nominal[j])
                    out[run_id] = self._run_bytes(j, st, run_id)
        return out

    def running_runs(self) -> dict[str, bytes]:
        """The live hot runs with their attempt RUNNING (as :meth:`live_runs`), found with a scan
        of the state column in C (``list.index``): a leader's periodic checks need only these,
        and synthesising every live run held the state lock ~1 s on a leader with a backlog of
        300,000 pending runs (bench.run cron at 12,000 tasks), so firing fell behind."""
        slots, out = self.slots, dict[str, bytes]()
        state = slots.state
        j = -1
        while True:
            try:
                j = state.index(RUNNING, j + 1)
            except ValueError:
                return out
            st = self.numbering.task(slots.task[j])
            if st is not None:
                run_id = run_id_of(st.spec.name, slots.nominal[j])
                out[run_id] = self._run_bytes(j, st, run_id)

    def pending_attempts(self) -> list[AttemptReady | DispatchAttempt]:
        """The live hot attempts as the cold path's ``pending_attempts`` gives them (a new leader
        re-queues them: it may place and report them the cold way, which promotes them)."""
        out: list[AttemptReady | DispatchAttempt] = []
        slots = self.slots
        for j, state in enumerate(slots.state):
            if state not in (PENDING, RUNNING):
                continue
            st = self.numbering.task(slots.task[j])
            if st is None:
                continue
            nominal, epoch = slots.nominal[j], slots.epoch[j]
            run_id = run_id_of(st.spec.name, nominal)
            if state == PENDING:
                out.append(AttemptReady(run_id, st.spec.name, nominal, 0, slots.attempt[j], epoch))
            else:
                out.append(
                    DispatchAttempt(
                        run_id,
                        st.spec.name,
                        nominal,
                        0,
                        slots.attempt[j],
                        self.numbering.executor_name(slots.executor[j]) or "",
                        epoch,
                        not st.spec.params_json,
                        slots.version[j],
                        False,
                        slots.assigned[j],
                    )
                )
        return out


def _check_fires(
    sts: list[TaskState | None],
    versions: list[int],
    deltas: list[int],
    nexts: list[int],
    nominals: list[int],
) -> list[int]:
    """The rows that may apply. A task may have several rows, in nominal order (a catch-up of the
    fires due since its last one); only its last row's next fire counts, and a bad row refuses
    every row of its task (as today a bad fire refuses its task's TaskFires)."""
    last_row = {id(st): i for i, st in enumerate(sts)}
    last: dict[int, int] = {}
    bad: set[int] = set()
    for i, st in enumerate(sts):
        key = id(st)
        if st is None:
            bad.add(key)
            continue
        wm = last.get(key, st.watermark_ms)
        nominal = nominals[i]
        if (
            versions[i] != st.version
            or not st.hot
            or nominal <= wm
            or (last_row[key] == i and nexts[i] <= deltas[i])
        ):
            bad.add(key)
        last[key] = nominal
    return [i for i, st in enumerate(sts) if id(st) not in bad]


def _index(key: bytes, prefix: bytes) -> int:
    return int(key[len(prefix) :], 16)


class _Replay(NamedTuple):
    at: int  # the entry's Meta.applied_commands
    kind: int  # 0 fires, 1 assigns, 2 results
    value: bytes


def _hot_records(store: StateStore) -> list[_Replay]:
    """Every hot entry record kept since the last checkpoint, in log order."""
    out: list[_Replay] = []
    for kind, prefix in enumerate((keys.HOT_FIRES, keys.HOT_ASSIGNS, keys.HOT_RESULTS)):
        out.extend(_Replay(_index(k, prefix), kind, v) for k, v in store.scan(prefix, prefix + keys.END))
    out.sort()
    return out
