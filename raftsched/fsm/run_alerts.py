"""What a task run raises: the alerts of its failed, timed-out, lost and cancelled attempts, and the
events of its SLAs and freshness (:mod:`raftsched.timing.sla`).

Called by :class:`raftsched.fsm.runs.RunBook` while a command applies; each goes through the
state machine's alert book (:class:`AlertSink`), so it is deduplicated and replicated like any
other alert. Pure: no clock, no IO but the store read for a raised freshness miss.
"""

from __future__ import annotations

from typing import Protocol

from raftsched.abc import StateStore
from raftsched.fsm import alerts as alerts_mod
from raftsched.fsm import keys
from raftsched.fsm.records import TaskState
from raftsched.fsm.workflow_model import split_internal
from raftsched.model import execution_id
from raftsched.timing import sla
from raftsched.v1 import log_pb2 as pb


class AlertSink(Protocol):
    """Where a run's alerts go (the state machine: :mod:`raftsched.fsm.alerts`)."""

    def raise_alert(self, kind: str, reason: str, now: int, **fields: str) -> None: ...

    def raise_event(self, alert: pb.AlertRecord, now: int) -> None: ...


def alert_subject(run: pb.Run, shard: pb.ShardAttempt, st: TaskState | None) -> dict[str, str]:
    """The fields every alert about an attempt of ``run`` carries."""
    workflow = split_internal(run.task)[0] if run.workflow_run else ""
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


def attempt_alert(
    sink: AlertSink,
    run: pb.Run,
    shard: pb.ShardAttempt,
    res: pb.AttemptResult,
    st: TaskState | None,
    now: int,
) -> None:
    """An attempt timed out or was lost with its executor (whether or not a retry follows)."""
    kind = alerts_mod.LOST if res.lost else alerts_mod.TIMEOUT
    reason = res.error or ("attempt lost" if res.lost else "attempt timed out")
    sink.raise_alert(kind, reason, now, **alert_subject(run, shard, st))


def run_failed_alert(
    sink: AlertSink, run: pb.Run, shard: pb.ShardAttempt, st: TaskState | None, now: int
) -> None:
    """A run failed after its last retry: owner, execution id of the failed attempt, last error."""
    reason = shard.error or (f"exit code {shard.exit_code}" if shard.exit_code else "failed")
    sink.raise_alert(alerts_mod.RUN_FAILED, reason, now, **alert_subject(run, shard, st))


def _sla_alert(sink: AlertSink, st: TaskState, run: pb.Run, key: str, reason: str, now: int) -> None:
    sink.raise_event(
        pb.AlertRecord(
            kind=alerts_mod.SLA_MISSED,
            dedupe=key,
            error=reason,
            task=run.task,
            run_id=run.run_id,
            owner=st.spec.owner,
            namespace=st.spec.namespace,
        ),
        now,
    )


def start_sla(
    sink: AlertSink, run: pb.Run, shard: pb.ShardAttempt, lateness: int, st: TaskState, now: int
) -> None:
    """An attempt's start was reported: the run's start SLA (its first start counts)."""
    within = st.spec.sla_start_within_ms
    if lateness > within and not run.workflow_run and not run.backfill_id and not sla.first_start_ms(run):
        late = sla.late_text(lateness - within)
        _sla_alert(
            sink,
            st,
            run,
            sla.start_key(run.run_id),
            f"run started {late} late: {sla.late_text(lateness)} after its nominal time "
            f"(sla.start_within {sla.late_text(within)}, on {shard.executor or 'an executor'})",
            now,
        )


def sla_finished(sink: AlertSink, store: StateStore, st: TaskState, run: pb.Run, now: int) -> None:
    """A run of a task with an SLA or freshness finished: its finish SLA; its success moves
    the freshness clock (and resolves a freshness miss raised for the stretch it ends)."""
    spec = st.spec
    if run.backfill_id:
        return  # a backfill's run: its nominal time is past by design (as for workflows)
    within = spec.sla_finish_within_ms
    asked = run.state == pb.CANCELLED and any(e.event == "cancel_requested" for e in run.timeline)
    if within and not run.workflow_run and not asked:  # someone cancelled it: no page for that
        state = sla.finish_state(run, within, now)
        if state != sla.MET:
            shown = pb.RunState.Name(run.state)
            _sla_alert(
                sink,
                st,
                run,
                sla.finish_key(run.run_id),
                f"run finished {shown} {sla.late_text(run.finished_ms - run.nominal_ms)} after its "
                f"nominal time: sla.finish_within {sla.late_text(within)} {state}",
                now,
            )
    if run.state != pb.SUCCEEDED or run.finished_ms < st.last_success_ms:
        return
    base = sla.freshness_base(st.created_ms, st.last_success_ms)
    st.last_success_ms = run.finished_ms
    st.last_success_run = run.run_id
    key = sla.freshness_key(spec.name, base)
    if spec.freshness_ms and store.get(keys.alert_dedupe_key(key)) is not None:
        sink.raise_event(
            pb.AlertRecord(
                kind=alerts_mod.FRESHNESS,
                dedupe=key + "/resolved",
                resolved=True,
                error=f"run {run.run_id} succeeded: fresh again after "
                f"{sla.late_text(run.finished_ms - base)} without a success",
                task=run.task,
                run_id=run.run_id,
                owner=spec.owner,
                namespace=spec.namespace,
            ),
            now,
        )
