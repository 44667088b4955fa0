"""Integer extremes: refused by the servicer (INVALID_ARGUMENT naming the field and its range) and
again by apply as a rejection value, never an exception inside apply (issue 34, part 1)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, cast

import grpc
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from raftsched import bounds, codec
from raftsched.errors import InvalidSpec, InvalidWorkflow
from raftsched.fsm.policy import validate_quota
from raftsched.fsm.state import SchedulerState
from raftsched.rpc.admin import AdminServicer
from raftsched.security.auth import Role
from raftsched.security.tokens import create_command, new_token
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.validate import validate_workflow
from tests.fuzz_strategies import INT64_MAX, domain

FAST_N = 2**10


def _cmd(now: int, **body: Any) -> bytes:
    cmd = logpb.Command(epoch=1, now_ms=now, origin="n1")
    for name, value in body.items():
        getattr(cmd, name).CopyFrom(value)
    return codec.encode_command(cmd)


def test_create_token_with_the_largest_ttl_is_a_rejection_value_not_a_crash(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The repro of issue 34: ``ttl_ms`` = 2**63-1 overflowed ``now + ttl`` inside apply (INTERNAL
    and a CRITICAL "apply failed" on every node)."""
    st = SchedulerState(MemoryStore())
    assert st.apply(_cmd(1_700_000_000_000, barrier=logpb.Barrier(node_id="n1"))).result.ok
    body = create_command(
        new_token(), Role.ADMIN, [], ttl_ms=INT64_MAX, description="", created_by="t", n=FAST_N
    )
    before = domain(st)
    with caplog.at_level(logging.WARNING):
        res = st.apply(_cmd(1_700_000_000_000, create_token=body)).result
    assert not res.ok
    assert res.code == "invalid_argument", res
    assert "ttl_ms" in res.message and "out of range" in res.message, res.message
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert domain(st) == before
    assert st.access.tokens == {}


def test_a_ttl_whose_expiry_passes_the_time_range_is_refused_in_apply() -> None:
    """Within its own range, the ttl may still take ``now + ttl`` past the largest time."""
    st = SchedulerState(MemoryStore())
    now = bounds.MAX_TIME_MS - 1000
    body = create_command(new_token(), Role.ADMIN, [], ttl_ms=2000, description="", created_by="t", n=FAST_N)
    res = st.apply(_cmd(now, create_token=body)).result
    assert not res.ok and res.code == "invalid_argument" and "expir" in res.message, res
    ok = create_command(new_token(), Role.ADMIN, [], ttl_ms=1000, description="", created_by="t", n=FAST_N)
    res = st.apply(_cmd(now, create_token=ok)).result
    assert res.ok and res.token.expires_ms == bounds.MAX_TIME_MS


class _Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code}: {details}")
        self.code, self.details = code, details


class _Context:
    """The part of a grpc.aio context the ``rpc`` decorator uses when it refuses a call."""

    def __init__(self) -> None:
        self.trailing: Any = ()

    def set_trailing_metadata(self, md: Any) -> None:
        self.trailing = md

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise _Aborted(code, details)

    def invocation_metadata(self) -> Any:
        return ()


def test_the_servicer_refuses_the_largest_ttl_naming_the_field_and_range() -> None:
    servicer = AdminServicer(node=None)  # type: ignore[arg-type]  # refused before the node is used
    request = pb.CreateTokenRequest(token=new_token(), role="admin", ttl_ms=INT64_MAX)
    with pytest.raises(_Aborted) as info:
        asyncio.run(servicer.CreateToken(request, _Context()))
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "ttl_ms" in info.value.details and "out of range" in info.value.details, info.value.details


# -- the table covers every integer field, and nothing else -------------------------------------

SERVICES = ("Admin", "ExecutorService", "Logs")


def _d(desc: Any) -> Descriptor:
    """A generated message's descriptor, typed (the upb classes are a union for mypy)."""
    return cast(Descriptor, desc)


def _request_types() -> list[Descriptor]:
    return [_d(m.input_type) for s in SERVICES for m in pb.DESCRIPTOR.services_by_name[s].methods]


def _all_integer_fields() -> dict[str, FieldDescriptor]:
    seen: set[str] = set()
    out: dict[str, FieldDescriptor] = {}
    for desc in [*_request_types(), _d(logpb.Command.DESCRIPTOR)]:
        for fd in bounds.integer_fields(desc, seen):
            out[fd.full_name] = fd
    return out


def test_every_integer_of_every_request_and_command_has_a_range_and_no_row_is_stale() -> None:
    fields = _all_integer_fields()
    missing = sorted(set(fields) - set(bounds.FIELDS))
    assert not missing, f"integer fields without a documented range: {missing}"
    stale = sorted(set(bounds.FIELDS) - set(fields))
    assert not stale, f"rows for fields no request or command has: {stale}"


def test_every_range_fits_its_fields_type() -> None:
    types = {
        FieldDescriptor.CPPTYPE_INT32: (bounds.INT32_MIN, bounds.INT32_MAX),
        FieldDescriptor.CPPTYPE_UINT32: (0, bounds.UINT32_MAX),
        FieldDescriptor.CPPTYPE_INT64: (bounds.INT64_MIN, bounds.INT64_MAX),
        FieldDescriptor.CPPTYPE_UINT64: (0, bounds.UINT64_MAX),
    }
    for name, fd in _all_integer_fields().items():
        low, high = types[fd.cpp_type]
        rng = bounds.FIELDS[name]
        assert low <= rng.low <= rng.high <= high, name


def test_a_time_plus_any_duration_or_counter_plus_count_stays_inside_int64() -> None:
    """What apply derives: now + ttl, nominal + lateness, a counter + a fire count."""
    assert bounds.MAX_TIME_MS + bounds.MAX_TTL_MS < bounds.INT64_MAX
    assert bounds.MAX_TIME_MS + bounds.MAX_DURATION_MS < bounds.INT64_MAX
    assert -bounds.MAX_TIME_MS - bounds.MAX_DURATION_MS > bounds.INT64_MIN
    assert bounds.MAX_COUNTER + bounds.MAX_FIRE_COUNT < bounds.INT64_MAX
    assert bounds.MAX_ATTEMPT + 1 < bounds.UINT32_MAX


def _set_path(msg: Message, fd: FieldDescriptor, value: int) -> Message | None:
    """``msg`` (a request or command body type) with ``fd`` set to ``value`` wherever it first
    occurs (repeated messages get one element); None if ``fd`` is not reachable from it."""
    for f in msg.DESCRIPTOR.fields:
        if f is fd:
            if f.is_repeated:
                getattr(msg, f.name).append(value)
            else:
                setattr(msg, f.name, value)
            return msg
        sub = f.message_type
        if sub is None or sub.GetOptions().map_entry or sub.full_name in bounds.SELF_CHECKED:
            continue
        child = GetMessageClass(_d(sub))()
        if _set_path(child, fd, value) is not None:
            if f.is_repeated:
                getattr(msg, f.name).add().CopyFrom(child)
            else:
                getattr(msg, f.name).CopyFrom(child)
            return msg
    return None


def _walked_cases() -> list[tuple[Descriptor, FieldDescriptor]]:
    cases = []
    for desc in [*_request_types(), _d(logpb.Command.DESCRIPTOR)]:
        for fd in bounds.integer_fields(desc, set()):
            # Fields reached only through a self-checked message (a trigger inside a TaskSpec)
            # are its decoder's: see test_self_checked_messages_refuse_their_rows_limit_plus_one.
            if _set_path(GetMessageClass(desc)(), fd, bounds.FIELDS[fd.full_name].low) is not None:
                cases.append((desc, fd))
    return cases


@pytest.mark.parametrize(
    ("desc", "fd"), _walked_cases(), ids=lambda x: x.full_name.removeprefix("raftsched.v1.")
)
def test_the_walk_refuses_each_limit_plus_one_and_accepts_each_limit(
    desc: Descriptor, fd: FieldDescriptor
) -> None:
    rng = bounds.FIELDS[fd.full_name]
    for value in (rng.low, rng.high):
        msg = _set_path(GetMessageClass(desc)(), fd, value)
        assert msg is not None
        assert bounds.violation(msg) is None, (fd.full_name, value)
    for value in (rng.low - 1, rng.high + 1):
        try:
            msg = _set_path(GetMessageClass(desc)(), fd, value)
        except ValueError:
            continue  # past the type itself: protobuf refuses it before it is ever sent
        assert msg is not None
        problem = bounds.violation(msg)
        assert problem is not None, (fd.full_name, value)
        assert fd.name in problem.field and rng.text() in str(problem), str(problem)


def _spec_refusals() -> list[tuple[str, Callable[[int], object]]]:
    """Each self-checked message's integer fields, with the decoder that must refuse them."""

    def put(msg: Any, field: str, value: int) -> None:
        """``msg.field = value``; a repeated field gets one element (retry_delays_ms)."""
        if msg.DESCRIPTOR.fields_by_name[field].is_repeated:
            getattr(msg, field).append(value)
        else:
            setattr(msg, field, value)

    def backoff(msg: Any, field: str, value: int) -> None:
        msg.retry_backoff.base_ms = 1  # the one required field; the others are checked against it
        setattr(msg.retry_backoff, field, value)

    def task(field: str) -> Callable[[int], object]:
        def decode(value: int) -> object:
            spec = logpb.TaskSpec(name="t", command="true")
            put(spec, field, value)
            return codec.spec_from_pb(spec)

        return decode

    def task_backoff(field: str) -> Callable[[int], object]:
        def decode(value: int) -> object:
            spec = logpb.TaskSpec(name="t", command="true")
            backoff(spec, field, value)
            return codec.spec_from_pb(spec)

        return decode

    def wf_backoff(field: str) -> Callable[[int], object]:
        def decode(value: int) -> object:
            spec = pb.WorkflowSpec(name="w")
            backoff(spec.tasks.add(name="a", command="true"), field, value)
            validate_workflow(spec)
            return spec

        return decode

    def trigger(kind: str, field: str) -> Callable[[int], object]:
        def decode(value: int) -> object:
            spec = logpb.TaskSpec(name="t", command="true")
            setattr(getattr(spec.trigger, kind), field, value)
            if kind == "interval" and field == "start_ms":
                spec.trigger.interval.every_ms = 1000
            return codec.spec_from_pb(spec)

        return decode

    def wf_task(field: str) -> Callable[[int], object]:
        def decode(value: int) -> object:
            spec = pb.WorkflowSpec(name="w")
            task = spec.tasks.add(name="a", command="true")
            put(task, field, value)
            validate_workflow(spec)
            return spec

        return decode

    def wf(field: str) -> Callable[[int], object]:
        def decode(value: int) -> object:
            spec = pb.WorkflowSpec(name="w")
            spec.tasks.add(name="a", command="true")
            setattr(spec, field, value)
            validate_workflow(spec)
            return spec

        return decode

    def wf_dep(field: str) -> Callable[[int], object]:
        def decode(value: int) -> object:
            spec = pb.WorkflowSpec(name="w")
            task = spec.tasks.add(name="a", command="true")
            setattr(task.depends_on.add(workflow="up"), field, value)
            validate_workflow(spec)
            return spec

        return decode

    def quota(field: str) -> Callable[[int], object]:
        def decode(value: int) -> object:
            q = logpb.QuotaRecord(kind="owner", name="o", rate_milli=1000, max_running=1)
            setattr(q, field, value)
            validate_quota(q)
            return q

        return decode

    def calendar(field: str) -> Callable[[int], object]:
        def decode(value: int) -> object:
            spec = logpb.CalendarSpec(name="c", weekdays=1)
            if field == "dates":
                spec.dates.append(value)
            else:
                spec.weekdays = value
            return codec.calendar_from_pb(spec, [], [0])

        return decode

    cases: list[tuple[str, Callable[[int], object]]] = []
    for fd in bounds.integer_fields(_d(logpb.TaskSpec.DESCRIPTOR), set()):
        owner = _d(fd.containing_type).name
        if owner == "TaskSpec":
            cases.append((fd.full_name, task(fd.name)))
        elif owner == "IntervalTrigger":
            cases.append((fd.full_name, trigger("interval", fd.name)))
        elif owner == "OnceTrigger":
            cases.append((fd.full_name, trigger("once", fd.name)))
        elif owner == "RetryBackoff":
            cases.append((fd.full_name, task_backoff(fd.name)))
    for fd in bounds.integer_fields(_d(pb.WorkflowSpec.DESCRIPTOR), set()):
        owner = _d(fd.containing_type).name
        if owner == "Dependency":
            cases.append((fd.full_name, wf_dep(fd.name)))
            continue
        if owner == "RetryBackoff":
            cases.append((fd.full_name, wf_backoff(fd.name)))
            continue
        cases.append((fd.full_name, wf_task(fd.name) if owner == "WorkflowTaskSpec" else wf(fd.name)))
    for name in ("rate_milli", "burst", "max_running"):
        cases.append((f"raftsched.v1.QuotaRecord.{name}", quota(name)))
    cases.append(("raftsched.v1.CalendarSpec.dates", calendar("dates")))
    cases.append(("raftsched.v1.CalendarSpec.weekdays", calendar("weekdays")))
    return cases


@pytest.mark.parametrize(("name", "decode"), _spec_refusals(), ids=lambda x: x if isinstance(x, str) else "")
def test_self_checked_messages_refuse_their_rows_limit_plus_one(
    name: str, decode: Callable[[int], object]
) -> None:
    """TaskSpec, WorkflowSpec, QuotaRecord and CalendarSpec are checked by their own decoders
    (with the messages users know); the table's row is what they enforce."""
    rng = bounds.FIELDS[name]
    for value in (rng.low - 1, rng.high + 1):
        try:
            decode(value)
        except (InvalidSpec, InvalidWorkflow):
            continue
        except ValueError:
            continue  # past the field's type: cannot be encoded at all
        raise AssertionError(f"{name}={value} was accepted")


# -- derived arithmetic outside apply: the leader's backoff, the executors' execution ids --------


def test_backoff_for_the_largest_attempt_number_is_capped_and_quick() -> None:
    """backoff x 2**(attempt-1): an attempt near 2**32 built a half-gigabyte integer."""
    import random
    import time

    from raftsched.leader.dispatch.dispatcher import Dispatcher
    from raftsched.leader.dispatch.settings import DispatchSettings

    settings = DispatchSettings(lease_ms=3000, retry_base_ms=1000, retry_cap_ms=8000, retry_jitter=0.2)
    d = Dispatcher(SchedulerState(MemoryStore()), settings, random.Random(7))
    started = time.monotonic()
    for attempt in (bounds.UINT32_MAX, bounds.MAX_ATTEMPT, 64, 63):
        at = d.retry_at(attempt, 1000)
        assert 1000 + 8000 <= at <= 1000 + 8000 * 1.2
    assert time.monotonic() - started < 1.0


def test_reported_execution_ids_are_refused_past_the_shard_and_attempt_ranges() -> None:
    from raftsched.rpc.executor_service import _check_execution_id

    _check_execution_id(0, f"t@1/{bounds.SHARD.high}/{bounds.ATTEMPT.high}")
    for bad in (f"t@1/{bounds.SHARD.high + 1}/1", f"t@1/0/{bounds.ATTEMPT.high + 1}", "t@1/0/" + "9" * 30):
        with pytest.raises(InvalidSpec) as info:
            _check_execution_id(3, bad)
        assert info.value.field == "results[3].execution_id"
        assert bounds.SHARD.text() in str(info.value) and bounds.ATTEMPT.text() in str(info.value)


def test_a_fire_record_count_past_its_range_is_refused_not_added_to_the_fire_total() -> None:
    """fires_total (uint64) += count: a count of 2**64-1 overflowed the task record."""
    from tests.property.test_apply_extremes import NOMINAL, seeded

    st = seeded()
    total = st.tasks["t"].fires_total
    for count in (bounds.UINT64_MAX, bounds.MAX_FIRE_COUNT + 1):
        batch = logpb.FireBatch()
        tf = batch.tasks.add(task="t", version=1, watermark_ms=NOMINAL + 1000, next_fire_ms=NOMINAL + 6000)
        tf.fires.add(nominal_ms=NOMINAL + 1000, outcome=logpb.COALESCED, count=count)
        res = st.apply(_cmd(NOMINAL + 5000, fire_batch=batch)).result
        assert res.ok and res.refused == 1 and res.accounted == 0, res
        assert st.tasks["t"].fires_total == total
    batch = logpb.FireBatch()
    tf = batch.tasks.add(
        task="t", version=1, watermark_ms=NOMINAL + 1000, next_fire_ms=bounds.MAX_TIME_MS + 1
    )
    tf.fires.add(nominal_ms=NOMINAL + 1000, outcome=logpb.COALESCED, count=1)
    assert st.apply(_cmd(NOMINAL + 5000, fire_batch=batch)).result.refused == 1


def test_a_forced_retry_that_would_pass_the_attempt_range_is_refused() -> None:
    from raftsched.fsm import keys
    from tests.property.test_apply_extremes import NOMINAL, RUN, seeded

    st = seeded()
    now = NOMINAL + 100
    for attempt in (1, 2, 3):  # max_retries 2: the third failure fails the run
        results = logpb.ReportResults()
        results.results.add(run_id=RUN, shard=0, attempt=attempt, executor="a", retry_at_ms=now)
        assert st.apply(_cmd(now, report_results=results)).result.accounted == 1
        if attempt < 3:
            assign = logpb.AssignAttempts()
            assign.assignments.add(run_id=RUN, shard=0, attempt=attempt + 1, executor="a")
            assert st.apply(_cmd(now, assign_attempts=assign)).result.accounted == 1
    run = logpb.Run.FromString(st.store.get(keys.run_key_for_id(RUN)) or b"")
    assert run.state == logpb.FAILED
    run.shards[0].attempt = bounds.MAX_ATTEMPT - 50  # as if forced retries had been used up
    st.store.put(keys.run_key_for_id(RUN), run.SerializeToString(deterministic=True))
    before = domain(st)
    res = st.apply(_cmd(now, retry_run=logpb.RetryRun(run_id=RUN))).result
    assert not res.ok and res.code == "invalid_argument" and "attempt" in res.message, res
    assert domain(st) == before


def test_a_result_with_integers_out_of_range_is_refused_alone() -> None:
    """nominal + start_lateness_ms went into the timeline's int64: 2**63-1 overflowed it."""
    from tests.property.test_apply_extremes import NOMINAL, RUN, seeded

    st = seeded()
    now = NOMINAL + 100
    for field, value in (
        ("start_lateness_ms", bounds.INT64_MAX),
        ("duration_ms", -1),
        ("retry_at_ms", bounds.MAX_TIME_MS + 1),
    ):
        results = logpb.ReportResults()
        res = results.results.add(run_id=RUN, shard=0, attempt=1, executor="a", success=True)
        setattr(res, field, value)
        before = st.active[RUN]
        out = st.apply(_cmd(now, report_results=results)).result
        assert out.ok and out.refused == 1 and out.accounted == 0, (field, out)
        assert st.active[RUN] == before
