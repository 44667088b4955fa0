"""The ``raftsched`` CLI: arguments to specs, times, errors, and commands run in-process.

``cron preview`` needs no cluster; the cluster commands run against one scripted in-process gRPC
server. The clock is pinned by replacing ``SystemClock`` in the CLI's input module.
"""

from __future__ import annotations

import argparse
import json
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from raftsched import cli
from raftsched import client as client_module
from raftsched.cli import demo as demo_cli
from raftsched.cli import input as cli_input
from raftsched.cli import node as node_cli
from raftsched.cli.input import duration_arg
from raftsched.errors import ConfigError, InvalidSpec
from raftsched.model import (
    CronTrigger,
    IntervalTrigger,
    ManualTrigger,
    Misfire,
    OnceTrigger,
    Overlap,
    TaskSpec,
)
from raftsched.testing import cluster as localcluster
from raftsched.testing.cluster import write_config
from raftsched.timing.clock import ManualClock
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

ADD_SERVICER: Any = pb_grpc.add_AdminServicer_to_server  # untyped generated code

NOW = 1_796_032_800_000  # 2026-11-30T10:00:00Z
MINUTE = 60_000


def fixed_now() -> int:
    return NOW


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_input, "SystemClock", lambda: ManualClock(NOW))
    monkeypatch.delenv(cli.CLUSTER_ENV, raising=False)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def sh(capsys: pytest.CaptureFixture[str], line: str) -> tuple[int, str, str]:
    """Run a command line written as in a shell."""
    return run(capsys, *shlex.split(line))


def assert_one_error_line(err: str, *fragments: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("raftsched: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0]


def add_spec(*argv: str) -> TaskSpec:
    args = cli.build_parser().parse_args(["task", "add", *argv])
    return cli.spec_from_args(args, fixed_now)


# -- arguments to specs ----------------------------------------------------------------------------


def test_cron_task_with_every_option() -> None:
    spec = add_spec(
        "backup",
        "--cron",
        "30 2 * * *",
        "--tz",
        "Europe/Berlin",
        "--command",
        "backup.sh --full",
        "--misfire",
        "all",
        "--misfire-cap",
        "5",
        "--misfire-window",
        "2h",
        "--overlap",
        "allow",
        "--shards",
        "4",
        "--retries",
        "3",
        "--timeout",
        "90s",
        "--priority",
        "7",
        "--owner",
        "ops",
        "--namespace",
        "prod",
        "--params",
        '{"full": true}',
        "--description",
        "nightly backup",
    )
    assert spec == TaskSpec(
        name="backup",
        trigger=CronTrigger("30 2 * * *", "Europe/Berlin"),
        command="backup.sh --full",
        misfire=Misfire.ALL,
        misfire_all_cap=5,
        misfire_all_window_ms=2 * 3600_000,
        overlap=Overlap.ALLOW,
        shards=4,
        max_retries=3,
        timeout_ms=90_000,
        priority=7,
        owner="ops",
        namespace="prod",
        params_json='{"full": true}',
        description="nightly backup",
    )


def test_defaults_come_from_the_model() -> None:
    assert add_spec("t", "--cron", "@daily", "--handler", "h") == TaskSpec(
        "t", CronTrigger("@daily", "UTC"), handler="h"
    )


@pytest.mark.parametrize(
    ("argv", "trigger"),
    [
        (["--every", "3600"], IntervalTrigger(3_600_000)),
        (["--every", "15m", "--start", "2026-12-01T00:00:00Z"], IntervalTrigger(900_000, 1_796_083_200_000)),
        (["--every", "1h", "--start", "+30m"], IntervalTrigger(3_600_000, NOW + 30 * MINUTE)),
        (["--at", "2026-11-30T11:00:00+01:00"], OnceTrigger(NOW)),
        (["--at", "+2h"], OnceTrigger(NOW + 120 * MINUTE)),
        (["--manual"], ManualTrigger()),
    ],
)
def test_trigger_kinds(argv: list[str], trigger: object) -> None:
    assert add_spec("t", *argv, "--command", "true").trigger == trigger


def test_update_merges_into_the_current_spec() -> None:
    current = TaskSpec("t", CronTrigger("0 * * * *", "Europe/Berlin"), command="a", priority=2, owner="x")
    parser = cli.build_parser()

    def merged(*argv: str) -> TaskSpec:
        return cli.merge_spec(current, parser.parse_args(["task", "update", "t", *argv]), fixed_now)

    assert merged("--priority", "9") == TaskSpec(
        "t", CronTrigger("0 * * * *", "Europe/Berlin"), command="a", priority=9, owner="x"
    )
    assert merged("--cron", "5 * * * *").trigger == CronTrigger(
        "5 * * * *", "Europe/Berlin"
    )  # keeps the zone
    assert merged("--tz", "UTC").trigger == CronTrigger("0 * * * *", "UTC")
    assert merged("--every", "60").trigger == IntervalTrigger(60_000)
    switched = merged("--handler", "h")
    assert (switched.handler, switched.command) == ("h", "")
    with pytest.raises(cli.UsageError, match="--start applies to an interval"):
        merged("--start", "now")
    with pytest.raises(cli.UsageError, match="--tz applies to a cron"):
        merged("--every", "60", "--tz", "UTC")


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["--cron", "* * * * *", "--shards", "0"], ["--shards", "0 out of range"]),
        (["--cron", "* * * * *", "--priority", "12"], ["--priority", "12 out of range"]),
        (["--cron", "* * * * *", "--params", "[1, 2]"], ["--params", "JSON object"]),
        (["--cron", "* * * * *", "--params", "{oops"], ["--params", "not valid JSON"]),
        (["--every", "1.5"], ["--every", "not a whole number of seconds"]),
        (["--every", "ten"], ["argument --every", "not a duration"]),
        (["--at", "tomorrow"], ["--at", "'tomorrow' is not a time"]),
        (["--cron", "* * * * *", "--misfire", "sometimes"], ["argument --misfire", "invalid choice"]),
        (["--cron", "* * * * *", "--shards", "many"], ["argument --shards", "invalid int value"]),
        (["--cron", "* * * * *", "--every", "60"], ["not allowed with argument --cron"]),
        (["--manual", "--command", "a", "--handler", "b"], ["not allowed with argument --command"]),
        (["--every", "60", "--tz", "UTC"], ["--tz applies to a cron schedule"]),
        ([], ["one of the arguments --cron --every --at --manual is required"]),
    ],
)
def test_invalid_task_options_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragments: list[str]
) -> None:
    # No cluster is configured: input is checked before anything is dialled.
    status, out, err = run(capsys, "task", "add", "backup", *argv)
    assert status == 2 and out == ""
    assert_one_error_line(err, *fragments)


def test_bad_task_name_is_reported_as_name(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "task", "add", "no spaces", "--manual")
    assert status == 2
    assert_one_error_line(err, "NAME: 'no spaces' is not a valid name")


# -- times and durations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-30T10:00:00Z", NOW),
        ("2026-11-30T11:00:00+01:00", NOW),
        ("2026-11-30T10:00:00.250Z", NOW + 250),
        ("2026-11-30", NOW - 10 * 60 * MINUTE),
        ("now", NOW),
        (" NOW ", NOW),
        ("-10m", NOW - 10 * MINUTE),
        ("-2h", NOW - 120 * MINUTE),
        ("-1d", NOW - 24 * 60 * MINUTE),
        ("+30s", NOW + 30_000),
        ("+1w", NOW + 7 * 24 * 60 * MINUTE),
        ("-500ms", NOW - 500),
        ("1796032800000", NOW),
        ("0", 0),
    ],
)
def test_parse_time(text: str, expected: int) -> None:
    assert cli.parse_time(text, fixed_now) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("2026-11-30T10:00:00", "has no UTC offset"),
        ("yesterday", "is not a time"),
        ("10m", "is not a time"),
        ("-10 m", "is not a time"),
        ("", "is not a time"),
        ("2026-13-01", "is not a time"),
        ("99999999999999999999", "outside 1970-01-01 .. 9999-12-31"),
        ("1969-12-31", "outside"),
        ("-100000d", "outside"),
    ],
)
def test_parse_time_rejects(text: str, reason: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        cli.parse_time(text, fixed_now, "--since")
    assert caught.value.field == "--since"
    assert reason in caught.value.reason


def test_now_is_read_only_when_needed() -> None:
    def no_clock() -> int:
        raise AssertionError("the clock was read")

    assert cli.parse_time("2026-11-30", no_clock) == NOW - 10 * 60 * MINUTE


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("90", 90_000),
        ("1.5", 1500),
        ("0.001", 1),
        ("500ms", 500),
        ("10m", 600_000),
        ("2h", 7_200_000),
        ("1d", 86_400_000),
        ("0", 0),
    ],
)
def test_parse_duration(text: str, ms: int) -> None:
    # The CLI reads durations with the shared grammar (tests/unit/test_durations.py has the rest).
    assert duration_arg(text) == ms


@pytest.mark.parametrize("text", ["", "-5", "1e3", "5 m", "1.5ms", "x"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration_arg(text)


# -- cron preview (local) --------------------------------------------------------------------------


def test_cron_preview_berlin_fall_back_fires_0230_once(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = sh(
        capsys, "cron preview '*/30 * * * *' --tz Europe/Berlin --from 2025-10-25T22:00:00Z --count 8"
    )
    assert status == 0 and err == ""
    lines = out.splitlines()
    local_column = [line.split()[2] for line in lines[2:10]]
    assert [t for t in local_column if t.startswith("2025-10-26T02:30")] == ["2025-10-26T02:30:00+02:00"]
    assert lines[0] == "cron '*/30 * * * *' in Europe/Berlin: 8 fire(s) after 2025-10-25T22:00:00Z"
    assert lines[1].split() == ["#", "UTC", "LOCAL", "(Europe/Berlin)", "NOTE"]
    assert lines[6].split() == ["5", "2025-10-26T00:30:00Z", "2025-10-26T02:30:00+02:00"]
    # One hour of elapsed time passes without a fire, then the offset note.
    assert lines[7].split()[:3] == ["6", "2025-10-26T02:00:00Z", "2025-10-26T03:00:00+01:00"]
    assert "+02:00 -> +01:00" in lines[7]
    assert lines[-1].startswith("DST policy:")


def test_cron_preview_daily_job_across_fall_back(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = sh(capsys, "cron preview '30 2 * * *' --tz Europe/Berlin --from 2025-10-25 --count 3")
    assert status == 0
    utc_column = [line.split()[1] for line in out.splitlines()[2:5]]
    assert utc_column == ["2025-10-25T00:30:00Z", "2025-10-26T00:30:00Z", "2025-10-27T01:30:00Z"]


def test_cron_preview_json(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = sh(capsys, "cron preview '0 9 * * 1-5' --tz America/New_York --count 2 --json")
    assert status == 0
    data = json.loads(out)
    assert data == {
        "expr": "0 9 * * 1-5",
        "timezone": "America/New_York",
        "from": "2026-11-30T10:00:00Z",
        "from_ms": NOW,
        "fires": [
            {
                "utc": "2026-11-30T14:00:00Z",
                "utc_ms": NOW + 4 * 60 * MINUTE,
                "local": "2026-11-30T09:00:00-05:00",
            },
            {
                "utc": "2026-12-01T14:00:00Z",
                "utc_ms": NOW + 28 * 60 * MINUTE,
                "local": "2026-12-01T09:00:00-05:00",
            },
        ],
    }


def test_cron_preview_accepts_a_negative_relative_time(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "cron", "preview", "@hourly", "--from", "-90m", "--count", "1", "--json")
    assert status == 0
    assert json.loads(out)["from_ms"] == NOW - 90 * MINUTE


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["61 * * * *"], ["EXPR: minute: 61 out of range 0-59"]),
        (["* * * * *", "--tz", "Mars/Base"], ["--tz: unknown time zone 'Mars/Base'"]),
        (["* * * * *", "--count", "0"], ["--count: must be between 1 and 1000"]),
        (["* * * * *", "--from", "2025-01-01T00:00"], ["--from", "no UTC offset"]),
    ],
)
def test_cron_preview_errors(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragments: list[str]
) -> None:
    status, out, err = run(capsys, "cron", "preview", *argv)
    assert status == 2 and out == ""
    assert_one_error_line(err, *fragments)


# -- usage -----------------------------------------------------------------------------------------


def test_help_lists_commands_and_options(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "--help")
    assert status == 0
    commands = ("task", "trigger", "runs", "fires", "explain", "status", "cron", "demo")
    for word in ("--cluster", "--config", "--timeout", *commands):
        assert word in out
    status, out, _ = run(capsys, "task", "add", "--help")
    assert status == 0
    for option in (
        "--cron",
        "--tz",
        "--every",
        "--start",
        "--at",
        "--manual",
        "--misfire-window",
        "--disabled",
    ):
        assert option in out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["task"], "the following arguments are required: ACTION"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["--cluster", "a:1", "--config", "c.toml", "status"], "not allowed with argument --cluster"),
        (["status"], "no cluster given"),
        (["--cluster", "localhost", "status"], "--cluster: 'localhost': missing port"),
        (["--timeout", "0", "--cluster", "a:1", "status"], "argument --timeout"),
        (["--cluster", "a:1", "task", "update", "t"], "nothing to update"),
        (["--cluster", "a:1", "runs", "--since", "soon"], "--since: 'soon' is not a time"),
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str) -> None:
    status, out, err = run(capsys, *argv)
    assert status == 2 and out == ""
    assert_one_error_line(err, fragment)


def test_a_bad_config_file_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    bad = tmp_path / "cluster.toml"
    bad.write_text("[cluster]\nname = 1\n")
    status, _, err = run(capsys, "--config", str(bad), "status")
    assert status == 2
    assert_one_error_line(err, "invalid config", "cluster.name")


# -- entry points for the node (the functions that run a node or the demo are stubbed) ------------


@pytest.fixture
def fake_node(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[str, ...]]]:
    calls: list[tuple[str, tuple[str, ...]]] = []

    def run_node(*args: str, **kwargs: object) -> int:
        calls.append(("run_node", args + tuple(f"{k}={v}" for k, v in kwargs.items())))
        if args[1] == "bad":
            raise ConfigError("c.toml", ["nodes: no node with id 'bad'", "second problem"])
        return 0

    def run_demo(*args: str) -> int:
        calls.append(("run_demo", args))
        return 0

    monkeypatch.setattr(node_cli, "run_node", run_node)
    monkeypatch.setattr(demo_cli, "run_demo", run_demo)
    return calls


def test_node_main_join_flag(fake_node: list[tuple[str, tuple[str, ...]]]) -> None:
    assert node_cli.node_main(["--config", "c.toml", "--node-id", "n4", "--join"]) == 0
    assert fake_node == [("run_node", ("c.toml", "n4", "info", "", "text", "join=True"))]


def test_node_main_calls_run_node(
    fake_node: list[tuple[str, tuple[str, ...]]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert node_cli.node_main(["--config", "c.toml", "--node-id", "n1"]) == 0
    assert node_cli.node_main(["--config", "c.toml", "--node-id", "n2", "--log-level", "debug"]) == 0
    assert node_cli.node_main(["--config", "c.toml", "--node-id", "n3", "--log-format", "json"]) == 0
    assert fake_node == [
        ("run_node", ("c.toml", "n1", "info", "", "text")),
        ("run_node", ("c.toml", "n2", "debug", "", "text")),
        ("run_node", ("c.toml", "n3", "info", "", "json")),
    ]
    assert node_cli.node_main(["--config", "c.toml", "--node-id", "bad"]) == 2
    err = capsys.readouterr().err
    assert (
        err == "raftsched-node: error: invalid config c.toml: nodes: no node with id 'bad'; second problem\n"
    )
    assert node_cli.node_main(["--config", "c.toml"]) == 2
    assert "--node-id" in capsys.readouterr().err


def test_demo_subcommand(
    fake_node: list[tuple[str, tuple[str, ...]]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["demo"]) == 0
    assert cli.main(["demo", "--config", "mine.toml"]) == 0
    assert cli.main(["--config", "global.toml", "demo"]) == 0
    assert cli.main(["demo", "--duration", "5"]) == 0
    assert fake_node == [
        ("run_demo", ("cluster.example.toml", "0.0")),
        ("run_demo", ("mine.toml", "0.0")),
        ("run_demo", ("global.toml", "0.0")),
        ("run_demo", ("cluster.example.toml", "5.0")),
    ]


def test_a_bad_test_clock_offset_stops_the_node_before_it_starts(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "cluster.toml"
    write_config(config, 1)
    monkeypatch.setenv(localcluster.TEST_CLOCK_OFFSET_ENV, "soon")
    assert localcluster.main(["node", "--config", str(config), "--node-id", "n1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("raftsched-node: error: "), err
    assert localcluster.TEST_CLOCK_OFFSET_ENV in err
    assert "'soon' is not an integer number of milliseconds" in err


def test_the_node_program_reads_no_test_clock_setting(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The clock faults of the chaos suite are the test entry point's (raftsched.testing.cluster):
    ``raftsched-node`` runs on the system clock whatever its environment says, so a bad offset
    does not stop it; a missing backup to restore does, before the node starts."""
    config = tmp_path / "cluster.toml"
    write_config(config, 1)
    monkeypatch.setenv(localcluster.TEST_CLOCK_OFFSET_ENV, "soon")
    missing = tmp_path / "missing.bak"
    argv = ["--config", str(config), "--node-id", "n1", "--restore", str(missing)]
    assert node_cli.node_main(argv) == 2
    err = capsys.readouterr().err
    assert f"cannot read backup {missing}" in err, err
    assert localcluster.TEST_CLOCK_OFFSET_ENV not in err


def test_the_programs_run_as_modules_and_the_admin_cli_loads_no_node() -> None:
    # -W error: a node module the package had imported first would be warned about as a second copy.
    for module, usage in (
        ("raftsched.cli.node", "raftsched-node"),
        ("raftsched.executor", "raftsched-executor"),
    ):
        done = subprocess.run(
            [sys.executable, "-W", "error", "-m", module, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"usage: {usage} "), done.stdout
    probe = "import sys, raftsched.cli; print(sorted(m for m in NODE_MODULES if m in sys.modules))"
    heavy = ("raftsched.server.node", "raftsched.cli.node", "pysyncobj", "lmdb")
    done = subprocess.run(
        [sys.executable, "-c", f"NODE_MODULES = {heavy!r}; {probe}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "[]"


# -- cluster commands against one scripted in-process server -----------------------------------------


class FakeAdmin(pb_grpc.AdminServicer):  # type: ignore[misc, unused-ignore]  # Any when mypy skips generated code
    """Serves one task, ``backup``; records every request."""

    def __init__(self) -> None:
        self.requests: list[Message] = []
        self.task = pb.TaskRecord(
            spec=pb.TaskSpec(
                name="backup",
                command="backup.sh",
                shards=1,
                priority=5,
                namespace="default",
                trigger=pb.Trigger(cron=pb.CronTrigger(expr="30 2 * * *", timezone="Europe/Berlin")),
            ),
            version=3,
            enabled=True,
            next_fire_ms=NOW,
        )

    def GetTask(self, request: pb.GetTaskRequest, context: Any) -> pb.TaskReply:
        self.requests.append(request)
        if request.name != "backup":
            context.set_trailing_metadata((("raftsched-code", "not_found"),))
            context.abort(grpc.StatusCode.NOT_FOUND, f"no task named {request.name!r}")
        return pb.TaskReply(task=self.task)

    def UpdateTask(self, request: pb.UpdateTaskRequest, context: Any) -> pb.TaskReply:
        self.requests.append(request)
        reply = pb.TaskRecord()
        reply.CopyFrom(self.task)
        reply.spec.CopyFrom(request.spec)
        reply.version = self.task.version + 1
        return pb.TaskReply(task=reply)

    def ListTasks(self, request: pb.ListTasksRequest, context: Any) -> pb.ListTasksReply:
        self.requests.append(request)
        return pb.ListTasksReply(tasks=[self.task])

    def NodeStatus(self, request: pb.NodeStatusRequest, context: Any) -> pb.NodeStatusReply:
        return pb.NodeStatusReply(
            node_id="n1",
            role="leader",
            grpc="x",
            term=2,
            commit_index=7,
            applied_index=7,
            state_digest="f" * 64 if request.include_digest else "",
        )


@pytest.fixture
def admin() -> Iterator[tuple[FakeAdmin, str]]:
    servicer = FakeAdmin()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    ADD_SERVICER(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(grace=None)


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "_sleep", lambda seconds: None)


def test_task_list_table_and_json(admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]) -> None:
    _, address = admin
    status, out, _ = run(capsys, "--cluster", address, "task", "list")
    assert status == 0
    header, row = out.splitlines()
    assert (
        header
        == "NAME    ENABLED  SCHEDULE                         NEXT FIRE (UTC)       VERSION  ACTIVE  RUNS"
    )
    assert row == "backup  yes      cron '30 2 * * *' Europe/Berlin  2026-11-30T10:00:00Z  3        0       0"

    status, out, _ = run(capsys, "--cluster", address, "task", "list", "--json")
    assert status == 0
    (task,) = json.loads(out)
    assert task["spec"]["name"] == "backup"
    assert task["spec"]["trigger"] == {"cron": {"expr": "30 2 * * *", "timezone": "Europe/Berlin"}}
    assert task["version"] == 3 and task["next_fire_ms"] == NOW  # int64 as JSON numbers
    assert task["active_runs"] == 0  # every field present, for scripts


def test_env_var_names_the_cluster(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cli.CLUSTER_ENV, admin[1])
    status, out, _ = run(capsys, "task", "show", "backup", "--json")
    assert status == 0 and json.loads(out)["spec"]["command"] == "backup.sh"


def test_task_update_sends_the_merged_spec_with_the_current_version(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]
) -> None:
    servicer, address = admin
    status, out, _ = run(
        capsys, "--cluster", address, "task", "update", "backup", "--priority", "9", "--tz", "UTC"
    )
    assert status == 0
    assert out.startswith("updated task backup (version 3 -> 4)")
    sent = servicer.requests[-1]
    assert isinstance(sent, pb.UpdateTaskRequest)
    assert sent.expected_version == 3 and sent.idempotency_key
    assert (sent.spec.priority, sent.spec.command) == (9, "backup.sh")
    assert sent.spec.trigger.cron == pb.CronTrigger(expr="30 2 * * *", timezone="UTC")


def test_not_found_exits_1_with_one_line(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = run(capsys, "--cluster", admin[1], "task", "show", "nightly")
    assert status == 1 and out == ""
    assert err == "raftsched: error: no task named 'nightly'\n"


def test_status_shows_reachable_and_unreachable_nodes(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        gone = f"127.0.0.1:{closed.getsockname()[1]}"
        status, out, _ = run(capsys, "--cluster", f"{admin[1]},{gone}", "status")
        assert status == 0
        lines = out.splitlines()
        assert lines[0] == "leader: n1 (x)   term: 2   commit index: 7"
        # The fake node reports no build (a build from before formats were reported) and no
        # contact age (one from before linearizable reads).
        row = [admin[1], "n1", "leader", "2", "7", "7", "-", "-", "f" * 12, "?", "c1/s1", "ok"]
        assert lines[2].split() == row
        assert lines[3].split()[:3] == [gone, "-", "-"] and "unreachable: UNAVAILABLE" in lines[3]

        status, out, _ = run(capsys, "--cluster", f"{admin[1]},{gone}", "status", "--json")
        data = json.loads(out)
        assert (data["leader_id"], data["term"], data["commit_index"]) == ("n1", 2, 7)
        assert [n["reachable"] for n in data["nodes"]] == [True, False]
        assert data["nodes"][0]["status"]["state_digest"] == "f" * 64
        assert data["nodes"][1]["status"] is None and data["nodes"][1]["error"]


def test_unreachable_cluster_exits_1(no_backoff: None, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        gone = f"127.0.0.1:{closed.getsockname()[1]}"
        status, out, err = run(capsys, "--cluster", gone, "runs", "--since", "-1h")
    assert status == 1 and out == ""
    assert_one_error_line(err, "ListRuns failed after 9 attempt(s)", f"tried {gone}")
