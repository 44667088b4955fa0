"""Laying a workflow's DAG out for display: tasks grouped into topological layers.

Pure and deterministic, like :mod:`raftsched.workflow.dag`, which it builds on: the same spec
always gives the same layers, in spec order within each layer.
"""

from __future__ import annotations

from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.dag import compile_dag

__all__ = ["graph_layers"]


def graph_layers(spec: pb.WorkflowSpec) -> list[list[int]]:
    """Task indexes by topological layer: layer 0 has no dependencies; a task's layer is one more
    than its deepest dependency's (so every edge points to a later layer). Spec order within a layer.

    Raises ValueError, as :func:`raftsched.workflow.dag.compile_dag` does, for a spec that
    validation would have refused."""
    dag = compile_dag(spec)
    depth = [0] * len(dag.names)
    for i in dag.topo:
        depth[i] = max((depth[j] + 1 for j, _ in dag.upstream[i]), default=0)
    layers: list[list[int]] = [[] for _ in range(max(depth, default=-1) + 1)]
    for i in range(len(dag.names)):
        layers[depth[i]].append(i)
    return layers
