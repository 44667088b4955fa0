"""Issue 28, the rest: why a workflow task waits (``workflow explain``), the SDK's
``workflow_waits`` and transitive ``cross_lineage``, and the cross-workflow edge cases - an
upstream re-applied without the task an edge names, an upstream run pruned before the downstream
started, a timed-out edge rerun against the current upstream.

The state machine is the real one (tests.support.fsm, on explicit times); the SDK and CLI reach it
through a small in-process gRPC servicer that answers the read RPCs from that state."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from raftsched import cli, codec
from raftsched.client import Client
from raftsched.errors import NotFound
from raftsched.explain import WorkflowTaskExplanation, explain_from_reads, explain_workflow_task
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb
from raftsched.v1 import raftsched_pb2 as api
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc
from raftsched.workflow.dag import LINEAGE_MAX_NODES, cross_workflow_lineage
from tests.support.fsm import T0, S, apply, apply_wf, command, complete, fresh, join, op, task_states

DAY = 86_400_000
HOUR = 3_600_000
UP, DOWN = "orders-sync", "reconcile"
ADD_SERVICER: Any = pb_grpc.add_AdminServicer_to_server


def up_spec(*, keep_runs: int = 0, with_load: bool = True) -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name=UP, namespace="a", owner="A", keep_runs=keep_runs)
    spec.tasks.add(name="extract", command="extract {{ ds }}")
    if with_load:
        spec.tasks.add(name="load", command="load {{ ds }}", depends_on=[pb.Dependency(task="extract")])
    return spec


def down_spec(*deps: pb.Dependency) -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name=DOWN, namespace="b", owner="B", warn_after_ms=8 * 60_000)
    spec.tasks.add(name="prep", command="prep")
    spec.tasks.add(
        name="reconcile",
        command="reconcile {{ ds }}",
        depends_on=[pb.Dependency(task="prep"), *(deps or [pb.Dependency(workflow=UP)])],
    )
    return spec


def setup(*deps: pb.Dependency, keep_runs: int = 0) -> SchedulerState:
    state = fresh()
    apply(state, join("x1", slots=64))
    assert apply_wf(state, up_spec(keep_runs=keep_runs)).ok
    res = apply_wf(state, down_spec(*deps))
    assert res.ok, res.message
    return state


def start_wf(state: SchedulerState, workflow: str, logical: int = T0, now: int = T0) -> str:
    cmd = command(now)
    cmd.start_workflow_run.workflow = workflow
    cmd.start_workflow_run.logical_ms = logical
    res = apply(state, codec.encode_command(cmd))
    assert res.ok, res.message
    return res.workflow_run.run_id


def waits_due(state: SchedulerState, now: int) -> pb.CommandResult:
    cmd = command(now)
    cmd.workflow_waits_due.SetInParent()
    return apply(state, codec.encode_command(cmd))


def finish_up(state: SchedulerState, run_id: str, ok: bool = True, now: int = T0) -> None:
    complete(state, run_id, "extract", now=now)
    complete(state, run_id, "load", ok=ok, now=now, error="" if ok else "boom")


def explain(state: SchedulerState, run_id: str, task: str, now: int) -> WorkflowTaskExplanation:
    """What the ExplainWorkflowTask RPC answers, from the state."""
    return explain_from_reads(state, run_id, task, now)


# -- explain --------------------------------------------------------------------------------------


def test_explain_names_unmet_local_and_cross_workflow_dependencies_with_deadlines() -> None:
    state = setup(
        pb.Dependency(workflow=UP, task="load", timeout_ms=3 * HOUR, on_timeout=pb.UPSTREAM_TIMEOUT_SKIP)
    )
    down = start_wf(state, DOWN)
    got = explain(state, down, "reconcile", T0 + HOUR)
    assert "WAITING for 1 local dependency(ies) and 1 cross-workflow edge(s)" in got.verdict
    text = "\n".join(got.details)
    assert "local dependency 'prep' is RUNNING" in text
    assert "orders-sync:load at logical time 2023-11-14T22:14:00Z (needs success)" in text
    assert "times out at 2023-11-15T01:14:00Z in 2h (on_timeout: skip)" in text
    assert "upstream_late warning at 2023-11-14T22:22:00Z" in text  # the workflow's warn_after
    assert (
        'no run of "orders-sync" at logical time 2023-11-14T22:14:00Z is stored: it has not started yet'
        in text
    )
    (wait,) = got.waits
    assert wait["upstream"] == UP and wait["upstream_task"] == "load" and wait["upstream_logical_ms"] == T0
    assert wait["timeout_at_ms"] == T0 + 3 * HOUR and wait["on_timeout"] == "skip"
    assert json.loads(json.dumps(got.to_dict()))["waits"][0]["since_ms"] == T0
    # The upstream runs: explain says how far it is.
    complete(state, down, "prep")
    up = start_wf(state, UP)
    got = explain(state, down, "reconcile", T0 + HOUR)
    assert "WAITING for 0 local dependency(ies) and 1 cross-workflow edge(s)" in got.verdict
    assert f"run {up} is running, its task 'load' waiting" in "\n".join(got.details)
    finish_up(state, up)
    got = explain(state, down, "reconcile", T0 + HOUR)
    assert "is RUNNING: task run" in got.verdict


def test_explain_a_held_task_says_until_when_and_its_jitter_and_a_ready_one_its_limit() -> None:
    state = fresh()
    apply(state, join("x1", slots=64))
    spec = pb.WorkflowSpec(name="gated", max_parallel=1, jitter_ms=10 * 60_000)
    spec.tasks.add(name="a", command="a", not_before="+30m")
    spec.tasks.add(name="b", command="b")
    assert apply_wf(state, spec).ok
    run_id = start_wf(state, "gated")  # manual: no jitter
    run = state.get_workflow_run(run_id)
    assert run is not None
    record = state.get_workflow("gated")
    assert record is not None
    got = explain_workflow_task(
        run, record.spec, "a", upstream_records={}, upstream_runs={}, now_ms=T0 + 60_000
    )
    assert got.verdict == f"task a of {run_id} is WAITING: held until 2023-11-14T22:44:00Z (in 29m)"
    assert "earliest start: not_before '+30m'" in "\n".join(got.details)
    got = explain_workflow_task(run, record.spec, "b", upstream_records={}, upstream_runs={}, now_ms=T0)
    assert "READY" in got.verdict and "max_parallel 1" in got.verdict
    # A scheduled run shows the workflow's jitter offset.
    run.manual = False
    got = explain_workflow_task(run, record.spec, "a", upstream_records={}, upstream_runs={}, now_ms=T0)
    assert any(
        line.startswith("jitter 10m: this scheduled run's tasks start at or after") for line in got.details
    )
    # Attempts of the task run held back by a pool, a lock or a quota say so.
    task_run = api.Run(
        run_id="x",
        shards=[api.ShardAttempt(shard=0, attempt=1, state=api.PENDING, waiting="pool db full (2/2 slots)")],
    )
    got = explain_workflow_task(
        run, record.spec, "a", upstream_records={}, upstream_runs={}, task_run=task_run, now_ms=T0 + HOUR
    )
    assert "waiting: pool db full (2/2 slots)" in got.verdict
    assert "shard 0 attempt 1 waiting since -: pool db full (2/2 slots)" in got.details


# -- edge cases -----------------------------------------------------------------------------------


def test_an_upstream_reapplied_without_the_task_an_edge_names_leaves_the_edge_waiting_until_timeout() -> None:
    state = setup(pb.Dependency(workflow=UP, task="load", timeout_ms=HOUR))
    down = start_wf(state, DOWN)
    complete(state, down, "prep")
    assert apply_wf(state, up_spec(with_load=False), now=T0 + S).ok  # version 2: no "load"
    up = start_wf(state, UP, now=T0 + S)
    complete(state, up, "extract", now=T0 + 2 * S)
    final = state.get_workflow_run(up)
    assert final is not None and final.state == pb.WORKFLOW_SUCCESS
    assert task_states(state, down)["reconcile"] == "WAITING"  # version 2 never decides it
    got = explain(state, down, "reconcile", T0 + 3 * S)
    assert 'upstream task "load" no longer exists in version 2 of "orders-sync"' in "\n".join(got.details)
    assert waits_due(state, T0 + HOUR).accounted == 1
    wr = state.get_workflow_run(down)
    assert wr is not None
    assert wr.tasks[1].state == pb.TASK_FAILED and "did not finish within 1h" in wr.tasks[1].reason


def test_an_upstream_run_pruned_before_the_downstream_started_meets_nothing_and_explain_says_why() -> None:
    state = setup(keep_runs=1)
    for day in range(3):  # keep_runs 1: the run of T0 is pruned by the later ones
        up = start_wf(state, UP, logical=T0 + day * DAY, now=T0 + day * DAY)
        finish_up(state, up, now=T0 + day * DAY)
    kept = state.list_workflow_runs(UP, limit=1000)
    assert T0 not in [r.logical_ms for r in kept]
    down = start_wf(state, DOWN, logical=T0, now=T0 + 3 * DAY)
    complete(state, down, "prep", now=T0 + 3 * DAY)
    assert task_states(state, down)["reconcile"] == "WAITING"  # the pruned run decides nothing
    got = explain(state, down, "reconcile", T0 + 3 * DAY)
    assert "it ran and history retention pruned it" in "\n".join(got.details)
    again = start_wf(state, UP, logical=T0, now=T0 + 3 * DAY)  # the documented way out
    finish_up(state, again, now=T0 + 3 * DAY)
    assert task_states(state, down)["reconcile"] == "RUNNING"


def leader_op(state: SchedulerState, kind: int, run_id: str, task: str, now: int) -> pb.CommandResult:
    """A run operation as the leader's servicer builds it (writes.workflow_run_op)."""
    data = writes.workflow_run_op(state, kind, run_id, task, "", now_ms=now, epoch=1, origin="n1", key="")
    return apply(state, data)


def test_a_timed_out_edge_rerun_is_decided_again_against_the_current_upstream() -> None:
    state = setup(pb.Dependency(workflow=UP, timeout_ms=HOUR))
    down = start_wf(state, DOWN)
    complete(state, down, "prep")
    waits_due(state, T0 + HOUR)
    wr = state.get_workflow_run(down)
    assert wr is not None and wr.tasks[1].state == pb.TASK_FAILED and wr.state == pb.WORKFLOW_FAILED
    up = start_wf(state, UP, now=T0 + HOUR)
    finish_up(state, up, ok=False, now=T0 + HOUR + S)  # the upstream failed since
    assert leader_op(state, pb.WorkflowRunOp.RERUN, down, "reconcile", now=T0 + 2 * HOUR).ok
    wr = state.get_workflow_run(down)
    assert wr is not None
    task = wr.tasks[1]
    assert task.state == pb.TASK_SKIPPED and up in task.reason and "needs success: not met" in task.reason
    assert task.external[0].state == pb.EXTERNAL_UNMET and task.external[0].upstream_run == up
    # A rerun of the upstream that succeeds, then of the downstream task: met now.
    assert op(state, pb.WorkflowRunOp.RERUN, up, "load", now=T0 + 3 * HOUR).ok
    complete(state, up, "load", now=T0 + 3 * HOUR)
    assert leader_op(state, pb.WorkflowRunOp.RERUN, down, "reconcile", now=T0 + 4 * HOUR).ok
    assert task_states(state, down)["reconcile"] == "RUNNING"
    complete(state, down, "reconcile", now=T0 + 4 * HOUR)
    # A met edge stays met on a later rerun: it runs at once.
    assert leader_op(state, pb.WorkflowRunOp.RERUN, down, "reconcile", now=T0 + 5 * HOUR).ok
    wr = state.get_workflow_run(down)
    assert wr is not None and wr.tasks[1].state == pb.TASK_RUNNING
    assert wr.tasks[1].external[0].state == pb.EXTERNAL_MET and wr.tasks[1].external[0].upstream_run == up


def test_a_rerun_with_no_upstream_run_yet_waits_again_with_a_fresh_timeout() -> None:
    state = setup(pb.Dependency(workflow=UP, timeout_ms=HOUR))
    down = start_wf(state, DOWN)
    complete(state, down, "prep")
    waits_due(state, T0 + HOUR)
    assert leader_op(state, pb.WorkflowRunOp.RERUN, down, "reconcile", now=T0 + 2 * HOUR).ok
    wr = state.get_workflow_run(down)
    assert wr is not None and wr.state == pb.WORKFLOW_RUNNING
    task = wr.tasks[1]
    assert task.state == pb.TASK_WAITING and task.external[0].since_ms == T0 + 2 * HOUR
    # The timeout starts over (the earlier deadline is the workflow's 8m warn_after, also anew).
    assert (T0 + 3 * HOUR, 0) in {(due, kind) for due, kind, _ in state.wf.deps.deadlines}
    assert state.wf.deps.next_due_ms == T0 + 2 * HOUR + 8 * 60_000
    up = start_wf(state, UP, now=T0 + 2 * HOUR)
    finish_up(state, up, now=T0 + 2 * HOUR + S)
    assert task_states(state, down)["reconcile"] == "RUNNING"


def test_rerun_and_mark_flags_need_the_new_command_format_and_old_commands_keep_old_behaviour() -> None:
    state = setup(pb.Dependency(workflow=UP, timeout_ms=HOUR))
    down = start_wf(state, DOWN)
    complete(state, down, "prep")
    waits_due(state, T0 + HOUR)
    data = writes.workflow_run_op(
        state,
        pb.WorkflowRunOp.RERUN,
        down,
        "reconcile",
        "",
        now_ms=T0 + 2 * HOUR,
        epoch=1,
        origin="n1",
        key="",
    )
    assert codec.decode_command(data).format == codec.WORKFLOW_OPS_FORMAT
    plain = writes.workflow_run_op(
        state, pb.WorkflowRunOp.RERUN, down, "prep", "", now_ms=T0, epoch=1, origin="n1", key=""
    )
    assert codec.decode_command(plain).format == codec.WORKFLOW_OPS_FORMAT  # the run has edges
    # A command written before the flag existed (an old log) reruns the task whatever the edge said.
    assert op(state, pb.WorkflowRunOp.RERUN, down, "reconcile", now=T0 + 2 * HOUR).ok
    assert task_states(state, down)["reconcile"] == "RUNNING"
    lone = fresh()
    apply(lone, join("x1", slots=8))
    spec = pb.WorkflowSpec(name="solo")
    spec.tasks.add(name="a", command="a")
    assert apply_wf(lone, spec).ok
    solo = start_wf(lone, "solo")
    data = writes.workflow_run_op(
        lone, pb.WorkflowRunOp.RERUN, solo, "a", "", now_ms=T0, epoch=1, origin="n1", key=""
    )
    assert codec.decode_command(data).format < codec.WORKFLOW_OPS_FORMAT  # nothing new needed


def test_mark_success_of_a_task_that_emits_emits_its_events() -> None:
    from raftsched.fsm import keys

    state = fresh()
    apply(state, join("x1", slots=8))
    spec = pb.WorkflowSpec(name="sync", namespace="a")
    spec.tasks.add(name="extract", command="extract")
    spec.tasks.add(
        name="load", command="load", emits=["orders-loaded"], depends_on=[pb.Dependency(task="extract")]
    )
    assert apply_wf(state, spec).ok
    run_id = start_wf(state, "sync")
    data = writes.workflow_run_op(
        state, pb.WorkflowRunOp.MARK_SUCCESS, run_id, "load", "", now_ms=T0 + S, epoch=1, origin="n1", key=""
    )
    assert codec.decode_command(data).format == codec.WORKFLOW_OPS_FORMAT
    assert apply(state, data).ok
    events = [pb.EventRecord.FromString(v) for _, v in state.store.scan(keys.EVENT, keys.EVENT + keys.END)]
    assert [(e.name, e.key, e.emitted_by, e.namespace) for e in events] == [
        ("orders-loaded", "2023-11-14T22:14:00Z", "task:sync#load", "a")
    ]
    # Marking a task without emits needs nothing new and emits nothing.
    data = writes.workflow_run_op(
        state,
        pb.WorkflowRunOp.MARK_SUCCESS,
        run_id,
        "extract",
        "",
        now_ms=T0 + S,
        epoch=1,
        origin="n1",
        key="",
    )
    assert codec.decode_command(data).format < codec.WORKFLOW_OPS_FORMAT


# -- lineage across more than one hop ----------------------------------------------------------


def chain() -> dict[str, pb.WorkflowSpec]:
    """raw -> orders-sync:load (-1d) -> reconcile -> report:*; and raw depends on report -1d (a
    loop through an earlier day, which apply allows)."""
    raw = pb.WorkflowSpec(name="raw")
    raw.tasks.add(
        name="fetch", command="f", depends_on=[pb.Dependency(workflow="report", logical_offset_ms=-DAY)]
    )
    up = up_spec()
    up.tasks[0].depends_on.add(workflow="raw", task="fetch")
    down = down_spec(pb.Dependency(workflow=UP, task="load", logical_offset_ms=-DAY))
    report = pb.WorkflowSpec(name="report")
    report.tasks.add(name="r", command="r", depends_on=[pb.Dependency(workflow=DOWN)])
    side = pb.WorkflowSpec(name="side")  # depends on extract only: not downstream of load
    side.tasks.add(name="s", command="s", depends_on=[pb.Dependency(workflow=UP, task="extract")])
    return {s.name: s for s in (raw, up, down, report, side)}


def test_lineage_follows_edges_transitively_with_offsets_adding_up_and_stops_at_cycles() -> None:
    specs = chain()
    ups, cut = cross_workflow_lineage(DOWN, "reconcile", specs, "up")
    assert not cut
    assert [(n.label, n.hop, n.logical_offset_ms, n.via) for n in ups] == [
        ("orders-sync:load", 1, -DAY, "reconcile:reconcile"),
        ("raw:fetch", 2, -DAY, "orders-sync:load"),
        ("report:*", 3, -2 * DAY, "raw:fetch"),
        ("reconcile:*", 4, -2 * DAY, "report:*"),  # back where it started: the walk ends
    ]
    downs, _ = cross_workflow_lineage(UP, "load", specs, "down")
    assert [(n.label, n.hop, n.logical_offset_ms) for n in downs] == [
        ("reconcile:reconcile", 1, DAY),
        ("report:r", 2, DAY),
        ("raw:fetch", 3, 2 * DAY),
        ("orders-sync:extract", 4, 2 * DAY),  # a day later round the loop
        ("side:s", 5, 2 * DAY),  # downstream of extract; reconcile was seen already: the walk ends
    ]
    one, _ = cross_workflow_lineage(DOWN, "reconcile", specs, "up", depth=1)
    assert [n.label for n in one] == ["orders-sync:load"]
    assert cross_workflow_lineage(DOWN, "reconcile", specs, "up", depth=0) == ([], False)


def test_lineage_is_bounded() -> None:
    specs = {"hub": pb.WorkflowSpec(name="hub")}
    specs["hub"].tasks.add(name="h", command="h")
    for i in range(LINEAGE_MAX_NODES + 20):
        spec = pb.WorkflowSpec(name=f"leaf{i:04d}")
        spec.tasks.add(name="l", command="l", depends_on=[pb.Dependency(workflow="hub")])
        specs[spec.name] = spec
    downs, cut = cross_workflow_lineage("hub", "h", specs, "down")
    assert cut and len(downs) == LINEAGE_MAX_NODES


# -- SDK and CLI over gRPC --------------------------------------------------------------------------


class StateAdmin(pb_grpc.AdminServicer):  # type: ignore[misc, unused-ignore]
    """The read RPCs these commands use, answered from a state machine."""

    def __init__(self, state: SchedulerState) -> None:
        self.state = state

    def _missing(self, context: Any, message: str) -> None:
        context.set_trailing_metadata((("raftsched-code", "not_found"),))
        context.abort(grpc.StatusCode.NOT_FOUND, message)

    def GetWorkflow(self, request: api.GetWorkflowRequest, context: Any) -> api.WorkflowReply:
        rec = self.state.get_workflow(request.name, request.version)
        if rec is None:
            self._missing(context, f"workflow {request.name!r} does not exist")
        return api.WorkflowReply(workflow=rec)

    def ListWorkflows(self, request: api.ListWorkflowsRequest, context: Any) -> api.ListWorkflowsReply:
        return api.ListWorkflowsReply(workflows=self.state.list_workflows())

    def GetWorkflowRun(self, request: api.GetWorkflowRunRequest, context: Any) -> api.WorkflowRunReply:
        run = self.state.get_workflow_run(request.run_id)
        if run is None:
            self._missing(context, f"workflow run {request.run_id!r} does not exist")
        return api.WorkflowRunReply(run=run)

    def ListWorkflowRuns(
        self, request: api.ListWorkflowRunsRequest, context: Any
    ) -> api.ListWorkflowRunsReply:
        runs = self.state.list_workflow_runs(request.workflow, request.limit or 100, request.active_only)
        return api.ListWorkflowRunsReply(runs=runs)

    def GetRun(self, request: api.GetRunRequest, context: Any) -> api.RunReply:
        run = self.state.active_run(request.run_id)
        if run is None:
            self._missing(context, f"run {request.run_id!r} does not exist")
        return api.RunReply(run=run)

    def Lineage(self, request: api.LineageRequest, context: Any) -> api.LineageReply:
        return api.LineageReply()

    def ExplainWorkflowTask(
        self, request: api.ExplainWorkflowTaskRequest, context: Any
    ) -> api.ExplainWorkflowTaskReply:
        try:
            got = explain_from_reads(self.state, request.run_id, request.task, T0 + 60_000)
        except NotFound as exc:
            self._missing(context, str(exc))
        return got.to_reply()


@pytest.fixture
def served() -> Iterator[tuple[SchedulerState, str]]:
    state = setup(pb.Dependency(workflow=UP, task="load", timeout_ms=HOUR))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    ADD_SERVICER(StateAdmin(state), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield state, f"127.0.0.1:{port}"
    server.stop(grace=None)


def test_sdk_and_cli_explain_waits_and_lineage(
    served: tuple[SchedulerState, str], capsys: pytest.CaptureFixture[str]
) -> None:
    state, address = served
    down = start_wf(state, DOWN)
    complete(state, down, "prep")
    assert apply_wf(state, up_spec(with_load=False), now=T0 + S).ok
    with Client(address) as client:
        rows = client.workflow_waits()
        assert client.workflow_waits(upstream="other") == []
        got = client.explain_workflow_task(down, "reconcile")
        ups, downs, cut = client.cross_lineage(DOWN, "reconcile")
    assert [(r["upstream"], r["upstream_task"], r["downstream_run"]) for r in rows] == [(UP, "load", down)]
    assert "no longer exists in version 2" in str(rows[0]["note"])
    assert got.waits[0]["timeout_at_ms"] == T0 + HOUR
    assert [n.label for n in ups] == ["orders-sync:load"] and downs == [] and not cut

    assert cli.main(["--cluster", address, "workflow", "explain", down, "reconcile"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"task reconcile of {down} is WAITING") and "orders-sync:load" in out
    assert cli.main(["--cluster", address, "workflow", "explain", down, "reconcile", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["waits"][0]["upstream"] == UP
    assert cli.main(["--cluster", address, "workflow", "waits"]) == 0
    out = capsys.readouterr().out
    assert "WHY" in out and "no longer exists in version 2" in out
    assert cli.main(["--cluster", address, "workflow", "lineage", DOWN, "reconcile", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cross_upstream"] == [
        {"workflow": UP, "task": "load", "hop": 1, "logical_offset_ms": 0, "via": "reconcile:reconcile"}
    ]
    assert cli.main(["--cluster", address, "workflow", "explain", down, "nope"]) != 0
    assert "nope" in capsys.readouterr().err


# -- an earliest-start gate takes no parallelism place ---------------------------------------------


def gated_state(max_parallel: int = 1) -> tuple[SchedulerState, pb.CommandResult]:
    state = fresh()
    apply(state, join("x1", slots=8))
    spec = pb.WorkflowSpec(name="gated", max_parallel=max_parallel)
    spec.tasks.add(name="a", command="a", not_before="+30m")
    spec.tasks.add(name="b", command="b")
    data = writes.apply_workflow(spec, now_ms=T0, epoch=1, origin="n1", key="")
    return state, apply(state, data)


def test_a_task_held_by_not_before_takes_no_max_parallel_place() -> None:
    state, res = gated_state()
    assert res.ok and res.workflow.gates_free_slots
    run_id = start_wf(state, "gated")
    assert task_states(state, run_id) == {"a": "READY", "b": "RUNNING"}  # b runs while a waits
    wr = state.get_workflow_run(run_id)
    assert wr is not None and wr.tasks[0].not_before_ms == T0 + 30 * 60_000
    assert "takes no parallelism place" in wr.tasks[0].timeline[-1].reason
    with state.view() as v:
        assert v.waits_due_ms()[0] == T0 + 30 * 60_000  # the leader proposes WorkflowWaitsDue then
    # A replica restarted from the store holds the same gate.
    restarted = SchedulerState(MemoryStore())
    restarted.restore(state.snapshot(), 1)
    assert restarted.wf.gates == state.wf.gates
    waits_due(state, T0 + 30 * 60_000 - 1)
    assert task_states(state, run_id)["a"] == "READY"  # never early
    waits_due(state, T0 + 30 * 60_000)
    assert task_states(state, run_id)["a"] == "READY"  # its time has come; b still holds the place
    complete(state, run_id, "b", now=T0 + 31 * 60_000)
    assert task_states(state, run_id) == {"a": "RUNNING", "b": "SUCCESS"}
    run = state.active_run(state.get_workflow_run(run_id).tasks[0].run_id)  # type: ignore[union-attr]
    assert run is not None and all(sh.not_before_ms == 0 for sh in run.shards)  # not held any more
    got = explain(state, run_id, "a", T0 + 31 * 60_000)
    assert "RUNNING" in got.verdict


def test_held_tasks_show_waiting_in_status_and_explain() -> None:
    from raftsched.cli.render import render_status

    state, _ = gated_state()
    run_id = start_wf(state, "gated")
    wr = state.get_workflow_run(run_id)
    assert wr is not None
    assert any(
        line.startswith("a     waiting") and "not before" in line for line in render_status(wr, T0 + 60_000)
    )
    record = state.get_workflow("gated")
    assert record is not None
    got = explain_workflow_task(
        wr, record.spec, "a", upstream_records={}, upstream_runs={}, now_ms=T0 + 60_000
    )
    assert got.verdict == f"task a of {run_id} is WAITING: held until 2023-11-14T22:44:00Z (in 29m)"


def test_a_workflow_without_a_parallelism_limit_or_gate_needs_no_new_format() -> None:
    spec = pb.WorkflowSpec(name="w")
    spec.tasks.add(name="a", command="a", not_before="+30m")
    data = writes.apply_workflow(spec, now_ms=T0, epoch=1, origin="n1", key="")
    assert codec.decode_command(data).format < codec.WORKFLOW_OPS_FORMAT
    spec.max_parallel = 2
    data = writes.apply_workflow(spec, now_ms=T0, epoch=1, origin="n1", key="")
    assert codec.decode_command(data).format == codec.WORKFLOW_OPS_FORMAT


def test_the_admin_servicer_answers_explain_workflow_task_from_the_leaders_state() -> None:
    import asyncio
    from types import SimpleNamespace

    from raftsched.rpc.admin import AdminServicer

    state = setup(pb.Dependency(workflow=UP, task="load", timeout_ms=HOUR))
    down = start_wf(state, DOWN)
    node = SimpleNamespace(state=state, gate=SimpleNamespace(now_ms=lambda: T0 + 60_000))
    servicer = AdminServicer(node=node)

    async def consistent(context: Any) -> None:
        return None

    servicer._consistent = consistent  # type: ignore[method-assign]  # the read barrier is tested elsewhere
    request = api.ExplainWorkflowTaskRequest(run_id=down, task="reconcile")
    reply = asyncio.run(servicer.ExplainWorkflowTask(request, None))
    assert reply.verdict.startswith(f"task reconcile of {down} is WAITING for 1 local")
    (wait,) = reply.waits
    assert (wait.upstream, wait.upstream_task, wait.timeout_at_ms) == (UP, "load", T0 + HOUR)
    assert "has not started yet" in wait.note
