"""Layer contracts, checked on the source: no import cycles, and a pure core that knows no edge.

The import graph is read from the AST of every module in ``raftsched/`` (generated ``v1`` code
excluded), counting every import: module level, inside functions (a lazy import is still a
dependency) and under ``TYPE_CHECKING`` (a type-only cycle is still a tangle a reader must hold
in their head). A new cycle or a core module that reaches an edge fails here with the path.
"""

from __future__ import annotations

import ast
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
)
CORE_FORBIDDEN_LIBRARIES = {"grpc", "grpc_health", "grpc_reflection", "pysyncobj", "lmdb", "aiohttp"}
CORE_FORBIDDEN_PACKAGES = (
    "raftsched.rpc",
    "raftsched.node",
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


def imports_of(module: str, path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(imported name, line) for every import in ``path``; relative imports made absolute."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
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


def internal_graph() -> dict[str, set[str]]:
    known = package_modules()
    graph: dict[str, set[str]] = {m: set() for m in known}
    for module, path in known.items():
        for name, _ in imports_of(module, path, known):
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
