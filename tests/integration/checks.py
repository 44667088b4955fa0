"""Invariant checks over fire accounting, shared by the integration tests and the chaos suite.

Every check is a pure function over what a node reported (task record, fire records, runs) and
returns a list of problems, one readable line each; an empty list means the invariant holds.
:func:`require` turns problems into one AssertionError that lists them all, so a failing run
shows every violation at once rather than the first.

Reading a node: :func:`read_node` asks one node directly (reads are local, so this is that
replica's view, not the leader's). The invariants checked here are those of docs/architecture.md §3:

* 1, no fire lost: every nominal time of the grid from the first fire on is covered by a record;
* 2, no duplicate run: no nominal time is covered twice, run ids are unique, each FIRED record's
  run exists and belongs to that fire;
* 3, never early: ``decided_ms >= nominal_ms`` (and ``>= through_ms`` for a range);
* fencing: along nominal time, the epoch of the deciding leader and its ``decided_ms`` never go
  backwards (a deposed leader committed nothing after its successor started accounting).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from raftsched.client import Client
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb

SECOND_MS = 1000
# Outcomes that account a nominal fire of an enabled task whose runs may overlap.
FIRED_OR_COALESCED: frozenset[int] = frozenset({pb.FIRED, pb.COALESCED})
# Large enough for every record a test creates (retention keeps 1,000 per task by default).
READ_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class NodeView:
    """One replica's view of one task: its record, fire accounting and runs, read consistently."""

    node_id: str
    task: pb.TaskRecord
    fires: tuple[pb.FireRecord, ...]
    runs: tuple[pb.Run, ...]

    def summary(self) -> str:
        return f"{self.node_id}: {describe(self.fires)}"


def node_client(cluster: LocalCluster, node_id: str, timeout: float = 5.0) -> Client:
    """A client that talks to ``node_id`` only (reads are answered locally, never redirected)."""
    return Client([cluster.grpc_of(node_id)], timeout=timeout, retries=2, stale_reads=True)


def read_node(cluster: LocalCluster, node_id: str, task: str, timeout: float = 10.0) -> NodeView:
    """Read ``task``'s record, fire records and runs from ``node_id`` alone.

    The task record comes from the node's in-memory state and the records from its committed
    store, which can trail it by one Raft tick; the read is repeated until the records include
    everything the task record counts (``kept_fires``), so the two agree.
    """
    with node_client(cluster, node_id) as client:

        def agreed() -> NodeView | None:
            record = client.get_task(task)
            fires = client.fire_accounting(task, limit=READ_LIMIT)
            if len(fires) < record.kept_fires:
                return None
            runs = client.runs(task, limit=READ_LIMIT)
            return NodeView(node_id, record, tuple(fires), tuple(runs))

        return wait_until(
            agreed, timeout, 0.05, f"{node_id}'s store to return every fire record {task} counts"
        )


# -- describing records ---------------------------------------------------------------------------


def outcome_name(outcome: int) -> str:
    return pb.FireOutcome.Name(outcome) if outcome in pb.FireOutcome.values() else str(outcome)


def describe_record(rec: pb.FireRecord) -> str:
    span = f"..{rec.through_ms} x{rec.count}" if rec.through_ms > rec.nominal_ms else ""
    run = f" {rec.run_id}" if rec.run_id else ""
    return (
        f"{rec.nominal_ms}{span} {outcome_name(rec.outcome)}{run} "
        f"epoch {rec.epoch} decided {rec.decided_ms} ({rec.decided_ms - rec.nominal_ms:+d} ms)"
    )


def describe(fires: Iterable[pb.FireRecord]) -> str:
    return "\n  ".join(["fire records:", *(describe_record(f) for f in fires)])


def covered(rec: pb.FireRecord, step_ms: int = SECOND_MS) -> list[int]:
    """The nominal times one record accounts for, on a grid of ``step_ms``."""
    end = max(rec.nominal_ms, rec.through_ms)
    return list(range(rec.nominal_ms, end + 1, step_ms))


# -- the checks -----------------------------------------------------------------------------------


def coverage_problems(
    fires: Sequence[pb.FireRecord],
    *,
    through_ms: int,
    first_ms: int | None = None,
    step_ms: int = SECOND_MS,
    outcomes: Collection[int] = FIRED_OR_COALESCED,
) -> list[str]:
    """Every grid time in ``[first_ms, through_ms]`` covered by exactly one record, with an allowed
    outcome; no record off the grid or with a count that disagrees with its range.

    ``first_ms`` defaults to the first record's nominal time. Records past ``through_ms`` are
    checked for duplicates and gaps too (the range extends to the last time they cover).
    """
    problems: list[str] = []
    if not fires:
        return [f"no fire records at all (expected coverage through {through_ms})"]
    seen: Counter[int] = Counter()
    for rec in fires:
        times = covered(rec, step_ms)
        if rec.nominal_ms % step_ms or (rec.through_ms and rec.through_ms % step_ms):
            problems.append(f"record off the {step_ms} ms grid: {describe_record(rec)}")
        if rec.through_ms and rec.through_ms <= rec.nominal_ms:
            problems.append(f"range record ends before it starts: {describe_record(rec)}")
        if (rec.count or 1) != len(times):
            problems.append(f"count {rec.count} but the range covers {len(times)}: {describe_record(rec)}")
        if rec.outcome not in outcomes:
            problems.append(f"unexpected outcome: {describe_record(rec)}")
        seen.update(times)
    start = min(seen) if first_ms is None else first_ms
    end = max(through_ms - through_ms % step_ms, max(seen))
    missing = [t for t in range(start, end + 1, step_ms) if t not in seen]
    twice = sorted(t for t, n in seen.items() if n > 1)
    before = sorted(t for t in seen if t < start)
    if missing:
        problems.append(f"{len(missing)} nominal time(s) not accounted: {_short(missing)}")
    if twice:
        problems.append(f"{len(twice)} nominal time(s) accounted more than once: {_short(twice)}")
    if before:
        problems.append(f"records before the first expected fire {start}: {_short(before)}")
    return problems


def run_problems(fires: Sequence[pb.FireRecord], runs: Sequence[pb.Run]) -> list[str]:
    """FIRED records name distinct runs that exist and belong to them; no two scheduled runs share
    a nominal time; only FIRED records name a run."""
    problems: list[str] = []
    by_id = {run.run_id: run for run in runs}
    ids = Counter(run.run_id for run in runs)
    problems += [f"run id {rid} listed {n} times" for rid, n in ids.items() if n > 1]
    scheduled = Counter(run.nominal_ms for run in runs if not run.manual)
    problems += [f"{n} scheduled runs for nominal time {t}" for t, n in sorted(scheduled.items()) if n > 1]
    fired_ids = Counter(f.run_id for f in fires if f.outcome == pb.FIRED)
    problems += [f"run id {rid} named by {n} FIRED records" for rid, n in fired_ids.items() if n > 1]
    for rec in fires:
        if rec.outcome != pb.FIRED:
            if rec.run_id:
                problems.append(f"a non-FIRED record names a run: {describe_record(rec)}")
            continue
        run = by_id.get(rec.run_id)
        if not rec.run_id:
            problems.append(f"FIRED record without a run id: {describe_record(rec)}")
        elif run is None:
            problems.append(f"FIRED record's run does not exist: {describe_record(rec)}")
        elif run.nominal_ms != rec.nominal_ms or run.epoch != rec.epoch or run.manual:
            problems.append(
                f"run {run.run_id} (nominal {run.nominal_ms}, epoch {run.epoch}, manual {run.manual}) "
                f"does not match its record: {describe_record(rec)}"
            )
    return problems


def early_problems(fires: Sequence[pb.FireRecord]) -> list[str]:
    """No fire decided before its nominal time (for a range, before its last nominal time)."""
    return [
        f"decided early: {describe_record(rec)}"
        for rec in fires
        if rec.decided_ms < max(rec.nominal_ms, rec.through_ms)
    ]


def fencing_problems(fires: Sequence[pb.FireRecord]) -> list[str]:
    """Along nominal time, the deciding leader's epoch and its ``decided_ms`` never go backwards.

    Fires of one task are decided in nominal order, one batch at a time; a record with an older
    epoch after a newer one (or decided earlier than its predecessor) means a deposed leader's
    batch was committed after its successor's.
    """
    problems: list[str] = []
    ordered = sorted(fires, key=lambda f: f.nominal_ms)
    for prev, rec in itertools.pairwise(ordered):
        if rec.epoch < prev.epoch:
            problems.append(
                f"epoch went back from {prev.epoch} to {rec.epoch}: "
                f"{describe_record(prev)} then {describe_record(rec)}"
            )
        if rec.decided_ms < prev.decided_ms:
            problems.append(f"decided time went back: {describe_record(prev)} then {describe_record(rec)}")
    return problems


def stale_epoch_problems(fires: Sequence[pb.FireRecord], old_epoch: int, new_epoch: int) -> list[str]:
    """Nothing decided by ``old_epoch`` after the first record of ``new_epoch``."""
    newer = [f.decided_ms for f in fires if f.epoch >= new_epoch]
    if not newer:
        return [f"no record of epoch >= {new_epoch}"]
    first_new = min(newer)
    return [
        f"decided by deposed epoch {old_epoch} after epoch {new_epoch} started at {first_new}: "
        f"{describe_record(rec)}"
        for rec in fires
        if rec.epoch <= old_epoch and rec.decided_ms > first_new
    ]


def view_problems(view: NodeView, *, outcomes: Collection[int] = FIRED_OR_COALESCED) -> list[str]:
    """All of the above for one node's view of a per-second task, through its watermark."""
    fires = view.fires
    return (
        coverage_problems(fires, through_ms=view.task.watermark_ms, outcomes=outcomes)
        + run_problems(fires, view.runs)
        + early_problems(fires)
        + fencing_problems(fires)
    )


def require(problems: Sequence[str], context: str = "") -> None:
    """Raise one AssertionError listing every problem (and ``context``, e.g. the records)."""
    if problems:
        text = "\n".join(f"- {p}" for p in problems)
        raise AssertionError(f"{len(problems)} invariant violation(s):\n{text}\n{context}")


def _short(values: Sequence[int], n: int = 12) -> str:
    head = ", ".join(str(v) for v in values[:n])
    return head + (f", ... ({len(values) - n} more)" if len(values) > n else "")
