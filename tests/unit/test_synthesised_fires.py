"""Which runs' FIRED fires the read side synthesises (raftsched.fsm.queries.synthesised_fires):
a hot fire stores no FireRecord, so fire accounting, recent fires and explain show it from its
run. Against a store built by hand, the three rules: nothing before numbering; a cold fire's run
whose record was pruned stays out; a run of an earlier task of the same name stays out."""

from __future__ import annotations

from raftsched.fsm import keys, queries
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb

T0 = 1_800_000_000_000
TASK = "t"


def _store(numbered_ms: int, born_ms: int, fires: list[int], runs: list[tuple[int, int]]) -> MemoryStore:
    """A store with Meta(numbered_ms), the task created at ``born_ms``, FIRED fire records at
    ``fires`` and finished runs ``(nominal, created)``."""
    store = MemoryStore()
    store.put(
        keys.META, pb.Meta(numbered_ms=numbered_ms, next_task_no=2 if numbered_ms else 0).SerializeToString()
    )
    store.put(keys.task_key(TASK), pb.TaskRecord(created_ms=born_ms).SerializeToString())
    for nominal in fires:
        rec = pb.FireRecord(
            task=TASK, nominal_ms=nominal, outcome=pb.FIRED, run_id=f"{TASK}@{nominal}", count=1
        )
        store.put(keys.time_key(keys.FIRE, TASK, nominal), rec.SerializeToString())
    for nominal, created in runs:
        run = pb.Run(run_id=f"{TASK}@{nominal}", task=TASK, nominal_ms=nominal, created_ms=created)
        store.put(keys.time_key(keys.RUN, TASK, nominal), run.SerializeToString())
    return store


def _nominals(store: MemoryStore) -> list[int]:
    with store.reader() as r:
        return [(f.nominal_ms - T0) // 1000 for f in queries.fire_records(r, TASK, 0, 0, 1000)]


def test_a_state_that_never_numbered_shows_its_fire_records_only() -> None:
    # Runs 1-3 had their records pruned (the oldest kept is 4): as before the hot path, not shown.
    runs = [(T0 + s * 1000, T0 + s * 1000) for s in range(1, 6)]
    store = _store(0, T0, [T0 + 4000, T0 + 5000], runs)
    assert _nominals(store) == [4, 5]


def test_hot_fires_stay_after_a_cold_record_and_pruned_cold_ones_stay_out() -> None:
    # Numbered at T0+3.5 s: runs 1-3 were cold fires whose records were pruned (the oldest record
    # kept is 6, a cold fire after the hot ones), runs 4-5 hot fires with no record of their own.
    runs = [(T0 + s * 1000, T0 + s * 1000) for s in range(1, 7)]
    store = _store(T0 + 3500, T0, [T0 + 6000], runs)
    assert _nominals(store) == [4, 5, 6]


def test_runs_of_an_earlier_task_of_the_same_name_are_not_its_fires() -> None:
    # Runs 1-3 belonged to a task deleted (with its fire records) and created again at T0+3 s, in
    # the same millisecond as run 3 was created; run 4 is the new task's hot fire.
    runs = [(T0 + s * 1000, T0 + 3000) for s in range(1, 4)] + [(T0 + 4000, T0 + 4000)]
    store = _store(T0 - 1, T0 + 3000, [], runs)
    assert _nominals(store) == [4]
