"""The shape of the state machine package: no import cycles, no reaching into private names,
and the workflow book depends on the TaskHost protocol, not on the state class."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from raftsched.fsm.executors import ExecutorHost
from raftsched.fsm.fires import FireHost
from raftsched.fsm.runs import RunHost
from raftsched.fsm.tasks import TaskBookHost
from raftsched.fsm.workflow_model import TaskHost
from tests.support.fsm import fresh
from tests.unit.test_architecture import FORBIDDEN_IN_PURE, imported_roots

PKG = Path(__file__).resolve().parents[2] / "raftsched"
FSM_MODULES = sorted(p.name for p in (PKG / "fsm").glob("*.py"))
CHECKED = [f"fsm/{name}" for name in FSM_MODULES] + ["replica.py"]


def fsm_imports(path: Path) -> set[str]:
    """``raftsched.fsm`` modules imported anywhere in ``path`` (type-only and lazy imports too)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "raftsched.fsm":
                out.update(alias.name for alias in node.names)
            elif node.module.startswith("raftsched.fsm."):
                out.add(node.module.removeprefix("raftsched.fsm."))
        elif isinstance(node, ast.Import):
            out.update(
                a.name.removeprefix("raftsched.fsm.")
                for a in node.names
                if a.name.startswith("raftsched.fsm.")
            )
    return out


def test_state_and_workflows_do_not_import_each_other() -> None:
    assert "state" not in fsm_imports(PKG / "fsm" / "workflows.py")
    assert "workflows" in fsm_imports(PKG / "fsm" / "state.py")


def test_fsm_modules_import_no_cycle() -> None:
    graph = {name.removesuffix(".py"): fsm_imports(PKG / "fsm" / name) for name in FSM_MODULES}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join((*path, module))}"
        if module in done:
            return
        for dep in sorted(graph.get(module, ())):
            visit(dep, (*path, module))
        done.add(module)

    for module in sorted(graph):
        visit(module, ())


@pytest.mark.parametrize("module", CHECKED)
def test_no_private_name_of_another_object_or_module(module: str) -> None:
    """What ruff's SLF001 checks, plus ``from x import _name``."""
    bad: list[str] = []
    for node in ast.walk(ast.parse((PKG / module).read_text())):
        if isinstance(node, ast.ImportFrom):
            bad += [f"import {a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Attribute) and _private(node.attr) and not _own(node.value):
            bad.append(f"line {node.lineno}: .{node.attr}")
    assert not bad, f"{module} reaches into private names: {bad}"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def _own(value: ast.expr) -> bool:
    return isinstance(value, ast.Name) and value.id in ("self", "cls")


@pytest.mark.parametrize("module", CHECKED)
def test_fsm_modules_are_pure(module: str) -> None:
    bad = imported_roots(PKG / module) & FORBIDDEN_IN_PURE
    assert not bad, f"{module} imports {sorted(bad)}: time, randomness and IO belong at the edges"


def test_the_state_is_the_workflow_books_task_host() -> None:
    state = fresh()
    host: TaskHost = state  # checked by mypy: SchedulerState satisfies the protocol
    assert state.wf.host is host
    assert host.next_sequence() == 1 and host.next_sequence() == 2


BOOKS = ("tasks", "fires", "runs", "executors", "workflows")


@pytest.mark.parametrize("book", BOOKS)
def test_a_book_does_not_import_the_state(book: str) -> None:
    """Each book works over its host protocol; the state module composes them."""
    assert "state" not in fsm_imports(PKG / "fsm" / f"{book}.py")
    assert book in fsm_imports(PKG / "fsm" / "state.py")


def test_the_state_is_every_books_host() -> None:
    state = fresh()
    # Checked by mypy: SchedulerState satisfies each book's host protocol.
    hosts: tuple[RunHost, FireHost, ExecutorHost, TaskBookHost] = (state, state, state, state)
    assert (state.runs.host, state.fires.host, state.executor_book.host, state.task_book.host) == hosts
    # The tables the readers use are the books' own (loading refills them in place).
    state.reload()
    assert state.tasks is state.task_book.tasks and state.active is state.runs.active
    assert state.executors is state.executor_book.executors
    assert state.unplaceable is state.executor_book.unplaceable


def _writes_a_run_record(node: ast.AST) -> bool:
    """A store write whose key is a run key, or an entry put into a table of unfinished runs."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "put":
        key = ast.unparse(node.args[0]) if node.args else ""
        return "run_key_for_id" in key or "keys.RUN" in key
    if isinstance(node, ast.Assign):
        return any(
            isinstance(t, ast.Subscript) and ast.unparse(t.value).endswith("active") for t in node.targets
        )
    return False


def test_run_records_are_written_by_the_run_book_only() -> None:
    """One writer of a run record (``RunBook._write``, under ``save`` and new runs): a second
    copy of 'serialize, keep in memory, store' is how the copies drifted before. Loading fills
    the memory table from the store, and writes nothing."""
    writers: set[str] = set()
    for name in FSM_MODULES:
        tree = ast.parse((PKG / "fsm" / name).read_text())
        for func in ast.walk(tree):
            if isinstance(func, ast.FunctionDef) and any(_writes_a_run_record(n) for n in ast.walk(func)):
                writers.add(f"{name}:{func.name}")
    assert writers == {"runs.py:_write", "runs.py:load"}
