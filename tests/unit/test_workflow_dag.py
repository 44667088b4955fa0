"""The compiled workflow graph: adjacency, topological order, cycles, lineage, rerun closure."""

from __future__ import annotations

import pytest

from raftsched.errors import NotFound
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.dag import compile_dag, downstream_closure, find_cycle, lineage


def spec(
    *tasks: tuple[str, list[str | tuple[str, int]]], rules: dict[str, int] | None = None
) -> pb.WorkflowSpec:
    out = pb.WorkflowSpec(name="wf")
    for name, deps in tasks:
        task = out.tasks.add(name=name, command="true", trigger_rule=(rules or {}).get(name, 0))
        for dep in deps:
            if isinstance(dep, tuple):
                task.depends_on.add(task=dep[0], condition=dep[1])
            else:
                task.depends_on.add(task=dep)
    return out


ETL = spec(("extract", []), ("validate", ["extract"]), ("load", ["extract", "validate"]))


def test_compile_adjacency_conditions_and_rules_are_normalised() -> None:
    s = spec(
        ("a", []),
        ("b", [("a", pb.ON_FAILURE)]),
        ("c", ["a", ("b", pb.ON_DONE)]),
        rules={"c": pb.RULE_ANY},
    )
    dag = compile_dag(s)
    assert dag.names == ("a", "b", "c")
    assert dict(dag.index) == {"a": 0, "b": 1, "c": 2}
    assert dag.upstream == ((), ((0, pb.ON_FAILURE),), ((0, pb.ON_SUCCESS), (1, pb.ON_DONE)))
    assert dag.downstream == (((1, pb.ON_FAILURE), (2, pb.ON_SUCCESS)), ((2, pb.ON_DONE),), ())
    assert dag.rule == (pb.RULE_ALL, pb.RULE_ALL, pb.RULE_ANY)
    assert dag.topo == (0, 1, 2)


def test_topo_is_kahn_with_ties_by_spec_order() -> None:
    dag = compile_dag(spec(("z", ["y"]), ("y", []), ("x", []), ("w", ["x", "z"])))
    assert [dag.names[i] for i in dag.topo] == ["y", "z", "x", "w"]  # after y: z (spec 0) before x (spec 2)


def test_compile_refuses_what_validation_refuses() -> None:
    with pytest.raises(ValueError, match="a → b → a"):
        compile_dag(spec(("a", ["b"]), ("b", ["a"])))
    with pytest.raises(ValueError, match="unknown"):
        compile_dag(spec(("a", ["nope"])))
    with pytest.raises(ValueError, match="duplicate"):
        compile_dag(spec(("a", []), ("a", [])))


def test_find_cycle_path_in_flow_order_from_first_task() -> None:
    # c depends on b, b on a, a on c: flow a → b → c → a
    names = ["x", "c", "a", "b"]
    deps = {"a": ["c"], "b": ["a"], "c": ["b"], "x": []}
    assert find_cycle(names, deps) == ["c", "a", "b", "c"]
    assert find_cycle(["a"], {"a": ["a"]}) == ["a", "a"]
    assert find_cycle(["a", "b"], {"b": ["a", "ghost"]}) is None


def test_find_cycle_is_iterative_on_long_chains() -> None:
    n = 20_000
    names = [f"t{i}" for i in range(n)]
    deps = {f"t{i}": [f"t{i - 1}"] for i in range(1, n)}
    assert find_cycle(names, deps) is None
    deps["t0"] = [f"t{n - 1}"]
    cycle = find_cycle(names, deps)
    assert cycle is not None and len(cycle) == n + 1 and cycle[0] == cycle[-1] == "t0"


def test_lineage_depths_are_shortest() -> None:
    dag = compile_dag(ETL)
    assert lineage(dag, "load", "up") == [("extract", 1), ("validate", 1)]
    assert lineage(dag, "extract", "down") == [("validate", 1), ("load", 1)]
    assert lineage(dag, "validate", "down") == [("load", 1)]
    assert lineage(dag, "extract", "up") == []
    with pytest.raises(NotFound):
        lineage(dag, "nope", "up")


def test_downstream_closure_in_topo_order() -> None:
    dag = compile_dag(spec(("a", []), ("d", ["c"]), ("b", ["a"]), ("c", ["b"]), ("e", [])))
    assert [dag.names[i] for i in downstream_closure(dag, dag.index["a"])] == ["a", "b", "c", "d"]
    assert downstream_closure(dag, dag.index["e"]) == [dag.index["e"]]
    assert [dag.names[i] for i in downstream_closure(dag, dag.index["c"])] == ["c", "d"]
