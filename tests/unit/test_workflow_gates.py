"""Earliest-start gates of workflow tasks (``not_before``) and workflow jitter: parsing,
validation with the place named, the gate computed in apply, and ``workflow status``."""

from __future__ import annotations

import pytest

from raftsched.cli.render import render_status
from raftsched.errors import InvalidSpec, InvalidWorkflow
from raftsched.fsm.workflows import _gate_ms, gate_reason
from raftsched.timing import jitter
from raftsched.timing.gates import gate_ms, parse_not_before
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.files import parse_workflow_text

WF = """\
name: recon
schedule: "0 0 * * *"
jitter: 5m
tasks:
  - name: extract
    command: extract {{ ds }}
  - name: reconcile
    command: reconcile {{ ds }}
    not_before: "+2h"
    depends_on: [extract]
"""

LOGICAL = 1_800_000_000_000


def test_a_workflow_file_takes_not_before_and_jitter() -> None:
    spec = parse_workflow_text(WF, "yaml", "wf.yaml")
    assert spec.jitter_ms == 300_000
    assert spec.tasks[1].not_before == "+2h"
    assert spec.tasks[0].not_before == ""


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ('"02:00"', "wall-clock time is not supported yet"),
        ('"30m"', "is not an offset after the logical time"),
        ('"+soon"', "not_before"),
        ('"+8d"', "more than 7 days"),
    ],
)
def test_a_bad_not_before_is_refused_with_its_line(value: str, fragment: str) -> None:
    text = WF.replace('"+2h"', value)
    with pytest.raises(InvalidWorkflow) as bad:
        parse_workflow_text(text, "yaml", "wf.yaml")
    message = str(bad.value)
    assert "wf.yaml:9" in message and "not_before" in message and fragment in message, message


def test_a_jitter_over_a_day_is_refused_naming_the_key() -> None:
    with pytest.raises(InvalidWorkflow) as bad:
        parse_workflow_text(WF.replace("jitter: 5m", "jitter: 2d"), "yaml", "wf.yaml")
    assert "jitter" in str(bad.value) and "wf.yaml:3" in str(bad.value), str(bad.value)


def test_offsets_parse_to_ms_and_a_stored_bad_text_gives_no_gate() -> None:
    assert parse_not_before("+30m") == 1_800_000
    assert parse_not_before(" +1.5h ") == 5_400_000
    with pytest.raises(InvalidSpec) as bad:
        parse_not_before("+30", "tasks[1].not_before")
    assert bad.value.field == "tasks[1].not_before"
    assert gate_ms("+30m", LOGICAL) == LOGICAL + 1_800_000
    assert gate_ms("", LOGICAL) == 0
    assert gate_ms("02:00", LOGICAL) == 0  # never an exception inside apply


def test_the_gate_is_the_later_of_not_before_and_a_scheduled_runs_jitter() -> None:
    spec = parse_workflow_text(WF, "yaml", "wf.yaml")
    scheduled = pb.WorkflowRun(workflow="recon", logical_ms=LOGICAL)
    manual = pb.WorkflowRun(workflow="recon", logical_ms=LOGICAL, manual=True)
    backfill = pb.WorkflowRun(workflow="recon", logical_ms=LOGICAL, backfill_id="b1")
    start = jitter.start_ms("recon", LOGICAL, 300_000)
    assert _gate_ms(spec, spec.tasks[0], scheduled) == start
    assert _gate_ms(spec, spec.tasks[0], manual) == 0  # jitter spreads the schedule only
    assert _gate_ms(spec, spec.tasks[0], backfill) == 0
    assert _gate_ms(spec, spec.tasks[1], scheduled) == LOGICAL + 7_200_000  # +2h > any 5m jitter
    assert _gate_ms(spec, spec.tasks[1], manual) == LOGICAL + 7_200_000


def test_workflow_status_shows_a_held_task_as_waiting_until_its_time() -> None:
    gate = LOGICAL + 7_200_000
    run = pb.WorkflowRun(run_id="recon@1", workflow="recon", logical_ms=LOGICAL, state=pb.WORKFLOW_RUNNING)
    run.tasks.add(name="extract", state=pb.TASK_SUCCESS, tries=1)
    run.tasks.add(
        name="reconcile",
        state=pb.TASK_RUNNING,
        tries=1,
        run_id="r1",
        reason=gate_reason(gate),
        not_before_ms=gate,
    )
    before = "\n".join(render_status(run, gate - 12 * 60_000))
    row = next(line for line in before.splitlines() if line.startswith("reconcile"))
    assert "waiting" in row and "not before 2027-01-15T10:00:00Z (in 12m)" in row, row
    after = "\n".join(render_status(run, gate + 1))
    row = next(line for line in after.splitlines() if line.startswith("reconcile"))
    assert "running" in row and "waiting" not in row, row
    assert gate_reason(gate) == "held: not before 2027-01-15T10:00:00Z (earliest start)"
