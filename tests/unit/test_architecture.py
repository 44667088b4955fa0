"""Architecture rules, checked on the source: pure core, one adapter module per library."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "raftsched"

# Replicated or leader-pure code: no clock, no randomness, no IO, no network, no processes.
PURE = [
    "model.py",
    "codec.py",
    "bounds.py",
    "taskfields.py",
    "errors.py",
    "fsm/state.py",
    "fsm/keys.py",
    "fsm/workflows.py",
    "fsm/effects.py",
    "fsm/records.py",
    "fsm/rules.py",
    "fsm/queries.py",
    "fsm/policy.py",
    "fsm/view.py",
    "leader/queue.py",
    "leader/dispatch/placement.py",
    "leader/dispatch/leases.py",
    "leader/dispatch/liveness.py",
    "leader/dispatch/takeover.py",
    "leader/dispatch/settings.py",
    "leader/dispatch/work.py",
    "fsm/membership.py",
    "workflow/layout.py",
    "leader/gate.py",
    "workflow/dag.py",
    "workflow/run.py",
    "workflow/validate.py",
    "workflow/template.py",
    "timing/wheel.py",
    "timing/cron.py",
    "timing/cronparse.py",
    "timing/schedule.py",
    "timing/durations.py",
    "workflow/located.py",
    "leader/writes.py",
    "replica.py",
    "consensus/memory.py",
    "storage/memory.py",
    "fsm/tally.py",
    "web/graph.py",
]
FORBIDDEN_IN_PURE = {
    "time",
    "random",
    "uuid",
    "secrets",
    "os",
    "socket",
    "subprocess",
    "pysyncobj",
    "lmdb",
    "grpc",
    "asyncio",
    "shutil",
    "tempfile",
}

# Each third-party library is imported in exactly one adapter module.
ADAPTERS = {
    "pysyncobj": {
        "consensus/pysyncobj/node.py",
        "consensus/pysyncobj/snapshot.py",
        "consensus/pysyncobj/status.py",
        "consensus/pysyncobj/transport.py",
    },
    "lmdb": {"storage/lmdb_env.py"},
    "croniter": {"timing/cron.py"},
    "uhashring": {"sharding/ring.py"},
    "yaml": {"workflow/yaml_reader.py"},
    "cryptography": {"security/certs.py"},
    "prometheus_client": {"observability/metrics.py"},
    "aiohttp": {"observability/listener.py"},
    "jinja2": {"web/templating.py"},
    "smtplib": {"alerts/smtp.py"},  # standard library, but one module speaks SMTP
}


def imported_roots(path: Path) -> frozenset[str]:
    """The top-level packages ``path`` imports absolutely (parsed once per file per session: the
    adapter check asks once per library)."""
    return _imported_roots(path, path.stat().st_mtime_ns)


@functools.cache
def _imported_roots(path: Path, _mtime_ns: int) -> frozenset[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return frozenset(roots)


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_do_no_io_and_read_no_clock(module: str) -> None:
    bad = imported_roots(PKG / module) & FORBIDDEN_IN_PURE
    assert not bad, f"{module} imports {sorted(bad)}: time, randomness and IO belong at the edges"


def test_each_library_has_one_adapter() -> None:
    sources = [p for p in PKG.rglob("*.py") if "v1" not in p.parts]
    for library, allowed in ADAPTERS.items():
        users = {str(p.relative_to(PKG)) for p in sources if library in imported_roots(p)}
        assert users <= allowed, f"{library} imported outside its adapter: {sorted(users - allowed)}"


def test_only_the_clock_module_reads_the_clock() -> None:
    readers = set()
    for path in PKG.rglob("*.py"):
        text = path.read_text()
        if "time.time(" in text or "time.time_ns(" in text or "datetime.now(" in text:
            readers.add(str(path.relative_to(PKG)))
    assert readers <= {"timing/clock.py"}, f"wall-clock reads outside timing/clock.py: {sorted(readers)}"


# The state machine's tables, mutated in place by the applier thread: code outside raftsched/fsm
# reads them only through a view (``with state.view() as v``, raftsched/fsm/view.py), which holds
# the state's lock. The membership and token books are copy-on-write (readable from any thread)
# and the store has its own read transactions, so they are not listed.
UNLOCKED_TABLES = frozenset(
    {
        "tasks",
        "active",
        "active_per_task",
        "executors",
        "policy",
        "usage",
        "wf",
        "unplaceable",
        "calendars",
        "alerts",
        "lock",
        "leader_effects",
        "runs",
        "fires",
        "task_book",
        "executor_book",
    }
)
# Where the state's lock is taken for a write, not a read: the snapshot install swaps the store
# and reloads the state under it.
TABLE_ACCESS_ALLOWED = {("server/node.py", "lock", "_load_snapshot")}


def raw_state_reads(path: Path) -> list[tuple[str, int, str]]:
    """``(table, line, function)`` of every ``state.<table>`` / ``x.state.<table>`` in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, int, str]] = []

    def walk(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.Attribute) and node.attr in UNLOCKED_TABLES:
            owner = node.value
            if (isinstance(owner, ast.Name) and owner.id == "state") or (
                isinstance(owner, ast.Attribute) and owner.attr == "state"
            ):
                found.append((node.attr, node.lineno, function))
        for child in ast.iter_child_nodes(node):
            walk(child, function)

    walk(tree, "")
    return found


def test_the_state_tables_are_read_only_through_a_view_outside_the_state_machine() -> None:
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        if rel.parts[0] in ("fsm", "v1"):
            continue
        for table, line, function in raw_state_reads(path):
            if (str(rel), table, function) not in TABLE_ACCESS_ALLOWED:
                bad.append(f"{rel}:{line} state.{table} in {function or 'module'}()")
    assert not bad, (
        "read the replicated state through `with state.view() as v:` (raftsched/fsm/view.py), "
        "never its tables directly: " + "; ".join(bad)
    )


def test_the_table_check_sees_direct_reads(tmp_path: Path) -> None:
    """The check above is not vacuous: it flags the reads it exists to forbid, not view reads."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def rebuild(self):\n"
        "    return {n: r for n, r in self.state.executors.items() if r.alive}\n"
        "def plan(state, name):\n"
        "    with state.lock:\n"
        "        return name in state.active_per_task\n"
        "def viewed(state):\n"
        "    with state.view() as v:\n"
        "        return len(v.tasks), state.membership.record\n"
    )
    assert raw_state_reads(sample) == [
        ("executors", 2, "rebuild"),
        ("lock", 4, "plan"),
        ("active_per_task", 5, "plan"),
    ]
