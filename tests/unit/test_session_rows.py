"""Hot rows to the Session (issue 31 stage 4; :mod:`raftsched.leader.dispatch.work`): the
dispatcher queues a plain attempt as a row, not a ``WorkItem``, and what every executor receives
is byte for byte what it received when the dispatcher built a work item per attempt: the
``SessionWork`` of a Session (definitions once per stream, cold items beside the rows, an epoch
that is not the stream's) and the ``WorkBatch`` of a ``DispatchBatch`` stream, through the hub's
flush and the servicer as through the encoder alone.

The oracle (:func:`old_item`) is the work item the dispatcher built before rows, written out
from the task's spec field by field."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.leader.dispatch.hub import CLOSE, ExecutorHub
from raftsched.leader.dispatch.session import encode_work
from raftsched.leader.dispatch.work import DefKey, Work, WorkDef, to_item, work_items
from raftsched.leader.gate import LeaderGate
from raftsched.model import Overlap, Runner, TaskSpec
from raftsched.rpc.executor_service import ExecutorServicer
from raftsched.timing.clock import ManualClock
from raftsched.v1 import raftsched_pb2 as pb
from tests.support.fsm import EVERY_SECOND, T0, S, create, tick
from tests.support.wait import until
from tests.unit.test_dispatcher import SETTINGS, setup, step
from tests.unit.test_fsm_hot import fire_cols, numbered
from tests.unit.test_session_leader import Context, Session, opening

SPECS = [
    TaskSpec("a", EVERY_SECOND, command="true", overlap=Overlap.ALLOW),
    TaskSpec("b", EVERY_SECOND, command="echo b", overlap=Overlap.ALLOW, timeout_ms=2000),
    TaskSpec(
        "c", EVERY_SECOND, command="print(1)", runner=Runner.PYTHON, overlap=Overlap.ALLOW, timeout_ms=700
    ),
    TaskSpec("d", EVERY_SECOND, handler="pkg:fn", params_json='{"k": 1}', overlap=Overlap.ALLOW),
    # more plain ones, so that the ring gives both executors some
    *(TaskSpec(f"e{i}", EVERY_SECOND, command="true", overlap=Overlap.ALLOW) for i in range(8)),
]


def hot_leader(slots: int = 100) -> tuple[SchedulerState, Dispatcher]:
    state = numbered(slots=slots)
    for spec in SPECS:
        assert create(state, spec).ok
        assert state.tasks[spec.name].hot
    d = Dispatcher(state, SETTINGS, random.Random(7))
    d.become_leader(1, T0)
    d.columns_allowed = lambda: True
    return state, d


def fire_all(state: SchedulerState, d: Dispatcher, at: int) -> None:
    """Fire every task at ``at`` as columns, assign and commit: the outbox holds their work."""
    rows = [(state.tasks[s.name].number, 1, at, at + S) for s in SPECS]
    assert step(state, d, fire_cols(at, rows), at).ok
    for proposal in d.poll(at):
        assert proposal.command.WhichOneof("body") == "assign_columns"
        assert step(state, d, proposal, at).ok
        d.release(proposal)


def old_item(state: SchedulerState, work: Work) -> pb.WorkItem:
    """The work item the dispatcher built for this attempt before rows (the oracle)."""
    if isinstance(work, pb.WorkItem):
        return work
    exec_id, run_id, nominal, shard, attempt, epoch, wdef = work
    task = wdef.task
    version = state.tasks[task].version
    with state.view() as v:
        spec = v.spec_for(task, version)  # the stored spec, as the dispatcher reads it
    assert spec is not None
    item = pb.WorkItem(
        execution_id=f"{task}@{nominal}/{shard}/{attempt}",
        run_id=f"{task}@{nominal}",
        task=task,
        nominal_ms=nominal,
        shard=shard,
        attempt=attempt,
        epoch=epoch,
        task_version=version,
    )
    item.shards = spec.shards or 1
    item.command = spec.command
    item.handler = spec.handler
    item.params_json = spec.params_json
    item.timeout_ms = spec.timeout_ms
    item.runner = spec.runner
    assert (exec_id, run_id) == (item.execution_id, item.run_id)
    return item


def cold_items(epoch: int) -> list[pb.WorkItem]:
    """What a row cannot say: a cancel, a log request, a run with its own env, a manual run."""
    env = pb.WorkItem(
        execution_id=f"a@{T0}/0/1", run_id=f"a@{T0}", task="a", nominal_ms=T0, epoch=epoch, command="true"
    )
    env.env["K"] = "v"
    manual = pb.WorkItem(
        execution_id=f"a@{T0}~m1/0/1", run_id=f"a@{T0}~m1", task="a", nominal_ms=T0, epoch=epoch
    )
    return [
        pb.WorkItem(
            execution_id=f"b@{T0}/0/1", run_id=f"b@{T0}", epoch=epoch, cancel=True, cancel_reason="-"
        ),
        pb.WorkItem(epoch=epoch, log_request=pb.LogRequest(request_id="r", execution_id=f"a@{T0}/0/1")),
        env,
        manual,
    ]


def test_a_hot_attempt_is_queued_as_a_row_that_stands_for_its_old_work_item() -> None:
    state, d = hot_leader()
    fire_all(state, d, T0 + S)
    work = d.take_work()
    assert len(work) == len(SPECS) and all(isinstance(w, tuple) for _, w in work)
    for executor, w in work:
        assert isinstance(w, tuple)
        assert to_item(w) == old_item(state, w)
        assert to_item(w).SerializeToString() == old_item(state, w).SerializeToString()
        assert d.leases[w[0]].executor == executor
    # The work item view of the outbox (tests, the simulation) is the old one.
    fire_all(state, d, T0 + 2 * S)
    items = d.take_outbox()
    assert len(items) == len(SPECS) and all(isinstance(item, pb.WorkItem) for _, item in items)
    assert {item.task for _, item in items} == {s.name for s in SPECS}


def test_rows_encode_byte_for_byte_as_the_old_work_items_with_definitions_once_per_stream() -> None:
    state, d = hot_leader()
    new_defs: dict[DefKey, int] = {}
    old_defs: dict[DefKey, int] = {}
    for second in (1, 2, 3):
        fire_all(state, d, T0 + second * S)
        rows = [w for _, w in d.take_work()]
        cold = cold_items(1)
        # Interleaved: a cold item first, between rows, and last; a row of another epoch.
        first = rows[0]
        assert isinstance(first, tuple)
        other_epoch = (*first[:5], 2, first[6])
        mixed: list[Work] = [cold[0], rows[0], cold[1], *rows[1:], cold[2], other_epoch, cold[3]]
        old = [old_item(state, w) for w in mixed]
        new_work = encode_work(mixed, new_defs, 1)
        old_work = encode_work(old, old_defs, 1)
        assert new_work.SerializeToString() == old_work.SerializeToString()
        assert len(new_work.task_ref) == len(SPECS) and len(new_work.cold) == 5  # (4 + the other epoch)
        assert len(new_work.defs) == (len(SPECS) if second == 1 else 0)  # once per stream
        assert pb.WorkBatch(items=work_items(mixed)).SerializeToString() == (
            pb.WorkBatch(items=old).SerializeToString()
        )
    assert new_defs == old_defs


def test_an_older_spec_version_is_its_own_definition_as_before() -> None:
    """A row of a run that spans an update carries the version it was assigned with."""
    wdef = WorkDef("a", 1, {"shards": 1, "command": "true"})
    newer = WorkDef("a", 2, {"shards": 1, "command": "true"})
    rows: list[Work] = [
        (f"a@{T0}/0/1", f"a@{T0}", T0, 0, 1, 4, wdef),
        (f"a@{T0 + S}/0/1", f"a@{T0 + S}", T0 + S, 0, 1, 4, newer),
    ]
    items = work_items(rows)
    assert [i.task_version for i in items] == [1, 2]
    new_defs: dict[DefKey, int] = {}
    old_defs: dict[DefKey, int] = {}
    assert encode_work(rows, new_defs, 4) == encode_work(items, old_defs, 4)
    assert list(new_defs.values()) == [1, 2]


def hub_of(state: SchedulerState, d: Dispatcher) -> ExecutorHub:
    driver = SimpleNamespace(leading=True, ready=True, epoch=1)
    raft = SimpleNamespace(is_leader=lambda: True, epoch=lambda: 1)
    gate = LeaderGate("n1", ManualClock(T0 + S), state, driver, lambda: raft, lambda: None)
    return ExecutorHub(SimpleNamespace(node_id="n1", state=state, gate=gate), d)


def test_a_session_and_a_dispatch_batch_stream_receive_the_old_bytes_through_the_hub() -> None:
    """The hub's flush hands rows to both streams; the Session encodes them as rows, the
    DispatchBatch stream as their work items: each message equals the old one."""
    state, d = hot_leader()

    async def go() -> tuple[list[bytes], list[bytes], list[bytes], list[bytes]]:
        hub = hub_of(state, d)
        hub.loop = asyncio.get_running_loop()
        servicer = ExecutorServicer(hub)
        session = Session()
        session.hub, session.servicer = hub, servicer
        session.send(opening())
        serving = asyncio.ensure_future(session.run())
        batches: Any = servicer._stream(pb.DispatchRequest(name="ex2"), Context())
        first_batch = asyncio.ensure_future(anext(batches))
        await asyncio.sleep(0)
        assert set(hub.streams) == {"ex1", "ex2"}
        old_defs: dict[DefKey, int] = {}
        expected_session: list[bytes] = []
        expected_batch: list[bytes] = []
        got_batch: list[bytes] = []
        for second in (1, 2):
            fire_all(state, d, T0 + second * S)
            pending = list(d.term.outbox) if d.term is not None else []
            assert pending and all(isinstance(w, tuple) for _, w in pending)
            old = {ex: [old_item(state, w) for e, w in pending if e == ex] for ex in ("ex1", "ex2")}
            hub._flush_outbox()
            if old["ex1"]:
                expected_session.append(
                    pb.SessionDown(work=encode_work(old["ex1"], old_defs, 1)).SerializeToString()
                )
            if old["ex2"]:
                expected_batch.append(pb.WorkBatch(items=old["ex2"]).SerializeToString())
                message = await (first_batch if not got_batch else anext(batches))
                got_batch.append(pb.WorkBatch(items=message).SerializeToString())
            await until(lambda: len(session.downs) == 1 + len(expected_session), what="the session's message")
        hub.streams["ex1"].put_nowait(CLOSE)
        await asyncio.wait_for(serving, 5)
        works = [down.SerializeToString() for down in session.downs if down.HasField("work")]
        return works, expected_session, got_batch, expected_batch

    works, expected_session, got_batch, expected_batch = asyncio.run(go())
    assert expected_session and expected_batch  # both executors were sent work
    assert works == expected_session
    assert got_batch == expected_batch


def test_a_reconnect_resends_the_old_work_items() -> None:
    state, d = hot_leader()
    fire_all(state, d, T0 + S)
    sent = d.take_work()
    for executor in ("ex1", "ex2"):
        mine = [old_item(state, w) for e, w in sent if e == executor]
        assert sorted(d.resend_to(executor, T0 + 2 * S), key=str) == sorted(mine, key=str)


def test_what_a_row_cannot_say_is_still_queued_as_its_work_item() -> None:
    """A manual run (its run id is not ``task@nominal``) and a run with its own params (a
    trigger's) stay work items; a plain fire of the same task on the cold path is a row."""
    state, d = setup(executors=1, slots=4)
    step(state, d, tick("t", 1, T0 + S), T0 + S)
    for params, key in (('{"x": 1}', "k1"), ("", "k2")):
        now = T0 + S + 10
        data = writes.trigger_now("t", params, now_ms=now, epoch=1, origin="n1", key=key)
        assert step(state, d, data, now).ok
    for proposal in d.poll(T0 + S):
        step(state, d, proposal, T0 + S)
    work = {w.run_id if isinstance(w, pb.WorkItem) else w[1]: w for _, w in d.take_work()}
    assert len(work) == 3
    plain = work.pop(f"t@{T0 + S}")
    assert isinstance(plain, tuple) and to_item(plain).command == "true"
    with_params, manual = (work[k] for k in sorted(work))
    assert isinstance(with_params, pb.WorkItem) and isinstance(manual, pb.WorkItem)
    assert "~m" in with_params.run_id and "~m" in manual.run_id
    assert {with_params.params_json, manual.params_json} == {'{"x": 1}', ""}
    assert with_params.command == manual.command == "true" and with_params.task_version == 1


def test_a_cancel_that_follows_its_attempt_in_one_message_stops_it_on_the_executor(tmp_path: Path) -> None:
    """A run cancelled right after its attempt was dispatched: the stream's writer takes both
    flushes into one message (it drains what is queued), the attempt a row, its cancel a cold
    item. The executor reads a message's cold items before its rows, so the cancel found nothing
    to stop and the attempt then started (it ran on, cancelled, until the leader's stray check
    a lease later). The attempt must reach the executor before its cancel, as it does on a
    ``DispatchBatch`` stream."""
    from tests.unit.test_session_eager import executor, ready

    state, d = hot_leader()
    at = T0 + S
    fire_all(state, d, at)
    run_id = f"d@{at}"
    [cmd] = writes.cancel_runs([run_id], "stop", now_ms=at + 5, epoch=1, origin="n1", key="c")
    assert step(state, d, cmd, at + 5).ok
    mine = [w for _, w in d.take_work() if (w[1] if isinstance(w, tuple) else w.run_id) == run_id]
    assert [isinstance(w, tuple) for w in mine] == [True, False]  # the row, then its cancel
    exec_id = f"{run_id}/0/1"
    work = encode_work(mine, {}, 1)
    assert [item.execution_id for item in work_items(mine)] == [exec_id, exec_id]

    async def main() -> tuple[bool, bool]:
        ex = executor(tmp_path)
        ready(ex)
        ex.attempts.session_work(work)
        running = ex.attempts.running.get(exec_id)
        stopping = exec_id in ex.attempts.cancelled  # the cancel found it (and cancelled it: not started)
        if running is not None:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
        return stopping, running is not None

    stopped, received = asyncio.run(main())
    assert received and stopped
