"""The CI-sized 5-node chaos run: 5 real nodes, 2 real executors, the same tasks as the 3-node
run; leader SIGKILLs, the leader cut off together with a follower (a minority of two), an executor
and a follower SIGKILL, and the leader cut off alone from its followers while executors still
reach it; then the outside checker. One run is shared by the tests below.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raftsched.testing.chaos.harness import ChaosResult, ChaosSettings, ci5_schedule, run_chaos
from tests.chaos.test_chaos_ci import _explain

pytestmark = pytest.mark.integration

CI_BUDGET_S = 90


@pytest.fixture(scope="module")
def chaos5(tmp_path_factory: pytest.TempPathFactory) -> ChaosResult:
    base: Path = tmp_path_factory.mktemp("chaos5")
    result = run_chaos(base, ci5_schedule, ChaosSettings(nodes=5), progress=lambda m: print(m, flush=True))
    (base / "report.json").write_text(
        json.dumps({"figures": result.figures, "report": result.report.as_dict()}, indent=2)
    )
    print(result.describe())
    print(json.dumps(result.figures, indent=2))
    return result


def test_five_nodes_ran_every_planned_fault_within_the_budget(chaos5: ChaosResult) -> None:
    assert chaos5.figures["nodes"] == 5
    kinds = sorted(e.kind for e in chaos5.events)
    assert kinds.count("sigkill-leader") >= 2 and kinds.count("partition") == 2, kinds
    assert {"sigkill-executor", "sigkill-follower"} <= set(kinds), kinds
    assert [p.grpc_cut for p in chaos5.partitions] == [True, False]
    assert chaos5.seconds <= CI_BUDGET_S, f"the 5-node chaos run took {chaos5.seconds:.0f} s"


def test_five_nodes_no_fire_lost_duplicated_or_early(chaos5: ChaosResult) -> None:
    r = chaos5.report
    bad = r.of("lost", "duplicate", "early")
    assert not bad and (r.lost, r.duplicates, r.early) == (0, 0, 0), _explain(
        "lost/duplicated/early", bad, chaos5
    )


def test_five_nodes_accounting_replicas_and_leases_hold(chaos5: ChaosResult) -> None:
    problems = chaos5.report.of("accounting", "execution", "replicas", "stuck")
    assert not problems, _explain("accounting/execution/replica/lease violations", problems, chaos5)
    assert chaos5.report.ok, _explain("violations", chaos5.report.violations, chaos5)


def test_five_nodes_logs_report_no_errors(chaos5: ChaosResult) -> None:
    assert not chaos5.log_problems, _explain("ERROR/CRITICAL lines in the logs", chaos5.log_problems, chaos5)
