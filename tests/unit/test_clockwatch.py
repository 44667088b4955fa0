"""ClockWatch: offsets, the majority's clock, and a step of the node's own clock seen at once."""

from __future__ import annotations

from pathlib import Path

from raftsched.clockwatch import ClockWatch, _skew
from raftsched.timing.clock import SystemClock

T0 = 1_700_000_000_000


class FakeClock:
    """A wall clock that can step, over a monotonic clock that cannot."""

    def __init__(self) -> None:
        self.mono = 100.0
        self.step = 0

    def wall_ms(self) -> int:
        return T0 + round(self.mono * 1000) + self.step

    def mono_s(self) -> float:
        return self.mono


def watch(members: int = 3, max_skew_ms: int = 10_000) -> tuple[ClockWatch, FakeClock]:
    c = FakeClock()
    return ClockWatch(c.wall_ms, c.mono_s, max_skew_ms, members=lambda: members), c


def test_the_majority_is_the_median_and_a_tie_favours_this_node() -> None:
    assert _skew({}, 3) is None  # one clock of three: no majority measured
    assert _skew({"b": 0, "c": -600_000}, 3) == 0  # a follower is off: not us
    assert _skew({"b": -600_000, "c": -600_000}, 3) == 600_000  # both others 10 min behind us
    assert _skew({"b": -600_000}, 3) == 0  # one against one: no verdict against ourselves
    assert _skew({"b": -5, "c": -7, "d": -600_000, "e": 3}, 5) == 5


def test_a_round_trip_is_halved_and_a_step_of_our_own_clock_shows_at_once() -> None:
    w, c = watch()
    sent_us = round(c.mono * 1_000_000)
    c.mono += 0.2  # 200 ms round trip; the peer's clock is 50 ms behind ours half-way through
    w.round_trip("b", T0 + round((c.mono - 0.1) * 1000) - 50, sent_us)
    w.round_trip("c", T0 + round((c.mono - 0.1) * 1000) + 20, sent_us)
    v = w.view(leading=True)
    assert v.peers == {"b": -50, "c": 20} and v.skew_ms == 0 and not v.faulty  # ours is the median
    c.step = 600_000  # our wall clock steps; the samples stay
    v = w.view(leading=True)
    assert v.skew_ms == 600_000 - 20 and v.faulty and w.faulty()
    assert w.advice_for("b") == (-50 - 600_000, -50 - 20)  # b is fine: c is the median now
    c.step = 0
    assert not w.faulty()


def test_a_follower_follows_what_the_leader_told_it_and_its_own_steps_since() -> None:
    w, c = watch()
    assert w.view(leading=False).offset_ms is None and not w.faulty()
    w.told(-40, -30)
    v = w.view(leading=False)
    assert (v.offset_ms, v.skew_ms, v.faulty) == (-40, -30, False)
    c.step = -600_000
    assert w.view(leading=False).skew_ms == -600_030 and w.faulty()
    c.mono += 11  # stale: no longer known (and not faulty on old news)
    assert w.view(leading=False).offset_ms is None and not w.faulty()


def test_samples_age_out_and_foreign_stamps_are_ignored() -> None:
    w, c = watch()
    w.round_trip("b", T0, round((c.mono + 5) * 1_000_000))  # a stamp from our future: not ours
    assert w.view(leading=True).peers == {}
    w.peer_sample("b", c.wall_ms(), c.mono)
    w.peer_sample("c", c.wall_ms(), c.mono)
    assert w.view(leading=True).skew_ms == 0
    c.mono += 11
    assert w.view(leading=True).skew_ms is None


def test_the_system_clock_follows_its_offset_file(tmp_path: Path) -> None:
    f = tmp_path / "offset"
    clock = SystemClock(offset_file=f)
    before = clock.now_ms()
    f.write_text("600000\n")
    clock._next_check = 0.0  # skip the 50 ms read pacing
    assert clock.now_ms() - before >= 600_000 - 1000
    f.write_text("oops")
    clock._next_check = 0.0
    assert clock.offset_ms == 600_000 and clock.now_ms() - before >= 600_000 - 1000
    f.unlink()
    clock._next_check = 0.0
    clock.now_ms()
    assert clock.offset_ms == 0


def test_two_clocks_that_disagree_blame_neither() -> None:
    w, c = watch(members=2)
    w.peer_sample("b", c.wall_ms() - 600_000, c.mono)  # b is 10 min behind us, or we are ahead
    assert w.view(leading=True).skew_ms == 0 and not w.faulty()
    assert w.advice_for("b") == (-600_000, 0)  # and b is not told it is wrong either
    w3, c3 = watch(members=3)
    w3.peer_sample("b", c3.wall_ms() - 600_000, c3.mono)
    w3.peer_sample("c", c3.wall_ms() + 10, c3.mono)
    assert w3.advice_for("b") == (-600_000, -600_000)  # two of three agree: b is the odd one
