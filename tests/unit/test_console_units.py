"""The console's pure parts: sessions, CSRF and origin checks, safe redirects, DAG and Gantt
geometry, pagination and time parsing."""

from __future__ import annotations

import fnmatch
import itertools
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest

from raftsched.client import ClusterView
from raftsched.config.load import load_config
from raftsched.errors import ConfigError, InvalidSpec, PermissionDenied, Unauthenticated
from raftsched.fsm import queries
from raftsched.observability.listener import HttpRequest
from raftsched.security.auth import Principal, Role
from raftsched.timing.clock import ManualClock
from raftsched.v1 import log_pb2 as fsm_pb
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.web.base import local_path
from raftsched.web.cache import ReadCache
from raftsched.web.console import Console, _cookie, _post_problem, _set_cookie
from raftsched.web.graph import BOX_W, COL_GAP, GANTT_LABEL_W, GANTT_W, dag_geometry, gantt_geometry
from raftsched.web.sessions import COOKIE, Session, SessionStore
from raftsched.web.views import Pager, _parse_time, _strip, _strip_html, paginate, relative
from tests.support.fsm import T0, S, apply, batch, entry, fire, with_task


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def _store(clock: Clock, dropped: list[Session], **kw: int) -> SessionStore:
    counter = itertools.count()
    return SessionStore(clock, token_urlsafe=lambda n: f"r{next(counter)}", on_drop=dropped.append, **kw)


def test_sign_in_gives_a_new_id_and_csrf_token_and_drops_the_old_session() -> None:
    clock, dropped = Clock(), list[Session]()
    store = _store(clock, dropped)
    anonymous = store.new()
    viewer = Principal("token:abc", Role.VIEWER)
    signed = store.sign_in(anonymous, "rst_token", viewer)
    assert signed.sid != anonymous.sid and signed.csrf != anonymous.csrf
    assert store.get(anonymous.sid) is None and dropped == [anonymous]
    assert store.get(signed.sid) is signed and signed.token == "rst_token" and signed.principal == viewer


def test_sessions_expire_when_idle_and_the_least_recent_is_evicted_first() -> None:
    clock, dropped = Clock(), list[Session]()
    store = _store(clock, dropped, idle_ms=1000, max_sessions=2)
    a, b = store.new(), store.new()
    clock.ms += 600
    assert store.get(a.sid) is a  # touched: b is now the least recently used
    c = store.new()
    assert dropped == [b] and len(store) == 2
    clock.ms += 1001
    assert store.get(c.sid) is None and dropped == [b, c]
    assert store.get(None) is None and store.get("") is None


def test_csrf_tokens_compare_exactly() -> None:
    s = Session("sid", "secret-csrf", 0, 0)
    assert s.csrf_ok("secret-csrf")
    assert not s.csrf_ok("") and not s.csrf_ok("secret-csr") and not s.csrf_ok("secret-csrf ")


def test_a_post_needs_the_csrf_token_and_a_same_origin() -> None:
    s = Session("sid", "tok", 0, 0)
    same = {"host": "127.0.0.1:9101", "origin": "http://127.0.0.1:9101"}
    assert _post_problem(same, {"csrf": "tok"}, s) == ""
    assert _post_problem({"host": "h:1"}, {"csrf": "tok"}, s) == ""  # no Origin sent: the token decides
    assert "CSRF" in _post_problem(same, {"csrf": "nope"}, s)
    assert "posted from http://evil.example" in _post_problem(
        {"host": "127.0.0.1:9101", "origin": "http://evil.example"}, {"csrf": "tok"}, s
    )


def test_cookie_parsing_and_flags() -> None:
    assert _cookie("a=1; raftsched_console=xyz; b=2", "raftsched_console") == "xyz"
    assert _cookie("raftsched_consolex=1", "raftsched_console") is None
    flags = _set_cookie("xyz")
    assert flags.startswith("raftsched_console=xyz;") and "HttpOnly" in flags and "SameSite=Strict" in flags


@pytest.mark.parametrize(
    ("target", "ok"),
    [
        ("/tasks", True),
        ("/runs/a%40b", True),
        ("//evil.example/x", False),
        ("http://evil/", False),
        ("/\\evil", False),
        ("", False),
    ],
)
def test_redirects_stay_on_the_console(target: str, ok: bool) -> None:
    assert local_path(target) == (target if ok else "")


def _diamond() -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name="diamond")
    spec.tasks.add(name="a")
    spec.tasks.add(name="b").depends_on.add(task="a")
    spec.tasks.add(name="c").depends_on.add(task="a", condition=pb.ON_FAILURE)
    d = spec.tasks.add(name="d")
    d.depends_on.add(task="b")
    d.depends_on.add(task="c")
    return spec


def test_the_dag_is_drawn_in_layers_left_to_right() -> None:
    dag = dag_geometry(_diamond(), {"a": "success", "c": "failed"})
    boxes = {b.name: b for b in dag.boxes}
    assert [boxes[n].layer for n in "abcd"] == [0, 1, 1, 2]
    assert boxes["b"].x == boxes["c"].x == boxes["a"].x + BOX_W + COL_GAP
    assert boxes["b"].y < boxes["c"].y  # spec order within a layer
    assert boxes["a"].state == "success" and boxes["c"].state == "failed" and boxes["d"].state == ""
    assert {(e.upstream, e.downstream) for e in dag.edges} == {("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")}
    assert next(e for e in dag.edges if e.downstream == "c").condition == "on failure"
    assert all(0 < b.x + b.w <= dag.width and 0 < b.y + b.h <= dag.height for b in dag.boxes)


def test_a_lineage_highlight_marks_the_task_its_ancestors_and_descendants() -> None:
    dag = dag_geometry(_diamond(), None, "b", ["a"], ["d"])
    marks = {b.name: b.mark for b in dag.boxes}
    assert marks == {"a": "up", "b": "focus", "c": "", "d": "down"}
    lit = {(e.upstream, e.downstream) for e in dag.edges if e.lit}
    assert lit == {("a", "b"), ("b", "d")}


def test_the_gantt_chart_spans_each_state_until_the_next() -> None:
    rows = [
        ("a", [("ready", 1000), ("running", 2000), ("success", 3000)]),
        ("b", [("waiting", 1000), ("running", 3000)]),
    ]
    g = gantt_geometry(rows, 1000, 5000)
    a, b = g.rows
    assert [x.state for x in a.bars] == ["ready", "running", "success"]
    assert a.bars[0].x == GANTT_LABEL_W and a.bars[0].w == GANTT_W / 4
    assert a.bars[2].start_ms == a.bars[2].end_ms == 3000  # a final state is a mark, not a span
    assert b.bars[1].end_ms == 5000 and b.bars[1].x + b.bars[1].w == pytest.approx(GANTT_LABEL_W + GANTT_W)
    assert b.y > a.y


def test_paginate() -> None:
    items = list(range(120))
    page, pager = paginate(items, 3, 50)
    assert list(page) == list(range(100, 120)) and pager == Pager(3, 3, 120, False) and pager.has_prev
    page, pager = paginate(items, 99, 50)
    assert pager.page == 3
    page, pager = paginate([], 1, 50)
    assert list(page) == [] and pager == Pager(1, 1, 0, False)


def test_times_for_explain() -> None:
    assert _parse_time("1700000000000") == 1_700_000_000_000
    assert _parse_time("2026-01-02T03:04:05Z") == 1_767_323_045_000
    assert _parse_time("2026-01-02T04:04:05+01:00") == 1_767_323_045_000
    assert _parse_time("2026-01-02T03:04:05") == 1_767_323_045_000  # UTC without an offset
    with pytest.raises(InvalidSpec):
        _parse_time("yesterday")
    assert (
        relative(0, 5) == "-" and relative(65_000, 5_000) == "in 60s" and relative(1000, 181_000) == "3m ago"
    )


def test_without_auth_the_console_is_off_on_a_non_loopback_listener(tmp_path: Path) -> None:
    def console_for(http: str, extra: str = "") -> Console:
        (tmp_path / "c.toml").write_text(
            f'[cluster]\nsecret = "0123456789abcdef0123"\n{extra}\n[[nodes]]\nid = "n1"\n'
            f'raft = "127.0.0.1:7001"\ngrpc = "127.0.0.1:7101"\nhttp = "{http}"\ndata_dir = "d"\n'
        )
        config = load_config(tmp_path / "c.toml")
        node = SimpleNamespace(node_id="n1", config=config, clock=ManualClock(0), tokens=None)
        return Console(node)

    # The safe-defaults rule covers the HTTP listener: such a config does not load at all now,
    # so the console's own refusal is a backstop that configs cannot reach.
    with pytest.raises(ConfigError, match=r"nodes\[0\]\.http: 0\.0\.0\.0:9101 is not a loopback address"):
        console_for("0.0.0.0:9101")
    assert not console_for("127.0.0.1:9101").refused
    assert not console_for("0.0.0.0:9101", "insecure = true").refused


def test_the_wheel_ships_every_template_and_static_file() -> None:
    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "raftsched"
    ]
    package = root / "raftsched"
    files = [p for d in ("web/templates", "web/static") for p in (package / d).iterdir() if p.is_file()]
    assert files
    for path in files:
        rel = str(path.relative_to(package))
        assert any(fnmatch.fnmatch(rel, pattern) for pattern in patterns), f"{rel} is not package data"


def test_the_newest_fire_records_are_read_from_the_end_and_returned_in_time_order() -> None:
    state = with_task()
    coalesced = fire(T0 + S, fsm_pb.COALESCED, through=T0 + 8 * S, count=8)
    fires = [coalesced, *(fire(T0 + k * S) for k in range(9, 13))]
    e = entry("t", 1, fires, watermark=T0 + 12 * S, next_fire=T0 + 13 * S)
    assert apply(state, batch(T0 + 12 * S, e)).ok
    with state.store.reader() as r:
        newest = queries.fire_records(r, "t", 0, 0, 2, newest=True)
        window = queries.fire_records(r, "t", T0 + 5 * S, 0, 10, newest=True)
        recent = queries.recent_fires(r, "t", 4)
    assert [f.nominal_ms for f in newest] == [T0 + 11 * S, T0 + 12 * S]
    # The coalesced range starts before the window but reaches into it: it is included, first.
    assert [f.nominal_ms for f in window] == [T0 + S, *(T0 + k * S for k in range(9, 13))]
    # The first fire started a run (PENDING); the others were skipped (overlap): no run, no state.
    assert [(f.nominal_ms, s) for f, s in recent] == [
        (T0 + 9 * S, fsm_pb.PENDING),
        (T0 + 10 * S, fsm_pb.RUN_STATE_UNSPECIFIED),
        (T0 + 11 * S, fsm_pb.RUN_STATE_UNSPECIFIED),
        (T0 + 12 * S, fsm_pb.RUN_STATE_UNSPECIFIED),
    ]


# -- the cache of cluster-wide reads -----------------------------------------------------------


def test_a_cached_read_is_served_for_less_than_its_ttl_and_never_across_credentials() -> None:
    clock = Clock()
    cache = ReadCache(clock, ttl_ms=1000)
    calls: list[str] = []

    def read(who: str) -> Callable[[], str]:
        return lambda: calls.append(who) or f"{who}@{clock.ms}"  # type: ignore[func-returns-value]

    assert cache.get("tok-a", "status", read("a")) == "a@1000000"
    clock.ms += 999
    assert cache.get("tok-a", "status", read("a")) == "a@1000000"  # 999 ms old: served
    assert cache.get("tok-b", "status", read("b")) == "b@1000999"  # another credential: its own
    assert cache.get("tok-a", "executors", read("a")) == "a@1000999"  # another read: its own
    clock.ms += 1
    assert cache.get("tok-a", "status", read("a")) == "a@1001000"  # 1000 ms old: read again
    clock.ms -= 5_000  # the clock went back: nothing is trusted
    assert cache.get("tok-a", "status", read("a")) == "a@996000"
    assert calls == ["a", "b", "a", "a", "a"]


def test_a_failed_read_is_not_cached_and_the_cache_is_bounded() -> None:
    clock = Clock()
    cache = ReadCache(clock, ttl_ms=1000, max_entries=2)

    def refuse() -> str:
        raise PermissionDenied("no")

    with pytest.raises(PermissionDenied):
        cache.get("tok", "status", refuse)
    assert cache.get("tok", "status", lambda: "ok") == "ok"
    for i in range(5):
        cache.get(f"t{i}", "status", lambda: "x")
    assert len(cache._entries) == 2


class _CountingClient:
    """Stands in for a session's SDK client on the cluster page: counts its calls."""

    def __init__(self, token: str | None, calls: list[tuple[str | None, str]]) -> None:
        self.token, self.calls = token, calls

    def cluster_status(self, *, digests: bool = False) -> ClusterView:
        self.calls.append((self.token, "digests" if digests else "cluster_status"))
        return ClusterView("", "", 0, 0, ())

    def list_executors(self) -> pb.ListExecutorsReply:
        self.calls.append((self.token, "list_executors"))
        return pb.ListExecutorsReply()

    def close(self) -> None:
        pass


def test_the_cluster_page_reads_once_a_second_per_credential_and_checks_the_token_every_request(
    tmp_path: Path,
) -> None:
    (tmp_path / "admin.token").write_text("x" * 43 + "\n")
    (tmp_path / "c.toml").write_text(
        '[cluster]\nsecret = "0123456789abcdef0123"\n[auth]\nbootstrap_token_file = "admin.token"\n'
        '[[nodes]]\nid = "n1"\nraft = "127.0.0.1:7001"\ngrpc = "127.0.0.1:7101"\n'
        'http = "127.0.0.1:9101"\ndata_dir = "d"\n'
    )
    clock = ManualClock(1_000_000)
    revoked: set[str] = set()

    class Tokens:
        def check(self, token: str) -> Principal:
            if token in revoked:
                raise Unauthenticated("token revoked")
            return Principal(f"token:{token}", Role.VIEWER)

    node = SimpleNamespace(
        node_id="n1", config=load_config(tmp_path / "c.toml"), clock=clock, tokens=Tokens()
    )
    calls: list[tuple[str | None, str]] = []
    console = Console(node, client_factory=lambda token: _CountingClient(token, calls))  # type: ignore[arg-type, return-value]

    def get(sid: str, query: dict[str, str] | None = None) -> int:
        headers = {"Cookie": f"{COOKIE}={sid}"}
        return console.handle_sync(HttpRequest("GET", "/cluster", query or {}, headers)).status

    a = console.sessions.sign_in(console.sessions.new(), "tok-a", Principal("token:tok-a", Role.VIEWER))
    b = console.sessions.sign_in(console.sessions.new(), "tok-b", Principal("token:tok-b", Role.VIEWER))
    assert get(a.sid) == 200 and get(a.sid) == 200
    assert calls == [("tok-a", "cluster_status"), ("tok-a", "list_executors")]  # the 2nd: cached
    assert get(b.sid) == 200  # another principal never gets a's answer
    assert calls[2:] == [("tok-b", "cluster_status"), ("tok-b", "list_executors")]
    assert get(a.sid, {"digests": "1"}) == 200  # digests are asked for each time
    assert calls[4:] == [("tok-a", "digests")]
    clock.advance(1000)
    assert get(a.sid) == 200  # a second later: read again
    assert calls[5:] == [("tok-a", "cluster_status"), ("tok-a", "list_executors")]
    revoked.add("tok-b")  # b's answer is fresh in the cache, but b's token is checked first
    assert get(b.sid) == 303
    assert len(calls) == 7


def test_the_strip_html_is_what_the_template_loop_drew_with_every_value_escaped() -> None:
    recent = pb.RecentFires(task="t")
    recent.fires.add(nominal_ms=1_700_000_000_000, outcome=fsm_pb.FIRED, run_id="t-1700000000000")
    recent.run_states.append(pb.SUCCEEDED)
    recent.fires.add(nominal_ms=1_700_000_001_000, outcome=fsm_pb.COALESCED, count=3)
    recent.run_states.append(pb.RUN_STATE_UNSPECIFIED)
    recent.fires.add(nominal_ms=1_700_000_002_500, outcome=fsm_pb.FIRED, run_id='odd/"<id>"')
    recent.run_states.append(pb.RUNNING)
    strip = _strip(recent)
    loop = jinja2.Environment(autoescape=True).from_string(
        '{% for state, title, link in strip %}{% if link %}<a href="{{ link }}" class="tick s-{{ state }}" '
        'title="{{ title }}"></a>{% else %}<span class="tick s-{{ state }}" title="{{ title }}"></span>'
        "{% endif %}{% endfor %}"
    )
    assert str(_strip_html(strip)) == loop.render(strip=strip)
    assert "/runs/odd%2F%22%3Cid%3E%22" in str(_strip_html(strip))
    assert [s for s, _, _ in strip] == ["succeeded", "coalesced", "running"]
    hostile = str(_strip_html([("x", '<script>"', 'a"b')]))
    assert "<script>" not in hostile
    assert 'title="&lt;script&gt;&quot;"' in hostile and 'href="a&quot;b"' in hostile


def test_pages_read_this_nodes_state_except_just_after_an_action(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(
        '[cluster]\nsecret = "0123456789abcdef0123"\n[[nodes]]\nid = "n1"\nraft = "127.0.0.1:7001"\n'
        'grpc = "127.0.0.1:7101"\nhttp = "127.0.0.1:9101"\ndata_dir = "d"\n'
    )
    clock = ManualClock(1_000_000)
    node = SimpleNamespace(node_id="n1", config=load_config(tmp_path / "c.toml"), clock=clock, tokens=None)
    calls: list[tuple[str | None, str]] = []

    class Acting(_CountingClient):
        def enable_task(self, name: str) -> None:
            self.calls.append((self.token, f"enable {name}"))

    console = Console(
        node,
        client_factory=lambda _: Acting("leader", calls),  # type: ignore[arg-type, return-value]
        reader_factory=lambda _: _CountingClient("local", calls),  # type: ignore[arg-type, return-value]
    )
    session = console.sessions.new()
    cookie = {"Cookie": f"{COOKIE}={session.sid}"}
    assert console.handle_sync(HttpRequest("GET", "/cluster", headers=cookie)).status == 200
    assert calls == [("local", "cluster_status"), ("local", "list_executors")]
    form = f"csrf={session.csrf}".encode()
    reply = console.handle_sync(HttpRequest("POST", "/tasks/t1/enable", headers=cookie, body=form))
    assert reply.status == 303 and calls[2:] == [("leader", "enable t1")]
    clock.advance(1000)  # the page the action lands on, and the next for 3 s: the leader's reads
    assert console.handle_sync(HttpRequest("GET", "/cluster", {"x": "1"}, cookie)).status == 200
    assert calls[3:] == [("leader", "cluster_status"), ("leader", "list_executors")]
    clock.advance(2000)
    console.reads.clear()
    assert console.handle_sync(HttpRequest("GET", "/cluster", headers=cookie)).status == 200
    assert calls[5:] == [("local", "cluster_status"), ("local", "list_executors")]
    console.close()


def test_a_leaders_pages_read_linearizably_and_a_followers_say_how_stale_they_are(tmp_path: Path) -> None:
    from raftsched.readinfo import ReadInfo

    (tmp_path / "c.toml").write_text(
        '[cluster]\nsecret = "0123456789abcdef0123"\n[[nodes]]\nid = "n1"\nraft = "127.0.0.1:7001"\n'
        'grpc = "127.0.0.1:7101"\nhttp = "127.0.0.1:9101"\ndata_dir = "d"\n'
    )
    clock = ManualClock(1_000_000)
    node = SimpleNamespace(node_id="n1", config=load_config(tmp_path / "c.toml"), clock=clock, tokens=None)
    calls: list[tuple[str | None, str]] = []

    class Stale(_CountingClient):
        last_read = ReadInfo(False, "n1", 118, 125, 40)

    leading = [False]
    console = Console(
        node,
        client_factory=lambda _: _CountingClient("leader", calls),  # type: ignore[arg-type, return-value]
        reader_factory=lambda _: Stale("local", calls),  # type: ignore[arg-type, return-value]
        leads=lambda: leading[0],
    )
    cookie = {"Cookie": f"{COOKIE}={console.sessions.new().sid}"}
    page = console.handle_sync(HttpRequest("GET", "/cluster", headers=cookie))
    assert calls == [("local", "cluster_status"), ("local", "list_executors")]
    assert "applied index 118 of commit index 125" in page.body.decode()
    leading[0] = True  # this node leads now: its pages go through the read index
    clock.advance(1000)
    console.reads.clear()
    page = console.handle_sync(HttpRequest("GET", "/cluster", headers=cookie))
    assert calls[2:] == [("leader", "cluster_status"), ("leader", "list_executors")]
    assert "read-note" not in page.body.decode()
    console.close()


def test_a_leaders_page_costs_one_read_barrier_not_one_per_read(tmp_path: Path) -> None:
    """Issue 33: on the leader a page confirms leadership once (one read barrier) and then reads
    this node's own state, which covers it; if the barrier cannot be confirmed, each read goes
    through the read index itself (and is refused there)."""
    from raftsched.errors import Unavailable
    from raftsched.readinfo import ReadInfo

    (tmp_path / "c.toml").write_text(
        '[cluster]\nsecret = "0123456789abcdef0123"\n[[nodes]]\nid = "n1"\nraft = "127.0.0.1:7001"\n'
        'grpc = "127.0.0.1:7101"\nhttp = "127.0.0.1:9101"\ndata_dir = "d"\n'
    )
    clock = ManualClock(1_000_000)
    node = SimpleNamespace(node_id="n1", config=load_config(tmp_path / "c.toml"), clock=clock, tokens=None)
    calls: list[tuple[str | None, str]] = []
    barriers: list[int] = []
    sure = [True]

    class Local(_CountingClient):
        last_read = ReadInfo(False, "n1", 130, 130, 5)

    def confirm() -> int:
        if not sure[0]:
            raise Unavailable("not sure I still lead; retry")
        barriers.append(130)
        return 130

    console = Console(
        node,
        client_factory=lambda _: _CountingClient("leader", calls),  # type: ignore[arg-type, return-value]
        reader_factory=lambda _: Local("local", calls),  # type: ignore[arg-type, return-value]
        leads=lambda: True,
        confirm_read=confirm,
    )
    cookie = {"Cookie": f"{COOKIE}={console.sessions.new().sid}"}
    page = console.handle_sync(HttpRequest("GET", "/cluster", headers=cookie))
    assert barriers == [130]  # one barrier for the page's two reads
    assert calls == [("local", "cluster_status"), ("local", "list_executors")]
    assert "read-note" not in page.body.decode()  # linearizable: no staleness note
    sure[0] = False
    clock.advance(1000)
    console.reads.clear()
    console.handle_sync(HttpRequest("GET", "/cluster", headers=cookie))
    assert calls[2:] == [("leader", "cluster_status"), ("leader", "list_executors")]
    console.close()


def test_the_task_page_shows_the_sla_and_freshness_states(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(
        '[cluster]\nsecret = "0123456789abcdef0123"\n[[nodes]]\nid = "n1"\nraft = "127.0.0.1:7001"\n'
        'grpc = "127.0.0.1:7101"\nhttp = "127.0.0.1:9101"\ndata_dir = "d"\n'
    )
    clock = ManualClock(T0 + 40 * 60 * S)
    node = SimpleNamespace(node_id="n1", config=load_config(tmp_path / "c.toml"), clock=clock, tokens=None)
    rec = pb.TaskRecord(created_ms=T0)
    rec.spec.name, rec.spec.command = "report", "x"
    rec.spec.sla_start_within_ms, rec.spec.sla_finish_within_ms = 5 * 60 * S, 30 * 60 * S
    rec.spec.freshness_ms = 25 * 3600 * S
    run = pb.Run(run_id=f"report@{T0}", task="report", nominal_ms=T0, state=pb.RUNNING)
    run.timeline.add(event="started", at_ms=T0 + 7 * 60 * S)

    class Reads(_CountingClient):
        def get_task(self, name: str) -> pb.TaskRecord:
            return rec

        def runs(self, task: str, **kw: object) -> list[pb.Run]:
            return [run]

        def fire_accounting(self, task: str, **kw: object) -> list[pb.FireRecord]:
            return []

    calls: list[tuple[str | None, str]] = []
    console = Console(
        node,
        client_factory=lambda _: Reads("leader", calls),  # type: ignore[arg-type, return-value]
        reader_factory=lambda _: Reads("local", calls),  # type: ignore[arg-type, return-value]
    )
    session = console.sessions.new()
    reply = console.handle_sync(
        HttpRequest("GET", "/tasks/report", headers={"Cookie": f"{COOKIE}={session.sid}"})
    )
    page = reply.body.decode()
    assert reply.status == 200, page
    assert f"sla.start_within 5m 0s for run report@{T0}: missed by 2m 0s" in page
    assert f"sla.finish_within 30m 0s for run report@{T0}: missed by 10m 0s" in page
    assert "freshness 1d 1h 0m: met (no success yet)" in page
    console.close()
