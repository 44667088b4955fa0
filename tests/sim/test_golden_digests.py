"""The simulation's seeds pinned byte for byte: a refactor that changes no behaviour leaves every
committed log and every final state digest as it was (issue 27 §6).

Each scenario of ``test_scenarios.SCENARIOS`` and a few random fault schedules run on the manual
clock; the hash of the committed log (every entry's term and bytes) and the digest of a fresh
replay are compared with ``tests/fixtures/sim_digests.json``. A change that is meant to alter the
log rewrites the file: ``python tests/sim/test_golden_digests.py --rewrite``, and says why in its
commit.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from tests.sim.scenario import random_fault_script, run_scenario
from tests.sim.test_scenarios import SCENARIOS

GOLDEN = Path(__file__).resolve().parent.parent / "fixtures" / "sim_digests.json"
RANDOM_SEEDS = [(1, 3), (2, 5), (3, 3)]


def _scripts() -> dict[str, str]:
    scripts = dict(SCENARIOS)
    for seed, nodes in RANDOM_SEEDS:
        scripts[f"random-{seed}-{nodes}"] = random_fault_script(seed, nodes, minutes=3)
    return scripts


def fingerprint(script: str) -> dict[str, str]:
    scenario = run_scenario(script)
    log = hashlib.sha256()
    for term, data in scenario.sim.cluster.log:
        log.update(term.to_bytes(8, "big") + len(data).to_bytes(8, "big") + data)
    _, digest = scenario.replay()
    return {"log": log.hexdigest(), "state": digest}


def _golden() -> dict[str, dict[str, str]]:
    loaded: dict[str, dict[str, str]] = json.loads(GOLDEN.read_text())
    return loaded


@pytest.mark.parametrize("name", sorted(_scripts()))
def test_a_seed_commits_the_same_log_and_state_as_before(name: str) -> None:
    expected = _golden().get(name)
    assert expected is not None, f"{name} has no golden: run {__file__} --rewrite"
    assert fingerprint(_scripts()[name]) == expected


def test_every_golden_names_a_seed() -> None:
    assert sorted(_golden()) == sorted(_scripts())


if __name__ == "__main__":
    if sys.argv[1:] != ["--rewrite"]:
        sys.exit(f"usage: {sys.argv[0]} --rewrite")
    prints = {n: fingerprint(s) for n, s in sorted(_scripts().items())}
    GOLDEN.write_text(json.dumps(prints, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
