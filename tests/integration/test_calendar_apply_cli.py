"""Calendars, task files and the python runner end to end through the CLI: a real 3-node cluster
and an executor process.

``calendar set/list/show/delete``, ``apply`` (created / unchanged / updated / deleted with
``--prune``), fires on excluded days accounted ``skipped_calendar`` and explained, the deletion
of a calendar in use refused with its users, ``cron preview --exclude``, and a ``runner: python``
task run by the executor's own interpreter.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from raftsched.cli import main
from raftsched.client import Client
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.helpers import NODES

pytestmark = pytest.mark.integration

Cli = Callable[..., tuple[int, str, str]]

TASKS = """\
namespace: team
owner: ops
tasks:
  - name: every-second
    cron: "* * * * * *"
    timezone: Europe/Berlin
    command: "true"
    overlap: allow
    exclude: [always]
  - name: py
    worker_type: python
    command: python -c "import sys; print(sys.executable)"
    resource: {{cpu: 0.5, memory: 64}}
    description: {description}
  - name: extra
    command: "true"
"""


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_calendars_task_files_and_the_python_runner(cluster: LocalCluster, cli: Cli, tmp_path: Path) -> None:
    leader = cluster.wait_for_leader()
    follower = next(n for n in NODES if n != leader)
    at = ["--cluster", cluster.grpc_of(follower)]

    def ok(*argv: str) -> str:
        code, out, err = cli(*at, *argv)
        assert code == 0, f"raftsched {' '.join(argv)} exited {code}: {err}"
        return out

    def eventually(read: Callable[[], Any], check: Callable[[Any], bool], what: str) -> Any:
        box: list[Any] = []

        def probe() -> bool:
            box[:] = [read()]
            return check(box[0])

        wait_until(probe, 30, 0.1, what)
        return box[0]

    holidays = tmp_path / "holidays.txt"
    holidays.write_text(
        "# every day of the week is in this calendar, through the weekday rule\n2030-01-01 New Year\n"
    )
    out = ok(
        "calendar",
        "set",
        "always",
        "--weekdays",
        "mon-sun",
        "--file",
        str(holidays),
        "--zone",
        "Europe/Berlin",
    )
    assert out.startswith(
        "set calendar always (version 1): 1 date(s) from 2030-01-01 to 2030-01-01 and every mon-sun"
    )
    listed = eventually(
        lambda: json.loads(ok("calendar", "list", "--json")), lambda v: len(v) == 1, "calendar list"
    )
    assert listed[0]["spec"]["weekdays"] == "mon-sun" and listed[0]["spec"]["dates"] == ["2030-01-01"]

    path = tmp_path / "tasks.yaml"
    path.write_text(TASKS.format(description="first"))
    out = ok("apply", str(path))
    assert [line.split()[:2] for line in out.splitlines()[:3]] == [
        ["created", "every-second"],
        ["created", "py"],
        ["created", "extra"],
    ]
    assert f"({path}:4)" in out
    executor = cluster.start_executor("cal-ex1", slots=4)
    try:
        # Idempotent: the same file again changes nothing (read from the leader: it has every write).
        lead = ["--cluster", cluster.grpc_of(leader)]
        code, out, err = cli(*lead, "apply", str(path))
        assert code == 0, err
        assert [line.split()[0] for line in out.splitlines()[:3]] == ["unchanged"] * 3
        path.write_text(
            TASKS.format(description="second").replace('  - name: extra\n    command: "true"\n', "")
        )
        code, out, err = cli(*lead, "apply", "--prune", str(path))
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0].startswith("unchanged every-second") and lines[1].startswith("updated   py")
        assert '    ~ description: "first" -> "second"' in lines
        assert "deleted   extra" in lines and lines[-1] == "1 updated, 1 unchanged, 1 deleted"

        # Every fire of the every-second task falls on a day of 'always': all skipped_calendar.
        fires = eventually(
            lambda: json.loads(ok("fires", "every-second", "--json")),
            lambda f: len(f) >= 3,
            "three accounted fires",
        )
        assert {f["outcome"] for f in fires} == {"skipped_calendar"}, fires
        assert {f["calendar"] for f in fires} == {"always"}
        assert not json.loads(ok("runs", "every-second", "--json"))
        explained = ok("explain", "every-second", "--at", str(int(fires[0]["nominal_ms"])))
        assert "by calendar 'always'" in explained and "Europe/Berlin" in explained
        shown = ok("task", "show", "every-second")
        assert re.search(r"^exclude +always$", shown, re.M), shown

        # A calendar in use cannot be deleted; the error names who uses it.
        code, _, err = cli(*at, "calendar", "delete", "always")
        assert code == 1 and "task every-second" in err
        assert "excluded by  task every-second" in ok("calendar", "show", "always")

        # cron preview marks what the calendar skips (from the cluster, and offline from a file).
        preview = ok(
            "cron", "preview", "0 9 * * *", "--tz", "Europe/Berlin", "--count", "3", "--exclude", "always"
        )
        assert preview.count("skipped_calendar") == 3
        offline = json.loads(
            ok(
                "cron",
                "preview",
                "0 9 * * *",
                "--tz",
                "Europe/Berlin",
                "--from",
                "2029-12-31T12:00:00Z",
                "--count",
                "2",
                "--exclude-file",
                str(holidays),
                "--json",
            )
        )
        assert [f.get("skipped_calendar") for f in offline["fires"]] == ["holidays.txt", None]

        # runner python: the executor's interpreter runs the command.
        shown = ok("task", "show", "py")
        assert re.search(r"^runner +python$", shown, re.M) and "cpu 0.5, memory 64 MiB" in shown
        with Client(cluster.grpc_of(leader)) as client:
            run = client.trigger("py")
            finished = eventually(
                lambda: [r for r in client.runs("py") if r.run_id == run.run_id and r.state == pb.SUCCEEDED],
                bool,
                "the python run succeeded",
            )
            done: pb.Run = finished[0]
            assert done.shards[0].stdout_tail.strip() == sys.executable
            # Remove the calendar's user: now it can go.
            client.delete_task("every-second")
            client.delete_calendar("always")
            assert client.list_calendars() == []
    finally:
        executor.terminate()
        executor.wait(15)
