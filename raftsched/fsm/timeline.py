"""Run timelines: the transitions of a task run and its attempts, appended in apply.

Pure: every time is the leader time of the command being applied (or, for ``started``, the
executor's own measure that came with the result), so every replica appends the same entries.
The timeline is part of the run record, so it is kept and pruned with the run.

What is replicated, and so recorded here: created, assigned (to which executor), started (from
the result's start lateness), the outcome of an attempt (succeeded / failed / timed_out with exit
code and duration), lease_expired, executor_lost (its heartbeats stopped or it left),
retry_scheduled (not before when), retry_requested (a forced retry), cancelled, and waiting (a
pending attempt held back by a quota or a lock, with the reason; once per change of reason). The send of an
assigned attempt to its executor is leader-local and is not in the log.

Derived entries (stored state format 3). On the hot shape — a single-shard fired or triggered
run that is assigned, maybe reports its start, and succeeds or fails for good — the entries
``assigned``, ``started`` and the outcome only restate the shard's fields, so they are not
stored: the run is created with ``timeline_derived`` set, apply skips those notes
(:func:`hot_assigned`, :func:`hot_outcome`) and keeps the start and duration on the shard
(``started_ms``, ``duration_ms``), and every read fills them in (:func:`expand`, :func:`entries`).
The first other entry (a retry, a loss, a cancel, a wait, a release...) stores them first
(:func:`materialise`, called by :func:`note`), so the stored timeline is from then on exactly the
one earlier builds stored. A view is always the full timeline, never the derived fields.
"""

from __future__ import annotations

from collections.abc import Callable

from raftsched.v1 import log_pb2
from raftsched.v1 import records_pb2 as pb

#: Entries kept per run; past it the oldest entries after "created" are dropped and counted.
TIMELINE_CAP = 64
#: Longest reason kept in an entry (errors can be long; the full last error is on the shard).
REASON_CAP = 240


def note(
    run: pb.Run,
    event: str,
    at_ms: int,
    shard: pb.ShardAttempt | None = None,
    *,
    reason: str = "",
    executor: str = "",
    exit_code: int = 0,
    duration_ms: int = 0,
    retry_at_ms: int = 0,
) -> None:
    """Append one entry to ``run.timeline`` (bounded by :data:`TIMELINE_CAP`); a run whose
    timeline was derived stores the derived entries first (:func:`materialise`)."""
    if run.timeline_derived:
        materialise(run)
    timeline = run.timeline
    if len(timeline) >= TIMELINE_CAP:
        del timeline[1]  # keep "created": it says when and why the run exists
        run.timeline_dropped += 1
    timeline.add(
        event=event,
        at_ms=at_ms,
        shard=shard.shard if shard is not None else 0,
        attempt=shard.attempt if shard is not None else 0,
        executor=executor,
        reason=reason[:REASON_CAP],
        exit_code=exit_code,
        duration_ms=duration_ms,
        retry_at_ms=retry_at_ms,
    )


def derived(run: pb.Run) -> list[pb.TimelineEntry]:
    """The entries a run's fields stand for after its stored ones (none unless
    ``timeline_derived``): ``assigned`` once its shard has an executor, ``started`` once a start
    was reported, the outcome once it succeeded or failed, as :func:`note` would have stored them."""
    if not run.timeline_derived or len(run.shards) != 1:
        return []
    s = run.shards[0]
    if not s.executor:
        return []
    out = [
        pb.TimelineEntry(
            event="assigned", at_ms=s.assigned_ms, shard=s.shard, attempt=s.attempt, executor=s.executor
        )
    ]
    if s.HasField("started_ms"):
        out.append(
            pb.TimelineEntry(
                event="started", at_ms=s.started_ms, shard=s.shard, attempt=s.attempt, executor=s.executor
            )
        )
    if s.state == pb.SUCCEEDED or s.state == pb.FAILED:
        out.append(
            pb.TimelineEntry(
                event="succeeded" if s.state == pb.SUCCEEDED else "timed_out" if s.timed_out else "failed",
                at_ms=s.finished_ms,
                shard=s.shard,
                attempt=s.attempt,
                executor=s.executor,
                reason=s.error[:REASON_CAP],
                exit_code=s.exit_code,
                duration_ms=s.duration_ms,
            )
        )
    return out


def materialise(run: pb.Run) -> None:
    """Store the derived entries in ``run.timeline`` (as :func:`note` would have, cap included)
    and clear the fields they were derived from: ``run`` is then as earlier builds stored it."""
    if not run.timeline_derived:
        return
    entries = derived(run)
    run.timeline_derived = False
    for shard in run.shards:
        shard.ClearField("started_ms")
        shard.duration_ms = 0
    timeline = run.timeline
    for entry in entries:
        if len(timeline) >= TIMELINE_CAP:
            del timeline[1]
            run.timeline_dropped += 1
        timeline.append(entry)


def expand(run: pb.Run) -> pb.Run:
    """``run`` as a read shows it: its whole timeline, no derived fields (a run without derived
    entries is returned as it is; else ``run`` itself is filled in)."""
    materialise(run)
    return run


def canonical(run: pb.Run) -> bool:
    """Turn a run stored with its whole timeline (by a format-2 build) into the form this build
    stores for the same run, in place; False if that is the form it has already.

    The stored form is a function of the run as a read shows it: a single-shard fired or
    triggered run (not a workflow's task, not a backfill's) whose entries after ``created`` are
    exactly those its fields stand for (:func:`derived`) is stored derived; any other run, whole.
    A run that took another path has a stored entry of its own (a retry, a loss, a cancel, a
    wait, a release...), so it does not match. Migrating a format-2 state with this gives every
    replica the same bytes, whichever log index it was upgraded at."""
    timeline = run.timeline
    if (
        run.timeline_derived
        or len(run.shards) != 1
        or run.workflow_run
        or run.backfill_id
        or run.timeline_dropped
        or not timeline
        or timeline[0].event != "created"
        or timeline[0].reason not in ("fire", "manual")
        or len(timeline) > 4
    ):
        return False
    shard = run.shards[0]
    rest = list(timeline[1:])
    trial = pb.Run()
    trial.CopyFrom(run)
    del trial.timeline[1:]
    trial.timeline_derived = True
    tried = trial.shards[0]
    for entry in rest:
        if entry.event == "started":
            tried.started_ms = entry.at_ms
        elif entry.event in ("succeeded", "failed", "timed_out"):
            tried.duration_ms = entry.duration_ms
    if derived(trial) != rest or (shard.state in (pb.PENDING, pb.RUNNING) and len(rest) > 2):
        return False
    run.CopyFrom(trial)
    return True


def entries(run: pb.Run) -> list[pb.TimelineEntry]:
    """The whole timeline of ``run`` (stored and derived entries), without changing it."""
    return [*run.timeline, *derived(run)]


def hot_assigned(run: pb.Run, shard: pb.ShardAttempt, at_ms: int, executor: str) -> None:
    """``shard`` was assigned to ``executor`` (its fields set already): the ``assigned`` entry,
    unless the run's timeline is derived (the fields stand for it)."""
    if not run.timeline_derived:
        note(run, "assigned", at_ms, shard, executor=executor)


def hot_outcome(run: pb.Run, shard: pb.ShardAttempt, res: log_pb2.AttemptResult, final: bool) -> bool:
    """Whether ``res`` (``final``: it ends the shard, no retry follows) is on the hot shape of a
    derived run: then its start and duration are kept on the shard and True is returned (the
    caller stores no entry). Otherwise the derived entries are stored now, before the caller
    changes the fields they come from, and False is returned (the caller notes as before)."""
    if not run.timeline_derived:
        return False
    if final and not res.lost and res.executor == shard.executor and shard.executor:
        if res.HasField("start_lateness_ms"):
            shard.started_ms = run.nominal_ms + res.start_lateness_ms
        shard.duration_ms = res.duration_ms
        return True
    materialise(run)
    return False


def describe(entry: pb.TimelineEntry, fmt: Callable[[int], str] = str) -> str:
    """One line for an entry, without its own time; ``fmt`` renders the retry time (ms)."""
    where = f"shard {entry.shard} attempt {entry.attempt}" if entry.attempt else ""
    parts = [entry.event or pb.WorkflowTaskState.Name(entry.state).lower()]
    if where:
        parts.append(where)
    if entry.executor:
        parts.append(f"on {entry.executor}")
    if entry.event in ("succeeded", "failed", "timed_out"):
        if entry.exit_code < 0:
            parts.append(f"signal {-entry.exit_code}")
        else:
            parts.append(f"exit {entry.exit_code}")
        parts.append(f"in {entry.duration_ms} ms")
    if entry.retry_at_ms:
        parts.append(f"not before {fmt(entry.retry_at_ms)}")
    if entry.reason:
        parts.append(f"({entry.reason})")
    return " ".join(parts)
