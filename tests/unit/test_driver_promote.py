"""The leader driver's PromoteHotRuns (command format 19): proposed when the oldest live hot run
is more than MAX_HOT_SPAN + PROMOTE_BATCH seqs behind next_seq, with the bound MAX_HOT_SPAN
behind; once per bound until it applies or PROMOTE_RETRY_MS passes; never unless every voting
member applies format 19."""

from __future__ import annotations

import pytest

from raftsched import codec
from raftsched.fsm import hot
from raftsched.fsm.state import SchedulerState
from raftsched.leader import driver as driver_module
from raftsched.leader.driver import LeaderDriver, Proposal
from raftsched.timing.schedule import MisfireSettings
from raftsched.v1 import log_pb2 as pb
from tests.unit.test_fsm_hot import pinned

SPAN, BATCH = 64, 16


@pytest.fixture(autouse=True)
def small_span(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hot, "MAX_HOT_SPAN", SPAN)
    monkeypatch.setattr(hot, "PROMOTE_BATCH", BATCH)


def leading(state: SchedulerState, now: int, allowed: bool | None) -> LeaderDriver:
    d = LeaderDriver(state, "n1", misfire=MisfireSettings(grace_ms=5_000))
    d.columns_allowed = lambda: True
    d.promote_allowed = None if allowed is None else (lambda: allowed)
    d.on_effects(state.apply(d.become_leader(1, now).data).effects)
    assert d.ready
    return d


def promotions(proposals: list[Proposal]) -> list[int]:
    out = []
    for p in proposals:
        cmd = codec.decode_command(p.data)
        if cmd.WhichOneof("body") == "promote_hot_runs":
            out.append(cmd.promote_hot_runs.before_seq)
    return out


def _apply_promotion(state: SchedulerState, proposals: list[Proposal]) -> pb.CommandResult:
    promote = next(p for p in proposals if promotions([p]))
    res = state.apply(promote.data).result
    assert res.ok, res
    return res


def test_the_leader_turns_logging_on_then_promotes_what_pins_the_table_once_per_bound() -> None:
    state, at = pinned(300)  # the long run at seq 1, next_seq 304
    d = leading(state, at, allowed=True)
    retry = driver_module.PROMOTE_RETRY_MS
    # First the one that only turns the hp/ records on (before_seq 1 promotes nothing).
    assert not state.hot.promotions_logged and state.hot.promote_bound() == 1
    first = d.poll(at + 10)
    assert promotions(first) == [1]
    assert promotions(d.poll(at + 20)) == []  # in flight
    assert _apply_promotion(state, first).accounted == 0 and state.hot.promotions_logged
    # Then the one that unpins the table: proposed at once (the first applied).
    bound = state.hot.next_seq - SPAN
    assert state.hot.promote_bound() == bound == 240
    second = d.poll(at + 30)
    assert promotions(second) == [bound]
    assert promotions(d.poll(at + 40)) == []  # proposed, not applied yet
    # Lost (never applied): proposed again after the retry interval.
    again = d.poll(at + 30 + retry)
    assert promotions(again) == [bound]
    assert _apply_promotion(state, again).accounted == 1  # the long run; the live short ones are recent
    assert state.hot.promote_bound() == 0 and state.runs.slots.oldest_live() == 302
    assert promotions(d.poll(at + 40 + 2 * retry)) == []
    # A new leadership forgets what the last one proposed.
    d.become_leader(2, at + 50)
    assert d._promote_sent == (0, 0)


@pytest.mark.parametrize("allowed", [None, False])
def test_no_promotion_unless_every_member_applies_format_19(allowed: bool | None) -> None:
    state, at = pinned(300)
    d = leading(state, at, allowed=allowed)
    assert state.hot.promote_bound() == 1  # even the first one waits for format 19
    assert promotions(d.poll(at + 10)) == []
    assert promotions(d.poll(at + 10 + driver_module.PROMOTE_RETRY_MS)) == []


def test_nothing_is_promoted_while_the_oldest_live_run_is_within_span_and_batch() -> None:
    state, at = pinned(SPAN + BATCH - 4)  # next_seq - oldest live = SPAN + BATCH - 1
    d = leading(state, at, allowed=True)
    assert _apply_promotion(state, d.poll(at + 10)).accounted == 0  # logging on
    assert state.hot.promote_bound() == 0
    assert promotions(d.poll(at + 20 + driver_module.PROMOTE_RETRY_MS)) == []
