"""The leader's columnar bodies (raftsched.leader.columns, BatchBuilder.add_hot_many): what it builds
for hot tasks, and that it builds nothing of the kind while the members' gate is closed."""

from __future__ import annotations

import pytest

from raftsched import codec
from raftsched.leader.columns import hot_result
from raftsched.leader.driver import NUMBERING_RETRY_MS, BatchBuilder, LeaderDriver, Proposal
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.v1 import log_pb2 as pb
from raftsched.v1 import raftsched_pb2 as rpb
from tests.unit.test_driver import T0, decoded, leader_with


def every_second(n: int) -> list[TaskSpec]:
    return [
        TaskSpec(f"t{i}", CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, handler="noop") for i in range(n)
    ]


def bodies(proposals: list[Proposal]) -> list[str]:
    return [cmd.WhichOneof("body") or "" for cmd in decoded(proposals)]


def test_add_hot_many_builds_fire_columns_next_to_the_fire_batch() -> None:
    driver = leader_with(every_second(3), T0 - 5000, max_fires_per_batch=2)
    now = T0 + 40
    b = BatchBuilder(driver, now)
    b.add_single("t0", 1, T0, T0 + 1000)  # a cold task: TaskFires
    b.add_hot_many([("t1", 7, 2, T0, T0 + 1000), ("t2", 8, 3, T0 - 1000, T0 + 1000)])
    b.add_hot_many([("t3", 9, 1, T0, T0 + 2000)])  # a third row: over max_fires_per_batch, a second entry
    out = b.finish()
    assert sorted(bodies(out)) == ["fire_batch", "fire_columns", "fire_columns"]
    hot = [p for p in out if codec.decode_command(p.data).WhichOneof("body") == "fire_columns"]
    (cold,) = [c for c in decoded(out) if c.fire_batch.tasks]
    first, second = decoded(hot)
    assert [tf.task for tf in cold.fire_batch.tasks] == ["t0"]
    assert hot[0].tasks == ("t1", "t2") and hot[1].tasks == ("t3",)
    assert list(second.fire_columns.task) == [9]
    assert first.now_ms == now and first.epoch == driver.epoch and first.origin == "n1"
    cols = first.fire_columns
    assert list(cols.task) == [7, 8] and list(cols.version) == [2, 3]
    assert list(cols.nominal_delta) == [40, 1040]  # now - nominal
    assert list(cols.next_delta) == [1000, 2000]  # next fire - nominal
    assert first.format == codec.COLUMNS_FORMAT  # stamped: an older node halts, never misapplies
    assert cold.format < codec.COLUMNS_FORMAT
    assert dict(hot[0].fired) == {T0: 1, T0 - 1000: 1}


def test_a_closed_gate_builds_todays_bodies_only() -> None:
    driver = leader_with(every_second(3), T0 - 5000)
    driver.columns_allowed = lambda: False
    assert bodies(driver.poll(T0 + 5)) == ["fire_batch"]


def test_an_open_gate_numbers_the_entities_first_and_again_only_after_a_while() -> None:
    driver = leader_with(every_second(3), T0 - 5000)
    driver.columns_allowed = lambda: True
    first = driver.poll(T0 + 5)
    # Numbering is not on yet: NumberEntities, and the fires as today (FireColumns name numbers).
    assert bodies(first) == ["number_entities", "fire_batch"]
    assert decoded(first)[0].format == codec.COLUMNS_FORMAT
    assert "number_entities" not in bodies(driver.poll(T0 + 1005))
    assert bodies(driver.poll(T0 + 5 + NUMBERING_RETRY_MS))[0] == "number_entities"


@pytest.mark.parametrize(
    ("res", "hot"),
    [
        (rpb.ExecResult(success=True, duration_ms=5, start_lateness_ms=30), True),
        (rpb.ExecResult(success=True, duration_ms=5, start_lateness_ms=-3), True),
        (rpb.ExecResult(success=True, duration_ms=5), False),  # no start lateness reported
        (rpb.ExecResult(success=True, start_lateness_ms=1, stdout_tail="x"), False),  # output is kept
        (rpb.ExecResult(success=True, start_lateness_ms=1, stderr_tail="x"), False),
        (rpb.ExecResult(success=True, start_lateness_ms=1, exit_code=1), False),
        (rpb.ExecResult(success=True, start_lateness_ms=1, error="odd"), False),
        (rpb.ExecResult(success=False, start_lateness_ms=1), False),
        (rpb.ExecResult(success=True, start_lateness_ms=1, timed_out=True), False),
        (rpb.ExecResult(success=True, start_lateness_ms=1, duration_ms=2**32), False),  # uint32
        (rpb.ExecResult(success=True, start_lateness_ms=2**31), False),  # sint32
    ],
)
def test_which_results_may_be_result_columns(res: rpb.ExecResult, hot: bool) -> None:
    assert hot_result(res) is hot


def test_fire_columns_is_a_command_body() -> None:
    cmd = pb.Command(epoch=1, now_ms=T0)
    cmd.fire_columns.task.append(1)
    assert codec.command_format(cmd) == codec.COLUMNS_FORMAT
    assert isinstance(LeaderDriver, type)


def test_a_planner_seconds_behind_catches_up_on_time_fires_as_columns() -> None:
    """A leader that plans 2.5 s late (a stall) has three on-time fires due per every-second
    task: catch-up rows of one FireColumns entry, not a FireBatch (whose cold apply costs ~10x,
    on every node, when the cluster is already behind). Applied, they mean what plan_fires says."""
    from tests.unit.test_driver import reference

    driver = leader_with(every_second(3), T0 - 5000)
    driver.columns_allowed = lambda: True
    for p in driver.poll(T0 + 5):  # numbering, and the first fires (before numbering: a FireBatch)
        applied = driver.state.apply(p.data)
        assert applied.result.ok
        driver.on_effects(applied.effects)
        driver.on_proposal_committed(p)
    with driver.state.view() as v:
        assert v.numbering_on()
    now = T0 + 3500  # fires at T0+1000, +2000, +3000 are due, all within the 5 s grace
    want = reference(driver, ["t0", "t1", "t2"], now)
    assert [[f.nominal_ms for f in tf.fires] for tf in want] == [[T0 + 1000, T0 + 2000, T0 + 3000]] * 3
    out = driver.poll(now)
    assert bodies(out) == ["fire_columns"]
    (cmd,) = decoded(out)
    cols = cmd.fire_columns
    assert len(cols.task) == 9
    assert [now - d for d in cols.nominal_delta] == [T0 + 1000, T0 + 2000, T0 + 3000] * 3
    assert [now - d + n for d, n in zip(cols.nominal_delta, cols.next_delta, strict=True)] == [
        T0 + 2000, T0 + 3000, T0 + 4000
    ] * 3  # fmt: skip
    assert dict(out[0].fired) == {T0 + 1000: 3, T0 + 2000: 3, T0 + 3000: 3}
    applied = driver.state.apply(out[0].data)
    assert applied.result.ok and applied.result.fired == 9
    for tf in want:
        st = driver.state.tasks[tf.task]
        assert (st.watermark_ms, st.next_fire_ms) == (tf.watermark_ms, tf.next_fire_ms)
