"""The state machine of one workflow run: task states, waiting counters, skips, timelines.

Pure: no clock, no IO, no randomness. Time enters as ``now`` (ms, stamped by the leader into the
command). Every function mutates a ``pb.WorkflowRun`` in place (``run.tasks[i]`` is task ``i`` of
the :class:`~raftsched.workflow.dag.Dag`, in spec order) and returns what the caller — the
replicated state machine — must do next. Task names are resolved by the caller; indices are
trusted. A refused operation raises :class:`~raftsched.errors.Conflict` *before* changing anything;
the FSM turns it into a ``Rejected`` value, identically on every replica.

Task states
    ``WAITING``  some dependency is not terminal yet; ``waiting`` counts those dependencies (edges).
    ``READY``    dependencies met; waiting for a parallelism slot. The caller moves it to
                 ``RUNNING`` with :func:`mark_running` when it creates the task run.
    ``RUNNING``  a task run exists (queued for or running on an executor). Retries happen inside the
                 task run; the FSM records them with :func:`note` (``FAILED`` then ``READY`` entries)
                 while the task stays ``RUNNING`` here.
    Terminal:    ``SUCCESS``, ``FAILED``, ``TIMEOUT``, ``SKIPPED``, ``KILLED``.

Edge conditions, met by the upstream task's terminal state
    ``ON_SUCCESS`` ← SUCCESS; ``ON_FAILURE`` ← FAILED or TIMEOUT;
    ``ON_DONE`` ← SUCCESS, FAILED, TIMEOUT or SKIPPED. ``KILLED`` meets nothing.

Completion (:func:`finish`) walks only the finished task's ``downstream`` list, O(out-degree).
For each child still ``WAITING`` the counter is decremented, then

* ``RULE_ALL``: an unmet condition skips the child at once
  (``upstream "validate" finished FAILED (needs success)``); a counter reaching 0 makes it READY.
* ``RULE_ANY``: a met condition makes the child READY at once; a counter reaching 0 with none met
  skips it (``no upstream met its condition ("a" FAILED needs success, ...)``).

A SKIPPED task is itself a completion and propagates the same way (iteratively, with an explicit
stack: DAGs may have 10,000 tasks). Children that already left WAITING (a RULE_ANY child made READY
by another parent) are not touched.

Every state change appends ``TimelineEntry(state, at_ms=now, reason)`` to the task and sets
``task.reason`` to that reason. A task's ``waiting`` is 0 whenever it is not WAITING.

Run state (:func:`derive_state`): ``RUNNING`` while any task is non-terminal; then ``KILLED`` if the
run was killed or a KILLED task remains (killed work that nobody reran); else ``FAILED`` if any task
FAILED or TIMED OUT; else ``SUCCESS`` — SKIPPED tasks alone do not fail a run (an ``ON_FAILURE``
alert skipped on success is the normal case). ``finished_ms`` is ``now`` when the run leaves
RUNNING and 0 while it runs.

Operations
    :func:`kill` — every non-terminal task becomes KILLED; returns the ones that were RUNNING (the
    caller cancels their task runs). A killed run changes again only through :func:`rerun`.

    :func:`rerun` — re-queues a task and everything downstream of it, keeping all other results.
    Refused while a task of that closure is RUNNING. Allowed on a finished or killed run (that is its
    point): the run goes back to RUNNING. The task itself becomes READY whatever its upstream
    states; each descendant is re-decided, in topological order, from the *current* states of its
    dependencies (results outside the closure count at once, so a descendant may be READY or
    SKIPPED immediately).

    :func:`mark_success` — records SUCCESS by hand, from WAITING, READY, FAILED, TIMEOUT, SKIPPED or
    KILLED (refused for RUNNING, SUCCESS, and in a killed run). Semantics: *the task's outcome is
    replaced and what has not run yet is re-decided*. From WAITING/READY it is an ordinary
    completion. From a terminal state every descendant that has not started — WAITING, READY or
    SKIPPED — is re-decided from the current upstream states, in topological order: a load SKIPPED
    because validate FAILED becomes READY when validate is marked succeeded, and an ``ON_FAILURE``
    alert still READY is SKIPPED. Descendants that are RUNNING or have finished keep their results
    (they ran on the earlier evidence; rerun them if that matters). A finished run may so resume.

Every function that can make tasks READY returns the indices that *entered* READY during the call,
in topological order; a task that was READY before the call and still is is not repeated. A READY
task can leave READY without running (kill, rerun, mark_success): the caller must check the state
(:func:`mark_running` refuses anything but READY) before handing one out.

Cost: :func:`finish` does work proportional to the out-degree plus the skip propagation. The run
state is derived without an O(tasks) scan per completion: a per-run hint (:data:`_hints`, keyed by
``id(run)``) remembers a task last seen non-terminal, and the scan resumes there. The hint is a
cache only — any value gives the same answer, a lost or stale hint just costs a longer scan — so
results stay deterministic. Over a run's life the scans add up to O(tasks) (plus O(tasks) per
rerun). :func:`kill`, :func:`rerun` and :func:`mark_success` from a terminal state are O(tasks).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence

from raftsched.errors import Conflict
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.dag import Dag, External, downstream_closure

__all__ = [
    "derive_state",
    "finish",
    "kill",
    "mark_running",
    "mark_success",
    "note",
    "recount_waiting",
    "rerun",
    "resolve_external",
    "start",
]

WAITING = pb.TASK_WAITING
READY = pb.TASK_READY
RUNNING = pb.TASK_RUNNING
SUCCESS = pb.TASK_SUCCESS
FAILED = pb.TASK_FAILED
TIMEOUT = pb.TASK_TIMEOUT
SKIPPED = pb.TASK_SKIPPED
KILLED = pb.TASK_KILLED

TERMINAL = frozenset({SUCCESS, FAILED, TIMEOUT, SKIPPED, KILLED})
OUTCOMES = frozenset({SUCCESS, FAILED, TIMEOUT})

# Indexed by state number (0..8): lists, not sets, because finish() reads them per edge.
_TERMINAL_BY_STATE: tuple[bool, ...] = tuple(s in TERMINAL for s in range(9))
_MEETS: dict[int, tuple[bool, ...]] = {
    pb.ON_SUCCESS: tuple(s == SUCCESS for s in range(9)),
    pb.ON_FAILURE: tuple(s in (FAILED, TIMEOUT) for s in range(9)),
    pb.ON_DONE: tuple(s in (SUCCESS, FAILED, TIMEOUT, SKIPPED) for s in range(9)),
}
_NEEDS: dict[int, str] = {pb.ON_SUCCESS: "success", pb.ON_FAILURE: "failure", pb.ON_DONE: "done"}
_ANY_REASON_LIMIT = 5  # upstream tasks listed in a RULE_ANY skip reason before "and N more"


def state_name(state: int) -> str:
    """``TASK_FAILED`` → ``FAILED``."""
    return pb.WorkflowTaskState.Name(state).removeprefix("TASK_")


# --------------------------------------------------------------------------------------------
# Caches that never change a result (see the module docstring).

_HINT_CAP = 65_536
_hints: dict[int, int] = {}  # id(run) -> index of a task last seen non-terminal
_POS_CAP = 64
_positions: dict[int, tuple[Dag, tuple[int, ...]]] = {}  # id(dag) -> (dag, topo position per task)


def _remember(run: pb.WorkflowRun, idx: int) -> None:
    key = id(run)
    if key not in _hints and len(_hints) >= _HINT_CAP:
        del _hints[next(iter(_hints))]  # oldest first; losing a hint only costs a scan
    _hints[key] = idx


def _topo_sorted(dag: Dag, indices: list[int]) -> list[int]:
    if len(indices) < 2:
        return indices
    hit = _positions.get(id(dag))
    if hit is None or hit[0] is not dag:
        pos = [0] * len(dag.topo)
        for rank, i in enumerate(dag.topo):
            pos[i] = rank
        if len(_positions) >= _POS_CAP:
            del _positions[next(iter(_positions))]
        hit = (dag, tuple(pos))
        _positions[id(dag)] = hit
    order = hit[1]
    return sorted(indices, key=order.__getitem__)


# --------------------------------------------------------------------------------------------
# Building blocks


def _enter(task: pb.WorkflowTaskRun, state: int, now: int, reason: str) -> None:
    task.state = state  # type: ignore[assignment]
    task.reason = reason
    if state != WAITING:
        task.waiting = 0
    task.timeline.add(state=state, at_ms=now, reason=reason)


def _name(dag: Dag, idx: int) -> str:
    return f'"{dag.names[idx]}"'


def _skip_all_reason(dag: Dag, upstream: int, state: int, condition: int) -> str:
    return f"upstream {_name(dag, upstream)} finished {state_name(state)} (needs {_NEEDS[condition]})"


def _skip_any_reason(dag: Dag, tasks: Sequence[pb.WorkflowTaskRun], idx: int) -> str:
    edges = dag.upstream[idx]
    parts = [
        f"{_name(dag, j)} {state_name(tasks[j].state)} needs {_NEEDS[cond]}"
        for j, cond in edges[:_ANY_REASON_LIMIT]
    ]
    if len(edges) > _ANY_REASON_LIMIT:
        parts.append(f"and {len(edges) - _ANY_REASON_LIMIT} more")
    return f"no upstream met its condition ({', '.join(parts)})"


def _propagate(dag: Dag, tasks: Sequence[pb.WorkflowTaskRun], done: int, now: int) -> list[int]:
    """Walk the completions starting at terminal task ``done``; returns tasks made READY.

    Each completion costs its out-degree; a child skipped on the way is pushed as a completion.
    """
    ready: list[int] = []
    downstream = dag.downstream
    rules = dag.rule
    stack = [done]
    while stack:
        u = stack.pop()
        ustate = tasks[u].state
        for c, cond in downstream[u]:
            child = tasks[c]
            if child.state != WAITING:
                continue  # already decided (RULE_ANY made READY by another parent, or reset by hand)
            if child.waiting == 0:
                raise AssertionError(f"waiting counter of {_name(dag, c)} would go below zero")
            child.waiting -= 1
            met = _MEETS[cond][ustate]
            if rules[c] == pb.RULE_ANY:
                if met:
                    reason = (
                        f"upstream {_name(dag, u)} finished {state_name(ustate)} (any; needs {_NEEDS[cond]})"
                    )
                    _enter(child, READY, now, reason)
                    ready.append(c)
                elif child.waiting == 0:
                    _enter(child, SKIPPED, now, _skip_any_reason(dag, tasks, c))
                    stack.append(c)
            elif not met:
                _enter(child, SKIPPED, now, _skip_all_reason(dag, u, ustate, cond))
                stack.append(c)
            elif child.waiting == 0:
                _enter(child, READY, now, f"all {len(dag.upstream[c])} upstream met")
                ready.append(c)
    return ready


def _evaluate(dag: Dag, tasks: Sequence[pb.WorkflowTaskRun], idx: int) -> tuple[int, int, str]:
    """Decide task ``idx`` from the current states of its dependencies: (state, waiting, reason).

    Gives what incremental propagation would have given had the dependencies finished in their
    current states (the skip reason may name a different unmet dependency: the first in
    ``depends_on`` order rather than the first to finish).
    """
    edges = dag.upstream[idx]
    outside = tasks[idx].external
    if not edges and not outside:
        return READY, 0, "no dependencies"
    pending = 0
    met: tuple[int, int] | None = None
    unmet: tuple[int, int, int] | None = None
    for j, cond in edges:
        s = tasks[j].state
        if not _TERMINAL_BY_STATE[s]:
            pending += 1
        elif _MEETS[cond][s]:
            if met is None:
                met = (j, cond)
        elif unmet is None:
            unmet = (j, s, cond)
    outside_met = outside_unmet = None
    for wait in outside:
        if wait.state == pb.EXTERNAL_PENDING:
            pending += 1
        elif wait.state == pb.EXTERNAL_MET:
            outside_met = outside_met if outside_met is not None else wait
        else:
            outside_unmet = outside_unmet if outside_unmet is not None else wait
    if dag.rule[idx] == pb.RULE_ANY:
        if met is not None:
            j, cond = met
            st = tasks[j].state
            return READY, 0, f"upstream {_name(dag, j)} finished {state_name(st)} (any; needs {_NEEDS[cond]})"
        if outside_met is not None:
            return READY, 0, f"upstream run {outside_met.upstream_run} met its condition (any)"
        if pending:
            return WAITING, pending, f"waits for {pending} upstream"
        if not edges and outside_unmet is not None:
            return SKIPPED, 0, f"no upstream met its condition (upstream run {outside_unmet.upstream_run})"
        return SKIPPED, 0, _skip_any_reason(dag, tasks, idx)
    if unmet is not None:
        return SKIPPED, 0, _skip_all_reason(dag, *unmet)
    if outside_unmet is not None:
        return SKIPPED, 0, f"upstream run {outside_unmet.upstream_run} did not meet its condition"
    if pending:
        return WAITING, pending, f"waits for {pending} upstream"
    return READY, 0, f"all {len(edges) + len(outside)} upstream met"


def _redecide(
    dag: Dag, tasks: Sequence[pb.WorkflowTaskRun], indices: Sequence[int], now: int, prefix: str, force: bool
) -> list[int]:
    """Re-decide ``indices`` (topological order) from current upstream states; returns new READYs.

    A timeline entry is appended when the state changes, when a SKIPPED task stays SKIPPED for
    another reason, or always with ``force``.
    """
    ready: list[int] = []
    for i in indices:
        task = tasks[i]
        old = task.state
        state, waiting, reason = _evaluate(dag, tasks, i)
        if force or state != old or (state == SKIPPED and not task.reason.endswith(reason)):
            _enter(task, state, now, f"{prefix}{reason}")
            if state == READY and old != READY:
                ready.append(i)
        task.waiting = waiting
    return ready


def _scan_final(run: pb.WorkflowRun) -> int:
    """The run state once no task is non-terminal (or RUNNING if one is)."""
    killed = run.state == pb.WORKFLOW_KILLED
    failed = False
    for task in run.tasks:
        s = task.state
        if not _TERMINAL_BY_STATE[s]:
            return pb.WORKFLOW_RUNNING
        if s == KILLED:
            killed = True
        elif s in (FAILED, TIMEOUT):
            failed = True
    if killed:
        return pb.WORKFLOW_KILLED
    return pb.WORKFLOW_FAILED if failed else pb.WORKFLOW_SUCCESS


def _derive_hinted(run: pb.WorkflowRun) -> int:
    tasks = run.tasks
    n = len(tasks)
    start = _hints.get(id(run), 0)
    if start >= n:
        start = 0
    for i in range(start, n):
        if not _TERMINAL_BY_STATE[tasks[i].state]:
            _remember(run, i)
            return pb.WORKFLOW_RUNNING
    for i in range(start):
        if not _TERMINAL_BY_STATE[tasks[i].state]:
            _remember(run, i)
            return pb.WORKFLOW_RUNNING
    _hints.pop(id(run), None)
    return _scan_final(run)


def _settle(run: pb.WorkflowRun, now: int) -> None:
    state = _derive_hinted(run)
    if state != run.state:
        run.state = state  # type: ignore[assignment]
        run.finished_ms = 0 if state == pb.WORKFLOW_RUNNING else now


# --------------------------------------------------------------------------------------------
# The operations


def start(dag: Dag, run: pb.WorkflowRun, now: int) -> list[int]:
    """Fill ``run.tasks`` (one per task, spec order) and set the run RUNNING.

    Tasks without dependencies start READY, the others WAITING with their counters. Returns the
    READY indices in topological order. Raises Conflict if the run already has tasks.
    """
    if len(run.tasks):
        raise Conflict(f"workflow run {run.run_id!r} has already started")
    upstream = dag.upstream
    for i, name in enumerate(dag.names):
        task = run.tasks.add(name=name)
        outside = dag.externals(i)
        for ext in outside:
            upstream_logical = run.logical_ms + ext.offset_ms
            task.external.add(edge=ext.k, logical_ms=upstream_logical, since_ms=max(now, upstream_logical))
        n_up = len(upstream[i]) + len(outside)
        if n_up:
            task.waiting = n_up
            named = f" ({external_text(outside, run.logical_ms)})" if outside else ""
            _enter(task, WAITING, now, f"waits for {n_up} upstream{named}")
        else:
            _enter(task, READY, now, "no dependencies")
    run.state = pb.WORKFLOW_RUNNING
    run.finished_ms = 0
    ready = [i for i in dag.topo if not upstream[i] and not dag.externals(i)]
    _settle(run, now)  # an empty DAG succeeds at once
    return ready


def external_text(edges: Sequence[External], logical_ms: int) -> str:
    """The cross-workflow edges of a task as its WAITING reason names them:
    ``workflow "orders-sync" task "load" at 2026-01-02T01:30:00Z, ...``."""
    parts = []
    for ext in edges:
        at = _dt.datetime.fromtimestamp((logical_ms + ext.offset_ms) / 1000, tz=_dt.UTC)
        task = f' task "{ext.task}"' if ext.task else ""
        parts.append(f'workflow "{ext.workflow}"{task} at {at.strftime("%Y-%m-%dT%H:%M:%SZ")}')
    return ", ".join(parts)


def mark_running(run: pb.WorkflowRun, idx: int, task_run_id: str, now: int, reason: str = "") -> None:
    """READY → RUNNING: the caller created task run ``task_run_id`` for task ``idx``.

    Sets ``run_id`` and counts the try. Raises Conflict if the task is not READY (killed, reset or
    marked by hand since it was returned as READY).
    """
    task = run.tasks[idx]
    if task.state != READY:
        raise Conflict(f'task "{task.name}" is {state_name(task.state)}, not READY')
    task.run_id = task_run_id
    task.tries += 1
    _enter(task, RUNNING, now, reason)


def note(run: pb.WorkflowRun, idx: int, state: int, now: int, reason: str) -> None:
    """Append a timeline entry to task ``idx`` without changing its state, counters or reason.

    For what happens inside a task run: the attempt went to executor X (RUNNING), an attempt
    failed and will be retried (FAILED, then READY).
    """
    run.tasks[idx].timeline.add(state=state, at_ms=now, reason=reason)


def finish(dag: Dag, run: pb.WorkflowRun, idx: int, outcome: int, now: int, reason: str = "") -> list[int]:
    """RUNNING → ``outcome`` (SUCCESS, FAILED or TIMEOUT: the task run's final result).

    Propagates to the downstream tasks (skips included) and updates ``run.state`` and
    ``finished_ms``. Returns the tasks made READY, in topological order. Raises Conflict if the
    task is not RUNNING (a late result after a kill or a rerun: drop it); ValueError for another
    ``outcome``.
    """
    if outcome not in OUTCOMES:
        raise ValueError(f"finish: outcome must be SUCCESS, FAILED or TIMEOUT, not {outcome}")
    tasks = run.tasks
    task = tasks[idx]
    if task.state != RUNNING:
        raise Conflict(f'task "{task.name}" is {state_name(task.state)}, not RUNNING')
    _enter(task, outcome, now, reason)
    ready = _propagate(dag, tasks, idx, now)
    if ready:
        _remember(run, ready[0])
        if run.state != pb.WORKFLOW_RUNNING:
            _settle(run, now)
    else:
        _settle(run, now)
    return _topo_sorted(dag, ready)


def kill(run: pb.WorkflowRun, now: int, reason: str) -> list[int]:
    """Every non-terminal task → KILLED; run → KILLED with ``finished_ms = now``.

    Returns the indices (ascending) of the tasks that were RUNNING: the caller cancels their task
    runs, and their late results are refused by :func:`finish`. Raises Conflict if the run is
    already killed or finished.
    """
    if run.state != pb.WORKFLOW_RUNNING:
        current = pb.WorkflowRunState.Name(run.state).removeprefix("WORKFLOW_")
        raise Conflict(f"workflow run {run.run_id!r} is already {current}")
    running: list[int] = []
    for i, task in enumerate(run.tasks):
        s = task.state
        if _TERMINAL_BY_STATE[s]:
            continue
        if s == RUNNING:
            running.append(i)
        _enter(task, KILLED, now, reason)
    run.state = pb.WORKFLOW_KILLED
    run.finished_ms = now
    _hints.pop(id(run), None)
    return running


def rerun(
    dag: Dag, run: pb.WorkflowRun, idx: int, now: int, reason: str = "", *, redecide_external: bool = False
) -> list[int]:
    """Re-queue task ``idx`` and everything downstream of it, keeping every other result.

    ``idx`` becomes READY whatever its local upstream states; each descendant is re-decided from
    the current states of its dependencies (may be WAITING, READY or SKIPPED at once). With
    ``redecide_external`` the cross-workflow edges of the closure that were not met (unmet, timed
    out) wait again, counting from ``now`` (their timeout starts over; a met edge stays met, even
    if the upstream run that met it has been pruned since): ``idx`` is WAITING
    while it has one, and the caller decides them against the upstream's current runs
    (``CrossDeps.register``). Works on a finished or killed run, which goes back to RUNNING.
    Raises Conflict, changing nothing, if a task of the closure is RUNNING. Returns the tasks that
    entered READY, topological order.
    """
    closure = downstream_closure(dag, idx)
    tasks = run.tasks
    busy = [dag.names[i] for i in closure if tasks[i].state == RUNNING]
    if busy:
        shown = ", ".join(f'"{n}"' for n in busy[:_ANY_REASON_LIMIT])
        more = f" and {len(busy) - _ANY_REASON_LIMIT} more" if len(busy) > _ANY_REASON_LIMIT else ""
        raise Conflict(
            f"cannot rerun {_name(dag, idx)}: {shown}{more} still RUNNING"
            " (wait for it to finish or kill the run)"
        )
    label = f"rerun: {reason}" if reason else "rerun"
    pending = 0
    if redecide_external:
        for i in closure:
            for wait in tasks[i].external:
                if wait.state in (pb.EXTERNAL_UNMET, pb.EXTERNAL_TIMED_OUT):
                    wait.state = pb.EXTERNAL_PENDING
                    wait.upstream_run = ""
                    wait.since_ms = max(now, wait.logical_ms)
        pending = sum(1 for w in tasks[idx].external if w.state == pb.EXTERNAL_PENDING)
    if pending:
        _enter(tasks[idx], WAITING, now, f"{label}: waits for {pending} upstream in other workflows")
        tasks[idx].waiting = pending
        ready: list[int] = []
    else:
        ready = [idx] if tasks[idx].state != READY else []
        _enter(tasks[idx], READY, now, label)
    ready += _redecide(dag, tasks, closure[1:], now, f"{label} of {_name(dag, idx)}: ", force=True)
    run.state = pb.WORKFLOW_RUNNING
    run.finished_ms = 0
    _remember(run, idx)
    return ready


def mark_success(dag: Dag, run: pb.WorkflowRun, idx: int, now: int, reason: str) -> list[int]:
    """Record SUCCESS for task ``idx`` by hand (see the module docstring for the semantics).

    Raises Conflict if the task is RUNNING or already SUCCESS, or the run was killed (rerun is how
    a killed run resumes). Returns the tasks that entered READY, in topological order.
    """
    tasks = run.tasks
    task = tasks[idx]
    if run.state == pb.WORKFLOW_KILLED:
        raise Conflict(f"workflow run {run.run_id!r} was killed; rerun {_name(dag, idx)} to resume it")
    old = task.state
    if old == RUNNING:
        raise Conflict(f"task {_name(dag, idx)} is RUNNING; wait for its result or kill the run")
    if old == SUCCESS:
        raise Conflict(f"task {_name(dag, idx)} already succeeded")
    label = f"marked succeeded by hand: {reason}" if reason else "marked succeeded by hand"
    _enter(task, SUCCESS, now, label)
    if _TERMINAL_BY_STATE[old]:
        closure = downstream_closure(dag, idx)
        todo = [i for i in closure[1:] if tasks[i].state in (WAITING, READY, SKIPPED)]
        ready = _redecide(dag, tasks, todo, now, f"{_name(dag, idx)} marked succeeded: ", force=False)
    else:
        ready = _topo_sorted(dag, _propagate(dag, tasks, idx, now))
    if ready:
        _remember(run, ready[0])
    _settle(run, now)
    return ready


def resolve_external(
    dag: Dag,
    run: pb.WorkflowRun,
    idx: int,
    j: int,
    outcome: int,
    upstream_run: str,
    now: int,
    reason: str,
    *,
    fail: bool = False,
) -> list[int]:
    """Cross-workflow dependency ``j`` (position in ``run.tasks[idx].external``) is decided:
    ``outcome`` is ``EXTERNAL_MET``, ``EXTERNAL_UNMET`` (its upstream, run ``upstream_run``,
    finished not meeting the condition) or ``EXTERNAL_TIMED_OUT``.

    Only a PENDING edge of a WAITING task counts: an edge already decided, or a task that left
    WAITING (killed, rerun, marked by hand), records nothing and returns ``[]`` (a rerun of the
    upstream does not undo what the downstream did). Otherwise, as for a local dependency: the
    counter drops; under RULE_ALL an edge not met ends the task with ``reason`` - SKIPPED, or
    FAILED with ``fail`` (``on_timeout: fail``) - and the end propagates; the last met edge makes
    it READY. Under RULE_ANY a met edge makes it READY at once, and the task ends only when no
    edge is left. Returns the tasks that entered READY, in topological order.
    """
    task = run.tasks[idx]
    wait = task.external[j]
    if wait.state != pb.EXTERNAL_PENDING or task.state != WAITING:
        return []
    met = outcome == pb.EXTERNAL_MET
    wait.state = outcome  # type: ignore[assignment]
    wait.upstream_run = upstream_run
    if task.waiting == 0:
        raise AssertionError(f"waiting counter of {_name(dag, idx)} would go below zero")
    task.waiting -= 1
    ready: list[int] = []
    end = FAILED if fail else SKIPPED
    if dag.rule[idx] == pb.RULE_ANY:
        if met:
            _enter(task, READY, now, f"{reason} (any)")
            ready.append(idx)
        elif task.waiting == 0:
            _enter(task, end, now, f"no upstream met its condition ({reason})")
            ready = _propagate(dag, run.tasks, idx, now)
    elif not met:
        _enter(task, end, now, reason)
        ready = _propagate(dag, run.tasks, idx, now)
    elif task.waiting == 0:
        _enter(task, READY, now, reason)
        ready.append(idx)
    else:
        note(run, idx, WAITING, now, reason)
    if ready:
        _remember(run, ready[0])
    _settle(run, now)
    return _topo_sorted(dag, ready)


def derive_state(run: pb.WorkflowRun) -> int:
    """The run state that follows from its tasks (full scan; see the module docstring)."""
    return _scan_final(run)


def recount_waiting(dag: Dag, run: pb.WorkflowRun) -> list[int]:
    """Naive oracle for tests: per task, the number of its dependencies (edges) not terminal."""
    terminal = [_TERMINAL_BY_STATE[t.state] for t in run.tasks]
    return [
        sum(1 for j, _ in edges if not terminal[j])
        + sum(1 for w in run.tasks[i].external if w.state == pb.EXTERNAL_PENDING)
        for i, edges in enumerate(dag.upstream)
    ]
