"""Executor death before start, simulated: attempts an executor held but never started are
re-placed without consuming a retry, soon after its dispatch stream closes (not after the
lease), under a new attempt number that fences the dead executor's late start or result.

The executors are the real agent over the in-memory transport. One of them runs its clock 5 s
behind the cluster's, so it holds every attempt it receives unstarted (an executor never starts
work before its nominal time by its own clock): exactly the attempts a crash must not turn into
failed tries."""

from __future__ import annotations

from collections import Counter

from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.testing import SimHarness
from raftsched.timing.clock import ManualClock
from raftsched.v1 import raftsched_pb2 as pb

BEHIND_MS = 5_000


class _Behind:
    """A clock ``BEHIND_MS`` behind the simulation's."""

    def __init__(self, clock: ManualClock) -> None:
        self._clock = clock

    def now_ms(self) -> int:
        return self._clock.now_ms() - BEHIND_MS

    def monotonic(self) -> float:
        return self._clock.monotonic()


def _cluster(max_retries: int = 0) -> SimHarness:
    sim = SimHarness(["n1", "n2", "n3"], seed=3)
    sim.elect("n1")
    slow = sim.add_executor("slow", slots=8)
    assert slow.agent is not None
    slow.agent.clock = _Behind(sim.clock)
    sim.add_executor("fast", slots=8)
    sim.add_task(
        TaskSpec(
            "t",
            CronTrigger("* * * * * *"),
            command="work",
            shards=4,
            overlap=Overlap.ALLOW,
            max_retries=max_retries,
        )
    )
    return sim


def _held_unstarted(sim: SimHarness) -> list[str]:
    leader = sim.nodes[sim.leader or "n1"]
    return leader.dispatcher.unstarted_of("slow")


def _drain(sim: SimHarness) -> list[pb.Run]:
    sim.write("set_enabled", "t", False)
    for _ in range(600):
        sim.run_for(100)
        runs = sim.runs("t")
        if runs and all(r.state in (pb.SUCCEEDED, pb.FAILED) for r in runs):
            return runs
    raise AssertionError("runs never finished")


def test_a_crashed_executors_unstarted_attempts_run_elsewhere_without_consuming_a_retry() -> None:
    sim = _cluster(max_retries=0)
    sim.run_for(3_000)
    held = _held_unstarted(sim)
    assert held, "the slow executor holds no unstarted attempt (the heartbeat says which started)"
    lease_ms = sim.dispatch.lease_ms
    crashed_at = sim.clock.now_ms()
    sim.crash_executor("slow")
    leader = sim.nodes[sim.leader or "n1"]
    # Declared dead from the closed stream, well before the lease would have expired.
    for _ in range(100):
        sim.run_for(50)
        if "slow" not in leader.state.live_executors():
            break
    assert "slow" not in leader.state.live_executors()
    assert sim.clock.now_ms() - crashed_at < lease_ms, "detected by the lease, not by the stream"
    runs = _drain(sim)
    sim.close()

    # No retries allowed, yet nothing failed: an unstarted attempt is not a try.
    assert all(r.state == pb.SUCCEEDED for r in runs), [r.run_id for r in runs if r.state != pb.SUCCEEDED]
    replaced = {f"{r.run_id}/{s.shard}/{s.attempt - 1}": s for r in runs for s in r.shards if s.unstarted}
    assert set(held) <= set(replaced), "every held attempt was re-placed as unstarted"
    for shard in replaced.values():
        assert shard.lost == 0 and shard.executor == "fast" and shard.retry_base == shard.unstarted
    executed = Counter(e for ex in sim.executors.values() for e, _ in ex.executions)
    assert not [e for e, n in executed.items() if n > 1], "an execution id ran twice"
    assert not set(held) & set(executed), "a held attempt started on the dead executor"
    assert len(set(sim.digests().values())) == 1


def test_a_restarted_executors_late_results_for_re_placed_attempts_are_refused() -> None:
    sim = _cluster(max_retries=0)
    sim.run_for(3_000)
    held = _held_unstarted(sim)
    assert held
    sim.crash_executor("slow")
    sim.run_for(2_000)  # declared dead; its attempts re-placed on "fast" as attempt N+1
    sim.restart_executor("slow")  # its log still holds the old attempts: reported, and fenced
    sim.run_for(3_000)
    runs = _drain(sim)
    sim.close()
    assert all(r.state == pb.SUCCEEDED for r in runs)
    by_id = {r.run_id: r for r in runs}
    for exec_id in held:
        run_id, shard, attempt = exec_id.rsplit("/", 2)
        s = by_id[run_id].shards[int(shard)]
        assert s.attempt > int(attempt) and s.executor == "fast", exec_id
    executed = Counter(e for ex in sim.executors.values() for e, _ in ex.executions)
    assert not [e for e, n in executed.items() if n > 1]
    assert len(set(sim.digests().values())) == 1


def test_started_attempts_lost_with_their_executor_still_count_as_tries() -> None:
    # The same crash with an executor whose clock is right: what it held had started, so the
    # loss is a try and, with no retries, those runs fail.
    sim = SimHarness(["n1", "n2", "n3"], seed=4)
    sim.elect("n1")
    sim.add_executor("ex1", slots=8, duration_ms=5_000)
    sim.add_task(TaskSpec("t", CronTrigger("* * * * * *"), command="work", overlap=Overlap.ALLOW))
    sim.run_for(2_500)
    assert not _unstarted(sim, "ex1")
    sim.crash_executor("ex1")
    sim.add_executor("ex2", slots=8, duration_ms=100)
    runs = _drain(sim)
    sim.close()
    lost = [s for r in runs for s in r.shards if s.lost]
    assert lost and all(s.state == pb.FAILED and not s.unstarted for s in lost)


def _unstarted(sim: SimHarness, executor: str) -> list[str]:
    return sim.nodes[sim.leader or "n1"].dispatcher.unstarted_of(executor)
