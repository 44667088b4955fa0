"""The SDK's idempotency keys: every write call draws its own key, and every retry of that call
sends the same key again (the cluster refuses a key reused for a different request, so sharing a
key across calls would make the second call fail; a fresh key on a retry could apply it twice).

Every Admin RPC whose request has an ``idempotency_key`` is covered: a write RPC added to the
proto without an entry in :data:`CALLS` fails :func:`test_every_write_rpc_is_covered`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.message import Message

from raftsched import client as client_module
from raftsched.client import Client
from raftsched.model import CronTrigger, TaskSpec
from raftsched.v1 import raftsched_pb2 as pb

ADMIN = pb.DESCRIPTOR.services_by_name["Admin"]
SPEC = TaskSpec("backup", CronTrigger("30 2 * * *", "Europe/Berlin"), command="backup.sh")

# One SDK call per write RPC.
CALLS: dict[str, Callable[[Client], object]] = {
    "AddTask": lambda c: c.add_task(SPEC),
    "AddTasks": lambda c: c.add_tasks([SPEC, SPEC]),
    "UpdateTask": lambda c: c.update_task(SPEC),
    "DeleteTask": lambda c: c.delete_task("backup"),
    "SetEnabled": lambda c: c.enable_task("backup"),
    "TriggerNow": lambda c: c.trigger("backup"),
    "RetryRun": lambda c: c.retry("backup@1000"),
    "ApplyWorkflow": lambda c: c.apply_workflow(pb.WorkflowSpec(name="wf")),
    "SetWorkflowPaused": lambda c: c.pause_workflow("wf"),
    "DeleteWorkflow": lambda c: c.delete_workflow("wf"),
    "StartWorkflowRun": lambda c: c.start_workflow_run("wf"),
    "OperateWorkflowRun": lambda c: c.kill_workflow_run("wf@1000"),
    "Backfill": lambda c: c.backfill("wf", 0, 86_400_000),
    "AckAlert": lambda c: c.ack_alert("alert-1"),
    "CreateToken": lambda c: c.create_token("reader"),
    "RevokeToken": lambda c: c.revoke_token("abcdef"),
    "SetQuota": lambda c: c.set_quota(owner="team-a", rate="50/s"),
    "DeleteQuota": lambda c: c.delete_quota(owner="team-a"),
    "DrainExecutor": lambda c: c.drain_executor("ex1"),
    "SetCalendar": lambda c: c.set_calendar("holidays", weekdays="sat,sun"),
    "DeleteCalendar": lambda c: c.delete_calendar("holidays"),
    "EmitEvent": lambda c: c.emit_event("orders-ready", key="2026-12-04"),
    "SetPool": lambda c: c.set_pool("warehouse", 5),
    "DeletePool": lambda c: c.delete_pool("warehouse"),
    "BackfillTask": lambda c: c.backfill_task("backup", 0, 86_400_000),
    "CancelRun": lambda c: c.cancel_run("backup@1000", "stop"),
    "CancelRuns": lambda c: c.cancel_runs(task="backup", reason="stop"),
}


def _write_rpcs() -> list[str]:
    return [
        m.name
        for m in ADMIN.methods
        if "idempotency_key" in m.input_type.fields_by_name and not m.server_streaming
    ]


class Flaky:
    """Every Admin method: the first attempt of each key fails as ``unavailable`` (a write whose
    outcome is unknown), the next one succeeds. Records ``(method, key)`` of every attempt."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, str]] = []

    def handler(self, method: Any) -> grpc.RpcMethodHandler:
        request_type = message_factory.GetMessageClass(method.input_type)
        reply_type = message_factory.GetMessageClass(method.output_type)

        def behave(request: Message, context: grpc.ServicerContext) -> Message:
            key = str(getattr(request, "idempotency_key", ""))
            seen = (method.name, key) in self.attempts
            self.attempts.append((method.name, key))
            if not seen:
                context.set_trailing_metadata((("raftsched-code", "unavailable"),))
                context.abort(grpc.StatusCode.UNAVAILABLE, "outcome unknown")
            if isinstance(request, pb.AddTasksRequest):
                return pb.AddTasksReply(
                    results=[pb.ItemResult(name=t.spec.name, ok=True) for t in request.tasks]
                )
            return reply_type()

        return grpc.unary_unary_rpc_method_handler(
            behave,
            request_deserializer=request_type.FromString,
            response_serializer=reply_type.SerializeToString,
        )


@pytest.fixture
def flaky(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Flaky, str]]:
    monkeypatch.setattr(client_module, "_sleep", lambda _s: None)
    state = Flaky()
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handlers = {m.name: state.handler(m) for m in ADMIN.methods if not m.server_streaming}
    srv.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(ADMIN.full_name, handlers),))
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    try:
        yield state, f"127.0.0.1:{port}"
    finally:
        srv.stop(grace=None)


def test_every_write_rpc_is_covered() -> None:
    assert sorted(_write_rpcs()) == sorted(CALLS)


def test_a_retry_keeps_the_key_and_no_two_calls_share_one(flaky: tuple[Flaky, str]) -> None:
    state, address = flaky
    with Client(address, timeout=5) as client:
        for method, call in CALLS.items():
            for _ in range(2):  # the same call twice: two keys
                before = len(state.attempts)
                call(client)
                attempts = state.attempts[before:]
                assert [m for m, _ in attempts] == [method, method], attempts
                (key,) = {k for _, k in attempts}  # the retry sent the first attempt's key
                assert 0 < len(key) <= 128
    keys = [k for _, k in state.attempts]
    assert len(set(keys)) == len(keys) // 2  # each key is used by exactly one call (two attempts)
