"""Shared RPC plumbing: the ``@rpc`` decorator's error mapping and propose-and-wait's outcomes."""

from __future__ import annotations

import asyncio
import inspect
import threading

import grpc
import pytest

from raftsched.abc import CommitHook, ProposeCallback, ProposeError
from raftsched.errors import InvalidSpec, NotFound, NotLeader, RaftschedError, Unavailable
from raftsched.rpc import plumbing
from raftsched.rpc.plumbing import Refused, propose_and_wait, rpc
from raftsched.v1 import log_pb2 as logpb


class Aborted(Exception):
    """What grpc.aio's ``context.abort`` raises."""


class Context:
    """The part of ``grpc.aio.ServicerContext`` the plumbing uses."""

    def __init__(self) -> None:
        self.metadata: tuple[tuple[str, str], ...] = ()
        self.status: grpc.StatusCode | None = None
        self.details = ""

    def set_trailing_metadata(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self.metadata = metadata

    async def abort(self, status: grpc.StatusCode, details: str) -> None:
        self.status, self.details = status, details
        raise Aborted(details)


class Servicer:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    @rpc
    async def Call(self, request: str, context: Context) -> str:
        if self.error is not None:
            raise self.error
        return request.upper()


def call(error: Exception | None) -> Context:
    context = Context()
    with pytest.raises(Aborted):
        asyncio.run(Servicer(error).Call("x", context))
    return context


def test_a_handler_that_succeeds_answers_untouched() -> None:
    context = Context()
    assert asyncio.run(Servicer(None).Call("ok", context)) == "OK"
    assert context.status is None and context.metadata == ()


def test_the_decorated_handler_stays_a_coroutine_function_for_grpc_aio() -> None:
    assert inspect.iscoroutinefunction(Servicer.Call)
    assert Servicer.Call.__name__ == "Call"


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (InvalidSpec("trigger.cron", "bad"), grpc.StatusCode.INVALID_ARGUMENT, "invalid_argument"),
        (NotFound("task 't' does not exist"), grpc.StatusCode.NOT_FOUND, "not_found"),
        (Unavailable("changing leadership"), grpc.StatusCode.UNAVAILABLE, "unavailable"),
        (Refused("stale_epoch", "epoch 3 < 4"), grpc.StatusCode.UNAVAILABLE, "stale_epoch"),
        (Refused("conflict", "version"), grpc.StatusCode.ABORTED, "conflict"),
        (Refused("something_new", "?"), grpc.StatusCode.UNKNOWN, "something_new"),
        (RaftschedError("boom"), grpc.StatusCode.INTERNAL, "internal"),
    ],
)
def test_raftsched_errors_become_a_status_and_the_code_metadata(
    error: RaftschedError, status: grpc.StatusCode, code: str
) -> None:
    context = call(error)
    assert context.status == status
    assert context.details == str(error)
    assert context.metadata == (("raftsched-code", code),)


def test_not_leader_carries_the_leader_hint_only_when_known() -> None:
    hinted = call(NotLeader("n1 is not the leader", "10.0.0.2:7000"))
    assert hinted.status == grpc.StatusCode.FAILED_PRECONDITION
    assert hinted.metadata == (("raftsched-code", "not_leader"), ("raftsched-leader", "10.0.0.2:7000"))
    assert call(NotLeader("n1 is not the leader")).metadata == (("raftsched-code", "not_leader"),)


def test_other_exceptions_are_bugs_and_reach_grpc_unmapped() -> None:
    context = Context()
    with pytest.raises(KeyError):
        asyncio.run(Servicer(KeyError("x")).Call("x", context))
    assert context.status is None


class Proposer:
    """Answers every proposal from another thread, as the consensus thread does."""

    def __init__(self, result: bytes | None, error: ProposeError | None = None, answer: bool = True) -> None:
        self.result, self.error, self.answer = result, error, answer
        self.proposed: list[bytes] = []

    def propose(self, data: bytes, callback: ProposeCallback, on_commit: CommitHook | None = None) -> None:
        self.proposed.append(data)
        if self.answer:
            threading.Thread(target=callback, args=(self.result, self.error)).start()


def refused(proposer: Proposer) -> Refused:
    with pytest.raises(Refused) as info:
        asyncio.run(propose_and_wait(proposer, b"cmd"))
    return info.value


def test_an_applied_command_returns_its_result() -> None:
    ok = logpb.CommandResult(ok=True, fired=3)
    proposer = Proposer(ok.SerializeToString())
    assert asyncio.run(propose_and_wait(proposer, b"cmd")) == ok
    assert proposer.proposed == [b"cmd"]


def test_a_rejected_command_raises_its_rejection_code() -> None:
    rejected = logpb.CommandResult(ok=False, code="not_found", message="task 't' does not exist")
    exc = refused(Proposer(rejected.SerializeToString()))
    assert (exc.code, str(exc)) == ("not_found", "task 't' does not exist")
    no_code = logpb.CommandResult(ok=False, message="?").SerializeToString()
    assert refused(Proposer(no_code)).code == "internal"


def test_a_command_that_did_not_commit_keeps_a_known_code_else_is_unavailable() -> None:
    exc = refused(Proposer(None, ProposeError("not_leader", "raft: not_leader")))
    assert exc.code == "not_leader" and "write not committed" in str(exc)
    assert refused(Proposer(None, ProposeError("queue_full", "raft: queue_full"))).code == "unavailable"


def test_an_unknown_outcome_is_unavailable() -> None:
    assert refused(Proposer(b"")).code == "unavailable"


def test_no_answer_in_time_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plumbing, "PROPOSE_TIMEOUT_S", 0.01)
    exc = refused(Proposer(None, answer=False))
    assert exc.code == "unavailable" and "outcome is unknown" in str(exc)


def test_status_messages_are_bounded_on_the_wire() -> None:
    def wire(text: str) -> int:
        return sum(1 if " " <= c <= "~" and c != "%" else 3 * len(c.encode()) for c in text)

    assert plumbing.status_message("task 'x' does not exist") == "task 'x' does not exist"
    for text in ("a" * 100_000, "\u00e9" * 6_000, "\n" * 5_000, "%" * 5_000, "\U0001f600" * 2_000):
        cut = plumbing.status_message(text)
        assert wire(cut) <= plumbing.STATUS_MESSAGE_BYTES
        assert cut.endswith("(message cut)") and text.startswith(cut[:10])


def test_the_field_with_bad_utf8_is_named() -> None:
    from raftsched.v1 import raftsched_pb2 as pb

    desc = pb.AddTasksRequest.DESCRIPTOR
    good = pb.AddTasksRequest(tasks=[pb.AddTaskRequest(spec=pb.TaskSpec(name="ok", command="true"))])
    data = good.SerializeToString()
    assert plumbing.bad_utf8_field(desc, data) is None
    spoiled = data.replace(b"true", b"tr\xffe")
    assert plumbing.bad_utf8_field(desc, spoiled) == "tasks.spec.command"
    assert plumbing.bad_utf8_field(desc, spoiled[:-3]) is None  # cut short: no field to name
