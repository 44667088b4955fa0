"""Big workflows applied in chunks: the staged entries leave the same state as one ApplyWorkflow
would, each chunk is checked on its own (a bad one is refused and changes nothing), chunks out
of order or an incomplete stage are refused, and nothing of the stage remains afterwards."""

from __future__ import annotations

from typing import Any

from raftsched import codec
from raftsched.fsm import keys
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import T0, apply, domain, fresh

STAMP: dict[str, Any] = {"now_ms": T0, "epoch": 1, "origin": "n1"}


def big_spec(n: int = 2 * writes.STAGE_CHUNK_TASKS + 17, name: str = "big") -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name=name, params_json='{"region": "eu"}', max_parallel=64)
    for i in range(n):
        task = spec.tasks.add(name=f"t{i:05d}", command=f"run {i} {{{{ ds }}}} {{{{ params.region }}}}")
        if i:
            task.depends_on.add(task=f"t{(i * 7919) % i:05d}")
    return spec


def replicated(state: SchedulerState) -> dict[bytes, bytes]:
    """The stored image without the meta record and the task counter records (both keyed or
    counted by accepted command, so they differ by design between one command and four): the
    tasks' counters are compared as the task records a reader sees (:func:`task_views`)."""
    return {
        k: v for k, v in state.replicated_items() if k != keys.META and not k.startswith(keys.TASK_COUNTERS)
    }


def task_views(state: SchedulerState) -> dict[str, bytes]:
    """Every task's record with its counters folded in, as a read (and a reload) sees it."""
    return {name: st.record_bytes() for name, st in state.tasks.items()}


def test_staged_entries_leave_the_same_state_as_one_apply() -> None:
    spec = big_spec()
    one = fresh()
    whole = pb.Command(epoch=1, now_ms=T0, origin="n1")
    whole.apply_workflow.spec.CopyFrom(spec)
    assert apply(one, codec.encode_command(whole)).ok
    staged = fresh()
    commands = writes.staged_workflow(spec, key="", **STAMP)
    assert len(commands) == 4  # three chunks, then the version
    results = [apply(staged, data) for data in commands]
    assert all(r.ok for r in results), [r.message for r in results]
    assert results[-1].workflow.version == 1 and results[-1].changed
    assert replicated(one) == replicated(staged)
    assert task_views(one) == task_views(staged)
    assert not [k for k in replicated(staged) if k.startswith((keys.STAGE, keys.STAGE_CHUNK))]


def test_a_chunk_with_a_bad_task_is_refused_and_changes_nothing() -> None:
    spec = big_spec()
    commands = writes.staged_workflow(spec, key="", **STAMP)
    state = fresh()
    assert apply(state, commands[0]).ok
    cmd = codec.decode_command(commands[1])
    cmd.stage_workflow_tasks.tasks[3].command = ""  # neither command nor handler
    cmd.stage_workflow_tasks.tasks[5].depends_on.add(task="nope")
    before = domain(state)
    res = apply(state, codec.encode_command(cmd))
    assert not res.ok and res.code == "invalid_argument"
    assert "tasks[1003]" in res.message and "unknown task" in res.message
    assert domain(state) == before


def test_chunks_out_of_order_and_an_incomplete_stage_are_refused() -> None:
    commands = writes.staged_workflow(big_spec(), key="", **STAMP)
    state = fresh()
    assert apply(state, commands[0]).ok
    before = domain(state)
    assert apply(state, commands[2]).code == "conflict"  # chunk 2 before chunk 1
    assert apply(state, commands[-1]).code == "conflict"  # the version before every chunk
    assert domain(state) == before
    assert state.get_workflow("big") is None
    for data in commands[1:]:
        assert apply(state, data).ok
    assert state.get_workflow("big") is not None


def test_a_new_stage_replaces_one_that_never_finished() -> None:
    first = writes.staged_workflow(big_spec(), key="", **STAMP)
    state = fresh()
    assert apply(state, first[0]).ok and apply(state, first[1]).ok  # the leader died here
    other = big_spec(n=writes.STAGE_CHUNK_TASKS + 1)
    for data in writes.staged_workflow(other, key="", **STAMP):
        assert apply(state, data).ok
    rec = state.get_workflow("big")
    assert rec is not None and len(rec.spec.tasks) == writes.STAGE_CHUNK_TASKS + 1
    assert not [k for k in replicated(state) if k.startswith((keys.STAGE, keys.STAGE_CHUNK))]


def test_a_final_entry_whose_fields_differ_from_the_stage_is_refused() -> None:
    commands = writes.staged_workflow(big_spec(), key="", **STAMP)
    state = fresh()
    for data in commands[:-1]:
        assert apply(state, data).ok
    final = codec.decode_command(commands[-1])
    final.apply_workflow.spec.owner = "someone-else"
    assert apply(state, codec.encode_command(final)).code == "invalid_argument"
    assert apply(state, commands[-1]).ok
