"""Editing in the web console (issue 29 §8) against a real node in this process: create a task or
a workflow from pasted YAML/TOML, edit it with the version check, pause/resume and delete, each
allowed by role; the CLI's parsers give the same messages; CSRF as for every console POST."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import pytest

from raftsched.errors import InvalidWorkflow
from raftsched.workflow.taskfiles import parse_task_text
from tests.integration.console_support import WebSession, csrf_of
from tests.integration.test_console import Running, _run_node, role_tokens, signed_in

pytestmark = pytest.mark.integration

TASK_YAML = """namespace: default
tasks:
  - name: report
    cron: "0 3 * * *"
    command: echo report
"""
BAD_CRON = TASK_YAML.replace('"0 3 * * *"', '"0 25 * * *"').replace("report", "badcron")
WORKFLOW_YAML = """name: pipeline
schedule: "0 2 * * *"
tasks:
  - name: extract
    command: echo extract
  - name: load
    command: echo load
    depends_on: [extract]
"""


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    yield from _run_node(tmp_path_factory.mktemp("console-edit"), auth=True)


@pytest.fixture(scope="module")
def tokens(node: Running) -> dict[str, str]:
    with node.client() as c:
        out = role_tokens(c, node.admin or "", ("viewer", "maintainer"), "editing test")
        out["etl"], _ = c.create_token("maintainer", ["etl"], description="editing test, etl only")
    return out


def _create(web: WebSession, text: str, kind: str = "task", fmt: str = "yaml") -> tuple[int, str, str]:
    csrf = csrf_of(web.get(f"/edit/new?kind={kind}").text)
    reply = web.post("/edit/new", {"csrf": csrf, "kind": kind, "format": fmt, "text": text})
    return reply.status, reply.location, reply.text


def _form_field(page: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert found is not None, name
    return found.group(1)


def _error(page: str) -> str:
    found = re.search(r'<pre class="flash error" role="alert" id="edit-error">(.*?)</pre>', page, re.S)
    assert found is not None, "no error on the page"
    return html.unescape(found.group(1))


def _textarea(page: str) -> str:
    found = re.search(r'<textarea id="text"[^>]*>(.*?)</textarea>', page, re.S)
    assert found is not None
    return html.unescape(found.group(1))


def test_create_a_task_from_yaml_and_from_toml(node: Running, tokens: dict[str, str]) -> None:
    web = signed_in(node, tokens["maintainer"])
    assert 'id="create"' in web.get("/tasks").text
    status, location, _ = _create(web, TASK_YAML)
    assert status == 303 and location == "/tasks/report"
    assert "created task report" in web.get(location).text
    toml = 'namespace = "default"\n[[tasks]]\nname = "from-toml"\nevery = "1h"\ncommand = "true"\n'
    status, location, _ = _create(web, toml, fmt="toml")
    assert status == 303 and location == "/tasks/from-toml"
    with node.client() as c:
        assert c.get_task("report").spec.trigger.cron.expr == "0 3 * * *"
        assert c.get_task("from-toml").spec.trigger.interval.every_ms == 3_600_000
    # Creating it again is refused with the cluster's message, the text kept.
    status, _, page = _create(web, TASK_YAML)
    assert status == 409 and "already exists" in page and "echo report" in page


def test_a_bad_definition_gets_the_cli_message_and_nothing_is_created(
    node: Running, tokens: dict[str, str]
) -> None:
    web = signed_in(node, tokens["maintainer"])
    status, _, page = _create(web, BAD_CRON)
    assert status == 400
    with pytest.raises(InvalidWorkflow) as cli:
        parse_task_text(BAD_CRON, "yaml", "console")  # what `raftsched apply` reads files with
    shown = _error(page)
    for where, message in cli.value.problems:
        assert f"{where}: {message}" in shown, (where, message)
    assert "hour: 25 out of range 0-23" in shown  # the cron field named
    assert "0 25 * * *" in _textarea(page)  # the text is kept for fixing
    with node.client() as c:
        assert "badcron" not in {t.spec.name for t in c.list_tasks()}


def test_edit_a_task_with_the_version_check(node: Running, tokens: dict[str, str]) -> None:
    web = signed_in(node, tokens["maintainer"])
    _create(web, TASK_YAML.replace("report", "editable"))
    page = web.get("/edit/tasks/editable").text
    version = _form_field(page, "version")
    text = _textarea(page)
    assert '"0 3 * * *"' in text and 'name: "editable"' in text
    form = {"csrf": csrf_of(page), "format": "yaml", "version": version, "text": text.replace("0 3", "0 4")}
    reply = web.post("/edit/tasks/editable", form)
    assert reply.status == 303 and reply.location == "/tasks/editable"
    with node.client() as c:
        rec = c.get_task("editable")
        assert rec.spec.trigger.cron.expr == "0 4 * * *" and rec.version == int(version) + 1
    # The same form again: its version is stale now.
    stale = web.post("/edit/tasks/editable", {**form, "text": text.replace("0 3", "0 5")})
    assert stale.status == 409
    assert f"is at version {int(version) + 1}, not {version}" in _error(stale.text)
    assert "reload it to edit the current version" in _error(stale.text)
    with node.client() as c:
        assert c.get_task("editable").spec.trigger.cron.expr == "0 4 * * *"
    # The text must declare this task only.
    other = web.post("/edit/tasks/editable", {**form, "version": str(int(version) + 1), "text": TASK_YAML})
    assert other.status == 400 and "this page edits task 'editable' only" in _error(other.text)


def test_create_edit_pause_resume_and_delete_a_workflow(node: Running, tokens: dict[str, str]) -> None:
    web = signed_in(node, tokens["maintainer"])
    status, location, _ = _create(web, WORKFLOW_YAML, kind="workflow")
    assert status == 303 and location == "/workflows/pipeline"
    page = web.get(location).text
    for action in ("edit", "pause", "delete"):
        assert f'id="{action}"' in page, action
    edit = web.get("/edit/workflows/pipeline").text
    version = _form_field(edit, "version")
    text = _textarea(edit)
    form = {"csrf": csrf_of(edit), "format": "yaml", "version": version, "text": text.replace("0 2", "30 2")}
    reply = web.post("/edit/workflows/pipeline", form)
    assert reply.status == 303 and "now version 2" in web.get(reply.location).text
    stale = web.post("/edit/workflows/pipeline", form)
    assert stale.status == 409 and "is at version 2, not 1" in _error(stale.text)
    csrf = csrf_of(page)
    assert web.post("/edit/workflows/pipeline/pause", {"csrf": csrf}).status == 303
    with node.client() as c:
        assert c.get_workflow("pipeline").paused
        assert 'id="resume"' in web.get("/workflows/pipeline").text
        assert web.post("/edit/workflows/pipeline/resume", {"csrf": csrf}).status == 303
        assert not c.get_workflow("pipeline").paused
        reply = web.post("/edit/workflows/pipeline/delete", {"csrf": csrf, "force": "1"})
        assert reply.status == 303 and reply.location == "/workflows"
        assert "pipeline" not in {w.spec.name for w in c.list_workflows()}


def test_delete_a_task(node: Running, tokens: dict[str, str]) -> None:
    web = signed_in(node, tokens["maintainer"])
    _create(web, TASK_YAML.replace("report", "doomed"))
    page = web.get("/tasks/doomed").text
    reply = web.post("/edit/tasks/doomed/delete", {"csrf": csrf_of(page)})
    assert reply.status == 303 and "task doomed deleted" in web.get(reply.location).text
    with node.client() as c:
        assert "doomed" not in {t.spec.name for t in c.list_tasks()}


def test_a_viewer_sees_no_editing_and_a_forged_post_is_refused(node: Running, tokens: dict[str, str]) -> None:
    maintainer = signed_in(node, tokens["maintainer"])
    _create(maintainer, TASK_YAML.replace("report", "guarded"))
    web = signed_in(node, tokens["viewer"])
    page = web.get("/tasks/guarded").text
    assert 'id="edit"' not in page and 'id="delete"' not in page
    assert 'id="create"' not in web.get("/tasks").text
    csrf = csrf_of(page)
    refused = web.post(
        "/edit/new", {"csrf": csrf, "kind": "task", "text": TASK_YAML.replace("report", "sneaky")}
    )
    assert refused.status == 403 and "lacks permission tasks.write" in refused.text
    assert web.post("/edit/tasks/guarded/delete", {"csrf": csrf}).status == 403
    with node.client() as c:
        names = {t.spec.name for t in c.list_tasks()}
        assert "guarded" in names and "sneaky" not in names


def test_an_edit_without_the_csrf_token_is_refused(node: Running, tokens: dict[str, str]) -> None:
    web = signed_in(node, tokens["maintainer"])
    reply = web.post("/edit/new", {"kind": "task", "text": TASK_YAML.replace("report", "nocsrf")})
    assert reply.status == 403 and "CSRF" in reply.text
    with node.client() as c:
        assert "nocsrf" not in {t.spec.name for t in c.list_tasks()}


def test_a_namespaced_maintainer_creates_in_its_namespace_only(node: Running, tokens: dict[str, str]) -> None:
    web = signed_in(node, tokens["etl"])
    listing = web.get("/tasks").text
    assert 'href="/edit/new?kind=task&amp;ns=etl"' in listing
    page = web.get("/edit/new?kind=task&ns=etl").text
    assert 'namespace: "etl"' in _textarea(page)
    text = TASK_YAML.replace("default", "etl").replace("report", "etl-report")
    status, location, _ = _create(web, text)
    assert status == 303 and location == "/tasks/etl-report"
    refused = web.post(
        "/edit/new", {"csrf": csrf_of(page), "kind": "task", "text": TASK_YAML.replace("report", "x")}
    )
    assert refused.status == 403 and "namespace" in refused.text
