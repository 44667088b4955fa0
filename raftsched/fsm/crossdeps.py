"""Cross-workflow dependencies inside the replicated state machine (issue 28 §1).

A workflow task may depend on another workflow's run, or one task of it, for a matching logical
time (``depends_on: [{workflow: orders-sync, task: load, logical: -1d}]``). Each such dependency
of a task run is an :class:`ExternalWait` in the task run (``WorkflowTaskRun.external``) and counts
in its ``waiting`` counter like a local dependency; the task stays WAITING until every dependency
is decided (see :func:`raftsched.workflow.run.resolve_external`).

When is an edge decided
    By an upstream run of workflow ``W`` whose logical time is the downstream run's plus the
    offset - scheduled, manual or backfill, finished before or after the downstream run started:

    * a whole-run edge (no ``task``) when that run finishes SUCCESS (meets ``success``/``done``)
      or FAILED (meets ``failure``/``done``);
    * a task edge when task ``T`` of that run reaches SUCCESS, FAILED, TIMEOUT or SKIPPED (met as
      a local edge would be: ``failure`` by FAILED/TIMEOUT, ``done`` by any of them).

    KILLED decides nothing: the edge keeps waiting, so a rerun (or another run of that logical
    time) can still meet it. A rerun of the upstream that finishes again decides the edges still
    PENDING; edges already decided stay decided (the downstream task ran, or was skipped, on that
    evidence - rerun it to re-evaluate). When a downstream run starts and several upstream runs of
    the logical time have already finished, the edge is met if any of them met it, else unmet by
    the one that finished last (ties: run id).

Cost
    Waiting edges are indexed by ``(upstream workflow, upstream logical time)`` then upstream task
    (``""`` for the whole run): an upstream run changing state looks up one dict entry, and only a
    run that finishes (or whose awaited task finishes) touches its waiters - O(waiters) plus their
    own transitions, in a sorted (deterministic) order. A downstream run starting scans the stored
    runs of the one upstream logical time it needs (a key range, usually one run).

The index is derived state: :meth:`CrossDeps.load` rebuilds it from the active runs, so snapshots
and the log's bytes do not change for workflows without cross-workflow dependencies.
"""

from __future__ import annotations

import datetime as _dt
import heapq
from collections.abc import Iterable
from typing import Protocol

from raftsched.fsm.alerts import UPSTREAM_LATE
from raftsched.fsm.effects import Effect
from raftsched.v1 import log_pb2 as pb
from raftsched.workflow import run as wfrun
from raftsched.workflow.dag import Dag, External

__all__ = ["CrossDeps", "decides"]

_TASK_MEETS: dict[int, frozenset[int]] = {
    pb.ON_SUCCESS: frozenset({pb.TASK_SUCCESS}),
    pb.ON_FAILURE: frozenset({pb.TASK_FAILED, pb.TASK_TIMEOUT}),
    pb.ON_DONE: frozenset({pb.TASK_SUCCESS, pb.TASK_FAILED, pb.TASK_TIMEOUT, pb.TASK_SKIPPED}),
}
_TASK_DECIDES = frozenset({pb.TASK_SUCCESS, pb.TASK_FAILED, pb.TASK_TIMEOUT, pb.TASK_SKIPPED})
_RUN_MEETS: dict[int, frozenset[int]] = {
    pb.ON_SUCCESS: frozenset({pb.WORKFLOW_SUCCESS}),
    pb.ON_FAILURE: frozenset({pb.WORKFLOW_FAILED}),
    pb.ON_DONE: frozenset({pb.WORKFLOW_SUCCESS, pb.WORKFLOW_FAILED}),
}
_RUN_DECIDES = frozenset({pb.WORKFLOW_SUCCESS, pb.WORKFLOW_FAILED})
_NEEDS: dict[int, str] = {pb.ON_SUCCESS: "success", pb.ON_FAILURE: "failure", pb.ON_DONE: "done"}

Waiter = tuple[int, str, int, int]
"""(downstream logical time, downstream run id, task index, position in its ``external``)."""


def decides(ext: External, upstream: pb.WorkflowRun, upstream_dag: Dag | None) -> tuple[int, bool] | None:
    """Whether ``upstream`` (a run of ``ext.workflow``) decides edge ``ext``: None if not (yet),
    else ``(state, met)``: the deciding state (a run or task state) and whether it meets the
    condition. Pure."""
    if not ext.task:
        if upstream.state not in _RUN_DECIDES:
            return None
        return int(upstream.state), upstream.state in _RUN_MEETS[ext.condition]
    if upstream_dag is None:
        return None
    idx = upstream_dag.index.get(ext.task)
    if idx is None or idx >= len(upstream.tasks):
        return None  # the upstream's version has no such task: it never decides
    state = upstream.tasks[idx].state
    if state not in _TASK_DECIDES:
        return None
    return int(state), state in _TASK_MEETS[ext.condition]


def describe(ext: External, upstream_run: str, state: int, met: bool) -> str:
    """The reason a decided edge gives (the downstream task's timeline and SKIPPED reason)."""
    what = f'upstream workflow "{ext.workflow}"'
    if ext.task:
        what += f' task "{ext.task}"'
        shown = wfrun.state_name(state)
    else:
        shown = pb.WorkflowRunState.Name(state).removeprefix("WORKFLOW_")
    verdict = "met" if met else "not met"
    return f"{what} run {upstream_run} finished {shown} (needs {_NEEDS[ext.condition]}: {verdict})"


class RunHost(Protocol):
    """What the index needs from the workflow book (:class:`raftsched.fsm.workflows.WorkflowBook`
    implements it). Apply thread only; every call deterministic."""

    @property
    def runs(self) -> dict[str, pb.WorkflowRun]:
        """The active workflow runs by id."""
        ...

    def version(self, workflow: str, version: int) -> tuple[pb.WorkflowSpec, Dag] | None: ...

    def dag_of(self, wr: pb.WorkflowRun) -> Dag: ...

    def runs_at(self, workflow: str, logical: int) -> list[pb.WorkflowRun]:
        """Every kept run of ``workflow`` at logical time ``logical`` (stored or changed by the
        command being applied), in run id order."""
        ...

    def queue_ready(self, wr: pb.WorkflowRun, indices: Iterable[int]) -> None: ...

    def start_ready(self, workflow: str, now: int, epoch: int, effects: list[Effect]) -> None: ...

    def settle(self, wr: pb.WorkflowRun, now: int, epoch: int, effects: list[Effect]) -> None: ...

    def put_run(self, wr: pb.WorkflowRun) -> None: ...

    def raise_late(self, alert: pb.AlertRecord, now: int) -> None:
        """Raise an ``upstream_late`` event (dropped if its dedupe key was raised before)."""
        ...

    def was_raised(self, dedupe: str) -> bool:
        """Whether an alert event with dedupe key ``dedupe`` was raised (and not pruned)."""
        ...


_TIMEOUT, _WARN = 0, 1  # kinds of deadline
RELEASE_PER_COMMAND = 1000
"""Waiting edges one upstream change decides in the command that made it, and edges one
``WorkflowWaitsDue`` acts on; the rest of an upstream's are left for the leader's next
``WorkflowWaitsDue`` (which it proposes at once): 10,000 downstream runs on one upstream are
released in ten applies of ~50 ms, not one of half a second that would hold the state lock (and
Raft's tick) that long."""


def late_key(workflow: str, logical: int) -> str:
    """The dedupe key of the ``upstream_late`` event about ``workflow``'s run at ``logical``."""
    return f"upstream_late/{workflow}@{logical}"


def _duration(ms: int) -> str:
    """``8m``, ``1h30m``, ``45s``, ``2h0m5s`` (whole seconds; ``0s`` below one)."""
    h, rest = divmod(max(ms, 0) // 1000, 3600)
    m, sec = divmod(rest, 60)
    parts = [f"{h}h" if h else "", f"{m}m" if m or (h and sec) else "", f"{sec}s" if sec else ""]
    return "".join(parts) or "0s"


def logical_text(ms: int) -> str:
    """A logical time as the user reads it (UTC, ISO 8601)."""
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class CrossDeps:
    """The index of waiting cross-workflow edges of one workflow book (same thread)."""

    def __init__(self, book: RunHost) -> None:
        self.book = book
        # (upstream workflow, upstream logical) -> upstream task ("" = whole run) -> waiters
        self.waits: dict[tuple[str, int], dict[str, set[Waiter]]] = {}
        self.where: dict[Waiter, tuple[tuple[str, int], str]] = {}
        self.by_run: dict[str, list[Waiter]] = {}
        # Deadlines (timeouts, warn_after): (due, kind, waiter); stale entries are skipped.
        self.deadlines: list[tuple[int, int, Waiter]] = []
        # Edges whose upstream decided them beyond RELEASE_PER_COMMAND: the next WorkflowWaitsDue
        # decides them. Derived like the rest: load() finds them again (every live edge whose
        # upstream has decided), so a replica that restarted decides the same ones.
        self.releases: set[Waiter] = set()
        self.next_due_ms = 0
        """The earliest deadline (0: none): the leader proposes ``WorkflowWaitsDue`` when it has
        come (a hint: apply decides)."""
        self.expiries = 0  # WorkflowWaitsDue commands applied (the leader proposes again after one)

    # -- index ----------------------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild the index from the book's active runs (after a restore)."""
        self.waits.clear()
        self.where.clear()
        self.by_run.clear()
        self.deadlines.clear()
        self.releases.clear()
        decided: dict[tuple[External, int], tuple[str, int, bool] | None] = {}
        for run_id in sorted(self.book.runs):
            wr = self.book.runs[run_id]
            for i, j, ext in self._index(wr):
                logical = wr.tasks[i].external[j].logical_ms
                if (ext, logical) not in decided:
                    decided[(ext, logical)] = self._already_decided(ext, logical)
                if decided[(ext, logical)] is not None:
                    self.releases.add((wr.logical_ms, wr.run_id, i, j))
        self._hint()

    def _hint(self) -> None:
        due = self.deadlines[0][0] if self.deadlines else 0
        self.next_due_ms = 1 if self.releases else due  # releases are due at once

    def _live(self, waiter: Waiter) -> pb.WorkflowRun | None:
        """The downstream run if ``waiter`` still waits (run active, task WAITING, edge PENDING);
        else None, and the waiter leaves the index (so every replica counts the same ones)."""
        if waiter not in self.where:
            return None
        _, run_id, i, j = waiter
        down = self.book.runs.get(run_id)
        if (
            down is not None
            and down.tasks[i].state == pb.TASK_WAITING
            and down.tasks[i].external[j].state == pb.EXTERNAL_PENDING
        ):
            return down
        self._unindex(waiter)
        return None

    def _index(self, wr: pb.WorkflowRun) -> list[tuple[int, int, External]]:
        """Register the PENDING edges of ``wr``'s WAITING tasks not yet registered; returns every
        such edge (registered before or now)."""
        dag = self.book.dag_of(wr)
        if not dag.external:
            return []
        added: list[tuple[int, int, External]] = []
        for i, task in enumerate(wr.tasks):
            if not task.external or task.state != pb.TASK_WAITING:
                continue
            exts = dag.externals(i)
            for j, wait in enumerate(task.external):
                if wait.state != pb.EXTERNAL_PENDING or j >= len(exts):
                    continue
                waiter: Waiter = (wr.logical_ms, wr.run_id, i, j)
                ext = exts[j]
                added.append((i, j, ext))
                if waiter in self.where:
                    continue
                key = (ext.workflow, wait.logical_ms)
                self.waits.setdefault(key, {}).setdefault(ext.task, set()).add(waiter)
                self.where[waiter] = (key, ext.task)
                self.by_run.setdefault(wr.run_id, []).append(waiter)
                if ext.timeout_ms:
                    heapq.heappush(self.deadlines, (wait.since_ms + ext.timeout_ms, _TIMEOUT, waiter))
                if ext.warn_after_ms:
                    heapq.heappush(self.deadlines, (wait.since_ms + ext.warn_after_ms, _WARN, waiter))
        return added

    def _unindex(self, waiter: Waiter) -> None:
        self.releases.discard(waiter)
        found = self.where.pop(waiter, None)
        if found is None:
            return
        key, task = found
        tasks = self.waits[key]
        tasks[task].discard(waiter)
        if not tasks[task]:
            del tasks[task]
        if not tasks:
            del self.waits[key]
        mine = self.by_run.get(waiter[1])
        if mine is not None:
            mine.remove(waiter)
            if not mine:
                del self.by_run[waiter[1]]

    def forget(self, run_id: str) -> None:
        """``run_id`` finished (or was deleted): its edges wait no more."""
        for waiter in list(self.by_run.get(run_id, ())):
            self._unindex(waiter)
        if self.releases or self.deadlines:
            self._hint()

    # -- transitions ----------------------------------------------------------------------------

    def register(self, wr: pb.WorkflowRun, now: int) -> list[int]:
        """A downstream run started (or came back by a rerun): index its pending edges and decide
        at once those whose upstream already finished. Returns the tasks made READY."""
        ready: list[int] = []
        for i, j, ext in self._index(wr):
            wait = wr.tasks[i].external[j]
            found = self._already_decided(ext, wait.logical_ms)
            if found is None:
                continue
            upstream_run, state, met = found
            ready += self._resolve(wr, i, j, ext, upstream_run, state, met, now)
        self._hint()
        return ready

    def upstream_changed(self, wr: pb.WorkflowRun, now: int, epoch: int, effects: list[Effect]) -> None:
        """``wr`` (a run of any workflow) changed: decide the edges waiting on it that it now
        decides; when it finished, clear an ``upstream_late`` event raised about it."""
        key = (wr.workflow, wr.logical_ms)
        tasks = self.waits.get(key)
        if tasks:
            got = self.book.version(wr.workflow, wr.version)
            dag = got[1] if got is not None else None
            budget = RELEASE_PER_COMMAND
            for task_name in sorted(tasks):
                if task_name:
                    if dag is None:
                        continue
                    idx = dag.index.get(task_name)
                    if idx is None or wr.tasks[idx].state not in _TASK_DECIDES:
                        continue
                elif wr.state not in _RUN_DECIDES:
                    continue
                waiters = [w for w in sorted(tasks.get(task_name, ())) if self._live(w) is not None]
                self.releases.update(waiters[budget:])  # decided by the next WorkflowWaitsDue
                self._wake(waiters[:budget], wr, dag, now, epoch, effects)
                budget = max(0, budget - len(waiters))
            self._hint()
        if wr.state in _RUN_DECIDES:
            self._clear_late(wr, now)

    def _clear_late(self, wr: pb.WorkflowRun, now: int) -> None:
        dedupe = late_key(wr.workflow, wr.logical_ms)
        if not self.book.was_raised(dedupe):
            return
        state = pb.WorkflowRunState.Name(wr.state).removeprefix("WORKFLOW_")
        alert = pb.AlertRecord(
            kind=UPSTREAM_LATE,
            error=f"upstream workflow {wr.workflow!r} run {wr.run_id} finished {state}: no longer late",
            workflow=wr.workflow,
            workflow_run=wr.run_id,
            run_id=wr.run_id,
            dedupe=dedupe + "/cleared",
            resolved=True,
        )
        self._stamp_owner(alert, wr.workflow)
        self.book.raise_late(alert, now)

    def _stamp_owner(self, alert: pb.AlertRecord, workflow: str) -> None:
        got = self.book.version(workflow, 0)
        if got is not None:
            alert.owner = got[0].owner
            alert.namespace = got[0].namespace or "default"

    def _wake(
        self,
        waiters: Iterable[Waiter],
        upstream: pb.WorkflowRun,
        upstream_dag: Dag | None,
        now: int,
        epoch: int,
        effects: list[Effect],
    ) -> None:
        book = self.book
        touched: dict[str, pb.WorkflowRun] = {}
        for _, run_id, i, j in waiters:
            down = book.runs.get(run_id)
            if down is None:
                continue
            ext = book.dag_of(down).externals(i)[j]
            got = decides(ext, upstream, upstream_dag)
            if got is None:
                continue
            state, met = got
            ready = self._resolve(down, i, j, ext, upstream.run_id, state, met, now)
            book.queue_ready(down, ready)
            touched[run_id] = down
        self._settle_all(touched, now, epoch, effects)

    def _settle_all(
        self, touched: dict[str, pb.WorkflowRun], now: int, epoch: int, effects: list[Effect]
    ) -> None:
        for run_id in sorted(touched):
            down = touched[run_id]
            self.book.start_ready(down.workflow, now, epoch, effects)
            self.book.settle(down, now, epoch, effects)

    def _resolve(
        self,
        wr: pb.WorkflowRun,
        i: int,
        j: int,
        ext: External,
        upstream_run: str,
        state: int,
        met: bool,
        now: int,
    ) -> list[int]:
        reason = describe(ext, upstream_run, state, met)
        outcome = pb.EXTERNAL_MET if met else pb.EXTERNAL_UNMET
        ready = wfrun.resolve_external(self.book.dag_of(wr), wr, i, j, outcome, upstream_run, now, reason)
        self._unindex((wr.logical_ms, wr.run_id, i, j))
        self.book.put_run(wr)
        return ready

    def expire(self, now: int, epoch: int, effects: list[Effect]) -> int:
        """Deadlines that have come at leader time ``now`` (``WorkflowWaitsDue``): an edge whose
        timeout has passed ends its task (on_timeout: FAILED or SKIPPED); an upstream an edge has
        waited on past its warn_after gets one ``upstream_late`` event. Returns how many deadlines
        acted (stale ones - the edge was decided meanwhile - are dropped)."""
        acted = 0
        self.expiries += 1
        touched: dict[str, pb.WorkflowRun] = {}
        late: dict[tuple[str, int], int] = {}  # upstream -> the longest wait among those due
        decided: dict[tuple[External, int], tuple[str, int, bool] | None] = {}
        # Timeouts (and warnings, which cost little and do not count) first, then releases: the
        # same order on every replica, whatever stale entries its heap holds.
        while self.deadlines and self.deadlines[0][0] <= now and acted < RELEASE_PER_COMMAND:
            _, kind, waiter = heapq.heappop(self.deadlines)
            down = self._live(waiter)
            if down is None:
                continue
            _, run_id, i, j = waiter
            wait = down.tasks[i].external[j]
            if kind == _WARN:
                key = self.where[waiter][0]
                late[key] = max(late.get(key, 0), now - wait.since_ms)
                continue
            ext = self.book.dag_of(down).externals(i)[j]
            what = f'upstream workflow "{ext.workflow}"' + (f' task "{ext.task}"' if ext.task else "")
            reason = (
                f"{what} run of logical time {logical_text(wait.logical_ms)} did not finish within "
                f"{_duration(ext.timeout_ms)} (on_timeout: {'fail' if ext.fail_on_timeout else 'skip'})"
            )
            ready = wfrun.resolve_external(
                self.book.dag_of(down),
                down,
                i,
                j,
                pb.EXTERNAL_TIMED_OUT,
                "",
                now,
                reason,
                fail=ext.fail_on_timeout,
            )
            self._unindex(waiter)
            self.book.put_run(down)
            self.book.queue_ready(down, ready)
            touched[run_id] = down
            acted += 1
        for waiter in sorted(self.releases):  # an upstream decided more than one command takes
            if acted >= RELEASE_PER_COMMAND:
                break
            self.releases.discard(waiter)
            found_run = self._live(waiter)
            if found_run is None:
                continue
            _, run_id, i, j = waiter
            ext = self.book.dag_of(found_run).externals(i)[j]
            logical = found_run.tasks[i].external[j].logical_ms
            if (ext, logical) not in decided:
                decided[(ext, logical)] = self._already_decided(ext, logical)
            found = decided[(ext, logical)]
            if found is None:  # undecided again (its upstream is being rerun): it waits on
                continue
            ready = self._resolve(found_run, i, j, ext, *found, now)
            self.book.queue_ready(found_run, ready)
            touched[run_id] = found_run
            acted += 1
        for key in sorted(late):
            self._raise_late(key, late[key], now)
        self._settle_all(touched, now, epoch, effects)
        self._hint()
        return acted

    def _raise_late(self, key: tuple[str, int], waited_ms: int, now: int) -> None:
        workflow, logical = key
        held = sorted({(w[1], w[2]) for ws in self.waits.get(key, {}).values() for w in ws})
        downstream = sorted({run_id.rpartition("@")[0] for run_id, _ in held})
        shown = ", ".join(downstream[:5]) + (
            f" and {len(downstream) - 5} more" if len(downstream) > 5 else ""
        )
        alert = pb.AlertRecord(
            kind=UPSTREAM_LATE,
            error=(
                f"upstream workflow {workflow!r} run of logical time {logical_text(logical)} is "
                f"{_duration(waited_ms)} late: it holds {len(held)} downstream task(s) waiting "
                f"(workflows {shown})"
            ),
            workflow=workflow,
            dedupe=late_key(workflow, logical),
        )
        self._stamp_owner(alert, workflow)
        self.book.raise_late(alert, now)

    def _already_decided(self, ext: External, logical: int) -> tuple[str, int, bool] | None:
        """Among the runs of ``ext.workflow`` at ``logical`` (stored, or changed by this command):
        one that met the edge, else the last to finish that decided it unmet, else None."""
        if logical < 0:
            return None
        best_unmet: tuple[int, str, int] | None = None
        for wr in self.book.runs_at(ext.workflow, logical):
            run_id = wr.run_id
            got = self.book.version(ext.workflow, wr.version)
            dag = got[1] if got is not None else None
            decided = decides(ext, wr, dag)
            if decided is None:
                continue
            state, met = decided
            if met:
                return run_id, state, True
            rank = (wr.finished_ms, run_id, state)
            if best_unmet is None or rank > best_unmet:
                best_unmet = rank
        if best_unmet is None:
            return None
        return best_unmet[1], best_unmet[2], False


def upstreams(spec: pb.WorkflowSpec, *, same_time_only: bool = False) -> list[str]:
    """The workflows ``spec`` depends on (sorted, each once); ``same_time_only``: only through
    edges at the same logical time (the ones a cycle of which could never be met)."""
    return sorted(
        {
            d.workflow
            for t in spec.tasks
            for d in t.depends_on
            if d.workflow and (not same_time_only or d.logical_offset_ms == 0)
        }
    )


def check_upstreams(spec: pb.WorkflowSpec, workflows: dict[str, pb.WorkflowSpec]) -> None:
    """Refuse ``spec`` (about to be applied) if a cross-workflow dependency names a workflow that
    does not exist, a task its current version lacks, or closes a cycle of same-logical-time
    dependencies across workflows (``a → b → a``). Raises InvalidSpec naming the field. Pure.

    Offsets are never positive (validation), so a loop through an earlier logical time (``-1d``)
    always ends: only a loop made of ``same`` edges is a deadlock."""
    from raftsched.errors import InvalidSpec
    from raftsched.workflow.dag import find_cycle

    for i, task in enumerate(spec.tasks):
        for k, dep in enumerate(task.depends_on):
            if not dep.workflow:
                continue
            path = f"tasks[{i}].depends_on[{k}]"
            upstream = workflows.get(dep.workflow)
            if upstream is None:
                raise InvalidSpec(
                    f"{path}.workflow",
                    f"no workflow {dep.workflow!r} (task {task.name!r} depends on it; apply it first)",
                )
            if dep.task and all(t.name != dep.task for t in upstream.tasks):
                raise InvalidSpec(f"{path}.task", f"workflow {dep.workflow!r} has no task {dep.task!r}")
    graph = {name: upstreams(s, same_time_only=True) for name, s in workflows.items()}
    graph[spec.name] = upstreams(spec, same_time_only=True)
    names = sorted(graph)
    cycle = find_cycle(names, graph)
    if cycle is not None:
        if spec.name in cycle:  # shown from the workflow being applied
            at = cycle.index(spec.name)
            cycle = [*cycle[at:-1], *cycle[:at], spec.name]
        raise InvalidSpec(
            "depends_on",
            f"cross-workflow cycle: {' → '.join(cycle)} (each waits for the other's run at the same "
            "logical time; one of them must depend on an earlier one, e.g. logical: -1d)",
        )
