"""The Session stream's encodings (issue 31 P2): the leader's work items as rows and cold items
and back (the executor sees the same work item), a report's rows and cold results, and the
dispatcher's seam for them (:meth:`Dispatcher.results_columns`), which proposes what
:meth:`Dispatcher.report` proposes for the same results."""

from __future__ import annotations

import random

import pytest

from raftsched.errors import InvalidSpec
from raftsched.executor.batched import _item
from raftsched.executor.batched import report as session_report
from raftsched.executor.runners import AttemptResult
from raftsched.fsm.state import SchedulerState
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.leader.dispatch.session import encode_work, report_rows
from raftsched.v1 import raftsched_pb2 as pb
from tests.support.fsm import T0, S, tick
from tests.unit.test_dispatcher import SETTINGS, setup, step
from tests.unit.test_fsm_hot import fire_cols, hot_state


def item(task: str, nominal: int, shard: int = 0, attempt: int = 1, **fields: object) -> pb.WorkItem:
    run_id = f"{task}@{nominal}"
    return pb.WorkItem(
        execution_id=f"{run_id}/{shard}/{attempt}",
        run_id=run_id,
        task=task,
        nominal_ms=nominal,
        shard=shard,
        attempt=attempt,
        epoch=3,
        task_version=2,
        shards=4,
        handler="h",
        params_json='{"a": 1}',
        timeout_ms=500,
        **fields,  # type: ignore[arg-type]
    )


def decode(work: pb.SessionWork, defs: dict[int, pb.SessionTaskDef]) -> list[pb.WorkItem]:
    """What the executor makes of a message: cold items as they are, rows rebuilt (in that order)."""
    for d in work.defs:
        defs[d.ref] = d
    out = list(work.cold)
    for ref, nominal, shard, attempt in zip(
        work.task_ref, work.nominal_ms, work.shard, work.attempt, strict=True
    ):
        d = defs[ref]
        run_id = f"{d.task}@{nominal}"
        out.append(_item(d, f"{run_id}/{shard}/{attempt}", run_id, nominal, shard, attempt, work.epoch))
    return out


def test_plain_work_items_go_as_rows_with_their_definition_sent_once_per_stream() -> None:
    stream: dict[tuple[str, int, int, str, str, str, int, str], int] = {}
    first = [item("a", T0 + i * S, shard=i % 4) for i in range(5)] + [item("b", T0)]
    work = encode_work(first, stream, 3)
    assert len(work.task_ref) == 6 and not work.cold
    assert [d.task for d in work.defs] == ["a", "b"]
    defs: dict[int, pb.SessionTaskDef] = {}
    assert decode(work, defs) == first
    again = [item("a", T0 + 9 * S, attempt=2)]
    work2 = encode_work(again, stream, 3)
    assert not work2.defs and list(work2.task_ref) == [1]  # the definition went already
    assert decode(work2, defs) == again
    # A new version (or any field of the definition) is a new definition.
    newer = item("a", T0 + 10 * S)
    newer.task_version = 3
    work3 = encode_work([newer], stream, 3)
    assert [d.version for d in work3.defs] == [3] and decode(work3, defs) == [newer]


def test_anything_a_row_cannot_say_goes_as_a_cold_work_item_unchanged() -> None:
    cancel = pb.WorkItem(
        execution_id=f"a@{T0}/0/1", run_id=f"a@{T0}", epoch=3, cancel=True, cancel_reason="x"
    )
    logs = pb.WorkItem(epoch=3, log_request=pb.LogRequest(request_id="r", execution_id=f"a@{T0}/0/1"))
    workflow = item("a", T0, env={"K": "v"})
    manual = item("a", T0)
    manual.run_id = f"a@{T0}~m1"
    manual.execution_id = f"a@{T0}~m1/0/1"
    other_epoch = item("a", T0 + S)
    other_epoch.epoch = 2
    items = [cancel, logs, workflow, manual, other_epoch]
    work = encode_work(items, {}, 3)
    assert not work.task_ref and not work.defs
    assert list(work.cold) == items


def test_a_reports_rows_are_successes_with_nothing_else_to_say() -> None:
    results = [
        AttemptResult(f"a@{T0}/0/1", True, duration_ms=3),
        AttemptResult(f"a@{T0 + S}/0/1", True, duration_ms=4, stdout_tail="out"),
        AttemptResult(f"a@{T0 + 2 * S}/0/1", False, error="boom"),
        AttemptResult(f"a@{T0 + 3 * S}/0/1", True, duration_ms=5),  # no start lateness known
    ]
    late = {f"a@{T0}/0/1": 7, f"a@{T0 + S}/0/1": 8, f"a@{T0 + 2 * S}/0/1": 9}
    rep = session_report("ex", 4, results, late)
    assert (rep.report_id, list(rep.execution_id)) == (4, [f"a@{T0}/0/1"])
    assert (list(rep.duration_ms), list(rep.start_lateness_ms)) == ([3], [7])
    assert [r.execution_id for r in rep.cold] == [r.execution_id for r in results[1:]]
    assert rep.cold[0].stdout_tail == "out" and rep.cold[0].start_lateness_ms == 8
    assert rep.cold[1].error == "boom" and not rep.cold[2].HasField("start_lateness_ms")
    assert report_rows(rep) == [(f"a@{T0}", 0, 1)]


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda r: r.duration_ms.append(1), "report"),
        (lambda r: r.start_lateness_ms.pop(), "report"),
        (lambda r: r.execution_id.__setitem__(1, "no-slashes"), "report.execution_id[1]"),
        (lambda r: r.execution_id.__setitem__(0, f"a@{T0}/0/99999999999999999999"), "report.execution_id[0]"),
        # a column's values have the ranges of raftsched.bounds (as an ExecResult's do)
        (lambda r: r.start_lateness_ms.__setitem__(1, 10**17), "start_lateness_ms[1]"),
        (lambda r: r.cold.add(execution_id=f"a@{T0}/0/2", duration_ms=-1), "cold[0].duration_ms"),
    ],
)
def test_a_malformed_report_is_refused_whole_naming_what_is_wrong(change: object, where: str) -> None:
    rep = pb.SessionReport(
        report_id=1,
        execution_id=[f"a@{T0}/0/1", f"a@{T0 + S}/0/1"],
        duration_ms=[1, 2],
        start_lateness_ms=[3, 4],
    )
    change(rep)  # type: ignore[operator]
    with pytest.raises(InvalidSpec) as info:
        report_rows(rep)
    assert info.value.field == where


def _one_dispatched(hot: bool) -> tuple[SchedulerState, Dispatcher, str, pb.WorkItem]:
    """A leader's dispatcher with one attempt of task "t" dispatched: a hot task fired as columns
    (every member applies them), or a cold one fired by a FireBatch. Returns the state, the
    dispatcher, the executor and the work item sent to it."""
    if hot:
        state = hot_state("t")
        d = Dispatcher(state, SETTINGS, random.Random(7))
        d.become_leader(1, T0)
        d.columns_allowed = lambda: True
        assert step(
            state, d, fire_cols(T0 + S, [(state.tasks["t"].number, 1, T0 + S, T0 + 2 * S)]), T0 + S
        ).ok
    else:
        state, d = setup(executors=1)
        step(state, d, tick("t", 1, T0 + S), T0 + S)
    for data in d.poll(T0 + S):
        step(state, d, data, T0 + S)
    [(executor, sent)] = d.take_outbox()
    return state, d, executor, sent


@pytest.mark.parametrize("hot", [False, True], ids=["report-results", "result-columns"])
def test_results_columns_proposes_what_report_proposes_for_the_same_results(hot: bool) -> None:
    proposals = []
    for seam in ("report", "columns"):
        state, d, executor, sent = _one_dispatched(hot)
        assert sent.execution_id in d.leases
        ok = pb.ExecResult(execution_id=sent.execution_id, success=True, duration_ms=5, start_lateness_ms=2)
        split = [(sent.run_id, sent.shard, sent.attempt)]
        if seam == "report":
            out = d.report(executor, [ok], T0 + 2 * S, split)
        else:
            out = d.results_columns(executor, split, [sent.execution_id], [5], [2], [], [], T0 + 2 * S)
        assert sent.execution_id not in d.leases  # dropped, as for a reported result
        assert [p.command.WhichOneof("body") for p in out] == ["result_columns" if hot else "report_results"]
        proposals.append([p.command.SerializeToString() for p in out])
        for p in out:
            assert step(state, d, p, T0 + 2 * S).ok
        run = state.read_run(sent.run_id)
        assert run is not None and run.state == pb.SUCCEEDED
    assert proposals[0] == proposals[1]


@pytest.mark.parametrize("hot", [False, True], ids=["report-results", "result-columns"])
def test_a_result_reported_again_after_a_broken_session_is_refused_as_stale(hot: bool) -> None:
    """A session broke with a report in flight that had committed: the next session reports its
    results again (the executor forgets nothing unacknowledged). The leader proposes them, they
    apply refused as stale (the leader acknowledges them all the same), and the run keeps the
    one result it had."""
    state, d, executor, sent = _one_dispatched(hot)
    split = [(sent.run_id, sent.shard, sent.attempt)]
    first = d.results_columns(executor, split, [sent.execution_id], [5], [2], [], [], T0 + 2 * S)
    assert [step(state, d, p, T0 + 2 * S).refused for p in first] == [0]
    before = state.read_run(sent.run_id)
    again = d.results_columns(executor, split, [sent.execution_id], [7], [9], [], [], T0 + 3 * S)
    assert sum(step(state, d, p, T0 + 3 * S).refused for p in again) == 1
    after = state.read_run(sent.run_id)
    assert after is not None and after.state == pb.SUCCEEDED
    assert after == before  # the second report changed nothing (duration 5 ms, not 7)


def test_a_stream_forgets_its_definitions_at_the_bound_and_rows_still_decode_right(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stream's definitions are bounded (MAX_SESSION_DEFS): at the bound the leader starts its
    refs over, defining each again in the message that first uses it; the executor's table (never
    cleared: an executor of any session version) rebuilds every row as the work item it was."""
    import raftsched.leader.dispatch.session as session

    monkeypatch.setattr(session, "MAX_SESSION_DEFS", 8)
    rng = random.Random(7)
    stream: dict[tuple[str, int, int, str, str, str, int, str], int] = {}
    executor: dict[int, pb.SessionTaskDef] = {}
    cleared = 0
    for n in range(60):
        # Tasks and versions come and go: more definitions than the bound, some used again.
        items = []
        for i in range(rng.randrange(1, 7)):
            w = item(f"t{rng.randrange(12)}", T0 + n * S + i, shard=rng.randrange(4))
            w.task_version = rng.randrange(1, 3)
            items.append(w)
        before = len(stream)
        work = encode_work(items, stream, epoch=3)
        cleared += len(stream) < before
        assert decode(work, executor) == items, n
        assert len(stream) <= 8 + len(items)
        assert max(executor) <= 8 + 6  # the executor's table is bounded by the refs in use too
    assert cleared >= 3
