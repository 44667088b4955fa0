"""A leader's clock step of ten minutes, with real processes (issue 35 §5).

The chaos harness steps the running leader's wall clock (its offset file, read by the clock
adapter) by +10 min, then by -10 min, and once more by +10 min with the leader SIGKILLed 100 ms
later. Measured on main, the +10 min step stopped on-time firing for about ten minutes, even
after that leader died. Now the stepped leader stamps nothing with the stepped time and hands
leadership over; the outside checker then proves nothing early, nothing lost, nothing duplicated,
and every step is followed by on-time firing within seconds.

One chaos run (about 15 s on 2 shared cores) is shared by the first tests; the looped version is
``soak``. The last test covers a committed leader time the cluster could not refuse (a one-node
cluster cannot tell its clock is wrong): corrected and restarted, the node takes it as a clock
fault, not a floor (on main it kept the ten-minute floor).
"""

from __future__ import annotations

import json
import signal
import time
from datetime import datetime
from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.model import CronTrigger, TaskSpec
from raftsched.testing.chaos.harness import ChaosHarness, ChaosResult, ChaosSettings, TaskPlan, run_chaos
from raftsched.testing.cluster import TEST_CLOCK_OFFSET_FILE_ENV, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.conftest import ClusterFactory

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


def _marks(path: Path) -> list[tuple[str, int, int]]:
    """``(task, nominal ms, start ms)`` per line the tasks below appended."""
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        task, nominal, start = line.split()
        out.append((task, int(datetime.fromisoformat(nominal).timestamp() * 1000), int(start)))
    return out


def test_a_node_restarted_with_a_true_clock_abandons_what_its_stepped_clock_committed(
    make_cluster: ClusterFactory, tmp_path: Path
) -> None:
    """A one-node cluster cannot tell its clock is wrong: stepped +10 min, it commits a leader
    time ten minutes ahead. Corrected and restarted, it finds that committed time ahead of its
    clock by more than max_clock_skew: a clock fault (alert), not a floor. A task created then
    fires on time (on main its first fire was ten minutes away); the task fired with the stepped
    clock stays accounted up to its watermark and nothing starts early."""
    cluster = make_cluster(nodes=1, start=False)
    cluster.env[TEST_CLOCK_OFFSET_FILE_ENV] = str(tmp_path / "clock-{name}")
    clock_file = tmp_path / "clock-n1"
    marker = tmp_path / "marks.log"
    cluster.start()
    cluster.wait_for_leader(30)
    ex = cluster.start_executor("ex1", 4, tmp_path / "ex1")
    command = f'echo "$RAFTSCHED_TASK $RAFTSCHED_NOMINAL_TIME $(date +%s%3N)" >> {marker}'
    try:
        with Client(cluster.targets()) as client:
            client.add_task(TaskSpec("t", CronTrigger("* * * * * *"), command=command))
            wait_until(lambda: len(_marks(marker)) >= 2, 30, 0.1, "t to run")
            clock_file.write_text(f"{STEP_MS}\n")
            wait_until(
                lambda: cluster.status("n1").max_leader_now_ms > time.time() * 1000 + STEP_MS - 60_000,
                30,
                0.1,
                "leader time ten minutes ahead",
            )
            clock_file.write_text("0\n")  # the clock is corrected...
            cluster.kill("n1", signal.SIGTERM)  # ...and the node restarted
            cluster.procs["n1"].wait(30)
            cluster.start("n1")
            cluster.wait_for_leader(30)
            wait_until(
                lambda: cluster.status("n1").max_leader_now_ms < time.time() * 1000 + 5_000,
                30,
                0.1,
                "leader time back at the true clock",
            )
            faults = [a.alert for a in client.alerts() if a.alert.kind == "clock_fault"]
            assert len(faults) == 1 and "ahead of the clock of the new leader n1" in faults[0].error
            created = time.time() * 1000
            client.add_task(TaskSpec("u", CronTrigger("* * * * * *"), command=command))
            wait_until(
                lambda: [m for m in _marks(marker) if m[0] == "u" and m[2] - m[1] <= 1000],
                10,
                0.1,
                "the new task to run on time",
            )
            assert min(m[1] for m in _marks(marker) if m[0] == "u") - created <= 2_000
            early = [m for m in _marks(marker) if m[2] < m[1]]
            assert not early, early
    finally:
        ex.kill()  # it holds t's run for its nominal time, ten minutes away: a drain would wait
        ex.wait(10)
