"""CLI papercuts: a closed pipe, global options after the command, ``--version``, digests in
``status``, one spelling per enum in tables and JSON, and multi-line values in tables.

The cluster commands run against one scripted in-process gRPC server.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from raftsched import __version__, cli
from raftsched.cli import input as cli_input
from raftsched.cli import node as node_cli
from raftsched.cli import parser as cli_parser
from raftsched.cli.process import check_listen_address, lock_data_dir
from raftsched.cli.render import one_line, to_dict
from raftsched.display import enum_name
from raftsched.errors import CannotStart, ConfigError
from raftsched.testing.cluster import write_config
from raftsched.timing.clock import ManualClock
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

ADD_SERVICER: Any = pb_grpc.add_AdminServicer_to_server  # untyped generated code

NOW = 1_796_032_800_000  # 2026-11-30T10:00:00Z
SCRIPT = "set -e\n\tpg_dump orders > /tmp/orders.sql\ngzip /tmp/orders.sql\n"


class FakeAdmin(pb_grpc.AdminServicer):  # type: ignore[misc, unused-ignore]  # Any when mypy skips generated code
    """A node that answers NodeStatus (a digest only when asked), fires, tasks and one workflow."""

    def __init__(self) -> None:
        self.requests: list[Message] = []
        self.leader_view = True

    def NodeStatus(self, request: pb.NodeStatusRequest, context: Any) -> pb.NodeStatusReply:
        self.requests.append(request)
        return pb.NodeStatusReply(
            node_id="n1",
            role="leader",
            grpc="x",
            term=2,
            commit_index=7,
            applied_index=7,
            state_digest="ab" * 32 if request.include_digest else "",
        )

    def FireAccounting(self, request: pb.FireAccountingRequest, context: Any) -> pb.FireAccountingReply:
        self.requests.append(request)
        return pb.FireAccountingReply(
            fires=[
                pb.FireRecord(task="backup", nominal_ms=NOW, outcome=pb.FIRED, run_id="backup@1"),
                pb.FireRecord(task="backup", nominal_ms=NOW + 1000, outcome=pb.SKIPPED_OVERLAP),
            ]
        )

    def AddTask(self, request: pb.AddTaskRequest, context: Any) -> pb.TaskReply:
        self.requests.append(request)
        return pb.TaskReply(task=pb.TaskRecord(spec=request.spec, version=1, enabled=True))

    def ListTasks(self, request: pb.ListTasksRequest, context: Any) -> pb.ListTasksReply:
        self.requests.append(request)
        spec = pb.TaskSpec(name="backup", command=SCRIPT, misfire=pb.MISFIRE_ALL, overlap=pb.OVERLAP_SKIP)
        return pb.ListTasksReply(tasks=[pb.TaskRecord(spec=spec, version=1, enabled=True)])

    def GetWorkflow(self, request: pb.GetWorkflowRequest, context: Any) -> pb.WorkflowReply:
        self.requests.append(request)
        spec = pb.WorkflowSpec(name="etl", description="nightly\nload")
        spec.tasks.add(name="extract", command=SCRIPT)
        spec.tasks.add(name="load", command="load.sh", depends_on=[pb.Dependency(task="extract")])
        return pb.WorkflowReply(workflow=pb.WorkflowRecord(spec=spec, version=1))

    def ListExecutors(self, request: pb.ListExecutorsRequest, context: Any) -> pb.ListExecutorsReply:
        self.requests.append(request)
        reply = pb.ListExecutorsReply(node_id="n1", leader_view=self.leader_view)
        reply.executors.add(
            name="ex1",
            state=pb.EXECUTOR_ALIVE,
            slots=4,
            slots_used=3,
            labels={"zone": "a", "gpu": "yes"},
            joined_ms=NOW - 3_600_000,
            last_heartbeat_ms=NOW - 2000 if self.leader_view else 0,
            address="ipv4:127.0.0.1:50514" if self.leader_view else "",
        )
        if request.include_left:
            reply.executors.add(
                name="ex0",
                state=pb.EXECUTOR_LEFT,
                slots=2,
                joined_ms=NOW - 7_200_000,
                left_ms=NOW - 60_000,
                left_reason="heartbeats stopped",
            )
        return reply

    def SetWorkflowPaused(self, request: pb.SetWorkflowPausedRequest, context: Any) -> pb.WorkflowReply:
        self.requests.append(request)
        if request.name != "etl":
            context.set_trailing_metadata((("raftsched-code", "not_found"),))
            context.abort(grpc.StatusCode.NOT_FOUND, f"workflow {request.name!r} does not exist")
        record = pb.WorkflowRecord(spec=pb.WorkflowSpec(name="etl"), version=2, paused=request.paused)
        if not request.paused:
            record.next_fire_ms = NOW + 20_000
        return pb.WorkflowReply(workflow=record, changed=True)

    def DeleteWorkflow(self, request: pb.DeleteWorkflowRequest, context: Any) -> pb.DeleteWorkflowReply:
        self.requests.append(request)
        if not request.force:
            context.set_trailing_metadata((("raftsched-code", "conflict"),))
            context.abort(
                grpc.StatusCode.ABORTED,
                "workflow 'etl' has 2 active run(s) (etl@1, etl@2): kill them, or delete with --force",
            )
        record = pb.WorkflowRecord(spec=pb.WorkflowSpec(name="etl"), version=2)
        return pb.DeleteWorkflowReply(workflow=record, runs_killed=2)

    def GetWorkflowRun(self, request: pb.GetWorkflowRunRequest, context: Any) -> pb.WorkflowRunReply:
        self.requests.append(request)
        run = pb.WorkflowRun(run_id=request.run_id, workflow="etl", version=1, state=pb.WORKFLOW_FAILED)
        task = run.tasks.add(name="extract", state=pb.TASK_FAILED, tries=1, reason="exit 2:\nno such table")
        task.timeline.add(state=pb.TASK_FAILED, at_ms=NOW, reason="exit 2:\nno such table")
        return pb.WorkflowRunReply(run=run)


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_input, "SystemClock", lambda: ManualClock(NOW))


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeAdmin, str]]:
    monkeypatch.delenv(cli.CLUSTER_ENV, raising=False)
    servicer = FakeAdmin()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    ADD_SERVICER(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(grace=None)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


# -- a closed pipe ---------------------------------------------------------------------------------


def test_output_into_a_closed_pipe_ends_quietly() -> None:
    # The reader is gone before the command writes (as `| head` is after its lines): no traceback,
    # not even the interpreter's "Exception ignored" at exit, and SIGPIPE's exit status.
    proc = subprocess.Popen(
        [sys.executable, "-m", "raftsched.cli", "cron", "preview", "* * * * * *", "--count", "200"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == cli_parser.EXIT_BROKEN_PIPE == 141
    assert err == ""


def test_a_broken_pipe_inside_a_command_is_the_same_exit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def closed_pipe(args: Any) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli.cron, "cmd_cron_preview", closed_pipe)
    status, _, err = run(capsys, "cron", "preview", "* * * * *")
    assert status == 141 and err == ""


# -- global options after the command ----------------------------------------------------------------


def test_global_options_are_accepted_after_the_command(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, address = admin
    for argv in (
        ["status", "--cluster", address],
        ["status", "--json", "--cluster", address, "--timeout", "5"],
        ["--timeout", "5", "status", "--cluster", address],
        ["--cluster", "127.0.0.1:1", "status", "--cluster", address],  # the later one wins
    ):
        status, out, err = run(capsys, *argv)
        assert status == 0, (argv, err)
        assert "n1" in out
    status, out, _ = run(capsys, "fires", "backup", "--cluster", address)
    assert status == 0 and "fired" in out


def test_global_options_after_the_command_follow_the_same_rules(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "cluster.toml"
    config.write_text("[cluster]\nname = 1\n")
    for argv, fragment in (
        (
            ["--cluster", "a:1", "status", "--config", "c.toml"],
            "--config: not allowed with argument --cluster",
        ),
        (
            ["--config", "c.toml", "status", "--cluster", "a:1"],
            "--cluster: not allowed with argument --config",
        ),
        (["status", "--cluster", "a:1", "--config", "c.toml"], "not allowed with argument"),
        (["status", "--timeout", "0", "--cluster", "a:1"], "argument --timeout"),
        (["status", "--config", str(config)], "cluster.name"),
        (["status", "--cluster", "a:1", "--tls-ca", str(tmp_path / "none.pem")], "--tls-ca: cannot read"),
    ):
        status, out, err = run(capsys, *argv)
        assert status == 2 and out == "", argv
        assert len(err.splitlines()) == 1 and fragment in err, (argv, err)


def test_task_add_keeps_timeout_for_the_task_and_takes_cluster_after(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]
) -> None:
    servicer, address = admin
    argv = ["task", "add", "t", "--manual", "--command", "c", "--timeout", "90s", "--cluster", address]
    status, _, err = run(capsys, *argv)
    assert status == 0, err
    sent = servicer.requests[-1]
    assert isinstance(sent, pb.AddTaskRequest) and sent.spec.timeout_ms == 90_000


# -- --version -------------------------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "--version")
    assert (status, out, err) == (0, f"raftsched {__version__}\n", "")
    for module, prog in (
        ("raftsched.cli.node", "raftsched-node"),
        ("raftsched.executor", "raftsched-executor"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", module, "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stdout) == (0, f"{prog} {__version__}\n"), done.stderr


# -- status shows digests --------------------------------------------------------------------------


def test_status_asks_for_digests_unless_told_not_to(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]
) -> None:
    servicer, address = admin
    status, out, _ = run(capsys, "--cluster", address, "status")
    assert status == 0
    assert servicer.requests[-1] == pb.NodeStatusRequest(include_digest=True)
    assert out.splitlines()[2].split()[8] == "ab" * 6  # after CONTACT and CLOCK
    status, out, _ = run(capsys, "--cluster", address, "status", "--json")
    assert json.loads(out)["nodes"][0]["status"]["state_digest"] == "ab" * 32

    status, out, _ = run(capsys, "--cluster", address, "status", "--no-digest")
    assert status == 0
    assert servicer.requests[-1] == pb.NodeStatusRequest(include_digest=False)
    assert out.splitlines()[2].split()[8] == "-"  # no digest


# -- one spelling per enum value --------------------------------------------------------------------


def test_enum_values_are_spelled_alike_in_tables_and_json(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, address = admin
    status, out, _ = run(capsys, "--cluster", address, "fires", "backup")
    assert status == 0
    table = [line.split() for line in out.splitlines()[1:]]
    assert [row[2] for row in table] == ["fired", "skipped_overlap"]
    status, out, _ = run(capsys, "--cluster", address, "fires", "backup", "--json")
    assert [f["outcome"] for f in json.loads(out)] == ["fired", "skipped_overlap"]

    status, out, _ = run(capsys, "--cluster", address, "workflow", "status", "etl@1", "--json")
    data = json.loads(out)
    assert data["state"] == "failed"
    assert data["tasks"][0]["state"] == "failed"
    assert data["tasks"][0]["timeline"][0]["state"] == "failed"

    status, out, _ = run(capsys, "--cluster", address, "task", "list", "--json")
    spec = json.loads(out)[0]["spec"]
    assert (spec["misfire"], spec["overlap"]) == ("all", "skip")


def test_enum_name_rule() -> None:
    assert enum_name(pb.WorkflowTaskState, pb.TASK_SUCCESS) == "success"
    assert enum_name(pb.WorkflowRunState, pb.WORKFLOW_KILLED) == "killed"
    assert enum_name(pb.RunState, pb.SUCCEEDED) == "succeeded"
    assert enum_name(pb.FireOutcome, pb.SKIPPED_MISFIRE) == "skipped_misfire"
    assert enum_name(pb.TriggerRule, pb.RULE_ANY) == "any"
    assert enum_name(pb.MisfirePolicy, 0) == "unspecified"
    assert enum_name(pb.RunState, 99) == "99"
    spec = pb.WorkflowSpec(name="w", misfire=pb.MISFIRE_SKIP)
    spec.tasks.add(
        name="a", trigger_rule=pb.RULE_ALL, depends_on=[pb.Dependency(task="b", condition=pb.ON_DONE)]
    )
    out = to_dict(spec)
    assert out["misfire"] == "skip" and out["overlap"] == "unspecified"
    assert out["tasks"][0]["trigger_rule"] == "all"
    assert out["tasks"][0]["depends_on"][0]["condition"] == "on_done"


# -- multi-line values ------------------------------------------------------------------------------


def test_one_line() -> None:
    assert one_line("backup.sh") == "backup.sh"
    assert one_line("echo hi\n") == "echo hi"
    assert one_line("\nset -e\nrun\n\n") == "set -e [+1 line]"
    assert one_line(SCRIPT) == "set -e [+2 lines]"
    assert one_line("a\tb") == "a b"


def test_workflow_show_keeps_its_table_with_a_multi_line_command(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, address = admin
    status, out, _ = run(capsys, "--cluster", address, "workflow", "show", "etl")
    assert status == 0
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("TASK "))
    rows = lines[header + 1 :]
    assert len(rows) == 2, out
    assert rows[0].split()[:2] == ["extract", "-"] and "set -e [+2 lines]" in rows[0]
    assert rows[1].split()[:2] == ["load", "extract"]
    # The definition's multi-line description stays under its value column.
    description = lines.index("description       nightly")
    assert lines[description + 1] == " " * 18 + "load"
    # --json has the command as it is.
    status, out, _ = run(capsys, "--cluster", address, "workflow", "show", "etl", "--json")
    assert json.loads(out)["spec"]["tasks"][0]["command"] == SCRIPT


def test_workflow_status_keeps_its_table_with_a_multi_line_reason(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, address = admin
    status, out, _ = run(capsys, "--cluster", address, "workflow", "status", "etl@1")
    assert status == 0
    lines = out.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("TASK ")))
    assert lines[header + 1].split() == ["extract", "failed", "1", "-", "exit", "2:", "[+1", "line]"]
    assert lines[header + 2] == ""
    assert lines[-1].endswith("failed   exit 2: [+1 line]")


# -- the data dir lock and the listen check (the programs are tested in tests/integration) ----------


def test_a_data_dir_is_locked_once(tmp_path: Any) -> None:
    first = lock_data_dir(tmp_path / "d", "node n1")
    try:
        with pytest.raises(
            CannotStart, match=r"in use by another process \(pid \d+\): stop it, or give node n2"
        ):
            lock_data_dir(tmp_path / "d", "node n2")
    finally:
        first.release()
    lock_data_dir(tmp_path / "d", "node n2").release()  # free again once released
    (tmp_path / "file").write_text("")
    with pytest.raises(CannotStart, match="cannot use data dir"):
        lock_data_dir(tmp_path / "file" / "d", "node n1")


def test_check_listen_address() -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{other.getsockname()[1]}"
        other.listen()
        with pytest.raises(CannotStart, match=f"^gRPC address {address} is already in use$"):
            check_listen_address(address, "gRPC")
    check_listen_address(address, "gRPC")
    check_listen_address("no-such-host.invalid:1", "gRPC")  # left to the server's own bind


def test_node_data_dir_option(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, ...]] = []

    def fake_run_node(*args: str) -> int:
        calls.append(args)
        return 0

    monkeypatch.setattr(node_cli, "run_node", fake_run_node)
    assert node_cli.node_main(["--config", "c.toml", "--node-id", "n1", "--data-dir", "demo-data/n1"]) == 0
    assert calls == [("c.toml", "n1", "info", "demo-data/n1", "text")]

    config = write_config(tmp_path / "cluster.toml", 2)
    moved = node_cli.with_data_dir(config, "n2", tmp_path / "elsewhere")
    assert moved.node("n2").data_dir == tmp_path / "elsewhere"
    assert moved.node("n1") == config.node("n1")
    with pytest.raises(ConfigError, match="data_dir"):
        node_cli.with_data_dir(config, "n2", config.node("n1").data_dir)


# -- executors ---------------------------------------------------------------------------------------


def test_executors_table_and_json(admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]) -> None:
    servicer, address = admin
    status, out, _ = run(capsys, "--cluster", address, "executors")
    assert status == 0
    header, row = out.splitlines()
    assert header.split() == [
        "NAME",
        "STATE",
        "SLOTS",
        "LABELS",
        "ADDRESS",
        "LAST",
        "HEARTBEAT",
        "CLOCK",
        "DISK/LOG",
        "JOINED",
        "LEFT",
    ]
    assert row.split() == [
        "ex1",
        "alive",
        "3/4",
        "gpu=yes,zone=a",
        "ipv4:127.0.0.1:50514",
        "2026-11-30T09:59:58Z",
        "(2s",
        "ago)",
        "-",
        "0%/0%",
        "2026-11-30T09:00:00Z",
        "-",
    ]
    assert servicer.requests[-1] == pb.ListExecutorsRequest(include_left=False)

    status, out, _ = run(capsys, "--cluster", address, "executors", "--all", "--json")
    data = json.loads(out)
    assert servicer.requests[-1] == pb.ListExecutorsRequest(include_left=True)
    assert [(e["name"], e["state"]) for e in data["executors"]] == [("ex1", "alive"), ("ex0", "left")]
    assert data["executors"][0]["slots_used"] == 3 and data["leader_view"] is True
    assert data["executors"][1]["left_reason"] == "heartbeats stopped"


def test_executors_from_a_node_that_does_not_lead(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]
) -> None:
    servicer, address = admin
    servicer.leader_view = False  # and NodeStatus names no leader to ask instead
    status, out, _ = run(capsys, "--cluster", address, "executors")
    assert status == 0
    lines = out.splitlines()
    assert lines[1].split()[:6] == ["ex1", "alive", "3/4", "gpu=yes,zone=a", "-", "-"]
    assert (
        lines[-1]
        == "note: n1 answered without leading: heartbeats and addresses are known to the leader only"
    )


# -- workflow pause / resume / delete --------------------------------------------------------------------


def test_workflow_pause_resume_delete(
    admin: tuple[FakeAdmin, str], capsys: pytest.CaptureFixture[str]
) -> None:
    servicer, address = admin
    status, out, _ = run(capsys, "--cluster", address, "workflow", "pause", "etl")
    assert (status, out) == (0, "paused workflow etl: no scheduled runs until 'workflow resume'\n")
    sent = servicer.requests[-1]
    assert isinstance(sent, pb.SetWorkflowPausedRequest) and sent.paused and sent.idempotency_key

    status, out, _ = run(capsys, "--cluster", address, "workflow", "resume", "etl")
    assert (status, out) == (0, "resumed workflow etl; next scheduled run 2026-11-30T10:00:20Z\n")
    sent = servicer.requests[-1]
    assert isinstance(sent, pb.SetWorkflowPausedRequest)
    assert (sent.name, sent.paused) == ("etl", False)

    status, out, err = run(capsys, "--cluster", address, "workflow", "pause", "nope")
    assert (status, out, err) == (1, "", "raftsched: error: workflow 'nope' does not exist\n")

    status, out, err = run(capsys, "--cluster", address, "workflow", "delete", "etl")
    assert status == 1 and out == ""
    assert err == (
        "raftsched: error: workflow 'etl' has 2 active run(s) (etl@1, etl@2): "
        "kill them, or delete with --force\n"
    )
    status, out, _ = run(
        capsys, "--cluster", address, "workflow", "delete", "etl", "--force", "--reason", "retired"
    )
    assert (status, out) == (0, "deleted workflow etl (version 2), killed 2 active run(s)\n")
    sent = servicer.requests[-1]
    assert isinstance(sent, pb.DeleteWorkflowRequest)
    assert (sent.name, sent.force, sent.reason) == ("etl", True, "retired")

    status, _, err = run(capsys, "--cluster", address, "workflow", "delete", "etl", "--reason", "x")
    assert status == 2 and "--reason applies with --force" in err
