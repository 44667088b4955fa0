"""Read queries over the replicated state: committed data through a :class:`StoreReader`, plus the
in-memory view the state machine keeps (task states, active runs, the workflow book).

Contract: these functions never mutate anything; their answers are fresh messages the caller may
keep. Callers on threads other than apply's hold the state lock while the function touches the
in-memory view (``SchedulerState``'s read methods do this for them). Two reader conventions, by
parameter name: ``reader`` is an *open* reader; ``open_reader`` makes one and is called only when
the answer needs committed data (a read transaction is not free, and most answers are in memory).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence

from raftsched.abc import StoreReader
from raftsched.fsm import keys
from raftsched.fsm.effects import AttemptReady, DispatchAttempt
from raftsched.fsm.records import TaskState
from raftsched.fsm.timeline import expand
from raftsched.fsm.workflow_model import is_internal
from raftsched.fsm.workflows import WorkflowBook
from raftsched.model import TaskSpec
from raftsched.v1 import log_pb2 as pb

# -- tasks (in memory) -----------------------------------------------------------------------------


def task_record(tasks: Mapping[str, TaskState], name: str) -> pb.TaskRecord | None:
    """The record of task ``name`` (internal workflow tasks included), or None."""
    st = tasks.get(name)
    return st.record() if st else None


def first_task_names(names: Iterable[str], prefix: str = "", limit: int = 0) -> list[str]:
    """The user task names among ``names`` that start with ``prefix``, in order; at most ``limit``
    (0: all). A page needs only the first few: a bounded heap rather than a sort of every name."""
    matching = (n for n in names if n.startswith(prefix) and not is_internal(n))
    return heapq.nsmallest(limit, matching) if limit else sorted(matching)


def task_records(tasks: Mapping[str, TaskState], names: Iterable[str]) -> list[pb.TaskRecord]:
    """Records of the tasks ``names`` that still exist, in that order."""
    return [tasks[n].record() for n in names if n in tasks]


def task_page(names: Iterable[str], prefix: str, after: str, size: int) -> tuple[list[str], bool]:
    """The user task names of one page: those starting with ``prefix`` and sorting after
    ``after`` (empty: from the first), by name, at most ``size``; and whether more follow."""
    page = sorted(n for n in names if n.startswith(prefix) and n > after and not is_internal(n))
    return page[:size], len(page) > size


def record_bytes_of(tasks: Mapping[str, TaskState], names: Iterable[str]) -> list[bytes]:
    """The stored record bytes of those ``names`` still present (cheap: the caller holds a lock
    only for this and parses the bytes outside it)."""
    return [st.record_bytes() for st in (tasks.get(n) for n in names) if st is not None]


def armed_tasks(tasks: Mapping[str, TaskState]) -> list[tuple[str, int]]:
    """``(name, next_fire_ms)`` of every enabled task with a next fire, in creation order."""
    return [(n, st.next_fire_ms) for n, st in tasks.items() if st.enabled and st.next_fire_ms]


def task_for_planning(tasks: Mapping[str, TaskState], name: str) -> tuple[TaskSpec, int, int, int] | None:
    """``(spec, version, watermark_ms, next_fire_ms)`` of an enabled task, or None."""
    st = tasks.get(name)
    if st is None or not st.enabled:
        return None
    return st.spec, st.version, st.watermark_ms, st.next_fire_ms


def spec_for(
    tasks: Mapping[str, TaskState], open_reader: Callable[[], StoreReader], task: str, version: int
) -> pb.TaskSpec | None:
    """The spec a run of ``task`` at ``version`` executes (None if the task is gone).

    A version other than the current one is read from committed data; a version no longer kept
    falls back to the current spec.
    """
    st = tasks.get(task)
    if st is None:
        return None
    raw = None
    if version != st.version:
        with open_reader() as r:
            raw = r.get(keys.version_key(task, version))
    rec = pb.TaskRecord()
    rec.ParseFromString(raw if raw is not None else st.spec_bytes)
    return rec.spec


# -- runs and attempts -----------------------------------------------------------------------------


def pending_attempts(active: Mapping[str, bytes], book: WorkflowBook) -> list[AttemptReady | DispatchAttempt]:
    """Unfinished attempts in run-id order: ``AttemptReady`` for those waiting for an executor,
    ``DispatchAttempt`` for those assigned (``active``: run id -> serialised unfinished run)."""
    out: list[AttemptReady | DispatchAttempt] = []
    for run_id in sorted(active):
        run = pb.Run()
        run.ParseFromString(active[run_id])
        if run.held:
            continue  # overlap=buffer_one: it waits for the running run, not for an executor
        for s in run.shards:
            if s.state == pb.PENDING:
                out.append(
                    AttemptReady(
                        run_id,
                        run.task,
                        run.nominal_ms,
                        s.shard,
                        s.attempt,
                        run.epoch,
                        s.not_before_ms,
                        book.backfill_share(run),
                    )
                )
            elif s.state == pb.RUNNING:
                out.append(
                    DispatchAttempt(
                        run_id, run.task, run.nominal_ms, s.shard, s.attempt, s.executor, run.epoch
                    )
                )
    return out


RunCursor = tuple[int, str]
"""Where a page of runs ended: ``(nominal_ms, run_id)`` of its last run; the next page holds the
runs that sort strictly before it (newest first)."""


def list_runs(
    reader: StoreReader,
    tasks: Iterable[str],
    since_ms: int,
    until_ms: int,
    state: int,
    limit: int,
    before: RunCursor | None = None,
) -> list[pb.Run]:
    """Stored runs of ``tasks`` with a nominal time in ``[since_ms, until_ms]`` (``until_ms`` 0:
    no end), in state ``state`` (0: any), newest first, sorting before ``before`` if given; at
    most ``limit``. Each task contributes at most ``limit`` runs, so the scan is bounded by
    ``limit`` per task whatever the history holds."""
    runs: list[pb.Run] = []
    if before is not None:
        until_ms = min(until_ms, before[0]) if until_ms else before[0]
    for task in tasks:
        lo = keys.time_key(keys.RUN, task, max(since_ms, 0))
        hi = keys.time_key(keys.RUN, task, until_ms + 1) if until_ms else keys.per_task_end(keys.RUN, task)
        taken = 0
        for _, value in reader.scan(lo, hi, reverse=True):
            run = pb.Run()
            run.ParseFromString(value)
            if state and run.state != state:
                continue
            if before is not None and (run.nominal_ms, run.run_id) >= before:
                continue
            runs.append(expand(run))  # the whole timeline (fsm.timeline: derived entries)
            taken += 1
            if taken >= limit:
                break
    runs.sort(key=lambda x: (x.nominal_ms, x.run_id), reverse=True)
    return runs[:limit]


def stored_run(reader: StoreReader, run_id: str) -> pb.Run | None:
    """The stored run ``run_id`` (active or retained) as a read shows it (its whole timeline,
    see :func:`raftsched.fsm.timeline.expand`), or None."""
    raw = reader.get(keys.run_key_for_id(run_id))
    if raw is None:
        return None
    run = pb.Run()
    run.ParseFromString(raw)
    return expand(run)


def fire_records(
    reader: StoreReader,
    task: str,
    since_ms: int,
    until_ms: int,
    limit: int,
    newest: bool = False,
    live: Sequence[pb.Run] = (),
) -> list[pb.FireRecord]:
    """Fire records of ``task`` that cover any nominal time in ``[since_ms, until_ms]``, in time order.

    A range record starting before ``since_ms`` but reaching into the window is included.
    ``newest``: the last ``limit`` of them rather than the first (read backwards from the end).
    A fire of the columnar hot path (raftsched.fsm.hot) stores no fire record: its FIRED record
    is synthesised from its run's stored record (:func:`synthesised_fires`), or from ``live``:
    the live hot runs (no stored record yet) and the runs written since the store's last commit
    (``SchedulerState.runs_in_memory``, read before the store; a stored record of one of them is
    older and left out).
    """
    stored = _stored_fire_records(reader, task, since_ms, until_ms, limit, newest)
    extra = synthesised_fires(reader, task, since_ms, until_ms, limit, newest, stored, live)
    if not extra:
        return stored
    merged = sorted([*stored, *extra], key=lambda rec: rec.nominal_ms)
    return merged[-limit:] if newest else merged[:limit]


def synthesised_fires(
    reader: StoreReader,
    task: str,
    since_ms: int,
    until_ms: int,
    limit: int,
    newest: bool,
    stored: list[pb.FireRecord],
    live: Sequence[pb.Run] = (),
) -> list[pb.FireRecord]:
    """FIRED records for the fired runs of ``task`` in the window that have no fire record (a hot
    fire writes none; its run record says all a FIRED record would: nominal, run, version, when
    and by which epoch it was decided). Manual and backfill runs are not fires.

    Only in a state that numbered (``Meta.numbered_ms``: before, no fire was hot, and reads are as
    they were). A run created before numbering was fired on the cold path, so it had a fire
    record: if that is older than the task's oldest fire record, it was pruned and the run is
    left out, as today. A run created since is shown whatever the task's oldest record (a task
    that fired hot and later stored a skipped or disabled fire keeps its hot fires). A run at or
    before the task's creation (an earlier task of the same name's, deleted with its fire
    records) is not one of its fires."""
    raw_meta = reader.get(keys.META)
    numbered_ms = pb.Meta.FromString(raw_meta).numbered_ms if raw_meta else 0
    if not numbered_ms:
        return []
    first_ms = -1  # the task's oldest fire record's nominal time (-1: none)
    first = keys.per_task_prefix(keys.FIRE, task)
    for _, value in reader.scan(first, keys.per_task_end(keys.FIRE, task), limit=1):
        first_ms = pb.FireRecord.FromString(value).nominal_ms

    raw_task = reader.get(keys.task_key(task))
    born_ms = pb.TaskRecord.FromString(raw_task).created_ms if raw_task else 0

    def pruned(run: pb.Run) -> bool:
        # A run of an earlier task of this name (its fire records went with that task: every fire
        # of this task is after its creation, its first watermark), or a cold fire's run whose
        # record was pruned.
        return run.nominal_ms <= born_ms or (run.nominal_ms < first_ms and run.created_ms < numbered_ms)

    lo = keys.time_key(keys.RUN, task, max(since_ms, 0))
    hi = keys.time_key(keys.RUN, task, until_ms + 1) if until_ms else keys.per_task_end(keys.RUN, task)
    covered = {rec.nominal_ms for rec in stored}
    out: list[pb.FireRecord] = []
    head = len(keys.per_task_prefix(keys.RUN, task))
    mine = [
        run
        for run in live
        if run.task == task
        and since_ms <= run.nominal_ms
        and (not until_ms or run.nominal_ms <= until_ms)
        and not pruned(run)
    ]
    newer = {run.run_id for run in live}  # read before the store: their stored records are older
    found: list[pb.Run] = []
    wanted = limit + len(stored) + len(newer)
    # No scan limit: runs left out as pruned do not count (a task's runs are bounded by retention).
    for key, value in reader.scan(lo, hi, reverse=newest):
        if b"~" in key[head:]:  # a manual run (or a workflow's): not a fire
            continue
        run = pb.Run.FromString(value)
        if run.run_id in newer or pruned(run):
            continue
        found.append(run)
        if len(found) >= wanted:
            break
    found += mine
    for run in found:
        if run.nominal_ms in covered or run.manual or run.backfill or run.backfill_id:
            continue
        out.append(
            pb.FireRecord(
                task=task,
                nominal_ms=run.nominal_ms,
                outcome=pb.FIRED,
                decided_ms=run.created_ms,
                epoch=run.epoch,
                run_id=run.run_id,
                task_version=run.task_version,
                count=1,
            )
        )
    return out


def _stored_fire_records(
    reader: StoreReader, task: str, since_ms: int, until_ms: int, limit: int, newest: bool = False
) -> list[pb.FireRecord]:
    out: list[pb.FireRecord] = []
    if newest:
        start = keys.time_key(keys.FIRE, task, max(since_ms, 0))
        hi = keys.time_key(keys.FIRE, task, until_ms + 1) if until_ms else keys.per_task_end(keys.FIRE, task)
        for _, value in reader.scan(start, hi, reverse=True, limit=limit):
            rec = pb.FireRecord()
            rec.ParseFromString(value)
            out.append(rec)
        if len(out) < limit and since_ms > 0:  # a range record from before the window reaching into it
            lo = keys.per_task_prefix(keys.FIRE, task)
            for _, value in reader.scan(lo, start, reverse=True, limit=1):
                rec = pb.FireRecord()
                rec.ParseFromString(value)
                if rec.through_ms >= since_ms:
                    out.append(rec)
        return out[::-1]
    lo = keys.per_task_prefix(keys.FIRE, task)
    start = keys.time_key(keys.FIRE, task, max(since_ms, 0))
    hi = keys.time_key(keys.FIRE, task, until_ms + 1) if until_ms else keys.per_task_end(keys.FIRE, task)
    for _, value in reader.scan(lo, start, reverse=True, limit=1):
        rec = pb.FireRecord()
        rec.ParseFromString(value)
        if rec.through_ms >= since_ms:
            out.append(rec)
    for _, value in reader.scan(start, hi, limit=limit):
        rec = pb.FireRecord()
        rec.ParseFromString(value)
        out.append(rec)
    return out[:limit]


def recent_fires(
    reader: StoreReader, task: str, count: int, live: Sequence[pb.Run] = ()
) -> list[tuple[pb.FireRecord, int]]:
    """The newest ``count`` fire records of ``task``, oldest first, each with the state of its
    run if it has one still stored (else ``RUN_STATE_UNSPECIFIED``); ``live``: the live hot runs
    (see :func:`fire_records`)."""
    out: list[tuple[pb.FireRecord, int]] = []
    by_id = {run.run_id: run for run in live}
    for fire in fire_records(reader, task, 0, 0, count, newest=True, live=live):
        run = (by_id.get(fire.run_id) or stored_run(reader, fire.run_id)) if fire.run_id else None
        out.append((fire, run.state if run is not None else pb.RUN_STATE_UNSPECIFIED))
    return out


def fires_around(
    reader: StoreReader, task: str, at_ms: int, live: Sequence[pb.Run] = ()
) -> tuple[list[pb.FireRecord], pb.Run | None]:
    """The fire records around ``at_ms`` and the run of the last of them that has a stored run
    (what ``explain`` needs), read in one reader; ``live``: the live hot runs (see
    :func:`fire_records`)."""
    around = fire_records(reader, task, at_ms - 1, at_ms, 4, live=live)
    by_id = {run.run_id: run for run in live}
    run = None
    for fire in around:
        if fire.run_id:
            found = by_id.get(fire.run_id) or stored_run(reader, fire.run_id)
            if found is not None:
                run = found
    return around, run


# -- executors -------------------------------------------------------------------------------------


def executor_usage(
    executors: Mapping[str, pb.ExecutorRecord], running: Callable[[str], int], include_left: bool
) -> list[tuple[pb.ExecutorRecord, int]]:
    """Executors by name (members only unless ``include_left``), each (a copy) with the number of
    attempts assigned to it and not finished (``running(name)``: the state's per-executor count,
    kept as attempts start and settle, so this costs O(executors), not a parse of every active
    run: it is read by every console cluster page and ``raftsched executors``)."""
    out = []
    for name, rec in sorted(executors.items()):
        if rec.alive or include_left:
            copy = pb.ExecutorRecord()
            copy.CopyFrom(rec)
            out.append((copy, running(name)))
    return out


def live_executors(executors: Mapping[str, pb.ExecutorRecord]) -> dict[str, int]:
    """``name -> slots`` of executors alive in the replicated membership, by name."""
    return {name: rec.slots for name, rec in sorted(executors.items()) if rec.alive}


def placeable_executors(executors: Mapping[str, pb.ExecutorRecord]) -> dict[str, int]:
    """``name -> slots`` of the live executors new attempts may be placed on (not draining)."""
    return {name: rec.slots for name, rec in sorted(executors.items()) if rec.alive and not rec.draining}


# -- workflows -------------------------------------------------------------------------------------


def workflow_record(
    book: WorkflowBook, open_reader: Callable[[], StoreReader], name: str, version: int = 0
) -> pb.WorkflowRecord | None:
    """A workflow's record; ``version`` > 0 gives that version's definition (None if gone)."""
    wf = book.workflows.get(name)
    if wf is None:
        return None
    rec = book.record(wf)
    if version and version != wf.version:
        with open_reader() as r:
            got = book.version(name, version, reader=r)
        if got is None:
            return None
        rec.spec.CopyFrom(got[0])
        rec.version = version
    return rec


def workflow_records(
    book: WorkflowBook, open_reader: Callable[[], StoreReader], prefix: str = "", limit: int = 0
) -> list[pb.WorkflowRecord]:
    """Records of the workflows whose names start with ``prefix``, by name; at most ``limit`` (0: all)."""
    names = sorted(n for n in book.workflows if n.startswith(prefix))
    if limit:
        names = names[:limit]
    return [r for r in (workflow_record(book, open_reader, n) for n in names) if r is not None]


def workflow_run(
    book: WorkflowBook, open_reader: Callable[[], StoreReader], run_id: str
) -> pb.WorkflowRun | None:
    """A workflow run: from memory while active or recently finished, else from committed data."""
    wr = book.runs.get(run_id) or book.recent.get(run_id)
    if wr is not None:
        copy = pb.WorkflowRun()
        copy.CopyFrom(wr)
        return copy
    if "@" not in run_id:
        return None
    with open_reader() as r:
        return book.stored_run(run_id, reader=r)


def workflow_runs(
    book: WorkflowBook,
    open_reader: Callable[[], StoreReader],
    workflow: str,
    limit: int = 100,
    active_only: bool = False,
) -> list[pb.WorkflowRun]:
    """Runs of ``workflow``, newest logical time first (retained history plus active runs)."""
    if active_only:
        runs = [r for r in book.runs.values() if r.workflow == workflow]
    else:
        lo = keys.per_task_prefix(keys.WORKFLOW_RUN, workflow)
        hi = keys.per_task_end(keys.WORKFLOW_RUN, workflow)
        with open_reader() as reader:
            stored = {keys.run_id_from_key(keys.WORKFLOW_RUN, k): v for k, v in reader.scan(lo, hi)}
        # Active and recently finished runs from memory: their newest state may not be
        # flushed to the store yet (and they need no parsing).
        live = {
            r.run_id: r
            for r in itertools.chain(book.recent.values(), book.runs.values())
            if r.workflow == workflow
        }
        runs = [live.get(rid) or pb.WorkflowRun.FromString(v) for rid, v in stored.items()]
        runs += [r for rid, r in live.items() if rid not in stored]
    runs.sort(key=lambda r: (r.logical_ms, r.created_ms, r.run_id), reverse=True)
    out = []
    for r in runs[: limit or 100]:
        copy = pb.WorkflowRun()
        copy.CopyFrom(r)
        out.append(copy)
    return out


def backfill(reader: StoreReader, backfill_id: str) -> pb.BackfillRecord | None:
    """A backfill's record, or None."""
    raw = reader.get(keys.backfill_key(backfill_id))
    return pb.BackfillRecord.FromString(raw) if raw is not None else None


def backfills(reader: StoreReader, workflow: str, mark: str = "~b") -> list[pb.BackfillRecord]:
    """The backfills of ``workflow`` (``mark`` ``~t``: of the plain task so named), newest first."""
    lo = keys.BACKFILL + f"{workflow}{mark}".encode()
    rows = [pb.BackfillRecord.FromString(v) for _, v in reader.scan(lo, lo + keys.END)]
    return sorted(rows, key=lambda b: b.created_ms, reverse=True)
