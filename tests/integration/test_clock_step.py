"""A leader's clock step of ten minutes, with real processes (issue 35 §5).

The chaos harness steps the running leader's wall clock (its offset file, read by the clock
adapter) by +10 min, then by -10 min, and once more by +10 min with the leader SIGKILLed 100 ms
later. Measured on main, the +10 min step stopped on-time firing for about ten minutes, even
after that leader died. Now the stepped leader stamps nothing with the stepped time and hands
leadership over; the outside checker then proves nothing early, nothing lost, nothing duplicated,
and every step is followed by on-time firing within seconds.

One run (about 40 s on 2 shared cores) is shared by the tests; the looped version is ``soak``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raftsched.chaos.harness import ChaosHarness, ChaosResult, ChaosSettings, TaskPlan, run_chaos
from raftsched.localcluster import wait_until
from raftsched.v1 import raftsched_pb2 as pb

pytestmark = pytest.mark.integration

STEP_MS = 600_000
SETTINGS = ChaosSettings(
    partitions=False,
    executors=1,
    tasks=(TaskPlan("chaos-tick"), TaskPlan("chaos-sharded", shards=2)),
)
HANDOVER_BUDGET_MS = 5_000  # step to another node leading (measured: well under a second)
ON_TIME_BUDGET_MS = 5_000  # step (or kill) to the first on-time execution (measured: ~1-2 s)


CLOCKS: list[tuple[str, str, bool, int, int, bool]] = []  # node, role, known, offset, skew, faulty


def _steps(rounds: int) -> object:
    def schedule(h: ChaosHarness) -> None:
        leader = h.leader()
        for n in h.node_ids:  # measured over Raft, before any step: every clock agrees

            def known(n: str = n) -> pb.NodeStatusReply | None:
                st = h.cluster.status(n)
                return st if st.clock_known else None

            st = wait_until(known, 10, 0.05, f"{n} to know its clock offset")
            CLOCKS.append((n, st.role, st.clock_known, st.clock_offset_ms, st.clock_skew_ms, st.clock_faulty))
        assert any(c[0] == leader for c in CLOCKS)
        for _ in range(rounds):
            h.step_leader_clock(+STEP_MS)
            h.step_leader_clock(-STEP_MS)
            h.step_leader_clock(+STEP_MS, kill=True)

    return schedule


def _run(base: Path, rounds: int) -> ChaosResult:
    result = run_chaos(base, _steps(rounds), SETTINGS, progress=lambda msg: print(msg, flush=True))  # type: ignore[arg-type]
    (base / "report.json").write_text(
        json.dumps({"figures": result.figures, "report": result.report.as_dict()}, indent=2)
    )
    print(result.describe())
    print(json.dumps(result.figures["clock_steps"], indent=2))
    return result


@pytest.fixture(scope="module")
def stepped(tmp_path_factory: pytest.TempPathFactory) -> ChaosResult:
    return _run(tmp_path_factory.mktemp("clock-step"), rounds=1)


def _check(result: ChaosResult, steps: int) -> None:
    figures = result.figures["clock_steps"]
    assert isinstance(figures, list) and len(figures) == steps, figures
    for step in figures:
        assert step["handover_ms"] is not None and step["handover_ms"] <= HANDOVER_BUDGET_MS, step
        assert step["on_time_ms"] is not None and step["on_time_ms"] <= ON_TIME_BUDGET_MS, step
        # No ten-minute floor left behind: committed leader time follows the true clock.
        assert abs(step["max_leader_now_ahead_ms"]) <= 5_000, step
    r = result.report
    assert (r.early, r.lost, r.duplicates) == (0, 0, 0), r.summary()
    assert not r.skew_findings, r.skew_findings
    assert not r.violations, "\n".join(r.violations[:40])
    assert not result.log_problems, "\n".join(result.log_problems)


def test_a_stepped_leader_hands_over_and_firing_is_on_time_within_seconds(stepped: ChaosResult) -> None:
    _check(stepped, 3)


def test_every_node_knows_its_clock_offset_from_the_leader(stepped: ChaosResult) -> None:
    assert len(CLOCKS) >= 3, CLOCKS
    for node, _role, known, offset, skew, faulty in CLOCKS:
        # Same host, same clock: the estimate's error is at most half a Raft round trip.
        assert known and abs(offset) < 200 and abs(skew) < 200 and not faulty, (node, offset, skew)


@pytest.mark.soak
def test_clock_steps_looped(tmp_path: Path) -> None:
    _check(_run(tmp_path, rounds=10), 30)
