"""bench/leader_loop.py runs on this checkout, both ways results come in (a small smoke run: the
figures themselves are quoted in docs/dev/performance-history.md)."""

from __future__ import annotations

import pytest

from bench.leader_loop import run


@pytest.mark.parametrize("session", [False, True])
def test_the_leader_loop_bench_starts_and_settles_every_attempt(session: bool) -> None:
    result = run(tasks=50, seconds=2, executors=2, batch=7, session=session)
    assert result["attempts"] == 100  # every fire of both seconds started, and (checked) finished
    assert float(result["dispatcher_us_per_attempt"]) > 0  # type: ignore[arg-type]
