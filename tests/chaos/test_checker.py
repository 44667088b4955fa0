"""The chaos checker's analysis on synthetic histories: every kind of violation is caught, and
what the faults excuse is excused (and nothing more)."""

from __future__ import annotations

from raftsched.testing.chaos.checker import (
    ChaosReport,
    ClockStepWindow,
    Execution,
    ExecutorFault,
    SkewWindow,
    TaskExpectation,
    TaskObservation,
    analyse,
    parse_marker_line,
)
from raftsched.testing.chaos.harness import TaskPlan
from raftsched.v1 import raftsched_pb2 as pb

T0 = 1_800_000_000_000
S = 1000
NS = 1_000_000


def record(task: str, n: int, shards: int = 1) -> pb.TaskRecord:
    rec = pb.TaskRecord(created_ms=T0 - 500, watermark_ms=T0 + (n - 1) * S, fires_total=n, kept_fires=n)
    rec.spec.name = task
    rec.spec.shards = shards
    return rec


def fired(task: str, i: int, epoch: int = 2) -> pb.FireRecord:
    t = T0 + i * S
    return pb.FireRecord(
        task=task,
        nominal_ms=t,
        outcome=pb.FIRED,
        decided_ms=t + 5,
        epoch=epoch,
        run_id=f"{task}@{t}",
        count=1,
    )


def run(task: str, i: int, shards: int = 1, epoch: int = 2) -> pb.Run:
    t = T0 + i * S
    r = pb.Run(run_id=f"{task}@{t}", task=task, nominal_ms=t, state=pb.SUCCEEDED, epoch=epoch)
    for k in range(shards):
        r.shards.add(shard=k, attempt=1, state=pb.SUCCEEDED)
    return r


def ex(
    task: str, i: int, shard: int = 0, attempt: int = 1, late_ms: int = 20, executor: str = "ex1"
) -> Execution:
    t = T0 + i * S
    return Execution(f"{task}@{t}/{shard}/{attempt}", task, t, shard, attempt, (t + late_ms) * NS, executor)


def history(n: int = 5, task: str = "tick") -> tuple[TaskObservation, list[Execution]]:
    obs = TaskObservation(
        record(task, n), tuple(fired(task, i) for i in range(n)), tuple(run(task, i) for i in range(n))
    )
    return obs, [ex(task, i) for i in range(n)]


def check(obs: TaskObservation, executions: list[Execution], **kwargs: object) -> ChaosReport:
    return analyse([obs], executions, [TaskExpectation(obs.name, 1)], **kwargs)  # type: ignore[arg-type]


def test_a_clean_history_has_no_violations_and_counts_everything() -> None:
    obs, executions = history()
    report = check(obs, executions)
    assert report.violations == [] and report.skew_findings == []
    assert (report.fired, report.executed, report.lost, report.duplicates, report.early) == (5, 5, 0, 0, 0)
    assert report.max_delay_ms == 20


def test_a_marker_line_round_trips() -> None:
    line = f"tick@{T0}/2/1 tick 2027-01-15T08:00:00Z 2 1 {T0 * NS + 7} ex2"
    parsed = parse_marker_line(line)
    assert (parsed.run_id, parsed.shard, parsed.attempt, parsed.executor) == (f"tick@{T0}", 2, 1, "ex2")
    assert (parsed.nominal_ms, parsed.start_ns, parsed.lateness_ms) == (T0, T0 * NS + 7, 0)
    assert parse_marker_line(line.replace("08:00:00Z", "08:00:00.250Z")).nominal_ms == T0 + 250


def test_an_unaccounted_second_and_an_unexecuted_run_are_lost() -> None:
    obs, executions = history()
    fires = [f for f in obs.fires if f.nominal_ms != T0 + 2 * S]
    gap = TaskObservation(obs.record, tuple(fires), tuple(r for r in obs.runs if r.nominal_ms != T0 + 2 * S))
    report = check(gap, [e for e in executions if e.nominal_ms != T0 + 2 * S])
    assert report.lost == 1 and len(report.of("lost")) == 1, report.violations

    report = check(obs, executions[:-1])
    assert report.lost == 1 and "never executed" in report.of("lost")[0]


def test_one_attempt_executed_twice_is_a_duplicate() -> None:
    obs, executions = history()
    report = check(obs, [*executions, ex("tick", 3, late_ms=900, executor="ex2")])
    assert report.duplicates == 1 and "attempt 1 executed 2 times" in report.of("duplicate")[0]


def test_a_second_attempt_after_a_healthy_first_is_a_duplicate_unless_an_executor_fault_explains_it() -> None:
    obs, executions = history()
    runs = list(obs.runs)
    runs[3] = run("tick", 3)
    runs[3].shards[0].attempt = 2
    runs[3].shards[0].lost = 1
    obs = TaskObservation(obs.record, obs.fires, tuple(runs))
    executions = [*executions, ex("tick", 3, attempt=2, late_ms=2500)]
    report = check(obs, executions)
    assert report.duplicates == 1 and report.of("duplicate"), report.violations

    killed = ExecutorFault("ex1", kill_ms=T0 + 3 * S + 500, back_ms=T0 + 4 * S)
    report = check(obs, executions, executor_faults=[killed])
    assert report.violations == [] and report.reexecuted_after_executor_fault == 1

    other = ExecutorFault("ex2", kill_ms=T0 + 3 * S + 500, back_ms=T0 + 4 * S)
    assert check(obs, executions, executor_faults=[other]).duplicates == 1


def test_a_designed_failure_excuses_the_retry() -> None:
    plan = TaskPlan("tick", max_retries=2, fail_digits=frozenset({(T0 // S + 3) % 10}))
    obs, executions = history()
    runs = list(obs.runs)
    runs[3] = run("tick", 3)
    runs[3].shards[0].attempt = 2
    obs = TaskObservation(obs.record, obs.fires, tuple(runs))
    report = analyse([obs], [*executions, ex("tick", 3, attempt=2, late_ms=400)], [plan.expectation()])
    assert report.violations == [] and report.reexecuted_by_design == 1


def test_a_shard_lost_with_a_killed_executor_is_failed_by_policy_only_inside_the_fault_window() -> None:
    obs, executions = history()
    runs = list(obs.runs)
    runs[2] = run("tick", 2)
    runs[2].state = pb.FAILED
    shard = runs[2].shards[0]
    shard.state, shard.lost, shard.finished_ms = pb.FAILED, 1, T0 + 4 * S
    shard.error = "executor ex1 died: no heartbeat for 2100 ms"
    obs = TaskObservation(obs.record, obs.fires, tuple(runs))
    executions = [e for e in executions if e.nominal_ms != T0 + 2 * S]
    in_window = ExecutorFault("ex1", kill_ms=T0 + 2 * S + 100, back_ms=T0 + 3 * S)
    report = check(obs, executions, executor_faults=[in_window])
    assert report.violations == [] and report.failed_after_executor_fault == 1

    long_before = ExecutorFault("ex1", kill_ms=T0 - 10 * S, back_ms=T0 - 9 * S)
    report = check(obs, executions, executor_faults=[long_before])
    assert report.lost == 1 and report.of("lost"), report.violations


def test_a_shard_whose_last_attempt_ran_and_was_declared_lost_without_a_fault_is_a_lost_fire() -> None:
    obs, executions = history()
    runs = list(obs.runs)
    runs[2] = run("tick", 2)
    runs[2].state = pb.FAILED
    shard = runs[2].shards[0]
    shard.state, shard.lost, shard.finished_ms = pb.FAILED, 1, T0 + 5 * S
    shard.error = "lease expired: executor ex1 silent for 2000 ms"
    obs = TaskObservation(obs.record, obs.fires, tuple(runs))
    report = check(obs, executions)
    assert report.lost == 1 and "declared lost" in report.of("lost")[0], report.violations

    killed = ExecutorFault("ex1", kill_ms=T0 + 2 * S + 500, back_ms=T0 + 3 * S)
    report = check(obs, executions, executor_faults=[killed])
    assert report.violations == [] and report.failed_by_policy == 1


def test_an_attempt_interrupted_before_its_command_ran_is_failed_by_policy_only_after_a_kill() -> None:
    """Soak at HEAD: ex2 was SIGKILLed after logging an attempt as begun but before its command
    wrote a line; restarted, it reported the attempt interrupted and the no-retry shard FAILED."""
    obs, executions = history()
    runs = list(obs.runs)
    runs[2] = run("tick", 2)
    runs[2].state = pb.FAILED
    shard = runs[2].shards[0]
    shard.state, shard.finished_ms, shard.executor = pb.FAILED, T0 + 4 * S, "ex2"
    shard.error = "executor restarted while the attempt ran"
    obs = TaskObservation(obs.record, obs.fires, tuple(runs))
    executions = [e for e in executions if e.nominal_ms != T0 + 2 * S]
    killed = ExecutorFault("ex2", kill_ms=T0 + 2 * S + 100, back_ms=T0 + 3 * S)
    report = check(obs, executions, executor_faults=[killed])
    assert report.violations == [] and report.failed_after_executor_fault == 1

    other = ExecutorFault("ex1", kill_ms=T0 + 2 * S + 100, back_ms=T0 + 3 * S)
    report = check(obs, executions, executor_faults=[other])
    assert report.lost == 1 and report.of("lost"), report.violations


def test_early_starts_are_violations_unless_a_skewed_leader_fired_them() -> None:
    obs, executions = history()
    runs = list(obs.runs)
    runs[1] = run("tick", 1, epoch=7)
    obs = TaskObservation(obs.record, obs.fires, tuple(runs))
    executions[1] = ex("tick", 1, late_ms=-1500)
    report = check(obs, executions)
    assert report.early == 1 and report.of("early") and report.max_early_ms == 1500

    skew = SkewWindow("n1", 2000, T0, T0 + 3 * S, frozenset({7}))
    report = check(obs, executions, skews=[skew])
    assert report.violations == [] and report.early_during_skew == 1
    assert "skewed +2000 ms" in report.skew_findings[0]


def test_accounting_gaps_overlaps_and_early_decisions_are_reported() -> None:
    obs, executions = history()
    fires = list(obs.fires)
    fires[1] = pb.FireRecord(
        task="tick", nominal_ms=T0 + S, through_ms=T0 + 2 * S, count=2, outcome=pb.COALESCED, decided_ms=T0
    )
    report = check(TaskObservation(obs.record, tuple(fires), obs.runs), executions)
    problems = "\n".join(report.violations)
    assert "accounted more than once" in problems  # T0+2s is in the range and has its own record
    assert "coalesced without a misfire reason" in problems
    assert "decided before its nominal time" in problems


def test_a_clock_step_without_on_time_executions_soon_after_is_a_violation() -> None:
    obs, executions = history(8)
    step = ClockStepWindow("n1", 600_000, T0 + 2 * S - 300)
    assert check(obs, executions, clock_steps=[step]).violations == []  # T0+2s started 20 ms late
    late = [ex("tick", i, late_ms=5_000 if i >= 2 else 20) for i in range(8)]  # nothing on time
    report = check(obs, late, clock_steps=[step])
    assert report.of("clock-step") and "stepped +600000 ms" in report.of("clock-step")[0]
    assert "none" in report.of("clock-step")[0]
    soon = ClockStepWindow("n1", 600_000, T0 + 2 * S - 300, on_time_ms=200)
    assert "the first 300 ms after" in check(obs, executions, clock_steps=[soon]).of("clock-step")[0]


def _overlap_history(
    skip_decided_ms: int,
    starts: list[int],
    finished_ms: int,
    created_ms: int = T0 + 5,
    epoch: int = 2,
    skip_epoch: int = 0,
) -> tuple[TaskObservation, list[Execution]]:
    """An instant overlap=skip task: the run of T0 (created at ``created_ms`` in ``epoch``,
    finished in the log at ``finished_ms``; its one shard started at ``starts`` ms after T0), and
    the fire of T0+1s skipped as overlapping it, decided at ``skip_decided_ms``."""
    rec = record("ov", 2)
    rec.spec.overlap = pb.OVERLAP_SKIP
    first = fired("ov", 0, epoch)
    first.decided_ms = created_ms
    r = run("ov", 0, epoch=epoch)
    r.created_ms, r.finished_ms = created_ms, finished_ms
    skipped = pb.FireRecord(
        task="ov",
        nominal_ms=T0 + S,
        outcome=pb.SKIPPED_OVERLAP,
        decided_ms=skip_decided_ms,
        epoch=skip_epoch or epoch,
        count=1,
        reason="an earlier run was still unfinished (overlap=skip)",
    )
    obs = TaskObservation(rec, (first, skipped), (r,))
    return obs, [ex("ov", 0, late_ms=at) for at in starts]


def _check_overlap(obs: TaskObservation, executions: list[Execution]) -> ChaosReport:
    return analyse([obs], executions, [TaskPlan("ov").expectation()])


def test_a_skip_against_a_run_that_had_not_started_or_had_long_ended_is_a_false_skip() -> None:
    # Committed by the leader of epoch 2, never delivered: the run of T0 started 5.6 s late; the
    # next leader skipped the fire of T0+1s against it at T0+1s.
    obs, executions = _overlap_history(T0 + S + 20, [5600], T0 + 5700, skip_epoch=3)
    report = _check_overlap(obs, executions)
    assert report.of("false skip") and report.false_skips == 1, report.violations
    assert report.skipped_overlap == 1
    # The report says what it was judged against: the earlier run, its epoch and executions.
    (said,) = report.of("false skip")
    assert "earlier runs: ov@" in said and "epoch 2 created" in said and "executions [0#1@" in said, said
    # Its result lost with the leader of epoch 2: the run ended at T0+20 ms, before the next
    # leader's first decision; committed finished at T0+6 s.
    obs, executions = _overlap_history(T0 + S + 20, [20], T0 + 6000, skip_epoch=3)
    assert _check_overlap(obs, executions).of("false skip")
    # The same under one leader: its result was on the wire (the race any decision has).
    obs, executions = _overlap_history(T0 + S + 20, [20], T0 + 6000)
    assert _check_overlap(obs, executions).violations == []


def test_a_skip_against_a_run_in_progress_or_fired_in_the_same_batch_is_real() -> None:
    # Started 900 ms late (the machine is loaded), the skip decided 100 ms after its start.
    obs, executions = _overlap_history(T0 + S + 5, [900], T0 + S + 60)
    report = _check_overlap(obs, executions)
    assert report.violations == [] and report.skipped_overlap == 1
    # The same leader's run, dispatched and not started yet (1.4 s late at startup).
    obs, executions = _overlap_history(T0 + S + 13, [1364], T0 + 1400)
    assert _check_overlap(obs, executions).violations == []
    # misfire=all catching up: the run of T0 was fired in the same batch, at T0+3 s.
    obs, executions = _overlap_history(T0 + 3 * S, [3100], T0 + 3200, created_ms=T0 + 3 * S)
    assert _check_overlap(obs, executions).violations == []
    # An executor fault around the decision: not judged.
    obs, executions = _overlap_history(T0 + S + 20, [5600], T0 + 5700, skip_epoch=3)
    fault = ExecutorFault("ex1", T0 + S, T0 + 3 * S)
    assert (
        analyse([obs], executions, [TaskPlan("ov").expectation()], executor_faults=[fault]).violations == []
    )


def test_a_skip_decided_by_a_leader_with_a_skewed_clock_is_not_judged() -> None:
    """Its decision time runs ahead of the executors' clocks by the skew: against them, the run
    it skipped against had not started yet (seen in the CI chaos run's +2 s skew phase)."""
    obs, executions = _overlap_history(T0 + S + 20, [5600], T0 + 5700, skip_epoch=3)
    skew = SkewWindow("n1", 2000, T0, T0 + 10 * S, frozenset({3}))
    assert analyse([obs], executions, [TaskPlan("ov").expectation()], skews=[skew]).violations == []
