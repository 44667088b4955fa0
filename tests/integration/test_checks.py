"""The invariant checkers themselves, on hand-made records: each violation is reported (a checker
that cannot fail proves nothing). Pure and fast; no cluster."""

from __future__ import annotations

import pytest

from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.checks import (
    coverage_problems,
    early_problems,
    fencing_problems,
    run_problems,
    stale_epoch_problems,
)

pytestmark = pytest.mark.integration

T = 1_800_000_000_000  # a whole second


def fired(s: int, epoch: int = 1, late_ms: int = 0) -> pb.FireRecord:
    nominal = T + s * 1000
    return pb.FireRecord(
        task="t",
        nominal_ms=nominal,
        outcome=pb.FIRED,
        decided_ms=nominal + late_ms,
        epoch=epoch,
        run_id=f"t@{nominal}",
        count=1,
    )


def coalesced(first: int, last: int, epoch: int = 1, decided_s: int = 0) -> pb.FireRecord:
    return pb.FireRecord(
        task="t",
        nominal_ms=T + first * 1000,
        through_ms=T + last * 1000,
        count=last - first + 1,
        outcome=pb.COALESCED,
        decided_ms=T + decided_s * 1000,
        epoch=epoch,
    )


def run(s: int, epoch: int = 1, manual: bool = False) -> pb.Run:
    nominal = T + s * 1000
    return pb.Run(
        run_id=f"t@{nominal}" + ("~m1" if manual else ""), task="t", nominal_ms=nominal, epoch=epoch
    )


def test_a_clean_history_has_no_problems() -> None:
    fires = [fired(0), fired(1), coalesced(2, 4, epoch=2, decided_s=11), fired(5, 2, 6000), fired(6, 2, 5000)]
    runs = [run(0), run(1), run(5, 2), run(6, 2), run(3, manual=True)]
    assert coverage_problems(fires, through_ms=T + 6500) == []
    assert run_problems(fires, runs) == []
    assert early_problems(fires) == []
    assert fencing_problems(fires) == []
    assert stale_epoch_problems(fires, 1, 2) == []


def test_gaps_duplicates_and_bad_ranges_are_reported() -> None:
    assert "not accounted" in coverage_problems([fired(0), fired(2)], through_ms=T + 2000)[0]
    assert "not accounted" in coverage_problems([fired(0)], through_ms=T + 1000)[0]  # missing tail
    assert "more than once" in coverage_problems([fired(0), coalesced(0, 1)], through_ms=T + 1000)[0]
    bad_count = coalesced(0, 2)
    bad_count.count = 2
    assert "count 2" in coverage_problems([bad_count], through_ms=T + 2000)[0]
    skipped = fired(0)
    skipped.outcome = pb.SKIPPED_DISABLED
    skipped.run_id = ""
    assert "unexpected outcome" in coverage_problems([skipped], through_ms=T)[0]
    assert coverage_problems([], through_ms=T)


def test_missing_duplicate_and_mismatched_runs_are_reported() -> None:
    fires = [fired(0), fired(1)]
    assert "does not exist" in run_problems(fires, [run(0)])[0]
    assert any("2 scheduled runs" in p for p in run_problems(fires, [run(0), run(1), run(1)]))
    assert "does not match" in run_problems(fires, [run(0), run(1, epoch=7)])[0]
    named = coalesced(2, 3)
    named.run_id = "t@x"
    assert "non-FIRED record names a run" in run_problems([*fires, named], [run(0), run(1)])[0]


def test_early_stale_and_backwards_decisions_are_reported() -> None:
    assert early_problems([fired(0, late_ms=-1)])
    assert early_problems([coalesced(0, 3, decided_s=2)])  # decided before the range's end
    assert "epoch went back" in fencing_problems([fired(0, 2), fired(1, 1, 10)])[0]
    assert "decided time went back" in fencing_problems([fired(0, 1, 500), fired(1, 1, -600)])[0]
    stale = [fired(0, 1), fired(1, 2), fired(2, 1, 100)]
    assert "deposed epoch 1" in stale_epoch_problems(stale, 1, 2)[0]
    assert stale_epoch_problems([fired(0, 1)], 1, 2) == ["no record of epoch >= 2"]
