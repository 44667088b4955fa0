"""What applying one attempt costs, entry by entry, in one process: no Raft, no gRPC, no executor.

    python -m bench.attempt_apply [--tasks 4000] [--seconds 10] [--executors 2] [--batch 256]
                                  [--commit-every 1] [--keep-count N [--prefill-seconds P]]

N every-second cron tasks and E joined executors in a :class:`SchedulerState` over an LMDB store
(``sync=False``, as a node opens it), and a second state applying the same entries as a follower
does (no leader effects). For each simulated second, the three entries of every attempt:

* **fire**: the driver plans the second's fires into FireBatch entries (as the leader's planning
  thread does) and both states apply them;
* **assign**: AssignAttempts entries of up to 1,000 assignments, one per new run, its executor
  taken round-robin (as the dispatcher's entries are);
* **result**: ReportResults entries of ``--batch`` successful results per executor (as an
  executor's batched report becomes), with the retry time, duration and start lateness set as
  the leader sets them.

The store commits every ``--commit-every`` entries (1: after each entry, the cluster's worst
case, since an applier commits whenever its queue runs dry; 0: once per simulated second). CPU
time (``process_time``) per attempt is reported for each entry kind and for the commits, on the
leader's state and on the follower's, and the two states' digests are compared at the end.

``--tally`` sets an ``ApplyTally`` on each state, as a node with http does (the applier's
counts for ``/metrics``); without it nothing is counted.

``--keep-count N`` keeps N finished runs and N fire records per task (``Retention.keep_count``,
the cluster's ``[scheduler] history_keep_count``; default 1000, which a short window never
reaches) and first runs ``--prefill-seconds`` simulated seconds unmeasured (default N), so the
measured window runs with history at its keep count and pruning active: the steady state of a
cluster that has run for longer than its keep count. History is pruned in batches (a task keeps
N to N + ``PRUNE_BATCH`` records, then drops to N in one pass), so a window shorter than
``PRUNE_BATCH + 1`` (65) seconds may hold no batch at all: measure over 65 seconds (or a multiple)
for the average.
Compare with ``applier`` in ``bench/profile.py``'s thread table (the applier thread in a real
cluster) to see what the cluster adds around the same work.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from bench import columnar_fsm
from bench.common import Provenance
from raftsched import codec
from raftsched.alerts.config import StartDelayConfig
from raftsched.alerts.monitor import StartDelays
from raftsched.fsm import keys, timeline, wire
from raftsched.fsm.effects import AttemptReady, Effect, ReadyColumns
from raftsched.fsm.executors import MAX_EXECUTOR_SLOTS
from raftsched.fsm.records import Retention
from raftsched.fsm.state import SchedulerState
from raftsched.fsm.tally import ApplyTally
from raftsched.leader import writes
from raftsched.leader.driver import LeaderDriver
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.replica import Replica
from raftsched.storage.lmdb_store import LmdbStore
from raftsched.v1 import columns_pb2 as cpb
from raftsched.v1 import log_pb2 as pb

T0 = 1_800_000_000_000  # a whole second
MAX_ASSIGNMENTS = 1000  # per AssignAttempts entry, as the dispatcher batches them
KINDS = ("fire", "assign", "result", "commit")


def _written() -> int:
    """Bytes this process has written through system calls so far (``wchar`` of /proc/self/io;
    0 where there is none): around a commit, the pages LMDB wrote for it."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _prefill(store: LmdbStore, tasks: int, history: int) -> None:
    """``history`` finished runs per task, older than the workload, under today's run keys: the
    B-tree depth and spread of a store whose history is filling up (no task counts them, so no
    pruning runs; see docs/dev/columnar.md). Their pages are read once before the run."""
    if not history:
        return
    value = pb.Run(
        run_id="hot-0000000@1790000000000",
        task="hot-0000000",
        nominal_ms=1_790_000_000_000,
        task_version=1,
        state=pb.SUCCEEDED,
        created_ms=1_790_000_000_005,
        finished_ms=1_790_000_000_065,
        epoch=1,
        shards=[pb.ShardAttempt(attempt=1, state=pb.SUCCEEDED, executor="ex1", finished_ms=1, assigned_ms=1)],
    ).SerializeToString(deterministic=True)
    oldest = T0 - 10_000_000 - history * 1000

    def items() -> Iterator[tuple[bytes, bytes]]:
        for i in range(tasks):
            prefix = keys.RUN + f"hot-{i:07d}".encode() + b"\x00"
            for k in range(history):
                yield prefix + b"%016x" % (oldest + k * 1000), value

    store.replace_all(items(), 0)
    # Read every record once, as a node that has been running does (and as today's state does
    # when it loads: it scans the run range): otherwise the first touch of each page through
    # LMDB's map (a page fault) would be counted in the measured apply.
    with store.reader() as r:
        for _ in r.scan(keys.RUN, keys.RUN + keys.END):
            pass


class _Node:
    """One replica: its state, store and the CPU seconds spent per entry kind."""

    def __init__(
        self,
        path: Path,
        lead: bool,
        commit_every: int,
        retention: Retention,
        prefill: tuple[int, int] = (0, 0),
        tally: bool = False,
    ) -> None:
        self.store = LmdbStore(path, sync=False)
        _prefill(self.store, *prefill)
        self.state = SchedulerState.load(self.store, retention)
        if tally:  # as raftsched.server.node with http: the applier counts for /metrics
            self.state.tally = ApplyTally()
        # As raftsched.server.node: every replica keeps the reported starts for the start-delay alert.
        self.start_delays = StartDelays(StartDelayConfig())
        self.state.on_start = self.start_delays.record
        # As raftsched.server.node: a follower (its own barrier never applied) builds no leader effects.
        self.replica = Replica(self.state, self.store, node_id=None if lead else "follower")
        self.commit_every = commit_every
        self.since_commit = 0
        self.index = 0
        self.cpu = dict.fromkeys(KINDS, 0.0)
        self.written = 0  # bytes the commits wrote (see _written)

    def apply(self, kind: str, data: bytes) -> pb.CommandResult:
        self.index += 1
        t0 = time.process_time()
        raw = self.replica.apply_entry(self.index, data)
        if kind == "result":  # the alert loop drains the starts on every node; count it here
            self.start_delays.drain()
        t1 = time.process_time()
        self.cpu[kind] = self.cpu.get(kind, 0.0) + t1 - t0
        self.since_commit += 1
        if self.commit_every and self.since_commit >= self.commit_every:
            self.commit()
        result = pb.CommandResult()
        result.ParseFromString(raw or b"")
        return result

    def commit(self) -> None:
        w0 = _written()
        t0 = time.process_time()
        self.replica.end_of_tick()
        self.cpu["commit"] += time.process_time() - t0
        self.written += _written() - w0
        self.since_commit = 0


def _command(now_ms: int) -> pb.Command:
    return pb.Command(epoch=1, now_ms=now_ms, origin="n1")


def run(
    tasks: int,
    seconds: int,
    executors: int,
    batch: int,
    commit_every: int,
    base: Path,
    keep: list[SchedulerState] | None = None,
    history: int = 0,
    keep_count: int = 0,
    prefill_seconds: int = 0,
    hot: bool = False,
    tally: bool = False,
) -> dict[str, object]:
    """Today's apply; ``keep`` (if given) receives the leader's state, its store still open.

    ``hot``: the same workload as columns through the real ``SchedulerState`` (issue 31 P1,
    raftsched.fsm.hot): a NumberEntities, then per second FireColumns from a trivial planner
    (``_plan_rows``), AssignColumns round-robin and ResultColumns per executor, at the same
    leader times as today's entries, so the stored runs are byte-identical to today's. The
    leader figure is its apply only (the leader side that consumes ReadyColumns is not here)."""
    if tasks > executors * MAX_EXECUTOR_SLOTS:
        raise SystemExit(f"{tasks} tasks need at least {-(-tasks // MAX_EXECUTOR_SLOTS)} executors")
    retention = Retention(keep_count=keep_count) if keep_count else Retention()
    leader = _Node(base / "leader", True, commit_every, retention, (tasks, history), tally)
    follower = _Node(base / "follower", False, commit_every, retention, (tasks, history), tally)
    nodes = (leader, follower)

    def both(kind: str, data: bytes) -> None:
        for node in nodes:
            result = node.apply(kind, data)
            if not result.ok or result.refused:
                raise RuntimeError(f"a {kind} entry was refused: {result}")

    names = [f"ex{i + 1}" for i in range(executors)]
    for name in names:
        join = writes.executor_join(name, MAX_EXECUTOR_SLOTS, {}, now_ms=T0 - 3000, epoch=1, origin="n1")
        both("setup", join)
    specs = [
        (TaskSpec(f"hot-{i:07d}", CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, handler="noop"), False)
        for i in range(tasks)
    ]
    commands, refused = writes.create_tasks(specs, now_ms=T0 - 2000, epoch=1, origin="n1", key="k")
    if refused:
        raise RuntimeError(f"tasks refused: {refused}")
    for data in commands:
        both("setup", data)
    for node in nodes:
        node.commit()
    ready: list[AttemptReady] = []
    driver = LeaderDriver(leader.state, "n1")

    def sink(effects: tuple[Effect, ...]) -> None:
        driver.on_effects(effects)
        ready.extend(e for e in effects if isinstance(e, AttemptReady))

    leader.replica.effect_sink = sink
    both("setup", driver.become_leader(1, T0 - 1000).data)
    if not driver.ready:
        raise RuntimeError("the driver's barrier did not apply")
    hot_ready: list[ReadyColumns] = []
    if hot:
        numbering = _command(T0 - 900)
        numbering.number_entities.SetInParent()
        both("setup", codec.encode_command(numbering))
        leader.replica.effect_sink = lambda effects: hot_ready.extend(
            e for e in effects if isinstance(e, ReadyColumns)
        )
        with leader.state.view() as v:
            next_fire = [v.tasks[spec.name].next_fire_ms for spec, _ in specs]
            if not all(v.tasks[spec.name].hot for spec, _ in specs):
                raise RuntimeError("the bench's tasks are not hot")
    for node in nodes:
        node.cpu = dict.fromkeys(KINDS, 0.0)  # setup is not measured
        node.written = 0
    attempts = 0
    plan_s = 0.0
    for s in range(prefill_seconds + seconds):
        if s == prefill_seconds:  # the prefill (history filled to its keep count) is not measured
            for node in nodes:
                node.commit()
                node.cpu = dict.fromkeys(KINDS, 0.0)
            attempts = 0
            plan_s = 0.0
        now = T0 + s * 1000 + 5
        if hot:
            c0 = time.process_time()
            entries = _plan_rows(next_fire, now)
            plan_s += time.process_time() - c0
            attempts += _hot_second(both, entries, hot_ready, now, executors, batch)
            if not commit_every:
                for node in nodes:
                    node.commit()
            continue
        c0 = time.process_time()
        proposals = driver.poll(now)
        plan_s += time.process_time() - c0
        for p in proposals:
            both("fire", p.data)
            driver.on_proposal_committed(p)
        placed = [(r, names[i % len(names)]) for i, r in enumerate(ready)]
        ready.clear()
        for start in range(0, len(placed), MAX_ASSIGNMENTS):
            cmd = _command(now + 20)
            for r, executor in placed[start : start + MAX_ASSIGNMENTS]:
                cmd.assign_attempts.assignments.add(
                    run_id=r.run_id, shard=r.shard, attempt=r.attempt, executor=executor
                )
            both("assign", codec.encode_command(cmd))
        by_executor: dict[str, list[AttemptReady]] = {}
        for r, executor in placed:
            by_executor.setdefault(executor, []).append(r)
        for executor, done in by_executor.items():
            for start in range(0, len(done), batch):
                cmd = _command(now + 60)
                for r in done[start : start + batch]:
                    cmd.report_results.results.add(
                        run_id=r.run_id,
                        shard=r.shard,
                        attempt=r.attempt,
                        executor=executor,
                        success=True,
                        retry_at_ms=now + 60 + 1000,
                        duration_ms=1,
                        start_lateness_ms=40,
                    )
                both("result", codec.encode_command(cmd))
        attempts += len(placed)
        if not commit_every:
            for node in nodes:
                node.commit()
    for node in nodes:
        node.commit()
    if leader.state.digest() != follower.state.digest():
        raise RuntimeError("the follower's state differs from the leader's")
    if leader.state.active:
        raise RuntimeError(f"{len(leader.state.active)} runs did not finish")
    if keep is not None:
        keep.append(leader.state)
    per = max(attempts, 1)

    def figures(node: _Node) -> dict[str, float]:
        out = {f"{k}_us": round(v / per * 1e6, 2) for k, v in node.cpu.items()}
        out["total_us"] = round(sum(node.cpu.values()) / per * 1e6, 2)
        out["commit_kib_written"] = round(node.written / 1024 / per, 2)
        return out

    return {
        "tasks": tasks,
        "seconds": seconds,
        "executors": executors,
        "result_batch": batch,
        "commit_every": commit_every,
        "history": history,
        "keep_count": retention.keep_count,
        "prefill_seconds": prefill_seconds,
        "attempts": attempts,
        "plan_us_per_attempt": round(plan_s / per * 1e6, 2),
        "leader_us_per_attempt": figures(leader),
        "follower_us_per_attempt": figures(follower),
    }


def _hot_second(
    both: Callable[[str, bytes], None],
    entries: list[list[tuple[int, int, int, int]]],
    ready: list[ReadyColumns],
    now: int,
    executors: int,
    batch: int,
) -> int:
    """One simulated second of ``run(hot=True)``: the fire, assignment and result entries as
    columns (task numbers are 1 + the planner's index; executor numbers 1..executors)."""
    for rows in entries:
        cmd = _command(now)
        fc = cmd.fire_columns
        fc.task.extend(r[0] + 1 for r in rows)
        fc.version.extend(r[1] for r in rows)
        fc.nominal_delta.extend(now - r[2] for r in rows)
        fc.next_delta.extend(r[3] - r[2] for r in rows)
        both("fire", codec.encode_command(cmd))
    seqs = [e.seq_base + i for e in ready for i in range(len(e.tasks))]
    ready.clear()
    execs = [i % executors + 1 for i in range(len(seqs))]
    for start in range(0, len(seqs), MAX_ASSIGNMENTS):
        cmd = _command(now + 20)
        ac = cmd.assign_columns
        part = seqs[start : start + MAX_ASSIGNMENTS]
        ac.seq.extend(part)
        ac.shard.extend([0] * len(part))
        ac.attempt.extend([1] * len(part))
        ac.executor.extend(execs[start : start + MAX_ASSIGNMENTS])
        both("assign", codec.encode_command(cmd))
    for e in range(1, executors + 1):
        done = [seq for seq, ex in zip(seqs, execs, strict=True) if ex == e]
        for start in range(0, len(done), batch):
            cmd = _command(now + 60)
            rc = cmd.result_columns
            part = done[start : start + batch]
            rc.seq.extend(part)
            rc.attempt.extend([1] * len(part))
            rc.executor.extend([e] * len(part))
            rc.duration_ms.extend([1] * len(part))
            rc.lateness_ms.extend([40] * len(part))
            both("result", codec.encode_command(cmd))
    return len(seqs)


def _run_records(state: SchedulerState) -> str:
    """sha256 of every stored run record (key and value): equal when two states stored the same runs."""
    h = hashlib.sha256()
    with state.store.reader() as r:
        for key, value in r.scan(keys.RUN, keys.RUN + keys.END):
            h.update(len(key).to_bytes(4, "big") + key + len(value).to_bytes(4, "big") + value)
    return h.hexdigest()


def _hot_main(args: argparse.Namespace, base: Path, prefill: int) -> dict[str, object]:
    """``--hot``: today's apply and the hot path through SchedulerState, in one process, on the
    same workload; the stored run records must be byte-identical (checked)."""
    kept: list[SchedulerState] = []
    common = {
        "history": args.history,
        "keep_count": args.keep_count,
        "prefill_seconds": prefill,
        "tally": args.tally,
    }
    result: dict[str, object] = {}
    if not args.no_baseline:
        result["today"] = run(
            args.tasks, args.seconds, args.executors, args.batch, args.commit_every, base / "today",
            keep=kept, **common,
        )  # fmt: skip
    result["hot"] = run(
        args.tasks, args.seconds, args.executors, args.batch, args.commit_every, base / "hot",
        keep=kept, hot=True, **common,
    )  # fmt: skip
    if len(kept) == 2:
        same = _run_records(kept[0]) == _run_records(kept[1])
        if not same:
            raise RuntimeError("the hot path stored other run records than today's apply")
        result["run_records_identical"] = same
    return result


# -- --columnar: the prototype of issue 31 (bench/columnar_fsm.py), the same workload -------------


class _ColumnarNode:
    """One replica of the prototype: its state, store and the CPU seconds spent per entry kind."""

    def __init__(self, path: Path, lead: bool, commit_every: int, stage: str) -> None:
        self.store = LmdbStore(path, sync=False)
        self.start_delays = StartDelays(StartDelayConfig())
        self.state = columnar_fsm.ColumnarState(self.store, stage, starts=self._starts)
        self.lead = lead
        self.commit_every = commit_every
        self.since_commit = 0
        self.cpu = dict.fromkeys(KINDS, 0.0)
        self.written = 0  # bytes the commits wrote (see _written)

    def _starts(self, now: int, tasks: Sequence[int], lateness: Sequence[int]) -> None:
        # As today's settle: every reported start goes to the node-local start-delay samples.
        record, namespace = self.start_delays.record, self.state.hot.namespace
        for t, late in zip(tasks, lateness, strict=True):
            record(now, namespace[t], late if late > 0 else 0)

    def register(self, names: Sequence[str], executors: Sequence[str], first_fire_ms: int) -> None:
        """Setup (not measured): the tasks and executors, as CreateTasks and ExecutorJoin would."""
        for name in names:
            self.state.hot.add(name, 1, namespace="default", next_fire_ms=first_fire_ms)
        for executor in executors:
            self.state.executors.add(executor, MAX_EXECUTOR_SLOTS)

    def apply(self, kind: str, data: bytes) -> columnar_fsm.Result:
        t0 = time.process_time()
        result = self.state.apply(data, leader_effects=self.lead)
        if kind == "result":  # the alert loop drains the starts on every node; count it here
            self.start_delays.drain()
        self.cpu[kind] += time.process_time() - t0
        if not result.ok or result.refused:
            raise RuntimeError(f"a {kind} entry was refused: {result}")
        self.since_commit += 1
        if self.commit_every and self.since_commit >= self.commit_every:
            self.commit()
        return result

    def commit(self) -> None:
        w0 = _written()
        t0 = time.process_time()
        self.store.commit(self.state.applied)
        self.cpu["commit"] += time.process_time() - t0
        self.written += _written() - w0
        self.since_commit = 0


def _plan_rows(next_fire: list[int], now: int) -> list[list[tuple[int, int, int, int]]]:
    """The leader's planning, trivially: every due fire of every task, as ``(task, version,
    nominal, next)`` rows in entries of at most MAX_ASSIGNMENTS rows (a task's rows kept in one
    entry: a catch-up of two fires is two rows of one entry, as today it is two fires of one
    TaskFires). Every task is an every-second cron task."""
    entries: list[list[tuple[int, int, int, int]]] = [[]]
    for t, nf in enumerate(next_fire):
        rows = []
        while nf <= now:
            rows.append((t, 1, nf, nf + 1000))
            nf += 1000
        next_fire[t] = nf
        if len(entries[-1]) + len(rows) > MAX_ASSIGNMENTS:
            entries.append([])
        entries[-1].extend(rows)
    return [e for e in entries if e]


def run_columnar(
    tasks: int,
    seconds: int,
    executors: int,
    batch: int,
    commit_every: int,
    base: Path,
    stage: str = "B",
    keep: list[columnar_fsm.ColumnarState] | None = None,
    history: int = 0,
) -> dict[str, object]:
    """The workload of :func:`run` through the prototype: N every-second tasks, E executors, for
    each simulated second the fire entries, the assignment entries (round-robin, up to 1,000 per
    entry) and the result entries (``batch`` per executor), on a leader's state (building its
    columns effects) and a follower's. ``keep`` receives the leader's state, its store open."""
    if tasks > executors * MAX_EXECUTOR_SLOTS:
        raise SystemExit(f"{tasks} tasks need at least {-(-tasks // MAX_EXECUTOR_SLOTS)} executors")
    leader = _ColumnarNode(base / "leader", True, commit_every, stage)
    follower = _ColumnarNode(base / "follower", False, commit_every, stage)
    for node in (leader, follower):
        _prefill(node.store, tasks, history)
    nodes = (leader, follower)
    names = [f"hot-{i:07d}" for i in range(tasks)]
    executor_names = [f"ex{i + 1}" for i in range(executors)]
    for node in nodes:
        # As in run(): created at T0 - 2000, the first fire one second before the first poll.
        node.register(names, executor_names, T0 - 1000)
    planned = [T0 - 1000] * tasks
    attempts = 0
    plan_s = 0.0
    for s in range(seconds):
        now = T0 + s * 1000 + 5
        c0 = time.process_time()
        fire_entries = [columnar_fsm.fire_command(now, rows) for rows in _plan_rows(planned, now)]
        plan_s += time.process_time() - c0
        ready: list[int] = []
        for data in fire_entries:
            for node in nodes:
                node.apply("fire", data)
            for effect in leader.state.effects:
                if isinstance(effect, columnar_fsm.ReadyColumns):
                    ready.extend(range(effect.seq_base, effect.seq_base + len(effect.tasks)))
        placed = [i % executors for i in range(len(ready))]
        for start in range(0, len(ready), MAX_ASSIGNMENTS):
            seqs = ready[start : start + MAX_ASSIGNMENTS]
            data = columnar_fsm.assign_command(
                now + 20, seqs, [1] * len(seqs), placed[start : start + MAX_ASSIGNMENTS]
            )
            for node in nodes:
                node.apply("assign", data)
        by_executor: dict[int, list[int]] = {}
        for seq, executor in zip(ready, placed, strict=True):
            by_executor.setdefault(executor, []).append(seq)
        for executor, done in by_executor.items():
            for start in range(0, len(done), batch):
                seqs = done[start : start + batch]
                data = columnar_fsm.result_command(now + 60, seqs, [executor] * len(seqs), 1, 40)
                for node in nodes:
                    node.apply("result", data)
        attempts += len(ready)
        if not commit_every:
            for node in nodes:
                node.commit()
    for node in nodes:
        node.commit()
    digest = leader.state.digest()
    if digest != follower.state.digest():
        raise RuntimeError("the follower's state differs from the leader's")
    if any(leader.state.hot.active):
        raise RuntimeError(f"{sum(leader.state.hot.active)} runs did not finish")
    # The tables are derived: a replica rebuilt from its store alone has the same ones.
    replayed = columnar_fsm.ColumnarState(follower.store, stage)
    for name in names:
        replayed.hot.add(name, 1, namespace="default", next_fire_ms=T0 - 1000)
    for executor_name in executor_names:
        replayed.executors.add(executor_name, MAX_EXECUTOR_SLOTS)
    replayed.load()
    if replayed.image() != follower.state.image():
        raise RuntimeError("the tables rebuilt from the store differ from the live ones")
    if keep is not None:
        keep.append(leader.state)
    per = max(attempts, 1)

    def figures(node: _ColumnarNode) -> dict[str, float]:
        out = {f"{k}_us": round(v / per * 1e6, 2) for k, v in node.cpu.items()}
        out["total_us"] = round(sum(node.cpu.values()) / per * 1e6, 2)
        out["commit_kib_written"] = round(node.written / 1024 / per, 2)
        return out

    with follower.store.reader() as r:
        stored = sum(1 for _ in r.scan(b"", b"~"))
    return {
        "stage": stage,
        "history": history,
        "attempts": attempts,
        "plan_us_per_attempt": round(plan_s / per * 1e6, 2),
        "leader_us_per_attempt": figures(leader),
        "follower_us_per_attempt": figures(follower),
        "stored_records": stored,
        "digest": digest,
        "replay_equal": True,
    }


def decode_costs(rows: int = 1000, repeat: int = 200) -> dict[str, float]:
    """CPU µs per row to decode an entry of ``rows`` rows and turn its columns into lists (what
    apply does first): through the prototype's envelope (``ColumnsCommand``, Command's header
    field numbers), and through a real ``pb.Command`` carrying the body as a field it does not
    know yet (bytes appended to an encoded Command, as ``codec.with_fingerprint`` appends a
    field), then the body parsed on its own."""
    now = T0 + 5
    entries = {
        "fire": columnar_fsm.fire_command(now, [(t, 1, T0, T0 + 1000) for t in range(rows)]),
        "assign": columnar_fsm.assign_command(
            now, range(1, rows + 1), [1] * rows, [t % 2 for t in range(rows)]
        ),
        "result": columnar_fsm.result_command(now, range(1, rows + 1), [t % 2 for t in range(rows)], 1, 40),
    }
    out: dict[str, float] = {}
    for kind, data in entries.items():
        t0 = time.process_time()
        for _ in range(repeat):
            cmd = cpb.ColumnsCommand()
            cmd.ParseFromString(data)
            body = getattr(cmd, cmd.WhichOneof("body") or "")
            for field in body.DESCRIPTOR.fields:
                list(getattr(body, field.name))
        out[kind] = round((time.process_time() - t0) / repeat / rows * 1e6, 3)
    fire = cpb.ColumnsCommand.FromString(entries["fire"]).fire_columns.SerializeToString()
    header = codec.encode_command(pb.Command(epoch=1, now_ms=now, origin="n1", barrier=pb.Barrier()))
    wrapped = header + b"\xa2\x38" + wire.varint(len(fire)) + fire  # field 900, unknown to Command
    t0 = time.process_time()
    for _ in range(repeat):
        real = codec.decode_command(wrapped)
        real.WhichOneof("body")
        fc = cpb.FireColumns.FromString(wrapped[len(header) + 2 + len(wire.varint(len(fire))) :])
        list(fc.task), list(fc.version), list(fc.nominal_delta), list(fc.next_delta)
    out["fire_via_real_command"] = round((time.process_time() - t0) / repeat / rows * 1e6, 3)
    return out


def check_equivalence(tasks: int, seconds: int, executors: int, batch: int, base: Path) -> list[str]:
    """Run the workload through today's SchedulerState and through the prototype (stage B) and
    list every difference: per task the fires and runs counted, the watermark, the next fire,
    the unfinished and kept runs; per finished run its stored record (today's without its
    timeline, the prototype's without its extra fields) and the start and duration today's
    timeline holds. Empty: the prototype did the same work."""
    today: list[SchedulerState] = []
    columnar: list[columnar_fsm.ColumnarState] = []
    run(tasks, seconds, executors, batch, 1, base / "today", keep=today)
    run_columnar(tasks, seconds, executors, batch, 1, base / "columnar", "B", keep=columnar)
    ref, proto = today[0], columnar[0]
    problems: list[str] = []
    hot = proto.hot
    for t, name in enumerate(hot.names):
        st = ref.tasks[name]
        mine = {
            "fires_total": hot.fired[t],
            "runs_total": hot.fired[t],
            "watermark_ms": hot.watermark[t],
            "next_fire_ms": hot.next_fire[t],
            "active_runs": hot.active[t],
            "kept_runs": hot.kept_runs[t],
        }
        for field, value in mine.items():
            if getattr(st, field) != value:
                problems.append(f"{name}: {field} {value}, today {getattr(st, field)}")
    with ref.store.reader() as r:
        ref_runs = dict(r.scan(keys.RUN, keys.RUN + keys.END))
    with proto.store.reader() as r:
        proto_runs = dict(r.scan(keys.RUN, keys.RUN + keys.END))
    if sorted(ref_runs) != sorted(proto_runs):
        problems.append(f"finished runs: {len(proto_runs)} stored, today {len(ref_runs)}")
    for key in sorted(set(ref_runs) & set(proto_runs)):
        # Today's run as a read shows it (its derived timeline entries filled in, stored state
        # format 3), against the prototype's record.
        want, got = timeline.expand(pb.Run.FromString(ref_runs[key])), pb.Run.FromString(proto_runs[key])
        extra = cpb.HotRunExtra.FromString(proto_runs[key]).shards
        started = [e for e in want.timeline if e.event == "started"]
        succeeded = [e for e in want.timeline if e.event == "succeeded"]
        if len(extra) != 1 or len(started) != 1 or len(succeeded) != 1:
            problems.append(f"{key!r}: not one attempt started and succeeded")
            continue
        if started[0].at_ms - want.nominal_ms != extra[0].start_lateness_ms:
            problems.append(
                f"{key!r}: start lateness {extra[0].start_lateness_ms}, today's timeline {started[0]}"
            )
        if succeeded[0].duration_ms != extra[0].duration_ms:
            problems.append(f"{key!r}: duration {extra[0].duration_ms}, today's timeline {succeeded[0]}")
        want.ClearField("timeline")
        got.DiscardUnknownFields()
        if want != got:
            problems.append(f"{key!r}: {got} != today's {want}")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=4000)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--executors", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256, help="results per ReportResults entry")
    ap.add_argument("--commit-every", type=int, default=1, help="entries per commit (0: once per second)")
    ap.add_argument(
        "--keep-count",
        type=int,
        default=0,
        help="finished runs and fire records kept per task (Retention.keep_count; 0: the default, 1000)",
    )
    ap.add_argument(
        "--prefill-seconds",
        type=int,
        default=-1,
        help="unmeasured simulated seconds first, to fill the history (default: --keep-count)",
    )
    ap.add_argument("--json", type=Path, help="also write the result here")
    ap.add_argument(
        "--history",
        type=int,
        default=0,
        help="finished runs per task written into every store before the run (a deeper B-tree)",
    )
    ap.add_argument(
        "--columnar",
        action="store_true",
        help="also run the workload through the columnar prototype (bench/columnar_fsm.py), stages B and C",
    )
    ap.add_argument(
        "--stages",
        default="B,C",
        help="with --columnar: the prototype's stages to run (B: end-of-run record)",
    )
    ap.add_argument(
        "--hot",
        action="store_true",
        help="also run the workload as columns through SchedulerState (issue 31 P1, raftsched.fsm.hot)",
    )
    ap.add_argument("--no-baseline", action="store_true", help="with --columnar or --hot: skip today's apply")
    ap.add_argument(
        "--tally",
        action="store_true",
        help="count what is applied in an ApplyTally on each state, as a node with http does for /metrics",
    )
    ap.add_argument(
        "--check-tasks",
        type=int,
        default=50,
        help="with --columnar: tasks of the equivalence check against today's state machine (0: none)",
    )
    args = ap.parse_args()
    if args.keep_count < 0:
        ap.error(f"--keep-count {args.keep_count}: must be at least 1 (0: the default)")
    prefill = args.prefill_seconds if args.prefill_seconds >= 0 else args.keep_count
    provenance = Provenance.start()
    with tempfile.TemporaryDirectory(prefix="raftsched-attempt-apply-") as tmp:
        base = Path(tmp)
        if args.hot:
            result = _hot_main(args, base, prefill)
        elif not args.columnar:
            result = run(
                args.tasks,
                args.seconds,
                args.executors,
                args.batch,
                args.commit_every,
                base,
                history=args.history,
                keep_count=args.keep_count,
                prefill_seconds=prefill,
                tally=args.tally,
            )
        else:
            if args.keep_count:
                ap.error("--keep-count is not supported with --columnar (the prototype has no retention)")
            result = _columnar_main(args, base)
    provenance.emit(result, args.json)
    return 0


def _columnar_main(args: argparse.Namespace, base: Path) -> dict[str, object]:
    result: dict[str, object] = {
        "tasks": args.tasks,
        "seconds": args.seconds,
        "executors": args.executors,
        "result_batch": args.batch,
        "commit_every": args.commit_every,
        "history": args.history,
    }
    if args.check_tasks:
        problems = check_equivalence(
            min(args.check_tasks, args.tasks), args.seconds, args.executors, args.batch, base / "check"
        )
        if problems:
            raise RuntimeError(
                "the prototype differs from today's state machine:\n" + "\n".join(problems[:20])
            )
        result["equivalence_check"] = f"ok ({min(args.check_tasks, args.tasks)} tasks, {args.seconds} s)"
    result["decode_us_per_row"] = decode_costs()
    if not args.no_baseline:
        result["today"] = run(
            args.tasks,
            args.seconds,
            args.executors,
            args.batch,
            args.commit_every,
            base / "today",
            history=args.history,
        )
    for stage in args.stages.split(","):
        result[f"columnar_{stage}"] = run_columnar(
            args.tasks,
            args.seconds,
            args.executors,
            args.batch,
            args.commit_every,
            base / stage,
            stage,
            history=args.history,
        )
    return result


if __name__ == "__main__":
    raise SystemExit(main())
