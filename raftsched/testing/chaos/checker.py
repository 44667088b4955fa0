"""The chaos checker: proves (or refutes) invariants 1-6 of docs/architecture.md §3 from the outside.

It is deliberately independent of the scheduler's internals. It reads only

* the marker file(s) the tasks' commands append to, one line per execution started::

      execution_id task nominal_iso shard attempt start_wall_ns executor

* the cluster's public API: ``Client.get_task`` / ``fire_accounting`` / ``runs`` / ``disable_task``
  and each node's ``NodeStatus`` (apply-chain hashes and full state digests);

* what the harness tells it about the faults it injected (:class:`ExecutorFault`,
  :class:`SkewWindow`) and about the tasks it installed (:class:`TaskExpectation`: which attempts
  fail on purpose).

Two steps. :func:`settle` is the live part: it compares the replicas' apply chains, disables every
task, waits (lease + backoff bounded) until no run is pending or running, waits until every
replica reports the same full state digest, and collects what it needs. :func:`analyse` is a pure
function of what was collected, so it is unit-tested on synthetic histories.

What counts as what (every violation is one readable line in :attr:`ChaosReport.violations`):

* **lost** — a nominal second of the checked window with no accounting entry; a FIRED entry
  whose run does not exist; a shard of a fired run that never executed and whose failure no
  executor fault explains. (A shard that never ran because its executor was SIGKILLed and the
  task's ``max_retries`` was used up is *failed by policy*, counted in
  ``failed_after_executor_fault``: invariant 6 (docs/architecture.md §3) allows "retried,
  failed or replaced by policy".)
* **duplicate** — the same ``(task, nominal, shard, attempt)`` executed twice (never allowed), or
  a (run, shard) executed again by a later attempt although the earlier attempt neither failed on
  purpose nor was touched by an executor fault.
* **early** — an execution that started (executor host's wall clock, ``date +%s%N``) before its
  nominal time. Early starts whose run was fired by a leader with a deliberately skewed clock
  (or in the seconds right after such a leader, while its time stamps still bound "now") are
  *skew findings*, reported apart in :attr:`ChaosReport.skew_findings`: the design promises
  "never early by the leader's clock", and a leader whose clock runs ahead keeps that promise
  while starting work early in real time. Early starts anywhere else are violations.
* **false skip** — a ``skipped_overlap`` (of a task whose overlap policy skips) decided while no
  earlier run of the task was in progress in reality: every unfinished one had either not
  started by the decision although an earlier leader created it (committed and never
  delivered) or, for a task whose command ends at once (:attr:`TaskExpectation.runs_ms`), had
  ended before the deciding leader's first decision (its result lost with the old leader). A
  run that ended later, its result not committed by the decision, is the race any overlap
  decision has (a result on the wire) and counts as in progress; so does a run fired in the
  same batch (misfire=all catching up runs the first fire and skips the rest against it), and
  one whose attempt an executor fault touched. Skips decided by a leader with a skewed clock
  (or right after one) are not judged: leader time and the executors' clocks differ there.
* also violations: accounting entries off the grid, overlapping, with a wrong count, an
  unexpected outcome, a coalesced range without a reason, decided before their nominal time by
  the leader's own clock, or whose deciding epoch goes backwards along nominal time; executions
  of unknown runs or attempts; runs still pending/running after the settle deadline; replicas
  whose chains or digests differ.
"""

from __future__ import annotations

import itertools
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from raftsched.client import Client
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.timing.clock import SystemClock
from raftsched.v1 import raftsched_pb2 as pb

SECOND_MS = 1000
NS_PER_MS = 1_000_000
READ_LIMIT = 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_UNFINISHED = (pb.PENDING, pb.RUNNING)
# How the cluster words an attempt lost with its executor (ExecutorLeave, lease expiry).
_LOST_ON = re.compile(r"\bexecutor (\S+) (?:died|left|silent)")

# -- inputs --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Execution:
    """One line of a marker file: one attempt that started running user code."""

    execution_id: str
    task: str
    nominal_ms: int
    shard: int
    attempt: int
    start_ns: int
    executor: str

    @property
    def run_id(self) -> str:
        return self.execution_id.rsplit("/", 2)[0]

    @property
    def start_ms(self) -> int:
        return self.start_ns // NS_PER_MS

    @property
    def lateness_ms(self) -> int:
        """Start minus nominal time (negative: it started early)."""
        return self.start_ms - self.nominal_ms

    def describe(self) -> str:
        return (
            f"{self.execution_id} on {self.executor} started {_iso(self.start_ms)} "
            f"({self.lateness_ms:+d} ms after nominal)"
        )


@dataclass(frozen=True, slots=True)
class TaskExpectation:
    """A task the harness installed: its shard count and which attempts fail on purpose."""

    name: str
    shards: int
    fails_by_design: Callable[[int, int], bool] = lambda _nominal_ms, _attempt: False
    # How long its command runs at most (ms), when that is known and short: a run in progress
    # has really ended this long after its last shard started. None: not known.
    runs_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ExecutorFault:
    """An executor SIGKILLed at ``kill_ms`` and running again (re-registered) at ``back_ms``."""

    executor: str
    kill_ms: int
    back_ms: int


@dataclass(frozen=True, slots=True)
class SkewWindow:
    """Node ``node`` ran with its clock off by ``offset_ms`` during [start_ms, end_ms] (wall time).

    ``epochs`` are the terms in which the harness saw that node lead.
    """

    node: str
    offset_ms: int
    start_ms: int
    end_ms: int
    epochs: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class ClockStepWindow:
    """Node ``node``'s wall clock stepped by ``offset_ms`` while it led; ``from_ms`` (wall time) is
    the step, or the node's SIGKILL right after it. Executions must be on time again (started
    within ``delayed_ms`` of their nominal time) within ``on_time_ms`` of ``from_ms``."""

    node: str
    offset_ms: int
    from_ms: int
    on_time_ms: int = 5000


@dataclass(frozen=True, slots=True)
class CheckSettings:
    lease_ms: int = 2000
    delayed_ms: int = 1000  # an execution that starts later than this after nominal is "delayed"
    # An attempt started on an executor this long before it was killed may have been touched by
    # the kill (still running, or finished and not yet reported).
    touch_before_ms: int = 4000
    # After a skewed leader, other leaders' "now" is bounded below by its time stamps this long.
    skew_aftermath_ms: int = 4000


@dataclass(frozen=True, slots=True)
class TaskObservation:
    """One task as the cluster reported it after settling."""

    record: pb.TaskRecord
    fires: tuple[pb.FireRecord, ...]
    runs: tuple[pb.Run, ...]

    @property
    def name(self) -> str:
        return str(self.record.spec.name)


# -- the report ----------------------------------------------------------------------------------


@dataclass
class ChaosReport:
    """Counts over the checked window, and every violation found (empty: the invariants held)."""

    tasks: int = 0
    nominal_seconds: int = 0  # task x nominal second accounted
    fired: int = 0
    coalesced: int = 0
    skipped: int = 0
    skipped_overlap: int = 0  # of tasks whose overlap policy skips (each checked: false_skips)
    false_skips: int = 0
    runs_succeeded: int = 0
    runs_failed: int = 0
    executed: int = 0  # marker lines
    duplicates: int = 0
    reexecuted_by_design: int = 0
    reexecuted_after_executor_fault: int = 0
    failed_after_executor_fault: int = 0
    failed_by_policy: int = 0  # shards that executed and then failed their last attempt by policy
    early: int = 0
    early_during_skew: int = 0
    early_after_skew: int = 0
    max_early_ms: int = 0
    lost: int = 0
    delayed: int = 0
    max_delay_ms: int = 0
    delay_p50_ms: int = 0
    delay_p99_ms: int = 0
    violations: list[str] = field(default_factory=list)
    skew_findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def of(self, *categories: str) -> list[str]:
        """The violations of the given categories (``lost``, ``duplicate``, ``early``,
        ``accounting``, ``execution``, ``replicas``, ``stuck``, ``clock-step``,
        ``false skip``): each line starts
        with its own."""
        return [v for v in self.violations if v.split(":", 1)[0] in categories]

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def summary(self) -> str:
        counts = {
            k: v for k, v in self.as_dict().items() if k not in ("violations", "skew_findings", "notes")
        }
        lines = [" ".join(f"{k}={v}" for k, v in counts.items())]
        lines += [f"VIOLATION: {v}" for v in self.violations]
        lines += [f"SKEW FINDING: {v}" for v in self.skew_findings]
        lines += [f"note: {v}" for v in self.notes]
        return "\n".join(lines)


# -- reading the marker files --------------------------------------------------------------------


def parse_nominal(text: str) -> int:
    """``2026-11-30T10:00:00Z`` (or ``.123Z``) → UTC epoch milliseconds."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def parse_marker_line(line: str) -> Execution:
    """One marker line → :class:`Execution`; raises ValueError if it is malformed."""
    parts = line.split()
    if len(parts) != 7:
        raise ValueError(f"expected 7 fields, got {len(parts)}")
    exec_id, task, nominal, shard, attempt, start_ns, executor = parts
    execution = Execution(
        exec_id, task, parse_nominal(nominal), int(shard), int(attempt), int(start_ns), executor
    )
    if exec_id != f"{execution.run_id}/{execution.shard}/{execution.attempt}":
        raise ValueError("execution id does not match shard/attempt")
    if not execution.run_id.startswith(f"{task}@"):
        raise ValueError("execution id does not name the task")
    return execution


def read_markers(paths: Iterable[Path]) -> tuple[list[Execution], list[str]]:
    """Every execution in the marker files, and one problem line per malformed line."""
    executions: list[Execution] = []
    problems: list[str] = []
    for path in paths:
        if not path.exists():
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                executions.append(parse_marker_line(line))
            except ValueError as exc:
                problems.append(f"execution: malformed marker line {path.name}:{n} ({exc}): {line!r}")
    return executions, problems


# -- the live part -------------------------------------------------------------------------------


@dataclass
class Settled:
    """What :func:`settle` collected, plus the problems it saw while settling."""

    observations: list[TaskObservation]
    disabled_at_ms: int
    problems: list[str]
    notes: list[str]


def settle(
    cluster: LocalCluster,
    tasks: Sequence[str],
    *,
    lease_ms: int,
    drain_budget_ms: int,
    nodes: Sequence[str] | None = None,
    timeout_s: float = 60.0,
) -> Settled:
    """Heal-time checks through the public API, then read every task's accounting and runs.

    Expects every node running and unpaused. Steps: apply chains agree at a common index (works
    under load); every task is disabled; within ``lease_ms + drain_budget_ms`` (plus a few seconds
    of slack for a loaded machine) no run may still be pending or running — an attempt RUNNING
    past that has no live lease (invariant 6); all replicas then report the same full state
    digest (invariant 5). Problems are returned, not raised, so the report lists them all.
    """
    ids = list(nodes or [n.id for n in cluster.config.nodes])
    problems: list[str] = []
    notes: list[str] = []
    clock = SystemClock()
    leader = cluster.wait_for_leader(timeout_s, among=ids)
    try:
        index, _ = cluster.chains_agree(ids, timeout=timeout_s)
        notes.append(f"apply chains of {', '.join(ids)} agree at index {index}")
    except AssertionError as exc:
        problems.append(f"replicas: applied different histories: {exc}")
    except TimeoutError as exc:
        problems.append(f"replicas: could not compare apply chains: {exc}")

    with Client(cluster.targets(), timeout=10) as client:
        disabled_at_ms = clock.now_ms()
        for name in tasks:
            client.disable_task(name)

        def unfinished() -> list[pb.Run]:
            return [
                r for name in tasks for r in client.runs(name, limit=READ_LIMIT) if r.state in _UNFINISHED
            ]

        budget_s = (lease_ms + drain_budget_ms) / 1000 + 10.0
        started = time.monotonic()
        try:
            wait_until(lambda: not unfinished(), budget_s, 0.3, "every run to finish after disabling")
            notes.append(
                f"every run finished {time.monotonic() - started:.1f} s after the tasks were disabled"
            )
        except TimeoutError:
            stuck = unfinished()
            problems.append(
                f"stuck: {len(stuck)} run(s) still pending/running {budget_s:.0f} s after disabling "
                f"(lease {lease_ms} ms): " + "; ".join(_describe_run(r) for r in stuck[:10])
            )

    try:
        digest = cluster.wait_converged(timeout_s, nodes=ids)
        formats = sorted({cluster.status(n, timeout=30).state_format for n in ids})
        notes.append(
            f"full state digests of {', '.join(ids)} equal: {digest[:16]} "
            f"(stored state format {', '.join(map(str, formats))})"
        )
    except TimeoutError:
        digests = {n: cluster.status(n, timeout=30, digest=True) for n in ids}
        problems.append(
            "replicas: did not converge to one state digest: "
            + ", ".join(f"{n} index {s.applied_index} {s.state_digest[:16]}" for n, s in digests.items())
        )

    leader = cluster.wait_for_leader(timeout_s, among=ids)
    observations = []
    with Client([cluster.grpc_of(leader)], timeout=30, retries=3) as client:
        for name in tasks:
            record = client.get_task(name)
            fires = client.fire_accounting(name, limit=READ_LIMIT)
            runs = client.runs(name, limit=READ_LIMIT)
            observations.append(TaskObservation(record, tuple(fires), tuple(runs)))
    return Settled(observations, disabled_at_ms, problems, notes)


# -- the pure part -------------------------------------------------------------------------------


def analyse(
    observations: Sequence[TaskObservation],
    executions: Sequence[Execution],
    expectations: Sequence[TaskExpectation],
    *,
    executor_faults: Sequence[ExecutorFault] = (),
    skews: Sequence[SkewWindow] = (),
    clock_steps: Sequence[ClockStepWindow] = (),
    disabled_at_ms: int = 0,
    settings: CheckSettings | None = None,
) -> ChaosReport:
    """Check the collected history; see the module docstring for what counts as what."""
    s = settings or CheckSettings()
    report = ChaosReport(tasks=len(observations))
    expect = {e.name: e for e in expectations}
    by_run: dict[str, list[Execution]] = defaultdict(list)
    for ex in executions:
        by_run[ex.run_id].append(ex)
    report.executed = len(executions)
    known_runs: set[str] = set()
    delays: list[int] = []
    # Each epoch's first decision (leader time): its leader had taken over by then.
    led_from: dict[int, int] = {}
    for o in observations:
        for rec in o.fires:
            led_from[rec.epoch] = min(led_from.get(rec.epoch, rec.decided_ms), rec.decided_ms)

    for obs in observations:
        exp = expect.get(obs.name, TaskExpectation(obs.name, max(1, obs.record.spec.shards)))
        report.violations += _accounting(obs, report, disabled_at_ms)
        report.violations += _overlap_skips(obs, exp, by_run, executor_faults, skews, s, report, led_from)
        runs = {r.run_id: r for r in obs.runs}
        known_runs.update(runs)
        for rec in obs.fires:
            if rec.outcome == pb.FIRED and rec.run_id not in runs:
                report.lost += 1  # (the violation line is written by _accounting)
        for run in obs.runs:
            if run.state == pb.SUCCEEDED:
                report.runs_succeeded += 1
            elif run.state == pb.FAILED:
                report.runs_failed += 1
            _run(run, exp, by_run.get(run.run_id, []), executor_faults, s, report, delays)

    for ex in executions:
        if ex.run_id not in known_runs:
            report.violations.append(
                f"execution: a run the cluster does not know was executed: {ex.describe()}"
            )
    _early(executions, observations, skews, s, report)
    _clock_steps(executions, clock_steps, s, report)
    delays.sort()
    if delays:
        report.max_delay_ms = delays[-1]
        report.delay_p50_ms = _percentile(delays, 0.50)
        report.delay_p99_ms = _percentile(delays, 0.99)
        report.delayed = sum(1 for d in delays if d > s.delayed_ms)
    return report


def _accounting(obs: TaskObservation, report: ChaosReport, disabled_at_ms: int) -> list[str]:
    """Invariant 1 (exactly one entry per nominal second, ranges counted), 2 (one run per fire),
    3 (decided no earlier than nominal by the deciding leader's clock) and epoch fencing."""
    name, problems = obs.name, []
    fires = sorted(obs.fires, key=lambda f: f.nominal_ms)
    if not fires:
        return [f"lost: {name}: no fire accounting at all"]
    seen: Counter[int] = Counter()
    for rec in fires:
        last = max(rec.nominal_ms, rec.through_ms)
        times = range(rec.nominal_ms, last + 1, SECOND_MS)
        what = f"{name}: {_describe_record(rec)}"
        if rec.nominal_ms % SECOND_MS or last % SECOND_MS:
            problems.append(f"accounting: record off the one-second grid: {what}")
        if (rec.count or 1) != len(times):
            problems.append(
                f"accounting: count {rec.count} but the range covers {len(times)} seconds: {what}"
            )
        if rec.decided_ms < last:
            problems.append(f"early: decided before its nominal time by the deciding leader's clock: {what}")
        if rec.outcome == pb.FIRED:
            report.fired += len(times)
        elif rec.outcome == pb.COALESCED:
            report.coalesced += len(times)
            if not rec.reason:
                problems.append(f"accounting: coalesced without a misfire reason: {what}")
        elif (
            rec.outcome == pb.SKIPPED_DISABLED and disabled_at_ms and rec.nominal_ms >= disabled_at_ms - 5000
        ):
            report.skipped += len(times)  # the fire planned when the disable committed
        elif rec.outcome == pb.SKIPPED_OVERLAP and obs.record.spec.overlap == pb.OVERLAP_SKIP:
            report.skipped += len(times)  # checked by _overlap_skips
        else:
            problems.append(
                f"accounting: unexpected outcome for an enabled per-second task with overlap allowed: {what}"
            )
        seen.update(times)
    first, last = min(seen), max(seen)
    report.nominal_seconds += (last - first) // SECOND_MS + 1
    created = obs.record.created_ms
    first_due = (created // SECOND_MS + 1) * SECOND_MS
    if first > first_due + SECOND_MS:
        n = (first - first_due) // SECOND_MS
        report.lost += n
        problems.append(
            f"lost: {name}: {n} nominal second(s) from creation ({_iso(first_due)}) to the first record lost"
        )
    missing = [t for t in range(first, last + 1, SECOND_MS) if t not in seen]
    twice = sorted(t for t, n in seen.items() if n > 1)
    if missing:
        report.lost += len(missing)
        problems.append(
            f"lost: {name}: {len(missing)} nominal second(s) never accounted (lost): {_times(missing)}"
        )
    if twice:
        report.duplicates += len(twice)
        problems.append(
            f"duplicate: {name}: {len(twice)} nominal second(s) accounted more than once: {_times(twice)}"
        )
    # The watermark says "every nominal fire <= watermark is accounted" (after a disable it is the
    # disabling command's time, not a grid second): the records must end at its last grid second.
    wm = obs.record.watermark_ms
    if wm and last != wm - wm % SECOND_MS:
        problems.append(f"accounting: {name}: watermark {_iso(wm)} but the records end at {_iso(last)}")
    if len(fires) == obs.record.kept_fires and obs.record.fires_total != sum(f.count or 1 for f in fires):
        problems.append(
            f"accounting: {name}: fires_total {obs.record.fires_total} disagrees with the records"
        )
    for prev, rec in itertools.pairwise(fires):
        if rec.epoch < prev.epoch:
            problems.append(
                f"accounting: {name}: deciding epoch went back from {prev.epoch} to {rec.epoch} "
                f"along nominal time: "
                f"{_describe_record(prev)} then {_describe_record(rec)}"
            )
    runs = {r.run_id: r for r in obs.runs}
    named = Counter(f.run_id for f in fires if f.outcome == pb.FIRED)
    problems += [
        f"duplicate: {name}: run {rid} named by {n} FIRED records" for rid, n in named.items() if n > 1
    ]
    for rec in fires:
        if rec.outcome != pb.FIRED:
            continue
        run = runs.get(rec.run_id)
        if run is None:
            problems.append(f"lost: {name}: FIRED record's run does not exist: {_describe_record(rec)}")
        elif run.nominal_ms != rec.nominal_ms or run.manual:
            problems.append(
                f"accounting: {name}: run {run.run_id} does not match its record {_describe_record(rec)}"
            )
    for run in obs.runs:
        if not run.manual and run.run_id not in named:
            problems.append(f"accounting: {name}: run {run.run_id} has no FIRED record")
    per_nominal = Counter(r.nominal_ms for r in obs.runs if not r.manual)
    problems += [
        f"duplicate: {name}: {n} runs for nominal {_iso(t)}" for t, n in per_nominal.items() if n > 1
    ]
    return problems


def _overlap_skips(
    obs: TaskObservation,
    exp: TaskExpectation,
    by_run: dict[str, list[Execution]],
    faults: Sequence[ExecutorFault],
    skews: Sequence[SkewWindow],
    s: CheckSettings,
    report: ChaosReport,
    led_from: dict[int, int],
) -> list[str]:
    """Each ``skipped_overlap`` of the task against what really ran (module docstring). A skip
    decided by a leader with a skewed clock, or while its time stamps still bound "now", is not
    judged: its decision time is off by the skew against the executors' clocks."""
    problems = []
    for rec in obs.fires:
        if rec.outcome != pb.SKIPPED_OVERLAP or obs.record.spec.overlap != pb.OVERLAP_SKIP:
            continue
        report.skipped_overlap += 1
        decided = rec.decided_ms
        if any(f.kill_ms - s.touch_before_ms <= decided <= f.back_ms + s.lease_ms for f in faults):
            continue  # an executor fault may hold an earlier run's attempt: not judged
        if any(
            rec.epoch in w.epochs or w.start_ms <= decided <= w.end_ms + s.skew_aftermath_ms for w in skews
        ):
            continue
        since = led_from.get(rec.epoch, decided)
        if not any(_in_progress(run, rec, by_run.get(run.run_id, []), exp, since) for run in obs.runs):
            report.false_skips += 1
            problems.append(
                f"false skip: {obs.name}: {_describe_record(rec)}: no earlier run was in progress "
                "(each had not started, or had ended); " + _skip_context(rec, obs.runs, by_run, since)
            )
    return problems


def _skip_context(
    rec: pb.FireRecord, runs: Sequence[pb.Run], by_run: dict[str, list[Execution]], led_from: int
) -> str:
    """What a false skip was judged against, for the report (the runs before it, newest three:
    their creating epoch and time, state and executions; the deciding epoch's first decision)."""
    earlier = sorted(
        (r for r in runs if not r.manual and r.nominal_ms < rec.nominal_ms), key=lambda r: r.nominal_ms
    )[-3:]
    parts = []
    for r in earlier:
        starts = ", ".join(
            f"{e.shard}#{e.attempt}@{e.executor} {_iso(e.start_ms)}"
            for e in sorted(by_run.get(r.run_id, []), key=lambda e: e.start_ns)
        )
        parts.append(
            f"{_describe_run(r)} epoch {r.epoch} created {_iso(r.created_ms)} "
            f"finished {_iso(r.finished_ms) if r.finished_ms else '-'} executions [{starts or 'none'}]"
        )
    return f"epoch {rec.epoch} first decided {_iso(led_from)}; earlier runs: " + "; ".join(parts or ["none"])


def _in_progress(
    run: pb.Run, rec: pb.FireRecord, executions: list[Execution], exp: TaskExpectation, led_from: int
) -> bool:
    """Whether ``run`` was really in progress when ``rec`` was decided (see _overlap_skips);
    ``led_from``: the deciding epoch's first decision."""
    decided = rec.decided_ms
    if run.manual or run.nominal_ms >= rec.nominal_ms or run.created_ms > decided:
        return False
    # (Its committed finish time says nothing here: commands of one leader may commit out of
    # the order of their time stamps, so a result stamped before the decision can follow it.)
    if run.created_ms == decided and run.epoch == rec.epoch:
        return True  # fired in the same batch
    begun = [e.start_ms for e in executions if e.start_ms <= decided]
    if not begun:
        # The deciding leader's own run, dispatched and not started yet (a loaded executor, a
        # busy second) is unfinished; one it inherited that had not started was committed by
        # the old leader and never delivered: the decision rested on stale state.
        return run.epoch == rec.epoch
    if exp.runs_ms is None or len({e.shard for e in executions}) < len(run.shards):
        return True
    ended = max(e.start_ms for e in executions) + exp.runs_ms
    # Still running, or ended under the deciding leader with its result not committed yet.
    return ended > decided or ended > led_from


def _run(
    run: pb.Run,
    exp: TaskExpectation,
    executions: list[Execution],
    faults: Sequence[ExecutorFault],
    s: CheckSettings,
    report: ChaosReport,
    delays: list[int],
) -> None:
    """Invariants 2 and 6 for one run: every shard executed, each attempt at most once, and a
    re-execution only after a designed failure or an executor fault."""
    if len(run.shards) != exp.shards:
        report.violations.append(
            f"execution: run {run.run_id} has {len(run.shards)} shards, expected {exp.shards}"
        )
    for ex in executions:
        if ex.nominal_ms != run.nominal_ms:
            report.violations.append(f"execution: nominal time differs from its run's: {ex.describe()}")
    by_shard: dict[int, list[Execution]] = defaultdict(list)
    for ex in executions:
        by_shard[ex.shard].append(ex)
    for shard in run.shards:
        done = sorted(by_shard.pop(shard.shard, []), key=lambda e: (e.attempt, e.start_ns))
        where = f"run {run.run_id} shard {shard.shard}"
        state = pb.RunState.Name(shard.state)
        if not done:
            if shard.state == pb.FAILED and (
                (shard.lost and _lost_to_fault(shard, faults, s)) or _interrupted_by_fault(shard, faults, s)
            ):
                report.failed_after_executor_fault += 1
            else:
                report.lost += 1
                report.violations.append(
                    f"lost: {where} never executed: state {state}, attempt {shard.attempt}, "
                    f"lost {shard.lost}, settled {_iso(shard.finished_ms)}, error {shard.error!r}"
                )
            continue
        delays.append(done[0].lateness_ms)
        per_attempt = Counter(e.attempt for e in done)
        for attempt, n in sorted(per_attempt.items()):
            if n > 1:
                report.duplicates += n - 1
                report.violations.append(
                    f"duplicate: {where} attempt {attempt} executed {n} times: "
                    + "; ".join(e.describe() for e in done if e.attempt == attempt)
                )
        if max(per_attempt) > shard.attempt:
            report.violations.append(
                f"execution: {where}: attempt {max(per_attempt)} executed but the cluster's current "
                f"attempt is {shard.attempt}"
            )
        if shard.state == pb.SUCCEEDED and shard.attempt not in per_attempt:
            report.violations.append(
                f"execution: {where} SUCCEEDED as attempt {shard.attempt}, which never executed"
            )
        firsts = [next(e for e in done if e.attempt == a) for a in sorted(per_attempt)]
        for ex, _later in itertools.pairwise(firsts):
            if exp.fails_by_design(run.nominal_ms, ex.attempt):
                report.reexecuted_by_design += 1
            elif _touched(ex, faults, s):
                report.reexecuted_after_executor_fault += 1
            else:
                report.duplicates += 1
                report.violations.append(
                    f"duplicate: {where} ran again although attempt {ex.attempt} neither failed on "
                    f"purpose nor was touched by an executor fault: "
                    + "; ".join(e.describe() for e in done)
                    + f"; final state {state}, lost {shard.lost}, error {shard.error!r}"
                )
        if shard.state == pb.FAILED:
            _failed(shard, where, done, faults, s, report)
    for shard_no, extra in sorted(by_shard.items()):
        report.violations.append(
            f"execution: run {run.run_id}: executions of shard {shard_no}, which the run does not have: "
            + "; ".join(e.describe() for e in extra)
        )


def _failed(
    shard: pb.ShardAttempt,
    where: str,
    done: list[Execution],
    faults: Sequence[ExecutorFault],
    s: CheckSettings,
    report: ChaosReport,
) -> None:
    """A shard that executed and still ended FAILED. By policy when its last attempt failed (on
    purpose, by timeout) or was lost with a killed executor; a *lost* fire when the cluster
    declared its last attempt lost ("executor X silent/died") and no executor fault explains it:
    the executor was alive, only cut off from the leader too long (or never told)."""
    final = next((e for e in done if e.attempt == shard.attempt), None)
    declared_lost = _LOST_ON.search(shard.error) is not None
    if declared_lost and (
        not _touched(final, faults, s) if final is not None else not _lost_to_fault(shard, faults, s)
    ):
        ran = f"ran on {final.executor}" if final is not None else "never ran"
        report.lost += 1
        report.violations.append(
            f"lost: {where} FAILED: its last attempt {shard.attempt} {ran} and was declared lost "
            f"({shard.error!r}) at {_iso(shard.finished_ms)} although no executor fault touched it"
        )
        return
    report.failed_by_policy += 1
    if report.failed_by_policy <= 20:
        report.notes.append(
            f"{where} FAILED by policy: attempt {shard.attempt}, lost {shard.lost}, error {shard.error!r}"
        )


def _touched(ex: Execution, faults: Sequence[ExecutorFault], s: CheckSettings) -> bool:
    """The executor running ``ex`` was SIGKILLed while it could still be running or unreported."""
    return any(
        f.executor == ex.executor and ex.start_ms - 1000 <= f.kill_ms <= ex.start_ms + s.touch_before_ms
        for f in faults
    )


# What an executor reports, once restarted, for an attempt its execution log had begun when it was
# killed: the command may or may not have started (the log is written before it starts, so that
# it never runs twice). The text is the agent's public error (docs/explanation/execution.md).
_INTERRUPTED = "executor restarted while the attempt ran"


def _interrupted_by_fault(shard: pb.ShardAttempt, faults: Sequence[ExecutorFault], s: CheckSettings) -> bool:
    """A shard that never ran failed because its executor was SIGKILLed after taking the attempt
    and reported it interrupted when it came back (a task without retries then fails by policy)."""
    return shard.error == _INTERRUPTED and any(
        f.executor == shard.executor and f.kill_ms <= shard.finished_ms <= f.back_ms + 2 * s.lease_ms
        for f in faults
    )


def _lost_to_fault(shard: pb.ShardAttempt, faults: Sequence[ExecutorFault], s: CheckSettings) -> bool:
    """A shard that never ran was lost because of an executor fault: the loss names the killed
    executor (when it names one) and was committed between the kill and the moment the victim's
    unstarted attempts' leases ran out (``lease_ms`` after the kill, or after it was back)."""
    named = _LOST_ON.search(shard.error)
    return any(
        (named is None or named.group(1) == f.executor)
        and f.kill_ms <= shard.finished_ms <= max(f.back_ms, f.kill_ms + s.lease_ms) + s.lease_ms // 2
        for f in faults
    )


def _early(
    executions: Sequence[Execution],
    observations: Sequence[TaskObservation],
    skews: Sequence[SkewWindow],
    s: CheckSettings,
    report: ChaosReport,
) -> None:
    """Invariant 3 in real time: no execution starts before its nominal time."""
    epoch_of = {r.run_id: r.epoch for obs in observations for r in obs.runs}
    for ex in sorted(executions, key=lambda e: e.start_ns):
        if ex.start_ns >= ex.nominal_ms * NS_PER_MS:
            continue
        early_ms = -ex.lateness_ms
        report.max_early_ms = max(report.max_early_ms, early_ms)
        epoch = epoch_of.get(ex.run_id, 0)
        by_skewed = [w for w in skews if epoch in w.epochs]
        after = [w for w in skews if w.start_ms <= ex.start_ms <= w.end_ms + s.skew_aftermath_ms]
        if by_skewed:
            w = by_skewed[0]
            report.early_during_skew += 1
            report.skew_findings.append(
                f"started {early_ms} ms early in real time; fired in epoch {epoch} by {w.node}, whose clock "
                f"was skewed {w.offset_ms:+d} ms: {ex.describe()}"
            )
        elif after:
            w = after[0]
            report.early_after_skew += 1
            report.skew_findings.append(
                f"started {early_ms} ms early in real time; fired in epoch {epoch}, by a leader other than "
                f"the skewed {w.node} ({w.offset_ms:+d} ms, epochs {sorted(w.epochs)}), during or just "
                f"after the skew window: {ex.describe()}"
            )
        else:
            report.early += 1
            report.violations.append(f"early: started {early_ms} ms before its nominal time: {ex.describe()}")


def _clock_steps(
    executions: Sequence[Execution], steps: Sequence[ClockStepWindow], s: CheckSettings, report: ChaosReport
) -> None:
    """After a leader's clock step, executions are on time again within the window's budget (one
    wrong clock must not stop the cluster: issue 35). Early starts and lost fires around it are
    the general checks' business; nothing is excused for a step."""
    for w in steps:
        on_time = [
            e.nominal_ms
            for e in executions
            if e.nominal_ms > w.from_ms and 0 <= e.lateness_ms <= s.delayed_ms
        ]
        first = min(on_time) if on_time else None
        if first is None or first - w.from_ms > w.on_time_ms:
            found = "none" if first is None else f"the first {first - w.from_ms} ms after"
            report.violations.append(
                f"clock-step: after {w.node}'s clock stepped {w.offset_ms:+d} ms (at {_iso(w.from_ms)}), "
                f"no execution was on time within {w.on_time_ms} ms ({found})"
            )


# -- formatting ----------------------------------------------------------------------------------


def _iso(ms: int) -> str:
    text = datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S.%f")[:-3]
    return f"{text}Z"


def _times(values: Sequence[int], n: int = 8) -> str:
    head = ", ".join(_iso(v) for v in values[:n])
    return head + (f", ... ({len(values) - n} more)" if len(values) > n else "")


def _percentile(ordered: Sequence[int], q: float) -> int:
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _describe_record(rec: pb.FireRecord) -> str:
    span = f"..{_iso(rec.through_ms)} x{rec.count}" if rec.through_ms > rec.nominal_ms else ""
    run = f" {rec.run_id}" if rec.run_id else ""
    reason = f" ({rec.reason})" if rec.reason else ""
    return (
        f"{_iso(rec.nominal_ms)}{span} {pb.FireOutcome.Name(rec.outcome)}{run}{reason} epoch {rec.epoch} "
        f"decided {rec.decided_ms - max(rec.nominal_ms, rec.through_ms):+d} ms"
    )


def _describe_run(run: pb.Run) -> str:
    shards = ", ".join(
        f"{s.shard}:{pb.RunState.Name(s.state)}#{s.attempt}@{s.executor or '-'}" for s in run.shards
    )
    return f"{run.run_id} {pb.RunState.Name(run.state)} [{shards}]"
