"""Bad input at the RPC level, against a real cluster: each case used to escape as UNKNOWN with a
traceback in the node log (or to break the client on metadata limits); each must be a clear
INVALID_ARGUMENT / NOT_FOUND, with a bounded message and nothing logged as an error (the
``make_cluster`` fixture fails a test whose nodes logged an ERROR or a traceback)."""

from __future__ import annotations

import grpc

from raftsched import codec
from raftsched.client import Client
from raftsched.model import IntervalTrigger, OnceTrigger, TaskSpec
from raftsched.rpc.plumbing import STATUS_MESSAGE_BYTES
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.helpers import now_ms, wait_time_passed


def _raw(cluster: LocalCluster, method: str, data: bytes) -> grpc.RpcError:
    """Send ``data`` as the request of Admin ``method`` to the leader, unparsed; the error it got
    (asked again, for up to 30 s, while the leader is still taking over or has just changed)."""

    def answer() -> tuple[grpc.RpcError | None] | None:
        leader = cluster.wait_for_leader()
        with grpc.insecure_channel(cluster.grpc_of(leader)) as channel:
            call = channel.unary_unary(
                f"/raftsched.v1.Admin/{method}",
                request_serializer=lambda b: b,
                response_deserializer=lambda b: b,
            )
            try:
                call(data, timeout=10)
            except grpc.RpcError as err:
                transient = err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.FAILED_PRECONDITION)
                return None if transient else (err,)
        return (None,)

    [err] = wait_until(answer, 30, 0.1, f"the leader's answer to {method}")
    assert err is not None, f"{method} accepted {data!r}"
    return err


def test_invalid_utf8_in_a_string_field_is_invalid_argument(cluster: LocalCluster) -> None:
    name = b"\x0a\x02\xff\xfe"  # TaskSpec.name = b"\xff\xfe"
    err = _raw(cluster, "AddTask", b"\x0a" + bytes([len(name)]) + name)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err
    assert err.details().startswith("spec.name: cannot be decoded"), err.details()
    assert "AddTaskRequest" in err.details() and "UTF-8" in err.details()
    assert dict(err.trailing_metadata() or ())["raftsched-code"] == "invalid_argument"
    # A truncated message is refused the same way, for a read as for a write.
    err = _raw(cluster, "GetTask", b"\x0a\x05ab")
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err


def test_a_huge_non_ascii_name_is_quoted_not_echoed(cluster: LocalCluster, client: Client) -> None:
    # 1M two-byte characters: echoed whole (even cut at 6,000 characters), the percent-encoded
    # status message exceeded the client's metadata limit and the caller saw RESOURCE_EXHAUSTED.
    err = _raw(cluster, "GetTask", pb.GetTaskRequest(name="\u00e9" * 1_000_000).SerializeToString())
    assert err.code() == grpc.StatusCode.NOT_FOUND, err
    assert "1,000,000 characters" in err.details()
    assert len(err.details().encode()) < 1_000 < STATUS_MESSAGE_BYTES


def test_add_tasks_repeated_after_an_item_became_invalid(cluster: LocalCluster, client: Client) -> None:
    """A retry of AddTasks (same key, same request) once a one-shot item's time has passed: the
    leader now refuses that item, while the recorded outcome holds both. Results used to be
    matched by counting, and the call failed with "coroutine raised StopIteration"."""
    cluster.wait_for_leader()
    at = now_ms() + 8_000  # the leader stamps writes a little ahead of this clock
    once = codec.spec_to_pb(TaskSpec(name="bulk-once", trigger=OnceTrigger(at), command="true"))
    hourly = codec.spec_to_pb(
        TaskSpec(name="bulk-hourly", trigger=IntervalTrigger(3_600_000), command="true")
    )
    request = pb.AddTasksRequest(
        tasks=[pb.AddTaskRequest(spec=once), pb.AddTaskRequest(spec=hourly)], idempotency_key="k-once"
    )
    first = client._call("AddTasks", request, write=True).results
    assert first[0].ok, first
    assert [(r.name, r.ok) for r in first] == [("bulk-once", True), ("bulk-hourly", True)]
    wait_time_passed(at + 100)
    again = client._call("AddTasks", request, write=True).results
    # The recorded outcome answers for both: the one-shot task was created by the first call.
    assert list(again) == list(first)
