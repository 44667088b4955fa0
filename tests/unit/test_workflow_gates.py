"""Earliest-start gates of workflow tasks (``not_before``) and workflow jitter: parsing,
validation with the place named, the gate computed in apply, and ``workflow status``."""

from __future__ import annotations

from datetime import datetime

import pytest

from raftsched.cli.render import render_status
from raftsched.errors import InvalidSpec, InvalidWorkflow
from raftsched.fsm.workflows import _gate_ms, gate_reason
from raftsched.timing import jitter
from raftsched.timing.calendar import zone_offsets
from raftsched.timing.gates import NotBefore, Zone, gate_ms, parse_not_before
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
        ('"25:00"', "is not a time of day"),
        ('"02:60"', "is not a time of day"),
        ('"30m"', 'neither a time of day such as "02:00" nor an offset'),
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
    assert parse_not_before("+30m") == NotBefore(offset_ms=1_800_000)
    assert parse_not_before(" +1.5h ") == NotBefore(offset_ms=5_400_000)
    assert parse_not_before("02:00") == NotBefore(wall_s=7200)
    assert parse_not_before("23:59:30") == NotBefore(wall_s=86_370)
    with pytest.raises(InvalidSpec) as bad:
        parse_not_before("+30", "tasks[1].not_before")
    assert bad.value.field == "tasks[1].not_before"
    assert gate_ms("+30m", LOGICAL) == LOGICAL + 1_800_000
    assert gate_ms("", LOGICAL) == 0
    assert gate_ms("+soon", LOGICAL) == 0  # never an exception inside apply


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
    written = "\n".join(render_status(run, gate - 12 * 60_000, {"reconcile": "+2h"}))
    assert "not before +2h (2027-01-15T10:00:00Z, in 12m)" in written, written
    after = "\n".join(render_status(run, gate + 1))
    row = next(line for line in after.splitlines() if line.startswith("reconcile"))
    assert "running" in row and "waiting" not in row, row
    assert gate_reason(gate) == "held: not before 2027-01-15T10:00:00Z (earliest start)"


def berlin() -> Zone:
    transitions, offsets = zone_offsets("Europe/Berlin")
    return Zone.build("Europe/Berlin", transitions, offsets)


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


@pytest.mark.parametrize(
    ("logical", "not_before", "gate"),
    [
        # A daily run at local midnight: 02:00 local that day (CET, +01:00).
        ("2026-12-02T00:00:00+01:00", "02:00", "2026-12-02T02:00:00+01:00"),
        # The local date of the logical time counts, not the UTC one (23:30 UTC is the next day).
        ("2026-12-01T23:30:00+00:00", "02:00", "2026-12-02T02:00:00+01:00"),
        # Summer time (+02:00).
        ("2026-07-01T00:00:00+02:00", "02:00:30", "2026-07-01T02:00:30+02:00"),
        # Spring forward: 02:30 does not exist on 2026-03-29; the end of the gap, as cron does.
        ("2026-03-29T00:00:00+01:00", "02:30", "2026-03-29T03:00:00+02:00"),
        # Fall back: 02:30 exists twice on 2026-10-25; the first occurrence, as cron does.
        ("2026-10-25T00:00:00+02:00", "02:30", "2026-10-25T02:30:00+02:00"),
        # A time before the logical time on its date is a gate already past (no hold).
        ("2026-12-02T06:00:00+01:00", "02:00", "2026-12-02T02:00:00+01:00"),
        ("2026-12-02T00:00:00+01:00", "+90m", "2026-12-02T01:30:00+01:00"),
    ],
)
def test_a_wall_clock_gate_is_on_the_logical_date_in_the_zone_with_the_cron_dst_policy(
    logical: str, not_before: str, gate: str
) -> None:
    assert gate_ms(not_before, ms(logical), berlin()) == ms(gate)


def test_a_wall_clock_gate_without_a_zone_is_utc() -> None:
    assert gate_ms("02:00", ms("2026-12-02T10:00:00+00:00")) == ms("2026-12-02T02:00:00+00:00")


def test_zone_offsets_are_checked_when_built_from_replicated_values() -> None:
    with pytest.raises(InvalidSpec):
        Zone.build("x", [1, 2], [0, 3600])
    with pytest.raises(InvalidSpec):
        Zone.build("x", [2, 1], [0, 3600, 0])
    with pytest.raises(InvalidSpec):
        Zone.build("x", [], [27 * 3600])


def test_commands_defining_jitter_or_not_before_need_format_5_and_others_keep_theirs() -> None:
    from raftsched import codec
    from raftsched.leader import writes
    from raftsched.model import ManualTrigger, TaskSpec
    from raftsched.v1 import log_pb2

    def stamped(data: bytes) -> int:
        return log_pb2.Command.FromString(data).format

    stamp = {"now_ms": LOGICAL, "epoch": 1, "origin": "n1", "key": ""}
    plain = TaskSpec("t", ManualTrigger(), command="x")
    jittered = TaskSpec("t", ManualTrigger(), command="x", jitter_ms=60_000)
    assert stamped(writes.create_task(plain, disabled=False, **stamp)) == 1  # type: ignore[arg-type]
    assert stamped(writes.create_task(jittered, disabled=False, **stamp)) == codec.TIME_GATES_FORMAT  # type: ignore[arg-type]
    spec = parse_workflow_text(WF, "yaml", "wf.yaml")
    assert stamped(writes.apply_workflow(spec, **stamp)) == codec.TIME_GATES_FORMAT  # type: ignore[arg-type]
    spec.ClearField("jitter_ms")
    for t in spec.tasks:
        t.ClearField("not_before")
    assert stamped(writes.apply_workflow(spec, **stamp)) == 1  # type: ignore[arg-type]


def test_the_leader_stamps_the_zone_offsets_only_for_a_wall_clock_gate() -> None:
    from raftsched.leader import writes
    from raftsched.v1 import log_pb2

    stamp = {"now_ms": LOGICAL, "epoch": 1, "origin": "n1", "key": ""}
    spec = parse_workflow_text(
        WF.replace('"+2h"', '"02:00"').replace("jitter: 5m", "timezone: Europe/Berlin"), "yaml", "wf.yaml"
    )
    body = log_pb2.Command.FromString(writes.apply_workflow(spec, **stamp)).apply_workflow  # type: ignore[arg-type]
    transitions, offsets = zone_offsets("Europe/Berlin")
    assert (list(body.zone_transition_ms), list(body.zone_offset_s)) == (transitions, offsets)
    offset_only = parse_workflow_text(WF, "yaml", "wf.yaml")
    body = log_pb2.Command.FromString(writes.apply_workflow(offset_only, **stamp)).apply_workflow  # type: ignore[arg-type]
    assert not body.zone_offset_s


def test_the_stamped_zone_is_kept_with_the_version_required_for_a_wall_gate_and_deleted() -> None:
    from raftsched import codec
    from raftsched.fsm import keys
    from raftsched.leader import writes
    from raftsched.v1 import log_pb2
    from tests.support.fsm import T0, apply, apply_wf, fresh

    spec = pb.WorkflowSpec(name="recon", schedule=pb.CronTrigger(expr="0 0 * * *", timezone="Europe/Berlin"))
    spec.tasks.add(name="a", command="a", not_before="02:00")
    state = fresh()
    res = apply_wf(state, spec, next_fire=T0 + 3_600_000)  # no zone stamped: refused, nothing stored
    assert not res.ok and "zone offsets" in res.message
    assert state.wf.workflows.get("recon") is None
    data = writes.apply_workflow(spec, now_ms=T0, epoch=1, origin="n1", key="")
    assert apply(state, data).ok
    zone = log_pb2.WorkflowZone.FromString(state.store.get(keys.workflow_zone_key("recon", 1)) or b"")
    transitions, offsets = zone_offsets("Europe/Berlin")
    assert (zone.zone, list(zone.transition_ms), list(zone.offset_s)) == (
        "Europe/Berlin",
        transitions,
        offsets,
    )
    cmd = log_pb2.Command(epoch=1, now_ms=T0 + 1, origin="n1")
    cmd.delete_workflow.workflow = "recon"
    assert apply(state, codec.encode_command(cmd)).ok
    assert state.store.get(keys.workflow_zone_key("recon", 1)) is None


def test_a_staged_workflow_carries_the_zone_in_its_final_apply() -> None:
    from raftsched.fsm import keys
    from raftsched.leader import writes
    from tests.support.fsm import T0, apply, fresh

    spec = pb.WorkflowSpec(name="big", schedule=pb.CronTrigger(expr="0 0 * * *", timezone="Europe/Berlin"))
    spec.tasks.add(name="a", command="a", not_before="02:00")
    spec.tasks.add(name="b", command="b", depends_on=[pb.Dependency(task="a")])
    state = fresh()
    for data in writes.staged_workflow(spec, now_ms=T0, epoch=1, origin="n1", key=""):
        res = apply(state, data)
        assert res.ok, res.message
    assert state.store.get(keys.workflow_zone_key("big", 1)) is not None
