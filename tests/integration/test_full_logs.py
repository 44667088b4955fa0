"""Full logs (issue 29 part 2) with real processes: a one-node cluster with auth on and one real
executor (``raftsched-executor``), shared by the module.

* a run's whole output (far beyond the 8 KiB stored tail) reads back byte for byte, after the
  fact, through the SDK and the CLI (plain, ``--since-line``, ``--stderr``, ``--json``);
* ``--follow`` of a running attempt sees a line while the command still runs, and the next one
  only once the command wrote it;
* the executor gone (SIGKILL) or its file deleted: the answer says so and carries the stored tail;
  the executor back (same data dir): the full log again;
* a caller without ``tasks.read`` is refused; one outside the run's namespace sees no such run;
* a large log streams with flat memory on the node and in the CLI (50 MB here; 1 GB with
  ``-m soak``); the figures are printed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from raftsched.cli import main
from raftsched.client import Client
from raftsched.errors import NotFound, PermissionDenied
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.security.tokens import new_token
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.console_support import WebSession, write_http_config
from tests.integration.helpers import FAST_LEASES

pytestmark = pytest.mark.integration

AUTH = '[auth]\nbootstrap_token_file = "admin.token"\n'


@dataclass
class Setup:
    cluster: LocalCluster
    admin: str
    executor_token: str
    base: Path
    http: str
    proc: subprocess.Popen[bytes] | None = None

    def start_executor(self) -> None:
        self.proc = self.cluster.start_executor(
            "ex1", 4, self.base / "ex1", self.base / "ex1.log", token=self.executor_token
        )

    def kill_executor(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def connected(self, client: Client) -> bool:
        return any(e.name == "ex1" and e.address for e in client.list_executors().executors)

    def run(self, client: Client, name: str, command: str, *, wait: bool = True) -> str:
        client.add_task(TaskSpec(name, ManualTrigger(), command=command))
        run_id = client.trigger(name).run_id
        if wait:
            wait_until(
                lambda: client.get_run(run_id).state in (pb.SUCCEEDED, pb.FAILED),
                120,
                0.1,
                f"{name} finished",
            )
        return run_id


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    base = tmp_path_factory.mktemp("full-logs")
    admin = new_token()
    (base / "admin.token").write_text(admin + "\n")
    http = write_http_config(base / "cluster.toml", 1, AUTH + FAST_LEASES)["n1"]
    cluster = LocalCluster(base / "cluster.toml", base / "logs")
    cluster.token = admin
    s: Setup | None = None
    try:
        cluster.start()
        cluster.wait_for_leader(60)
        with Client(cluster.targets(), token=admin) as root:
            tok, _ = root.create_token("executor")
            s = Setup(cluster, admin, tok, base, http)
            s.start_executor()
            wait_until(lambda: s is not None and s.connected(root), 60, 0.1, "executor connected")
        yield s
    finally:
        if s is not None and s.proc is not None and s.proc.poll() is None:
            s.proc.terminate()  # drains: a test that failed may leave an attempt running
            try:
                s.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                s.proc.kill()
                s.proc.wait(timeout=10)
        cluster.stop()


def _read(client: Client, run_id: str, **kw: object) -> tuple[pb.LogsHeader, bytes, pb.LogEnd]:
    header, data, end = pb.LogsHeader(), bytearray(), pb.LogEnd()
    for chunk in client.logs(run_id, **kw):  # type: ignore[arg-type]
        part = chunk.WhichOneof("part")
        if part == "header":
            header = chunk.header
        elif part == "data":
            data += chunk.data
        else:
            end = chunk.end
    return header, bytes(data), end


def _cli(setup: Setup, capsysbinary: pytest.CaptureFixture[bytes], *args: str) -> tuple[int, bytes, bytes]:
    code = main(["--cluster", ",".join(setup.cluster.targets()), "--token", setup.admin, *args])
    out, err = capsysbinary.readouterr()
    return code, out, err


EXPECTED = b"".join(b"line %d of the output\n" % i for i in range(1, 20001))  # 437 KiB


def test_whole_output_reads_back_exactly_after_the_fact(
    setup: Setup, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    command = 'i=1; while [ $i -le 20000 ]; do echo "line $i of the output"; i=$((i+1)); done; echo oops >&2'
    with Client(setup.cluster.targets(), token=setup.admin) as client:
        run_id = setup.run(client, "chatty", command)
        stored = client.get_run(run_id).shards[0].stdout_tail
        header, data, end = _read(client, run_id)
        assert header.source == "executor" and header.executor == "ex1" and not header.running
        assert len(stored) < 9000 < len(EXPECTED)  # the stored tail is 8 KiB; the full log is all of it
        assert data == EXPECTED
        assert end.complete and end.bytes == len(EXPECTED) and not end.capped
        _, tail, _ = _read(client, run_id, since_line=19999)
        assert tail == b"line 19999 of the output\nline 20000 of the output\n"
        _, err_data, _ = _read(client, run_id, stderr=True, attempt=1)
        assert err_data == b"oops\n"
    code, out, _ = _cli(setup, capsysbinary, "logs", run_id)
    assert code == 0 and out == EXPECTED
    code, out, _ = _cli(setup, capsysbinary, "logs", run_id, "--since-line", "20000", "--json")
    objs = [json.loads(line) for line in out.decode().splitlines()]
    assert objs[0]["header"]["source"] == "executor"
    assert objs[1:-1] == [{"line": 20000, "text": "line 20000 of the output"}]
    assert objs[-1]["end"]["complete"] is True
    code, out, err = _cli(setup, capsysbinary, "logs", run_id, "--attempt", "2")
    assert code == 1 and b"no attempt 2" in err
    code, out, _ = _cli(setup, capsysbinary, "logs", run_id, "--tail", "30")
    assert code == 0 and out == b"line 20000 of the output\n"
    # The console: the run page links the full logs; the download streams the whole file.
    web = WebSession(setup.http)
    link = f"/download/log?run={urllib.parse.quote(run_id, safe='')}&shard=0&stream=stdout"
    assert web.get(link).status == 303  # signed out: to the sign-in page
    web.sign_in(setup.admin)
    page = web.get(f"/runs/{urllib.parse.quote(run_id, safe='')}")
    assert page.status == 200 and link.replace("&", "&amp;") in page.text
    got = web.get(link)
    assert got.status == 200 and got.text.encode() == EXPECTED
    assert "attachment" in got.headers["content-disposition"]
    # The HTTP API: the same stream, the caller's bearer token.
    api = f"/api/v1/runs/{urllib.parse.quote(run_id, safe='')}/logs:full"
    got = WebSession(setup.http).request("GET", api, headers={"Authorization": f"Bearer {setup.admin}"})
    assert got.status == 200 and got.text.encode() == EXPECTED
    assert got.headers["x-raftsched-log-source"] == "executor"
    got = WebSession(setup.http).request(
        "GET", api + "?stream=stderr&attempt=1", headers={"Authorization": f"Bearer {setup.admin}"}
    )
    assert got.status == 200 and got.text == "oops\n"
    assert WebSession(setup.http).get(api).status == 401
    got = WebSession(setup.http).request(
        "GET", api + "?shard=x", headers={"Authorization": f"Bearer {setup.admin}"}
    )
    assert got.status == 400 and "shard" in got.text


def test_follow_sees_lines_as_they_appear(setup: Setup) -> None:
    gate = setup.base / "gate"
    command = f"echo first; while [ ! -e {gate} ]; do sleep 0.05; done; echo second"
    got = bytearray()
    headers: list[pb.LogsHeader] = []
    ended = threading.Event()
    with Client(setup.cluster.targets(), token=setup.admin) as client:
        run_id = setup.run(client, "slow", command, wait=False)
        wait_until(lambda: client.get_run(run_id).shards[0].state == pb.RUNNING, 60, 0.05, "attempt running")

        def follow() -> None:
            for chunk in client.logs(run_id, follow=True):
                if chunk.HasField("header"):
                    headers.append(chunk.header)
                got.extend(chunk.data)
            ended.set()

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        wait_until(lambda: b"first\n" in got, 30, 0.02, "the first line, while the command runs")
        assert headers[0].running and b"second" not in got and not ended.is_set()
        # The console's run page shows the live tail of the running attempt.
        web = WebSession(setup.http)
        web.sign_in(setup.admin)
        page = web.get(f"/runs/{urllib.parse.quote(run_id, safe='')}").text
        assert "stdout, live" in page and "first" in page
        # A reader that goes away mid-follow: the leader ends the executor's upload at once
        # (the executor says so in its log), though the attempt still runs and writes nothing.
        quitter = client.logs(run_id, follow=True)
        assert next(quitter).HasField("header") and next(quitter).data == b"first\n"
        quitter.close()
        log = setup.base / "ex1.log"
        wait_until(lambda: f"log answer for {run_id}/0/1 ended" in log.read_text(), 30, 0.05, "upload ended")
        assert not ended.is_set()
        gate.touch()
        wait_until(ended.is_set, 30, 0.02, "the follow to end with the attempt")
        reader.join(10)
        assert bytes(got) == b"first\nsecond\n"
        wait_until(lambda: client.get_run(run_id).state == pb.SUCCEEDED, 30, 0.05, "run succeeded")


def test_executor_gone_or_file_deleted_shows_the_stored_tail(
    setup: Setup, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    with Client(setup.cluster.targets(), token=setup.admin) as client:
        run_id = setup.run(client, "brief", "echo hello; echo bye >&2")
        setup.kill_executor()
        try:
            wait_until(lambda: not setup.connected(client), 30, 0.05, "executor disconnected")
            header, data, end = _read(client, run_id)
            assert header.source == "stored_tail" and "executor 'ex1' is gone" in header.note
            assert data == b"hello\n" and not end.complete
            code, out, err = _cli(setup, capsysbinary, "logs", run_id)
            assert code == 0 and out == b"hello\n"
            assert b"is gone" in err and b"stored tail" in err
            web = WebSession(setup.http)
            web.sign_in(setup.admin)
            got = web.get(f"/download/log?run={urllib.parse.quote(run_id, safe='')}&shard=0").text
            assert got.startswith("[raftsched] executor 'ex1' is gone") and got.endswith("\nhello\n")
            api = f"/api/v1/runs/{urllib.parse.quote(run_id, safe='')}/logs:full"
            reply = web.request("GET", api, headers={"Authorization": f"Bearer {setup.admin}"})
            assert reply.text == "hello\n" and reply.headers["x-raftsched-log-source"] == "stored_tail"
            assert "is gone" in reply.headers["x-raftsched-log-note"]
        finally:
            setup.start_executor()
            wait_until(lambda: setup.connected(client), 60, 0.1, "executor back")
        header, data, _ = _read(client, run_id)  # back, same data dir: the file is there again
        assert header.source == "executor" and data == b"hello\n"
        name = urllib.parse.quote(f"{run_id}/0/1", safe="") + ".stdout"
        (setup.base / "ex1" / "logs" / name).unlink()  # as the retention would
        header, data, _ = _read(client, run_id)
        assert header.source == "stored_tail" and "has no stdout log" in header.note and data == b"hello\n"


def test_permission_denied_without_read_rights(setup: Setup) -> None:
    with Client(setup.cluster.targets(), token=setup.admin) as root:
        run_id = setup.run(root, "secret-ish", "echo private")
        other, _ = root.create_token("viewer", ["other"])
    # An executor token lacks tasks.read.
    with (
        Client(setup.cluster.targets(), token=setup.executor_token, retries=0) as client,
        pytest.raises(PermissionDenied, match=r"tasks\.read"),
    ):
        _read(client, run_id)
    # A viewer of another namespace: the run does not exist for it.
    with Client(setup.cluster.targets(), token=other, retries=0) as client, pytest.raises(NotFound):
        _read(client, run_id)
    web = WebSession(setup.http)
    web.sign_in(other)
    assert web.get(f"/download/log?run={urllib.parse.quote(run_id, safe='')}").status == 404


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _stream_with_flat_rss(setup: Setup, megabytes: int) -> None:
    size = megabytes * 1024 * 1024
    # 64-byte lines: "yes" is fast enough that the file is written in seconds.
    command = f"yes 012345678901234567890123456789012345678901234567890123456789012 | head -c {size}"
    with Client(setup.cluster.targets(), token=setup.admin) as client:
        run_id = setup.run(client, f"big-{megabytes}", command)
        assert client.get_run(run_id).state == pb.SUCCEEDED
    node_pid = next(iter(setup.cluster.procs.values())).pid
    node_before = _rss_kb(node_pid)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    base_cmd = [sys.executable, "-m", "raftsched.cli", "--cluster", ",".join(setup.cluster.targets())]
    base_cmd += ["--token", setup.admin, "logs"]
    # The CLI's own baseline: the same command for a tiny log.
    with Client(setup.cluster.targets(), token=setup.admin) as client:
        tiny = setup.run(client, f"tiny-{megabytes}", "echo tiny")
    small = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *base_cmd, tiny], capture_output=True, env=env, timeout=120, check=True
    )
    cli_small_kb = int(small.stderr.decode().strip().splitlines()[-1])
    node_peak = node_before
    start = time.monotonic()
    with subprocess.Popen(
        ["/usr/bin/time", "-f", "%M", *base_cmd, run_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        received = 0
        while chunk := proc.stdout.read(1024 * 1024):
            received += len(chunk)
            node_peak = max(node_peak, _rss_kb(node_pid))
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 0, err
    elapsed = time.monotonic() - start
    cli_kb = int(err.strip().splitlines()[-1])
    node_after = _rss_kb(node_pid)
    print(
        f"\nfull logs, {megabytes} MiB streamed in {elapsed:.1f} s: "
        f"node RSS before {node_before / 1024:.1f} MiB, "
        f"peak {node_peak / 1024:.1f} MiB, after {node_after / 1024:.1f} MiB; "
        f"CLI max RSS {cli_kb / 1024:.1f} MiB (for a one-line log: {cli_small_kb / 1024:.1f} MiB)"
    )
    assert received == size
    assert node_peak - node_before < 40 * 1024, "the node's memory grew with the log"
    assert cli_kb - cli_small_kb < 40 * 1024, "the CLI's memory grew with the log"


def test_a_large_log_streams_with_flat_memory(setup: Setup) -> None:
    _stream_with_flat_rss(setup, 50)


@pytest.mark.soak
def test_a_1gb_log_streams_with_flat_memory(setup: Setup) -> None:
    _stream_with_flat_rss(setup, 1024)
