"""A workflow's task graph, compiled once into index-based adjacency lists.

Pure: no clock, no IO, no randomness, and every result is deterministic (ties are broken by the
order of the tasks in the spec, never by set or hash order), so every replica computes the same
graph, the same topological order and the same lineage.

Edges point *downstream*: ``a → b`` means ``b`` depends on ``a`` (``a`` runs first). A task's
``upstream`` entries are its dependencies; its ``downstream`` entries are the tasks that depend on
it, which is what run completion walks (work proportional to the out-degree).

Nothing here recurses, so graphs of any size (the validated limit is 10,000 tasks) are safe.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from raftsched.errors import NotFound
from raftsched.v1 import raftsched_pb2 as pb

__all__ = [
    "LINEAGE_MAX_DEPTH",
    "LINEAGE_MAX_NODES",
    "CrossNode",
    "Dag",
    "External",
    "compile_dag",
    "cross_workflow_lineage",
    "downstream_closure",
    "find_cycle",
    "lineage",
]


@dataclass(frozen=True, slots=True)
class Dag:
    """The compiled graph of one workflow version. Task ``i`` is ``spec.tasks[i]``.

    ``upstream[i]`` lists ``(dependency index, condition)`` in the order of the task's
    ``depends_on``; ``downstream[i]`` lists ``(child index, condition of that edge)`` in spec order
    of the children. Conditions are normalised (``CONDITION_UNSPECIFIED`` becomes ``ON_SUCCESS``),
    as are rules (``RULE_UNSPECIFIED`` becomes ``RULE_ALL``). ``topo`` is Kahn's order with ties
    broken by spec order, so it equals the spec order whenever the spec order is already
    topological.
    """

    names: tuple[str, ...]
    index: Mapping[str, int]
    upstream: tuple[tuple[tuple[int, int], ...], ...]
    downstream: tuple[tuple[tuple[int, int], ...], ...]
    rule: tuple[int, ...]
    topo: tuple[int, ...]
    external: tuple[tuple[External, ...], ...] = ()
    """Per task, its cross-workflow dependencies (empty tuple for none; ``()`` if no task has
    any). They are not edges of this graph: the state machine resolves them (see
    :mod:`raftsched.workflow.run`, ``resolve_external``)."""

    def externals(self, idx: int) -> tuple[External, ...]:
        return self.external[idx] if self.external else ()


@dataclass(frozen=True, slots=True)
class External:
    """One cross-workflow dependency: ``k`` is its index in the task's ``depends_on`` and in the
    task run's ``external`` list order; the upstream is ``workflow``'s run (``task`` of it, or the
    whole run when empty) whose logical time is the downstream run's plus ``offset_ms``."""

    k: int
    workflow: str
    task: str
    condition: int
    offset_ms: int
    timeout_ms: int = 0  # 0: waits for ever
    fail_on_timeout: bool = True  # on_timeout: fail (else skip)
    warn_after_ms: int = 0  # the edge's warn_after, else the workflow's (0: no upstream_late alert)


def _condition(value: int) -> int:
    return pb.ON_SUCCESS if value == pb.CONDITION_UNSPECIFIED else value


def _rule(value: int) -> int:
    return pb.RULE_ALL if value == pb.RULE_UNSPECIFIED else value


def compile_dag(spec: pb.WorkflowSpec) -> Dag:
    """Compile a *validated* spec (see :func:`raftsched.workflow.validate.validate_workflow`).

    Raises ``ValueError`` for a spec that validation would have refused (duplicate task, unknown
    dependency, cycle): inside the state machine that is an invariant violation, not user error.
    Cost: O((tasks + edges) · log tasks).
    """
    names = tuple(task.name for task in spec.tasks)
    index: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in index:
            raise ValueError(f"workflow {spec.name!r}: duplicate task {name!r}")
        index[name] = i
    upstream: list[tuple[tuple[int, int], ...]] = []
    children: list[list[tuple[int, int]]] = [[] for _ in names]
    external: list[tuple[External, ...]] = []
    for i, task in enumerate(spec.tasks):
        edges = []
        outside: list[External] = []
        for k, dep in enumerate(task.depends_on):
            if dep.workflow:
                outside.append(
                    External(
                        k,
                        dep.workflow,
                        dep.task,
                        _condition(dep.condition),
                        dep.logical_offset_ms,
                        dep.timeout_ms,
                        dep.on_timeout != pb.UPSTREAM_TIMEOUT_SKIP,
                        dep.warn_after_ms or spec.warn_after_ms,
                    )
                )
                continue
            j = index.get(dep.task)
            if j is None:
                raise ValueError(
                    f"workflow {spec.name!r}: task {task.name!r} depends on unknown {dep.task!r}"
                )
            cond = _condition(dep.condition)
            edges.append((j, cond))
            children[j].append((i, cond))
        upstream.append(tuple(edges))
        external.append(tuple(outside))
    topo = _kahn([[j for j, _ in edges] for edges in upstream], children)
    if len(topo) != len(names):
        deps = {names[i]: [names[j] for j, _ in edges] for i, edges in enumerate(upstream)}
        cycle = find_cycle(names, deps) or []
        raise ValueError(f"workflow {spec.name!r} has a cycle: {' → '.join(cycle)}")
    return Dag(
        names=names,
        index=MappingProxyType(index),
        upstream=tuple(upstream),
        downstream=tuple(tuple(c) for c in children),
        rule=tuple(_rule(task.trigger_rule) for task in spec.tasks),
        topo=tuple(topo),
        external=tuple(external) if any(external) else (),
    )


def _kahn(parents: Sequence[Sequence[int]], children: Sequence[Sequence[tuple[int, int]]]) -> list[int]:
    """Kahn's algorithm with a min-heap of ready indices (ties by spec order).

    Returns fewer than ``len(parents)`` indices when a cycle blocks the rest.
    """
    waiting = [len(p) for p in parents]
    ready = [i for i, w in enumerate(waiting) if w == 0]  # ascending, hence already a heap
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for child, _ in children[i]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, child)
    return order


def find_cycle(names: Sequence[str], deps: Mapping[str, Iterable[str]]) -> list[str] | None:
    """Return one cycle as a closed path in flow order (``["a", "b", "c", "a"]``), or None.

    ``deps`` maps a task name to the names it depends on; names missing from ``names`` are ignored
    (validation reports them separately), a self-dependency is the cycle ``["a", "a"]``. The path
    follows the edges downstream (``a → b``: ``b`` depends on ``a``) and starts at the task of the
    cycle that comes first in ``names``, so the answer is deterministic. Iterative DFS: no
    recursion limit, O(tasks + edges).
    """
    index: dict[str, int] = {}
    for i, name in enumerate(names):
        index.setdefault(name, i)
    children: list[list[int]] = [[] for _ in names]
    for i, name in enumerate(names):
        if index[name] != i:
            continue  # a duplicate name: its first occurrence stands for it
        for dep in deps.get(name, ()):
            j = index.get(dep)
            if j is not None:
                children[j].append(i)
    white, grey, black = 0, 1, 2
    colour = [white] * len(names)
    for root in range(len(names)):
        if colour[root] != white:
            continue
        path = [root]  # the grey nodes, root first
        cursors = [0]  # next child to look at, per entry of path
        colour[root] = grey
        while path:
            node = path[-1]
            kids = children[node]
            if cursors[-1] < len(kids):
                child = kids[cursors[-1]]
                cursors[-1] += 1
                if colour[child] == grey:
                    cycle = path[path.index(child) :]
                    first = cycle.index(min(cycle))
                    cycle = cycle[first:] + cycle[:first]
                    return [names[i] for i in [*cycle, cycle[0]]]
                if colour[child] == white:
                    colour[child] = grey
                    path.append(child)
                    cursors.append(0)
            else:
                colour[node] = black
                path.pop()
                cursors.pop()
    return None


def lineage(dag: Dag, task: str, direction: Literal["up", "down"]) -> list[tuple[str, int]]:
    """Every ancestor (``"up"``) or descendant (``"down"``) of ``task`` with its shortest depth.

    Depth 1 is a direct dependency (or dependent). The task itself is not included. Sorted by
    ``(depth, spec order)``. Raises :class:`~raftsched.errors.NotFound` for an unknown task.
    """
    start = dag.index.get(task)
    if start is None:
        raise NotFound(f"no task {task!r} in this workflow")
    adjacency = dag.upstream if direction == "up" else dag.downstream
    depth = {start: 0}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt, _ in adjacency[node]:
            if nxt not in depth:
                depth[nxt] = depth[node] + 1
                queue.append(nxt)
    del depth[start]
    return [(dag.names[i], d) for i, d in sorted(depth.items(), key=lambda item: (item[1], item[0]))]


def downstream_closure(dag: Dag, idx: int) -> list[int]:
    """``idx`` and every task downstream of it, in ``dag.topo`` order (what a rerun re-queues)."""
    seen = {idx}
    stack = [idx]
    while stack:
        node = stack.pop()
        for child, _ in dag.downstream[node]:
            if child not in seen:
                seen.add(child)
                stack.append(child)
    if len(seen) == 1:
        return [idx]
    return [i for i in dag.topo if i in seen]


LINEAGE_MAX_DEPTH = 10
"""The most cross-workflow hops :func:`cross_workflow_lineage` follows (a larger depth is capped)."""
LINEAGE_MAX_NODES = 500
"""The most workflow tasks :func:`cross_workflow_lineage` lists per direction (then ``truncated``)."""


@dataclass(frozen=True, slots=True)
class CrossNode:
    """One workflow task (``task`` ``""``: the whole run) in a cross-workflow lineage: reached in
    ``hop`` cross-workflow edges from ``via`` (``workflow:task``); its run that matters is at the
    start's logical time plus ``logical_offset_ms`` (offsets add up along the path)."""

    workflow: str
    task: str
    hop: int
    logical_offset_ms: int
    via: str

    @property
    def label(self) -> str:
        return f"{self.workflow}:{self.task or '*'}"


def _local_closure(spec: pb.WorkflowSpec, task: str, direction: Literal["up", "down"]) -> list[str]:
    """``task`` and its local ancestors (or descendants) in ``spec``, in spec order; ``task``
    ``""`` (a whole run) is every task."""
    names = [t.name for t in spec.tasks]
    if not task:
        return names
    if direction == "up":
        adj = {t.name: [d.task for d in t.depends_on if not d.workflow] for t in spec.tasks}
    else:
        adj = {n: [] for n in names}
        for t in spec.tasks:
            for d in t.depends_on:
                if not d.workflow and d.task in adj:
                    adj[d.task].append(t.name)
    seen = {task}
    stack = [task]
    while stack:
        for nxt in adj.get(stack.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return [n for n in names if n in seen]


def cross_workflow_lineage(
    workflow: str,
    task: str,
    specs: Mapping[str, pb.WorkflowSpec],
    direction: Literal["up", "down"],
    depth: int = LINEAGE_MAX_DEPTH,
) -> tuple[list[CrossNode], bool]:
    """The workflow tasks across workflows that ``workflow``'s ``task`` transitively depends on
    (``"up"``: upstream of it or of a local ancestor, then upstream of those...) or that depend on
    it (``"down"``), following at most ``depth`` cross-workflow hops (capped at
    :data:`LINEAGE_MAX_DEPTH`), over the current ``specs`` by name. Breadth first, so each task
    appears once with its fewest hops; cycles end where a task was seen. Returns the nodes (by hop,
    then label) and whether :data:`LINEAGE_MAX_NODES` cut the walk short. Pure."""
    depth = max(0, min(depth, LINEAGE_MAX_DEPTH))
    # Who depends on each workflow, built once: (dependent workflow, its task, the edge).
    dependents: dict[str, list[tuple[str, str, pb.Dependency]]] = {}
    if direction == "down":
        for name in sorted(specs):
            for st in specs[name].tasks:
                for d in st.depends_on:
                    if d.workflow and d.workflow != name:
                        dependents.setdefault(d.workflow, []).append((name, st.name, d))
    start = (workflow, task)
    seen = {start}
    found: list[CrossNode] = []
    frontier: list[tuple[str, str, int]] = [(workflow, task, 0)]
    truncated = False
    for hop in range(1, depth + 1):
        nxt: list[tuple[str, str, int]] = []
        for wf, t, offset in frontier:
            spec = specs.get(wf)
            if spec is None:
                continue  # deleted (forced) or unreadable: listed, not followed
            via = f"{wf}:{t or '*'}"
            if direction == "up":
                local = set(_local_closure(spec, t, "up"))
                edges = [
                    (d.workflow, d.task, offset + d.logical_offset_ms)
                    for st in spec.tasks
                    if st.name in local
                    for d in st.depends_on
                    if d.workflow
                ]
            else:
                local = set(_local_closure(spec, t, "down"))
                edges = [
                    (name, st_name, offset - d.logical_offset_ms)
                    for name, st_name, d in dependents.get(wf, ())
                    if not d.task or d.task in local
                ]
            for up_wf, up_task, off in edges:
                if (up_wf, up_task) in seen:
                    continue
                if len(found) >= LINEAGE_MAX_NODES:
                    truncated = True
                    break
                seen.add((up_wf, up_task))
                found.append(CrossNode(up_wf, up_task, hop, off, via))
                nxt.append((up_wf, up_task, off))
        frontier = nxt
        if not frontier or truncated:
            break
    found.sort(key=lambda n: (n.hop, n.label))
    return found, truncated
