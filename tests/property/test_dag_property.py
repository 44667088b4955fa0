"""Random graphs against dumb oracles: topological order, cycle detection, lineage depth, closure."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.dag import compile_dag, downstream_closure, find_cycle, lineage

CONDITIONS = st.sampled_from([pb.CONDITION_UNSPECIFIED, pb.ON_SUCCESS, pb.ON_FAILURE, pb.ON_DONE])


@st.composite
def dags(draw: st.DrawFn, max_tasks: int = 25) -> pb.WorkflowSpec:
    """An acyclic spec: a random hidden rank order, edges only from lower to higher rank, shuffled."""
    n = draw(st.integers(min_value=1, max_value=max_tasks))
    rank = draw(st.permutations(range(n)))  # rank[i]: the position of task i in a hidden order
    spec = pb.WorkflowSpec(name="wf")
    for i in range(n):
        task = spec.tasks.add(name=f"t{i}", command="true")
        lower = [j for j in range(n) if rank[j] < rank[i]]
        if lower:
            for j in draw(st.lists(st.sampled_from(lower), unique=True, max_size=4)):
                task.depends_on.add(task=f"t{j}", condition=draw(CONDITIONS))
    return spec


@st.composite
def graphs(draw: st.DrawFn) -> tuple[list[str], dict[str, list[str]]]:
    """Any directed graph (cycles and self-loops included) on up to 8 nodes."""
    n = draw(st.integers(min_value=0, max_value=8))
    names = [f"n{i}" for i in range(n)]
    deps = {
        name: draw(st.lists(st.sampled_from(names), unique=True, max_size=3)) if names else []
        for name in names
    }
    return names, deps


def naive_has_cycle(names: Sequence[str], deps: Mapping[str, Sequence[str]]) -> bool:
    """A cycle exists iff some node reaches itself (fine for 8 nodes)."""

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(deps.get(start, []))
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(deps.get(node, []))
        return seen

    return any(name in reach(name) for name in names)


@settings(max_examples=300, deadline=None)
@given(dags())
def test_topo_order_respects_every_edge(spec: pb.WorkflowSpec) -> None:
    dag = compile_dag(spec)
    assert sorted(dag.topo) == list(range(len(spec.tasks)))
    position = {task: pos for pos, task in enumerate(dag.topo)}
    for i, edges in enumerate(dag.upstream):
        for j, cond in edges:
            assert position[j] < position[i]
            assert (i, cond) in dag.downstream[j]
            assert cond in (pb.ON_SUCCESS, pb.ON_FAILURE, pb.ON_DONE)
    assert sum(map(len, dag.upstream)) == sum(map(len, dag.downstream))
    assert find_cycle(dag.names, {t.name: [d.task for d in t.depends_on] for t in spec.tasks}) is None


@settings(max_examples=500, deadline=None)
@given(graphs())
def test_find_cycle_finds_a_real_cycle_iff_one_exists(graph: tuple[list[str], dict[str, list[str]]]) -> None:
    names, deps = graph
    cycle = find_cycle(names, deps)
    assert (cycle is not None) == naive_has_cycle(names, deps)
    if cycle is not None:
        assert cycle[0] == cycle[-1] and len(cycle) >= 2
        assert len(set(cycle[:-1])) == len(cycle) - 1  # a simple cycle
        for upstream, downstream in itertools.pairwise(cycle):
            assert upstream in deps[downstream]  # each arrow: downstream depends on upstream


def bfs_depths(adjacency: dict[int, list[int]], start: int) -> dict[int, int]:
    """Oracle: level-by-level frontier expansion."""
    depths: dict[int, int] = {}
    frontier = {start}
    seen = {start}
    level = 0
    while frontier:
        level += 1
        nxt = {m for node in frontier for m in adjacency[node]} - seen
        for node in nxt:
            depths[node] = level
        seen |= nxt
        frontier = nxt
    return depths


@settings(max_examples=300, deadline=None)
@given(dags(), st.data())
def test_lineage_depth_equals_bfs_oracle(spec: pb.WorkflowSpec, data: st.DataObject) -> None:
    dag = compile_dag(spec)
    i = data.draw(st.integers(min_value=0, max_value=len(spec.tasks) - 1))
    up = {k: [j for j, _ in dag.upstream[k]] for k in range(len(dag.names))}
    down = {k: [j for j, _ in dag.downstream[k]] for k in range(len(dag.names))}
    for direction, adjacency in (("up", up), ("down", down)):
        expected = bfs_depths(adjacency, i)
        got = lineage(dag, dag.names[i], direction)  # type: ignore[arg-type]
        assert {dag.index[name]: depth for name, depth in got} == expected
        assert got == sorted(got, key=lambda item: (item[1], dag.index[item[0]]))
    closure = downstream_closure(dag, i)
    assert set(closure) == {i} | set(bfs_depths(down, i))
    assert closure == [t for t in dag.topo if t in set(closure)]
