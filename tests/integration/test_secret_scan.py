"""Secrets never leave the executor (issue 29 §7), against real processes.

A 3-node cluster with [auth] (writes audited, the console signed in) and a small log-compaction
threshold (so every node writes a snapshot) and one
executor that has one secret in its environment and one in a secrets directory. A task echoes
both to stdout and stderr and writes a hash of them to a file; a workflow task does the same with
a secret in its env. Then the test searches every file under the cluster's directory (each node's
LMDB store, Raft journal and snapshot, the executor's execution log, every log file), a backup
written by ``raftsched backup``, every console page reachable from ``/`` and the HTTP API's JSON
for the values, and finds none; the hash file proves the attempt saw them, and the reference text
(found in the same places) proves the search looks where the definitions went.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.security.tokens import new_token
from raftsched.testing.cluster import LocalCluster, stop_processes, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.console_support import WebSession, write_http_config

pytestmark = pytest.mark.integration

DB_VALUE = "Xq7-db-pässword-93f1"
KEY_VALUE = "kk-api-key-55e0c2d9"
REFERENCE = "{{ secret.db_password }}"

SCRIPT = (
    "import hashlib, json, os, sys; p = json.loads(os.environ['RAFTSCHED_PARAMS']); "
    "v = p['pw'] + '|' + os.environ.get('KEY', p.get('key', '')); "
    "print('pw is', p['pw'], 'key is', os.environ.get('KEY', p.get('key'))); "
    "print('stderr:', v, file=sys.stderr); "
    "open(sys.argv[1], 'w').write(hashlib.sha256(v.encode()).hexdigest())"
)


def _command(out: Path) -> str:
    return f'{sys.executable} -c "{SCRIPT}" {out}'


def _crawl(web: WebSession, limit: int = 150) -> dict[str, str]:
    """Every console page reachable from ``/`` by same-site links (GET only), path → HTML."""
    pages: dict[str, str] = {}
    queue = ["/"]
    while queue and len(pages) < limit:
        path = queue.pop(0)
        if path in pages:
            continue
        reply = web.get(path)
        pages[path] = reply.text
        for link in re.findall(r'href="(/[^"#]*)"', reply.text):
            link = link.replace("&amp;", "&")
            if link.startswith(("/static/", "/logout", "/login")) or link in pages or link in queue:
                continue
            queue.append(link)
    return pages


def test_a_secret_reaches_the_attempt_and_nothing_else(tmp_path: Path) -> None:
    base = tmp_path / "cluster"
    base.mkdir()
    admin = new_token()  # with [auth]: the writes are audited, the console needs a sign-in
    (base / "admin.token").write_text(admin + "\n")
    extra = '[raft]\nlog_compaction_min_entries = 20\n\n[auth]\nbootstrap_token_file = "admin.token"\n'
    http = write_http_config(base / "cluster.toml", 3, extra)
    cluster = LocalCluster(base / "cluster.toml", base / "logs", token=admin)
    secrets = tmp_path / "secrets"  # outside the scanned directory: it holds the values
    secrets.mkdir(mode=0o700)
    (secrets / "api-key").write_text(KEY_VALUE + "\n")
    (secrets / "api-key").chmod(0o400)
    seen = tmp_path / "seen"
    seen.mkdir()
    executor: subprocess.Popen[bytes] | None = None
    try:
        cluster.start()
        leader = cluster.wait_for_leader(60)
        with Client(cluster.targets(), timeout=20, token=admin) as client:
            wait_until(lambda: _works(client), 30, 0.2, "the bootstrap admin token")
            executor_token, _ = client.create_token("executor", description="secret scan")
            executor = cluster.start_executor(
                "ex1",
                token=executor_token,
                env={"RAFTSCHED_SECRET_DB_PASSWORD": DB_VALUE},
                extra=["--secrets", str(secrets)],
            )
            wait_until(lambda: len(client.list_executors().executors) == 1, 60, 0.2, "the executor")
            params = f'{{"pw": "{REFERENCE}", "key": "{{{{ secret.api-key }}}}"}}'
            client.add_task(
                TaskSpec("leaky", ManualTrigger(), command=_command(seen / "task"), params_json=params)
            )
            client.add_task(
                TaskSpec("missing", ManualTrigger(), command="true", params_json='{"x": "{{ secret.nope }}"}')
            )
            wf = pb.WorkflowSpec(
                name="wf",
                params_json=f'{{"pw": "{REFERENCE}"}}',
                tasks=[
                    pb.WorkflowTaskSpec(
                        name="a", command=_command(seen / "wf"), env={"KEY": "{{ secret.api-key }}"}
                    )
                ],
            )
            client.apply_workflow(wf)
            # Enough commands that every node compacts its log into a snapshot file.
            client.add_tasks([TaskSpec(f"filler-{i}", ManualTrigger(), command="true") for i in range(30)])
            run = client.trigger("leaky")
            failed = client.trigger("missing")
            wf_run = client.start_workflow_run("wf")

            def finished(run_id: str) -> pb.Run:
                return client.get_run(run_id)

            wait_until(lambda: finished(run.run_id).state == pb.SUCCEEDED, 60, 0.2, "the leaky run")
            wait_until(lambda: finished(failed.run_id).state == pb.FAILED, 60, 0.2, "the missing-secret run")
            done = client.wait_workflow_run(wf_run.run_id, 60)
            assert done.state == pb.WORKFLOW_SUCCESS, done
            ok = finished(run.run_id).shards[0]
            assert "pw is *** key is ***" in ok.stdout_tail and "stderr: ***|***" in ok.stderr_tail
            error = finished(failed.run_id).shards[0].error
            assert "secret 'nope' is not set on this executor" in error, error

            backup = base / "cluster.rsb"
            done_backup = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "raftsched.cli",
                    "--cluster",
                    cluster.grpc_of(leader),
                    "backup",
                    str(backup),
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
                env={**os.environ, "RAFTSCHED_TOKEN": admin},
            )
            assert done_backup.returncode == 0, done_backup.stderr
            wait_until(
                lambda: all(any(_snapshots(base / "data" / n)) for n in ("n1", "n2", "n3")),
                60,
                0.2,
                "a snapshot on every node",
            )

            pages: dict[str, str] = {}
            for node, address in http.items():
                web = WebSession(address)
                web.sign_in(admin)
                for path, text in _crawl(web).items():
                    pages[f"{node}{path}"] = text
            api: dict[str, str] = {}
            web = WebSession(http[leader])
            for path in (
                "/api/v1/tasks",
                "/api/v1/tasks/leaky",
                "/api/v1/tasks/leaky/runs",
                "/api/v1/runs",
                f"/api/v1/runs/{run.run_id}",
                f"/api/v1/runs/{failed.run_id}",
                "/api/v1/workflows/wf",
                f"/api/v1/workflow-runs/{wf_run.run_id}",
                "/api/v1/audit",
                "/api/v1/alerts",
            ):
                reply = web.request("GET", path, headers={"Authorization": f"Bearer {admin}"})
                assert reply.status == 200, (path, reply.text)
                api[path] = reply.text
    finally:
        if executor is not None:
            stop_processes([executor])
        cluster.stop()

    # The attempts saw the values.
    both = hashlib.sha256(f"{DB_VALUE}|{KEY_VALUE}".encode()).hexdigest()
    assert (seen / "task").read_text() == both
    assert (seen / "wf").read_text() == both

    values = [DB_VALUE.encode(), KEY_VALUE.encode(), DB_VALUE.encode("utf-16-le")]
    files = [p for p in base.rglob("*") if p.is_file()]
    leaks = [f"{p}: {v!r}" for p in files for v in values if v in p.read_bytes()]
    leaks += [f"page {k}" for k, text in pages.items() if DB_VALUE in text or KEY_VALUE in text]
    leaks += [f"API {k}" for k, text in api.items() if DB_VALUE in text or KEY_VALUE in text]
    assert not leaks, "secret values found:\n" + "\n".join(leaks)

    # The search looked where the definitions went: the references are there.
    ref = REFERENCE.encode()
    for node in ("n1", "n2", "n3"):
        data = base / "data" / node
        assert any(ref in p.read_bytes() for p in data.rglob("*") if p.is_file()), node
        assert any(ref in p.read_bytes() for p in _snapshots(data)), f"{node}'s snapshot"
    assert ref in backup.read_bytes()
    assert any("secret.db_password" in text for text in pages.values())
    assert "secret.db_password" in api["/api/v1/tasks/leaky"]
    assert len(pages) >= 10 and len(files) >= 10
    assert "CreateTask" in api["/api/v1/audit"] or "AddTask" in api["/api/v1/audit"]  # writes were audited


def _works(client: Client) -> bool:
    try:
        client.list_tasks(limit=1)
        return True
    except Exception:
        return False


def _snapshots(data: Path) -> list[Path]:
    """The node's Raft snapshot (pysyncobj's full dump, written when the log is compacted)."""
    return [p for p in data.rglob("raft.dump") if p.is_file()]
