"""Answer "why did (or didn't) this task fire at T?" from its record and fire accounting.

Runs on any node, outside apply: it may evaluate the trigger (croniter) to tell a non-fire time
from a missing record.
"""

from __future__ import annotations

from datetime import UTC, datetime

from raftsched import codec
from raftsched.errors import InvalidSpec
from raftsched.model import ManualTrigger
from raftsched.timing import jitter, sla
from raftsched.timing.calendar import Calendar
from raftsched.timing.schedule import next_fire_after
from raftsched.v1 import raftsched_pb2 as pb

_VERB = {
    pb.FIRED: "fired",
    pb.COALESCED: "coalesced",
    pb.SKIPPED_OVERLAP: "skipped (overlap)",
    pb.SKIPPED_MISFIRE: "skipped (misfire)",
    pb.SKIPPED_DISABLED: "skipped (disabled)",
    pb.SKIPPED_CALENDAR: "skipped (calendar)",
}


def iso(ms: int) -> str:
    if ms <= 0:
        return "never"
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _covers(rec: pb.FireRecord, at_ms: int) -> bool:
    return rec.nominal_ms == at_ms or rec.nominal_ms <= at_ms <= rec.through_ms


def explain(
    task: pb.TaskRecord,
    at_ms: int,
    records: list[pb.FireRecord],
    run: pb.Run | None,
    calendars: list[Calendar] | None = None,
    now_ms: int = 0,
) -> pb.ExplainReply:
    """The verdict for ``task`` at ``at_ms``; ``calendars`` are the ones the task excludes (to
    say that a fire not yet accounted will be skipped, or why one was). With ``now_ms`` (the
    node's leader time) the task's SLA and freshness states are added."""
    out = _explain(task, at_ms, records, run)
    if now_ms:
        out.details.extend(sla_details(task, out.run if out.HasField("run") else None, now_ms))
    for cal in calendars or ():
        if not out.HasField("fire") and cal.excludes(at_ms):
            out.details.append(f"a fire at {iso(at_ms)} is skipped: {cal.why(at_ms)}")
    # Placement problems are part of why a fire has not run, whatever the record says.
    if task.unplaceable:
        out.details.append(f"unplaceable: {task.unplaceable}; its attempts wait for a fitting executor")
    if out.run.held:
        out.details.append("the run is buffered behind the task's running run (overlap=buffer_one)")
    if task.spec.jitter_ms:
        nominal = out.fire.nominal_ms if out.HasField("fire") else at_ms
        offset = jitter.offset_ms(task.spec.name, nominal, task.spec.jitter_ms)
        out.details.append(
            f"jitter {task.spec.jitter_ms} ms: the fire at {iso(nominal)} starts at or after "
            f"{iso(nominal + offset)} (offset {offset} ms; the fire keeps its nominal time)"
        )
    return out


def sla_details(task: pb.TaskRecord, run: pb.Run | None, now_ms: int) -> list[str]:
    """``sla.start_within``, ``sla.finish_within`` (for ``run``) and ``freshness`` states:
    ``met``, ``missed by X`` or ``pending`` (see :mod:`raftsched.timing.sla`)."""
    spec = task.spec
    out = []
    for within, what, state_of in (
        (spec.sla_start_within_ms, "sla.start_within", sla.start_state),
        (spec.sla_finish_within_ms, "sla.finish_within", sla.finish_state),
    ):
        if within and run is not None and run.run_id:
            state = state_of(run, within, now_ms)
            out.append(f"{what} {sla.late_text(within)} for run {run.run_id}: {state}")
    if spec.freshness_ms:
        last = f"last success {iso(task.last_success_ms)}" if task.last_success_ms else "no success yet"
        out.append(
            f"freshness {sla.late_text(spec.freshness_ms)}: {sla.freshness_state(task, now_ms)} ({last})"
        )
    return out


def _explain(
    task: pb.TaskRecord, at_ms: int, records: list[pb.FireRecord], run: pb.Run | None
) -> pb.ExplainReply:
    name = task.spec.name
    out = pb.ExplainReply()
    for rec in records:
        if _covers(rec, at_ms):
            out.fire.CopyFrom(rec)
            verb = _VERB.get(rec.outcome, "accounted")
            if rec.outcome == pb.FIRED:
                state = (
                    pb.RunState.Name(run.state).lower()
                    if run is not None and run.run_id == rec.run_id
                    else "?"
                )
                out.verdict = f"{name} fired at {iso(rec.nominal_ms)}: run {rec.run_id} ({state})"
                if run is not None and run.run_id == rec.run_id:
                    out.run.CopyFrom(run)
                    waiting = [sh for sh in run.shards if sh.state == pb.PENDING and sh.waiting]
                    if waiting:
                        out.verdict += f", waiting: {waiting[0].waiting}"
                    for sh in waiting:
                        out.details.append(
                            f"shard {sh.shard} attempt {sh.attempt} waiting since "
                            f"{iso(sh.waiting_since_ms)}: {sh.waiting}"
                        )
            elif rec.outcome == pb.SKIPPED_CALENDAR:
                out.verdict = f"{name} skipped at {iso(at_ms)} by calendar {rec.calendar!r}: {rec.reason}"
            elif rec.through_ms:
                out.verdict = (
                    f"{name} {verb} at {iso(at_ms)}: one of {rec.count} fires from "
                    f"{iso(rec.nominal_ms)} to {iso(rec.through_ms)}: {rec.reason}"
                )
            else:
                out.verdict = f"{name} {verb} at {iso(at_ms)}: {rec.reason}"
            out.details.append(
                f"decided by the leader of epoch {rec.epoch} at {iso(rec.decided_ms)} "
                f"(task version {rec.task_version})"
            )
            return out
    if at_ms < task.created_ms:
        out.verdict = f"{name} did not exist at {iso(at_ms)} (created {iso(task.created_ms)})"
        return out
    # Only the trigger matters here; decoding just it also explains a stored task that newer
    # submission rules would refuse (and internal workflow tasks, whose names are not user names).
    try:
        trigger = codec.trigger_from_pb(task.spec.trigger)
    except InvalidSpec as exc:
        out.verdict = f"{name}: cannot evaluate its trigger: {exc}"
        return out
    if isinstance(trigger, ManualTrigger):
        out.verdict = f"{name} has no schedule (manual trigger only); no run was triggered at {iso(at_ms)}"
        return out
    try:
        is_fire_time = next_fire_after(trigger, at_ms - 1) == at_ms
        following = next_fire_after(trigger, at_ms)
    except InvalidSpec as exc:
        out.verdict = f"{name}: cannot evaluate its trigger: {exc}"
        return out
    if at_ms > task.watermark_ms:
        out.verdict = (
            f"{name} has not reached {iso(at_ms)} yet: fires are accounted up to "
            f"{iso(task.watermark_ms)}; next fire {iso(task.next_fire_ms)}"
        )
        if not task.enabled:
            out.details.append("the task is disabled: nothing fires until it is enabled")
        return out
    if not is_fire_time:
        out.verdict = (
            f"{name} was not due at {iso(at_ms)}: it is not a fire time of the current trigger "
            f"(next fire time after it: {iso(following)})"
        )
        return out
    out.verdict = (
        f"{name} has no record for {iso(at_ms)}: the task was disabled then, its trigger was "
        "different then, or the record was pruned by history retention"
    )
    out.details.append(f"current version {task.version}, updated {iso(task.updated_ms)}")
    return out
