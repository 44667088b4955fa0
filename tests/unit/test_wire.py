"""raftsched.fsm.wire writes the per-fire record fields byte for byte as protobuf does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from raftsched.fsm import wire
from raftsched.v1 import log_pb2 as pb

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
UINT64 = st.integers(min_value=0, max_value=2**64 - 1)
TIME = st.one_of(st.just(0), st.integers(min_value=0, max_value=2**45), INT64)
TEXT = st.one_of(st.just(""), st.text(max_size=300))
OUTCOMES = st.sampled_from(list(pb.FireOutcome.values()))


def test_varint_matches_protobuf_at_the_edges() -> None:
    assert wire.varint(0) == b"\x00"  # (protobuf leaves a 0 field out altogether)
    for value in (1, 127, 128, 300, 2**31, 2**63 - 1, -1, -(2**63), 1_700_000_000_000):
        expected = pb.Run(nominal_ms=value).SerializeToString(deterministic=True)[1:]  # after the tag
        assert wire.varint(value) == expected, value


@given(
    run_id=TEXT,
    nominal=TIME,
    created=TIME,
    epoch=UINT64,
    manual=st.booleans(),
    held=st.booleans(),
    derived=st.booleans(),
)
def test_run_fields_are_protobufs_bytes(
    run_id: str, nominal: int, created: int, epoch: int, manual: bool, held: bool, derived: bool
) -> None:
    expected = pb.Run(
        run_id=run_id,
        nominal_ms=nominal,
        created_ms=created,
        epoch=epoch,
        manual=manual,
        timeline=[pb.TimelineEntry(event="created", at_ms=created, reason="manual" if manual else "fire")],
        held=held,
        timeline_derived=derived,
    ).SerializeToString(deterministic=True)
    assert wire.run_fields(run_id, nominal, created, epoch, manual, held, derived) == expected


@given(
    nominal=TIME,
    outcome=OUTCOMES,
    reason=TEXT,
    decided=TIME,
    epoch=UINT64,
    run_id=TEXT,
    through=TIME,
    count=UINT64,
    calendar=TEXT,
)
def test_fire_fields_are_protobufs_bytes(
    nominal: int,
    outcome: int,
    reason: str,
    decided: int,
    epoch: int,
    run_id: str,
    through: int,
    count: int,
    calendar: str,
) -> None:
    expected = pb.FireRecord(
        nominal_ms=nominal,
        outcome=outcome,  # type: ignore[arg-type]
        reason=reason,
        decided_ms=decided,
        epoch=epoch,
        run_id=run_id,
        through_ms=through,
        count=count,
        calendar=calendar,
    ).SerializeToString(deterministic=True)
    assert (
        wire.fire_fields(nominal, outcome, reason, decided, epoch, run_id, through, count, calendar)
        == expected
    )


def test_the_records_parse_back_with_the_template_in_front() -> None:
    template = pb.FireRecord(task="t", task_version=3).SerializeToString(deterministic=True)
    rec = pb.FireRecord()
    rec.ParseFromString(template + wire.fire_fields(5000, pb.FIRED, "", 5001, 2, "t@5000", 0, 1, ""))
    assert (rec.task, rec.task_version, rec.nominal_ms, rec.outcome, rec.run_id, rec.count) == (
        "t",
        3,
        5000,
        pb.FIRED,
        "t@5000",
        1,
    )
