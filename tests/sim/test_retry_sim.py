"""Per-task retries through a simulated cluster (issue 29 §3): each retry waits its delay from
``retry_delays`` (the last repeating), and goes to another executor when there is one
(``retry_elsewhere``, the default), or stays where the ring puts it when told to, or when there
is only one executor."""

from __future__ import annotations

from raftsched.model import OnceTrigger, TaskSpec
from raftsched.testing import SimHarness
from raftsched.v1 import log_pb2 as pb

FAILING = {"flaky"}
DELAYS = (1_000, 2_500)


def _run(executors: tuple[str, ...], *, elsewhere: bool = True) -> tuple[list[tuple[int, str]], pb.Run]:
    """Run one fire of a task that fails everywhere, with 3 retries: (attempt, executor) of every
    execution, in attempt order, and the finished run."""
    sim = SimHarness(["n1", "n2", "n3"], seed=5)
    try:
        sim.elect("n1")
        for name in executors:
            sim.add_executor(name, 2, 200, failing=FAILING)
        at = sim.now("n1") + 1_000
        spec = TaskSpec(
            "flaky",
            OnceTrigger(at),
            command="flaky",
            max_retries=3,
            retry_delays_ms=DELAYS,
            retry_elsewhere=elsewhere,
        )
        sim.add_task(spec)
        sim.run_for(15_000)
        ran = sorted(
            (int(exec_id.rsplit("/", 1)[1]), name)
            for name, proc in sim.executors.items()
            for exec_id, _ in proc.executions
        )
        (run,) = sim.runs("flaky")
        digests = set(sim.digests().values())
        assert len(digests) == 1, "replicas disagree"
        return ran, run
    finally:
        sim.close()


def _waits(run: pb.Run) -> list[int]:
    """How long each scheduled retry waited after the failure that caused it."""
    failed = {e.attempt: e.at_ms for e in run.timeline if e.event == "failed"}
    # A retry_scheduled entry names the attempt it schedules: the failed one is the one before.
    return [e.retry_at_ms - failed[e.attempt - 1] for e in run.timeline if e.event == "retry_scheduled"]


def test_each_retry_goes_to_the_executor_the_previous_attempt_did_not_use() -> None:
    ran, run = _run(("ex-a", "ex-b"))
    assert [attempt for attempt, _ in ran] == [1, 2, 3, 4]  # 1 try + 3 retries, each run once
    executors = [name for _, name in ran]
    # Attempt 2 avoids attempt 1's executor; attempt 3 has tried both and goes where the ring
    # says (the first one); attempt 4 has tried both as well.
    assert executors[1] != executors[0], executors
    assert run.state == pb.FAILED
    # Retry delays: the n-th retry waits the n-th delay, the last one repeats.
    assert _waits(run) == [1_000, 2_500, 2_500]


def test_retry_elsewhere_false_keeps_every_attempt_where_the_ring_puts_it() -> None:
    ran, run = _run(("ex-a", "ex-b"), elsewhere=False)
    assert [attempt for attempt, _ in ran] == [1, 2, 3, 4]
    assert len({name for _, name in ran}) == 1, ran
    assert run.state == pb.FAILED and _waits(run) == [1_000, 2_500, 2_500]


def test_with_one_executor_a_retry_still_runs_there() -> None:
    ran, run = _run(("only",))
    assert ran == [(1, "only"), (2, "only"), (3, "only"), (4, "only")]
    assert run.state == pb.FAILED and _waits(run) == [1_000, 2_500, 2_500]
