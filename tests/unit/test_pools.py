"""Pools (issue 29 §4) in the state machine, the command formats and the ways in: the slot count
decided in apply, the wait reason, release however an attempt ends, restore, the delete rule,
validation, the format stamp, task and workflow files and the CLI."""

from __future__ import annotations

import pytest

from raftsched import codec
from raftsched.client import Client
from raftsched.errors import InvalidSpec
from raftsched.fsm.policy import PolicyBook, pool_of_reason, pool_reason, validate_pool
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import ManualTrigger, Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb
from raftsched.web.pools import parse_slots
from tests.support.fsm import T0, apply, assign, create, domain, fresh, join, result, run_of, trigger


def pool_cmd(now: int, name: str, slots: int) -> bytes:
    return writes.set_pool(
        pb.PoolRecord(name=name, slots=slots), now_ms=now, epoch=1, origin="n1", key=f"p{now}"
    )


def _runs(state: SchedulerState, spec: TaskSpec, n: int, now: int = T0) -> list[str]:
    assert create(state, spec, now=now).ok
    return [trigger(state, spec.name, now=now + i).run.run_id for i in range(n)]


def _spec(name: str, pool: str = "wh", owner: str = "") -> TaskSpec:
    return TaskSpec(name, ManualTrigger(), command="x", overlap=Overlap.ALLOW, pool=pool, owner=owner)


def test_apply_lets_at_most_slots_attempts_hold_the_pool_and_names_the_wait() -> None:
    state = fresh()
    assert apply(state, join("ex1", 10)).ok
    assert apply(state, pool_cmd(T0, "wh", 2)).ok
    runs = _runs(state, _spec("a", owner="A"), 2) + _runs(state, _spec("b", owner="B"), 1)
    res = apply(state, assign(T0 + 10, *[(r, 0, 1, "ex1") for r in runs]))
    assert (res.accounted, res.refused) == (2, 1)
    third = run_of(state, runs[2])
    assert third.shards[0].state == pb.PENDING
    assert third.shards[0].waiting == "pool wh: 2 slots"
    assert [run_of(state, r).shards[0].holds for r in runs[:2]] == [["p:wh"], ["p:wh"]]
    [view] = state.pools()
    assert (view.pool.slots, len(view.holders), view.waiting) == (2, 2, 1)
    assert apply(state, result(T0 + 20, runs[0], 1, "ex1", True)).ok
    assert apply(state, assign(T0 + 30, (runs[2], 0, 1, "ex1"))).accounted == 1
    assert run_of(state, runs[2]).shards[0].waiting == ""
    assert state.pools()[0].waiting == 0


@pytest.mark.parametrize("end", ["success", "failure", "timed_out", "lost", "executor_left"])
def test_the_slot_is_given_back_however_the_attempt_ends(end: str) -> None:
    state = fresh()
    assert apply(state, join("ex1", 10)).ok
    assert apply(state, pool_cmd(T0, "wh", 1)).ok
    [run] = _runs(state, _spec("t"), 1)
    assert apply(state, assign(T0 + 10, (run, 0, 1, "ex1"))).accounted == 1
    assert len(state.pools()[0].holders) == 1
    now = T0 + 20
    if end == "executor_left":
        cmd = pb.Command(epoch=1, now_ms=now, origin="n1")
        cmd.executor_leave.name = "ex1"
        cmd.executor_leave.dead = True
        assert apply(state, codec.encode_command(cmd)).ok
    else:
        extra = {"timed_out": True} if end == "timed_out" else {"lost": True} if end == "lost" else {}
        assert apply(state, result(now, run, 1, "" if end == "lost" else "ex1", end == "success", **extra)).ok
    assert state.pools()[0].holders == []


def test_restore_rebuilds_the_holders_from_the_shards() -> None:
    state = fresh()
    assert apply(state, join("ex1", 10)).ok
    assert apply(state, pool_cmd(T0, "wh", 3)).ok
    runs = _runs(state, _spec("t"), 2)
    assert apply(state, assign(T0 + 10, *[(r, 0, 1, "ex1") for r in runs])).accounted == 2
    copy = SchedulerState.load(MemoryStore())
    copy.restore(state.snapshot(), 1)
    assert domain(copy) == domain(state)
    assert copy.pools() == state.pools() and len(copy.pools()[0].holders) == 2
    # And the restored state refuses what the original would: one slot is left.
    more = [trigger(copy, "t", now=T0 + 40 + i).run.run_id for i in range(2)]
    assert apply(copy, assign(T0 + 50, *[(r, 0, 1, "ex1") for r in more])).accounted == 1


def test_shrinking_a_pool_stops_no_attempt_and_starts_none_until_enough_end() -> None:
    state = fresh()
    assert apply(state, join("ex1", 10)).ok
    assert apply(state, pool_cmd(T0, "wh", 2)).ok
    runs = _runs(state, _spec("t"), 3)
    assert apply(state, assign(T0 + 10, *[(r, 0, 1, "ex1") for r in runs[:2]])).accounted == 2
    assert apply(state, pool_cmd(T0 + 20, "wh", 1)).ok
    assert len(state.pools()[0].holders) == 2  # none stopped
    assert apply(state, result(T0 + 30, runs[0], 1, "ex1", True)).ok
    assert apply(state, assign(T0 + 40, (runs[2], 0, 1, "ex1"))).accounted == 0  # 1 held, 1 slot
    assert run_of(state, runs[2]).shards[0].waiting == "pool wh: 1 slot"
    assert apply(state, result(T0 + 50, runs[1], 1, "ex1", True)).ok
    assert apply(state, assign(T0 + 60, (runs[2], 0, 1, "ex1"))).accounted == 1


def test_delete_is_refused_while_a_task_or_workflow_task_names_the_pool() -> None:
    from raftsched.workflow.files import parse_workflow_text

    state = fresh()
    assert apply(state, pool_cmd(T0, "wh", 2)).ok
    wf = parse_workflow_text("name: w\ntasks:\n  - name: a\n    command: x\n    pool: wh\n", "yaml", "w.yaml")
    assert [t.pool for t in wf.tasks] == ["wh"]
    cmd = pb.Command(epoch=1, now_ms=T0 + 1, origin="n1")
    cmd.apply_workflow.spec.CopyFrom(wf)
    assert codec.command_format(cmd) == codec.POOLS_FORMAT
    assert apply(state, codec.encode_command(cmd)).ok
    assert create(state, _spec("t"), now=T0 + 2).ok
    delete = writes.delete_pool("wh", now_ms=T0 + 3, epoch=1, origin="n1", key="d")
    res = apply(state, delete)
    assert (res.ok, res.code) == (False, "conflict")
    assert res.message == ("pool 'wh' is used by task t, workflow w; give them another pool (or none) first")
    missing = apply(state, writes.delete_pool("nope", now_ms=T0 + 4, epoch=1, origin="n1", key="e"))
    assert (missing.ok, missing.code) == (False, "not_found")


def test_pool_validation_names_the_field() -> None:
    with pytest.raises(InvalidSpec, match=r"pool.slots: 0 is not in 1-1000000"):
        validate_pool(pb.PoolRecord(name="wh", slots=0))
    with pytest.raises(InvalidSpec, match=r"pool\.name"):
        validate_pool(pb.PoolRecord(name="bad name", slots=1))
    with pytest.raises(InvalidSpec, match=r"^pool:"):
        TaskSpec("t", ManualTrigger(), command="x", pool="no spaces")
    state = fresh()
    res = apply(state, pool_cmd(T0, "wh", 0))  # a hand-made entry: refused as a value
    assert not res.ok and "pool.slots" in res.message


@pytest.mark.parametrize("slots", [-1, 0, 1_000_001, 2**32, 2**40])
def test_the_sdk_refuses_a_slot_count_out_of_range_before_building_the_record(slots: int) -> None:
    # protobuf's uint32 field would raise ValueError ("Value out of range") for some of these.
    client = Client.__new__(Client)  # refused before any call: no channel needed
    with pytest.raises(InvalidSpec, match=rf"^pool\.slots: {slots} is not in 1-1000000$"):
        client.set_pool("wh", slots)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lots", "'lots' is not a whole number (1-1000000)"),
        ("2.5", "'2.5' is not a whole number (1-1000000)"),
        ("", "'' is not a whole number (1-1000000)"),
        ("1_000", "'1_000' is not a whole number (1-1000000)"),
        ("\u0663", "'\u0663' is not a whole number (1-1000000)"),
        ("0", "0 is not in 1-1000000"),
        ("1000001", "1000001 is not in 1-1000000"),
    ],
)
def test_the_consoles_slot_field_is_refused_naming_it(text: str, message: str) -> None:
    with pytest.raises(InvalidSpec) as refused:
        parse_slots(text)
    assert str(refused.value) == f"pool.slots: {message}"
    assert parse_slots(" 7 ") == 7


def test_reasons_name_the_pool_and_a_missing_pool_says_how_to_set_it() -> None:
    book = PolicyBook(MemoryStore())
    need = book.need("", "default", (), "wh")
    assert need is not None and book.check(need, T0) == "pool wh: not set (raftsched pool set wh --slots N)"
    book.set_pool(pb.PoolRecord(name="wh", slots=1), T0)
    assert book.check(need, T0) == ""
    book.acquire(need, T0, "r/0#1", "t")
    assert book.check(need, T0) == pool_reason("wh", book.pools["wh"]) == "pool wh: 1 slot"
    assert pool_of_reason("pool wh: 1 slot") == "wh" and pool_of_reason("lock wh: held") == ""
    assert book.need("", "default", ()) is None


def test_definitions_naming_a_pool_and_the_pool_commands_are_stamped_pools_format() -> None:
    def stamped(data: bytes) -> int:
        return pb.Command.FromString(data).format

    stamp = {"now_ms": T0, "epoch": 1, "origin": "n1", "key": ""}
    assert stamped(writes.create_task(_spec("t"), disabled=False, **stamp)) == codec.POOLS_FORMAT  # type: ignore[arg-type]
    assert stamped(writes.create_task(_spec("t", pool=""), disabled=False, **stamp)) == 1  # type: ignore[arg-type]
    assert stamped(pool_cmd(T0, "wh", 1)) == codec.POOLS_FORMAT
    assert stamped(writes.delete_pool("wh", **stamp)) == codec.POOLS_FORMAT  # type: ignore[arg-type]


def test_task_files_and_the_cli_take_the_pool() -> None:
    from raftsched import cli
    from raftsched.cli.input import lazy_now
    from raftsched.workflow.taskfiles import parse_task_text

    parser = cli.build_parser()
    args = parser.parse_args(["task", "add", "t", "--manual", "--command", "x", "--pool", "wh"])
    spec = cli.spec_from_args(args, lazy_now())
    assert spec.pool == "wh"
    cleared = cli.merge_spec(spec, parser.parse_args(["task", "update", "t", "--pool", ""]), lazy_now())
    assert cleared.pool == ""
    assert codec.spec_from_pb(codec.spec_to_pb(spec)) == spec
    set_ = parser.parse_args(["pool", "set", "wh", "--slots", "5", "--json"])
    assert (set_.name, set_.slots, set_.json) == ("wh", 5, True)
    assert parser.parse_args(["pool", "list", "--json"]).json
    assert parser.parse_args(["pool", "delete", "wh"]).name == "wh"
    parsed = parse_task_text("tasks:\n  - name: t\n    command: x\n    pool: wh\n", "yaml", "t.yaml")
    assert [spec.pool for spec, _ in parsed.tasks] == ["wh"]


def test_setting_and_deleting_a_pool_is_an_administrators_permission() -> None:
    from raftsched.security.auth import ROLE_PERMISSIONS, Permission, Role
    from raftsched.security.authz import required_permission

    for rpc in ("SetPool", "DeletePool"):
        assert required_permission(f"/raftsched.v1.Admin/{rpc}") == Permission.POOLS
    assert required_permission("/raftsched.v1.Admin/ListPools") == Permission.TASKS_READ
    holders = [role for role, perms in ROLE_PERMISSIONS.items() if Permission.POOLS in perms]
    assert holders == [Role.ADMIN]


def test_a_workflow_task_with_a_bad_pool_name_is_refused_at_its_path() -> None:
    from raftsched.workflow.validate import validate_workflow

    spec = pb.WorkflowSpec(name="w")
    spec.tasks.add(name="a", command="x", pool="no spaces")
    with pytest.raises(InvalidSpec, match=r"tasks\[0\]\.pool"):
        validate_workflow(spec)
