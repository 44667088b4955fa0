"""Geometry of the console's drawings: a workflow's DAG in layers, and a Gantt chart of states.

Pure and deterministic (no clock: the caller passes "now"); the templates turn these values into
SVG. The DAG is drawn left to right: one column per topological layer
(:func:`raftsched.workflow.layout.graph_layers`), tasks in spec order within a column, each edge
a curve from the right side of the upstream box to the left side of the downstream one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.layout import graph_layers

__all__ = ["Bar", "Box", "Dag", "Edge", "Gantt", "GanttRow", "dag_geometry", "gantt_geometry"]

BOX_W: Final = 150
BOX_H: Final = 36
COL_GAP: Final = 70
ROW_GAP: Final = 18
PAD: Final = 10

GANTT_W: Final = 640
GANTT_LABEL_W: Final = 150
GANTT_ROW_H: Final = 24


@dataclass(frozen=True, slots=True)
class Box:
    """One task: top-left corner, its state (``""`` when drawing a definition) and its part in a
    lineage highlight: ``focus`` (the task asked about), ``up``, ``down`` or ``""``."""

    name: str
    x: int
    y: int
    w: int
    h: int
    layer: int
    state: str = ""
    mark: str = ""


@dataclass(frozen=True, slots=True)
class Edge:
    """One dependency: an SVG path from ``upstream`` to ``downstream``; ``condition`` is ``""``
    for on-success edges; ``lit`` when both ends are in the highlighted lineage."""

    upstream: str
    downstream: str
    d: str
    condition: str = ""
    lit: bool = False


@dataclass(frozen=True, slots=True)
class Dag:
    width: int
    height: int
    boxes: tuple[Box, ...]
    edges: tuple[Edge, ...]


_CONDITION: Final = {pb.ON_FAILURE: "on failure", pb.ON_DONE: "on done"}


def dag_geometry(
    spec: pb.WorkflowSpec,
    states: Mapping[str, str] | None = None,
    focus: str = "",
    upstream: Collection[str] = (),
    downstream: Collection[str] = (),
) -> Dag:
    """Boxes and edges of ``spec``'s DAG. ``states`` colours boxes by task state; ``focus`` with
    its ``upstream`` and ``downstream`` task names marks a lineage. Raises ValueError for a spec
    validation would refuse (as :func:`graph_layers` does)."""
    layers = graph_layers(spec)
    names = [t.name for t in spec.tasks]
    states = states or {}
    up, down = set(upstream), set(downstream)
    tallest = max((len(layer) for layer in layers), default=0)
    height = 2 * PAD + tallest * BOX_H + max(tallest - 1, 0) * ROW_GAP
    boxes: dict[str, Box] = {}
    for col, layer in enumerate(layers):
        column_h = len(layer) * BOX_H + max(len(layer) - 1, 0) * ROW_GAP
        top = PAD + (height - 2 * PAD - column_h) // 2  # centre each column vertically
        for row, index in enumerate(layer):
            name = names[index]
            mark = "focus" if name == focus else "up" if name in up else "down" if name in down else ""
            boxes[name] = Box(
                name=name,
                x=PAD + col * (BOX_W + COL_GAP),
                y=top + row * (BOX_H + ROW_GAP),
                w=BOX_W,
                h=BOX_H,
                layer=col,
                state=states.get(name, ""),
                mark=mark,
            )
    lineage = up | down | ({focus} if focus else set())
    edges: list[Edge] = []
    for task in spec.tasks:
        for dep in task.depends_on:
            if dep.workflow:
                continue  # another workflow's run: not a box of this graph (the task page lists it)
            a, b = boxes[dep.task], boxes[task.name]
            x1, y1 = a.x + a.w, a.y + a.h // 2
            x2, y2 = b.x, b.y + b.h // 2
            bend = (x2 - x1) // 2
            edges.append(
                Edge(
                    upstream=dep.task,
                    downstream=task.name,
                    d=f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2 - 6},{y2}",
                    condition=_CONDITION.get(dep.condition, ""),
                    lit=bool(focus) and dep.task in lineage and task.name in lineage,
                )
            )
    width = 2 * PAD + len(layers) * BOX_W + max(len(layers) - 1, 0) * COL_GAP
    return Dag(width=width, height=height, boxes=tuple(boxes[n] for n in names), edges=tuple(edges))


@dataclass(frozen=True, slots=True)
class Bar:
    """One state of one row, from ``start_ms`` to ``end_ms``, drawn at ``x`` with width ``w``."""

    state: str
    start_ms: int
    end_ms: int
    x: float
    w: float


@dataclass(frozen=True, slots=True)
class GanttRow:
    name: str
    y: int
    bars: tuple[Bar, ...]


@dataclass(frozen=True, slots=True)
class Gantt:
    """Rows of state bars on one time axis ``[start_ms, end_ms]`` scaled to ``GANTT_W`` pixels
    right of a ``GANTT_LABEL_W`` label column."""

    width: int
    height: int
    label_w: int
    start_ms: int
    end_ms: int
    rows: tuple[GanttRow, ...]


_FINAL: Final = frozenset({"success", "failed", "timeout", "skipped", "killed"})


def gantt_geometry(
    rows: Sequence[tuple[str, Sequence[tuple[str, int]]]], start_ms: int, end_ms: int
) -> Gantt:
    """A Gantt chart of ``rows``: ``(name, [(state, at_ms), ...])`` with each row's transitions
    oldest first. A state lasts until the next transition; the last one until ``end_ms`` (the
    run's end, or now while it runs), except a final state, which is drawn as a thin mark."""
    end_ms = max(end_ms, start_ms + 1)
    span = end_ms - start_ms

    def x_of(ms: int) -> float:
        return GANTT_LABEL_W + (min(max(ms, start_ms), end_ms) - start_ms) * GANTT_W / span

    out: list[GanttRow] = []
    for i, (name, changes) in enumerate(rows):
        bars: list[Bar] = []
        for j, (state, at) in enumerate(changes):
            until = changes[j + 1][1] if j + 1 < len(changes) else end_ms
            if j + 1 == len(changes) and state in _FINAL:
                until = at
            x1, x2 = x_of(at), x_of(until)
            bars.append(Bar(state, at, until, round(x1, 1), round(max(x2 - x1, 3.0), 1)))
        out.append(GanttRow(name, PAD + i * GANTT_ROW_H, tuple(bars)))
    height = 2 * PAD + len(rows) * GANTT_ROW_H + 14  # room for the axis labels
    return Gantt(GANTT_LABEL_W + GANTT_W + PAD, height, GANTT_LABEL_W, start_ms, end_ms, tuple(out))
