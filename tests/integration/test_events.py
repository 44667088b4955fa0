"""Events end to end with real processes (issue 28 §3): a task file with ``on_event`` and
``emits``, ``raftsched event emit`` through the CLI against a follower, one run per distinct
(name, key) with the event in its environment, a duplicate emit that starts nothing, and a data
trigger: the first task's success emits the event that starts the second, at its logical time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from raftsched.cli import main
from raftsched.testing.cluster import LocalCluster, wait_until
from tests.integration.helpers import NODES

pytestmark = pytest.mark.integration

Cli = Callable[..., tuple[int, str, str]]

TASKS = """\
tasks:
  - name: load
    on_event: orders-ready
    command: 'echo "$RAFTSCHED_EVENT_NAME $RAFTSCHED_EVENT_KEY $RAFTSCHED_EVENT_PAYLOAD" >> {out}'
    emits: [orders-loaded]
  - name: reconcile
    on_event: orders-loaded
    command: 'echo "$RAFTSCHED_EVENT_KEY $RAFTSCHED_NOMINAL_TIME" >> {down}'
"""


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_cli_emit_starts_one_run_per_key_and_a_success_emits_the_downstream_event(
    cluster: LocalCluster, cli: Cli, tmp_path: Path
) -> None:
    leader = cluster.wait_for_leader()
    follower = next(n for n in NODES if n != leader)
    at = ["--cluster", cluster.grpc_of(follower)]

    def ok(*argv: str) -> str:
        code, out, err = cli(*at, *argv)
        assert code == 0, f"raftsched {' '.join(argv)} exited {code}: {err}"
        return out

    def lines(path: Path) -> list[str]:
        return path.read_text().splitlines() if path.exists() else []

    out, down = tmp_path / "load.txt", tmp_path / "reconcile.txt"
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(TASKS.format(out=out, down=down))
    ok("apply", str(tasks))
    executor = cluster.start_executor("ev-ex1", slots=2)
    try:
        first = ok("event", "emit", "orders-ready", "--key", "2026-12-04", "--payload", '{"rows": 3}')
        assert first.startswith("accepted event orders-ready key 2026-12-04 (#1)"), first
        again = ok("event", "emit", "orders-ready", "--key", "2026-12-04", "--payload", '{"rows": 4}')
        assert again.startswith("duplicate: event orders-ready key 2026-12-04"), again
        wait_until(lambda: len(lines(down)) >= 1, 60, 0.1, "the downstream run of the data trigger")
        assert lines(out) == ['orders-ready 2026-12-04 {"rows": 3}']
        # The data trigger's key is the upstream run's logical time (the event's key as a date).
        assert lines(down) == ["2026-12-04T00:00:00Z 2026-12-04T00:00:00Z"]
        # A new key is a new event and one more run.
        ok("event", "emit", "orders-ready", "--key", "2026-12-05")
        wait_until(lambda: len(lines(down)) >= 2, 60, 0.1, "the second downstream run")
        assert len(lines(out)) == 2
        listed: list[dict[str, Any]] = []

        def all_listed() -> bool:
            listed[:] = json.loads(ok("events", "--json"))
            return len(listed) == 4

        wait_until(all_listed, 30, 0.1, "four accepted events")
        # Newest first. The 2026-12-05 key was emitted before that day (or on it): its run's
        # logical time is never after the accept time, so its data trigger's key is that time.
        assert [e["name"] for e in listed] == ["orders-loaded", "orders-ready"] * 2
        assert [listed[1]["key"], listed[2]["key"], listed[3]["key"]] == [
            "2026-12-05",
            "2026-12-04T00:00:00Z",
            "2026-12-04",
        ]
        assert listed[2]["emitted_by"] == "task:load"
        assert [r.split("@")[0] for r in listed[3]["runs"]] == ["load"]
        assert [r.split("@")[0] for r in listed[2]["runs"]] == ["reconcile"]
        # Subscribed names no event has are listed by --unused (a typo, or nothing sent yet).
        assert json.loads(ok("events", "--unused", "--json")) == []
        tasks.write_text(
            TASKS.format(out=out, down=down)
            + "  - name: typo\n    on_event: orders-redy\n    command: 'true'\n"
        )
        ok("apply", str(tasks))
        unused: list[Any] = []

        def typo_listed() -> bool:
            unused[:] = json.loads(ok("events", "--unused", "--json"))
            return bool(unused)

        wait_until(typo_listed, 30, 0.1, "the typo's event listed unused")
        assert unused == [{"event": "orders-redy", "subscribers": ["typo"]}]
        # A payload over 64 KiB is refused with the field named; nothing is accepted.
        code, _, err = cli(*at, "event", "emit", "big", "--payload", json.dumps({"x": "a" * 70_000}))
        assert code != 0 and "payload" in err and "64 KiB" in err, err
        assert len(json.loads(ok("events", "big", "--json"))) == 0
    finally:
        executor.terminate()
        executor.wait(15)
