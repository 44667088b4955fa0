"""Issue 36 §1-2 in units: the windowed quantile, [alerts.start_delay], the monitor's levels, SLA
and freshness keys and states, what apply raises and keeps, task files, explain, and the command
format that gates it all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from raftsched import codec
from raftsched.alerts.config import AlertsConfig, StartDelayConfig, StartDelayLevels, parse_alerts
from raftsched.alerts.delivery import detect_sla, workflow_run_view
from raftsched.alerts.monitor import AlertMonitor, SlaTask, StartDelay, StartDelays
from raftsched.errors import InvalidSpec
from raftsched.explain import sla_details
from raftsched.fsm import alerts as outbox
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.timing import sla
from raftsched.timing.quantile import WindowedQuantile, ppm
from raftsched.v1 import log_pb2 as pb
from raftsched.workflow.files import parse_workflow_text
from raftsched.workflow.taskfiles import InvalidTaskFile, parse_task_text
from tests.support.fsm import (
    EVERY_SECOND,
    T0,
    S,
    W,
    apply,
    apply_wf,
    assign,
    command,
    complete,
    create,
    etl_spec,
    fresh,
    join,
    record,
    result,
    start,
    tick,
)

M = 60 * S


def events(state: SchedulerState, kind: str) -> list[pb.AlertRecord]:
    with state.store.reader() as r:
        return [a for a in outbox.list_alerts(r, 0, 0) if a.kind == kind]


# -- the windowed quantile ----------------------------------------------------------------------


def test_quantile_is_the_nearest_rank_over_the_window() -> None:
    w = WindowedQuantile(300_000, slots=30)
    for v in range(100, 0, -1):
        w.add(T0, v)
    assert w.quantile(ppm(0.95), T0) == (100, 95)
    assert w.quantile(ppm(0.5), T0) == (100, 50)
    assert w.quantile(ppm(1.0), T0) == (100, 100)
    assert w.quantile(ppm(0.001), T0) == (100, 1)


def test_quantile_drops_what_left_the_window_and_waits_for_later_samples() -> None:
    w = WindowedQuantile(60_000, slots=6)  # 10 s slots
    w.add(T0, 1000)
    w.add(T0 + 30_000, 5)
    w.add(T0 + 120_000, 7)  # a later slot than the query's: not counted yet
    assert w.quantile(ppm(0.99), T0 + 30_000) == (2, 1000)
    assert w.quantile(ppm(0.99), T0 + 65_000) == (1, 5)  # T0's slot left the window
    assert w.quantile(ppm(0.99), T0 + 125_000) == (1, 7)
    assert w.quantile(ppm(0.99), T0 + 10**7) == (0, None)
    with pytest.raises(ValueError):
        WindowedQuantile(0)


# -- config -------------------------------------------------------------------------------------


def test_start_delay_config_has_documented_defaults_and_per_namespace_overrides(tmp_path: Path) -> None:
    problems: list[str] = []
    assert parse_alerts({}, tmp_path, problems).start_delay.default == StartDelayLevels(
        0.95, 300_000, 120_000, 300_000
    )
    cfg = parse_alerts(
        {
            "start_delay": {
                "quantile": 0.9,
                "warning": "1m",
                "namespaces": {"batch": {"critical": "30m"}, "web": {"window": 60}},
            }
        },
        tmp_path,
        problems,
    )
    assert problems == [] and cfg.deprecated == ()
    sd = cfg.start_delay
    assert sd.default == StartDelayLevels(0.9, 300_000, 60_000, 300_000)
    assert sd.for_namespace("batch") == StartDelayLevels(0.9, 300_000, 60_000, 1_800_000)
    assert sd.for_namespace("web").window_ms == 60_000
    assert sd.for_namespace("other") == sd.default


def test_start_delay_config_reports_every_problem_with_its_key_path(tmp_path: Path) -> None:
    problems: list[str] = []
    parse_alerts(
        {
            "delay_p99_threshold": "2s",
            "start_delay": {
                "quantile": 1.5,
                "warning": "10m",
                "bogus": 1,
                "namespaces": {"etl": {"critical": "soon", "namespaces": {}}},
            },
        },
        tmp_path,
        problems,
    )
    text = "\n".join(problems)
    assert "alerts.delay_p99_threshold: deprecated and replaced by [alerts.start_delay]" in text
    assert "alerts.start_delay.quantile: expected a number in (0, 1]" in text
    assert "alerts.start_delay: warning (600s) must not be above critical (300s)" in text
    assert "alerts.start_delay.bogus: unknown key" in text
    assert "alerts.start_delay.namespaces.etl.critical:" in text
    assert "alerts.start_delay.namespaces.etl.namespaces: unknown key" in text


# -- the monitor --------------------------------------------------------------------------------


def test_start_delay_raises_the_higher_level_once_per_namespace_level_and_window() -> None:
    monitor = AlertMonitor(AlertsConfig())
    levels = StartDelayLevels()
    measured = [
        StartDelay("web", levels, 10, 90_000),  # below warning
        StartDelay("etl", levels, 10, 3 * M),
        StartDelay("ml", levels, 10, 6 * M),
    ]
    got = monitor.start_delay(measured, T0)
    assert [(a.namespace, a.severity, a.kind) for a in got] == [
        ("etl", "warning", "start_delay"),
        ("ml", "critical", "start_delay"),
    ]
    assert monitor.start_delay(measured, T0 + 1000) == []  # the same window
    assert len(monitor.start_delay(measured, T0 + 300_000)) == 2  # the next window


def test_start_delays_measure_each_namespace_with_its_own_levels() -> None:
    delays = StartDelays(StartDelayConfig(namespaces=(("batch", StartDelayLevels(quantile=0.5)),)))
    for late in (1000, 2000, 3000, 400_000):
        delays.record(T0, "batch", late)
        delays.record(T0, "web", late)
    got = {m.namespace: (m.count, m.delay_ms) for m in delays.measure(T0)}
    assert got == {"batch": (4, 2000), "web": (4, 400_000)}


def sla_task(**kw: object) -> SlaTask:
    base: dict[str, object] = dict(
        name="t",
        owner="ops",
        namespace="default",
        enabled=True,
        created_ms=T0,
        last_success_ms=0,
        last_success_run="",
        start_within_ms=0,
        finish_within_ms=0,
        freshness_ms=0,
    )
    base.update(kw)
    return SlaTask(**base)  # type: ignore[arg-type]


def test_freshness_miss_is_one_key_per_stale_stretch() -> None:
    monitor = AlertMonitor(AlertsConfig())
    task = sla_task(freshness_ms=10 * M)
    assert monitor.sla_misses([task], [], T0 + 10 * M) == []
    [miss] = monitor.sla_misses([task], [], T0 + 11 * M)
    assert miss.dedupe == f"freshness/t/{T0}" and "missed by 1m 0s" in miss.error and miss.owner == "ops"
    assert monitor.sla_misses([task], [], T0 + 20 * M) == []  # the same stretch
    later = sla_task(freshness_ms=10 * M, last_success_ms=T0 + 30 * M, last_success_run="t@1")
    [again] = monitor.sla_misses([later], [], T0 + 41 * M)
    assert again.dedupe == f"freshness/t/{T0 + 30 * M}" and "since its last success (t@1)" in again.error


def test_a_run_past_its_deadline_is_one_miss_per_sla() -> None:
    monitor = AlertMonitor(AlertsConfig())
    task = sla_task(start_within_ms=5 * M, finish_within_ms=30 * M)
    run = pb.Run(run_id=f"t@{T0}", task="t", nominal_ms=T0, state=pb.PENDING, shards=[pb.ShardAttempt()])
    assert monitor.sla_misses([task], [run], T0 + 5 * M) == []
    [start] = monitor.sla_misses([task], [run], T0 + 6 * M)
    assert start.dedupe == f"sla/t@{T0}/start" and "missed by 1m 0s" in start.error
    run.shards[0].assigned_ms = T0 + 7 * M
    run.state = pb.RUNNING
    [finish] = monitor.sla_misses([task], [run], T0 + 31 * M)
    assert finish.dedupe == f"sla/t@{T0}/finish"


def test_sla_states_for_explain() -> None:
    run = pb.Run(run_id="r", nominal_ms=T0, state=pb.RUNNING)
    run.timeline.add(event="started", at_ms=T0 + 2 * M)
    assert sla.start_state(run, 5 * M, T0 + 9 * M) == "met"
    assert sla.finish_state(run, 30 * M, T0 + 9 * M) == "pending"
    assert sla.finish_state(run, 30 * M, T0 + 35 * M) == "missed by 5m 0s"
    run.state, run.finished_ms = pb.FAILED, T0 + 10 * M
    assert sla.finish_state(run, 30 * M, T0 + 35 * M) == "missed: FAILED"
    rec = pb.TaskRecord(created_ms=T0, last_success_ms=T0 + M)
    rec.spec.name = "t"
    rec.spec.sla_start_within_ms = 5 * M
    rec.spec.freshness_ms = 10 * M
    assert sla_details(rec, run, T0 + 12 * M) == [
        "sla.start_within 5m 0s for run r: met",
        "freshness 10m 0s: missed by 1m 0s (last success 2023-11-14T22:15:00.000Z)",
    ]


# -- apply --------------------------------------------------------------------------------------


def started_late(state: SchedulerState, run_id: str, lateness: int, now: int, ok: bool = True) -> None:
    assert apply(state, assign(now - 1, (run_id, 0, 1, "ex1"))).ok
    assert apply(state, result(now, run_id, 1, "ex1", ok, start_lateness_ms=lateness)).accounted == 1


def test_apply_raises_a_late_start_once_and_feeds_the_start_delay_sink() -> None:
    state = fresh()
    samples: list[tuple[int, str, int]] = []
    state.on_start = lambda at, ns, late: samples.append((at, ns, late))
    spec = TaskSpec("t", EVERY_SECOND, command="x", owner="ops", namespace="etl", sla_start_within_ms=M)
    assert create(state, spec).ok and apply(state, join("ex1")).ok
    assert apply(state, tick("t", 1, T0 + S)).fired == 1
    started_late(state, f"t@{T0 + S}", 90 * S, T0 + 100 * S)
    [miss] = events(state, "sla_missed")
    assert miss.dedupe == f"sla/t@{T0 + S}/start" and miss.owner == "ops" and miss.namespace == "etl"
    assert "run started 30s late: 1m 30s after its nominal time" in miss.error
    assert samples == [(T0 + 100 * S, "etl", 90 * S)]


def test_apply_keeps_the_last_success_only_for_tasks_with_an_sla_and_resolves_freshness() -> None:
    state = fresh()
    assert create(state, TaskSpec("plain", EVERY_SECOND, command="x")).ok
    assert create(state, TaskSpec("kept", EVERY_SECOND, command="x", freshness_ms=M)).ok
    assert apply(state, join("ex1")).ok
    assert apply(state, tick("plain", 1, T0 + S)).fired == 1
    assert apply(state, tick("kept", 1, T0 + S)).fired == 1
    # The leader found the freshness miss of the stretch that began at creation:
    stale = pb.AlertRecord(kind="freshness", dedupe=sla.freshness_key("kept", T0), task="kept")
    assert apply(state, writes.raise_alerts([stale], now_ms=T0 + 2 * M, epoch=1, origin="n1", key="")).ok
    started_late(state, f"plain@{T0 + S}", 0, T0 + 3 * M)
    started_late(state, f"kept@{T0 + S}", 0, T0 + 3 * M)
    assert record(state, "plain").last_success_ms == 0  # its record's bytes are as before
    kept = record(state, "kept")
    assert (kept.last_success_ms, kept.last_success_run) == (T0 + 3 * M, f"kept@{T0 + S}")
    miss, resolved = events(state, "freshness")
    assert resolved.resolved and resolved.dedupe == miss.dedupe + "/resolved"


def test_a_definition_with_an_sla_and_the_new_alert_kinds_need_the_sla_format() -> None:
    stamp: dict[str, Any] = {"now_ms": T0, "epoch": 1, "origin": "n1", "key": ""}
    plain = pb.Command.FromString(
        writes.create_task(TaskSpec("a", ManualTrigger(), command="x"), disabled=False, **stamp)
    )
    with_sla = pb.Command.FromString(
        writes.create_task(
            TaskSpec("a", ManualTrigger(), command="x", freshness_ms=M), disabled=False, **stamp
        )
    )
    assert plain.format < codec.SLA_FORMAT == with_sla.format
    zombie = pb.Command.FromString(writes.raise_alerts([pb.AlertRecord(kind="zombie", dedupe="z")], **stamp))
    late = pb.Command.FromString(
        writes.raise_alerts([pb.AlertRecord(kind="start_delay", dedupe="s")], **stamp)
    )
    assert zombie.format < codec.SLA_FORMAT == late.format


# -- task files ---------------------------------------------------------------------------------


def test_task_files_read_sla_and_freshness() -> None:
    text = (
        "tasks:\n"
        "  - name: report\n"
        "    command: x\n"
        "    sla: {start_within: 5m, finish_within: 30m}\n"
        "    freshness: 25h\n"
    )
    [(spec, _)] = parse_task_text(text, "yaml", "t.yaml").tasks
    assert (spec.sla_start_within_ms, spec.sla_finish_within_ms, spec.freshness_ms) == (
        5 * M,
        30 * M,
        25 * 60 * M,
    )
    with pytest.raises(InvalidTaskFile) as bad:
        parse_task_text("tasks:\n  - name: r\n    command: x\n    sla: {start_in: 5m}\n", "yaml", "t.yaml")
    assert "sla" in str(bad.value) and "start_in" in str(bad.value)
    with pytest.raises(InvalidSpec, match="freshness"):
        TaskSpec("r", command="x", freshness_ms=-1)


# -- workflows ----------------------------------------------------------------------------------


def test_a_workflows_freshness_miss_and_its_resolution() -> None:
    state = fresh()
    spec = etl_spec(freshness_ms=10 * M, sla_finish_within_ms=5 * M)
    cmd = command(T0)
    cmd.apply_workflow.spec.CopyFrom(spec)
    assert codec.command_format(cmd) == codec.SLA_FORMAT
    assert apply_wf(state, spec).ok and apply(state, join("x1")).ok
    monitor = AlertMonitor(AlertsConfig())
    assert detect_sla(monitor, state, T0 + 10 * M) == []
    [stale] = detect_sla(monitor, state, T0 + 11 * M)
    assert (stale.kind, stale.workflow, stale.task) == ("freshness", W, "")
    assert stale.dedupe == f"freshness/workflow:{W}/{T0}" and "since it was created" in stale.error
    assert apply(state, writes.raise_alerts([stale], now_ms=T0 + 11 * M, epoch=1, origin="n1", key="")).ok
    wr = start(state, now=T0 + 11 * M, logical=T0)
    for name in ("extract", "validate", "load"):
        assert complete(state, wr.run_id, name, now=T0 + 12 * M).ok
    miss, resolved = events(state, "freshness")
    assert miss.id == events(state, "freshness")[0].id
    assert resolved.resolved and resolved.dedupe == stale.dedupe + "/resolved" and resolved.workflow == W
    record_ = state.get_workflow(W)
    assert record_ is not None and record_.last_success_ms == T0 + 12 * M
    assert events(state, "sla_missed") == []  # a manual run has no finish SLA


def test_a_workflow_runs_start_is_its_first_task_launched() -> None:
    wr = pb.WorkflowRun(run_id="wf@1", workflow="wf", logical_ms=T0, state=pb.WORKFLOW_RUNNING)
    task = wr.tasks.add(name="a")
    view = workflow_run_view("workflow:wf", wr)
    assert sla.start_state(view, 5 * M, T0 + 4 * M) == "pending"
    assert sla.start_state(view, 5 * M, T0 + 6 * M) == "missed by 1m 0s"
    task.timeline.add(state=pb.TASK_RUNNING, at_ms=T0 + 7 * M)
    view = workflow_run_view("workflow:wf", wr)
    assert sla.start_state(view, 5 * M, T0 + 9 * M) == "missed by 2m 0s"
    monitor = AlertMonitor(AlertsConfig())
    t = sla_task(name="workflow:wf", start_within_ms=5 * M, workflow=True)
    [miss] = monitor.sla_misses([t], [workflow_run_view("workflow:wf", wr)], T0 + 9 * M)
    assert (miss.workflow, miss.workflow_run, miss.run_id, miss.task) == ("wf", "wf@1", "wf@1", "")
    assert miss.dedupe == "sla/workflow:wf@1/start"


def test_workflow_files_read_sla_and_freshness() -> None:
    text = (
        "name: orders\nschedule: '0 6 * * *'\nsla: {start_within: 10m, finish_within: 1h}\n"
        "freshness: 25h\ntasks:\n  - name: a\n    command: x\n"
    )
    spec = parse_workflow_text(text, "yaml", "w.yaml")
    assert (spec.sla_start_within_ms, spec.sla_finish_within_ms, spec.freshness_ms) == (
        10 * M,
        60 * M,
        25 * 60 * M,
    )
    with pytest.raises(InvalidSpec) as bad:
        parse_workflow_text(text.replace("finish_within", "finish_by"), "yaml", "w.yaml")
    assert "finish_by" in str(bad.value)


def test_a_workflows_sla_and_freshness_states_for_explain_and_the_console() -> None:
    """Issue 36 §2: explain and the console show a workflow's SLA state too (they showed a
    task's only): start and finish for a scheduled run, none for a manual run or a backfill's,
    and the workflow's freshness."""
    from raftsched.explain import workflow_sla_details

    H = 60 * M
    spec = pb.WorkflowSpec(name="w", sla_start_within_ms=5 * M, sla_finish_within_ms=30 * M, freshness_ms=H)
    current = pb.WorkflowRecord(spec=spec, created_ms=T0 - 2 * H, last_success_ms=T0 - 90 * M)
    running = pb.WorkflowRun(run_id="w@1", workflow="w", logical_ms=T0, state=pb.WORKFLOW_RUNNING)
    started = running.tasks.add(name="a", state=pb.TASK_RUNNING)
    started.timeline.add(state=pb.TASK_RUNNING, at_ms=T0 + 7 * M)
    lines = workflow_sla_details(current, running, T0 + 10 * M)
    assert lines[0] == "sla.start_within 5m 0s for run w@1: missed by 2m 0s"
    assert lines[1] == "sla.finish_within 30m 0s for run w@1: pending"
    assert lines[2].startswith("freshness 1h 0m 0s: missed by 40m 0s (last success "), lines[2]
    manual = pb.WorkflowRun(run_id="w@1~m1", workflow="w", logical_ms=T0, manual=True)
    assert "not for run w@1~m1 (manual or backfill)" in workflow_sla_details(current, manual, T0)[0]
