"""raftsched.Client against real in-process gRPC servers with scripted answers.

Each server implements the generated ``AdminServicer``; a test queues what its next calls do
(answer, abort with a status and raftsched metadata, or hang past the client's deadline) and reads
back the requests it received. Backoff is recorded instead of slept.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from raftsched import client as client_module
from raftsched.client import Client
from raftsched.errors import (
    AlreadyExists,
    Conflict,
    InvalidSpec,
    NotFound,
    RaftschedError,
    StaleEpoch,
    Unavailable,
)
from raftsched.model import CronTrigger, RunState, TaskSpec
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

ADD_SERVICER: Any = pb_grpc.add_AdminServicer_to_server  # untyped generated code

Behaviour = Callable[[Message, Any], Message]

METHODS = (
    "AddTask",
    "AddTasks",
    "UpdateTask",
    "DeleteTask",
    "SetEnabled",
    "TriggerNow",
    "GetTask",
    "ListTasks",
    "ListRuns",
    "FireAccounting",
    "Explain",
    "ClusterStatus",
    "NodeStatus",
)

SPEC = TaskSpec("backup", CronTrigger("30 2 * * *", "Europe/Berlin"), command="backup.sh")


def record(name: str, version: int = 1) -> pb.TaskRecord:
    return pb.TaskRecord(spec=pb.TaskSpec(name=name), version=version, enabled=True)


def answer(reply: Message) -> Behaviour:
    return lambda request, context: reply


def abort(status: grpc.StatusCode, code: str = "", details: str = "", leader: str = "") -> Behaviour:
    def behave(request: Message, context: Any) -> Message:
        metadata = [("raftsched-code", code)] if code else []
        if leader:
            metadata.append(("raftsched-leader", leader))
        context.set_trailing_metadata(tuple(metadata))
        context.abort(status, details or code or status.name)
        raise AssertionError("context.abort raises")

    return behave


@dataclass
class Scripted:
    """The state behind one server: a queue of behaviours and the requests received."""

    address: str = ""
    script: list[Behaviour] = field(default_factory=list)
    default: Behaviour | None = None
    requests: list[tuple[str, Message]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, method: str, request: Message, context: Any) -> Message:
        with self.lock:
            self.requests.append((method, request))
            behaviour = self.script.pop(0) if self.script else self.default
        if behaviour is None:
            return abort(grpc.StatusCode.INTERNAL, "internal", f"unscripted call to {method}")(
                request, context
            )
        return behaviour(request, context)

    def hang(self) -> Behaviour:
        """Answer only after the test ends: the client's deadline expires first."""

        def behave(request: Message, context: Any) -> Message:
            self.release.wait(10)
            return pb.TaskReply()

        return behave

    def keys(self) -> list[str]:
        return [getattr(r, "idempotency_key", "") for _, r in self.requests]

    def methods(self) -> list[str]:
        return [m for m, _ in self.requests]


class Servicer(pb_grpc.AdminServicer):  # type: ignore[misc, unused-ignore]  # Any when mypy skips generated code
    def __init__(self, state: Scripted) -> None:
        self.state = state


def _bind(method: str) -> Callable[[Servicer, Message, Any], Message]:
    def handler(self: Servicer, request: Message, context: Any) -> Message:
        return self.state.handle(method, request, context)

    return handler


for _method in METHODS:
    setattr(Servicer, _method, _bind(_method))


@pytest.fixture
def server() -> Iterator[Callable[[], Scripted]]:
    """A factory of running scripted servers on 127.0.0.1 (OS-assigned ports)."""
    started: list[tuple[Any, Scripted]] = []

    def start() -> Scripted:
        state = Scripted()
        srv = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        ADD_SERVICER(Servicer(state), srv)
        port = srv.add_insecure_port("127.0.0.1:0")
        srv.start()
        state.address = f"127.0.0.1:{port}"
        started.append((srv, state))
        return state

    yield start
    for srv, state in started:
        state.release.set()
        srv.stop(grace=None)


@pytest.fixture
def dead() -> Iterator[Callable[[], str]]:
    """Addresses that refuse connections: bound (so no one else takes the port) but not listening."""
    sockets: list[socket.socket] = []

    def make() -> str:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sockets.append(sock)
        return f"127.0.0.1:{sock.getsockname()[1]}"

    yield make
    for sock in sockets:
        sock.close()


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Backoffs the client asked for, recorded instead of slept."""
    recorded: list[float] = []
    monkeypatch.setattr(client_module, "_sleep", recorded.append)
    return recorded


# -- redirects and retries -------------------------------------------------------------------------


def test_write_follows_leader_hint_and_reuses_the_idempotency_key(
    server: Callable[[], Scripted], sleeps: list[float]
) -> None:
    follower, leader = server(), server()
    follower.script.append(
        abort(grpc.StatusCode.FAILED_PRECONDITION, "not_leader", "n1 is not the leader", leader.address)
    )
    leader.default = answer(pb.TaskReply(task=record("backup")))

    with Client(follower.address, timeout=5) as client:
        got = client.add_task(SPEC, disabled=True)
        assert client.targets == (follower.address, leader.address)  # the hint was learned
        client.get_task("backup")  # and is preferred from now on

    assert got.spec.name == "backup"
    (key,) = set(follower.keys())
    assert len(key) == 32 and set(key) <= set("0123456789abcdef")
    assert leader.keys()[0] == key
    assert leader.methods() == ["AddTask", "GetTask"]
    sent = leader.requests[0][1]
    assert isinstance(sent, pb.AddTaskRequest)
    assert sent.disabled and sent.spec.trigger.cron.timezone == "Europe/Berlin"
    assert sleeps == []  # a fresh redirect is followed at once


def test_unavailable_rotates_to_the_next_target_after_a_backoff(
    server: Callable[[], Scripted], sleeps: list[float]
) -> None:
    first, second = server(), server()
    first.script.append(abort(grpc.StatusCode.UNAVAILABLE))
    second.default = answer(pb.RunReply(run=pb.Run(run_id="backup@1~m1", task="backup")))

    with Client([first.address, second.address], timeout=5) as client:
        run = client.trigger("backup", '{"full": true}')

    assert run.run_id == "backup@1~m1"
    assert first.keys() == second.keys()
    assert sleeps == [0.05]


def test_unreachable_target_rotates(
    server: Callable[[], Scripted], dead: Callable[[], str], sleeps: list[float]
) -> None:
    live = server()
    live.default = answer(pb.DeleteTaskReply())
    with Client(f"{dead()},{live.address}", timeout=5) as client:
        client.delete_task("backup")
    assert live.methods() == ["DeleteTask"]
    assert len(sleeps) == 1


def test_not_leader_without_a_hint_rotates(server: Callable[[], Scripted], sleeps: list[float]) -> None:
    candidate, leader = server(), server()
    candidate.script.append(abort(grpc.StatusCode.FAILED_PRECONDITION, "not_leader", "no leader elected yet"))
    leader.default = answer(pb.TaskReply(task=record("backup")))
    with Client([candidate.address, leader.address], timeout=5) as client:
        client.enable_task("backup")
    assert candidate.keys() == leader.keys()
    assert len(sleeps) == 1


def test_a_timed_out_write_is_retried_with_the_same_key(
    server: Callable[[], Scripted], sleeps: list[float]
) -> None:
    slow, fast = server(), server()
    slow.script.append(slow.hang())
    fast.default = answer(pb.TaskReply(task=record("backup", version=2)))
    with Client([slow.address, fast.address], timeout=0.3) as client:
        got = client.update_task(SPEC, expected_version=1)
    assert got.version == 2
    assert slow.keys() == fast.keys()
    sent = fast.requests[0][1]
    assert isinstance(sent, pb.UpdateTaskRequest) and sent.expected_version == 1


def test_stale_epoch_is_retried(server: Callable[[], Scripted], sleeps: list[float]) -> None:
    deposed, leader = server(), server()
    deposed.script.append(abort(grpc.StatusCode.UNAVAILABLE, StaleEpoch.code, "epoch 3 < 4"))
    leader.default = answer(pb.TaskReply(task=record("backup")))
    with Client([deposed.address, leader.address], timeout=5) as client:
        client.disable_task("backup")
    assert deposed.keys() == leader.keys()


def test_a_read_refused_with_not_leader_follows_the_hint(
    server: Callable[[], Scripted], sleeps: list[float]
) -> None:
    follower, leader = server(), server()
    follower.script.append(
        abort(grpc.StatusCode.FAILED_PRECONDITION, "not_leader", "lagging", leader.address)
    )
    leader.default = answer(pb.ListTasksReply(tasks=[record("a"), record("b")]))
    with Client(follower.address, timeout=5) as client:
        tasks = client.list_tasks(prefix="", limit=10)
    assert [t.spec.name for t in tasks] == ["a", "b"]
    assert sleeps == []


def test_each_write_call_draws_a_new_key(server: Callable[[], Scripted], sleeps: list[float]) -> None:
    node = server()
    node.default = answer(pb.TaskReply(task=record("backup")))
    with Client(node.address, timeout=5) as client:
        client.enable_task("backup")
        client.enable_task("backup")
    first, second = node.keys()
    assert first and second and first != second


def test_exhausting_retries_raises_unavailable_naming_every_target(
    dead: Callable[[], str], sleeps: list[float]
) -> None:
    a, b = dead(), dead()
    with Client([a, b], timeout=5, retries=3) as client, pytest.raises(Unavailable) as caught:
        client.add_task(SPEC)
    message = str(caught.value)
    assert a in message and b in message
    assert "4 attempt(s)" in message and "UNAVAILABLE" in message
    assert "may or may not have been applied" in message
    assert sleeps == [0.05, 0.1, 0.2]


def test_backoff_doubles_up_to_one_second(dead: Callable[[], str], sleeps: list[float]) -> None:
    with Client(dead(), timeout=5) as client, pytest.raises(Unavailable) as caught:
        client.get_task("backup")
    assert sleeps == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    assert "may or may not" not in str(caught.value)  # a read has no unknown outcome


def test_hints_that_bounce_back_are_bounded_with_backoff(
    server: Callable[[], Scripted], sleeps: list[float]
) -> None:
    a, b = server(), server()
    a.default = abort(grpc.StatusCode.FAILED_PRECONDITION, "not_leader", "stale view", b.address)
    b.default = abort(grpc.StatusCode.FAILED_PRECONDITION, "not_leader", "stale view", a.address)
    with Client(a.address, timeout=5, retries=4) as client, pytest.raises(Unavailable):
        client.trigger("backup")
    assert len(a.requests) + len(b.requests) == 5
    assert len(set(a.keys() + b.keys())) == 1
    assert sleeps == [0.05, 0.1, 0.2]  # only the first redirect is free


# -- error mapping ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code", "details", "expected"),
    [
        (grpc.StatusCode.NOT_FOUND, "not_found", "no task 'backup'", NotFound),
        (grpc.StatusCode.ALREADY_EXISTS, "already_exists", "task 'backup' exists", AlreadyExists),
        (grpc.StatusCode.ABORTED, "conflict", "version 3 != 2", Conflict),
        (grpc.StatusCode.NOT_FOUND, "", "no such task", NotFound),  # no raftsched metadata
        (grpc.StatusCode.INTERNAL, "internal", "boom", RaftschedError),
    ],
)
def test_errors_map_to_raftsched_exceptions_without_retry(
    server: Callable[[], Scripted],
    sleeps: list[float],
    status: grpc.StatusCode,
    code: str,
    details: str,
    expected: type[RaftschedError],
) -> None:
    node, other = server(), server()
    node.default = abort(status, code, details)
    with Client([node.address, other.address], timeout=5) as client, pytest.raises(expected) as caught:
        client.get_task("backup")
    assert details in str(caught.value)
    assert len(node.requests) == 1 and other.requests == []
    assert sleeps == []


def test_invalid_argument_becomes_invalid_spec_with_its_field(
    server: Callable[[], Scripted], sleeps: list[float]
) -> None:
    node = server()
    node.default = abort(
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid_argument",
        "trigger.timezone: unknown time zone 'Mars/Base'",
    )
    with Client(node.address, timeout=5) as client, pytest.raises(InvalidSpec) as caught:
        client.add_task(SPEC)
    assert caught.value.field == "trigger.timezone"
    assert "Mars/Base" in caught.value.reason


def test_local_validation_happens_before_any_rpc(server: Callable[[], Scripted]) -> None:
    node = server()
    with Client(node.address, timeout=5) as client:
        with pytest.raises(InvalidSpec):
            client.get_task("not a name!")
        with pytest.raises(InvalidSpec) as caught:
            client.trigger("backup", "[1, 2]")
        assert caught.value.field == "params"
    assert node.requests == []


@pytest.mark.parametrize("targets", ["", " , ", "localhost", "127.0.0.1:99999", []])
def test_bad_targets_are_rejected_up_front(targets: str | list[str]) -> None:
    with pytest.raises(InvalidSpec) as caught:
        Client(targets)
    assert caught.value.field == "targets"


def test_runs_and_fire_accounting_send_their_filters(
    server: Callable[[], Scripted], sleeps: list[float]
) -> None:
    node = server()
    node.script += [
        answer(pb.ListRunsReply(runs=[pb.Run(run_id="backup@1000")])),
        answer(pb.FireAccountingReply(fires=[pb.FireRecord(task="backup", nominal_ms=1000)])),
        answer(pb.ExplainReply(verdict="fired")),
    ]
    with Client(node.address, timeout=5) as client:
        runs = client.runs("backup", since_ms=1, until_ms=2, state=RunState.FAILED, limit=3)
        fires = client.fire_accounting("backup", since_ms=4, until_ms=5, limit=6)
        verdict = client.explain("backup", 1000).verdict
    assert [r.run_id for r in runs] == ["backup@1000"] and fires[0].nominal_ms == 1000
    assert verdict == "fired"
    sent_runs, sent_fires, sent_explain = (r for _, r in node.requests)
    assert sent_runs == pb.ListRunsRequest(task="backup", since_ms=1, until_ms=2, state=pb.FAILED, limit=3)
    assert sent_fires == pb.FireAccountingRequest(task="backup", since_ms=4, until_ms=5, limit=6)
    assert sent_explain == pb.ExplainRequest(task="backup", at_ms=1000)


# -- status ----------------------------------------------------------------------------------------


def status(node_id: str, role: str, term: int, commit: int, leader_id: str = "") -> pb.NodeStatusReply:
    return pb.NodeStatusReply(
        node_id=node_id, role=role, term=term, commit_index=commit, leader_id=leader_id, state_digest="ab"
    )


def test_cluster_status_asks_every_target(server: Callable[[], Scripted], dead: Callable[[], str]) -> None:
    leader, follower = server(), server()
    leader.default = answer(status("n1", "leader", 4, 120))
    follower.default = answer(status("n2", "follower", 4, 118, leader_id="n1"))
    gone = dead()
    with Client([follower.address, gone, leader.address], timeout=5) as client:
        view = client.cluster_status()
    assert (view.leader_id, view.term, view.commit_index) == ("n1", 4, 120)
    assert [n.target for n in view.nodes] == [follower.address, gone, leader.address]
    assert [n.reachable for n in view.nodes] == [True, False, True]
    assert "UNAVAILABLE" in view.nodes[1].error
    assert len(view.reachable) == 2


def test_cluster_status_without_a_reachable_leader_uses_the_newest_term(
    server: Callable[[], Scripted],
) -> None:
    old, new = server(), server()
    old.default = answer(status("n1", "leader", 3, 50))  # deposed, has not heard yet
    new.default = answer(status("n2", "follower", 4, 60, leader_id="n3"))
    with Client([old.address, new.address], timeout=5) as client:
        view = client.cluster_status()
    assert (view.leader_id, view.term, view.commit_index) == ("n3", 4, 60)


def test_node_status_of_a_named_target(server: Callable[[], Scripted], dead: Callable[[], str]) -> None:
    node = server()
    node.default = answer(status("n1", "leader", 1, 1))
    with Client(node.address, timeout=5) as client:
        assert client.node_status().node_id == "n1"
        assert client.node_status(node.address).node_id == "n1"
        gone = dead()
        with pytest.raises(Unavailable) as caught:
            client.node_status(gone)
    assert gone in str(caught.value)


def test_bulk_import_resends_only_the_items_refused_as_unavailable(
    server: Callable[[], Scripted], sleeps: list[float]
) -> None:
    leader = server()
    specs = [TaskSpec(f"t{i}", CronTrigger("* * * * *"), command="true") for i in range(3)]
    leader.script.append(
        answer(
            pb.AddTasksReply(
                results=[
                    pb.ItemResult(name="t0", ok=True, version=1),
                    pb.ItemResult(name="t1", ok=False, code="unavailable", message="retry"),
                    pb.ItemResult(name="t2", ok=False, code="invalid_argument", message="bad"),
                ]
            )
        )
    )
    leader.script.append(answer(pb.AddTasksReply(results=[pb.ItemResult(name="t1", ok=True, version=1)])))
    with Client(leader.address, timeout=5) as client:
        got = client.add_tasks(specs)
    assert [(r.name, r.ok, r.code) for r in got] == [
        ("t0", True, ""),
        ("t1", True, ""),
        ("t2", False, "invalid_argument"),
    ]
    first, second = (r for _, r in leader.requests)
    assert isinstance(second, pb.AddTasksRequest) and isinstance(first, pb.AddTasksRequest)
    assert [t.spec.name for t in second.tasks] == ["t1"]
    assert second.idempotency_key != first.idempotency_key
    assert sleeps == [0.2]


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("get_task", ("t",)),
        ("get_run", ("t@1",)),
        ("explain", ("t", 1)),
        ("fire_accounting", ("t",)),
        ("list_quotas", ()),
        ("list_locks", ()),
        ("get_workflow", ("wf",)),
        ("list_workflows", ()),
        ("get_calendar", ("cal",)),
        ("list_calendars", ()),
        ("get_workflow_run", ("wf@1",)),
        ("list_workflow_runs", ("wf",)),
        ("get_backfill", ("bf",)),
        ("list_backfills", ("wf",)),
        ("alerts", ()),
        ("lineage", ("wf", "t")),
        ("list_tokens", ()),
        ("audit", ()),
    ],
)
def test_every_read_can_be_asked_stale_on_its_own(
    method: str, args: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33: any read accepts ``stale=True`` for one call (any node answers from its own
    state), not only through ``Client(stale_reads=True)``."""
    asked: list[bool | None] = []

    def fake_call(
        self: Client, name: str, request: Message, *, write: bool = False, stale: bool | None = None
    ) -> Any:
        assert not write
        asked.append(stale)
        raise NotFound("stop here")  # the reply's shape is not under test

    monkeypatch.setattr(Client, "_call", fake_call)
    with Client(["127.0.0.1:1"]) as c, pytest.raises(NotFound):
        getattr(c, method)(*args, stale=True)
    assert asked == [True]
