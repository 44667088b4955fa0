"""The leader's side of the columnar hot path (issue 31 P1; docs/dev/columnar.md, step 9).

What the leader proposes for *hot* tasks (``TaskState.hot``, numbered) once every voting member
applies :data:`~raftsched.leader.formats.COLUMNS_FORMAT` (:mod:`raftsched.leader.formats`):

* single on-time fires: ``FireColumns`` rows, built in place by the driver's
  :class:`~raftsched.leader.driver.BatchBuilder` (cold tasks keep ``TaskFires`` in a
  ``FireBatch`` of the same cycle: two commands);
* assignments of hot runs still waiting (``view.hot_seq``): ``AssignColumns`` rows, split off
  the dispatcher's ``AssignAttempts`` by :func:`split_assignments`;
* successes of hot runs that carry nothing a ``ShardAttempt`` would keep besides the duration
  and the start lateness (:func:`hot_result`): ``ResultColumns`` rows, split off a
  ``ReportResults`` by :func:`split_results`. Failures, lost attempts, timeouts and the rest
  stay ``AttemptResult`` rows: the state machine promotes the run to the cold path.

And what the leader makes of the effects of such entries: :func:`ready_attempts` and
:func:`dispatched_attempts` turn ``ReadyColumns`` and ``DispatchColumns`` into the
``AttemptReady`` and ``DispatchAttempt`` values today's dispatcher handles (one view per effect);
:func:`armed_rows` gives the driver its re-arm rows. Every consumer calls them once per effect.

Everything here reads the state only through a :class:`~raftsched.fsm.view.StateView` its caller
holds; nothing is kept between views (numbers and seqs are looked up again each time).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from raftsched import codec
from raftsched.fsm.effects import AttemptReady, DispatchAttempt, DispatchColumns, ReadyColumns
from raftsched.fsm.hot_slots import LIVE
from raftsched.fsm.view import StateView
from raftsched.v1 import log_pb2 as pb
from raftsched.v1 import raftsched_pb2 as rpb

__all__ = [
    "armed_rows",
    "dispatched_attempts",
    "dispatched_rows",
    "hot_result",
    "number_entities",
    "promote_hot_runs",
    "ready_attempts",
    "ready_rows",
    "split_assignments",
    "split_result_columns",
    "split_results",
]

# Column value bounds (ResultColumns: duration_ms is uint32, lateness_ms sint32).
_U32 = 2**32 - 1
_S32 = 2**31 - 1


def number_entities(now_ms: int, epoch: int, origin: str) -> bytes:
    """The ``NumberEntities`` command: numbers every task and executor (proposed once, before any
    columns; see :class:`~raftsched.leader.driver.LeaderDriver`)."""
    cmd = pb.Command(epoch=epoch, now_ms=now_ms, origin=origin)
    cmd.number_entities.SetInParent()
    return codec.encode_command(cmd)


def promote_hot_runs(now_ms: int, epoch: int, origin: str, before_seq: int) -> bytes:
    """The ``PromoteHotRuns`` command: the live hot runs below ``before_seq`` go to the cold path
    (:data:`raftsched.fsm.hot.MAX_HOT_SPAN`; see :class:`~raftsched.leader.driver.LeaderDriver`)."""
    cmd = pb.Command(epoch=epoch, now_ms=now_ms, origin=origin)
    cmd.promote_hot_runs.before_seq = before_seq
    return codec.encode_command(cmd)


def armed_rows(v: StateView, eff: ReadyColumns) -> list[tuple[str, int]]:
    """``(task name, next fire)`` of each row of ``eff``, in row order (a task that caught up on
    two fires has two rows: the last one counts, as a later ``TaskArmed`` would). Rows of a task
    deleted since are left out."""
    states = v.tasks_by_numbers(eff.tasks)
    return [
        (st.spec.name, next_fire)
        for st, next_fire in zip(states, eff.next_fires, strict=True)
        if st is not None
    ]


def ready_attempts(v: StateView, eff: ReadyColumns, epoch: int) -> list[AttemptReady]:
    """The first attempts ``eff`` made ready, as the ``AttemptReady`` each would have been (shard 0,
    attempt 1, no backoff). ``epoch``: the entry's (the leadership that proposed it). Rows of a
    task deleted since are left out (its runs were cancelled with it)."""
    return [ready for ready, _seq in ready_rows(v, eff, epoch)]


def ready_rows(v: StateView, eff: ReadyColumns, epoch: int) -> list[tuple[AttemptReady, int]]:
    """:func:`ready_attempts`, each with its run's seq (``eff.seq_base`` + its row): the
    dispatcher keeps it, so the run's assignment and result need not find the seq from the run
    id again (:meth:`StateView.hot_live` tells whether it is still a live hot run)."""
    out: list[tuple[AttemptReady, int]] = []
    append = out.append
    seq = eff.seq_base
    # One look-up for the entry's rows (StateView.task_by_number per row: two calls each), and
    # run_id_of inline (task@nominal: model.run_id_for of a fire that is not manual). Each
    # AttemptReady is built as its NamedTuple constructor builds it, without the Python-level
    # __new__ that constructor is (every field given: shard 0, attempt 1, no backoff, not backfill).
    states = v.tasks_by_numbers(eff.tasks)
    new = tuple.__new__
    for st, nominal in zip(states, eff.nominals, strict=True):
        if st is not None:
            name = st.spec.name
            append((new(AttemptReady, (f"{name}@{nominal}", name, nominal, 0, 1, epoch, 0, 0)), seq))
        seq += 1
    return out


# A row of a DispatchColumns that is still a live hot run on its assignment (see
# :func:`dispatched_rows`): (seq, run id, task, nominal, attempt, executor, task version,
# assigned ms). A plain tuple: one is read per attempt, on the leader's loop.
HotDispatch = tuple[int, str, str, int, int, str, int, int]


def dispatched_attempts(
    v: StateView, eff: DispatchColumns, epoch: int, proposed: Mapping[int, str] | None = None
) -> list[DispatchAttempt]:
    """The assignments ``eff`` committed, as ``DispatchAttempt`` values carrying the run's facts
    (``known``: a hot run has no command, params or environment of its own): the rows of
    :func:`dispatched_rows`, each as the dispatch it stands for."""
    out: list[DispatchAttempt] = []
    for row in dispatched_rows(v, eff, epoch, proposed):
        if isinstance(row, DispatchAttempt):
            out.append(row)
            continue
        _seq, run_id, task, nominal, attempt, executor, version, assigned_ms = row
        out.append(
            DispatchAttempt(
                run_id,
                task,
                nominal,
                0,
                attempt,
                executor,
                epoch,
                known=True,
                task_version=version,
                backfill=False,
                assigned_ms=assigned_ms,
            )
        )
    return out


def dispatched_rows(
    v: StateView, eff: DispatchColumns, epoch: int, proposed: Mapping[int, str] | None = None
) -> Iterator[HotDispatch | DispatchAttempt]:
    """The assignments ``eff`` committed, in row order: a row still a live hot run on that
    attempt and executor as a :data:`HotDispatch` (what its work item and lease need; a hot
    run has no command, params or environment of its own), read straight from the slot table.

    A row whose seq is no longer a live hot run may have been promoted to the cold path after
    the entry applied and before this reads it (an update, a quota...): it is still assigned,
    and must be sent. ``proposed`` (seq -> run id, what this leadership put in its AssignColumns)
    names its run; it is sent if the log still has that attempt running on that executor (a
    ``DispatchAttempt`` the dispatcher completes from the run). A row finished or cancelled
    since is left out: nothing is sent for it."""
    slots, numbering = v.hot_tables()
    base, state, tasks, names = slots.base, slots.state, numbering.tasks, numbering.executors
    n_slots, n_tasks, n_names = len(state), len(tasks), len(names)
    for seq, attempt, executor in zip(eff.seqs, eff.attempts, eff.executors, strict=True):
        # hot_ref's checks, inline: a live slot, of a numbered task, on this attempt and a
        # numbered executor.
        j = seq - base
        live = 0 <= j < n_slots and state[j] in LIVE
        t = slots.task[j] if live else 0
        st = tasks[t] if 0 < t < n_tasks else None
        if st is None:
            run_id = proposed.get(seq) if proposed is not None else None
            cold = _promoted(v, run_id, attempt, executor, epoch) if run_id else None
            if cold is not None:
                yield cold
            continue
        e = slots.executor[j]
        name = names[e] if 0 < e < n_names else None
        if slots.attempt[j] != attempt or e != executor or not name:
            continue  # a live hot run, but no longer on this assignment
        task = st.spec.name
        nominal = slots.nominal[j]
        version, assigned_ms = slots.version[j], slots.assigned[j]
        # run_id_of(task, nominal), inline (model.run_id_for of a fire that is not manual)
        yield (seq, f"{task}@{nominal}", task, nominal, attempt, name, version, assigned_ms)


def _promoted(v: StateView, run_id: str, attempt: int, executor: int, epoch: int) -> DispatchAttempt | None:
    """The dispatch of a hot run promoted to the cold path since its AssignColumns applied, if
    the log has its shard 0 still RUNNING as ``attempt`` on executor number ``executor``."""
    name = v.executor_name(executor)
    run = v.active_run(run_id)
    if name is None or run is None or not run.shards:
        return None
    shard = run.shards[0]
    if shard.attempt != attempt or shard.executor != name or shard.state != pb.RUNNING:
        return None
    return DispatchAttempt(run_id, run.task, run.nominal_ms, 0, attempt, name, epoch)


def split_assignments(v: StateView, cmd: pb.Command) -> pb.Command | None:
    """Move the assignments of live hot runs (to numbered executors) out of ``cmd``'s
    ``AssignAttempts`` into an ``AssignColumns`` command with the same envelope; the rest stay.
    None (and ``cmd`` unchanged) if there are none."""
    body = cmd.assign_attempts
    seqs: list[int] = []
    attempts: list[int] = []
    executors: list[int] = []
    keep: list[pb.Assignment] = []
    for a in body.assignments:
        seq = v.hot_seq(a.run_id) if a.shard == 0 else 0
        number = v.executor_number(a.executor) if seq else 0
        if not number:
            keep.append(a)
            continue
        seqs.append(seq)
        attempts.append(a.attempt)
        executors.append(number)
    if not seqs:
        return None
    kept = [pb.Assignment.FromString(a.SerializeToString()) for a in keep]  # detached copies
    del body.assignments[:]
    body.assignments.extend(kept)
    hot = pb.Command(epoch=cmd.epoch, now_ms=cmd.now_ms, origin=cmd.origin)
    cols = hot.assign_columns
    cols.seq.extend(seqs)
    cols.shard.extend([0] * len(seqs))
    cols.attempt.extend(attempts)
    cols.executor.extend(executors)
    return hot


def hot_result(res: rpb.ExecResult) -> bool:
    """Whether ``res`` may be a ``ResultColumns`` row: a success that says nothing a finished
    ``ShardAttempt`` would keep besides its duration and start lateness (no output tail, no
    error, exit code 0, not timed out), with the start lateness reported and both within their
    column's range. Anything else is an ``AttemptResult``, as today."""
    if not res.success or res.timed_out or res.exit_code or res.error or res.stdout_tail or res.stderr_tail:
        return False
    if not res.HasField("start_lateness_ms"):
        return False
    return 0 <= res.duration_ms <= _U32 and -_S32 <= res.start_lateness_ms <= _S32


def split_results(
    v: StateView,
    executor: str,
    results: Sequence[rpb.ExecResult],
    ids: Sequence[tuple[str | None, int, int]],
    now_ms: int,
    epoch: int,
    known: Sequence[int] | None = None,
) -> tuple[pb.Command | None, list[int]]:
    """A ``ResultColumns`` command for the results of live hot runs that :func:`hot_result`
    allows, and the positions in ``results`` of the others (to report as today). ``ids``: each
    result's ``(run id, shard, attempt)``. ``known``: each result's hot seq if the caller knows
    it (the lease of that execution id kept it), else 0: a known seq still live is that run's
    (seqs are never reused), so the run id is looked up only for the others."""
    number = v.executor_number(executor)
    if not number:
        return None, list(range(len(results)))
    hot_live, hot_seq = v.hot_live, v.hot_seq
    seqs: list[int] = []
    attempts: list[int] = []
    durations: list[int] = []
    lateness: list[int] = []
    rest: list[int] = []
    for i, res in enumerate(results):
        run_id, shard, attempt = ids[i]
        seq = 0
        if run_id is not None and shard == 0 and hot_result(res):
            hint = known[i] if known is not None else 0
            seq = hint if hint and hot_live(hint) else hot_seq(run_id)
        if not seq:
            rest.append(i)
            continue
        seqs.append(seq)
        attempts.append(attempt)
        durations.append(res.duration_ms)
        lateness.append(res.start_lateness_ms)
    if not seqs:
        return None, rest
    return _result_columns(epoch, now_ms, number, seqs, attempts, durations, lateness), rest


def split_result_columns(
    v: StateView,
    executor: str,
    ids: Sequence[tuple[str, int, int]],
    durations: Sequence[int],
    lateness: Sequence[int],
    now_ms: int,
    epoch: int,
    known: Sequence[int] | None = None,
) -> tuple[pb.Command | None, list[int]]:
    """:func:`split_results` for the rows of a ``SessionReport`` (successes that say nothing
    besides their duration and start lateness, so :func:`hot_result` holds for each one whose
    values fit the columns): a ``ResultColumns`` command for the rows of live hot runs, and the
    positions of the others (to report as today). ``known``: as :func:`split_results`'s."""
    number = v.executor_number(executor)
    if not number:
        return None, list(range(len(ids)))
    seqs: list[int] = []
    attempts: list[int] = []
    durs: list[int] = []
    late: list[int] = []
    rest: list[int] = []
    hot_seq = v.hot_seq
    slots = v.hot_tables()[0]
    base, state = slots.base, slots.state  # StateView.hot_live's, inline below (once per row)
    n_slots = len(state)
    for i, (run_id, shard, attempt) in enumerate(ids):
        duration, lateness_ms = durations[i], lateness[i]
        seq = 0
        if shard == 0 and duration <= _U32 and -_S32 <= lateness_ms <= _S32:
            hint = known[i] if known is not None else 0
            live = hint and 0 <= hint - base < n_slots and state[hint - base] in LIVE
            seq = hint if live else hot_seq(run_id)
        if not seq:
            rest.append(i)
            continue
        seqs.append(seq)
        attempts.append(attempt)
        durs.append(duration)
        late.append(lateness_ms)
    if not seqs:
        return None, rest
    return _result_columns(epoch, now_ms, number, seqs, attempts, durs, late), rest


def _result_columns(
    epoch: int,
    now_ms: int,
    number: int,
    seqs: list[int],
    attempts: list[int],
    durations: list[int],
    lateness: list[int],
) -> pb.Command:
    """The ResultColumns command of one executor's (``number``) plain successes."""
    cmd = pb.Command(epoch=epoch, now_ms=now_ms)
    cols = cmd.result_columns
    cols.seq.extend(seqs)
    cols.attempt.extend(attempts)
    cols.executor.extend([number] * len(seqs))
    cols.duration_ms.extend(durations)
    cols.lateness_ms.extend(lateness)
    return cmd
