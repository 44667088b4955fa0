"""Priority, quotas and locks: the token bucket, the lock rules, their decisions in apply (every
replica the same), their release on every way an attempt ends, and the start order of the queue."""

from __future__ import annotations

from typing import Any

import pytest

from raftsched import codec
from raftsched.errors import InvalidSpec
from raftsched.fsm.policy import (
    TOKEN,
    PolicyBook,
    Reservations,
    default_burst,
    format_rate,
    parse_rate,
    tokens_at,
    validate_quota,
)
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.leader.queue import WaitQueue, start_order
from raftsched.model import Lock, LockMode, ManualTrigger, Overlap, TaskSpec, parse_lock
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import T0, S, apply, assign, create, domain, fresh, join, result, run_of, trigger

# -- the token bucket --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "milli"),
    [("50/s", 50_000), ("50", 50_000), ("300/m", 5_000), ("4/h", 1), ("0.5/s", 500), ("1/S", 1000)],
)
def test_parse_rate(text: str, milli: int) -> None:
    assert parse_rate(text) == milli


@pytest.mark.parametrize("text", ["abc", "5/d", "-1/s", "nan/s", "1/h", "2000000/s", ""])
def test_parse_rate_refuses_with_the_accepted_forms(text: str) -> None:
    with pytest.raises(InvalidSpec) as err:
        parse_rate(text)
    assert err.value.field == "rate"


def test_format_rate() -> None:
    assert [format_rate(r) for r in (0, 500, 1000, 50_000, 1)] == ["-", "0.5/s", "1/s", "50/s", "0.001/s"]


def test_bucket_refills_at_the_rate_from_leader_time_and_caps_at_the_burst() -> None:
    q = pb.QuotaRecord(rate_milli=2000, burst=5, tokens_micro=0, refilled_ms=T0)
    assert tokens_at(q, T0) == 0
    assert tokens_at(q, T0 - S) == 0  # an older time never takes tokens away
    assert tokens_at(q, T0 + 500) == 1 * TOKEN  # 2/s: one token per 500 ms
    assert tokens_at(q, T0 + 1250) == int(2.5 * TOKEN)
    assert tokens_at(q, T0 + 60 * S) == 5 * TOKEN
    assert default_burst(2000) == 2 and default_burst(500) == 1


def test_quota_validation_names_the_field() -> None:
    cases = [
        (pb.QuotaRecord(kind="team", name="a", max_running=1), "quota.kind"),
        (pb.QuotaRecord(kind="owner", name="", max_running=1), "quota.owner"),
        (pb.QuotaRecord(kind="owner", name="a"), "quota"),
        (pb.QuotaRecord(kind="owner", name="a", burst=3, max_running=1), "quota.burst"),
        (pb.QuotaRecord(kind="namespace", name="a", max_running=2_000_000), "quota.max_running"),
        (pb.QuotaRecord(kind="owner", name="a\0", max_running=1), "quota.owner"),
    ]
    for q, field in cases:
        with pytest.raises(InvalidSpec) as err:
            validate_quota(q)
        assert err.value.field == field


def test_book_takes_a_token_and_a_running_place_and_gives_the_place_back() -> None:
    book = PolicyBook(MemoryStore())
    book.set_quota(pb.QuotaRecord(kind="owner", name="A", rate_milli=1000, burst=2, max_running=3), T0)
    need = book.need("A", "default", ())
    assert need is not None and need.quotas == (("owner", "A"),)
    assert book.need("B", "default", ()) is None  # no quota, no lock: nothing to take
    holds = [book.acquire(need, T0, f"r{i}/0/1", "t") for i in range(2)]
    assert holds[0] == ["o:A"]
    assert book.check(need, T0) == "quota owner=A: rate 1/s, burst 2, max-running 3"
    assert book.check(need, T0 + S) == ""  # one token back after a second
    book.acquire(need, T0 + S, "r2/0/1", "t")
    assert book.check(need, T0 + 10 * S) == "quota owner=A: rate 1/s, burst 2, max-running 3"
    book.release(holds[0], "r0/0/1")
    assert book.check(need, T0 + 10 * S) == ""
    reserved = Reservations()
    reserved.add(("r9", 0), need)  # proposed, not applied: counted as taken
    assert book.check(need, T0 + 10 * S, reserved).startswith("quota owner=A")
    reserved.remove(("r9", 0))
    assert book.check(need, T0 + 10 * S, reserved) == ""


# -- locks -------------------------------------------------------------------------------------


def test_lock_rules_exclusive_alone_shared_together() -> None:
    book = PolicyBook(MemoryStore())
    x = book.need("", "", (Lock("db"),))
    s = book.need("", "", (Lock("db", LockMode.SHARED),))
    assert x is not None and s is not None
    held = book.acquire(s, T0, "a/0/1", "t")
    assert book.check(s, T0) == "" and book.check(x, T0) == "lock db: held"
    book.acquire(s, T0, "b/0/1", "t")
    book.release(held, "a/0/1")
    assert book.check(x, T0) == "lock db: held"
    book.release(["s:db"], "b/0/1")
    assert book.check(x, T0) == "" and book.holders == {} and book.exclusive == {}
    book.acquire(x, T0, "c/0/1", "t")
    assert book.check(s, T0) == "lock db: held"


def test_all_locks_at_once_or_none() -> None:
    book = PolicyBook(MemoryStore())
    ab = book.need("", "", (Lock("b"), Lock("a")))
    b = book.need("", "", (Lock("b"),))
    assert ab is not None and b is not None
    book.acquire(b, T0, "x/0/1", "t")
    assert book.check(ab, T0) == "lock b: held"
    assert "a" not in book.holders  # nothing was taken while it waits
    assert book.acquire(ab, T0, "y/0/1", "t") == ["x:a", "x:b"]  # (forced) in name order


def test_lock_parsing_and_validation() -> None:
    assert parse_lock("db") == Lock("db")
    assert parse_lock("db:shared") == Lock("db", LockMode.SHARED)
    assert parse_lock("order_sync:write") == Lock("order_sync")
    assert parse_lock("order_sync:read") == Lock("order_sync", LockMode.SHARED)
    assert parse_lock("a:b") == Lock("a:b")  # not a mode: part of the name
    with pytest.raises(InvalidSpec, match=r"locks\.name"):
        parse_lock("bad name")
    with pytest.raises(InvalidSpec, match="named twice"):
        TaskSpec("t", ManualTrigger(), command="x", locks=(Lock("a"), Lock("a", LockMode.SHARED)))
    with pytest.raises(InvalidSpec, match="at most 16"):
        TaskSpec("t", ManualTrigger(), command="x", locks=tuple(Lock(f"l{i}") for i in range(17)))
    with pytest.raises(InvalidSpec, match="list of locks"):
        TaskSpec("t", ManualTrigger(), command="x", locks=["a"])  # type: ignore[arg-type]
    spec = TaskSpec("t", ManualTrigger(), command="x", locks=(Lock("b"), Lock("a", LockMode.SHARED)))
    back = codec.spec_from_pb(codec.spec_to_pb(spec))
    assert back.locks == (Lock("a", LockMode.SHARED), Lock("b"))  # canonical order, by name


# -- in apply -----------------------------------------------------------------------------------


def quota_cmd(now: int, kind: str, name: str, **limits: int) -> bytes:
    q = pb.QuotaRecord(kind=kind, name=name, **limits)
    return writes.set_quota(q, now_ms=now, epoch=1, origin="n1", key=f"q{now}{kind}{name}")


def _runs(state: SchedulerState, spec: TaskSpec, n: int, now: int = T0) -> list[str]:
    assert create(state, spec, now=now).ok
    return [trigger(state, spec.name, now=now + i).run.run_id for i in range(n)]


def test_apply_refuses_an_assignment_over_quota_and_records_why() -> None:
    state = fresh()
    assert apply(state, join("ex1", 10)).ok
    assert apply(state, quota_cmd(T0, "owner", "A", rate_milli=1000, burst=2)).ok
    runs = _runs(state, TaskSpec("t", ManualTrigger(), command="x", owner="A", overlap=Overlap.ALLOW), 3)
    res = apply(state, assign(T0 + 10, *[(r, 0, 1, "ex1") for r in runs]))
    assert (res.accounted, res.refused) == (2, 1)
    third = run_of(state, runs[2])
    assert third.shards[0].state == pb.PENDING
    assert third.shards[0].waiting == "quota owner=A: rate 1/s, burst 2"
    assert [e.event for e in third.timeline][-1] == "waiting"
    res = apply(state, assign(T0 + 10 + S, (runs[2], 0, 1, "ex1")))  # a second later: a token
    assert res.accounted == 1
    started = run_of(state, runs[2]).shards[0]
    assert started.waiting == "" and started.holds == ["o:A"]
    assert state.quotas()[0].running == 3


def test_a_new_quota_counts_what_is_running_already() -> None:
    state = fresh()
    assert apply(state, join("ex1", 10)).ok
    runs = _runs(state, TaskSpec("t", ManualTrigger(), command="x", namespace="ns", overlap=Overlap.ALLOW), 2)
    assert apply(state, assign(T0 + 10, *[(r, 0, 1, "ex1") for r in runs])).accounted == 2
    assert apply(state, quota_cmd(T0 + 20, "namespace", "ns", max_running=2)).ok
    assert state.quotas()[0].running == 2
    assert apply(state, result(T0 + 30, runs[0], 1, "ex1", True)).ok
    assert state.quotas()[0].running == 1


@pytest.mark.parametrize(
    "end",
    ["success", "failure", "timed_out", "lost", "executor_left"],
)
def test_locks_and_quota_places_are_released_however_the_attempt_ends(end: str) -> None:
    state = fresh()
    assert apply(state, join("ex1", 10)).ok
    assert apply(state, quota_cmd(T0, "owner", "A", max_running=5)).ok
    spec = TaskSpec("t", ManualTrigger(), command="x", owner="A", locks=(Lock("db"),), overlap=Overlap.ALLOW)
    runs = _runs(state, spec, 2)
    res = apply(state, assign(T0 + 10, *[(r, 0, 1, "ex1") for r in runs]))
    assert (res.accounted, res.refused) == (1, 1)
    assert [v.name for v in state.locks()] == ["db"]
    now = T0 + 20
    if end == "executor_left":
        cmd = pb.Command(epoch=1, now_ms=now, origin="n1")
        cmd.executor_leave.name = "ex1"
        cmd.executor_leave.dead = True
        assert apply(state, codec.encode_command(cmd)).ok
    else:
        extra = {"timed_out": True} if end == "timed_out" else {"lost": True} if end == "lost" else {}
        assert apply(
            state, result(now, runs[0], 1, "" if end == "lost" else "ex1", end == "success", **extra)
        ).ok
    assert state.locks() == [] or all(not v.holders for v in state.locks())
    assert state.quotas()[0].running == 0
    assert run_of(state, runs[0]).shards[0].holds == []


def test_restore_and_replay_rebuild_the_same_holders_and_buckets() -> None:
    state = fresh()
    log: list[bytes] = [
        join("ex1", 10),
        quota_cmd(T0, "owner", "A", rate_milli=500, burst=3, max_running=4),
    ]
    for data in log:
        assert apply(state, data).ok
    spec = TaskSpec("t", ManualTrigger(), command="x", owner="A", locks=(Lock("db", LockMode.SHARED),))
    assert create(state, spec, now=T0).ok
    runs = [trigger(state, "t", now=T0 + i).run.run_id for i in range(2)]
    assert apply(state, assign(T0 + 10, *[(r, 0, 1, "ex1") for r in runs])).accounted == 2
    copy = SchedulerState.load(MemoryStore())
    copy.restore(state.snapshot(), 1)
    assert domain(copy) == domain(state)
    assert [(v.name, len(v.holders)) for v in copy.locks()] == [("db", 2)]
    assert copy.quotas() == state.quotas()


def test_a_quota_can_be_deleted_and_listed() -> None:
    state = fresh()
    assert apply(state, quota_cmd(T0, "owner", "A", max_running=1)).ok
    assert apply(state, quota_cmd(T0, "namespace", "ns", rate_milli=2000)).ok
    assert [(q.kind, q.name, q.burst) for q in state.quotas()] == [("namespace", "ns", 2), ("owner", "A", 0)]
    cmd = pb.Command(epoch=1, now_ms=T0, origin="n1")
    cmd.delete_quota.kind, cmd.delete_quota.name = "owner", "A"
    assert apply(state, codec.encode_command(cmd)).ok
    again = apply(state, codec.encode_command(cmd))
    assert not again.ok and again.code == "not_found"
    bad = apply(state, quota_cmd(T0, "owner", "B"))
    assert not bad.ok and bad.code == "invalid_argument"


# -- the start order ------------------------------------------------------------------------------


class _Item:
    def __init__(self, priority: int, nominal: int, run_id: str) -> None:
        self.order = start_order(priority, nominal, run_id, 0)


def test_wait_queue_is_priority_then_nominal_then_run_id() -> None:
    queue: WaitQueue[_Item] = WaitQueue()
    items = {
        "late-urgent": _Item(9, 30, "late-urgent"),
        "old-normal": _Item(5, 10, "old-normal"),
        "new-normal": _Item(5, 20, "new-normal"),
        "tie-b": _Item(5, 20, "tie-b"),
        "low": _Item(0, 0, "low"),
    }
    for name in ("low", "new-normal", "tie-b", "old-normal", "late-urgent"):
        queue.add((name, 0), items[name])
    assert [i.order[2] for i in queue] == ["late-urgent", "old-normal", "new-normal", "tie-b", "low"]
    assert queue.remove(("new-normal", 0)) is items["new-normal"]
    assert queue.remove(("new-normal", 0)) is None
    assert [i.order[2] for i in queue] == ["late-urgent", "old-normal", "tie-b", "low"]
    assert len(queue) == 4 and ("low", 0) in queue


# -- workflow files ------------------------------------------------------------------------------


def test_workflow_yaml_locks_in_every_form_and_the_default_priority() -> None:
    from raftsched.workflow.files import parse_workflow_text

    text = """name: sync
tasks:
  - name: a
    command: ./a.sh
    locks: [warehouse, "order_sync:shared", {name: files, mode: exclusive}]
  - name: b
    command: ./b.sh
    priority: 9
    locks: "order_sync:write"
"""
    spec = parse_workflow_text(text, "yaml", "sync.yaml")
    a, b = spec.tasks
    assert [(lk.name, lk.shared) for lk in a.locks] == [
        ("warehouse", False),
        ("order_sync", True),
        ("files", False),
    ]
    assert [(lk.name, lk.shared) for lk in b.locks] == [("order_sync", False)]
    assert (a.priority, b.priority) == (5, 9)


@pytest.mark.parametrize(
    ("locks", "message"),
    [
        (
            "[{name: x, mode: sometimes}]",
            """tasks[0].locks[0].mode ("a"): 'sometimes' is not one of exclusive, shared""",
        ),
        ("[x, x]", 'lock "x" is named twice'),
        ('["bad name"]', "is not a valid name"),
        ("[{mode: shared}]", """tasks[0].locks[0] ("a"): name required"""),
    ],
)
def test_workflow_yaml_lock_errors_say_where(locks: str, message: str) -> None:
    from raftsched.errors import InvalidWorkflow
    from raftsched.workflow.files import parse_workflow_text

    text = f"name: w\ntasks:\n  - name: a\n    command: x\n    locks: {locks}\n"
    with pytest.raises(InvalidWorkflow) as err:
        parse_workflow_text(text, "yaml", "w.yaml")
    assert message in str(err.value)


def test_wait_queue_lazy_removal_and_re_adding_keep_one_entry_per_key() -> None:
    queue: WaitQueue[_Item] = WaitQueue()
    for i in range(200):
        queue.add((f"r{i:03}", 0), _Item(5, i, f"r{i:03}"))
    for i in range(0, 200, 2):
        queue.remove((f"r{i:03}", 0))
    queue.add(("r001", 0), _Item(9, 1, "r001"))  # re-added with a new order: first now
    queue.add(("r003", 0), _Item(5, 3, "r003"))  # re-added with an equal order: once
    walked = [i.order[2] for i in queue]
    assert walked[0] == "r001" and walked.count("r003") == 1
    assert walked == ["r001"] + [f"r{i:03}" for i in range(3, 200, 2)]
    assert len(queue) == 100


class _CountingGets(dict[tuple[str, int], _Item]):
    gets = 0

    def get(self, key: tuple[str, int], default: Any = None) -> Any:
        self.gets += 1
        return super().get(key, default)


def test_wait_queue_compaction_looks_up_no_entry_of_the_dead_prefix_nor_of_an_emptied_queue() -> None:
    # The prefix a walk skipped is known dead; the steady state empties a queue between bursts
    # (compaction was a dict look-up per entry, ~3 % of the leader loop's samples; issue 31).
    queue: WaitQueue[_Item] = WaitQueue()
    for i in range(200):
        queue.add((f"r{i:03}", 0), _Item(5, i, f"r{i:03}"))
    for i in range(60):
        queue.remove((f"r{i:03}", 0))
    assert next(iter(queue)).order[2] == "r060"  # the walk moves the head past the dead prefix
    counting = queue._items = _CountingGets(queue._items)
    for i in range(60, 101):  # the 101st dead entry, with 99 live ones: a compaction
        queue.remove((f"r{i:03}", 0))
    assert counting.gets == 140  # before: 200 (every entry, the 60 of the dead prefix too)
    queue.add(("r000", 0), _Item(5, 0, "r000"))  # in front again, after the compaction
    assert [i.order[2] for i in queue] == ["r000"] + [f"r{i:03}" for i in range(101, 200)]

    emptied: WaitQueue[_Item] = WaitQueue()
    for i in range(65):
        emptied.add((f"r{i:03}", 0), _Item(5, i, f"r{i:03}"))
    counting = emptied._items = _CountingGets(emptied._items)
    for i in range(65):  # the 65th removal compacts an empty queue
        emptied.remove((f"r{i:03}", 0))
    assert counting.gets == 0 and not emptied and list(emptied) == []  # before: 65 look-ups
    emptied.add(("r100", 0), _Item(5, 100, "r100"))
    assert [i.order[2] for i in emptied] == ["r100"]


# -- the CLI -------------------------------------------------------------------------------------


def test_cli_lock_options_and_quota_commands_parse() -> None:
    from raftsched import cli
    from raftsched.cli.input import lazy_now

    parser = cli.build_parser()
    args = parser.parse_args(
        ["task", "add", "t", "--manual", "--command", "x", "--lock", "db", "--lock", "f:shared"]
    )
    spec = cli.spec_from_args(args, lazy_now())
    assert spec.locks == (Lock("db"), Lock("f", LockMode.SHARED))
    current = TaskSpec("t", ManualTrigger(), command="x", locks=(Lock("db"),))
    cleared = cli.merge_spec(current, parser.parse_args(["task", "update", "t", "--no-locks"]), lazy_now())
    assert cleared.locks == ()
    kept = cli.merge_spec(current, parser.parse_args(["task", "update", "t", "--priority", "9"]), lazy_now())
    assert kept.locks == (Lock("db"),) and kept.priority == 9
    q = parser.parse_args(
        ["quota", "set", "--owner", "A", "--rate", "50/s", "--burst", "100", "--max-running", "20"]
    )
    assert (q.owner, q.rate, q.burst, q.max_running) == ("A", "50/s", 100, 20)
    assert parser.parse_args(["quota", "list", "--json"]).json
    assert parser.parse_args(["quota", "delete", "--namespace", "ns"]).namespace == "ns"
    assert parser.parse_args(["locks", "--json"]).json
    from raftsched.cli.errors import UsageError

    with pytest.raises(UsageError, match="not allowed with argument --owner"):
        parser.parse_args(["quota", "set", "--owner", "A", "--namespace", "B", "--max-running", "1"])


def test_wait_queue_skips_its_dead_head_and_still_sees_urgent_arrivals() -> None:
    queue: WaitQueue[_Item] = WaitQueue()
    for i in range(50):
        queue.add((f"r{i:03}", 0), _Item(5, 100 + i, f"r{i:03}"))
    for i in range(40):
        queue.remove((f"r{i:03}", 0))
    assert [i.order[2] for i in queue][:1] == ["r040"]  # the walk moved its head past the dead
    queue.add(("urgent", 0), _Item(9, 500, "urgent"))  # sorts before the dead prefix
    queue.add(("old", 0), _Item(5, 1, "old"))  # so does an old fire
    walked = [i.order[2] for i in queue]
    assert walked == ["urgent", "old"] + [f"r{i:03}" for i in range(40, 50)]
