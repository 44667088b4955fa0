"""Read-path helpers: page sizes, run cursors, stale-read metadata, and task pages."""

from __future__ import annotations

import pytest

from raftsched.errors import InvalidSpec
from raftsched.fsm import queries
from raftsched.rpc import admin


def test_page_size_defaults_caps_and_never_exceeds_limit() -> None:
    assert admin.page_size(0, 0) == admin.DEFAULT_PAGE_SIZE
    assert admin.page_size(10**6, 0) == admin.MAX_PAGE_SIZE
    assert admin.page_size(0, 7) == 7


def test_run_cursor_round_trips_and_refuses_garbage() -> None:
    assert admin.run_cursor("") is None
    assert admin.run_cursor("1700000000000:job@1700000000000") == (1700000000000, "job@1700000000000")
    for bad in ("x", "12", ":a", "abc:run"):
        with pytest.raises(InvalidSpec):
            admin.run_cursor(bad)


def test_allows_stale_reads_only_with_the_flag() -> None:
    assert admin.allows_stale([(admin.STALE_KEY, "1")])
    assert not admin.allows_stale([("other", "1")])
    assert not admin.allows_stale(None)


def test_task_pages_cover_every_user_task_once_in_name_order() -> None:
    names = [f"t{i:03d}" for i in range(25)] + ["wf#inner"]
    seen: list[str] = []
    after = ""
    while True:
        page, more = queries.task_page(reversed(names), "", after, 10)
        seen += page
        if not more:
            break
        after = page[-1]
    assert seen == sorted(n for n in names if "#" not in n)


def test_the_cli_stale_option_goes_before_or_after_the_command_and_reaches_the_client() -> None:
    from raftsched.cli.cluster import connect
    from raftsched.cli.parser import parse_args

    for argv, expected in (
        (["--cluster", "127.0.0.1:1", "task", "list"], False),
        (["--stale", "--cluster", "127.0.0.1:1", "task", "list"], True),
        (["--cluster", "127.0.0.1:1", "task", "list", "--stale"], True),
    ):
        args = parse_args(argv)
        assert args.stale_reads is expected, argv
        with connect(args) as client:
            assert client.stale_reads is expected
