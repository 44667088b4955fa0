"""The replicated membership (raftsched.fsm.membership) through the state machine's apply."""

from __future__ import annotations

from raftsched import codec
from raftsched.config.types import ClusterConfig, NodeConfig
from raftsched.fsm.state import SchedulerState
from raftsched.server.membership import config_members, describe_mismatch
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import T0, fresh

SECRET = "a-secret-of-some-length"


def member(nid: str, port: int) -> pb.Member:
    return pb.Member(id=nid, raft=f"127.0.0.1:{port}", grpc=f"127.0.0.1:{port + 1}")


def seed(state: SchedulerState, *members: pb.Member) -> pb.CommandResult:
    cmd = pb.Command(now_ms=T0, epoch=1, origin="n1")
    cmd.seed_membership.members.extend(members)
    return state.apply(codec.encode_command(cmd)).result


def begin(state: SchedulerState, kind: str, m: pb.Member, now: int = T0) -> pb.CommandResult:
    cmd = pb.Command(now_ms=now, epoch=1, origin="n1")
    cmd.begin_member_change.change.kind = kind
    cmd.begin_member_change.change.member.CopyFrom(m)
    return state.apply(codec.encode_command(cmd)).result


def end(state: SchedulerState, kind: str, nid: str, applied: bool = True) -> pb.CommandResult:
    cmd = pb.Command(now_ms=T0, epoch=1, origin="n1")
    cmd.end_member_change.id = nid
    cmd.end_member_change.kind = kind
    cmd.end_member_change.applied = applied
    return state.apply(codec.encode_command(cmd)).result


def three() -> SchedulerState:
    state = fresh()
    assert seed(state, member("n2", 7002), member("n1", 7000), member("n3", 7004)).ok
    return state


def test_seed_records_the_members_sorted_once() -> None:
    state = three()
    assert [m.id for m in state.membership.members()] == ["n1", "n2", "n3"]
    again = seed(state, member("n9", 7100))
    assert (again.ok, again.code) == (False, "already_exists")
    assert [m.id for m in state.membership.members()] == ["n1", "n2", "n3"]


def test_seed_refuses_duplicates_and_bad_addresses() -> None:
    state = fresh()
    assert seed(state, member("n1", 7000), member("n1", 7010)).code == "invalid_argument"
    bad = pb.Member(id="n1", raft="nowhere", grpc="127.0.0.1:1")
    assert seed(state, bad).code == "invalid_argument"
    assert not state.membership.seeded


def test_add_is_pending_until_its_end_and_one_change_at_a_time() -> None:
    state = three()
    res = begin(state, "add", member("n4", 7006), now=T0 + 5)
    assert res.ok and res.membership.pending.member.id == "n4"
    assert res.membership.pending.started_ms == T0 + 5
    assert [m.id for m in state.membership.members()] == ["n1", "n2", "n3"]
    assert state.membership.get("n4") is not None  # known (routable) while pending
    second = begin(state, "add", member("n5", 7008))
    assert (second.ok, second.code) == (False, "conflict")
    assert "in progress (add n4)" in second.message
    removal = begin(state, "remove", member("n1", 7000))
    assert removal.code == "conflict"
    done = end(state, "add", "n4")
    assert done.ok and not done.membership.HasField("pending")
    assert [m.id for m in state.membership.members()] == ["n1", "n2", "n3", "n4"]
    assert state.membership.record.changes == 1
    assert begin(state, "add", member("n5", 7008)).ok  # the next change may begin now


def test_add_refuses_an_existing_id_or_address() -> None:
    state = three()
    assert begin(state, "add", member("n2", 7100)).code == "already_exists"
    taken = pb.Member(id="n9", raft="127.0.0.1:7002", grpc="127.0.0.1:7200")
    assert begin(state, "add", taken).code == "already_exists"
    assert state.membership.pending() is None


def test_remove_and_abandon() -> None:
    state = three()
    assert begin(state, "remove", pb.Member(id="n7")).code == "not_found"
    res = begin(state, "remove", pb.Member(id="n3"))
    assert res.ok and res.membership.pending.member.raft == "127.0.0.1:7004"  # filled from the record
    assert end(state, "add", "n3").code == "conflict"  # not the change in progress
    assert end(state, "remove", "n3", applied=False).ok  # abandoned: nothing changes
    assert [m.id for m in state.membership.members()] == ["n1", "n2", "n3"]
    assert begin(state, "remove", pb.Member(id="n3")).ok
    assert end(state, "remove", "n3").ok
    assert [m.id for m in state.membership.members()] == ["n1", "n2"]
    assert end(state, "remove", "n3").code == "not_found"  # nothing in progress


def test_the_last_member_cannot_be_removed_and_changes_need_a_seed() -> None:
    state = fresh()
    assert begin(state, "add", member("n1", 7000)).code == "unavailable"
    assert seed(state, member("n1", 7000)).ok
    assert begin(state, "remove", pb.Member(id="n1")).code == "invalid_argument"


def test_membership_survives_a_reload_and_is_part_of_the_snapshot() -> None:
    state = three()
    begin(state, "add", member("n4", 7006))
    store = state.store
    assert isinstance(store, MemoryStore)
    again = SchedulerState.load(store)
    assert again.membership.record == state.membership.record
    copy = fresh()
    copy.restore(state.snapshot(), 10)
    assert copy.membership.record == state.membership.record


def test_mismatch_between_config_and_membership_is_described() -> None:
    from pathlib import Path

    nodes = (
        NodeConfig("n1", "127.0.0.1:7000", "127.0.0.1:7001", Path("/tmp/a")),
        NodeConfig("n2", "127.0.0.1:7002", "127.0.0.1:7003", Path("/tmp/b")),
        NodeConfig("n4", "127.0.0.1:7006", "127.0.0.1:7099", Path("/tmp/d")),
    )
    config = ClusterConfig(name="t", secret=SECRET, nodes=nodes)
    state = fresh()
    assert describe_mismatch(config, state.membership.record) == ""  # nothing recorded yet
    seed(state, *config_members(nodes[:2]), member("n3", 7004))
    text = describe_mismatch(config, state.membership.record)
    assert "n4 is in the config file but not a member" in text
    assert "member n3 is not in the config file" in text
    begin(state, "add", member("n4", 7006))
    text = describe_mismatch(config, state.membership.record)
    assert "n4.grpc is 127.0.0.1:7099 in the config file but 127.0.0.1:7007 in the membership" in text
