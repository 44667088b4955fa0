"""PROTOTYPE (issue 31, gate 1): the columnar hot attempt path of the state machine, not wired in.

What ``python -m bench.attempt_apply --columnar`` measures: the per-node apply of a hot attempt
(a single on-time FIRED fire of a one-shard task, assigned, and succeeding on its first try) when
log entries carry packed columns (``protos/raftsched/v1/columns.proto``) instead of one protobuf
message per item, active runs live in an in-memory :class:`SlotTable`, task counters in a
:class:`HotTable`, and the store gets ONE record per entry under sequential keys:

==============================  ============================================================
``h/<seq_base:016x>``           :class:`~raftsched.v1.columns_pb2.HotFires`: a fire entry's
                                accepted rows; their runs are seqs ``seq_base..``
``ha/<entry:016x>``             :class:`~raftsched.v1.columns_pb2.HotAssigns`
``hf/<entry:016x>``             :class:`~raftsched.v1.columns_pb2.HotResults`
``hm``                          next seq, applied entries, leader time and the apply chain
``r/<task>\\0<nominal:016x>``   stage B only: the finished run, a ``pb.Run`` wire-built once
                                (no timeline entries; today's run key, so history reads and
                                retention are unchanged)
==============================  ============================================================

``seq`` (a run's sequence number) is allocated at apply as ``next_seq + i``, never by the leader.
Every column of an entry is validated before anything is mutated: a malformed entry (columns of
different lengths, an unknown task or executor number) is refused whole, as a value; a stale row
(another version, already accounted, a slot not pending or not running, the wrong executor or
attempt, a full executor, a value out of range) is refused on its own and counted. The common
case is checked with C-level list operations (``map``/``==``/``min``/``max``/``count``); only an
entry where that check fails takes the per-row path.

Stages of the review (``docs/dev/columnar.md``): **B** writes the end-of-run record,
**C** writes none (run views would come from the ``h``/``ha``/``hf`` records).

The in-memory tables are derived: :meth:`ColumnarState.load` rebuilds them from the records
(replay; the real design adds a periodic hot-table checkpoint so replay stays short).

Not here (a spike): cold rows (misfires, coalesced fires, failures, retries, multi-shard runs,
quotas, locks, workflows) -- the real design promotes those to today's ``pb.Run`` path --
retention pruning, the checkpoint, task creation/updates (tasks and executors are registered
directly), idempotency keys and epoch fencing (per entry, unchanged from today).
"""

from __future__ import annotations

import hashlib
import struct
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from operator import gt, lt
from typing import Final, NamedTuple

from raftsched import bounds
from raftsched.fsm import snapshot
from raftsched.fsm.wire import varint
from raftsched.storage.lmdb_store import LmdbStore
from raftsched.v1 import columns_pb2 as cpb
from raftsched.v1 import log_pb2 as pb

PENDING: Final = int(pb.PENDING)
RUNNING: Final = int(pb.RUNNING)
SUCCEEDED: Final = int(pb.SUCCEEDED)

HOT_FIRES: Final = b"h/"
HOT_ASSIGNS: Final = b"ha/"
HOT_RESULTS: Final = b"hf/"
HOT_META: Final = b"hm"
RUN: Final = b"r/"

STAGES: Final = ("B", "C")
TRIM_EVERY: Final = 4096  # finished slots at the head of the slot table before it is trimmed
_META: Final = struct.Struct(">QQQ")  # next_seq, applied entries, max leader time
_MAX_TIME: Final = bounds.MAX_TIME_MS
_MAX_DURATION: Final = bounds.MAX_DURATION_MS

StartsSink = Callable[[int, Sequence[int], Sequence[int]], None]
"""Node-local: ``(leader time, task numbers, start lateness ms)`` of an entry's reported starts."""


_SMALL: Final = tuple(bytes((i,)) for i in range(128))  # one-byte varints


@lru_cache(maxsize=256)
def _hex16(value: int) -> bytes:
    return b"%016x" % value


@lru_cache(maxsize=256)
def _dec(value: int) -> bytes:
    return b"%d" % value


def _int_field(field: int, value: int) -> bytes:
    """A varint field, left out at 0 (proto3)."""
    return varint(field << 3) + varint(value) if value else b""


def _len_field(field: int, data: bytes) -> bytes:
    return varint(field << 3 | 2) + varint(len(data)) + data


@lru_cache(maxsize=1024)
def _field(field: int, value: int) -> bytes:
    # Nominal, created and leader times repeat across the rows of an entry (every task due in one
    # second shares them), durations and latenesses are small: a cached varint field each.
    return _int_field(field, value)


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


class Result(NamedTuple):
    """What apply returns: like today's CommandResult (ok, accounted, refused)."""

    ok: bool
    accepted: int
    refused: int
    code: str = ""
    message: str = ""

    def encode(self) -> bytes:
        return pb.CommandResult(
            ok=self.ok, accounted=self.accepted, refused=self.refused, code=self.code, message=self.message
        ).SerializeToString(deterministic=True)


class ReadyColumns(NamedTuple):
    """Leader effect of a fire entry (one per entry): its runs ``seq_base..`` are ready to place,
    and each row's task is re-armed at ``next_fire``."""

    seq_base: int
    tasks: list[int]
    nominals: list[int]
    next_fires: list[int]


class DispatchColumns(NamedTuple):
    """Leader effect of an assignment entry: the accepted rows may be sent."""

    seqs: list[int]
    attempts: list[int]
    executors: list[int]


Effect = ReadyColumns | DispatchColumns


class HotTable:
    """Per task number: the fields the hot path reads and writes, as flat lists.

    ``fired`` counts hot fires, each of which created one run (so it adds to both of today's
    ``fires_total`` and ``runs_total``); ``kept_runs`` counts finished runs kept."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.run_prefix: list[bytes] = []  # b"r/<task>\\0": the run key's head
        self.run_id_head: list[bytes] = []  # the run_id field's tag, length and b"<task>@" (see _rid)
        self.template: list[bytes] = []  # Run{task, task_version, params_json} serialized
        self.namespace: list[str] = []
        self.version: list[int] = []
        self.eligible: list[bool] = []
        self.watermark: list[int] = []
        self.next_fire: list[int] = []
        self.active: list[int] = []
        self.fired: list[int] = []
        self.kept_runs: list[int] = []

    def __len__(self) -> int:
        return len(self.names)

    def add(
        self,
        name: str,
        version: int,
        *,
        eligible: bool = True,
        namespace: str = "",
        params_json: str = "",
        next_fire_ms: int = 0,
    ) -> int:
        """Register a task (as CreateTask would assign it its number); returns the number."""
        number = len(self.names)
        data = name.encode()
        self.names.append(name)
        self.run_prefix.append(RUN + data + b"\x00")
        self.run_id_head.append(data + b"@")
        self.template.append(
            pb.Run(task=name, task_version=version, params_json=params_json).SerializeToString(
                deterministic=True
            )
        )
        self.namespace.append(namespace)
        self.version.append(version)
        self.eligible.append(eligible)
        self.watermark.append(0)
        self.next_fire.append(next_fire_ms)
        self.active.append(0)
        self.fired.append(0)
        self.kept_runs.append(0)
        return number

    def image(self) -> bytes:
        """The replicated fields, canonically (for digests and the replay check)."""
        cols = (self.version, self.watermark, self.next_fire, self.active, self.fired, self.kept_runs)
        return b"".join(struct.pack(f">{len(c)}q", *c) for c in cols)


class SlotTable:
    """Per run seq (from ``base``): task number, nominal, state, executor, attempt, assigned and
    created times. Finished slots at the head are trimmed in bulk (every :data:`TRIM_EVERY`)."""

    def __init__(self) -> None:
        self.base = 1  # seqs start at 1 (ColumnarState.next_seq)
        self.task: list[int] = []
        self.nominal: list[int] = []
        self.state: list[int] = []
        self.executor: list[int] = []
        self.attempt: list[int] = []
        self.assigned: list[int] = []
        self.created: list[int] = []
        self.epoch: list[int] = []
        self.finished = 0  # finished slots not trimmed yet

    def columns(self) -> tuple[list[int], ...]:
        return (
            self.task,
            self.nominal,
            self.state,
            self.executor,
            self.attempt,
            self.assigned,
            self.created,
            self.epoch,
        )

    def _head(self) -> int:
        """How many slots at the head are finished."""
        state, k, n = self.state, 0, len(self.state)
        while k < n and state[k] == SUCCEEDED:
            k += 1
        return k

    def trim(self) -> None:
        k = self._head()
        if k:
            for col in self.columns():
                del col[:k]
            self.base += k
            self.finished -= k

    def image(self) -> bytes:
        """The live slots (from the first unfinished one), whenever the head was last trimmed."""
        k = self._head()
        return struct.pack(">q", self.base + k) + b"".join(
            struct.pack(f">{len(c) - k}q", *c[k:]) for c in self.columns()
        )


class Executors:
    """Per executor number: name (as the run record's shard field wants it), liveness, slots and
    the running count."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.alive: list[bool] = []
        self.draining: list[bool] = []
        self.slots: list[int] = []
        self.running: list[int] = []

    def add(self, name: str, slots: int) -> int:
        self.names.append(name)
        self.alive.append(True)
        self.draining.append(False)
        self.slots.append(slots)
        self.running.append(0)
        return len(self.names) - 1


@lru_cache(maxsize=256)
def _shard_head(attempt: int, executor: str, assigned_ms: int, finished_ms: int) -> bytes:
    """The fields of a finished one-shard run's ShardAttempt that its entry shares: attempt,
    state SUCCEEDED, finished_ms, executor, assigned_ms (shard 0 is left out)."""
    return (
        _int_field(2, attempt)
        + _int_field(3, SUCCEEDED)
        + _int_field(5, finished_ms)
        + (_len_field(6, executor.encode()) if executor else b"")
        + _int_field(8, assigned_ms)
    )


# The end-of-run record carries what today's timeline held and ShardAttempt has no field for: the
# attempt's start lateness and duration. Prototype field numbers inside ShardAttempt (unknown to
# today's records.proto, so they parse as unknown fields); the real build adds them to it.
START_LATENESS_FIELD: Final = 900  # sint32
DURATION_FIELD: Final = 901  # uint32


class ColumnarState:
    """The prototype state machine of hot attempts over an :class:`LmdbStore`."""

    def __init__(self, store: LmdbStore, stage: str = "B", starts: StartsSink | None = None) -> None:
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
        self.store = store
        self.stage = stage
        self.starts = starts
        self.hot = HotTable()
        self.slots = SlotTable()
        self.executors = Executors()
        self.next_seq = 1
        self.applied = 0
        self.max_now = 0
        self.chain = b""
        self.leader_effects = True
        self.effects: tuple[Effect, ...] = ()

    # -- apply -------------------------------------------------------------------------------------

    def apply(self, data: bytes, leader_effects: bool = True) -> Result:
        """Apply one encoded :class:`~raftsched.v1.columns_pb2.ColumnsCommand`. Never raises for
        bad input; the leader effects of the entry are left in :attr:`effects`."""
        self.leader_effects = leader_effects
        self.effects = ()
        cmd = cpb.ColumnsCommand()
        try:
            cmd.ParseFromString(data)
        except Exception as exc:  # a malformed entry is refused as a value
            result = Result(False, 0, 0, "invalid_argument", f"undecodable command: {exc}")
        else:
            now = cmd.now_ms
            body = cmd.WhichOneof("body")
            self.applied += 1
            if not 0 <= now <= _MAX_TIME:
                result = Result(False, 0, 0, "invalid_argument", f"now_ms {now} out of range")
            elif body == "fire_columns":
                result = self._fire(cmd.fire_columns, now, cmd.epoch)
            elif body == "assign_columns":
                result = self._assign(cmd.assign_columns, now)
            elif body == "result_columns":
                result = self._result(cmd.result_columns, now)
            else:
                result = Result(False, 0, 0, "invalid_argument", f"unknown command body {body!r}")
            if result.ok:
                self.max_now = max(self.max_now, now)
        self.chain = hashlib.sha256(self.chain + hashlib.sha256(data).digest() + result.encode()).digest()
        self.store.put(HOT_META, _META.pack(self.next_seq, self.applied, self.max_now) + self.chain)
        return result

    def _fire(self, fc: cpb.FireColumns, now: int, epoch: int) -> Result:
        hot = self.hot
        tasks = list(fc.task)
        versions = list(fc.version)
        deltas = list(fc.nominal_delta)
        nexts = list(fc.next_delta)
        n = len(tasks)
        if not (len(versions) == len(deltas) == len(nexts) == n):
            return Result(False, 0, 0, "invalid_argument", "fire columns of different lengths")
        if not n:
            return Result(True, 0, 0)
        if min(tasks) < 0 or max(tasks) >= len(hot):
            return Result(False, 0, 0, "invalid_argument", "fire columns name an unknown task number")
        nominals = [now - d for d in deltas]
        watermark = hot.watermark
        fast = (
            len(set(tasks)) == n  # one row per task: rows are independent
            and list(map(hot.version.__getitem__, tasks)) == versions
            and all(map(hot.eligible.__getitem__, tasks))
            and min(deltas) >= 0  # never early
            and all(map(lt, map(watermark.__getitem__, tasks), nominals))  # never twice
            and all(map(gt, nexts, deltas))  # next fire after the watermark (now)
            and max(nexts) - min(deltas) <= _MAX_TIME - now
        )
        refused = 0
        if not fast:
            keep = self._check_fires(tasks, versions, deltas, nexts, nominals, now)
            refused = n - len(keep)
            if refused:
                tasks = [tasks[i] for i in keep]
                nominals = [nominals[i] for i in keep]
                nexts = [nexts[i] for i in keep]
                n = len(tasks)
                rows = cpb.FireColumns(
                    task=tasks,
                    version=[versions[i] for i in keep],
                    nominal_delta=[deltas[i] for i in keep],
                    next_delta=nexts,
                )
                fc = rows
        # -- mutate (nothing can refuse any more) --
        next_fire, active, fired = hot.next_fire, hot.active, hot.fired
        next_fires = [nom + nd for nom, nd in zip(nominals, nexts, strict=True)]
        for t, nf in zip(tasks, next_fires, strict=True):
            watermark[t] = now
            next_fire[t] = nf
            active[t] += 1
            fired[t] += 1
        seq_base = self.next_seq
        self.next_seq = seq_base + n
        slots = self.slots
        slots.task += tasks
        slots.nominal += nominals
        slots.state += [PENDING] * n
        slots.executor += [-1] * n
        slots.attempt += [1] * n
        slots.assigned += [0] * n
        slots.created += [now] * n
        slots.epoch += [epoch] * n
        if n:
            record = cpb.HotFires(seq_base=seq_base, now_ms=now, epoch=epoch, rows=fc)
            self.store.put(HOT_FIRES + _hex16(seq_base), record.SerializeToString(deterministic=True))
        if self.leader_effects and n:
            self.effects = (ReadyColumns(seq_base, tasks, nominals, next_fires),)
        return Result(True, n, refused)

    def _check_fires(
        self,
        tasks: list[int],
        versions: list[int],
        deltas: list[int],
        nexts: list[int],
        nominals: list[int],
        now: int,
    ) -> list[int]:
        """The rows that may apply. A task may have several rows, in nominal order (a catch-up of
        the fires due since its last one); only its last row's next fire counts, and a bad row
        refuses every row of its task (as today a bad fire refuses its task's TaskFires)."""
        hot = self.hot
        last_row = {t: i for i, t in enumerate(tasks)}
        last: dict[int, int] = {}
        bad: set[int] = set()
        for i, t in enumerate(tasks):
            wm = last.get(t, hot.watermark[t])
            nominal = nominals[i]
            if (
                versions[i] != hot.version[t]
                or not hot.eligible[t]
                or deltas[i] < 0
                or nominal <= wm
                or (last_row[t] == i and nexts[i] <= deltas[i])
                or nominal + nexts[i] > _MAX_TIME
            ):
                bad.add(t)
            last[t] = nominal
        return [i for i, t in enumerate(tasks) if t not in bad]

    def _slot_indexes(self, seqs: list[int]) -> list[int] | None:
        """Slot positions of ``seqs`` if every one is a live slot and none repeats."""
        base = self.slots.base
        idx = [s - base for s in seqs]
        if min(idx) < 0 or max(idx) >= len(self.slots.state) or len(set(idx)) != len(idx):
            return None
        return idx

    def _assign(self, ac: cpb.AssignColumns, now: int) -> Result:
        seqs = list(ac.seq)
        shards = list(ac.shard)
        attempts = list(ac.attempt)
        execs = list(ac.executor)
        n = len(seqs)
        if not (len(shards) == len(attempts) == len(execs) == n):
            return Result(False, 0, 0, "invalid_argument", "assign columns of different lengths")
        if not n:
            return Result(True, 0, 0)
        ex = self.executors
        if max(execs) >= len(ex.names):
            return Result(False, 0, 0, "invalid_argument", "assign columns name an unknown executor number")
        slots = self.slots
        idx = self._slot_indexes(seqs)
        counts = Counter(execs)
        fast = (
            idx is not None
            and max(shards) == 0
            and list(map(slots.state.__getitem__, idx)).count(PENDING) == n
            and list(map(slots.attempt.__getitem__, idx)) == attempts
            and all(map(ex.alive.__getitem__, counts))
            and not any(map(ex.draining.__getitem__, counts))
            and all(ex.running[e] + c <= ex.slots[e] for e, c in counts.items())
        )
        refused = 0
        if not fast:
            keep = self._check_assigns(seqs, shards, attempts, execs)
            refused = n - len(keep)
            seqs = [seqs[i] for i in keep]
            attempts = [attempts[i] for i in keep]
            execs = [execs[i] for i in keep]
            n = len(seqs)
            base = slots.base
            idx = [s - base for s in seqs]
            counts = Counter(execs)
            ac = cpb.AssignColumns(seq=seqs, shard=[0] * n, attempt=attempts, executor=execs)
        assert idx is not None
        # -- mutate --
        state, executor, assigned = slots.state, slots.executor, slots.assigned
        for j, e in zip(idx, execs, strict=True):
            state[j] = RUNNING
            executor[j] = e
            assigned[j] = now
        running = ex.running
        for e, c in counts.items():
            running[e] += c
        if n:
            record = cpb.HotAssigns(now_ms=now, rows=ac)
            self.store.put(HOT_ASSIGNS + _hex16(self.applied), record.SerializeToString(deterministic=True))
        if self.leader_effects and n:
            self.effects = (DispatchColumns(seqs, attempts, execs),)
        return Result(True, n, refused)

    def _check_assigns(
        self, seqs: list[int], shards: list[int], attempts: list[int], execs: list[int]
    ) -> list[int]:
        slots, ex = self.slots, self.executors
        base, size = slots.base, len(slots.state)
        taken = Counter[int]()
        seen: set[int] = set()
        keep: list[int] = []
        for i, s in enumerate(seqs):
            j, e = s - base, execs[i]
            if (
                not 0 <= j < size
                or j in seen
                or shards[i] != 0
                or slots.state[j] != PENDING
                or slots.attempt[j] != attempts[i]
                or not ex.alive[e]
                or ex.draining[e]
                or ex.running[e] + taken[e] >= ex.slots[e]
            ):
                continue
            seen.add(j)
            taken[e] += 1
            keep.append(i)
        return keep

    def _result(self, rc: cpb.ResultColumns, now: int) -> Result:
        seqs = list(rc.seq)
        attempts = list(rc.attempt)
        execs = list(rc.executor)
        durations = list(rc.duration_ms)
        lateness = list(rc.lateness_ms)
        n = len(seqs)
        if not (len(attempts) == len(execs) == len(durations) == len(lateness) == n):
            return Result(False, 0, 0, "invalid_argument", "result columns of different lengths")
        if not n:
            return Result(True, 0, 0)
        slots = self.slots
        idx = self._slot_indexes(seqs)
        fast = (
            idx is not None
            and list(map(slots.state.__getitem__, idx)).count(RUNNING) == n
            and list(map(slots.attempt.__getitem__, idx)) == attempts
            and list(map(slots.executor.__getitem__, idx)) == execs
            and max(durations) <= _MAX_DURATION
            and min(lateness) >= -_MAX_DURATION
            and max(lateness) <= _MAX_DURATION
        )
        refused = 0
        if not fast:
            keep = self._check_results(seqs, attempts, execs, durations, lateness)
            refused = n - len(keep)
            seqs = [seqs[i] for i in keep]
            attempts = [attempts[i] for i in keep]
            execs = [execs[i] for i in keep]
            durations = [durations[i] for i in keep]
            lateness = [lateness[i] for i in keep]
            n = len(seqs)
            base = slots.base
            idx = [s - base for s in seqs]
            rc = cpb.ResultColumns(
                seq=seqs, attempt=attempts, executor=execs, duration_ms=durations, lateness_ms=lateness
            )
        assert idx is not None
        # -- mutate --
        hot, ex = self.hot, self.executors
        tasks = list(map(slots.task.__getitem__, idx))
        state = slots.state
        for j in idx:
            state[j] = SUCCEEDED
        active, kept = hot.active, hot.kept_runs
        for t in tasks:
            active[t] -= 1
            kept[t] += 1
        running = ex.running
        for e, c in Counter(execs).items():
            running[e] -= c
        if self.starts is not None and n:
            self.starts(now, tasks, lateness)
        if self.stage == "B" and n:
            self._end_of_run(idx, tasks, execs, durations, lateness, now)
        if n:
            record = cpb.HotResults(now_ms=now, rows=rc)
            self.store.put(HOT_RESULTS + _hex16(self.applied), record.SerializeToString(deterministic=True))
        slots.finished += n
        if slots.finished >= TRIM_EVERY:
            slots.trim()
        return Result(True, n, refused)

    def _end_of_run(
        self,
        idx: list[int],
        tasks: list[int],
        execs: list[int],
        durations: list[int],
        lateness: list[int],
        now: int,
    ) -> None:
        """Stage B: one ``pb.Run`` per finished run under ``r/<task>\\0<nominal>``, built from wire
        pieces: as a message, today's finished run without its timeline, plus the attempt's start
        lateness and duration (which today only the timeline holds)."""
        hot, slots, put = self.hot, self.slots, self.store.put
        prefix, head, template = hot.run_prefix, hot.run_id_head, hot.template
        nominal, created, assigned, epoch = slots.nominal, slots.created, slots.assigned, slots.epoch
        names = self.executors.names
        tail = _int_field(5, SUCCEEDED) + _int_field(7, now)  # state, finished_ms
        small = _SMALL
        # The rows of one entry share their nominal, created and assigned times and executors:
        # each distinct combination is encoded once per entry.
        times: dict[tuple[int, int, int], tuple[bytes, bytes, bytes]] = {}
        shards: dict[tuple[int, int, int, int], bytes] = {}
        for j, t, e, dur, late in zip(idx, tasks, execs, durations, lateness, strict=True):
            nom = nominal[j]
            tk = (nom, created[j], epoch[j])
            parts = times.get(tk)
            if parts is None:
                parts = times[tk] = (
                    _dec(nom),
                    _hex16(nom),
                    _field(3, nom) + tail + _field(6, tk[1]) + _field(8, tk[2]),
                )
            sk = (e, assigned[j], dur, late)
            shard = shards.get(sk)
            if shard is None:
                body = (
                    _shard_head(1, names[e], sk[1], now)
                    + _field(START_LATENESS_FIELD, _zigzag(late))
                    + _field(DURATION_FIELD, dur)
                )
                shard = shards[sk] = b"\x52" + varint(len(body)) + body  # field 10 (shards)
            rid = head[t] + parts[0]
            size = len(rid)
            put(
                prefix[t] + parts[1],
                template[t]
                + b"\x0a"
                + (small[size] if size < 128 else varint(size))
                + rid
                + parts[2]
                + shard,
            )

    def _check_results(
        self,
        seqs: list[int],
        attempts: list[int],
        execs: list[int],
        durations: list[int],
        lateness: list[int],
    ) -> list[int]:
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
                or not 0 <= durations[i] <= _MAX_DURATION
                or not -_MAX_DURATION <= lateness[i] <= _MAX_DURATION
            ):
                continue
            seen.add(j)
            keep.append(i)
        return keep

    # -- reading -----------------------------------------------------------------------------------

    def image(self) -> bytes:
        """The in-memory tables, canonically (derived state: equal on replicas and after a replay)."""
        return (
            _META.pack(self.next_seq, self.applied, self.max_now)
            + self.chain
            + self.hot.image()
            + self.slots.image()
            + struct.pack(f">{len(self.executors.running)}q", *self.executors.running)
        )

    def digest(self) -> str:
        """SHA-256 of the committed store (as ``SchedulerState.digest``) and the in-memory tables."""
        with self.store.reader() as r:
            items = list(r.scan(b"", b"~"))
        return hashlib.sha256(snapshot.digest(items).encode() + self.image()).hexdigest()

    # -- loading -----------------------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild the hot and slot tables from the store (tasks and executors registered first).

        Replays every ``h``, ``ha`` and ``hf`` record: fires create slots (seqs from each record's
        ``seq_base``), assignments and results move them. Replaying by kind instead of in log order
        is exact here because a hot run's entries come fire < assign < result and no row of one
        kind reads another run's state; the real design adds a hot-table checkpoint (``hc/``)
        every K entries so replay covers only records after it."""
        store = self.store
        raw = store.get(HOT_META)
        if raw is None:
            return
        self.next_seq, self.applied, self.max_now = _META.unpack_from(raw)
        self.chain = raw[_META.size :]
        hot, slots, ex = self.hot, self.slots, self.executors
        first = True
        for _, value in _records(store, HOT_FIRES, HOT_ASSIGNS):
            rec = cpb.HotFires.FromString(value)
            if first:
                slots.base, first = rec.seq_base, False
            tasks = list(rec.rows.task)
            nominals = [rec.now_ms - d for d in rec.rows.nominal_delta]
            for t, nom, nd in zip(tasks, nominals, rec.rows.next_delta, strict=True):
                hot.watermark[t] = rec.now_ms
                hot.next_fire[t] = nom + nd
                hot.active[t] += 1
                hot.fired[t] += 1
            n = len(tasks)
            slots.task += tasks
            slots.nominal += nominals
            slots.state += [PENDING] * n
            slots.executor += [-1] * n
            slots.attempt += [1] * n
            slots.assigned += [0] * n
            slots.created += [rec.now_ms] * n
            slots.epoch += [rec.epoch] * n
        for _, value in _records(store, HOT_ASSIGNS, HOT_ASSIGNS + b"\xff"):
            arec = cpb.HotAssigns.FromString(value)
            for s, e in zip(arec.rows.seq, arec.rows.executor, strict=True):
                j = s - slots.base
                slots.state[j], slots.executor[j], slots.assigned[j] = RUNNING, e, arec.now_ms
                ex.running[e] += 1
        for _, value in _records(store, HOT_RESULTS, HOT_RESULTS + b"\xff"):
            rrec = cpb.HotResults.FromString(value)
            for s in rrec.rows.seq:
                j = s - slots.base
                t, e = slots.task[j], slots.executor[j]
                slots.state[j] = SUCCEEDED
                hot.active[t] -= 1
                hot.kept_runs[t] += 1
                ex.running[e] -= 1
                slots.finished += 1
        if slots.finished >= TRIM_EVERY:
            slots.trim()


def _records(store: LmdbStore, lo: bytes, hi: bytes) -> Iterable[tuple[bytes, bytes]]:
    with store.reader() as r:
        return list(r.scan(lo, hi))


# -- building commands (the leader's side, for the bench and the tests) -----------------------------


def command(now_ms: int, epoch: int = 1) -> cpb.ColumnsCommand:
    return cpb.ColumnsCommand(format=17, epoch=epoch, now_ms=now_ms, origin="n1")


def fire_command(now_ms: int, rows: Sequence[tuple[int, int, int, int]]) -> bytes:
    """``rows``: ``(task number, version, nominal_ms, next_fire_ms)``."""
    cmd = command(now_ms)
    fc = cmd.fire_columns
    fc.task.extend(r[0] for r in rows)
    fc.version.extend(r[1] for r in rows)
    fc.nominal_delta.extend(now_ms - r[2] for r in rows)
    fc.next_delta.extend(r[3] - r[2] for r in rows)
    return cmd.SerializeToString(deterministic=True)


def assign_command(now_ms: int, seqs: Sequence[int], attempts: Sequence[int], execs: Sequence[int]) -> bytes:
    cmd = command(now_ms)
    ac = cmd.assign_columns
    ac.seq.extend(seqs)
    ac.shard.extend([0] * len(seqs))
    ac.attempt.extend(attempts)
    ac.executor.extend(execs)
    return cmd.SerializeToString(deterministic=True)


def result_command(
    now_ms: int,
    seqs: Sequence[int],
    execs: Sequence[int],
    duration_ms: int,
    lateness_ms: int,
    attempts: Sequence[int] | None = None,
) -> bytes:
    cmd = command(now_ms)
    rc = cmd.result_columns
    rc.seq.extend(seqs)
    rc.attempt.extend(attempts if attempts is not None else [1] * len(seqs))
    rc.executor.extend(execs)
    rc.duration_ms.extend([duration_ms] * len(seqs))
    rc.lateness_ms.extend([lateness_ms] * len(seqs))
    return cmd.SerializeToString(deterministic=True)
