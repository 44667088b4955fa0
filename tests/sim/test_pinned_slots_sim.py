"""A long hot attempt no longer pins the slot table (PromoteHotRuns, command format 19), in the
deterministic simulation of a whole cluster.

The slot table is trimmed only at its head, so one attempt running for an hour among thousands of
short ones a second would keep every later slot in memory and in every hot checkpoint. The leader
moves a live hot run more than ``MAX_HOT_SPAN`` seqs behind to the cold path. Here the span is
shrunk to 64 seqs, the batch to 16 and the trim to every 32 finished slots, so a 30 s attempt
among 8 every-second tasks passes it in about ten seconds: every node's table stays bounded, the
long attempt still runs once and succeeds once (its result, refused as a hot row, goes the cold
way), through a leader crash after the promotion, and the replicas agree. The control (a member
that does not report format 19) shows the table growing as before.
"""

from __future__ import annotations

from collections import Counter

import pytest

from raftsched.fsm import hot, hot_slots
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.server import core
from raftsched.testing import SimHarness
from raftsched.v1 import log_pb2 as pb

SPAN, BATCH, TRIM = 64, 16, 32
SHORT = [f"s{i}" for i in range(8)]


def cluster(monkeypatch: pytest.MonkeyPatch) -> SimHarness:
    monkeypatch.setattr(hot, "MAX_HOT_SPAN", SPAN)
    monkeypatch.setattr(hot, "PROMOTE_BATCH", BATCH)
    monkeypatch.setattr(hot, "TRIM_EVERY", TRIM)
    sim = SimHarness(["n1", "n2", "n3"], seed=7, columns=True)
    sim.elect("n1")
    sim.add_executor("ex1", slots=32, duration_ms=50, durations={"long-work": 30_000})
    # Hot tasks (one shard, overlap allowed, nothing held): the long one fires every 30 s (first
    # 10 s in: the simulation starts at second 20 of a minute) and runs 30 s; the short ones
    # every second.
    sim.add_task(TaskSpec("long", CronTrigger("* * * * * */30"), command="long-work", overlap=Overlap.ALLOW))
    for name in SHORT:
        sim.add_task(TaskSpec(name, CronTrigger("* * * * * *"), command="work", overlap=Overlap.ALLOW))
    return sim


def table_sizes(sim: SimHarness) -> dict[str, int]:
    return {name: len(node.state.runs.slots) for name, node in sim.nodes.items() if node.state is not None}


def run_sampling(sim: SimHarness, ms: int, sizes: list[int]) -> None:
    for _ in range(ms // 500):
        sim.run_for(500)
        sizes.extend(table_sizes(sim).values())


def long_runs(sim: SimHarness) -> list[pb.Run]:
    return sorted(sim.runs("long"), key=lambda r: r.nominal_ms)


def test_a_long_hot_attempt_is_promoted_and_pins_no_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    sim = cluster(monkeypatch)
    sizes: list[int] = []
    run_sampling(sim, 25_000, sizes)
    first = long_runs(sim)[0]
    assert first.state == pb.RUNNING, first
    # Promoted: its Run is a cold record now, and no node's table reaches back to it.
    for name, node in sim.nodes.items():
        assert node.state is not None
        assert hot_slots.seq_of(node.state.runs.slots, node.state.tasks, first.run_id) == 0, name
    # A leader crash after the promotion: the new leader takes the cold attempt over.
    sim.crash("n1")
    sim.run_for(1_000)
    sim.elect("n2")
    sim.restart("n1")
    run_sampling(sim, 40_000, sizes)
    bound = SPAN + BATCH + TRIM + 2 * len(SHORT)
    assert max(sizes) <= bound, f"a table grew to {max(sizes)} slots (bound {bound})"
    # Every long run ran once and the first succeeded once, 30 s after it started.
    done = [r for r in long_runs(sim) if r.state == pb.SUCCEEDED]
    assert done and done[0].run_id == first.run_id
    executed = Counter(e for ex in sim.executors.values() for e, _ in ex.executions)
    assert [e for e, n in executed.items() if n > 1] == []
    assert executed[f"{first.run_id}/0/1"] == 1
    for ex in sim.executors.values():
        for exec_id, started in ex.executions:
            assert started >= int(exec_id.split("/")[0].split("@")[1]), f"{exec_id} started early"
    # The short tasks kept running: a run for nearly every second of the minute.
    assert all(len(sim.runs(name)) >= 55 for name in SHORT)
    assert len(set(sim.digests().values())) == 1
    sim.close()


def test_without_format_19_the_long_attempt_pins_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core, "PROMOTE_FORMAT", 99)  # a member that does not apply PromoteHotRuns
    sim = cluster(monkeypatch)
    sizes: list[int] = []
    run_sampling(sim, 28_000, sizes)
    assert long_runs(sim) == []  # never promoted: a live hot run has no Run record
    for node in sim.nodes.values():
        assert node.state is not None
        assert [r for r in node.state.hot.live_runs() if r.startswith("long@")] == ["long@1700000010000"]
    assert max(sizes) > 8 * 17  # every slot since the long one's
    sim.close()
