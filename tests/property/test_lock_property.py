"""Resource locks under random schedules (Hypothesis): tasks with random lock sets and modes, runs
triggered, assigned, finished, lost and timed out in random order through ``apply``. After every
command, the attempts that are RUNNING (the truth of who runs) never include two exclusive holders
of a lock, nor an exclusive and a shared one; the lock table agrees with them exactly; and apply
grants an assignment whenever the lock rules allow it (no lost wake-ups, no deadlock). With a
quota in force too, replaying the log into a fresh replica gives the same digest, and restoring a
snapshot the same lock table and buckets."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftsched import codec
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import Lock, LockMode, ManualTrigger, Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb

T0 = 1_700_000_040_000
LOCK_NAMES = ["a", "b", "c"]

locks_st = st.lists(
    st.tuples(st.sampled_from(LOCK_NAMES), st.sampled_from([LockMode.EXCLUSIVE, LockMode.SHARED])),
    max_size=3,
    unique_by=lambda t: t[0],
)
steps_st = st.lists(
    st.tuples(
        st.sampled_from(["trigger", "assign", "assign", "finish", "lose", "timeout"]), st.integers(0, 50)
    ),
    min_size=5,
    max_size=60,
)


def _cmd(now: int) -> pb.Command:
    return pb.Command(epoch=1, now_ms=now, origin="n1")


def _running(state: SchedulerState) -> list[tuple[str, pb.ShardAttempt, str]]:
    out = []
    for run_id in sorted(state.active):
        run = state.active_run(run_id)
        assert run is not None
        for shard in run.shards:
            out.append((run_id, shard, run.task))
    return out


def _allowed(state: SchedulerState, task: str, holding: dict[str, list[LockMode]]) -> bool:
    """The oracle: may an attempt of ``task`` start, given who holds what?"""
    for lock in state.tasks[task].spec.locks:
        held = holding.get(lock.name, [])
        if lock.mode == LockMode.EXCLUSIVE and held:
            return False
        if lock.mode == LockMode.SHARED and LockMode.EXCLUSIVE in held:
            return False
    return True


def _holding(state: SchedulerState) -> dict[str, list[LockMode]]:
    holding: dict[str, list[LockMode]] = {}
    for _, shard, task in _running(state):
        if shard.state == pb.RUNNING:
            for lock in state.tasks[task].spec.locks:
                holding.setdefault(lock.name, []).append(lock.mode)
    return holding


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tasks=st.lists(locks_st, min_size=1, max_size=4), steps=steps_st)
def test_no_two_exclusive_holders_and_no_exclusive_with_shared(
    tasks: list[list[tuple[str, LockMode]]], steps: list[tuple[str, int]]
) -> None:
    state = SchedulerState.load(MemoryStore())
    log: list[bytes] = []

    def apply(data: bytes) -> pb.CommandResult:
        log.append(data)
        return state.apply(data).result

    join = _cmd(T0)
    join.executor_join.name, join.executor_join.slots = "ex", 100
    assert apply(codec.encode_command(join)).ok
    # A quota that never binds (the lock rules alone decide), but is charged and given back.
    quota = pb.QuotaRecord(kind="namespace", name="default", rate_milli=10**9, burst=10**6, max_running=10**6)
    assert apply(writes.set_quota(quota, now_ms=T0, epoch=1, origin="n1", key="q")).ok
    names = []
    for i, locks in enumerate(tasks):
        spec = TaskSpec(
            f"t{i}",
            ManualTrigger(),
            command="x",
            overlap=Overlap.ALLOW,
            locks=tuple(Lock(n, m) for n, m in locks),
        )
        data = writes.create_task(spec, disabled=False, now_ms=T0, epoch=1, origin="n1", key="")
        assert apply(data).ok
        names.append(spec.name)
    now = T0
    for kind, pick in steps:
        now += 10
        rows = _running(state)
        pending = [(r, s, t) for r, s, t in rows if s.state == pb.PENDING]
        running = [(r, s, t) for r, s, t in rows if s.state == pb.RUNNING]
        if kind == "trigger":
            data = writes.trigger_now(names[pick % len(names)], "", now_ms=now, epoch=1, origin="n1", key="")
            assert apply(data).ok
        elif kind == "assign" and pending:
            run_id, shard, task = pending[pick % len(pending)]
            expect = _allowed(state, task, _holding(state))
            cmd = _cmd(now)
            cmd.assign_attempts.assignments.add(run_id=run_id, shard=0, attempt=shard.attempt, executor="ex")
            res = apply(codec.encode_command(cmd))
            assert res.accounted == int(expect), (task, _holding(state))
        elif kind in ("finish", "lose", "timeout") and running:
            run_id, shard, _ = running[pick % len(running)]
            cmd = _cmd(now)
            cmd.report_results.results.add(
                run_id=run_id,
                shard=0,
                attempt=shard.attempt,
                executor="" if kind == "lose" else "ex",
                success=kind == "finish",
                lost=kind == "lose",
                timed_out=kind == "timeout",
            )
            assert apply(codec.encode_command(cmd)).accounted == 1
        # The invariant, on the truth (RUNNING attempts), and the table agreeing with it.
        holding = _holding(state)
        for name, modes in holding.items():
            exclusive = modes.count(LockMode.EXCLUSIVE)
            assert exclusive == 0 or len(modes) == 1, f"lock {name} held as {modes}"
        table = {v.name: sorted(h.shared for h in v.holders) for v in state.locks() if v.holders}
        truth = {n: sorted(m == LockMode.SHARED for m in modes) for n, modes in holding.items()}
        assert table == truth
        assert state.policy.exclusive == {
            n: modes.count(LockMode.EXCLUSIVE) for n, modes in holding.items() if LockMode.EXCLUSIVE in modes
        }
    n_running = sum(1 for _, shard, _ in _running(state) if shard.state == pb.RUNNING)
    assert state.quotas()[0].running == n_running
    replica = SchedulerState.load(MemoryStore())
    for data in log:
        replica.apply(data)
    assert replica.digest() == state.digest()
    restored = SchedulerState.load(MemoryStore())
    restored.restore(state.snapshot(), len(log))
    assert restored.locks() == state.locks() and restored.quotas() == state.quotas()
