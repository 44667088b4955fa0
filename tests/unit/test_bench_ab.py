"""bench.ab: a benchmark that may fail (a real cluster on a loaded machine) is recorded as failed,
and its further figures are read with the main one."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import ab


def checkout_with(tmp_path: Path, body: str) -> Path:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "__init__.py").write_text("")
    (tmp_path / "bench" / "probe.py").write_text(body)
    return tmp_path


def test_a_failed_run_of_a_benchmark_that_may_fail_is_reported_not_fatal(tmp_path: Path) -> None:
    checkout = checkout_with(tmp_path, "import sys\nprint('no leader', file=sys.stderr)\nsys.exit(1)\n")
    with pytest.raises(ab.RunFailed, match="no leader"):
        ab.measure(checkout, ab.Bench("probe", "x", may_fail=True), [])
    with pytest.raises(SystemExit):
        ab.measure(checkout, ab.Bench("probe", "x"), [])


def test_the_further_figures_are_read_beside_the_main_one(tmp_path: Path) -> None:
    body = 'import json\nprint(json.dumps({"lat": {"p99": 250, "p50": 90}, "rate": 10000}))\n'
    checkout = checkout_with(tmp_path, body)
    figure, also = ab.measure(checkout, ab.Bench("probe", "lat.p99", ("lat.p50", "rate")), [])
    assert figure == 250.0
    assert also == {"lat.p50": 90.0, "rate": 10000.0}


def test_the_fires_benchmark_is_a_real_cluster_that_may_fail() -> None:
    fires = ab.BENCHES["fires"]
    assert fires.module == "fires" and fires.figure == "commit_lateness_ms.p99" and fires.may_fail
