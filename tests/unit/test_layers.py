"""Layer contracts, checked on the source: no import cycles, a pure core that knows no edge, and
the layers of :data:`LAYERS` imported downwards only (the backward edges left are listed, each
with its reason, in :data:`KNOWN_BACKWARD`).

The import graph is read from the AST of every module in ``raftsched/`` (generated ``v1`` code
excluded), counting every import: module level, inside functions (a lazy import is still a
dependency) and under ``TYPE_CHECKING`` (a type-only cycle is still a tangle a reader must hold
in their head). A new cycle or a core module that reaches an edge fails here with the path.
"""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "raftsched"

# The pure core: the replicated state machine, time maths, placement, DAG logic, values and
# codecs, and the dispatcher's decisions. They run identically on every replica and in the
# simulation, so they may not know about the network, consensus, storage or the process.
CORE = (
    "raftsched.fsm",
    "raftsched.timing",
    "raftsched.sharding",
    "raftsched.workflow",
    "raftsched.model",
    "raftsched.codec",
    "raftsched.bounds",
    "raftsched.taskfields",
    "raftsched.leader.dispatch.dispatcher",
    "raftsched.leader.dispatch.placement",
    "raftsched.leader.dispatch.leases",
    "raftsched.leader.dispatch.liveness",
    "raftsched.leader.dispatch.takeover",
    "raftsched.leader.dispatch.settings",
    "raftsched.leader.dispatch.work",
)
CORE_FORBIDDEN_LIBRARIES = {"grpc", "grpc_health", "grpc_reflection", "pysyncobj", "lmdb", "aiohttp"}
CORE_FORBIDDEN_PACKAGES = (
    "raftsched.rpc",
    "raftsched.server",
    "raftsched.consensus",
    "raftsched.storage",
    "raftsched.cli",
    "raftsched.executor",
    "raftsched.client",
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    return {
        module_name(p): p
        for p in sorted(PKG.rglob("*.py"))
        if "v1" not in p.relative_to(PKG).parts and "__pycache__" not in p.parts
    }


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is one of our modules (``a.b.c`` may be a name in ``a.b``)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _type_checking_blocks(tree: ast.Module) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (they load nothing at run time)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def imports_of(
    module: str, path: Path, known: dict[str, Path], runtime_only: bool = False
) -> Iterator[tuple[str, int]]:
    """(imported name, line) for every import in ``path``; relative imports made absolute.
    ``runtime_only``: leave out the imports under ``TYPE_CHECKING``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    skip = _type_checking_blocks(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                drop = node.level - 1 if is_package else node.level
                base = base[: len(base) - drop] if drop else base
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                full = f"{prefix}.{alias.name}"
                yield (full if _resolve(full, known) == full else prefix), node.lineno


@functools.cache
def internal_graph(runtime_only: bool = False) -> dict[str, set[str]]:
    """module -> the modules it imports (cached: callers must not change it)."""
    known = package_modules()
    graph: dict[str, set[str]] = {m: set() for m in known}
    for module, path in known.items():
        for name, _ in imports_of(module, path, known, runtime_only):
            target = _resolve(name, known) if name.startswith("raftsched") else None
            # A package's own __init__ being imported by its modules is not a dependency back.
            if target and target != module and not module.startswith(target + "."):
                graph[module].add(target)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one module (or a self-loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def cycle_path(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One concrete cycle inside ``component``, for the failure message."""
    members = set(component)
    start = component[0]
    path = [start]
    seen = {start}
    node = start
    while True:
        nxt = sorted(graph[node] & members)
        back = [n for n in nxt if n == start]
        if back and len(path) > 1:
            return [*path, start]
        step = next((n for n in nxt if n not in seen), None)
        if step is None:
            # Every successor already visited: close the loop at the first one on the path.
            for n in nxt:
                if n in path:
                    return [*path[path.index(n) :], n]
            return path
        path.append(step)
        seen.add(step)
        node = step


def test_no_import_cycles() -> None:
    graph = internal_graph()
    cycles = [" → ".join(cycle_path(graph, c)) for c in strongly_connected(graph)]
    assert not cycles, "import cycles in raftsched/:\n  " + "\n  ".join(cycles)


def _core_modules() -> list[str]:
    return [m for m in package_modules() if any(m == c or m.startswith(c + ".") for c in CORE)]


@pytest.mark.parametrize("module", _core_modules())
def test_core_knows_no_edge(module: str) -> None:
    known = package_modules()
    bad = []
    for name, line in imports_of(module, known[module], known):
        root = name.split(".")[0]
        if root in CORE_FORBIDDEN_LIBRARIES or any(
            name == p or name.startswith(p + ".") for p in CORE_FORBIDDEN_PACKAGES
        ):
            bad.append(f"line {line}: {name}")
    assert not bad, f"{module} is pure core but imports an edge: {bad}"


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    (component,) = strongly_connected(graph)
    assert component == ["a", "b", "c"]
    assert cycle_path(graph, component) == ["a", "b", "c", "a"]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_another_modules_private_names() -> None:
    known = package_modules()
    bad = []
    for module, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (
                node.level or (node.module or "").startswith("raftsched")
            ):
                private = [
                    a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")
                ]
                if private:
                    bad.append(f"{module} line {node.lineno}: {private} from {'.' * node.level}{node.module}")
    assert not bad, (
        "private names imported across modules (make them public or move them):\n  " + "\n  ".join(bad)
    )


# -- layers ---------------------------------------------------------------------------------------

# The rooms of raftsched/, lowest first: a module may import its own layer and the ones below.
# (A room is the first name under raftsched: a subpackage or a top-level module.)
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        "vocabulary",
        frozenset({"errors", "model", "abc", "logfields", "readinfo", "taskfields", "v1", "secretref"}),
    ),
    (
        "pure maths and conversions",
        frozenset({"timing", "sharding", "workflow", "codec", "bounds", "explain", "display"}),
    ),
    ("config", frozenset({"config"})),
    ("state machine", frozenset({"fsm"})),
    (
        "replicated edges",
        frozenset(
            {
                "storage",
                "consensus",
                "replica",
                "leader",
                "clockwatch",
                "membership",
                "backup",
                "alerts",
                "security",
            }
        ),
    ),
    ("services", frozenset({"executor", "client", "rpc", "observability"})),
    ("web console", frozenset({"web"})),
    ("server", frozenset({"server"})),
    ("command line", frozenset({"cli"})),
    ("developer tooling", frozenset({"testing"})),
)
TOOLING = ("raftsched.testing",)  # the package and everything in it

# Backward edges that remain, each with its reason; a new one fails, and so does one that is gone
# (remove it here, so the list stays the truth).
KNOWN_BACKWARD: dict[tuple[str, str], str] = {
    # The [alerts] and [auth] tables are typed and parsed by their own rooms.
    ("raftsched.config.load", "raftsched.alerts.config"): "[alerts] is parsed by alerts/",
    ("raftsched.config.load", "raftsched.security.auth"): "[auth] is parsed by security/",
    ("raftsched.config.types", "raftsched.alerts.config"): "[alerts] is typed by alerts/",
    ("raftsched.config.types", "raftsched.security.auth"): "[auth] is typed by security/",
    ("raftsched.executor.__main__", "raftsched.cli.executor"): "python -m raftsched.executor runs its CLI",
    ("raftsched.cli.demo", "raftsched.testing.demo"): "`raftsched demo` runs the demo (imported only then)",
}


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    room = parts[1] if len(parts) > 1 else None
    return next((i for i, (_, rooms) in enumerate(LAYERS) if room in rooms), None)


def backward_edges(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every import of a module from a higher layer than the importer's, sorted."""
    out = []
    for module, targets in graph.items():
        low = layer_of(module)
        for target in targets:
            high = layer_of(target)
            if low is not None and high is not None and high > low:
                out.append((module, target))
    return sorted(out)


def reachable(graph: dict[str, set[str]], start: str) -> dict[str, str]:
    """Every module ``start`` loads, transitively: module -> the module that imports it first."""
    via: dict[str, str] = {}
    todo = [start]
    while todo:
        module = todo.pop()
        for target in sorted(graph.get(module, ())):
            if target not in via and target != start:
                via[target] = module
                todo.append(target)
    return via


def chain(via: dict[str, str], start: str, end: str) -> str:
    path = [end]
    while path[-1] != start:
        path.append(via[path[-1]])
    return " → ".join(reversed(path))


def test_every_room_has_a_layer() -> None:
    rooms = {m.split(".")[1] for m in package_modules() if "." in m}
    assert not sorted(r for r in rooms if layer_of(f"raftsched.{r}") is None)


def test_the_layers_are_imported_downwards_only() -> None:
    found = backward_edges(internal_graph())
    new = [f"{a} → {b}" for a, b in found if (a, b) not in KNOWN_BACKWARD]
    gone = [f"{a} → {b}" for a, b in KNOWN_BACKWARD if (a, b) not in found]
    assert not new, "imports from a higher layer (see LAYERS):\n  " + "\n  ".join(new)
    assert not gone, "no longer backward: remove from KNOWN_BACKWARD:\n  " + "\n  ".join(gone)


def _modules_of(room: str) -> list[str]:
    return [m for m in package_modules() if m == room or m.startswith(room + ".")]


# The executor's program: its agent and the CLI module that runs it (``raftsched-executor``).
EXECUTOR_PROGRAM = [*_modules_of("raftsched.executor"), "raftsched.cli.executor", "raftsched.cli.options"]


@pytest.mark.parametrize("module", EXECUTOR_PROGRAM)
def test_the_executor_never_loads_the_state_machine(module: str) -> None:
    """The executor runs commands on machines that hold no state: none of its modules, nor the
    program that runs it, loads ``raftsched.fsm`` by any chain of run-time imports (lazy ones
    included). It once did: executor → config → alerts → fsm (the alert kinds are now in
    raftsched.model), and cli.executor → cli.cluster → client → backup → fsm (the shared
    options are now in raftsched.cli.options)."""
    graph = internal_graph(runtime_only=True)
    via = reachable(graph, module)
    bad = [chain(via, module, m) for m in sorted(via) if m.startswith("raftsched.fsm")]
    assert not bad, f"{module} loads the state machine:\n  " + "\n  ".join(bad[:3])


@pytest.mark.parametrize(
    "argv",
    [
        ["-c", "import raftsched.executor.__main__"],  # runs the program: exits 2, no --name
        ["-m", "raftsched.executor", "--help"],
        ["-m", "raftsched.executor", "--name", "e1", "--config", "{config}"],
    ],
    ids=["import", "help", "config"],
)
def test_the_executor_program_loads_no_state_machine_module(argv: list[str], tmp_path: Path) -> None:
    """What the interpreter really loads, which the graph above cannot see whole: a package's
    ``__init__`` runs before its modules (``raftsched.cli`` once loaded the admin CLI, and its
    commands the state machine's validators), and ``--config`` parses the whole cluster file."""
    config = tmp_path / "cluster.toml"
    # Refused (no secret, no nodes) once parsed whole, its [alerts] table included.
    config.write_text('[alerts]\n[[alerts.webhook]]\nurl = "http://127.0.0.1:9/"\nkinds = ["zombie"]\n')
    probe = (
        "import atexit, runpy, sys\n"
        "fsm = lambda: sorted(m for m in sys.modules if m.startswith('raftsched.fsm'))\n"
        "atexit.register(lambda: print('FSM', fsm()))\n"
    ) + (
        "sys.argv = ['raftsched-executor', *sys.argv[1:]]\n"
        "runpy.run_module('raftsched.executor', run_name='__main__')\n"
        if argv[0] == "-m"
        else argv[1]
    )
    args = [a.format(config=config) for a in argv[2:]] if argv[0] == "-m" else []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("FSM ")), None)
    assert line is not None, f"the probe did not finish: {done.stdout}{done.stderr}"
    assert line == "FSM []", f"python {' '.join(argv)} loaded the state machine: {line}"
    if "--config" in argv:
        assert "invalid config" in done.stderr  # the file was read and parsed


@pytest.mark.parametrize(
    ("room", "forbidden"),
    [
        ("raftsched.web", "raftsched.cli"),
        ("raftsched.observability", "raftsched.web"),
        ("raftsched.executor.agent", "raftsched.fsm"),
    ],
)
def test_a_room_never_imports_another(room: str, forbidden: str) -> None:
    """Direct imports, type-only and lazy ones included: the console spells values through
    raftsched.display, not the CLI's printer; the node hands its console to the HTTP listener as a
    ``Site``; the agent parses addresses and sizes through raftsched.config.values."""
    graph = internal_graph()
    bad = [
        f"{m} → {t}"
        for m in _modules_of(room)
        for t in sorted(graph[m])
        if t == forbidden or t.startswith(forbidden + ".")
    ]
    assert not bad, "\n  ".join(bad)


# The one runtime module that may load tooling, and why.
TOOLING_ALLOWED = {
    ("raftsched.cli.demo", "raftsched.testing.demo"): "`raftsched demo` runs the demo (only then)"
}


def test_runtime_code_never_imports_developer_tooling() -> None:
    graph = internal_graph()
    bad = [
        f"{m} → {t}"
        for m, targets in graph.items()
        if not m.startswith(TOOLING) and m != "raftsched"
        for t in sorted(targets)
        if t.startswith(TOOLING) and (m, t) not in TOOLING_ALLOWED
    ]
    assert not bad, (
        "runtime code imports raftsched.testing (simulation, clusters, demo, chaos):\n  " + "\n  ".join(bad)
    )


if __name__ == "__main__":  # python tests/unit/test_layers.py: the backward edges, for a report
    edges = backward_edges(internal_graph())
    for a, b in edges:
        print(f"{a} → {b}")
    rooms = sorted({(a.split(".")[1], b.split(".")[1]) for a, b in edges})
    print(f"{len(edges)} module edges, {len(rooms)} room edges:", ", ".join(f"{a} → {b}" for a, b in rooms))
