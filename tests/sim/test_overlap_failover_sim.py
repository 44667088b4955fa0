"""Overlap decisions across a leader change with results in flight, on a manual clock.

The scenario of the issue: an every-second task (misfire=all, overlap=skip) on two executors;
the leader dies while a run is in progress; the run finishes on its executor, but its result
cannot reach any leader until a new one is elected seconds later. The new leader inherits the run
as RUNNING. Deciding the caught-up fires at once would account them skipped_overlap against a
run that had finished long before; the fires must wait until the executor has reported (or its
lease expired), and then only fires that really overlapped an unfinished run may be skipped.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

import pytest

from raftsched.fsm.workflow_model import trigger_name
from raftsched.model import CronTrigger, Misfire, Overlap, TaskSpec
from raftsched.testing import SimHarness
from raftsched.v1 import log_pb2 as pb
from raftsched.v1 import raftsched_pb2 as rpb

DURATION_MS = 300


def _cluster(overlap: Overlap = Overlap.SKIP) -> SimHarness:
    sim = SimHarness(["n1", "n2", "n3"], seed=0)
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=DURATION_MS)
    sim.add_executor("ex2", slots=4, duration_ms=DURATION_MS)
    sim.add_task(
        TaskSpec("t", CronTrigger("* * * * * *"), command="echo", misfire=Misfire.ALL, overlap=overlap)
    )
    return sim


def _failover(sim: SimHarness) -> None:
    sim.run_for(3_000)
    # Mid-run: the fire at a whole second started and runs for 300 ms.
    while sim.clock.now_ms() % 1000 != 100:
        sim.run_for(50)
    sim.crash("n1")
    sim.run_for(6_000)  # the run finishes on its executor; its result has nowhere to go
    sim.elect("n2")
    sim.run_for(6_000)


def _finished_at(sim: SimHarness) -> dict[str, int]:
    """When each executed run's command ended (the simulated command takes DURATION_MS)."""
    finished_at: dict[str, int] = {}
    for ex in sim.executors.values():
        for exec_id, started in ex.executions:
            run_id = exec_id.split("/")[0]
            finished_at[run_id] = max(finished_at.get(run_id, 0), started + DURATION_MS)
    return finished_at


def _overlap_decision(rec: pb.FireRecord) -> bool:
    """Whether the fire was decided by the overlap policy: skipped (skip, or buffer_one with a
    run already waiting), buffered (buffer_one) or replacing (replace) an unfinished run."""
    return rec.outcome == pb.SKIPPED_OVERLAP or (
        rec.outcome == pb.FIRED and rec.reason.startswith(("buffered behind", "replaced the unfinished"))
    )


def false_overlaps(sim: SimHarness) -> list[str]:
    """Overlap decisions taken when no run of the task was unfinished in reality.

    A run that ended within one simulation step before the decision counts as unfinished: its
    result goes out in that step's executor round, after the driver decided. That is the
    ordinary race of any overlap decision (a buffered catch-up run ending on the next whole
    second), not the stale state of a takeover, which is seconds old."""
    finished_at = {run_id: at + sim.step_ms for run_id, at in _finished_at(sim).items()}
    runs = sim.runs("t")
    bad = []
    for rec in sim.fires("t"):
        if not _overlap_decision(rec):
            continue
        decided = rec.decided_ms
        real = [
            r.run_id
            for r in runs
            if r.created_ms <= decided
            and r.run_id != rec.run_id
            and (r.run_id not in finished_at or finished_at[r.run_id] > decided)
        ]
        if not real:
            bad.append(f"fire {rec.nominal_ms} decided at {decided}: {rec.reason}")
    return bad


def test_a_new_leader_skips_only_fires_that_really_overlapped() -> None:
    sim = _cluster()
    _failover(sim)
    fires = sim.fires("t")
    try:
        assert fires and all(f.outcome in (pb.FIRED, pb.SKIPPED_OVERLAP) for f in fires), fires
        assert not false_overlaps(sim)
        caught_up = [f for f in fires if f.epoch == max(f.epoch for f in fires) and f.outcome == pb.FIRED]
        assert caught_up, "the new leader fired nothing"
        assert len(set(sim.digests().values())) == 1
    finally:
        sim.close()


def test_without_the_hold_the_inherited_run_turns_catch_up_fires_into_false_overlaps() -> None:
    """The reproduction itself: a new leader that decides at once (no hold) gets it wrong."""
    sim = _cluster()
    for node in sim.nodes.values():
        node.driver.hold_fires = None
    _failover(sim)
    try:
        assert false_overlaps(sim)
    finally:
        sim.close()


def _mid_run(sim: SimHarness) -> None:
    """Advance to 100 ms into the run of the current second (it started at the whole second)."""
    while sim.clock.now_ms() % 1000 != 100:
        sim.run_for(50)


def _stop_then_kill(sim: SimHarness, refuse_reports: int = 0) -> None:
    """The integration test's sequence: leader A (n1) SIGSTOPped mid-run; B (n2) elected, fires
    for a few seconds; B SIGKILLed mid-run while A resumes as a follower; C (n3) elected. The
    runs in flight at each change finish on their executors with nowhere to report. With
    ``refuse_reports``, the first reports to C fail (a commit that timed out): the executor's
    first heartbeat reaches C well before its result commits."""
    sim.run_for(3_000)
    _mid_run(sim)
    sim.pause("n1")
    sim.run_for(2_000)  # the election timeout: nobody leads
    sim.elect("n2")
    sim.run_for(3_000)
    _mid_run(sim)
    sim.crash("n2")
    sim.resume("n1")
    sim.run_for(1_500)
    sim.endpoint.refuse_reports = refuse_reports
    sim.elect("n3")
    sim.run_for(6_000)


def _check(sim: SimHarness) -> None:
    fires = sim.fires("t")
    assert not false_overlaps(sim), false_overlaps(sim)
    # Every nominal fire accounted exactly once, each fired run executed exactly once...
    covered = sorted(n for f in fires for n in range(f.nominal_ms, max(f.nominal_ms, f.through_ms) + 1, 1000))
    assert len(covered) == len(set(covered)) and all(b - a == 1000 for a, b in itertools.pairwise(covered))
    started = [e.split("/")[0] for ex in sim.executors.values() for e, _ in ex.executions]
    assert len(started) == len(set(started)), "a run executed twice"
    # ...and none that had run to its end was cancelled (replace) or ended otherwise. (replace with
    # misfire=all cancels catch-up runs that had not started: the next catch-up fire replaces them;
    # one step of slack as in false_overlaps.)
    finished_at = _finished_at(sim)
    for r in sim.runs("t"):
        if r.run_id in finished_at and finished_at[r.run_id] + sim.step_ms <= r.finished_ms:
            assert r.state == pb.SUCCEEDED, (r.run_id, r.state, r.shards[0].error)
    leaders = {f.epoch for f in fires if f.outcome == pb.FIRED}
    assert len(leaders) == 3, f"fires of every leader: {sorted(leaders)}"
    assert len(set(sim.digests().values())) == 1


@pytest.mark.parametrize("overlap", [Overlap.SKIP, Overlap.BUFFER_ONE, Overlap.REPLACE])
def test_stop_of_the_leader_then_kill_of_the_next_takes_no_false_overlap_decision(overlap: Overlap) -> None:
    """skip, buffer_one and replace decide on the same "unfinished run" test: a false decision
    would skip a fire, buffer it behind a finished run, or cancel a run that had succeeded."""
    sim = _cluster(overlap)
    try:
        _stop_then_kill(sim)
        _check(sim)
    finally:
        sim.close()


@pytest.mark.parametrize("overlap", [Overlap.SKIP, Overlap.BUFFER_ONE, Overlap.REPLACE])
def test_a_result_that_commits_after_the_first_heartbeat_still_holds_the_fires(overlap: Overlap) -> None:
    """The executor lists its finished, unacknowledged attempt in its heartbeats (to keep the
    lease). Taken as "still runs", that first heartbeat released the hold, and the caught-up
    fires were decided before the result committed."""
    sim = _cluster(overlap)
    try:
        _stop_then_kill(sim, refuse_reports=2)
        _check(sim)
    finally:
        sim.close()


def test_without_the_finished_list_a_delayed_result_gives_a_false_overlap() -> None:
    """The reproduction of that gap: an executor whose heartbeats do not tell finished attempts
    apart (as before ``HeartbeatRequest.finished``) lets the decision through too early."""
    sim = _cluster()
    for node in sim.nodes.values():
        real = node.dispatcher.heartbeat

        def heartbeat(
            executor: str,
            running: Iterable[str],
            now_ms: int,
            started: Iterable[str] | None = None,
            finished: Iterable[str] = (),
            partial: bool = False,
            real: Callable[..., bool] = real,
        ) -> bool:
            return real(executor, running, now_ms, started, partial=partial)

        node.dispatcher.heartbeat = heartbeat  # type: ignore[method-assign]
    try:
        _stop_then_kill(sim, refuse_reports=2)
        assert false_overlaps(sim)
    finally:
        sim.close()


def _workflow_cluster() -> SimHarness:
    """The same scenario for a scheduled workflow (overlap=skip, misfire=all) of one task: its
    next fire is skipped while a run of it is unfinished, and a run finishes when its task's
    result is applied - the result a new leader may not have yet."""
    sim = SimHarness(["n1", "n2", "n3"], seed=0)
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=DURATION_MS)
    sim.add_executor("ex2", slots=4, duration_ms=DURATION_MS)
    spec = rpb.WorkflowSpec(
        name="wf",
        schedule=rpb.CronTrigger(expr="* * * * * *"),
        overlap=rpb.OVERLAP_SKIP,
        misfire=rpb.MISFIRE_ALL,
    )
    spec.tasks.add(name="only", command="echo")
    assert sim.write("apply_workflow", spec).ok
    return sim


def false_workflow_overlaps(sim: SimHarness) -> list[str]:
    """Skipped fires of workflow ``wf`` decided when none of its runs was unfinished in reality
    (a run is unfinished from its creation until its task's command ended, one step of slack as
    in :func:`false_overlaps`)."""
    finished_at = {run_id: at + sim.step_ms for run_id, at in _finished_at(sim).items()}
    runs = sim.workflow_runs("wf")

    def ended(wr: rpb.WorkflowRun) -> int | None:
        task_run = wr.tasks[0].run_id if wr.tasks else ""
        return finished_at.get(task_run)

    bad = []
    for rec in sim.fires(trigger_name("wf")):
        if rec.outcome != pb.SKIPPED_OVERLAP:
            continue
        decided = rec.decided_ms
        real = [
            wr.run_id
            for wr in runs
            if wr.created_ms <= decided and ((end := ended(wr)) is None or end > decided)
        ]
        if not real:
            bad.append(f"fire {rec.nominal_ms} decided at {decided}: {rec.reason}")
    return bad


def test_a_new_leader_skips_a_workflow_fire_only_when_a_run_of_it_really_was_unfinished() -> None:
    """A workflow task's attempt RUNNING at the takeover holds its workflow's trigger too."""
    sim = _workflow_cluster()
    try:
        _failover(sim)
        fires = sim.fires(trigger_name("wf"))
        assert not false_workflow_overlaps(sim), false_workflow_overlaps(sim)
        caught_up = [f for f in fires if f.epoch == max(f.epoch for f in fires) and f.outcome == pb.FIRED]
        assert caught_up, "the new leader fired nothing"
        assert len(set(sim.digests().values())) == 1
    finally:
        sim.close()


def test_without_the_hold_a_workflow_fire_is_skipped_against_a_finished_run() -> None:
    """The reproduction: before the trigger was held, the caught-up fires of the workflow were
    all skipped against the run whose task had finished seconds before the takeover."""
    sim = _workflow_cluster()
    for node in sim.nodes.values():
        node.driver.hold_fires = None
    try:
        _failover(sim)
        assert false_workflow_overlaps(sim)
    finally:
        sim.close()


# -- committed, never delivered (issue 35 §1) ------------------------------------------------------

INSTANT_MS = 10  # the command ends in milliseconds (echo >> file)


def _stall_cluster(duration_ms: int) -> SimHarness:
    sim = SimHarness(["n1", "n2", "n3"], seed=0)
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=duration_ms)
    sim.add_executor("ex2", slots=4, duration_ms=duration_ms)
    sim.add_task(
        TaskSpec(
            "t",
            CronTrigger("* * * * * *"),
            command="echo",
            shards=2,
            misfire=Misfire.ALL,
            overlap=Overlap.SKIP,
        )
    )
    return sim


def _stall_after_commit(sim: SimHarness, node: str, assigned: bool) -> int:
    """At the next whole second, ``node`` (the leader) fires and commits the run (and, with
    ``assigned``, its assignments) and stops (SIGSTOP) before the dispatch reaches the executors.
    Returns that second."""
    while sim.clock.now_ms() % 1000 != 900:
        sim.run_for(50)
    if assigned:
        sim.endpoint.undelivered.add(node)
    else:
        sim.pause_after_fires(node)
    sim.run_for(100)
    second = sim.clock.now_ms()
    run = next(r for r in sim.runs("t", node) if r.nominal_ms == second)
    if assigned:
        assert all(s.state == pb.RUNNING and s.executor for s in run.shards), run
        sim.pause(node)
        sim.endpoint.undelivered.discard(node)
    else:
        assert all(not s.executor for s in run.shards), run
    return second


def stale_skips(sim: SimHarness, duration_ms: int) -> list[str]:
    """``skipped_overlap`` decisions with no earlier run in progress in reality at the decision:
    none had started (committed, never delivered) or all had ended a step before. A run fired in
    the same batch counts (misfire=all catching up several fires runs the first, skips the rest)."""
    started: dict[str, int] = {}
    for ex in sim.executors.values():
        for exec_id, at in ex.executions:
            run_id = exec_id.split("/")[0]
            started[run_id] = min(started.get(run_id, at), at)
    runs = sim.runs("t")
    bad = []
    for rec in sim.fires("t"):
        if rec.outcome != pb.SKIPPED_OVERLAP:
            continue
        decided = rec.decided_ms
        real = [
            r.run_id
            for r in runs
            if r.nominal_ms < rec.nominal_ms
            and (
                (
                    r.run_id in started
                    and started[r.run_id] <= decided < started[r.run_id] + duration_ms + sim.step_ms
                )
                or (r.created_ms == decided and r.epoch == rec.epoch)
            )
        ]
        if not real:
            bad.append(f"fire {rec.nominal_ms} decided at {decided} (epoch {rec.epoch}): {rec.reason}")
    return bad


def _first_start(sim: SimHarness, nominal: int) -> int:
    run = next(r for r in sim.runs("t") if r.nominal_ms == nominal)
    starts = [at for ex in sim.executors.values() for e, at in ex.executions if e.split("/")[0] == run.run_id]
    assert len(starts) == 2, f"run of {nominal} started {len(starts)} shard(s)"
    return max(starts)


@pytest.mark.parametrize("assigned", [True, False], ids=["assigned", "unassigned"])
@pytest.mark.parametrize("duration_ms", [INSTANT_MS, 500], ids=["instant", "half-second"])
def test_a_run_committed_and_never_delivered_is_sent_again_at_once_and_skips_nothing(
    duration_ms: int, assigned: bool
) -> None:
    """The leader commits the run of S and its assignments and stops before the dispatch goes
    out (``assigned``), or before it even assigned them; the next leader is elected a second
    later. The executors' first heartbeats to it do not list the run's attempts: they are sent
    again at once (not after a lease), or placed; and the on-time fires meanwhile wait for them
    instead of being skipped against a run that never started. Then the same again with the
    second leader."""
    sim = _stall_cluster(duration_ms)
    try:
        sim.run_for(3_000)
        first = _stall_after_commit(sim, "n1", assigned)
        sim.run_for(1_000)  # the election timeout: nobody leads
        sim.elect("n2")
        sim.run_for(3_000)
        sim.resume("n1")
        sim.run_for(2_000)
        second = _stall_after_commit(sim, "n2", assigned)
        sim.run_for(1_000)
        sim.elect("n3")
        sim.run_for(5_000)
        sim.resume("n2")
        sim.run_for(1_000)
        assert not stale_skips(sim, duration_ms), stale_skips(sim, duration_ms)
        # The run of S starts as soon as its executors reach the new leader, within 1.5 s of
        # the stop (the election alone took 1 s here).
        for stalled in (first, second):
            assert _first_start(sim, stalled) - stalled <= 1_500, (stalled, _first_start(sim, stalled))
        fires = sim.fires("t")
        covered = sorted(
            n for f in fires for n in range(f.nominal_ms, max(f.nominal_ms, f.through_ms) + 1, 1000)
        )
        assert len(covered) == len(set(covered)) and all(
            b - a == 1000 for a, b in itertools.pairwise(covered)
        )
        shards = [tuple(e.split("/")[:2]) for ex in sim.executors.values() for e, _ in ex.executions]
        assert len(shards) == len(set(shards)), "a shard ran twice"
        assert len(set(sim.digests().values())) == 1
    finally:
        sim.close()
