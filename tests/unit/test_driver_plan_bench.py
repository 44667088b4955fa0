"""bench/driver_plan.py runs on this checkout (a small smoke run: the figures themselves are
quoted in docs/dev/performance-history.md), and its replay applies what its recording proposed."""

from __future__ import annotations

from pathlib import Path

from bench.driver_plan import replay, run


def test_the_planning_bench_plans_every_fire_and_replays_its_entries(tmp_path: Path) -> None:
    record = tmp_path / "entries"
    result = run(tasks=30, seconds=3, record=record)
    assert result["fires"] == 90 and result["entries"] == 3
    again = tmp_path / "again"
    run(tasks=30, seconds=3, record=again)
    assert record.read_bytes() == again.read_bytes()  # deterministic: comparable across checkouts
    # The warm-up second's entry as well: one per simulated second, all accepted.
    assert replay(30, record) == {"tasks": 30, "entries": 4, "replay": True}
