"""bench/common.py: the one percentile the benchmarks report, and the provenance every result
file carries (commit, command, machine, load at start and end)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.common import REPO, Provenance, bootstrap_ratio, percentile, percentiles, with_scheduler_setting


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1 .. 100
    assert percentile(values, 0.5) == 50
    assert percentile(values, 0.99) == 99
    assert percentile(values, 1.0) == 100
    assert percentile([7.0], 0.99) == 7
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2  # unsorted input
    assert math.isnan(percentile([], 0.5))


def test_percentiles_summarise_or_say_there_were_none() -> None:
    assert percentiles([]) == {"count": 0}
    summary = percentiles([1.0, 2.0, 3.0, 4.0])
    assert summary == {"p50": 2.0, "p90": 4.0, "p99": 4.0, "max": 4.0, "mean": 2.5, "count": 4}


@pytest.fixture
def sigterm_restored() -> Iterator[None]:
    before = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_benchmark_ends_through_its_cleanup_on_sigterm_and_dies_on_a_second(sigterm_restored: None) -> None:
    Provenance.start()
    handler = signal.getsignal(signal.SIGTERM)
    assert callable(handler)
    with pytest.raises(SystemExit) as ended:
        handler(signal.SIGTERM, None)
    assert ended.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # a second one kills it


def test_a_written_result_records_commit_command_and_machine(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    sigterm_restored: None,
) -> None:
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    provenance = Provenance.start()
    # The processes the benchmark starts run this checkout's code, the rest of the path kept.
    assert os.environ["PYTHONPATH"].split(os.pathsep) == [str(REPO), "/elsewhere"]
    out = tmp_path / "result.json"
    provenance.emit({"figure": 1.5}, out)
    written = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out) == written
    assert written["figure"] == 1.5
    record = written["provenance"]
    assert record["commit"] is None or len(record["commit"]) == 40
    assert record["command"]  # the interpreter's argument list, as typed
    assert record["machine"]["cpus"] == os.cpu_count()
    assert {"cpu_model", "python", "platform"} <= set(record["machine"])
    assert len(record["load_avg_at_start"]) == len(record["load_avg_at_end"]) == 3
    assert record["started_at"] <= record["finished_at"]


def test_the_in_process_hot_path_benchmarks_do_not_load_the_test_harness() -> None:
    # bench/hotpath.py compares checkouts by CPU per fire, garbage collections included: the
    # harness (raftsched.testing, hence the executor and aiohttp) put ~16,000 more objects in
    # every full collection and moved them into the timed apply (~2 us per fire, issue 27).
    code = (
        "import sys, bench.hotpath, bench.attempt_apply\n"
        "heavy = ('raftsched.testing', 'raftsched.executor.agent', 'aiohttp')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert done.stdout.strip() == "[]"


def test_a_bootstrap_ratio_brackets_the_ratio_and_is_seeded() -> None:
    quiet = [float(v) for v in range(20, 40)]
    loaded = [v * 1.5 for v in quiet]
    found = bootstrap_ratio(loaded, quiet, 0.5)
    assert found["ratio"] == pytest.approx(1.5, abs=0.01)
    low, high = found["low"], found["high"]
    assert isinstance(low, float) and isinstance(high, float)
    assert low < 1.5 < high  # an interval, around the ratio
    assert high - low < 1.0
    assert bootstrap_ratio(loaded, quiet, 0.5) == found  # seeded: the same answer again
    # A sample equal to the other: an interval around 1.
    same = bootstrap_ratio(quiet, quiet, 0.9)
    assert same["ratio"] == 1.0 and same["low"] is not None and same["low"] <= 1.0 <= (same["high"] or 0)
    # More values of the same spread, a narrower interval.
    narrow = bootstrap_ratio(loaded * 4, quiet * 4, 0.5)
    assert (narrow["high"] or 0) - (narrow["low"] or 0) < high - low


def test_a_bootstrap_ratio_of_nothing_is_none() -> None:
    assert bootstrap_ratio([], [1.0], 0.99)["ratio"] is None
    assert bootstrap_ratio([1.0], [0.0, 0.0], 0.99)["ratio"] is None


def test_with_scheduler_setting_adds_the_key_to_the_one_scheduler_table() -> None:
    for extra, expected in [
        ("", {"scheduler": {"max_dispatch_backlog": 0}}),
        (
            "[scheduler]\nhistory_keep_count = 10\n[raft]\nauto_tick_period = 0.01\n",
            {
                "scheduler": {"max_dispatch_backlog": 0, "history_keep_count": 10},
                "raft": {"auto_tick_period": 0.01},
            },
        ),
        (
            "[raft]\nauto_tick_period = 0.01\n",
            {"raft": {"auto_tick_period": 0.01}, "scheduler": {"max_dispatch_backlog": 0}},
        ),
    ]:
        assert tomllib.loads(with_scheduler_setting(extra, "max_dispatch_backlog", 0)) == expected
