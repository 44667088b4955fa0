"""The executor's per-attempt path made cheaper (issue 31, P2-lite) without changing what it means:
the execution log's binary entries (and the JSON ones of earlier releases, still read), pending
reports kept incrementally, params parsed once per task version, the agent's context
constructor, handler kinds resolved at registration, and the runners' cancellation waiter."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from raftsched.errors import InvalidSpec, StoreDamaged
from raftsched.executor import handlers
from raftsched.executor.dedupe import INTERRUPTED_ERROR, DedupeLog
from raftsched.executor.execlog_records import (
    FORMAT_VERSION,
    BeginStatus,
    ExecutionState,
    NewerFormat,
    decode,
    encode_done,
)
from raftsched.executor.handlers import CallableRunner
from raftsched.executor.runners import (
    AttemptContext,
    AttemptResult,
    Cancellation,
    FrozenParams,
    ParamsCache,
    attempt_context,
)
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.storage.memory import MemoryExecutionLog

# -- the execution log's entries ---------------------------------------------------------------

# Exactly what the previous release (format 1) wrote, byte for byte (its dedupe._encode).
OLD_RUNNING = b'{"v":1,"state":"running"}'
OLD_DONE = (
    b'{"v":1,"state":"done","result":{"execution_id":"b/0/1","success":false,"exit_code":-9,'
    b'"error":"killed: \xc3\xa9","stdout_tail":"out\xe2\x80\xa6","stderr_tail":"err","duration_ms":12,'
    b'"timed_out":true}}'
)
OLD_DONE_RESULT = AttemptResult("b/0/1", False, -9, "killed: \u00e9", "out\u2026", "err", 12, True)


def ok(execution_id: str, out: str = "") -> AttemptResult:
    return AttemptResult(execution_id, True, 0, stdout_tail=out, duration_ms=7)


texts = st.text(max_size=60)
results = st.builds(
    AttemptResult,
    execution_id=st.just("t@1/0/1"),
    success=st.booleans(),
    exit_code=st.none() | st.integers(-(2**63), 2**63 - 1),
    error=texts,
    stdout_tail=texts,
    stderr_tail=texts,
    duration_ms=st.integers(0, 2**63 - 1),
    timed_out=st.booleans(),
)


@given(results, st.booleans())
def test_a_result_round_trips_through_the_binary_encoding(result: AttemptResult, settled: bool) -> None:
    raw = encode_done(result)
    assert raw[0] == FORMAT_VERSION == 2
    record = decode(result.execution_id, raw, settled)
    assert (record.state, record.result, record.acknowledged) == (ExecutionState.DONE, result, settled)


def test_new_entries_are_binary_and_smaller_than_json(tmp_path: Path) -> None:
    with DedupeLog.open(tmp_path) as log:
        log.begin("a/0/1")
        log.begin("b/0/1")
        log.finish("a/0/1", ok("a/0/1", "hi"))
    with LmdbExecutionLog(tmp_path) as raw:
        done, running = raw.get("a/0/1"), raw.get("b/0/1")
    assert running == (b"\x02R", False)
    assert done is not None and done[0][:2] == b"\x02D" and done[0].endswith(b"hi")
    assert len(done[0]) < len(json.dumps(ok("a/0/1", "hi").to_json_dict()))


@pytest.mark.parametrize("settle_old", [False, True])
def test_a_log_written_by_the_previous_release_opens_and_recovers(tmp_path: Path, settle_old: bool) -> None:
    # The LMDB layout is unchanged; only the values are new. Write the old values with the store.
    with LmdbExecutionLog(tmp_path) as raw:
        raw.insert_many([("a/0/1", OLD_RUNNING), ("b/0/1", OLD_RUNNING), ("c/0/1", OLD_RUNNING)])
        raw.update([("b/0/1", OLD_DONE, False)])
        if settle_old:
            raw.update([("c/0/1", OLD_DONE.replace(b"b/0/1", b"c/0/1"), False)])
            raw.settle(["c/0/1"], at_ms=5)
    with DedupeLog.open(tmp_path) as log:
        # a was running when the old executor stopped: interrupted, never run again.
        assert log.running() == ["a/0/1"] + ([] if settle_old else ["c/0/1"])
        assert log.begin("a/0/1").status is BeginStatus.RUNNING
        recovered = log.recover()
        assert [r.execution_id for r in recovered] == ["a/0/1"] + ([] if settle_old else ["c/0/1"])
        assert all(r.error == INTERRUPTED_ERROR and not r.success for r in recovered)
        # The old done result is reported again as it was written.
        assert log.begin("b/0/1") == (BeginStatus.DONE, OLD_DONE_RESULT)
        assert log.pending_reports()[:2] == [recovered[0], OLD_DONE_RESULT]
        if settle_old:  # an old acknowledged entry still dedupes
            found = log.get("c/0/1")
            assert found is not None and found.acknowledged and found.result is not None
            assert log.begin("c/0/1").status is BeginStatus.DONE
        # New attempts next to the old entries, then acknowledgement and pruning of both.
        assert log.begin("d/0/1").status is BeginStatus.NEW
        log.finish("d/0/1", ok("d/0/1"))
        assert log.acknowledge(log.pending_ids(), at_ms=10) == (3 if settle_old else 4)
        assert log.prune_older_than(10) == 4
        assert len(log) == 0
    with DedupeLog.open(tmp_path) as log:
        assert log.running() == [] and log.pending_reports() == []


def test_a_binary_entry_of_a_newer_format_is_refused_as_newer(tmp_path: Path) -> None:
    with LmdbExecutionLog(tmp_path) as raw:
        raw.insert("a/0/1", b"\x03R")
    with pytest.raises(NewerFormat, match="format version 3, newer"):
        DedupeLog.open(tmp_path)


@pytest.mark.parametrize(
    "value",
    [
        b"\x02",
        b"\x02X",
        b"\x02D\x01",  # a header cut short
        encode_done(ok("a/0/1", "hi"))[:-1],  # a text cut short
        encode_done(ok("a/0/1", "hi")) + b"x",
        b"",
        b"\x00R",
    ],
)
def test_a_damaged_binary_entry_is_store_damaged(tmp_path: Path, value: bytes) -> None:
    with LmdbExecutionLog(tmp_path) as raw:
        raw.insert("a/0/1", value)
    with pytest.raises(StoreDamaged, match="a/0/1"):
        DedupeLog.open(tmp_path)


def test_a_result_the_encoding_cannot_hold_fails_its_finish_and_records_nothing(tmp_path: Path) -> None:
    with DedupeLog.open(tmp_path) as log:
        log.begin("a/0/1")
        with pytest.raises(ValueError, match="a/0/1"):
            log.finish("a/0/1", AttemptResult("a/0/1", False, 2**70))
        assert log.running() == ["a/0/1"] and log.pending_ids() == []
        log.finish("a/0/1", ok("a/0/1"))  # still running: a good result is recorded
        assert log.pending_reports() == [ok("a/0/1")]


# -- pending reports, kept incrementally ----------------------------------------------------------


def _old_walk(store: MemoryExecutionLog) -> list[AttemptResult]:
    """What pending_reports() answered before: every unsettled DONE entry, in insertion order."""
    out = []
    for key, raw in store.unsettled():
        record = decode(key, raw, False)
        if record.result is not None:
            out.append(record.result)
    return out


ops = st.lists(
    st.tuples(st.sampled_from(["begin", "finish", "ack", "restart"]), st.integers(0, 12)), max_size=60
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.sampled_from([0, 3, 10_000]), st.integers(1, 4))
@example([("begin", 1), ("begin", 2), ("finish", 2), ("finish", 1)], 10_000, 1)  # out of begin order
@example([("begin", 1), ("begin", 2), ("restart", 0), ("begin", 3), ("finish", 3), ("ack", 1)], 0, 2)
def test_pending_reports_equal_the_old_walk(ops_: list[tuple[str, int]], cache: int, limit: int) -> None:
    store = MemoryExecutionLog()
    log = DedupeLog(store, cache_size=cache)
    for op, n in ops_:
        eid = f"t@{n}/0/1"
        if op == "begin":
            log.begin(eid)
        elif op == "finish" and eid in log.running():
            log.finish(eid, ok(eid, str(n)))
        elif op == "ack":
            log.acknowledge([eid, f"t@{n + 1}/0/1"], at_ms=n)
        elif op == "restart":
            log = DedupeLog(store, cache_size=cache)
            log.recover()
        expected = _old_walk(store)
        assert log.pending_reports() == expected
        assert log.pending_reports(limit) == expected[:limit]
        assert log.pending_ids() == [r.execution_id for r in expected]
        assert log.pending_count() == len(expected)


# -- params, parsed once per task version -------------------------------------------------------


def test_params_are_parsed_once_per_task_version_and_again_for_a_new_one() -> None:
    cache = ParamsCache()
    first = cache.get("t", 1, '{"region":"eu","n":[1,2]}')
    assert first == {"region": "eu", "n": [1, 2]} and isinstance(first, dict | FrozenParams)
    assert cache.get("t", 1, '{"region":"eu","n":[1,2]}') is first  # the same object: no parse
    newer = cache.get("t", 2, '{"region":"us"}')  # a new task version: parsed again
    assert newer == {"region": "us"}
    assert cache.get("t", 2, '{"region":"ap"}') == {"region": "ap"}  # a new text (a secret rotated)
    assert cache.get("u", 1, "") == {}
    with pytest.raises(InvalidSpec, match="params"):
        cache.get("v", 1, "{nope")
    with pytest.raises(InvalidSpec, match="params"):
        cache.get("v", 1, "[1]")


def test_the_params_cache_is_bounded() -> None:
    cache = ParamsCache(size=2)
    a = cache.get("a", 1, '{"x":1}')
    cache.get("b", 1, '{"x":2}')
    cache.get("c", 1, '{"x":3}')
    assert cache.get("a", 1, '{"x":1}') is not a  # a went first: parsed again


def test_shared_params_are_read_only_but_behave_as_json() -> None:
    params = ParamsCache().get("t", 1, '{"a":{"b":[1,{"c":2}]},"s":"x"}')
    inner = params["a"]["b"]
    changes: list[Callable[[], object]] = [
        lambda: params.__setitem__("a", 1),
        lambda: params.pop("s"),
        lambda: params.update(z=1),
        lambda: params["a"].setdefault("q", 1),
        lambda: inner.append(3),
        lambda: inner[1].clear(),
        lambda: inner.sort(),
    ]
    for change in changes:
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert json.dumps(params, separators=(",", ":")) == '{"a":{"b":[1,{"c":2}]},"s":"x"}'
    mutable = copy.deepcopy(params)
    mutable["a"]["b"].append(3)
    assert type(mutable) is dict and type(mutable["a"]["b"]) is list
    assert params == {"a": {"b": [1, {"c": 2}]}, "s": "x"}
    shallow = copy.copy(params)
    shallow["new"] = 1
    assert "new" not in params


# -- the agent's context constructor ------------------------------------------------------------

FIELDS: dict[str, Any] = {
    "execution_id": "nightly@1796032800000/2/1",
    "run_id": "nightly@1796032800000",
    "task": "nightly",
    "nominal_ms": 1_796_032_800_123,
    "shard": 2,
    "shards": 4,
    "attempt": 1,
    "params": {"region": "eu"},
    "timeout_ms": 500,
    "extra_env": {"A": "1"},
    "secret_values": ("s3cret",),
}


def test_the_agents_context_equals_the_public_constructors() -> None:
    stop = Cancellation()
    fast = attempt_context(**FIELDS, cancellation=stop)
    slow = AttemptContext(**FIELDS, cancellation=stop)
    assert fast == slow and repr(fast) == repr(slow) and fast.cancellation is stop
    assert dataclasses.asdict(fast) == dataclasses.asdict(slow)
    assert fast.nominal_iso == "2026-11-30T10:00:00.123Z" and fast.env() == slow.env()
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.task = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("shard", 4),
        ("shards", 0),
        ("attempt", 0),
        ("timeout_ms", -1),
        ("params", [1]),
        ("execution_id", ""),
        ("nominal_ms", True),
        ("task", ""),
    ],
)
def test_the_agents_context_refuses_what_the_public_one_refuses(field: str, value: object) -> None:
    fields = FIELDS | {field: value}
    with pytest.raises(InvalidSpec) as info:
        attempt_context(**fields, cancellation=Cancellation())
    assert info.value.field == field


# -- handlers and cancellation ---------------------------------------------------------------


def test_a_handlers_kind_is_resolved_at_registration_not_per_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CallableRunner()

    async def coro_handler(ctx: AttemptContext) -> str:
        return "async"

    def plain_handler(ctx: AttemptContext) -> str:
        return "plain"

    runner.register("a", coro_handler)
    runner.register("p", plain_handler)
    calls: list[object] = []

    def counting(fn: object) -> bool:
        calls.append(fn)
        return True

    monkeypatch.setattr(handlers, "_is_async", counting)
    ctx = AttemptContext(**FIELDS)

    async def both() -> list[AttemptResult]:
        return [await runner.run("a", ctx), await runner.run("p", ctx)]

    done = asyncio.run(both())
    assert [r.stdout_tail for r in done] == ["async", "plain"] and all(r.success for r in done)
    assert calls == []


def test_a_cancellations_stopped_future_resolves_on_set_and_at_once_if_set() -> None:
    async def scenario() -> None:
        stop = Cancellation()
        first, second = stop.stopped(), stop.stopped()
        second.cancel()  # a runner done with it
        assert not first.done() and not stop.is_set()
        stop.set("because")
        assert first.done() and second.cancelled() and stop.is_set() and stop.reason == "because"
        assert stop.stopped().done()
        await asyncio.wait_for(stop.wait(), 1)  # the public waiter still works

    asyncio.run(scenario())


# -- through the agent ----------------------------------------------------------------------------


def test_the_agent_hands_each_task_version_its_own_params_and_refuses_changes() -> None:
    from raftsched.executor.agent import Executor
    from raftsched.executor.memory import LoopbackEndpoint, MemoryTransport
    from raftsched.v1 import raftsched_pb2 as pb

    endpoint = LoopbackEndpoint(epoch=1)
    ex = Executor(
        "loopback:1", "ex1", slots=4, transport=MemoryTransport(endpoint), execution_log=MemoryExecutionLog()
    )
    seen: list[tuple[str, dict[str, Any]]] = []

    @ex.handler("h")
    async def handler(ctx: AttemptContext) -> None:
        seen.append((ctx.execution_id, copy.deepcopy(ctx.params)))
        ctx.params["changed"] = True  # read-only: the attempt fails, the next one is untouched

    def work(n: int, version: int, params: str) -> pb.WorkItem:
        return pb.WorkItem(
            execution_id=f"t@{n}/0/1",
            run_id=f"t@{n}",
            task="t",
            nominal_ms=n,
            shards=1,
            attempt=1,
            epoch=1,
            handler="h",
            task_version=version,
            params_json=params,
        )

    async def scenario() -> None:
        async with endpoint.serving(ex):
            endpoint.push("ex1", [work(1, 1, '{"a":1}'), work(2, 1, '{"a":1}')])
            await endpoint.until(lambda: len(endpoint.reports) == 2)
            endpoint.push("ex1", [work(3, 2, '{"a":2}')])  # the task was changed: a new version
            await endpoint.until(lambda: len(endpoint.reports) == 3)

    asyncio.run(scenario())
    assert seen == [("t@1/0/1", {"a": 1}), ("t@2/0/1", {"a": 1}), ("t@3/0/1", {"a": 2})]
    assert all(not r.success and "read-only" in r.error for r in endpoint.reports)


def test_a_finish_of_an_id_another_log_over_the_same_store_began_is_pending() -> None:
    # As before the incremental sets: the store says it runs, so it may be finished here.
    store = MemoryExecutionLog()
    first, second = DedupeLog(store, cache_size=0), DedupeLog(store, cache_size=0)
    assert second.begin("x/0/1").status is BeginStatus.NEW
    first.finish("x/0/1", ok("x/0/1"))
    assert first.pending_reports() == [ok("x/0/1")] == _old_walk(store)
    assert first.acknowledge(["x/0/1"], at_ms=1) == 1 and first.pending_ids() == []
