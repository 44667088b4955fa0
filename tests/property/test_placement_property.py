"""Placement never over-commits an executor's slots, cpu or memory, checked against an oracle.

Hypothesis builds a fleet (slots, cpu, memory, labels), tasks with needs and selectors, and a
random interleaving of fires, dispatcher rounds, results and executors leaving and joining. After
every step the oracle sums, from the replicated runs alone, what the RUNNING attempts on each
executor need, and checks it against the executor's capacity; the dispatcher's proposals must
never be refused for room (it and the state machine decide with the same rules), and a replayed
log gives the same derived usage.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftsched import codec
from raftsched.fsm.state import SchedulerState
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import T0, S, create, result, tick
from tests.unit.test_placement import join

EXECUTORS = st.lists(
    st.tuples(
        st.integers(1, 4),  # slots
        st.sampled_from([0.0, 1.0, 2.0, 4.0]),  # cpu (0 = not declared)
        st.sampled_from([0, 512, 2048]),  # memory
        st.booleans(),  # gpu label
    ),
    min_size=1,
    max_size=4,
)
TASKS = st.lists(
    st.tuples(
        st.sampled_from([0.0, 0.5, 1.0, 1.5, 3.0]),
        st.sampled_from([0, 256, 1024]),
        st.booleans(),  # needs the gpu label
    ),
    min_size=1,
    max_size=4,
)
STEPS = st.lists(st.sampled_from(["fire", "poll", "finish", "leave", "join"]), min_size=5, max_size=40)


def oracle(state: SchedulerState) -> dict[str, tuple[int, float, int]]:
    used: dict[str, tuple[int, float, int]] = {}
    for data in state.active.values():
        run = pb.Run.FromString(data)
        spec = state.tasks[run.task].spec
        for shard in run.shards:
            if shard.state == pb.RUNNING:
                n, c, m = used.get(shard.executor, (0, 0.0, 0))
                used[shard.executor] = (n + 1, c + spec.resource_cpu, m + spec.resource_memory_mb)
    return used


def check(state: SchedulerState) -> None:
    for name, (n, cpu, mem) in oracle(state).items():
        rec = state.executors[name]
        assert rec.alive, f"{name} left but still runs attempts"
        assert n <= rec.slots, (name, n, rec.slots)
        if rec.cpu:
            assert cpu <= rec.cpu + 1e-9, (name, cpu, rec.cpu)
        if rec.memory_mb:
            assert mem <= rec.memory_mb, (name, mem, rec.memory_mb)
        if n:
            assert state.usage.used(name)[0] == n


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EXECUTORS, TASKS, STEPS, st.randoms(use_true_random=False))
def test_placement_never_over_commits(executors, tasks, steps, rnd) -> None:  # type: ignore[no-untyped-def]
    state = SchedulerState.load(MemoryStore())

    def do(data: bytes, now: int) -> pb.CommandResult:
        out = state.apply(data)
        d.on_effects(out.effects, now)
        return out.result

    d = Dispatcher(state)
    d.become_leader(1, T0)
    names = [f"ex{i}" for i in range(len(executors))]
    for name, (slots, cpu, mem, gpu) in zip(names, executors, strict=True):
        do(join(name, slots, cpu, mem, **({"gpu": "true"} if gpu else {})), T0)
    for i, (cpu, mem, gpu) in enumerate(tasks):
        spec = TaskSpec(
            f"t{i}",
            CronTrigger("* * * * * *"),
            command="x",
            overlap=Overlap.ALLOW,
            resource_cpu=cpu,
            resource_memory_mb=mem,
            selector=(("gpu", "true"),) if gpu else (),
        )
        assert create(state, spec).ok
    now = T0
    for step in steps:
        now += S
        if step == "fire":
            for i in range(len(tasks)):
                do(tick(f"t{i}", 1, now), now)
        elif step == "poll":
            for proposal in d.poll(now):
                res = do(proposal.encode(), now)
                if proposal.kind == "assign":
                    assert res.refused == 0, "the dispatcher proposed an assignment without room"
                    d.release(proposal)
        elif step == "finish":
            running = [
                (r.run_id, s.attempt, s.executor)
                for r in map(pb.Run.FromString, state.active.values())
                for s in r.shards
                if s.state == pb.RUNNING
            ]
            if running:
                run_id, attempt, executor = rnd.choice(sorted(running))
                do(result(now, run_id, attempt, executor, True), now)
        elif step == "leave":
            alive = sorted(n for n, r in state.executors.items() if r.alive)
            if alive:
                cmd = pb.Command(epoch=1, now_ms=now, origin="n1")
                cmd.executor_leave.name = rnd.choice(alive)
                cmd.executor_leave.dead = True
                do(codec.encode_command(cmd), now)
        else:
            gone = sorted(n for n, r in state.executors.items() if not r.alive)
            if gone:
                name = rnd.choice(gone)
                slots, cpu, mem, gpu = executors[names.index(name)]
                do(join(name, slots, cpu, mem, **({"gpu": "true"} if gpu else {})), now)
        check(state)
    assert SchedulerState.load(state.store).usage.held == state.usage.held


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 6),
    data=st.data(),
    sized_task=st.booleans(),
    name=st.from_regex(r"[a-z0-9][a-z0-9:.-]{0,11}", fullmatch=True),
)
def test_a_runs_shards_go_to_distinct_executors(
    n: int, data: st.DataObject, sized_task: bool, name: str
) -> None:
    # Both placement paths: a task without needs waits in its owner's queue; a task with a
    # declared cpu walks its candidates. Every executor has room for the whole run.
    k = data.draw(st.integers(1, n), label="shards")
    state = SchedulerState.load(MemoryStore())
    d = Dispatcher(state)
    d.become_leader(1, T0)
    for i in range(n):
        d.on_effects(state.apply(join(f"ex{i}", 8, 8.0 if sized_task else 0.0)).effects, T0)
    spec = TaskSpec(
        name, CronTrigger("* * * * * *"), command="x", shards=k, resource_cpu=1.0 if sized_task else 0.0
    )
    assert create(state, spec).ok
    out = state.apply(tick(name, 1, T0 + S))
    d.on_effects(out.effects, T0 + S)
    [assign] = [p for p in d.poll(T0 + S) if p.kind == "assign"]
    placed = {a.shard: a.executor for a in assign.command.assign_attempts.assignments}
    assert sorted(placed) == list(range(k))
    assert len(set(placed.values())) == k, placed  # n >= k: k distinct executors
    assert state.apply(assign.encode()).result.refused == 0
