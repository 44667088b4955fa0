"""bench/retention.py stays runnable: a small fill through apply stores every run until the
tasks' keep_for, then prunes as runs finish, and reports RSS and the store's size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import retention


def test_a_small_fill_keeps_the_window_and_reports_sizes(tmp_path: Path) -> None:
    # run() raises if an entry is refused or a run is left unfinished.
    result: dict[str, Any] = retention.run(3, 60, 20 * 60_000, 20, tmp_path)
    first, last = result["series"][0], result["final"]
    assert first["runs_stored"] == 3 * 20  # within keep_for: nothing pruned yet
    assert last["runs_created"] == 3 * 60
    # 20 minutes kept per task, plus at most one age check's lag (16 finishes).
    assert 3 * 20 <= last["runs_stored"] <= 3 * (20 + 16 + 1)
    assert last["store_allocated_mb"] > 0 and last["rss_anon_mb"] > 0
