"""``raftsched run show RUN_ID [--json]`` and ``raftsched logs RUN_ID [--shard N]`` against one
scripted in-process Admin server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from raftsched.v1 import raftsched_pb2 as pb
from tests.unit.test_cli import ADD_SERVICER, MINUTE, NOW, FakeAdmin, run

RUN_ID = f"backup@{NOW}"


class RunAdmin(FakeAdmin):
    """FakeAdmin that also serves one finished run of ``backup``, with two shards."""

    def GetRun(self, request: pb.GetRunRequest, context: Any) -> pb.RunReply:
        self.requests.append(request)
        if request.run_id != RUN_ID:
            context.set_trailing_metadata((("raftsched-code", "not_found"),))
            context.abort(grpc.StatusCode.NOT_FOUND, f"run {request.run_id!r} does not exist")
        r = pb.Run(
            run_id=RUN_ID,
            task="backup",
            task_version=3,
            nominal_ms=NOW,
            created_ms=NOW,
            finished_ms=NOW + MINUTE,
            state=pb.FAILED,
        )
        r.shards.add(shard=0, attempt=1, state=pb.SUCCEEDED, executor="ex1", stdout_tail="copied 3 files\n")
        r.shards.add(
            shard=1,
            attempt=2,
            state=pb.FAILED,
            executor="ex2",
            exit_code=-9,
            stderr_tail="oom",
            error="killed",
        )
        r.timeline.add(event="created", at_ms=NOW, reason="fire")
        r.timeline.add(event="assigned", at_ms=NOW + 5, shard=1, attempt=1, executor="ex1")
        r.timeline.add(event="lease_expired", at_ms=NOW + 100, shard=1, attempt=1, executor="ex1")
        r.timeline.add(event="retry_scheduled", at_ms=NOW + 100, shard=1, attempt=2, retry_at_ms=NOW + 2000)
        r.timeline.add(
            event="failed",
            at_ms=NOW + MINUTE,
            shard=1,
            attempt=2,
            executor="ex2",
            exit_code=-9,
            duration_ms=900,
        )
        return pb.RunReply(run=r)


@pytest.fixture
def runs_admin() -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    ADD_SERVICER(RunAdmin(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(grace=None)


def test_run_show_prints_the_shards_and_the_timeline(
    runs_admin: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(capsys, "--cluster", runs_admin, "run", "show", RUN_ID)
    assert status == 0
    assert f"run       {RUN_ID}" in out and "state     failed" in out
    lines = out.splitlines()
    assert lines[-5].startswith("2026-11-30T10:00:00Z ") and lines[-5].endswith(" created (fire)")
    assert any("lease_expired shard 1 attempt 1 on ex1" in line for line in lines)
    assert any("retry_scheduled shard 1 attempt 2 not before 2026-11-30T10:00:02Z" in line for line in lines)
    assert any("failed shard 1 attempt 2 on ex2 signal 9 in 900 ms" in line for line in lines)


def test_run_show_json_carries_the_timeline(runs_admin: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "--cluster", runs_admin, "run", "show", RUN_ID, "--json")
    assert status == 0
    doc = json.loads(out)
    assert [e["event"] for e in doc["timeline"]] == [
        "created",
        "assigned",
        "lease_expired",
        "retry_scheduled",
        "failed",
    ]
    assert doc["timeline"][3]["retry_at_ms"] == NOW + 2000


def test_logs_prints_the_tails_of_every_shard_or_one(
    runs_admin: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(capsys, "--cluster", runs_admin, "logs", RUN_ID, "--tails")
    assert status == 0
    assert out.splitlines() == [
        "== shard 0 attempt 1 (succeeded) ==",
        "-- stdout --",
        "copied 3 files",
        "-- stderr --",
        "== shard 1 attempt 2 (failed) ==",
        "-- stdout --",
        "-- stderr --",
        "oom",
    ]
    status, out, _ = run(capsys, "--cluster", runs_admin, "logs", RUN_ID, "--tails", "--shard", "1")
    assert status == 0 and "shard 0" not in out and "oom" in out
    status, _, err = run(capsys, "--cluster", runs_admin, "logs", RUN_ID, "--tails", "--shard", "5")
    assert status == 2 and "no shard 5" in err


def test_unknown_run_exits_1_with_one_line(runs_admin: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "--cluster", runs_admin, "run", "show", "backup@1")
    assert status == 1 and out == ""
    assert err == "raftsched: error: run 'backup@1' does not exist\n"
