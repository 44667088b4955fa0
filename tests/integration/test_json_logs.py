"""``--log-format json`` on real processes: every stderr line of a node and of an executor is
one JSON object, the records about an attempt carry its ids, and leadership records carry the
term."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raftsched.client import Client
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.testing.cluster import LocalCluster, stop_processes, wait_until
from raftsched.v1 import raftsched_pb2 as pb

pytestmark = pytest.mark.integration

JSON_LOGS = ("--log-format", "json", "--log-level", "debug")


class Setup:
    def __init__(self, base: Path) -> None:
        self.cluster = LocalCluster.create(base, 1)
        self.executor_err = base / "ex1.stderr"
        self.executor: subprocess.Popen[bytes] | None = None

    def start_executor(self) -> None:
        self.executor = self.cluster.start_executor("ex1", 2, log=self.executor_err, extra=JSON_LOGS)

    def stop(self) -> None:
        if self.executor is not None:
            stop_processes([self.executor])
        self.cluster.stop()


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    s = Setup(tmp_path)
    try:
        s.cluster.start(extra_args=JSON_LOGS)
        s.cluster.wait_for_leader(60)
        s.start_executor()
        yield s
    finally:
        s.stop()


def records(path: Path) -> list[dict[str, Any]]:
    """Each line of ``path`` as a JSON object; a line that is not one fails the test."""
    out = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError:
            pytest.fail(f"{path.name} line {number} is not JSON: {line!r}")
        assert isinstance(record, dict), f"{path.name} line {number}: {line!r}"
        for key in ("ts", "level", "logger", "message"):
            assert isinstance(record.get(key), str), f"{path.name}:{number} lacks {key}: {line}"
            assert record[key], f"{path.name}:{number} has an empty {key}: {line}"
        out.append(record)
    return out


def about(recs: list[dict[str, Any]], execution_id: str) -> list[dict[str, Any]]:
    return [r for r in recs if r.get("execution_id") == execution_id]


def test_node_and_executor_log_one_json_object_per_line_with_attempt_ids(setup: Setup) -> None:
    node_log = setup.cluster.log_dir / "n1.log"  # the node's stdout and stderr
    with Client(setup.cluster.targets()) as client:
        wait_until(lambda: len(client.list_executors().executors) == 1, 30, what="the executor registered")
        client.add_task(TaskSpec("good", ManualTrigger(), command="echo fine"))
        client.add_task(TaskSpec("bad", ManualTrigger(), command="echo broken >&2; exit 3"))
        good = client.trigger("good")
        bad = client.trigger("bad")

        def done(task: str) -> bool:
            return any(r.state in (pb.SUCCEEDED, pb.FAILED) for r in client.runs(task))

        wait_until(lambda: done("good") and done("bad"), 60, 0.2, "both runs finished")
    good_id, bad_id = f"{good.run_id}/0/1", f"{bad.run_id}/0/1"
    # The leader logs the failure when the report arrives, which the run's state follows.
    wait_until(lambda: about(records(node_log), bad_id), 30, what="the leader's record of the failure")
    assert setup.executor is not None
    stop_processes([setup.executor])
    setup.cluster.stop()  # all lines written and flushed

    node, executor = records(node_log), records(setup.executor_err)
    for recs, where in ((node, "node"), (executor, "executor")):
        for execution_id, run_id, task in ((good_id, good.run_id, "good"), (bad_id, bad.run_id, "bad")):
            found = about(recs, execution_id)
            assert found, f"no {where} record carries {execution_id}"
            for r in found:
                assert r["run_id"] == run_id and r["task"] == task, r
    # The executor: a start and an outcome for each, the failure at info with its error.
    assert any("starting" in r["message"] for r in about(executor, good_id))
    assert any("succeeded" in r["message"] for r in about(executor, good_id))
    [failure] = [r for r in about(executor, bad_id) if "failed" in r["message"]]
    assert failure["level"] == "info" and "exit code 3" in failure["message"]
    assert failure["executor"] == "ex1" and failure["attempt"] == 1
    # The leader: the assignment (debug) and the failure reported (info).
    assert any("assigned to ex1" in r["message"] for r in about(node, good_id))
    assert any(r["level"] == "info" and "failed on ex1" in r["message"] for r in about(node, bad_id))
    # Leadership records carry the term (and the epoch: the same number).
    [elected] = [r for r in node if "became the leader" in r["message"]]
    assert isinstance(elected["term"], int) and elected["term"] >= 1
    assert elected["epoch"] == elected["term"] and elected["node"] == "n1"
    assert any("armed" in r["message"] and r.get("term") == elected["term"] for r in node)
    roles = [r for r in node if "raft role" in r["message"]]
    assert roles and all(isinstance(r.get("term"), int) and "epoch" in r for r in roles), roles
    registered = [r for r in executor if "registered with" in r["message"]]
    assert registered and registered[0]["term"] == elected["term"]
