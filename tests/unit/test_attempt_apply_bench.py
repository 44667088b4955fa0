"""bench/attempt_apply.py stays runnable: a small run applies every attempt's three entries on a
leader's state and a follower's, every assignment and result accepted, the states equal."""

from __future__ import annotations

from pathlib import Path

from bench import attempt_apply
from raftsched.fsm.state import SchedulerState


def test_a_small_run_applies_every_attempt_on_both_states(tmp_path: Path) -> None:
    # run() raises if an entry is refused, the follower's digest differs or a run is unfinished.
    result = attempt_apply.run(20, 3, 2, 7, 1, tmp_path)
    assert result["attempts"] == 20 * 4  # the second before the first simulated one, then three
    follower = result["follower_us_per_attempt"]
    assert isinstance(follower, dict) and follower["result_us"] > 0


def test_the_hot_mode_stores_the_same_runs_as_todays_apply(tmp_path: Path) -> None:
    # run() raises if an entry is refused (columns included), the replicas differ or a run is
    # unfinished; _run_records hashes every stored run record.
    kept: list[SchedulerState] = []
    today = attempt_apply.run(20, 3, 2, 7, 1, tmp_path / "today", keep=kept)
    hot = attempt_apply.run(20, 3, 2, 7, 1, tmp_path / "hot", keep=kept, hot=True)
    assert hot["attempts"] == today["attempts"] == 80
    assert attempt_apply._run_records(kept[0]) == attempt_apply._run_records(kept[1])
    assert kept[1].numbering.on and kept[1].hot.next_seq == 81


def test_tally_counts_what_today_and_the_hot_path_apply_alike(tmp_path: Path) -> None:
    # --tally: an ApplyTally on each state, as a node with http; both paths count every attempt.
    kept: list[SchedulerState] = []
    attempt_apply.run(20, 3, 2, 7, 1, tmp_path / "today", keep=kept, tally=True)
    attempt_apply.run(20, 3, 2, 7, 1, tmp_path / "hot", keep=kept, hot=True, tally=True)
    today, hot = (state.tally for state in kept)
    assert today is not None and hot is not None
    assert sum(hot.snapshot().runs_finished.values()) == 80
    assert hot.snapshot().runs_finished == today.snapshot().runs_finished
    assert hot.snapshot().attempts == today.snapshot().attempts
    assert hot.snapshot().fires == today.snapshot().fires
