"""Topological layers of a workflow's DAG (what ``workflow graph`` draws)."""

from __future__ import annotations

import pytest

from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.layout import graph_layers


def spec_of(*tasks: tuple[str, list[str]]) -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name="w")
    for name, deps in tasks:
        spec.tasks.add(name=name, command="true", depends_on=[pb.Dependency(task=d) for d in deps])
    return spec


def test_layers_follow_the_longest_dependency_chain() -> None:
    spec = spec_of(
        ("extract", []),
        ("validate", ["extract"]),
        ("load", ["extract", "validate"]),
        ("alert", ["validate"]),
        ("cleanup", ["load", "alert"]),
    )
    assert graph_layers(spec) == [[0], [1], [2, 3], [4]]


def test_every_edge_points_to_a_later_layer_and_spec_order_holds_within_a_layer() -> None:
    # Listed out of topological order: a layer keeps spec order, not discovery order.
    spec = spec_of(("d", ["b", "c"]), ("c", ["a"]), ("b", []), ("a", []), ("e", ["a", "d"]))
    layers = graph_layers(spec)
    assert layers == [[2, 3], [1], [0], [4]]
    layer_of = {i: n for n, layer in enumerate(layers) for i in layer}
    for i, task in enumerate(spec.tasks):
        for dep in task.depends_on:
            j = next(k for k, t in enumerate(spec.tasks) if t.name == dep.task)
            assert layer_of[j] < layer_of[i]


def test_independent_tasks_share_layer_zero_and_no_tasks_means_no_layers() -> None:
    assert graph_layers(spec_of(("a", []), ("b", []), ("c", []))) == [[0, 1, 2]]
    assert graph_layers(pb.WorkflowSpec(name="empty")) == []


def test_a_cycle_is_refused() -> None:
    with pytest.raises(ValueError):
        graph_layers(spec_of(("a", ["b"]), ("b", ["a"])))
