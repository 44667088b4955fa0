"""The web console in a real headless browser against a real 3-node cluster with an executor,
over mutual TLS with authentication on (as ``raftsched demo`` runs it).

A maintainer signs in on a follower's console, finds a task, opens a diamond workflow run whose
``c`` branch failed (``d`` skipped), sees each node's state, clicks "Rerun from here" on ``c`` and
watches ``c`` and ``d`` run again and succeed, the page refreshing itself without a reload. A
viewer sees no action buttons, and a POST it forges (with its own valid session and CSRF token)
is refused. Screenshots go to ``$RAFTSCHED_SCREENSHOTS`` (the docs' come from
``RAFTSCHED_SCREENSHOTS=docs/screenshots``), else to the test's temporary directory.

Needs Debian's ``chromium`` and ``chromium-driver`` (``tools/install-test-deps.sh`` installs them)
and ``selenium``; skipped without them, except under ``CI=true``, where that is a failure.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from raftsched.client import Client
from raftsched.model import CronTrigger, ManualTrigger, TaskSpec
from raftsched.security.certs import write_demo_pki
from raftsched.security.tokens import new_token
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.console_support import write_http_config

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

try:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    HAVE_SELENIUM = True
except ImportError:  # pragma: no cover - the test extras install it
    HAVE_SELENIUM = False


def _missing() -> str:
    if not HAVE_SELENIUM:
        return "selenium is not installed (pip install -e '.[test]')"
    if CHROMIUM is None or DRIVER is None:
        return "chromium and chromium-driver are not installed (tools/install-test-deps.sh)"
    return ""


if _missing():
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"the console browser test cannot run under CI: {_missing()}")
    pytest.skip(_missing(), allow_module_level=True)


# Fails the first time (leaving a flag file), succeeds when run again.
FLAKY_C = (
    "sh -c 'if [ -f {flag} ]; then echo c ok on the second try; "
    "else touch {flag}; echo c failed >&2; exit 3; fi'"
)


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    out = Path(os.environ.get("RAFTSCHED_SCREENSHOTS") or tmp_path / "screenshots")
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture
def browser() -> Iterator[Any]:
    options = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(arg)
    options.binary_location = str(CHROMIUM)
    driver = webdriver.Chrome(options=options, service=Service(str(DRIVER)))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def secure_cluster(tmp_path: Path) -> Iterator[tuple[LocalCluster, dict[str, str], str]]:
    base = tmp_path / "cluster"
    base.mkdir()
    pki = write_demo_pki(base / "tls", ["127.0.0.1"], now=dt.datetime.now(dt.UTC))
    admin = new_token()
    (base / "admin.token").write_text(admin + "\n")
    extra = (
        f'[tls]\ncert_file = "{pki.node_cert}"\nkey_file = "{pki.node_key}"\nca_file = "{pki.ca_file}"\n'
        "require_client_cert = true\n\n"
        '[auth]\nbootstrap_token_file = "admin.token"\n'
    )
    http = write_http_config(base / "cluster.toml", 3, extra)
    cluster = LocalCluster(base / "cluster.toml", base / "logs", token=admin)
    executor = None
    try:
        cluster.start()
        leader = cluster.wait_for_leader()
        with Client(cluster.targets(), tls=cluster.tls, token=admin) as c:
            wait_until(lambda: _works(c), 30, 0.2, "the bootstrap admin token")
            tokens = {
                role: c.create_token(role, description=f"browser test {role}")[0]
                for role in ("viewer", "maintainer", "executor")
            }
        executor = cluster.start_executor("ex1", slots=4, token=tokens["executor"])
        follower = next(n for n in http if n != leader)
        yield cluster, tokens, http[follower]
    finally:
        if executor is not None:
            executor.terminate()
            executor.wait(10)
        cluster.stop()


def _works(c: Client) -> bool:
    try:
        c.list_tasks(limit=1)
        return True
    except Exception:
        return False


def _retrying(action: Callable[[], Any]) -> Any:
    """Run ``action`` again when the live refresh replaced the element it held."""
    for _ in range(20):
        try:
            return action()
        except StaleElementReferenceException:
            continue
    return action()


def _state_of(driver: Any, task: str) -> str:
    return str(_retrying(lambda: driver.find_element(By.ID, f"task-{task}").get_attribute("data-state")))


def _sign_in(driver: Any, base: str, token: str) -> None:
    driver.delete_all_cookies()
    driver.get(base + "/login")
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "sign-in").click()
    wait_until(lambda: driver.find_elements(By.ID, "whoami"), 15, 0.1, "signed in")


def test_rerun_a_failed_branch_from_the_console(
    secure_cluster: tuple[LocalCluster, dict[str, str], str], browser: Any, shots: Path, tmp_path: Path
) -> None:
    cluster, tokens, http = secure_cluster
    base = f"http://{http}"
    flag = tmp_path / "c-ran-once"
    spec = pb.WorkflowSpec(name="diamond", description="a, then b and c side by side, then d")
    spec.tasks.add(name="a", command="echo extracted")
    spec.tasks.add(name="b", command="echo left branch").depends_on.add(task="a")
    spec.tasks.add(name="c", command=FLAKY_C.format(flag=flag)).depends_on.add(task="a")
    d = spec.tasks.add(name="d", command="echo joined")
    d.depends_on.add(task="b")
    d.depends_on.add(task="c")
    with Client(cluster.targets(), tls=cluster.tls, token=cluster.token) as admin:
        admin.add_task(TaskSpec("report-daily", CronTrigger("0 6 * * *"), command="echo report", owner="ops"))
        admin.add_task(TaskSpec("cleanup-hourly", CronTrigger("0 * * * *"), command="echo cleanup"))
        admin.add_task(TaskSpec("report-2s", CronTrigger("* * * * * */2"), command="echo quick report"))
        admin.apply_workflow(spec)
        run = admin.wait_workflow_run(admin.start_workflow_run("diamond").run_id, 60)
        wait_until(lambda: len(admin.runs("report-2s")) >= 4, 30, 0.2, "a few runs of report-2s")
    assert run.state == pb.WORKFLOW_FAILED
    run_url = f"{base}/workflow-runs/{run.run_id.replace('@', '%40')}"

    # A maintainer signs in on a follower's console and finds a task.
    _sign_in(browser, base, tokens["maintainer"])
    browser.get(base + "/tasks")
    browser.find_element(By.ID, "q").send_keys("report")
    browser.find_element(By.ID, "search").click()
    wait_until(lambda: "q=report" in browser.current_url, 10, 0.1, "the search")
    rows = browser.find_elements(By.CSS_SELECTOR, "#task-list tbody tr[data-task]")
    assert [r.get_attribute("data-task") for r in rows] == ["report-2s", "report-daily"]
    assert rows[0].find_elements(By.CSS_SELECTOR, ".strip .tick")  # its last fires
    browser.save_screenshot(str(shots / "tasks.png"))
    _retrying(lambda: browser.find_element(By.LINK_TEXT, "report-daily").click())
    assert browser.find_element(By.ID, "task-name").text == "report-daily"

    # The failed diamond: every node's state, in the graph and in the task list.
    browser.get(run_url)
    expected = {"a": "success", "b": "success", "c": "failed", "d": "skipped"}
    for task, state in expected.items():
        assert _state_of(browser, task) == state
        node = browser.find_element(By.CSS_SELECTOR, f'svg.dag a[data-task="{task}"]')
        assert node.get_attribute("data-state") == state
    assert "c failed" in browser.find_element(By.ID, "task-c").text  # its output tail
    browser.save_screenshot(str(shots / "workflow-run-failed.png"))

    # Rerun from c: c and d run again; the page follows by itself (no reload).
    _retrying(lambda: browser.find_element(By.ID, "rerun-c").click())
    wait_until(lambda: "rerunning c" in browser.page_source, 15, 0.1, "the rerun's confirmation")
    browser.execute_script("window.__stillThisPage = true;")
    wait_until(
        lambda: _state_of(browser, "c") == "success" and _state_of(browser, "d") == "success",
        60,
        0.2,
        "c and d to run again and succeed",
    )
    assert browser.execute_script("return window.__stillThisPage === true;"), "the page was reloaded"
    assert browser.find_element(By.ID, "live").get_attribute("data-updated")
    assert "2 tries" in _retrying(lambda: browser.find_element(By.ID, "task-c").text)
    output = _retrying(lambda: browser.find_element(By.ID, "task-c").get_attribute("textContent"))
    assert "c ok on the second try" in output  # the output tail (in a collapsed <details>)
    assert "success" in _retrying(lambda: browser.find_element(By.ID, "wf-run-state").text)
    browser.save_screenshot(str(shots / "workflow-run-rerun.png"))
    # The failed first try of c: exit code, output tail and timeline on its run page.
    first_c = next(t for t in run.tasks if t.name == "c").run_id
    browser.get(f"{base}/runs/{first_c.replace('@', '%40').replace('#', '%23')}")
    assert browser.find_element(By.CSS_SELECTOR, "#shard-0 .exit").text.startswith("3")
    assert "c failed" in browser.find_element(By.ID, "shard-0").text
    events = browser.find_element(By.ID, "timeline").text
    assert "created" in events and "failed" in events and "ex1" in events
    browser.save_screenshot(str(shots / "run.png"))
    browser.get(f"{base}/workflows/diamond?task=c")
    browser.save_screenshot(str(shots / "workflow-lineage.png"))
    browser.get(f"{base}/cluster")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#nodes tbody tr")) == 3
    assert "ex1" in browser.find_element(By.ID, "executors").text
    browser.save_screenshot(str(shots / "cluster.png"))

    # Edit a task's schedule on its page (issue 29 §8): a bad cron gets the CLI's message and
    # keeps the text; the fixed text saves a new version.
    browser.get(base + "/tasks/report-daily")
    _retrying(lambda: browser.find_element(By.ID, "edit").click())
    wait_until(lambda: browser.find_elements(By.ID, "edit-form"), 15, 0.1, "the edit form")
    original = browser.find_element(By.ID, "text").get_attribute("value")
    assert '"0 6 * * *"' in original

    def save(text: str) -> None:
        area = browser.find_element(By.ID, "text")
        area.clear()
        area.send_keys(text)
        browser.find_element(By.ID, "save").click()

    save(original.replace('"0 6 * * *"', '"0 25 * * *"'))
    wait_until(lambda: browser.find_elements(By.ID, "edit-error"), 15, 0.1, "the refusal")
    assert "hour: 25 out of range 0-23" in browser.find_element(By.ID, "edit-error").text
    assert '"0 25 * * *"' in browser.find_element(By.ID, "text").get_attribute("value")
    browser.save_screenshot(str(shots / "edit-task-refused.png"))
    save(original.replace('"0 6 * * *"', '"30 6 * * *"'))
    wait_until(lambda: "task report-daily updated" in browser.page_source, 15, 0.1, "the update")
    with Client(cluster.targets(), tls=cluster.tls, token=cluster.token) as admin:
        assert admin.get_task("report-daily").spec.trigger.cron.expr == "30 6 * * *"

    # Across workflows (issue 28): a run waiting on another workflow's task draws it as an
    # external box, and the waits page lists it; an event emitted from the form starts a run.
    up = pb.WorkflowSpec(name="orders-sync")
    up.tasks.add(name="load", command="echo loaded")
    down = pb.WorkflowSpec(name="reconcile")
    down.tasks.add(name="prep", command="echo prep")
    rec = down.tasks.add(name="reconcile", command="echo reconciled")
    rec.depends_on.add(task="prep")
    rec.depends_on.add(workflow="orders-sync", task="load")
    with Client(cluster.targets(), tls=cluster.tls, token=cluster.token) as admin:
        admin.apply_workflow(up)
        admin.apply_workflow(down)
        admin.add_task(TaskSpec("on-order", ManualTrigger(), command="echo order", on_event="orders-ready"))
        waiting = admin.start_workflow_run("reconcile")
    browser.get(f"{base}/workflow-runs/{waiting.run_id.replace('@', '%40')}")
    wait_until(
        lambda: (
            _retrying(
                lambda: browser.find_element(By.CSS_SELECTOR, "svg.dag a.external").get_attribute(
                    "data-state"
                )
            )
            == "waiting"
        ),
        30,
        0.2,
        "the external upstream box, waiting",
    )
    assert "WAITING" in browser.find_element(By.ID, "run-edges").text
    browser.save_screenshot(str(shots / "workflow-run-cross.png"))
    browser.get(base + "/waits")
    assert waiting.run_id in browser.find_element(By.ID, "wait-list").text
    browser.get(base + "/workflows/reconcile?task=reconcile")
    assert "orders-sync:load" in browser.find_element(By.ID, "cross-lineage").text
    browser.save_screenshot(str(shots / "workflow-cross.png"))
    browser.get(base + "/events")
    browser.find_element(By.ID, "emit-name").send_keys("orders-ready")
    browser.find_element(By.ID, "emit-key").send_keys("2026-12-04")
    browser.find_element(By.ID, "emit").click()
    wait_until(lambda: "accepted event orders-ready" in browser.page_source, 15, 0.1, "the emit")
    assert "on-order@" in browser.find_element(By.ID, "event-list").text

    # Pools (an admin): what is typed in the form holds the live refresh, a bad size gets the
    # CLI's message with the values kept, a resize saves, and the refresh resumes.
    with Client(cluster.targets(), tls=cluster.tls, token=cluster.token) as admin:
        admin.set_pool("warehouse", 2, description="db connections")
    _sign_in(browser, base, cluster.token or "")
    browser.get(base + "/pools")
    wait_until(lambda: browser.find_elements(By.ID, "pool-warehouse"), 15, 0.1, "the pool's row")
    browser.find_element(By.ID, "pool-name").send_keys("warehouse")
    browser.find_element(By.ID, "pool-slots").send_keys("lots")
    browser.find_element(By.TAG_NAME, "h1").click()  # focus leaves the form; the values stay
    live = browser.find_element(By.ID, "live")
    wait_until(lambda: live.get_attribute("data-held") == "edited", 15, 0.1, "a refresh held by the form")
    assert browser.find_element(By.ID, "pool-slots").get_attribute("value") == "lots"
    assert "unsaved input" in browser.find_element(By.ID, "live-status").text
    browser.find_element(By.ID, "pool-set").click()
    wait_until(lambda: browser.find_elements(By.ID, "pool-error"), 15, 0.1, "the refusal")
    assert "pool.slots: 'lots' is not a whole number" in browser.find_element(By.ID, "pool-error").text
    assert browser.find_element(By.ID, "pool-slots").get_attribute("value") == "lots"
    browser.save_screenshot(str(shots / "pools-refused.png"))
    slots = browser.find_element(By.ID, "pool-slots")
    slots.clear()
    slots.send_keys("6")
    browser.find_element(By.ID, "pool-set").click()
    wait_until(lambda: "resized from 2 to 6 slots" in browser.page_source, 15, 0.1, "the resize")
    with Client(cluster.targets(), tls=cluster.tls, token=cluster.token) as admin:
        assert [(i.pool.name, i.pool.slots) for i in admin.list_pools()] == [("warehouse", 6)]
        admin.set_pool("warehouse", 6, description="changed elsewhere")
    wait_until(
        lambda: "changed elsewhere" in _retrying(lambda: browser.find_element(By.ID, "pool-warehouse").text),
        30,
        0.2,
        "the live refresh to show a change made elsewhere",
    )
    browser.save_screenshot(str(shots / "pools.png"))

    # A viewer: no action buttons, and a forged POST (its own session and CSRF token) is refused.
    _sign_in(browser, base, tokens["viewer"])
    browser.get(run_url)
    assert _state_of(browser, "c") == "success"
    assert browser.find_elements(By.CSS_SELECTOR, "[data-action]") == []
    browser.get(base + "/tasks")
    assert browser.find_elements(By.CSS_SELECTOR, "[data-action]") == []
    browser.save_screenshot(str(shots / "viewer-tasks.png"))
    browser.get(run_url)
    status = browser.execute_script(
        """
        const csrf = document.querySelector('input[name=csrf]').value;
        const body = new URLSearchParams({csrf: csrf, task: 'c'});
        const r = await fetch(location.pathname + '/rerun', {method: 'POST', body: body, redirect: 'manual'});
        return r.status;
        """
    )
    assert status == 403
    with Client(cluster.targets(), tls=cluster.tls, token=cluster.token) as admin:
        after = admin.get_workflow_run(run.run_id)
    assert {t.name: t.tries for t in after.tasks}["c"] == 2  # the forged rerun did nothing

    # A phone-width window: nothing but the scrolling graph and tables is wider than the window.
    browser.set_window_size(400, 900)
    for path in (
        run_url,
        base + "/tasks",
        base + "/cluster",
        base + "/waits",
        base + "/events",
        base + "/pools",
        base + "/workflows/reconcile",
    ):
        browser.get(path)
        overflow = browser.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth;"
        )
        assert overflow <= 1, f"{path} is {overflow}px wider than a 400px window"
    browser.get(run_url)
    browser.save_screenshot(str(shots / "narrow-workflow-run.png"))
