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

from collections.abc import Iterable
from typing import Protocol

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


class CrossDeps:
    """The index of waiting cross-workflow edges of one workflow book (same thread)."""

    def __init__(self, book: RunHost) -> None:
        self.book = book
        # (upstream workflow, upstream logical) -> upstream task ("" = whole run) -> waiters
        self.waits: dict[tuple[str, int], dict[str, set[Waiter]]] = {}
        self.by_run: dict[str, list[tuple[tuple[str, int], str, Waiter]]] = {}

    # -- index ----------------------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild the index from the book's active runs (after a restore)."""
        self.waits.clear()
        self.by_run.clear()
        for run_id in sorted(self.book.runs):
            self._index(self.book.runs[run_id])

    def _index(self, wr: pb.WorkflowRun) -> list[tuple[int, int, External]]:
        """Register the PENDING edges of ``wr``'s WAITING tasks not yet registered; returns them."""
        dag = self.book.dag_of(wr)
        if not dag.external:
            return []
        have = {w for _, _, w in self.by_run.get(wr.run_id, ())}
        added: list[tuple[int, int, External]] = []
        for i, task in enumerate(wr.tasks):
            if not task.external or task.state != pb.TASK_WAITING:
                continue
            exts = dag.externals(i)
            for j, wait in enumerate(task.external):
                if wait.state != pb.EXTERNAL_PENDING or j >= len(exts):
                    continue
                waiter: Waiter = (wr.logical_ms, wr.run_id, i, j)
                if waiter in have:
                    continue
                ext = exts[j]
                key = (ext.workflow, wait.logical_ms)
                self.waits.setdefault(key, {}).setdefault(ext.task, set()).add(waiter)
                self.by_run.setdefault(wr.run_id, []).append((key, ext.task, waiter))
                added.append((i, j, ext))
        return added

    def forget(self, run_id: str) -> None:
        """``run_id`` finished (or was deleted): its edges wait no more."""
        for key, task, waiter in self.by_run.pop(run_id, ()):
            tasks = self.waits.get(key)
            if tasks is None:
                continue
            bucket = tasks.get(task)
            if bucket is not None:
                bucket.discard(waiter)
                if not bucket:
                    del tasks[task]
            if not tasks:
                del self.waits[key]

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
        return ready

    def upstream_changed(self, wr: pb.WorkflowRun, now: int, epoch: int, effects: list[Effect]) -> None:
        """``wr`` (a run of any workflow) changed: decide the edges waiting on it that it now decides."""
        tasks = self.waits.get((wr.workflow, wr.logical_ms))
        if not tasks:
            return
        got = self.book.version(wr.workflow, wr.version)
        dag = got[1] if got is not None else None
        for task_name in sorted(tasks):
            if task_name:
                if dag is None:
                    continue
                idx = dag.index.get(task_name)
                if idx is None or wr.tasks[idx].state not in _TASK_DECIDES:
                    continue
            elif wr.state not in _RUN_DECIDES:
                continue
            waiters = sorted(tasks.get(task_name, ()))
            self._wake(waiters, wr, dag, now, epoch, effects)

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
        for run_id in sorted(touched):
            down = touched[run_id]
            book.start_ready(down.workflow, now, epoch, effects)
            book.settle(down, now, epoch, effects)

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
        ready = wfrun.resolve_external(self.book.dag_of(wr), wr, i, j, met, upstream_run, now, reason)
        self._unindex(wr.run_id, (wr.logical_ms, wr.run_id, i, j))
        self.book.put_run(wr)
        return ready

    def _unindex(self, run_id: str, waiter: Waiter) -> None:
        entries = self.by_run.get(run_id)
        if not entries:
            return
        keep = []
        for key, task, w in entries:
            if w != waiter:
                keep.append((key, task, w))
                continue
            tasks = self.waits.get(key)
            if tasks is not None and task in tasks:
                tasks[task].discard(w)
                if not tasks[task]:
                    del tasks[task]
                if not tasks:
                    del self.waits[key]
        if keep:
            self.by_run[run_id] = keep
        else:
            del self.by_run[run_id]

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
