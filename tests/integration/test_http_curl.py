"""The ``curl`` examples of the HTTP/JSON API (docs/reference/http.md), run as written against a
real TLS node with an executor: every command must succeed (``--fail-with-body``) and print JSON,
and the examples together must name every route of the table."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.rpc import routes
from raftsched.rpc.http_api import FULL_LOGS
from tests.integration.test_http_tls import start_tls_node
from tests.integration.test_tls import Pki
from tests.integration.test_tls import pki as pki

pytestmark = [pytest.mark.integration]


@pytest.fixture(autouse=True)
def _curl_and_jq() -> None:
    """Skip without curl and jq (tools/install-test-deps.sh installs them), except in CI
    (``CI=true``), where a missing tool fails the test: CI must run the documented examples."""
    if shutil.which("curl") is not None and shutil.which("jq") is not None:
        return
    message = "needs curl and jq (apt-get install curl jq)"
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail(f"{message} (CI=true: this check must run in CI)")
    pytest.skip(message)


ROOT = Path(__file__).resolve().parents[2]
CALL = re.compile(r'api (?:-X (?P<method>[A-Z]+) |-N )?"\$RS(?P<path>/api/v1/[^"?]*)')


def _blocks() -> tuple[str, str]:
    text = (ROOT / "docs" / "reference" / "http.md").read_text()
    section = text.split("## Every route with `curl`", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(found) == 3, "the section holds the script, the not-run examples and the streams"
    return found[0], found[1] + found[2]


def _routes_named(block: str) -> set[tuple[str, str]]:
    out = set()
    for m in CALL.finditer(block):
        method = m.group("method") or "GET"
        path = re.sub(r"\$[A-Z]+", "x", m.group("path"))
        if (method, path) == (FULL_LOGS[0], routes.PREFIX + FULL_LOGS[1].replace("{run_id}", "x")):
            out.add(FULL_LOGS)  # the one route outside the table (a byte stream)
            continue
        found = routes.find(method, path)
        assert found is not None, f"docs/reference/http.md: {method} {m.group('path')} is not a route"
        out.add((found[0].method, found[0].path))
    return out


def test_the_examples_name_every_route() -> None:
    script, not_run = _blocks()
    named = _routes_named(script) | _routes_named(not_run)
    assert named == {(r.method, r.path) for r in routes.ROUTES} | {FULL_LOGS}


def test_the_documented_curl_commands_work_against_a_tls_node(tmp_path: Path, pki: Pki) -> None:
    node = start_tls_node(tmp_path / "cluster", pki)
    executor = None
    try:
        with Client(node.cluster.targets(), tls=node.cluster.tls, token=node.admin) as c:
            token, _ = c.create_token("executor", description="curl test executor")
        executor = node.cluster.start_executor("ex1", slots=2, token=token)
        script, _ = _blocks()
        first, rest = script.split("\n", 1)
        assert first.startswith("RS=")
        setup = f"RS=https://{node.http} CA={pki.ca} TOKEN={node.admin}"
        work = tmp_path / "work"
        work.mkdir()
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", setup + "\n" + rest],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        printed = [line for line in script.splitlines() if line.startswith("api ") and " > " not in line]
        assert len(answers) == len(printed)  # one JSON answer per command whose output is shown
        logs = next(a for a in answers if isinstance(a, list))
        assert [s["stdout_tail"] for s in logs] == ["hello\n"]
        got = next(a for a in answers if isinstance(a, dict) and a.get("task", {}).get("version") == 2)
        assert got["task"]["spec"]["trigger"]["cron"]["expr"] == "0 4 * * *"
        assert (work / "hello.log").read_text().strip() == "hello"  # logs:full, as text
        backfill = next(a for a in answers if isinstance(a, dict) and a.get("backfill", {}).get("task"))
        assert backfill["backfill"]["task"] == "hello" and backfill["backfill"]["runs_total"] == 1
        pools = next(a for a in answers if isinstance(a, dict) and "pools" in a)
        assert [p["pool"]["name"] for p in pools["pools"]] == ["warehouse"]
        backup = json.loads((work / "backup.json").read_text())
        assert backup and "header" in backup[0]
    finally:
        if executor is not None:
            executor.terminate()
            executor.wait(15)
        node.cluster.stop()
