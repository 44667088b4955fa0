"""Pools in the web console against a real node in this process: an admin creates, resizes and
deletes a pool; a bad slot count or name gets the CLI's message with the values as posted and
stores nothing; a delete while a task names the pool is refused with that task's name; a
maintainer or viewer sees no form and a forged post is refused by the RPC; CSRF as for every
console POST."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import pytest

from raftsched.model import CronTrigger, TaskSpec
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.console_support import WebSession, csrf_of
from tests.integration.test_console import Running, _run_node, role_tokens, signed_in

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    yield from _run_node(tmp_path_factory.mktemp("console-pools"), auth=True)


@pytest.fixture(scope="module")
def tokens(node: Running) -> dict[str, str]:
    with node.client() as c:
        return role_tokens(c, node.admin or "", ("viewer", "maintainer"), "pools test")


def _pools(node: Running) -> dict[str, pb.PoolRecord]:
    with node.client() as c:
        return {info.pool.name: info.pool for info in c.list_pools()}


def _set(web: WebSession, name: str, slots: str, description: str = "") -> tuple[int, str, str]:
    csrf = csrf_of(web.get("/pools").text)
    reply = web.post("/pools", {"csrf": csrf, "name": name, "slots": slots, "description": description})
    return reply.status, reply.location, reply.text


def _field(page: str, name: str) -> str:
    found = re.search(rf'<input id="pool-{name}" name="{name}" value="([^"]*)"', page) or re.search(
        rf'<textarea id="pool-{name}" name="{name}"[^>]*>(.*?)</textarea>', page, re.S
    )
    assert found is not None, name
    return html.unescape(found.group(1))


def _error(page: str) -> str:
    found = re.search(r'<p class="flash error" role="alert" id="pool-error">(.*?)</p>', page, re.S)
    assert found is not None, "no error on the page"
    return html.unescape(found.group(1))


def test_an_admin_creates_edits_and_resizes_a_pool(node: Running, tokens: dict[str, str]) -> None:
    web = signed_in(node, tokens["admin"])
    status, location, _ = _set(web, "warehouse", "3", "the warehouse's connections")
    assert status == 303 and location == "/pools"
    landed = web.get("/pools").text
    assert "created pool warehouse with 3 slots" in landed
    assert 'id="pool-warehouse"><th scope="row">warehouse</th><td>3</td>' in landed
    stored = _pools(node)["warehouse"]
    assert stored.slots == 3 and stored.description == "the warehouse's connections"
    # "Edit" on its row: the form starts from the stored pool.
    assert 'href="/pools?edit=warehouse#pool-form"' in landed
    edit = web.get("/pools?edit=warehouse").text
    assert (_field(edit, "name"), _field(edit, "slots")) == ("warehouse", "3")
    assert _field(edit, "description") == "the warehouse's connections"
    status, _, _ = _set(web, "warehouse", " 5 ", "five now")
    assert status == 303
    assert "pool warehouse resized from 3 to 5 slots" in web.get("/pools").text
    assert (_pools(node)["warehouse"].slots, _pools(node)["warehouse"].description) == (5, "five now")
    _set(web, "warehouse", "5", "same size\nsecond line")
    assert "pool warehouse updated (5 slots)" in web.get("/pools").text
    # A description of two lines comes back whole in the form (a textarea keeps line breaks).
    assert _field(web.get("/pools?edit=warehouse").text, "description") == "same size\nsecond line"


@pytest.mark.parametrize(
    ("name", "slots", "message"),
    [
        ("bad-slots", "three", "pool.slots: 'three' is not a whole number (1-1000000)"),
        ("bad-slots", "0", "pool.slots: 0 is not in 1-1000000"),
        ("bad-slots", "1000001", "pool.slots: 1000001 is not in 1-1000000"),
        ("bad-slots", "-2", "pool.slots: -2 is not in 1-1000000"),
        ("bad name", "2", "pool.name"),
        ("", "2", "pool.name"),
    ],
)
def test_bad_input_gets_a_message_keeps_the_values_and_stores_nothing(
    node: Running, tokens: dict[str, str], name: str, slots: str, message: str
) -> None:
    web = signed_in(node, tokens["admin"])
    before = _pools(node)
    status, _, page = _set(web, name, slots, "posted text")
    assert status == 400
    assert message in _error(page)
    assert (_field(page, "name"), _field(page, "slots"), _field(page, "description")) == (
        name,
        slots,
        "posted text",
    )
    assert 'data-refresh="0"' in page  # the live refresh would replace the message and the values
    assert _pools(node) == before


def test_a_refused_resize_leaves_the_pool_as_it_was(node: Running, tokens: dict[str, str]) -> None:
    web = signed_in(node, tokens["admin"])
    assert _set(web, "kept", "4")[0] == 303
    status, _, page = _set(web, "kept", "0")
    assert status == 400 and "pool.slots: 0 is not in 1-1000000" in _error(page)
    assert _pools(node)["kept"].slots == 4


def test_a_pool_a_task_names_is_deleted_only_once_no_task_names_it(
    node: Running, tokens: dict[str, str]
) -> None:
    web = signed_in(node, tokens["admin"])
    assert _set(web, "shared", "2")[0] == 303
    with node.client() as c:
        c.add_task(TaskSpec("uses-shared", CronTrigger("0 3 * * *"), command="true", pool="shared"))
    page = web.get("/pools").text
    assert 'id="delete-shared"' in page and 'data-confirm="Delete pool shared?"' in page
    refused = web.post("/pools/shared/delete", {"csrf": csrf_of(page), "back": "/pools"})
    assert refused.status == 409
    assert "uses-shared" in _error(refused.text)
    assert "shared" in _pools(node)
    with node.client() as c:
        c.delete_task("uses-shared")
    reply = web.post("/pools/shared/delete", {"csrf": csrf_of(page), "back": "/pools"})
    assert reply.status == 303 and reply.location == "/pools"
    assert "pool shared deleted" in web.get("/pools").text
    assert "shared" not in _pools(node)
    gone = web.post("/pools/shared/delete", {"csrf": csrf_of(page), "back": "/pools"})
    assert gone.status == 404 and "shared" in gone.text


@pytest.mark.parametrize("role", ["maintainer", "viewer"])
def test_only_an_admin_sees_the_form_and_a_forged_post_is_refused(
    node: Running, tokens: dict[str, str], role: str
) -> None:
    admin = signed_in(node, tokens["admin"])
    assert _set(admin, "guarded", "2")[0] == 303
    web = signed_in(node, tokens[role])
    page = web.get("/pools").text
    assert 'id="pool-guarded"' in page  # the list is for every reader
    for drawn in ("pool-form", "delete-guarded", "edit-guarded"):
        assert f'id="{drawn}"' not in page, drawn
    csrf = csrf_of(web.get("/tasks").text)
    forged = web.post("/pools", {"csrf": csrf, "name": "guarded", "slots": "9"})
    assert forged.status == 403 and "lacks permission pools.manage" in forged.text
    assert web.post("/pools/guarded/delete", {"csrf": csrf}).status == 403
    assert _pools(node)["guarded"].slots == 2


def test_a_pool_post_without_the_csrf_token_is_refused(node: Running, tokens: dict[str, str]) -> None:
    web = signed_in(node, tokens["admin"])
    reply = web.post("/pools", {"name": "nocsrf", "slots": "2"})
    assert reply.status == 403 and "CSRF" in reply.text
    assert "nocsrf" not in _pools(node)
