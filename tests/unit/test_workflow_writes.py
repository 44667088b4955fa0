"""Leader-stamped workflow writes (raftsched.leader.writes): what each command carries, what the
leader refuses before proposing anything, and the logical times a backfill gets."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pytest

from raftsched import codec
from raftsched.errors import InvalidSpec, InvalidWorkflow, NotFound
from raftsched.leader import writes
from raftsched.timing.cron import CronSchedule
from raftsched.v1 import log_pb2 as pb

NOW = 1_796_032_800_000  # 2026-11-30T10:00:00Z
DAY = 86_400_000
STAMP: dict[str, Any] = {"now_ms": NOW, "epoch": 7, "origin": "n1", "key": "k1"}


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp() * 1000)


def etl(schedule: str = "", tz: str = "") -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name="etl")
    if schedule:
        spec.schedule.expr = schedule
        spec.schedule.timezone = tz
    spec.tasks.add(name="extract", command="extract.sh {{ ds }}")
    spec.tasks.add(name="validate", command="validate.sh", depends_on=[pb.Dependency(task="extract")])
    spec.tasks.add(
        name="load",
        command="load.sh",
        depends_on=[pb.Dependency(task="extract"), pb.Dependency(task="validate")],
    )
    return spec


@dataclass
class FakeState:
    """The reads the writes check against (a SchedulerState stand-in)."""

    workflows: dict[str, pb.WorkflowRecord] = field(default_factory=dict)
    runs: dict[str, pb.WorkflowRun] = field(default_factory=dict)

    def get_workflow(self, name: str, version: int = 0) -> pb.WorkflowRecord | None:
        return self.workflows.get(name)

    def get_workflow_run(self, run_id: str) -> pb.WorkflowRun | None:
        return self.runs.get(run_id)


def state_with(spec: pb.WorkflowSpec) -> FakeState:
    run = pb.WorkflowRun(run_id=f"{spec.name}@{NOW}", workflow=spec.name, version=1)
    for task in spec.tasks:
        run.tasks.add(name=task.name, state=pb.TASK_WAITING)
    return FakeState({spec.name: pb.WorkflowRecord(spec=spec, version=1)}, {run.run_id: run})


# -- apply ---------------------------------------------------------------------------------------------


def test_apply_carries_the_spec_and_the_first_scheduled_run_after_now() -> None:
    spec = etl("0 2 * * *", "Europe/Berlin")
    cmd = codec.decode_command(writes.apply_workflow(spec, **STAMP))
    assert cmd.WhichOneof("body") == "apply_workflow"
    assert (cmd.epoch, cmd.now_ms, cmd.origin, cmd.idempotency_key) == (7, NOW, "n1", "k1")
    assert cmd.apply_workflow.spec == spec
    # 02:00 in Berlin (UTC+1 in winter) on the next day: 01:00Z on 2026-12-01.
    assert cmd.apply_workflow.next_fire_ms == ms("2026-12-01T01:00:00+00:00")


def test_apply_without_schedule_has_no_next_fire() -> None:
    cmd = codec.decode_command(writes.apply_workflow(etl(), **STAMP))
    assert cmd.apply_workflow.next_fire_ms == 0


def test_apply_validates_first_and_lists_every_problem() -> None:
    spec = etl("61 * * * *")
    spec.tasks[2].depends_on.add(task="nope")
    with pytest.raises(InvalidWorkflow) as caught:
        writes.apply_workflow(spec, **STAMP)
    text = str(caught.value)
    assert len(caught.value.problems) >= 2
    assert "schedule" in text and "nope" in text


# -- start a run ---------------------------------------------------------------------------------------


def test_start_run_now_and_at_a_logical_time() -> None:
    state = state_with(etl())
    cmd = codec.decode_command(writes.start_workflow_run(state, "etl", 0, '{"x": 1}', **STAMP))
    assert cmd.start_workflow_run == pb.StartWorkflowRun(
        workflow="etl", logical_ms=NOW, params_json='{"x": 1}'
    )
    cmd = codec.decode_command(writes.start_workflow_run(state, "etl", NOW - DAY, "", **STAMP))
    assert cmd.start_workflow_run.logical_ms == NOW - DAY


def test_start_run_refusals() -> None:
    state = state_with(etl())
    with pytest.raises(NotFound, match="workflow 'nightly' does not exist"):
        writes.start_workflow_run(state, "nightly", 0, "", **STAMP)
    with pytest.raises(InvalidSpec) as bad:
        writes.start_workflow_run(state, "etl", 0, "[1]", **STAMP)
    assert bad.value.field == "params"
    with pytest.raises(InvalidSpec) as bad:
        writes.start_workflow_run(state, "etl", -1, "", **STAMP)
    assert bad.value.field == "logical_ms"


# -- run operations ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "task"),
    [
        (pb.WorkflowRunOp.KILL, ""),
        (pb.WorkflowRunOp.RERUN, "validate"),
        (pb.WorkflowRunOp.MARK_SUCCESS, "load"),
    ],
)
def test_run_ops_are_stamped(op: int, task: str) -> None:
    state = state_with(etl())
    run_id = f"etl@{NOW}"
    cmd = codec.decode_command(writes.workflow_run_op(state, op, run_id, task, "by hand", **STAMP))
    body = cmd.workflow_run_op
    assert (body.op, body.run_id, body.task, body.reason) == (op, run_id, task, "by hand")


def test_run_ops_name_what_is_unknown() -> None:
    state = state_with(etl())
    with pytest.raises(NotFound, match=r"workflow run 'etl@1' does not exist"):
        writes.workflow_run_op(state, pb.WorkflowRunOp.KILL, "etl@1", "", "", **STAMP)
    with pytest.raises(NotFound, match=rf"workflow run 'etl@{NOW}' has no task 'lod'"):
        writes.workflow_run_op(state, pb.WorkflowRunOp.RERUN, f"etl@{NOW}", "lod", "", **STAMP)
    with pytest.raises(InvalidSpec) as bad:
        writes.workflow_run_op(state, pb.WorkflowRunOp.MARK_SUCCESS, f"etl@{NOW}", "", "", **STAMP)
    assert bad.value.field == "task"
    with pytest.raises(InvalidSpec) as bad:
        writes.workflow_run_op(state, pb.WorkflowRunOp.KILL, f"etl@{NOW}", "load", "", **STAMP)
    assert bad.value.field == "task"
    with pytest.raises(InvalidSpec) as bad:
        writes.workflow_run_op(state, 0, f"etl@{NOW}", "", "", **STAMP)
    assert bad.value.field == "op"


# -- backfill ------------------------------------------------------------------------------------------


def test_backfill_runs_every_schedule_occurrence_in_the_inclusive_range() -> None:
    spec = etl("30 2 * * *", "Europe/Berlin")
    state = state_with(spec)
    # Across the spring-forward gap: 03-30 02:30 does not exist in Berlin and runs at 03:00.
    start, end = ms("2025-03-28T01:30:00+00:00"), ms("2025-03-31T00:30:00+00:00")  # both occurrences
    cmd = codec.decode_command(writes.start_backfill(state, "etl", start, end, '{"full": 1}', **STAMP))
    body = cmd.start_backfill
    assert list(body.logical_ms) == [
        ms("2025-03-28T02:30:00+01:00"),
        ms("2025-03-29T02:30:00+01:00"),
        ms("2025-03-30T03:00:00+02:00"),
        ms("2025-03-31T02:30:00+02:00"),
    ]
    assert (body.workflow, body.from_ms, body.to_ms, body.params_json) == ("etl", start, end, '{"full": 1}')
    # The same values the scheduler itself would fire.
    schedule = CronSchedule.parse("30 2 * * *", "Europe/Berlin")
    assert list(body.logical_ms) == schedule.fires_between(start - 1, end, 100)


def test_backfill_without_schedule_runs_once_per_utc_midnight() -> None:
    state = state_with(etl())
    start, end = ms("2026-01-01T00:00:00+00:00"), ms("2026-01-03T23:59:59.999+00:00")
    assert writes.backfill_times(state.workflows["etl"].spec, start, end) == [
        start,
        start + DAY,
        start + 2 * DAY,
    ]
    # A start after midnight begins with the next midnight.
    assert writes.backfill_times(state.workflows["etl"].spec, start + 1, end) == [
        start + DAY,
        start + 2 * DAY,
    ]


def test_backfill_refusals_are_clear() -> None:
    state = state_with(etl("0 2 * * *"))
    day = ms("2026-01-01T00:00:00+00:00")
    with pytest.raises(InvalidSpec, match=r"ends .* before it starts") as bad:
        writes.start_backfill(state, "etl", day + DAY, day, "", **STAMP)
    assert bad.value.field == "to"
    with pytest.raises(InvalidSpec, match="backfill would be empty") as bad:
        writes.start_backfill(state, "etl", day + 3 * 3_600_000, day + 4 * 3_600_000, "", **STAMP)
    assert bad.value.field == "from" and "0 2 * * *" in bad.value.reason
    with pytest.raises(NotFound, match="'nightly'"):
        writes.start_backfill(state, "nightly", day, day + DAY, "", **STAMP)


def test_backfill_refuses_more_runs_than_the_limit_and_accepts_exactly_the_limit() -> None:
    limit = writes.MAX_BACKFILL_RUNS
    state = state_with(etl("* * * * *"))  # every minute
    start = ms("2026-01-01T00:00:00+00:00")
    exactly = start + (limit - 1) * 60_000
    cmd = codec.decode_command(writes.start_backfill(state, "etl", start, exactly, "", **STAMP))
    assert len(cmd.start_backfill.logical_ms) == limit
    with pytest.raises(InvalidSpec, match=rf"more than {limit:,} runs.*split it") as bad:
        writes.start_backfill(state, "etl", start, exactly + 60_000, "", **STAMP)
    assert bad.value.field == "to"
    # Without a schedule: one run per UTC midnight.
    unscheduled = state_with(etl())
    writes.start_backfill(unscheduled, "etl", start, start + (limit - 1) * DAY, "", **STAMP)
    with pytest.raises(InvalidSpec, match=f"more than {limit:,}"):
        writes.start_backfill(unscheduled, "etl", start, start + limit * DAY, "", **STAMP)
