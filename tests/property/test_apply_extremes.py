"""Every command type, applied with integers at their extremes: apply never raises (no
``internal`` rejection, which is what an exception inside apply becomes), always answers with a
value, and a rejected command leaves the replicated state as it was (issue 34, part 1).

Each command starts from a plausible body that refers to what the seeded state holds (task ``t``
with a running run on executor ``a``, workflow ``w``, a token, a quota, a calendar), so the
handlers get past their lookups; Hypothesis then sets any of the body's integer fields, and the
envelope's ``now_ms`` and ``epoch``, to a boundary value (0, 1, -1, the type's extremes, the
documented limits +- 1: :func:`tests.fuzz_strategies.boundary_ints`) or any value of the type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftsched import codec
from raftsched.fsm.state import SchedulerState
from raftsched.model import IntervalTrigger, Overlap, TaskSpec
from raftsched.security.auth import Role
from raftsched.security.tokens import create_command, new_token, token_id
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb
from tests.fuzz_strategies import boundary_ints, domain
from tests.rpc_fuzz import FieldPath, integer_paths, set_path, show_path

T = 1_700_000_000_000
NOMINAL = T + 1000
RUN = f"t@{NOMINAL}"
TOKEN = new_token()
FAST_N = 2**10
_TOKEN_BODY = create_command(TOKEN, Role.VIEWER, ["team"], ttl_ms=0, description="", created_by="t", n=FAST_N)


def _cmd(now: int, **body: Message) -> bytes:
    cmd = pb.Command(epoch=1, now_ms=now, origin="n1")
    for name, value in body.items():
        getattr(cmd, name).CopyFrom(value)
    return codec.encode_command(cmd)


def _ok(state: SchedulerState, now: int, **body: Message) -> None:
    res = state.apply(_cmd(now, **body)).result
    assert res.ok, res


def _task_spec(name: str, overlap: Overlap = Overlap.SKIP) -> pb.TaskSpec:
    return codec.spec_to_pb(
        TaskSpec(name, IntervalTrigger(1000), command="true", max_retries=2, overlap=overlap)
    )


def _workflow() -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name="w")
    spec.tasks.add(name="a", command="true")
    spec.tasks.add(name="b", command="true").depends_on.add(task="a")
    return spec


def seeded(hot: bool = False) -> SchedulerState:
    """Task t (run t@NOMINAL running on executor a), workflow w, a token, a quota, a calendar, a
    pool; with ``hot``, tasks and executors numbered and t's next fire (t@NOMINAL+1000) a hot run
    on executor a too."""
    state = SchedulerState(MemoryStore())
    _ok(state, T, executor_join=pb.ExecutorJoin(name="a", slots=4))
    # hot: overlap=allow, so its fires may take the columnar hot path (raftsched.fsm.hot.is_hot).
    spec = _task_spec("t", Overlap.ALLOW if hot else Overlap.SKIP)
    _ok(state, T, create_task=pb.CreateTask(spec=spec, next_fire_ms=NOMINAL))
    fires = pb.FireBatch()
    fires.tasks.add(task="t", version=1, watermark_ms=NOMINAL, next_fire_ms=NOMINAL + 1000).fires.add(
        nominal_ms=NOMINAL, outcome=pb.FIRED
    )
    _ok(state, NOMINAL, fire_batch=fires)
    assign = pb.AssignAttempts()
    assign.assignments.add(run_id=RUN, shard=0, attempt=1, executor="a")
    _ok(state, NOMINAL, assign_attempts=assign)
    _ok(state, NOMINAL, apply_workflow=pb.ApplyWorkflow(spec=_workflow()))
    _ok(state, NOMINAL, create_token=_TOKEN_BODY)
    _ok(state, NOMINAL, set_quota=pb.SetQuota(quota=pb.QuotaRecord(kind="owner", name="o", rate_milli=1000)))
    _ok(state, NOMINAL, set_calendar=pb.SetCalendar(spec=pb.CalendarSpec(name="c", weekdays=1), offset_s=[0]))
    _ok(state, NOMINAL, set_pool=pb.SetPool(pool=pb.PoolRecord(name="p", slots=2)))
    if not hot:
        return state
    # The columnar hot path (command format 18): numbers on, task t's next fire (hot run seq 1,
    # t@NOMINAL+1000) taken by the hot path and assigned to executor a.
    _ok(state, NOMINAL, number_entities=pb.NumberEntities())
    at = NOMINAL + 1000
    _ok(state, at, fire_columns=pb.FireColumns(task=[1], version=[1], nominal_delta=[0], next_delta=[1000]))
    _ok(state, at, assign_columns=pb.AssignColumns(seq=[1], shard=[0], attempt=[1], executor=[1]))
    return state


def _bodies() -> dict[str, Callable[[], Message]]:
    """A plausible body per command type (new objects each call)."""

    def fire_batch() -> Message:
        batch = pb.FireBatch()
        tf = batch.tasks.add(task="t", version=1, watermark_ms=NOMINAL + 1000, next_fire_ms=NOMINAL + 6000)
        tf.fires.add(nominal_ms=NOMINAL + 1000, outcome=pb.COALESCED, count=1)
        return batch

    def report() -> Message:
        out = pb.ReportResults()
        out.results.add(
            run_id=RUN, shard=0, attempt=1, executor="a", retry_at_ms=NOMINAL + 500, duration_ms=5
        )
        return out

    def assign() -> Message:
        out = pb.AssignAttempts()
        out.assignments.add(run_id=RUN, shard=0, attempt=1, executor="a")
        out.waits.add(run_id=RUN, shard=0, attempt=1, reason="r")
        return out

    def raise_alerts() -> Message:
        out = pb.RaiseAlerts()
        out.alerts.add(kind="zombie", error="e", dedupe="d")
        return out

    def token() -> Message:
        body = create_command(
            new_token(), Role.VIEWER, [], ttl_ms=1000, description="", created_by="t", n=FAST_N
        )
        return body

    def stage() -> Message:
        header = _workflow()
        del header.tasks[:]
        out = pb.StageWorkflowTasks(workflow="w", stage="s", seq=0, header=header, names=["a", "b"])
        out.tasks.extend(_workflow().tasks)
        return out

    return {
        "create_task": lambda: pb.CreateTask(spec=_task_spec("n2"), next_fire_ms=NOMINAL + 1000),
        "create_tasks": lambda: pb.CreateTasks(items=[pb.CreateTask(spec=_task_spec("n3"))]),
        "update_task": lambda: pb.UpdateTask(spec=_task_spec("t"), next_fire_ms=NOMINAL + 5000),
        "delete_task": lambda: pb.DeleteTask(name="t"),
        "set_enabled": lambda: pb.SetEnabled(name="t", enabled=False),
        "trigger_now": lambda: pb.TriggerNow(name="t"),
        "retry_run": lambda: pb.RetryRun(run_id=RUN),
        "barrier": lambda: pb.Barrier(node_id="n1"),
        "fire_batch": fire_batch,
        "report_results": report,
        "executor_join": lambda: pb.ExecutorJoin(name="a", slots=4, memory_mb=100),
        "executor_leave": lambda: pb.ExecutorLeave(name="a", retry_at_ms=NOMINAL + 100),
        "drain_executor": lambda: pb.DrainExecutor(name="a"),
        "assign_attempts": assign,
        "apply_workflow": lambda: pb.ApplyWorkflow(spec=_workflow(), next_fire_ms=NOMINAL + 1000),
        "stage_workflow_tasks": stage,
        "start_workflow_run": lambda: pb.StartWorkflowRun(workflow="w", logical_ms=NOMINAL),
        "workflow_run_op": lambda: pb.WorkflowRunOp(op=pb.WorkflowRunOp.KILL, run_id=f"w@{NOMINAL}~m1"),
        "start_backfill": lambda: pb.StartBackfill(
            workflow="w", logical_ms=[T, NOMINAL], from_ms=T, to_ms=NOMINAL
        ),
        "raise_alerts": raise_alerts,
        "alerts_delivered": lambda: pb.AlertsDelivered(target="wh", through_seq=1),
        "ack_alert": lambda: pb.AckAlert(id="1"),
        "create_token": token,
        "revoke_token": lambda: pb.RevokeToken(id=token_id(TOKEN)),
        "set_workflow_paused": lambda: pb.SetWorkflowPaused(
            workflow="w", paused=False, next_fire_ms=NOMINAL + 1
        ),
        "delete_workflow": lambda: pb.DeleteWorkflow(workflow="w", force=True),
        "set_quota": lambda: pb.SetQuota(
            quota=pb.QuotaRecord(kind="namespace", name="n", rate_milli=5, burst=2)
        ),
        "delete_quota": lambda: pb.DeleteQuota(kind="owner", name="o"),
        "set_calendar": lambda: pb.SetCalendar(spec=pb.CalendarSpec(name="c2", dates=[19000]), offset_s=[0]),
        "delete_calendar": lambda: pb.DeleteCalendar(name="c"),
        "seed_membership": lambda: pb.SeedMembership(
            members=[pb.Member(id="n1", raft="127.0.0.1:1", grpc="127.0.0.1:2")]
        ),
        "begin_member_change": lambda: pb.BeginMemberChange(
            change=pb.MemberChange(
                kind="add", member=pb.Member(id="n9", raft="127.0.0.1:3", grpc="127.0.0.1:4")
            )
        ),
        "end_member_change": lambda: pb.EndMemberChange(id="n9", kind="add", applied=True),
        "workflow_waits_due": pb.WorkflowWaitsDue,
        "emit_event": lambda: pb.EmitEvent(name="e", key="k", namespace="default", payload_json="{}"),
        "set_pool": lambda: pb.SetPool(pool=pb.PoolRecord(name="p2", slots=3)),
        "delete_pool": lambda: pb.DeletePool(name="p"),
        "start_task_backfill": lambda: pb.StartTaskBackfill(task="t", nominal_ms=[NOMINAL - 1000, NOMINAL]),
        "cancel_runs": lambda: pb.CancelRuns(run_ids=[RUN], reason="r", shard=0),
        "number_entities": pb.NumberEntities,
        # Commands are stamped at NOMINAL + 5000: t's next fire is NOMINAL + 2000.
        "fire_columns": lambda: pb.FireColumns(
            task=[1], version=[1], nominal_delta=[3000], next_delta=[1000]
        ),
        "assign_columns": lambda: pb.AssignColumns(seq=[1], shard=[0], attempt=[1], executor=[1]),
        "result_columns": lambda: pb.ResultColumns(
            seq=[1], attempt=[1], executor=[1], duration_ms=[5], lateness_ms=[3]
        ),
        # Hot run seq 1 (t@NOMINAL+1000, assigned to a) is live: the bound 2 promotes it.
        "promote_hot_runs": lambda: pb.PromoteHotRuns(before_seq=2),
    }


BODIES = _bodies()
ENVELOPE = [
    p for p in integer_paths(pb.Command.DESCRIPTOR) if len(p) == 1 and p[0].name in ("now_ms", "epoch")
]


def test_every_command_type_has_a_body_here() -> None:
    assert set(BODIES) == set(SchedulerState._HANDLERS)


_BASE = seeded(hot=True)
_BASE_SNAPSHOT = _BASE.snapshot()


def _fresh() -> SchedulerState:
    state = SchedulerState(MemoryStore())
    state.restore(_BASE_SNAPSHOT, 1)
    return state


@st.composite
def _changes(draw: st.DrawFn, paths: list[FieldPath]) -> list[tuple[FieldPath, int]]:
    chosen = (
        draw(st.lists(st.sampled_from(paths), min_size=1, max_size=3, unique_by=show_path)) if paths else []
    )
    out = []
    for path in chosen:
        fd = path[-1]
        extremes = boundary_ints(fd)
        value = draw(st.one_of(st.sampled_from(extremes), st.integers(min(extremes), max(extremes))))
        out.append((path, value))
    return out


@pytest.mark.parametrize("body", sorted(BODIES))
def test_extreme_integers_in_any_command_are_a_value_never_an_exception(body: str) -> None:
    make = BODIES[body]
    body_paths = integer_paths(type(make()).DESCRIPTOR)
    envelope = [(p[0].name, p) for p in ENVELOPE]

    @settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(
        changes=_changes(body_paths),
        env=st.lists(
            st.tuples(
                st.sampled_from(envelope),
                st.sampled_from([0, 1, 2**62, 2**62 + 1, 2**63 - 1, 2**64 - 1, T, 253_402_300_799_001]),
            ),
            max_size=1,
        ),
    )
    def check(changes: list[tuple[FieldPath, int]], env: list[tuple[tuple[str, FieldPath], int]]) -> None:
        msg = make()
        for path, value in changes:
            set_path(msg, path, value)
        cmd = pb.Command(epoch=1, now_ms=NOMINAL + 5000, origin="n1")
        getattr(cmd, body).CopyFrom(msg)
        for (name, _), value in env:
            if name == "now_ms" and value > 2**63 - 1:
                value = 2**63 - 1
            setattr(cmd, name, value)
        state = _fresh()
        before = domain(state)
        applied = state.apply(codec.encode_command(cmd))  # must not raise
        res = applied.result
        assert res.code != "internal", (body, res.message, _show(changes, env))
        if not res.ok:
            assert domain(state) == before, (body, res.code, res.message, _show(changes, env))
        state.snapshot()  # everything stored still encodes

    check()


def _show(changes: list[tuple[FieldPath, int]], env: list[Any]) -> str:
    return ", ".join([f"{show_path(p)}={v}" for p, v in changes] + [f"{n}={v}" for (n, _), v in env])
