"""raftsched.observability: metric primitives, the node and executor metric sets, the gRPC
interceptor and the HTTP listener (on loopback, OS-assigned ports)."""

from __future__ import annotations

import asyncio
import math
import random
import re
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from raftsched.fsm.tally import ApplyTally
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.observability.executor_metrics import ExecutorMetrics, ExecutorSample
from raftsched.observability.grpc_metrics import MetricsInterceptor
from raftsched.observability.listener import HttpListener, HttpRequest, HttpResponse, ListenError, Probe
from raftsched.observability.metrics import SCHEDULING_BUCKETS, MetricSet
from raftsched.observability.node_http import dispatch_sample
from raftsched.observability.node_metrics import NodeMetrics, NodeSample
from raftsched.timing.clock import ManualClock
from tests.promtool import check_metrics
from tests.support.fsm import T0, S, tick
from tests.unit.test_dispatcher import setup as dispatcher_setup
from tests.unit.test_dispatcher import step

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: bytes) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(text: bytes, name: str, **labels: str) -> float:
    found = [v for (n, ls), v in samples(text).items() if n == name and dict(ls).items() >= labels.items()]
    assert len(found) == 1, (name, labels, found)
    return found[0]


# --------------------------------------------------------------------------------------------
# primitives
# --------------------------------------------------------------------------------------------


def test_buckets_run_from_5ms_to_2min_and_include_the_alert_threshold() -> None:
    assert SCHEDULING_BUCKETS[0] == 0.005 and SCHEDULING_BUCKETS[-1] == 120.0
    assert 2.0 in SCHEDULING_BUCKETS
    assert list(SCHEDULING_BUCKETS) == sorted(set(SCHEDULING_BUCKETS))


def test_histogram_counts_a_value_equal_to_a_bound_in_that_bucket_and_keeps_the_sum() -> None:
    m = MetricSet(process=False)
    h = m.histogram("raftsched_test_seconds", "test", buckets=(0.1, 1.0))
    h.observe_many([0.1, 0.5, 1.0, 7.0])
    h.observe(0.01)
    text, _ = m.exposition()
    assert value(text, "raftsched_test_seconds_bucket", le="0.1") == 2
    assert value(text, "raftsched_test_seconds_bucket", le="1.0") == 4
    assert value(text, "raftsched_test_seconds_bucket", le="+Inf") == 5
    assert value(text, "raftsched_test_seconds_count") == 5
    assert math.isclose(value(text, "raftsched_test_seconds_sum"), 8.61)
    assert h.count() == 5


def test_counter_adds_batches_and_labels_are_checked() -> None:
    m = MetricSet({"node": "n1"}, process=False)
    c = m.counter("raftsched_things_total", "things", ("kind",))
    c.inc("a")
    c.add({("a",): 2, ("b",): 5})
    assert (c.value("a"), c.value("b"), c.value("zzz")) == (3, 5, 0)
    with pytest.raises(ValueError, match="expected labels"):
        c.inc()
    text, content_type = m.exposition()
    assert content_type.startswith("text/plain; version=0.0.4")
    assert value(text, "raftsched_things_total", kind="b", node="n1") == 5


def test_names_must_carry_the_prefix_and_be_unique() -> None:
    m = MetricSet(process=False)
    with pytest.raises(ValueError, match="raftsched_"):
        m.counter("fires_total", "no prefix")
    m.gauge("raftsched_x", "x", lambda: 1)
    with pytest.raises(ValueError, match="twice"):
        m.gauge("raftsched_x", "x", lambda: 2)


def test_two_metric_sets_in_one_process_do_not_collide() -> None:
    # Embedded nodes and executors share a process: each has its own registry.
    a, b = MetricSet({"node": "a"}), MetricSet({"node": "b"})
    a.counter("raftsched_same_total", "same").inc(amount=2)
    b.counter("raftsched_same_total", "same").inc(amount=7)
    assert value(a.exposition()[0], "raftsched_same_total") == 2
    assert value(b.exposition()[0], "raftsched_same_total") == 7


def test_gauges_are_read_at_scrape_time_once_per_scrape() -> None:
    calls = []

    def sample() -> NodeSample:
        calls.append(1)
        return NodeSample(is_leader=True, commit_index=10 + len(calls), applied_index=8)

    metrics = NodeMetrics("n1", sample, ApplyTally())
    assert calls == []  # nothing is computed until a scrape
    text, _ = metrics.exposition()
    assert len(calls) == 1
    assert value(text, "raftsched_raft_commit_index") == 11
    assert value(text, "raftsched_apply_lag_entries") == 3
    assert value(metrics.exposition()[0], "raftsched_raft_commit_index") == 12


# --------------------------------------------------------------------------------------------
# the node and executor metric sets
# --------------------------------------------------------------------------------------------


def busy_node_metrics(per_task: bool = False) -> NodeMetrics:
    tally = ApplyTally(per_task=per_task)
    tally.fire("fired", "alice", "etl", "nightly", 3)
    tally.fire("coalesced", "alice", "etl", "nightly")
    tally.run_finished("failed", "bob", "default", "sync")
    tally.attempt("lost", "bob", "default", "sync")
    metrics = NodeMetrics(
        "n1",
        lambda: NodeSample(
            is_leader=True,
            leader_known=True,
            term=4,
            commit_index=100,
            applied_index=100,
            tasks=2,
            active_runs=1,
            hot_slots=4096,
            dispatch_backlog=3,
            oldest_waiting_seconds=1.5,
            zombie_attempts=1,
            executors_alive=2,
            executors_dead=1,
            slots_total=8,
            slots_busy=5,
            workflow_runs={"running": 2, "success": 1},
        ),
        tally,
    )
    metrics.observe_commit_lateness([(0, 12, 1), (0, 3000, 1)])
    metrics.observe_start_lateness([40])
    metrics.snapshot_seconds.observe(0.2)
    metrics.grpc_requests.inc("raftsched.v1.Admin", "AddTask", "OK")
    metrics.grpc_seconds.observe(0.001, "raftsched.v1.Admin", "AddTask")
    return metrics


def test_node_metrics_carry_owner_and_namespace_but_no_task_by_default() -> None:
    text, _ = busy_node_metrics().exposition()
    assert value(text, "raftsched_fires_total", outcome="fired", owner="alice", namespace="etl") == 3
    assert value(text, "raftsched_runs_finished_total", state="failed", owner="bob") == 1
    assert value(text, "raftsched_attempts_total", result="lost") == 1
    assert all("task" not in dict(labels) for _, labels in samples(text))
    assert value(text, "raftsched_executor_slots", state="free") == 3
    assert value(text, "raftsched_workflow_runs", state="running") == 2
    assert value(text, "raftsched_fire_commit_lateness_seconds_bucket", le="2.0") == 1
    assert value(text, "raftsched_fire_commit_lateness_seconds_count") == 2
    assert value(text, "raftsched_oldest_waiting_seconds") == 1.5
    assert value(text, "raftsched_hot_slots") == 4096


def test_a_per_task_label_is_opt_in() -> None:
    text, _ = busy_node_metrics(per_task=True).exposition()
    assert value(text, "raftsched_fires_total", outcome="fired", task="nightly") == 3


def test_node_and_executor_expositions_pass_promtool() -> None:
    check_metrics(busy_node_metrics().exposition()[0])
    ex = ExecutorMetrics("ex1", lambda: ExecutorSample(True, True, slots=4, running=1, pending_reports=2))
    ex.attempts.inc("succeeded")
    ex.duration.observe(1.0)
    ex.log_write("begin", 3)
    check_metrics(ex.exposition()[0])
    assert value(ex.exposition()[0], "raftsched_executor_local_slots", state="free") == 3
    sized = ExecutorMetrics("ex1", lambda: ExecutorSample(log_entries=7, log_bytes=40960))
    sized.log_write("prune", 1000)
    text = sized.exposition()[0]
    assert value(text, "raftsched_executor_log_entries") == 7
    assert value(text, "raftsched_executor_log_bytes") == 40960
    assert value(text, "raftsched_executor_log_records_total", op="prune") == 1000


# --------------------------------------------------------------------------------------------
# gRPC interceptor
# --------------------------------------------------------------------------------------------


def test_interceptor_counts_grpc_calls_by_method_and_code() -> None:
    metrics = busy_node_metrics()
    clock = ManualClock()

    async def scenario() -> None:
        interceptor = MetricsInterceptor(metrics.grpc_requests, metrics.grpc_seconds, clock.monotonic)
        server = grpc.aio.server(interceptors=[interceptor])
        servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
        await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                await stub.Check(health_pb2.HealthCheckRequest())
                await stub.Check(health_pb2.HealthCheckRequest())
                with pytest.raises(grpc.aio.AioRpcError):
                    await stub.Check(health_pb2.HealthCheckRequest(service="nope"))
        finally:
            await server.stop(None)

    asyncio.run(scenario())
    service = "grpc.health.v1.Health"
    assert metrics.grpc_requests.value(service, "Check", "OK") == 2
    assert metrics.grpc_requests.value(service, "Check", "NOT_FOUND") == 1
    assert metrics.grpc_seconds.count(service, "Check") == 3


def test_interceptor_counts_a_bidirectional_stream_once_when_it_ends() -> None:
    """The executor's Session stream carries what the Heartbeat and Report calls did; it was not
    counted at all before (only unary calls and server streams were wrapped)."""
    metrics = busy_node_metrics()
    clock = ManualClock()

    async def echo(requests: AsyncIterator[bytes], context: object) -> AsyncIterator[bytes]:
        async for message in requests:
            yield message

    async def scenario() -> list[bytes]:
        interceptor = MetricsInterceptor(metrics.grpc_requests, metrics.grpc_seconds, clock.monotonic)
        server = grpc.aio.server(interceptors=[interceptor])
        handler = grpc.stream_stream_rpc_method_handler(echo)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.S", {"Session": handler}),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                call = channel.stream_stream("/t.S/Session")()
                await call.write(b"a")
                await call.write(b"b")
                await call.done_writing()
                return [m async for m in call]
        finally:
            await server.stop(None)

    assert asyncio.run(scenario()) == [b"a", b"b"]
    assert metrics.grpc_requests.value("t.S", "Session", "OK") == 1
    assert metrics.grpc_seconds.count("t.S", "Session") == 0  # a stream's lifetime is not a latency


# --------------------------------------------------------------------------------------------
# HTTP listener
# --------------------------------------------------------------------------------------------


def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read()


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def test_listener_serves_metrics_probes_and_added_routes(loop: asyncio.AbstractEventLoop) -> None:
    metrics = busy_node_metrics()
    ready = {"ok": False}
    listener = HttpListener(
        "127.0.0.1:0",
        metrics=metrics.exposition,
        readyz=lambda: Probe(ready["ok"], "applied 99 of 100" if not ready["ok"] else "caught up"),
    )

    async def hello(request: HttpRequest) -> HttpResponse:
        return HttpResponse(body=f"hello {request.query.get('who', '?')}".encode(), content_type="text/html")

    listener.add_route("GET", "/hello", hello)

    async def scenario() -> None:
        await listener.start()
        assert listener.bound is not None and not listener.bound.endswith(":0")
        base = f"http://{listener.bound}"
        try:
            assert (await asyncio.to_thread(get, base + "/healthz"))[0] == 200
            status, _, body = await asyncio.to_thread(get, base + "/readyz")
            assert (status, body) == (503, b"not ready: applied 99 of 100\n")
            ready["ok"] = True
            assert (await asyncio.to_thread(get, base + "/readyz"))[0] == 200
            status, content_type, body = await asyncio.to_thread(get, base + "/metrics")
            assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
            assert value(body, "raftsched_is_leader", node="n1") == 1
            assert await asyncio.to_thread(get, base + "/hello?who=ops") == (200, "text/html", b"hello ops")
            assert (await asyncio.to_thread(get, base + "/nothing"))[0] == 404
            with pytest.raises(RuntimeError):
                listener.add_route("GET", "/late", hello)
        finally:
            await listener.stop()
            await listener.stop()  # idempotent

    loop.run_until_complete(scenario())


def test_a_port_in_use_is_a_one_line_error(loop: asyncio.AbstractEventLoop) -> None:
    first = HttpListener("127.0.0.1:0")

    async def scenario() -> None:
        await first.start()
        try:
            assert first.bound is not None
            second = HttpListener(first.bound)
            with pytest.raises(ListenError) as info:
                second.bind()  # synchronous: a node checks before it joins the cluster
            assert str(info.value) == f"http: cannot listen on {first.bound}: address already in use"
            with pytest.raises(ListenError, match="address already in use"):
                await second.start()
        finally:
            await first.stop()
        # Released: the same port can be bound again once the first listener stopped.
        again = HttpListener(first.bound)
        await again.start()
        await again.stop()

    loop.run_until_complete(scenario())


def test_a_probe_that_raises_answers_not_ready(loop: asyncio.AbstractEventLoop) -> None:
    def broken() -> Probe:
        raise OSError("disk gone")

    listener = HttpListener("127.0.0.1:0", readyz=broken)

    async def scenario() -> None:
        await listener.start()
        try:
            status, _, body = await asyncio.to_thread(get, f"http://{listener.bound}/readyz")
            assert status == 503 and b"disk gone" in body
            assert (await asyncio.to_thread(get, f"http://{listener.bound}/metrics"))[0] == 404
        finally:
            await listener.stop()

    loop.run_until_complete(scenario())


# --------------------------------------------------------------------------------------------
# the monitoring guide documents every metric (the generated reference lists them anyway)
# --------------------------------------------------------------------------------------------


def exposed_families(text: bytes) -> set[str]:
    names = set()
    for family in text_string_to_metric_families(text.decode()):
        suffix = "_total" if family.type == "counter" else ""
        names.add(family.name + suffix)
    return {n for n in names if not n.startswith("raftsched_process_")}


def test_the_monitoring_guide_documents_every_metric_and_no_other() -> None:
    guide = Path(__file__).resolve().parents[2] / "docs" / "guide" / "monitor.md"
    section = guide.read_text(encoding="utf-8")
    documented = {
        m for m in re.findall(r"^\| `(raftsched_[a-z_]+)`", section, flags=re.M) if m != "raftsched_process_"
    }
    node = exposed_families(busy_node_metrics().exposition()[0])
    executor = exposed_families(ExecutorMetrics("ex1", ExecutorSample).exposition()[0])
    assert documented == node | executor


# --------------------------------------------------------------------------------------------
# what a scrape reads of the leader's dispatcher (manual time: no clock, no sleeping)
# --------------------------------------------------------------------------------------------


def test_dispatch_sample_counts_backlog_oldest_waiting_and_zombies_across_a_leader_change() -> None:
    state, d = dispatcher_setup(shards=4, slots=1, executors=2)
    step(state, d, tick("t", 1, T0 + S), T0 + S)
    for data in d.poll(T0 + S):
        step(state, d, data, T0 + S)
    hour = 3_600_000
    # Two shards assigned (one slot each), two wait; nobody is a zombie yet.
    assert dispatch_sample(d, T0 + 3 * S, hour) == (2, 2 * S, 0, 2)
    # An hour and a bit later the two running attempts are zombies (heartbeats keep them alive).
    later = T0 + S + hour + 1
    assert dispatch_sample(d, later, hour)[2] == 2
    # A new leader rebuilds its leases from the replicated state: the age survives.
    fresh_dispatcher = Dispatcher(state, d.settings, random.Random(1))
    fresh_dispatcher.become_leader(2, later)
    assert dispatch_sample(fresh_dispatcher, later, hour)[2] == 2
    fresh_dispatcher.step_down()
    assert dispatch_sample(fresh_dispatcher, later, hour) == (0, 0, 0, 0)  # a follower reports nothing
