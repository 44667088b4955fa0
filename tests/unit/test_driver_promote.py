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


def test_the_leader_promotes_what_pins_the_table_once_per_bound() -> None:
    state, at = pinned(300)  # the long run at seq 1, next_seq 304
    d = leading(state, at, allowed=True)
    bound = state.hot.next_seq - SPAN
    assert state.hot.promote_bound() == bound == 240
    first = d.poll(at + 10)
    assert promotions(first) == [bound]
    assert promotions(d.poll(at + 20)) == []  # proposed, not applied yet
    # Lost (never applied): proposed again after the retry interval.
    again = d.poll(at + 20 + driver_module.PROMOTE_RETRY_MS)
    assert promotions(again) == [bound]
    promote = next(p for p in again if promotions([p]))
    res = state.apply(promote.data).result
    assert res.ok and res.accounted == 1  # the long run; the short ones live are recent
    assert state.hot.promote_bound() == 0 and state.runs.slots.oldest_live() == 302
    assert promotions(d.poll(at + 30 + 2 * driver_module.PROMOTE_RETRY_MS)) == []


@pytest.mark.parametrize("allowed", [None, False])
def test_no_promotion_unless_every_member_applies_format_19(allowed: bool | None) -> None:
    state, at = pinned(300)
    d = leading(state, at, allowed=allowed)
    assert state.hot.promote_bound() == 240
    assert promotions(d.poll(at + 10)) == []
    assert promotions(d.poll(at + 10 + driver_module.PROMOTE_RETRY_MS)) == []


def test_nothing_is_promoted_while_the_oldest_live_run_is_within_span_and_batch() -> None:
    state, at = pinned(SPAN + BATCH - 4)  # next_seq - oldest live = SPAN + BATCH - 1
    d = leading(state, at, allowed=True)
    assert state.hot.promote_bound() == 0
    assert promotions(d.poll(at + 10)) == []
