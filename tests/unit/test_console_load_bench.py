"""bench/console_load.py: interleaved runs pooled by their firing_hold_ms."""

from __future__ import annotations

from typing import Any

from bench.console_load import pooled


def _run(hold: int | None, quiet: list[float], loaded: list[float]) -> dict[str, Any]:
    return {
        "firing_hold_ms": hold,
        "batches_ms": {"quiet": quiet, "loaded": loaded},
        "api_calls_per_loaded_s": 800.0,
        "answers_during_commit": {"per_batch_mean": 3.0},
        "held": {"raftsched_http_api_held_total": 10.0},
        "provenance": {
            "load_avg_at_start": [1.0, 1, 1],
            "load_avg_at_end": [2.0, 1, 1],
            "commit": "abcdef0123",
        },
    }


def test_runs_pool_by_setting_and_ratios_come_with_intervals() -> None:
    quiet = [float(x) for x in range(20, 40)]
    out = pooled(
        [
            _run(0, quiet, [x * 2 for x in quiet]),
            _run(100, quiet, quiet),
            _run(0, quiet, [x * 2 for x in quiet]),
        ]
    )
    assert sorted(out) == ["firing_hold_ms=0", "firing_hold_ms=100"]
    off, on = out["firing_hold_ms=0"], out["firing_hold_ms=100"]
    assert off["runs"] == 2 and off["batches"] == {"quiet": 40, "loaded": 40}
    assert off["ratio_ci95"]["p50"]["ratio"] == 2.0 and on["ratio_ci95"]["p50"]["ratio"] == 1.0
    assert off["ratio_ci95"]["p99"]["low"] <= 2.0 <= off["ratio_ci95"]["p99"]["high"]
    assert on["held"] == [10.0] and on["load_avg"] == [(1.0, 2.0)] and on["commits"] == ["abcdef01"]
