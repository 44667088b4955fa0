"""Idempotency keys are bound to the request: a repeat answers with the first outcome, a different
request under a used key is refused instead of being silently dropped (reproduced against a real
cluster: each of these used to return OK and write nothing)."""

from __future__ import annotations

import pytest

from raftsched import codec
from raftsched.client import Client
from raftsched.errors import InvalidSpec, NotFound, RaftschedError
from raftsched.model import IntervalTrigger, TaskSpec
from raftsched.testing.cluster import LocalCluster
from raftsched.v1 import raftsched_pb2 as pb

REUSED = "idempotency key reused for a different request"


@pytest.fixture(autouse=True)
def _leader(cluster: LocalCluster) -> None:
    cluster.wait_for_leader()  # the SDK's own retries give up sooner than a cold start may take


def _spec(name: str) -> pb.TaskSpec:
    return codec.spec_to_pb(TaskSpec(name=name, trigger=IntervalTrigger(3_600_000), command="true"))


def _exists(client: Client, name: str) -> bool:
    try:
        client.get_task(name)
    except NotFound:
        return False
    return True


def _refused(client: Client, method: str, request: object) -> RaftschedError:
    with pytest.raises(RaftschedError) as info:
        client._call(method, request, write=True)  # type: ignore[arg-type]
    return info.value


def test_a_key_reused_for_a_different_request_is_refused(client: Client) -> None:
    first = pb.AddTaskRequest(spec=_spec("idem-a"), idempotency_key="k-add")
    created = client._call("AddTask", first, write=True).task
    # The same request again (a retry): the first outcome, nothing created twice.
    assert client._call("AddTask", first, write=True).task == created
    # AddTask under the key of another task: refused, and the other task is not created.
    err = _refused(client, "AddTask", pb.AddTaskRequest(spec=_spec("idem-b"), idempotency_key="k-add"))
    assert err.code == "invalid_argument" and REUSED in str(err)
    assert not _exists(client, "idem-b")
    # DeleteTask with the key AddTask used: refused, the task is still there.
    err = _refused(client, "DeleteTask", pb.DeleteTaskRequest(name="idem-a", idempotency_key="k-add"))
    assert err.code == "invalid_argument" and REUSED in str(err)
    assert _exists(client, "idem-a")


def test_add_tasks_with_more_items_under_a_used_key_is_refused(client: Client) -> None:
    one = pb.AddTasksRequest(tasks=[pb.AddTaskRequest(spec=_spec("bulk-0"))], idempotency_key="k-bulk")
    assert [r.ok for r in client._call("AddTasks", one, write=True).results] == [True]
    assert [r.ok for r in client._call("AddTasks", one, write=True).results] == [True]
    three = pb.AddTasksRequest(
        tasks=[pb.AddTaskRequest(spec=_spec(f"bulk-{i}")) for i in range(3)], idempotency_key="k-bulk"
    )
    err = _refused(client, "AddTasks", three)
    assert err.code == "invalid_argument" and REUSED in str(err)
    assert not _exists(client, "bulk-1") and not _exists(client, "bulk-2")


def test_sdk_calls_never_share_a_key(client: Client) -> None:
    client.add_task(TaskSpec(name="sdk-a", trigger=IntervalTrigger(3_600_000), command="true"))
    client.add_task(TaskSpec(name="sdk-b", trigger=IntervalTrigger(3_600_000), command="true"))
    client.delete_task("sdk-a")
    assert not _exists(client, "sdk-a") and _exists(client, "sdk-b")
    assert InvalidSpec.code == "invalid_argument"
