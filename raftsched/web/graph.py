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

__all__ = [
    "Bar",
    "Box",
    "Dag",
    "Edge",
    "Gantt",
    "GanttRow",
    "dag_geometry",
    "external_label",
    "gantt_geometry",
    "offset_text",
]

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
    external: str = ""  # another workflow's run or task (its name): drawn apart, links to it


@dataclass(frozen=True, slots=True)
class Edge:
    """One dependency: an SVG path from ``upstream`` to ``downstream``; ``condition`` is ``""``
    for on-success edges; ``lit`` when both ends are in the highlighted lineage."""

    upstream: str
    downstream: str
    d: str
    condition: str = ""
    lit: bool = False
    state: str = ""  # a cross-workflow edge in a run: waiting, met, not met, timed out
    external: str = ""  # the upstream's workflow, for an edge from another workflow


@dataclass(frozen=True, slots=True)
class Dag:
    width: int
    height: int
    boxes: tuple[Box, ...]
    edges: tuple[Edge, ...]


_CONDITION: Final = {pb.ON_FAILURE: "on failure", pb.ON_DONE: "on done"}


def external_label(dep: pb.Dependency) -> str:
    """How a cross-workflow upstream is named in the graph: ``workflow:task`` (``workflow:*`` for
    its whole run), with its logical offset when it has one (``fx-rates:* -1d``)."""
    label = f"{dep.workflow}:{dep.task or '*'}"
    if dep.logical_offset_ms:
        label += " " + offset_text(dep.logical_offset_ms)
    return label


def offset_text(ms: int) -> str:
    """A logical offset as a file writes it: ``-1d``, ``-90m``, ``+2h`` (``same`` for 0)."""
    if not ms:
        return "same"
    sign, n = ("-" if ms < 0 else "+"), abs(ms)
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if n % size == 0:
            return f"{sign}{n // size}{unit}"
    return f"{sign}{n}ms"


def dag_geometry(
    spec: pb.WorkflowSpec,
    states: Mapping[str, str] | None = None,
    focus: str = "",
    upstream: Collection[str] = (),
    downstream: Collection[str] = (),
    edge_states: Mapping[tuple[str, int], str] | None = None,
) -> Dag:
    """Boxes and edges of ``spec``'s DAG. ``states`` colours boxes by task state; ``focus`` with
    its ``upstream`` and ``downstream`` task names marks a lineage. Raises ValueError for a spec
    validation would refuse (as :func:`graph_layers` does).

    Cross-workflow upstreams (another workflow's run or task, at a logical offset) are drawn as
    external boxes, one per distinct upstream (``external`` holds its workflow's name), each with
    an edge to every task that depends on it. A box sits in the column just left of the first
    layer that depends on it, so its edge crosses no task: in a column of its own left of the
    graph for an upstream of the first layer, else in a row band below the tasks.
    ``edge_states`` (``(task, index in its depends_on) -> state``, from a run) labels those
    edges; an external box takes the state of its edges when they agree, else the least done
    (timed out, not met, waiting, met). With ``focus``, an external box that ``focus`` or a task
    upstream of it depends on is marked ``up`` (lineage crosses workflows)."""
    layers = graph_layers(spec)
    names = [t.name for t in spec.tasks]
    states = states or {}
    edge_states = edge_states or {}
    up, down = set(upstream), set(downstream)
    ext_labels: list[str] = []
    ext_workflow: dict[str, str] = {}
    ext_states: dict[str, list[str]] = {}
    feeds = up | ({focus} if focus else set())  # an external upstream of these is in the lineage
    ext_lit: set[str] = set()
    layer_of = {names[i]: n for n, layer in enumerate(layers) for i in layer}
    ext_col: dict[str, int] = {}  # the task layer left of which the box sits
    for task in spec.tasks:
        for i, dep in enumerate(task.depends_on):
            if dep.workflow:
                label = external_label(dep)
                if label not in ext_workflow:
                    ext_labels.append(label)
                    ext_workflow[label] = dep.workflow
                ext_col[label] = min(ext_col.get(label, layer_of[task.name]), layer_of[task.name])
                if task.name in feeds:
                    ext_lit.add(label)
                if (task.name, i) in edge_states:
                    ext_states.setdefault(label, []).append(edge_states[(task.name, i)])
    first = [label for label in ext_labels if ext_col[label] == 0]
    shift = 1 if first else 0  # a column of its own for upstreams of the first layer
    tallest = max([len(layer) for layer in layers] + [len(first)])
    band_top = PAD + tallest * (BOX_H + ROW_GAP)  # below the tasks: the other upstreams
    below: dict[int, int] = {}  # boxes so far in the band, per column
    for label in ext_labels:
        if ext_col[label] > 0:
            below[ext_col[label]] = below.get(ext_col[label], 0) + 1
    band = max(below.values(), default=0)
    height = 2 * PAD + (tallest + band) * BOX_H + max(tallest + band - 1, 0) * ROW_GAP
    externals: dict[str, Box] = {}
    column_h = len(first) * BOX_H + max(len(first) - 1, 0) * ROW_GAP
    top = PAD + (tallest * (BOX_H + ROW_GAP) - ROW_GAP - column_h) // 2
    placed: dict[int, int] = {}
    for label in ext_labels:
        col = ext_col[label]
        if col == 0:
            x, y = PAD, top + first.index(label) * (BOX_H + ROW_GAP)
        else:
            row = placed.get(col, 0)
            placed[col] = row + 1
            x, y = PAD + (col - 1 + shift) * (BOX_W + COL_GAP), band_top + row * (BOX_H + ROW_GAP)
        externals[label] = Box(
            name=label,
            x=x,
            y=y,
            w=BOX_W,
            h=BOX_H,
            layer=col - 1,
            state=_least_done(ext_states.get(label, [])),
            mark="up" if label in ext_lit else "",
            external=ext_workflow[label],
        )
    boxes: dict[str, Box] = {}
    for col, layer in enumerate(layers, start=shift):
        column_h = len(layer) * BOX_H + max(len(layer) - 1, 0) * ROW_GAP
        # Centre each column vertically in the tasks' rows (above the band of upstreams).
        top = PAD + (tallest * (BOX_H + ROW_GAP) - ROW_GAP - column_h) // 2
        for row, index in enumerate(layer):
            name = names[index]
            mark = "focus" if name == focus else "up" if name in up else "down" if name in down else ""
            boxes[name] = Box(
                name=name,
                x=PAD + col * (BOX_W + COL_GAP),
                y=top + row * (BOX_H + ROW_GAP),
                w=BOX_W,
                h=BOX_H,
                layer=col - shift,
                state=states.get(name, ""),
                mark=mark,
            )
    lineage = up | down | ({focus} if focus else set())
    edges: list[Edge] = []
    for task in spec.tasks:
        for i, dep in enumerate(task.depends_on):
            external = dep.workflow != ""
            label = external_label(dep) if external else dep.task
            a, b = (externals if external else boxes)[label], boxes[task.name]
            x1, y1 = a.x + a.w, a.y + a.h // 2
            x2, y2 = b.x, b.y + b.h // 2
            bend = (x2 - x1) // 2
            edges.append(
                Edge(
                    upstream=label,
                    downstream=task.name,
                    d=f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2 - 6},{y2}",
                    condition=_CONDITION.get(dep.condition, ""),
                    lit=bool(focus)
                    and (task.name in feeds if external else dep.task in lineage and task.name in lineage),
                    state=edge_states.get((task.name, i), "") if external else "",
                    external=dep.workflow,
                )
            )
    columns = len(layers) + shift
    width = 2 * PAD + columns * BOX_W + max(columns - 1, 0) * COL_GAP
    ordered = [externals[label] for label in ext_labels] + [boxes[n] for n in names]
    return Dag(width=width, height=height, boxes=tuple(ordered), edges=tuple(edges))


_LEAST_DONE: Final = ("timed out", "not met", "waiting", "met")


def _least_done(states: Sequence[str]) -> str:
    """One state for an external box from its edges' states ("" when it has none)."""
    for state in _LEAST_DONE:
        if state in states:
            return state
    return states[0] if states else ""


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
