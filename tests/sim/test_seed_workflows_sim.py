"""The seeds' two example workflows (examples/workflows/api_to_warehouse.yaml, order_sync.yaml),
read unchanged from their files, applied to a simulated cluster and run to completion in
dependency order; and a scheduled workflow that excludes a calendar skips its fires."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftsched.testing import SimHarness
from raftsched.timing import calendar as cal
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.files import load_workflow_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "workflows"


def cluster() -> SimHarness:
    sim = SimHarness(["n1", "n2", "n3"], seed=7)
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=200)
    sim.add_executor("ex2", slots=4, duration_ms=200)
    return sim


def run_to_end(sim: SimHarness, workflow: str) -> pb.WorkflowRun:
    for _ in range(300):
        sim.run_for(100)
        runs = sim.workflow_runs(workflow)
        if runs and all(r.state != pb.WORKFLOW_RUNNING for r in runs):
            return runs[-1]
    raise AssertionError(f"{workflow} never finished")


def started(sim: SimHarness, workflow: str) -> dict[str, int]:
    """First execution start (ms) of each task of ``workflow``."""
    out: dict[str, int] = {}
    for ex in sim.executors.values():
        for exec_id, at in ex.executions:
            task = exec_id.split("@")[0]
            if task.startswith(workflow + "#"):
                name = task.split("#", 1)[1]
                out[name] = min(at, out.get(name, at))
    return out


@pytest.mark.parametrize(
    ("file", "order"),
    [
        ("api_to_warehouse.yaml", [("extract_api_data", "clean_data"), ("clean_data", "load_to_warehouse")]),
        (
            "order_sync.yaml",
            [
                ("extract_order", "validate_orders"),
                ("extract_order", "load_to_warehouse"),
                ("validate_orders", "load_to_warehouse"),
            ],
        ),
    ],
)
def test_seed_example_applies_unchanged_and_runs_in_dependency_order(
    file: str, order: list[tuple[str, str]]
) -> None:
    spec = load_workflow_file(EXAMPLES / file)
    sim = cluster()
    try:
        record = sim.write("apply_workflow", spec).workflow
        assert record.version == 1
        # The seed keys arrived as this format's fields.
        stored = record.spec
        if file == "api_to_warehouse.yaml":
            assert [t.runner for t in stored.tasks] == ["python"] * 3
            assert [t.max_retries for t in stored.tasks] == [3, 2, 1]
            assert [t.timeout_ms for t in stored.tasks] == [1_800_000, 1_200_000, 3_600_000]
            internal = sim.nodes["n1"].state.get_task("api_to_warehouse#extract_api_data")
            assert internal is not None and internal.spec.runner == "python"
        else:
            assert stored.schedule.expr == "0 2 * * *"
            assert [(t.resource_cpu, t.resource_memory_mb) for t in stored.tasks] == [
                (1.0, 1024),
                (0.5, 512),
                (1.0, 2048),
            ]
            internal = sim.nodes["n1"].state.get_task("order_sync#validate_orders")
            assert internal is not None and internal.spec.resource_memory_mb == 512
        sim.write("start_workflow_run", spec.name, 0, "")
        run = run_to_end(sim, spec.name)
        assert run.state == pb.WORKFLOW_SUCCESS, run
        assert {t.name: t.state for t in run.tasks} == {t.name: pb.TASK_SUCCESS for t in spec.tasks}
        first = started(sim, spec.name)
        for upstream, downstream in order:
            assert first[upstream] < first[downstream], (upstream, downstream, first)
        # Applying the same file again is no new version.
        assert not sim.write("apply_workflow", load_workflow_file(EXAMPLES / file)).changed
        assert len(set(sim.digests().values())) == 1
    finally:
        sim.close()


def test_a_scheduled_workflow_excluding_a_calendar_skips_its_fires() -> None:
    sim = cluster()
    try:
        every_day = pb.CalendarSpec(name="always", weekdays=cal.ALL_WEEKDAYS, zone="Europe/Berlin")
        sim.write("set_calendar", every_day)
        spec = pb.WorkflowSpec(name="wf", schedule=pb.CronTrigger(expr="* * * * * */2"), exclude=["always"])
        spec.tasks.add(name="a", command="a")
        sim.write("apply_workflow", spec)
        sim.run_for(10_000)
        fires = sim.fires("wf#")
        assert len(fires) >= 3
        assert {f.outcome for f in fires} == {pb.SKIPPED_CALENDAR}
        assert {f.calendar for f in fires} == {"always"}
        assert sim.workflow_runs("wf") == []
        # The calendar cannot be deleted while the workflow excludes it.
        with pytest.raises(Exception, match="workflow wf"):
            sim.write("delete_calendar", "always")
        assert len(set(sim.digests().values())) == 1
    finally:
        sim.close()
