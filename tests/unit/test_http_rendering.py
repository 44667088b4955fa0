"""The HTTP API's JSON rendering cache (raftsched/rpc/rendering.py)."""

from __future__ import annotations

import json

from raftsched.rpc.rendering import JsonCache, join, message_to_json, render
from raftsched.v1 import raftsched_pb2 as pb


def _task(name: str, version: int = 1, note: str = "") -> pb.TaskRecord:
    return pb.TaskRecord(
        spec=pb.TaskSpec(name=name, command=f"echo {note or name} ✓", selector={"b": "2", "a": "1"}),
        version=version,
    )


def test_cached_text_is_the_printed_text_byte_for_byte() -> None:
    cache = JsonCache()
    messages = [_task("a"), _task("b", 2**60), pb.Run(run_id="a@1", state=pb.SUCCEEDED), pb.TaskReply()]
    for message in messages:
        printed = json.dumps(message_to_json(message), ensure_ascii=False)
        first = cache.text(message)  # a miss
        assert first == printed
        assert cache.text(message) is first  # a hit: the text kept
    # A list: as json.dumps spells a list of the printed objects.
    assert join(cache.text(m) for m in messages) == json.dumps(
        [message_to_json(m) for m in messages], ensure_ascii=False
    )
    assert join([]) == json.dumps([])


def test_a_changed_message_is_printed_again() -> None:
    cache = JsonCache()
    task = _task("a")
    first = cache.text(task)
    task.version = 2
    assert cache.text(task) == render(task) != first
    assert len(cache) == 2


def test_equal_bytes_of_different_types_are_not_confused() -> None:
    cache = JsonCache()
    # Both serialize to b"" (every field at its default): the type is part of the key.
    assert cache.text(pb.TaskRecord()) != cache.text(pb.Run())


def test_the_cache_keeps_its_size_and_the_most_recently_used() -> None:
    one = len(_task("x-000").SerializeToString()) + len(render(_task("x-000")))
    cache = JsonCache(max_bytes=one * 3 + one // 2)
    first = {i: cache.text(_task(f"x-{i:03}")) for i in range(3)}
    assert cache.text(_task("x-000")) is first[0]  # used again: now the most recent
    cache.text(_task("x-003"))  # pushes out the least recently used, x-001
    assert len(cache) == 3 and cache.size <= cache.max_bytes
    assert cache.text(_task("x-000")) is first[0]
    assert cache.text(_task("x-002")) is first[2]
    assert cache.text(_task("x-001")) is not first[1]  # pushed out: printed again


def test_a_large_message_is_printed_and_not_kept() -> None:
    cache = JsonCache(max_item=100)
    big = _task("big", note="x" * 200)
    assert cache.text(big) == render(big)
    assert len(cache) == 0 and cache.size == 0
