"""The state machine's test vocabulary: a fresh ``SchedulerState`` over a ``MemoryStore``, client
commands built with :mod:`raftsched.leader.writes` (as the leader's servicer builds them) with
explicit ``now``/``epoch``, hand-built leader fire batches, and readers of what apply stored.

No clock, no sleeps: every time is an explicit millisecond value from ``T0`` in steps of ``S``.
"""

from __future__ import annotations

import hashlib

from raftsched import codec
from raftsched.fsm import keys
from raftsched.fsm.records import Retention
from raftsched.fsm.state import SchedulerState
from raftsched.fsm.timeline import expand
from raftsched.leader import writes
from raftsched.model import CronTrigger, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb

T0 = 1_700_000_040_000  # a whole minute
S = 1000
EVERY_SECOND = CronTrigger("* * * * * *")


def fresh(retention: Retention | None = None) -> SchedulerState:
    return SchedulerState.load(MemoryStore(), retention)


def apply(state: SchedulerState, data: bytes) -> pb.CommandResult:
    return state.apply(data).result


def domain(state: SchedulerState) -> str:
    """Digest of the replicated image without the apply-chain fingerprint."""
    h = hashlib.sha256()
    for key, value in state.replicated_items():
        if key == keys.META:
            meta = pb.Meta.FromString(value)
            if "chain" in pb.Meta.DESCRIPTOR.fields_by_name:
                meta.ClearField("chain")
            value = meta.SerializeToString(deterministic=True)
        h.update(len(key).to_bytes(4, "big") + key + len(value).to_bytes(4, "big") + value)
    return h.hexdigest()


def create(
    state: SchedulerState,
    spec: TaskSpec,
    *,
    now: int = T0,
    epoch: int = 1,
    key: str = "",
    disabled: bool = False,
) -> pb.CommandResult:
    return apply(
        state, writes.create_task(spec, disabled=disabled, now_ms=now, epoch=epoch, origin="n1", key=key)
    )


def update(
    state: SchedulerState, spec: TaskSpec, *, now: int, expected_version: int = 0, epoch: int = 1
) -> pb.CommandResult:
    data = writes.update_task(
        state, spec, expected_version=expected_version, now_ms=now, epoch=epoch, origin="n1", key=""
    )
    return apply(state, data)


def set_enabled(
    state: SchedulerState, name: str, enabled: bool, *, now: int, epoch: int = 1
) -> pb.CommandResult:
    return apply(
        state, writes.set_enabled(state, name, enabled, now_ms=now, epoch=epoch, origin="n1", key="")
    )


def trigger(
    state: SchedulerState, name: str, *, now: int, params: str = "", key: str = "", epoch: int = 1
) -> pb.CommandResult:
    return apply(state, writes.trigger_now(name, params, now_ms=now, epoch=epoch, origin="n1", key=key))


def delete(state: SchedulerState, name: str, *, now: int, epoch: int = 1) -> pb.CommandResult:
    return apply(state, writes.delete_task(name, now_ms=now, epoch=epoch, origin="n1", key=""))


def fire(
    nominal: int, outcome: int = pb.FIRED, *, through: int = 0, count: int = 1, reason: str = ""
) -> pb.Fire:
    return pb.Fire(nominal_ms=nominal, outcome=outcome, through_ms=through, count=count, reason=reason)  # type: ignore[arg-type]


def entry(task: str, version: int, fires: list[pb.Fire], *, watermark: int, next_fire: int) -> pb.TaskFires:
    return pb.TaskFires(
        task=task, version=version, fires=fires, watermark_ms=watermark, next_fire_ms=next_fire
    )


def batch(now: int, *entries: pb.TaskFires, epoch: int = 1) -> bytes:
    cmd = pb.Command(epoch=epoch, now_ms=now, origin="n1")
    cmd.fire_batch.SetInParent()
    cmd.fire_batch.tasks.extend(entries)
    return codec.encode_command(cmd)


def tick(task: str, version: int, at: int, *, epoch: int = 1) -> bytes:
    """The batch an on-time leader proposes for a per-second task at ``at``."""
    return batch(at, entry(task, version, [fire(at)], watermark=at, next_fire=at + S), epoch=epoch)


def barrier(now: int, epoch: int) -> bytes:
    cmd = pb.Command(epoch=epoch, now_ms=now, origin="n2")
    cmd.barrier.node_id = "n2"
    return codec.encode_command(cmd)


def report(now: int, *results: tuple[str, int, int, bool], epoch: int = 1) -> bytes:
    cmd = pb.Command(epoch=epoch, now_ms=now, origin="n1")
    cmd.report_results.SetInParent()
    for run_id, shard, attempt, ok in results:
        cmd.report_results.results.add(run_id=run_id, shard=shard, attempt=attempt, success=ok)
    return codec.encode_command(cmd)


def raw_create(spec: pb.TaskSpec, *, now: int = T0, next_fire: int = 0) -> bytes:
    """A CreateTask with a spec injected straight into the proto (no client-side validation)."""
    cmd = pb.Command(epoch=1, now_ms=now, origin="n1")
    cmd.create_task.spec.CopyFrom(spec)
    cmd.create_task.next_fire_ms = next_fire
    return codec.encode_command(cmd)


def fires_of(state: SchedulerState, task: str) -> list[pb.FireRecord]:
    lo, hi = keys.per_task_prefix(keys.FIRE, task), keys.per_task_end(keys.FIRE, task)
    return [pb.FireRecord.FromString(v) for _, v in state.store.scan(lo, hi)]


def runs_of(state: SchedulerState, task: str) -> list[pb.Run]:
    """The task's stored runs as a read shows them (whole timelines: fsm.timeline.expand)."""
    lo, hi = keys.per_task_prefix(keys.RUN, task), keys.per_task_end(keys.RUN, task)
    return [expand(pb.Run.FromString(v)) for _, v in state.store.scan(lo, hi)]


def record(state: SchedulerState, name: str) -> pb.TaskRecord:
    rec = state.get_task(name)
    assert rec is not None
    return rec


def with_task(spec: TaskSpec | None = None, **kwargs: object) -> SchedulerState:
    state = fresh(**kwargs)  # type: ignore[arg-type]
    assert create(state, spec or TaskSpec("t", EVERY_SECOND, command="true")).ok
    return state


# --------------------------------------------------------------------------- executors


def command(now: int, epoch: int = 1) -> pb.Command:
    return pb.Command(epoch=epoch, now_ms=now, origin="n1")


def join(name: str, slots: int = 4, now: int = T0) -> bytes:
    cmd = command(now)
    cmd.executor_join.name = name
    cmd.executor_join.slots = slots
    return codec.encode_command(cmd)


def leave(name: str, now: int, dead: bool = True, retry_at: int = 0) -> bytes:
    cmd = command(now)
    cmd.executor_leave.name = name
    cmd.executor_leave.dead = dead
    cmd.executor_leave.retry_at_ms = retry_at
    return codec.encode_command(cmd)


def assign(now: int, *items: tuple[str, int, int, str]) -> bytes:
    cmd = command(now)
    cmd.assign_attempts.SetInParent()
    for run_id, shard, attempt, executor in items:
        cmd.assign_attempts.assignments.add(run_id=run_id, shard=shard, attempt=attempt, executor=executor)
    return codec.encode_command(cmd)


def result(now: int, run_id: str, attempt: int, executor: str, ok: bool, **extra: object) -> bytes:
    cmd = command(now)
    cmd.report_results.results.add(
        run_id=run_id,
        shard=0,
        attempt=attempt,
        executor=executor,
        success=ok,
        **extra,
    )
    return codec.encode_command(cmd)


def run_of(state: SchedulerState, run_id: str) -> pb.Run:
    """The stored run as a read shows it (its whole timeline: fsm.timeline.expand)."""
    raw = state.store.get(keys.run_key_for_id(run_id))
    assert raw is not None
    return expand(pb.Run.FromString(raw))


def one_run(retries: int = 0) -> tuple[SchedulerState, str]:
    state = fresh()
    assert create(state, TaskSpec("t", EVERY_SECOND, max_retries=retries, owner="ops", command="true")).ok
    assert apply(state, join("ex1")).ok and apply(state, join("ex2")).ok
    assert apply(state, tick("t", 1, T0 + S)).fired == 1
    return state, f"t@{T0 + S}"


# --------------------------------------------------------------------------- workflows

W = "etl"


def etl_spec(**extra: object) -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name=W, params_json='{"region": "eu"}', **extra)  # type: ignore[arg-type]
    spec.tasks.add(name="extract", command="extract --date {{ ds }} --region {{ params.region }}")
    spec.tasks.add(name="validate", command="validate {{ ds }}", depends_on=[pb.Dependency(task="extract")])
    spec.tasks.add(
        name="load",
        command="load",
        env={"DAY": "{{ ds_nodash }}"},
        depends_on=[pb.Dependency(task="extract"), pb.Dependency(task="validate")],
    )
    return spec


def apply_wf(
    state: SchedulerState, spec: pb.WorkflowSpec, now: int = T0, next_fire: int = 0
) -> pb.CommandResult:
    cmd = command(now)
    cmd.apply_workflow.spec.CopyFrom(spec)
    cmd.apply_workflow.next_fire_ms = next_fire
    return apply(state, codec.encode_command(cmd))


def start(state: SchedulerState, now: int = T0, logical: int = T0, params: str = "") -> pb.WorkflowRun:
    cmd = command(now)
    cmd.start_workflow_run.workflow = W
    cmd.start_workflow_run.logical_ms = logical
    cmd.start_workflow_run.params_json = params
    res = apply(state, codec.encode_command(cmd))
    assert res.ok, res.message
    return res.workflow_run


def op(state: SchedulerState, kind: int, run_id: str, task: str = "", now: int = T0) -> pb.CommandResult:
    cmd = command(now)
    cmd.workflow_run_op.op = kind  # type: ignore[assignment]
    cmd.workflow_run_op.run_id = run_id
    cmd.workflow_run_op.task = task
    return apply(state, codec.encode_command(cmd))


def task_states(state: SchedulerState, run_id: str) -> dict[str, str]:
    wr = state.get_workflow_run(run_id)
    assert wr is not None
    return {t.name: pb.WorkflowTaskState.Name(t.state).removeprefix("TASK_") for t in wr.tasks}


def task_run(state: SchedulerState, run_id: str, task: str) -> pb.Run:
    wr = state.get_workflow_run(run_id)
    assert wr is not None
    rid = next(t.run_id for t in wr.tasks if t.name == task)
    run = state.active_run(rid)
    assert run is not None, f"{task} has no active task run"
    return run


def complete(
    state: SchedulerState, run_id: str, task: str, ok: bool = True, now: int = T0, **extra: object
) -> pb.CommandResult:
    """Assign the task's run to executor x1 and report its result."""
    run = task_run(state, run_id, task)
    assert apply(state, assign(now, (run.run_id, 0, run.shards[0].attempt, "x1"))).accounted == 1
    cmd = command(now)
    cmd.report_results.results.add(
        run_id=run.run_id, shard=0, attempt=run.shards[0].attempt, executor="x1", success=ok, **extra
    )
    return apply(state, codec.encode_command(cmd))
