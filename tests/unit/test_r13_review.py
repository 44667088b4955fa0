"""Interactions between the r13 branches found in review (merge of r13-pools with r13-sla, ...)."""

from __future__ import annotations

from typing import Any

from raftsched import codec
from raftsched.alerts.config import AlertsConfig
from raftsched.alerts.delivery import detect_sla
from raftsched.alerts.monitor import AlertMonitor
from raftsched.fsm import alerts as outbox
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import T0, S, apply, batch, create, entry, fire, fresh, join, record, result, runs_of

MIN = 60 * S
DAY = 24 * 60 * MIN
STAMP: dict[str, Any] = {"epoch": 1, "origin": "n1", "key": ""}


def _events(state: SchedulerState, kind: str) -> list[pb.AlertRecord]:
    with state.store.reader() as r:
        return [a for a in outbox.list_alerts(r, 0, 0) if a.kind == kind]


def _sla_task_with_history() -> SchedulerState:
    """An hourly task with a start and finish SLA and a freshness, whose scheduler has accounted
    through T0; its T0 run succeeded on time."""
    state = fresh()
    spec = TaskSpec(
        "t",
        CronTrigger("0 * * * *"),
        command="x",
        overlap=Overlap.ALLOW,
        sla_start_within_ms=5 * MIN,
        sla_finish_within_ms=30 * MIN,
        freshness_ms=2 * 60 * MIN,
    )
    assert create(state, spec, now=T0 - 2 * DAY).ok
    assert apply(state, join("ex1", 50)).ok
    res = apply(state, batch(T0, entry("t", 1, [fire(T0)], watermark=T0, next_fire=T0 + 60 * MIN)))
    assert res.fired == 1
    return state


def test_a_plain_task_backfill_raises_no_sla_miss_and_does_not_refresh_freshness() -> None:
    """Workflows leave backfill runs out of SLAs and freshness (fsm/workflows.py, alerts/delivery.py
    sla_tasks); plain-task backfill runs (r13-pools) must be left out the same way: their nominal
    times are in the past by construction, so every one 'misses' its SLA, and a backfill success
    says nothing about the freshness of the task's current data."""
    state = _sla_task_with_history()
    now = T0 + S
    data = writes.start_task_backfill(state, "t", T0 - DAY, T0 - 22 * 60 * MIN, "", now_ms=now, **STAMP)
    applied = state.apply(data)
    assert applied.result.ok, applied.result.message
    bid = applied.result.backfill.backfill_id
    backfilled = sorted(r.nominal_ms for r in runs_of(state, "t") if r.backfill_id == bid)
    assert len(backfilled) >= 2
    nominal = backfilled[0]
    run_id = f"t@{nominal}"
    # The leader's monitor, at once: nothing is late that the operator did not schedule.
    found = detect_sla(AlertMonitor(AlertsConfig()), state, now + 10 * S)
    assert [a.dedupe for a in found if a.kind == "sla_missed"] == []
    # A backfill run starts and succeeds (a day after its nominal time, as every backfill does).
    cmd = pb.Command(epoch=1, now_ms=now + S, origin="n1")
    cmd.assign_attempts.assignments.add(run_id=run_id, shard=0, attempt=1, executor="ex1")
    assert apply(state, codec.encode_command(cmd)).accounted == 1
    assert apply(state, result(now + 2 * S, run_id, 1, "ex1", True, start_lateness_ms=now + S - nominal)).ok
    assert state.get_backfill(bid) is not None
    assert _events(state, "sla_missed") == []
    # The freshness clock is the task's own (scheduled or manual) success, not a backfill's.
    assert record(state, "t").last_success_run != run_id


def test_cancelling_a_backfill_run_does_not_release_the_run_buffered_behind_a_regular_one() -> None:
    """overlap=buffer_one: a backfill run does not count for overlap (settle releases the held run
    only for a regular run's end, fsm/runs.py), so cancelling one (r13-cancel's _after_cancel)
    must not start the buffered run either while the regular run still runs."""
    state = fresh()
    spec = TaskSpec("t", CronTrigger("* * * * *"), command="x", overlap=Overlap.BUFFER_ONE)
    assert create(state, spec, now=T0 - 30 * MIN).ok
    assert apply(state, join("ex1", 10)).ok
    regular = f"t@{T0 - 2 * MIN}"
    res = apply(state, batch(T0, entry("t", 1, [fire(T0 - 2 * MIN)], watermark=T0, next_fire=T0 + MIN)))
    assert res.fired == 1
    data = writes.start_task_backfill(state, "t", T0 - 5 * MIN, T0 - 4 * MIN, "", now_ms=T0 + S, **STAMP)
    bid = state.apply(data).result.backfill.backfill_id
    backfill_runs = sorted(r.run_id for r in runs_of(state, "t") if r.backfill_id == bid)
    assert len(backfill_runs) == 2
    # The next fire waits behind the regular run (buffer_one).
    nxt = entry("t", 1, [fire(T0 + MIN)], watermark=T0 + MIN, next_fire=T0 + 2 * MIN)
    res = apply(state, batch(T0 + MIN, nxt))
    held = f"t@{T0 + MIN}"
    assert state.runs.get(held).held  # type: ignore[union-attr]
    assert record(state, "t").held_run == held
    cancel = writes.cancel_run(backfill_runs[0], "not needed", now_ms=T0 + 2 * S + MIN, **STAMP)
    applied = state.apply(cancel)
    assert applied.result.ok, applied.result.message
    assert state.runs.get(regular) is not None  # the regular run still runs ...
    assert state.runs.get(held).held  # type: ignore[union-attr]  # ... so the buffered one still waits
    assert not any(getattr(e, "run_id", "") == held for e in applied.effects)


class _Dispatcher:
    def __init__(self, waiting: dict[tuple[str, int], object]) -> None:
        self.waiting = waiting


def test_a_backfill_attempt_in_the_queue_is_not_waiting_too_long() -> None:
    """A backfill's attempt (a plain task's, r13-pools, or a workflow's) is due at its nominal time,
    days ago, and waits for its share of the slots by design: fleet health (r13-health) must not
    take it for work that waited max_waiting for an executor the moment the backfill starts."""
    from raftsched.alerts.health import FleetView, HealthMonitor, waiting_attempts
    from raftsched.fsm.effects import AttemptReady
    from raftsched.leader.dispatch.placement import Waiting
    from raftsched.leader.queue import start_order

    now = T0
    nominal = T0 - DAY
    ready = AttemptReady(f"t@{nominal}", "t", nominal, 0, 1, 1, 0, 30)  # backfill_share 30 %
    w = Waiting(ready, start_order(5, nominal, ready.run_id, 0), "ex1")
    d = _Dispatcher({(ready.run_id, 0): w})
    fleet = FleetView(now, waiting=waiting_attempts(d, set()), placeable=1)  # type: ignore[arg-type]
    assert [a.kind for a in HealthMonitor().check(fleet)] == []


def test_start_delay_samples_leave_out_backfill_runs_and_retry_backoff() -> None:
    """The start-delay check (r13-sla) measures scheduling delay. A plain task's backfill run
    (r13-pools) starts a day after its nominal time by design, and a retry (r13-retries: delays of
    minutes) after its backoff: neither is delay, and one backfill would page the namespace."""
    state = _sla_task_with_history()
    samples: list[tuple[int, str, int]] = []
    state.on_start = lambda at, ns, late: samples.append((at, ns, late))
    now = T0 + S
    data = writes.start_task_backfill(state, "t", T0 - DAY, T0 - 23 * 60 * MIN, "", now_ms=now, **STAMP)
    bid = state.apply(data).result.backfill.backfill_id
    [back] = [r for r in runs_of(state, "t") if r.backfill_id == bid]
    cmd = pb.Command(epoch=1, now_ms=now + S, origin="n1")
    cmd.assign_attempts.assignments.add(run_id=back.run_id, shard=0, attempt=1, executor="ex1")
    assert apply(state, codec.encode_command(cmd)).accounted == 1
    late = now + S - back.nominal_ms
    assert apply(state, result(now + 2 * S, back.run_id, 1, "ex1", True, start_lateness_ms=late)).ok
    assert samples == []


def test_a_retry_is_sampled_from_the_end_of_its_backoff() -> None:
    state = fresh()
    spec = TaskSpec("r", CronTrigger("* * * * *"), command="x", max_retries=2, retry_delays_ms=(10 * MIN,))
    assert create(state, spec, now=T0 - MIN).ok
    assert apply(state, join("ex1", 10)).ok
    assert apply(state, batch(T0, entry("r", 1, [fire(T0)], watermark=T0, next_fire=T0 + MIN))).fired == 1
    samples: list[int] = []
    state.on_start = lambda at, ns, late: samples.append(late)
    run_id = f"r@{T0}"
    for attempt, at in ((1, T0 + S), (2, T0 + 10 * MIN + 3 * S)):
        cmd = pb.Command(epoch=1, now_ms=at, origin="n1")
        cmd.assign_attempts.assignments.add(run_id=run_id, shard=0, attempt=attempt, executor="ex1")
        assert apply(state, codec.encode_command(cmd)).accounted == 1, attempt
        assert apply(state, result(at + S, run_id, attempt, "ex1", False, start_lateness_ms=at - T0)).ok
    # The retry was due at T0 + 2 s + 10 min (its failure + its delay): it started ~1 s after that.
    assert samples[0] == S and samples[1] < 5 * S, samples


def test_console_editing_keeps_the_fields_the_other_branches_added() -> None:
    """The console edits a definition as its file text (r13-secrets, workflow/export.py), written
    before retries, retention, pools and SLAs (r13-retries, r13-pools, r13-sla) existed: each
    field export leaves out is silently dropped by the next console edit."""
    from raftsched.model import RetryBackoff
    from raftsched.workflow.export import task_file_text, workflow_file_text
    from raftsched.workflow.files import parse_workflow_text
    from raftsched.workflow.taskfiles import parse_task_text

    for backoff, delays in ((None, (60 * S, 2 * MIN)), (RetryBackoff(10 * S, 15 * MIN, 20), ())):
        spec = TaskSpec(
            "t",
            CronTrigger("0 * * * *"),
            command="x",
            max_retries=3,
            retry_delays_ms=delays,
            retry_backoff=backoff,
            retry_elsewhere=False,
            keep_runs=5,
            keep_for_ms=60 * MIN,
            pool="db",
            sla_start_within_ms=5 * MIN,
            sla_finish_within_ms=30 * MIN,
            freshness_ms=2 * 60 * MIN,
        )
        [(back, _)] = parse_task_text(task_file_text(spec), "yaml", "x.yaml").tasks
        assert back == spec
    text = (
        "name: wf\nschedule: '0 * * * *'\nkeep_runs: 4\nkeep_for: 2h\n"
        "sla: {start_within: 5m, finish_within: 1h}\nfreshness: 3h\n"
        "tasks:\n  - name: a\n    command: x\n    retries: 2\n    retry_delays: [1m, 5m]\n"
        "    retry_elsewhere: false\n    pool: db\n"
        "  - name: b\n    command: y\n    retries: 2\n    retry_backoff: {base: 10s, cap: 15m, jitter: 20%}\n"
    )
    wf = parse_workflow_text(text, "yaml", "wf.yaml")
    assert parse_workflow_text(workflow_file_text(wf), "yaml", "wf.yaml") == wf


def test_a_run_cancelled_by_someone_raises_no_finish_sla_miss() -> None:
    """r13-cancel x r13-sla: a cancel is a run_cancelled event (info: someone asked for it), not a
    critical sla_missed for a run that did not succeed in time."""
    state = _sla_task_with_history()
    [run] = [r for r in runs_of(state, "t") if r.nominal_ms == T0]
    cancel = writes.cancel_run(run.run_id, "not today", now_ms=T0 + 40 * MIN, **STAMP)
    assert state.apply(cancel).result.ok
    assert [r.state for r in runs_of(state, "t") if r.run_id == run.run_id] == [pb.CANCELLED]
    assert [e.dedupe for e in _events(state, "sla_missed") if e.run_id == run.run_id] == []
    assert [e.run_id for e in _events(state, "run_cancelled")] == [run.run_id]


def test_an_operators_severity_for_start_delay_wins_over_the_level_the_event_carries() -> None:
    """r13-sla x r13-routing: a start_delay event carries its measured level; [alerts.severity]
    start_delay = "info" must still stop its pages (it was accepted and ignored)."""
    plain = AlertsConfig()
    assert plain.severity("start_delay", "critical") == "critical"
    assert plain.severity("start_delay") == "warning"  # the kind's default, nothing measured
    quiet = AlertsConfig(severities=(("start_delay", "info"),))
    assert quiet.severity("start_delay", "critical") == "info"
    assert quiet.severity("run_failed", "") == "critical"


def test_a_leaders_monitors_forget_their_dedupe_keys_past_a_bound() -> None:
    """Review finding: the monitors remembered every key they proposed for a whole leadership
    (per-run SLA keys, start-delay windows). Past a bound they forget them; apply still dedupes."""
    from raftsched.alerts import health, monitor

    m = AlertMonitor(AlertsConfig())
    m._proposed.update(f"sla/r{i}/start" for i in range(monitor.MAX_REMEMBERED + 1))
    m.due(T0)
    assert not m._proposed
    h = health.HealthMonitor()
    h._proposed.update(f"k{i}" for i in range(health.MAX_REMEMBERED + 1))
    h.check(health.FleetView(T0))
    assert not h._proposed
