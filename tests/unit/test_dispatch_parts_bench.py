"""bench/dispatch_parts.py runs on this checkout (a small smoke run: the figures themselves are
quoted in docs/dev/performance-history.md)."""

from __future__ import annotations

from bench.dispatch_parts import run


def test_the_parts_bench_measures_every_part_before_and_after() -> None:
    result = run(tasks=20, repeat=1)
    parts = result["parts_us_per_attempt"]
    assert isinstance(parts, dict)
    assert set(parts) == {
        "ring_owner",
        "task_spec",
        "run_copy",
        "work_item",
        "retry_at",
        "split_id",
        "commit_lateness",
        "stream_queue",
        "release",
    }
    assert all(p["before_us"] > 0 and p["after_us"] >= 0 for p in parts.values())
