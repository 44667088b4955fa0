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
"""

from __future__ import annotations

from collections.abc import Callable

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
    """Append one entry to ``run.timeline`` (bounded by :data:`TIMELINE_CAP`)."""
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
