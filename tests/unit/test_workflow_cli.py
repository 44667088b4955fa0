"""``raftsched workflow ...`` and the SDK's workflow methods against one scripted in-process gRPC
server: argument conversion, graph and status rendering, the backfill progress bar."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from raftsched import cli
from raftsched import client as client_module
from raftsched.cli import input as cli_input
from raftsched.cli import render, workflows
from raftsched.client import Client, params_to_json, to_epoch_ms
from raftsched.errors import InvalidSpec, InvalidWorkflow, NotFound
from raftsched.timing.clock import ManualClock
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

ADD_SERVICER: Any = pb_grpc.add_AdminServicer_to_server  # untyped generated code

NOW = 1_796_032_800_000  # 2026-11-30T10:00:00Z
DAY = 86_400_000
RUN_ID = f"etl@{NOW}"


def etl_spec() -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name="etl", schedule=pb.CronTrigger(expr="0 2 * * *", timezone="Europe/Berlin"))
    spec.tasks.add(name="extract", command="extract.sh {{ ds }}")
    spec.tasks.add(name="validate", command="validate.sh", depends_on=[pb.Dependency(task="extract")])
    spec.tasks.add(
        name="load",
        command="load.sh",
        max_retries=2,
        depends_on=[pb.Dependency(task="extract"), pb.Dependency(task="validate")],
    )
    spec.tasks.add(
        name="alert",
        handler="page",
        depends_on=[pb.Dependency(task="validate", condition=pb.ON_FAILURE)],
    )
    spec.tasks.add(
        name="cleanup",
        command="rm -rf /tmp/etl",
        trigger_rule=pb.RULE_ANY,
        depends_on=[
            pb.Dependency(task="load", condition=pb.ON_DONE),
            pb.Dependency(task="alert", condition=pb.ON_DONE),
        ],
    )
    return spec


def etl_run() -> pb.WorkflowRun:
    run = pb.WorkflowRun(
        run_id=RUN_ID, workflow="etl", version=3, logical_ms=NOW, state=pb.WORKFLOW_RUNNING, created_ms=NOW
    )
    states = {
        "extract": (pb.TASK_SUCCESS, ""),
        "validate": (pb.TASK_FAILED, "exit code 3"),
        "load": (pb.TASK_SKIPPED, "validate failed (needs success)"),
        "alert": (pb.TASK_RUNNING, ""),
        "cleanup": (pb.TASK_WAITING, ""),
    }
    for name, (state, reason) in states.items():
        task = run.tasks.add(
            name=name, state=state, reason=reason, tries=1 if state != pb.TASK_WAITING else 0
        )
        task.timeline.add(state=pb.TASK_WAITING, at_ms=NOW)
        if state != pb.TASK_WAITING:
            task.run_id = f"etl#{name}@{NOW}~m1"
            task.timeline.add(state=pb.TASK_RUNNING, at_ms=NOW + 1000)
        if state not in (pb.TASK_WAITING, pb.TASK_RUNNING):
            task.timeline.add(state=state, at_ms=NOW + 5000, reason=reason)
    return run


class FakeAdmin(pb_grpc.AdminServicer):  # type: ignore[misc, unused-ignore]  # Any when mypy skips generated code
    """Serves workflow ``etl`` (version 3), one run and one backfill that advances per poll."""

    def __init__(self) -> None:
        self.requests: list[Message] = []
        self.backfill_polls = [(0, 0), (4, 0), (9, 1), (12, 1)]

    def _not_found(self, context: Any, message: str) -> None:
        context.set_trailing_metadata((("raftsched-code", "not_found"),))
        context.abort(grpc.StatusCode.NOT_FOUND, message)

    def GetWorkflow(self, request: pb.GetWorkflowRequest, context: Any) -> pb.WorkflowReply:
        self.requests.append(request)
        if request.name != "etl":
            self._not_found(context, f"workflow {request.name!r} does not exist")
        return pb.WorkflowReply(
            workflow=pb.WorkflowRecord(spec=etl_spec(), version=request.version or 3, next_fire_ms=NOW + DAY)
        )

    def ListWorkflows(self, request: pb.ListWorkflowsRequest, context: Any) -> pb.ListWorkflowsReply:
        self.requests.append(request)
        return pb.ListWorkflowsReply(
            workflows=[pb.WorkflowRecord(spec=etl_spec(), version=3, runs_total=7, active_runs=1)]
        )

    def ApplyWorkflow(self, request: pb.ApplyWorkflowRequest, context: Any) -> pb.WorkflowReply:
        self.requests.append(request)
        if not request.spec.tasks:
            context.set_trailing_metadata((("raftsched-code", "invalid_argument"),))
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                str(InvalidWorkflow([("tasks", "at least one task"), ("", "no schedule")], "etl")),
            )
        return pb.WorkflowReply(workflow=pb.WorkflowRecord(spec=request.spec, version=4), changed=True)

    def StartWorkflowRun(self, request: pb.StartWorkflowRunRequest, context: Any) -> pb.WorkflowRunReply:
        self.requests.append(request)
        logical = request.logical_ms or NOW
        return pb.WorkflowRunReply(
            run=pb.WorkflowRun(run_id=f"etl@{logical}~m1", workflow="etl", version=3, logical_ms=logical)
        )

    def GetWorkflowRun(self, request: pb.GetWorkflowRunRequest, context: Any) -> pb.WorkflowRunReply:
        self.requests.append(request)
        if request.run_id != RUN_ID:
            self._not_found(context, f"workflow run {request.run_id!r} does not exist")
        return pb.WorkflowRunReply(run=etl_run())

    def ListWorkflowRuns(self, request: pb.ListWorkflowRunsRequest, context: Any) -> pb.ListWorkflowRunsReply:
        self.requests.append(request)
        return pb.ListWorkflowRunsReply(runs=[etl_run()])

    def OperateWorkflowRun(self, request: pb.WorkflowRunOpRequest, context: Any) -> pb.WorkflowRunReply:
        self.requests.append(request)
        if request.task and request.task not in {t.name for t in etl_spec().tasks}:
            self._not_found(context, f"workflow run {request.run_id!r} has no task {request.task!r}")
        run = etl_run()
        if request.op == pb.WorkflowRunOp.KILL:
            run.state = pb.WORKFLOW_KILLED
        if request.op == pb.WorkflowRunOp.RERUN:
            for t in run.tasks:
                if t.name in ("validate", "load", "alert", "cleanup"):
                    t.state = pb.TASK_WAITING
        return pb.WorkflowRunReply(run=run)

    def Backfill(self, request: pb.BackfillRequest, context: Any) -> pb.BackfillReply:
        self.requests.append(request)
        return pb.BackfillReply(backfill=self._backfill(0, 0))

    def GetBackfill(self, request: pb.GetBackfillRequest, context: Any) -> pb.BackfillReply:
        self.requests.append(request)
        finished, failed = (
            self.backfill_polls.pop(0) if len(self.backfill_polls) > 1 else self.backfill_polls[0]
        )
        return pb.BackfillReply(backfill=self._backfill(finished, failed))

    def ListBackfills(self, request: pb.ListBackfillsRequest, context: Any) -> pb.ListBackfillsReply:
        self.requests.append(request)
        return pb.ListBackfillsReply(backfills=[self._backfill(9, 1)])

    def Lineage(self, request: pb.LineageRequest, context: Any) -> pb.LineageReply:
        self.requests.append(request)
        return pb.LineageReply(
            upstream=[pb.LineageEntry(task="validate", depth=1), pb.LineageEntry(task="extract", depth=2)],
            downstream=[pb.LineageEntry(task="cleanup", depth=1)],
        )

    @staticmethod
    def _backfill(finished: int, failed: int) -> pb.BackfillRecord:
        return pb.BackfillRecord(
            backfill_id="etl~b1",
            workflow="etl",
            from_ms=NOW - 12 * DAY,
            to_ms=NOW,
            runs_total=12,
            runs_finished=finished,
            runs_failed=failed,
            finished_ms=NOW + 1 if finished == 12 else 0,
            share_pct=30,
        )


@pytest.fixture(autouse=True)
def pinned(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Pin the CLI's clock; record the CLI's and the client's waits instead of waiting."""
    waits: list[float] = []
    monkeypatch.setattr(cli_input, "SystemClock", lambda: ManualClock(NOW))
    monkeypatch.setattr(workflows, "_sleep", waits.append)
    monkeypatch.setattr(client_module, "_sleep", waits.append)
    monkeypatch.delenv(cli.CLUSTER_ENV, raising=False)
    return waits


@pytest.fixture
def admin() -> Iterator[tuple[FakeAdmin, str]]:
    servicer = FakeAdmin()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    ADD_SERVICER(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(grace=None)


def run(capsys: pytest.CaptureFixture[str], address: str, *argv: str) -> tuple[int, str, str]:
    status = cli.main(["--cluster", address, "workflow", *argv])
    out, err = capsys.readouterr()
    return status, out, err


# -- pure conversion and rendering ------------------------------------------------------------------


def test_progress_bar() -> None:
    assert render.progress_bar(12, 30, width=10) == "[####......] 12/30 runs"
    assert render.progress_bar(0, 30, width=10) == "[..........] 0/30 runs"
    assert render.progress_bar(29, 30, width=10) == "[#########.] 29/30 runs"  # never full before done
    assert render.progress_bar(30, 30, width=10) == "[##########] 30/30 runs"
    assert render.progress_bar(0, 0, width=4) == "[....] 0/0 runs"


def test_params_from_args_merges_pairs_over_the_json_object() -> None:
    assert cli_input.params_from_args("", []) == ""
    assert cli_input.params_from_args('{"a": 1}', []) == '{"a": 1}'
    merged = json.loads(cli_input.params_from_args('{"a": 1, "b": 2}', ["b=x", "c=d=e"]))
    assert merged == {"a": 1, "b": "x", "c": "d=e"}
    with pytest.raises(InvalidSpec) as bad:
        cli_input.params_from_args("", ["novalue"])
    assert bad.value.field == "param"
    with pytest.raises(InvalidSpec) as bad:
        cli_input.params_from_args("[1]", [])
    assert bad.value.field == "params"


def test_backfill_end_takes_a_bare_date_as_the_whole_day() -> None:
    def now() -> int:
        return NOW

    assert cli_input.backfill_end("2026-11-30", now) == NOW - 10 * 3_600_000 + DAY - 1
    assert cli_input.backfill_end("2026-11-30T10:00:00Z", now) == NOW
    assert cli_input.backfill_end("now", now) == NOW


def test_render_graph_of_a_definition() -> None:
    lines = render.render_graph(etl_spec(), 3)
    assert lines == [
        "workflow etl v3: 5 task(s), cron '0 2 * * *' Europe/Berlin",
        "layer 0",
        "  extract",
        "layer 1",
        "  validate  ← extract",
        "layer 2",
        "  load      ← extract, validate",
        "  alert     ← validate (on failure)",
        "layer 3",
        "  cleanup   ← any of: load (on done), alert (on done)",
    ]


def test_render_graph_of_a_run_marks_states() -> None:
    lines = render.render_graph(etl_spec(), 3, etl_run())
    assert lines[0] == f"workflow etl v3, run {RUN_ID}: running"
    assert "  validate  [failed]   ← extract ✓" in lines
    assert "  load      [skipped]  ← extract ✓, validate ✗" in lines
    assert "  alert     [running]  ← validate ✗ (on failure)" in lines
    assert "  cleanup   [waiting]  ← any of: load ⊘ (on done), alert ▶ (on done)" in lines
    assert lines[-1].startswith("✓ success  ✗ failed/timeout")
    ascii_lines = render.render_graph(etl_spec(), 3, etl_run(), ascii_only=True)
    assert "  load      [skipped]  <- extract ok, validate x" in ascii_lines
    assert all(line.isascii() for line in ascii_lines)


def test_render_status_shows_tasks_and_timelines() -> None:
    lines = render.render_status(etl_run())
    assert lines[0] == f"run {RUN_ID}: running"
    assert "workflow etl v3, scheduled, logical 2026-11-30T10:00:00Z" in lines[1]
    header = next(i for i, line in enumerate(lines) if line.startswith("TASK"))
    assert lines[header].split() == ["TASK", "STATE", "TRIES", "TASK", "RUN", "REASON"]
    assert lines[header + 2].split()[:4] == ["validate", "failed", "1", f"etl#validate@{NOW}~m1"]
    assert lines[header + 2].endswith("exit code 3")
    timeline = lines[lines.index("timeline (UTC)") :]
    assert timeline[1:5] == [
        "  extract",
        "    2026-11-30T10:00:00Z  waiting",
        "    2026-11-30T10:00:01Z  running",
        "    2026-11-30T10:00:05Z  success",
    ]
    assert "    2026-11-30T10:00:05Z  skipped  validate failed (needs success)" in timeline


# -- SDK argument conversion -------------------------------------------------------------------------


def test_to_epoch_ms() -> None:
    assert to_epoch_ms(NOW, "start") == NOW
    assert to_epoch_ms(dt.date(2026, 11, 30), "start") == NOW - 10 * 3_600_000
    assert to_epoch_ms(dt.date(2026, 11, 30), "end", end_of_day=True) == NOW - 10 * 3_600_000 + DAY - 1
    berlin = dt.datetime(2026, 11, 30, 11, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert to_epoch_ms(berlin, "start") == NOW
    with pytest.raises(InvalidSpec, match="no time zone"):
        to_epoch_ms(dt.datetime(2026, 11, 30), "start")
    with pytest.raises(InvalidSpec):
        to_epoch_ms(-1, "start")
    with pytest.raises(InvalidSpec):
        to_epoch_ms(True, "start")


def test_params_to_json() -> None:
    assert params_to_json(None) == ""
    assert params_to_json({"b": 1, "a": "x"}) == '{"a":"x","b":1}'
    assert params_to_json('{"a": 1}') == '{"a": 1}'
    with pytest.raises(InvalidSpec):
        params_to_json("[1]")
    with pytest.raises(InvalidSpec):
        params_to_json({"a": object()})


def test_client_sends_converted_arguments(admin: tuple[FakeAdmin, str]) -> None:
    servicer, address = admin
    with Client(address) as c:
        c.backfill("etl", dt.date(2026, 11, 1), dt.date(2026, 11, 30), {"full": True})
        c.start_workflow_run("etl", params={"x": 1})
        c.rerun_workflow_task(RUN_ID, "validate")
        c.mark_task_success(RUN_ID, "load", "fixed by hand")
        c.kill_workflow_run(RUN_ID)
        up, down = c.lineage("etl", "load")
    backfill, start, rerun, mark, kill, _ = servicer.requests
    assert isinstance(backfill, pb.BackfillRequest)
    assert (backfill.from_ms, backfill.to_ms) == (NOW - 29 * DAY - 36_000_000, NOW - 36_000_000 + DAY - 1)
    assert backfill.params_json == '{"full":true}' and backfill.idempotency_key
    assert isinstance(start, pb.StartWorkflowRunRequest) and start.params_json == '{"x":1}'
    assert isinstance(rerun, pb.WorkflowRunOpRequest) and (rerun.op, rerun.task) == (
        pb.WorkflowRunOp.RERUN,
        "validate",
    )
    assert isinstance(mark, pb.WorkflowRunOpRequest)
    assert (mark.op, mark.reason) == (pb.WorkflowRunOp.MARK_SUCCESS, "fixed by hand")
    assert isinstance(kill, pb.WorkflowRunOpRequest) and (kill.op, kill.task) == (pb.WorkflowRunOp.KILL, "")
    assert up == [("validate", 1), ("extract", 2)] and down == [("cleanup", 1)]


def test_client_rebuilds_invalid_workflow_and_not_found(admin: tuple[FakeAdmin, str]) -> None:
    _, address = admin
    with Client(address) as c:
        with pytest.raises(InvalidWorkflow) as bad:
            c.apply_workflow(pb.WorkflowSpec(name="etl"))
        assert bad.value.problems == [("tasks", "at least one task"), ("", "no schedule")]
        record, changed = c.apply_workflow(etl_spec())
        assert (record.version, changed) == (4, True)
        with pytest.raises(NotFound, match="no task 'lod'"):
            c.rerun_workflow_task(RUN_ID, "lod")


def test_wait_workflow_run_polls_until_finished(
    admin: tuple[FakeAdmin, str], pinned: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, address = admin
    clock = [0.0]
    monkeypatch.setattr(client_module, "_monotonic", lambda: clock[0])

    def advance(seconds: float) -> None:
        pinned.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(client_module, "_sleep", advance)
    with Client(address) as c, pytest.raises(TimeoutError, match="still WORKFLOW_RUNNING after 2s"):
        c.wait_workflow_run(RUN_ID, 2, poll_s=0.5)
    assert pinned == [0.5, 0.5, 0.5, 0.5]


# -- CLI commands ------------------------------------------------------------------------------------


def test_workflow_list_show_and_json(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, address = admin
    status, out, _ = run(capsys, address, "list")
    assert status == 0
    assert out.splitlines()[1].split()[:5] == ["etl", "3", "cron", "'0", "2"]
    status, out, _ = run(capsys, address, "show", "etl")
    assert status == 0
    assert "schedule          cron '0 2 * * *' Europe/Berlin" in out
    assert "backfill share    30% of executor slots" in out
    assert ["freshness", "none"] in [line.split() for line in out.splitlines()]
    row = next(line for line in out.splitlines() if line.startswith("alert"))
    assert row.split()[:5] == ["alert", "validate", "(on", "failure)", "all"] and "handler page" in row
    status, out, _ = run(capsys, address, "show", "etl", "--version", "2", "--json")
    assert json.loads(out)["version"] == 2


def test_workflow_graph_of_a_run_and_json(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]
) -> None:
    servicer, address = admin
    status, out, _ = run(capsys, address, "graph", RUN_ID, "--ascii")
    assert status == 0
    assert "  load      [skipped]  <- extract ok, validate x" in out.splitlines()
    fetched = [r for r in servicer.requests if isinstance(r, pb.GetWorkflowRequest)]
    assert fetched[-1].version == 3  # the run's own version
    status, out, _ = run(capsys, address, "graph", RUN_ID, "--json")
    data = json.loads(out)
    assert data["state"] == "running" and [len(layer) for layer in data["layers"]] == [1, 1, 2, 1]
    load = data["layers"][2][0]
    assert load["state"] == "skipped"
    assert load["depends_on"] == [
        {"task": "extract", "condition": "on_success"},
        {"task": "validate", "condition": "on_success"},
    ]


def test_workflow_status_and_unknown_run(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, address = admin
    status, out, _ = run(capsys, address, "status", RUN_ID)
    assert status == 0 and "validate failed (needs success)" in out
    status, out, err = run(capsys, address, "status", "etl@1")
    assert status == 1 and out == ""
    assert err == "raftsched: error: workflow run 'etl@1' does not exist\n"


def test_workflow_run_with_params_and_logical_time(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]
) -> None:
    servicer, address = admin
    status, out, _ = run(capsys, address, "run", "etl", "--logical", "-1d", "--param", "region=eu")
    assert status == 0 and out.startswith(f"started etl@{NOW - DAY}~m1 (workflow etl v3")
    sent = servicer.requests[-1]
    assert isinstance(sent, pb.StartWorkflowRunRequest)
    assert (sent.logical_ms, json.loads(sent.params_json)) == (NOW - DAY, {"region": "eu"})


def test_workflow_operations(admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]) -> None:
    _, address = admin
    assert run(capsys, address, "kill", RUN_ID)[1] == f"killed {RUN_ID}: killed\n"
    status, out, _ = run(capsys, address, "rerun", RUN_ID, "validate")
    assert status == 0
    assert out == f"rerunning validate in {RUN_ID}: 4 task(s) to run (validate, load, alert, cleanup)\n"
    status, out, _ = run(capsys, address, "mark-success", RUN_ID, "load", "--reason", "loaded by hand")
    assert status == 0 and out.startswith(f"marked load succeeded in {RUN_ID}")
    status, out, err = run(capsys, address, "rerun", RUN_ID, "lod")
    assert status == 1 and "has no task 'lod'" in err


def test_workflow_lineage(admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]) -> None:
    _, address = admin
    status, out, _ = run(capsys, address, "lineage", "etl", "load")
    assert status == 0
    assert out.splitlines() == [
        "upstream of load: 2 task(s)",
        "  1  validate",
        "  2    extract",
        "downstream of load: 1 task(s)",
        "  1  cleanup",
    ]
    data = json.loads(run(capsys, address, "lineage", "etl", "load", "--json")[1])
    assert data["upstream"] == [{"task": "validate", "depth": 1}, {"task": "extract", "depth": 2}]


def test_backfill_without_wait_says_how_to_watch(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]
) -> None:
    servicer, address = admin
    status, out, _ = run(capsys, address, "backfill", "etl", "--from", "2026-11-18", "--to", "2026-11-30")
    assert status == 0
    assert out.splitlines()[0].startswith("backfill etl~b1: 12 run(s) of etl")
    assert "raftsched workflow backfill-status etl~b1 --wait" in out
    sent = servicer.requests[-1]
    assert isinstance(sent, pb.BackfillRequest)
    midnight = NOW - 10 * 3_600_000
    assert (sent.from_ms, sent.to_ms) == (midnight - 12 * DAY, midnight + DAY - 1)


def test_backfill_wait_draws_progress_until_done(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str], pinned: list[float]
) -> None:
    _, address = admin
    status, out, err = run(capsys, address, "backfill", "etl", "--from", "-12d", "--to", "now", "--wait")
    lines = out.splitlines()
    assert lines[1:5] == [
        "[..............................] 0/12 runs",
        "[##########....................] 4/12 runs",
        "[######################........] 9/12 runs, 1 failed",
        "[##############################] 12/12 runs, 1 failed",
    ]
    assert lines[5].startswith("backfill etl~b1 (etl, ") and "12/12 runs finished, 1 failed" in lines[5]
    assert pinned == [workflows.BACKFILL_POLL_S] * 4
    assert status == 1 and err == "raftsched: error: backfill etl~b1: 1 run(s) failed\n"


def test_backfills_table(admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]) -> None:
    _, address = admin
    status, out, _ = run(capsys, address, "backfills", "etl")
    assert status == 0
    assert out.splitlines()[1].split()[:5] == [
        "etl~b1",
        "2026-11-18T10:00:00Z",
        "2026-11-30T10:00:00Z",
        "[#######...]",
        "9/12",
    ]


def test_backfill_options_are_required(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "127.0.0.1:1", "backfill", "etl", "--from", "2026-01-01")
    assert status == 2 and "--to" in err and len(err.splitlines()) == 1


def test_invalid_workflow_file_lists_every_problem_without_a_cluster(
    capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "name: bad\n"
        "tasks:\n"
        "  - name: a\n"
        "    command: echo a\n"
        "    depends_on: [c]\n"
        "  - name: b\n"
        "    command: echo {{ dss }}\n"
        "    depends_on: [a, nope]\n"
        "  - name: c\n"
        "    command: echo c\n"
        "    depends_on: [b]\n"
    )
    status, out, err = run(capsys, "127.0.0.1:1", "apply", str(path))  # never dialled
    assert status == 2 and out == ""
    assert "Traceback" not in err
    head, *problems = err.splitlines()
    assert head == 'raftsched: error: invalid workflow "bad": 3 problems'
    assert all(line.startswith(f"  {path}:") for line in problems), problems
    assert any(":8:" in line and '"nope"' in line for line in problems)
    assert any(":7:" in line and "dss" in line for line in problems)
    assert any("cycle: " in line for line in problems)


def test_apply_dry_run_and_apply(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    servicer, address = admin
    path = tmp_path / "etl.toml"
    path.write_text(
        'name = "etl"\nschedule = "0 2 * * *"\ntimezone = "Europe/Berlin"\n\n'
        '[[tasks]]\nname = "extract"\ncommand = "extract.sh {{ ds }}"\n\n'
        '[[tasks]]\nname = "load"\ncommand = "load.sh"\ndepends_on = ["extract"]\n'
    )
    status, out, _ = run(capsys, "127.0.0.1:1", "apply", str(path), "--dry-run")
    assert status == 0 and out == f"{path}: workflow etl is valid (2 tasks; not applied)\n"
    status, out, _ = run(capsys, address, "apply", str(path))
    assert status == 0 and out.startswith("applied workflow etl: version 4\n")
    sent = servicer.requests[-1]
    assert isinstance(sent, pb.ApplyWorkflowRequest) and sent.idempotency_key
    assert sent.spec.schedule == pb.CronTrigger(expr="0 2 * * *", timezone="Europe/Berlin")
    assert [d.task for d in sent.spec.tasks[1].depends_on] == ["extract"]
