"""Architecture rules, checked on the source: pure core, one adapter module per library."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "raftsched"

# Replicated or leader-pure code: no clock, no randomness, no IO, no network, no processes.
PURE = [
    "model.py",
    "codec.py",
    "bounds.py",
    "errors.py",
    "fsm/state.py",
    "fsm/keys.py",
    "fsm/workflows.py",
    "fsm/effects.py",
    "fsm/records.py",
    "fsm/rules.py",
    "fsm/queries.py",
    "fsm/policy.py",
    "leader/queue.py",
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
    "observability/tally.py",
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
    "pysyncobj": {"consensus/pysyncobj_node.py"},
    "lmdb": {"storage/lmdb_env.py"},
    "croniter": {"timing/cron.py"},
    "uhashring": {"sharding/ring.py"},
    "yaml": {"workflow/yaml_reader.py"},
    "cryptography": {"security/certs.py"},
    "prometheus_client": {"observability/metrics.py"},
    "aiohttp": {"observability/listener.py"},
    "jinja2": {"web/templating.py"},
}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


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
