"""The HTTP API's JSON rendering cache (raftsched/rpc/rendering.py) and its wait for the
leader's fires (HttpApi.fires_first, DriverThread.firing)."""

from __future__ import annotations

import asyncio
import json

from raftsched.rpc.http_api import HttpApi
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
        assert cache.text(message) == printed  # a miss
        assert cache.text(message) == printed  # a hit
    assert (cache.hits, cache.misses) == (4, 4)
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
    assert cache.misses == 2


def test_equal_bytes_of_different_types_are_not_confused() -> None:
    cache = JsonCache()
    # Both serialize to b"" (every field at its default): the type is part of the key.
    assert cache.text(pb.TaskRecord()) != cache.text(pb.Run())


def test_the_cache_keeps_its_size_and_the_most_recently_used() -> None:
    one = len(_task("x-000").SerializeToString()) + len(render(_task("x-000")))
    cache = JsonCache(max_bytes=one * 3 + one // 2)
    for i in range(3):
        cache.text(_task(f"x-{i:03}"))
    cache.text(_task("x-000"))  # used again: now the most recent
    cache.text(_task("x-003"))  # pushes out the least recently used, x-001
    assert len(cache) == 3 and cache.size <= cache.max_bytes
    hits = cache.hits
    cache.text(_task("x-000"))
    assert cache.hits == hits + 1
    cache.text(_task("x-001"))
    assert cache.hits == hits + 1  # it was pushed out: printed again


def test_a_large_message_is_printed_and_not_kept() -> None:
    cache = JsonCache(max_item=100)
    big = _task("big", note="x" * 200)
    assert cache.text(big) == render(big)
    assert len(cache) == 0 and cache.size == 0


# -- fires first -----------------------------------------------------------------------------------


def test_calls_wait_while_the_leader_fires_and_then_run_as_long_as_they_waited() -> None:
    api = HttpApi(lambda _: None)
    state = {"firing": True}
    api.firing = lambda: state["firing"]

    async def scenario() -> tuple[bool, bool, bool]:
        loop = asyncio.get_running_loop()
        waiters = [asyncio.ensure_future(api.fires_first()) for _ in range(3)]
        await asyncio.sleep(0.02)
        waiting = not any(w.done() for w in waiters)
        state["firing"] = False  # the batch is committed
        await asyncio.wait_for(asyncio.gather(*waiters), 1)
        # Fires again at once: calls have had less time than they waited, so they do not wait.
        state["firing"] = True
        started = loop.time()
        await api.fires_first()
        free_turn = loop.time() - started < 0.01
        # After as long as the wait lasted, they wait again, at most MAX_YIELD_S.
        await asyncio.sleep(api.yielded_s + 0.01)
        started = loop.time()
        cancelled = asyncio.ensure_future(api.fires_first())
        other = asyncio.ensure_future(api.fires_first())
        await asyncio.sleep(0.005)
        cancelled.cancel()  # a client that went away: the others keep waiting
        await asyncio.sleep(0.005)
        still = not other.done()
        await asyncio.wait_for(other, 1)
        bounded = loop.time() - started < 0.5
        return waiting and still, free_turn, bounded

    waited, free_turn, bounded = asyncio.run(scenario())
    assert waited and free_turn and bounded
    assert api.yielded_s > 0.015


def test_without_fires_calls_never_wait() -> None:
    api = HttpApi(lambda _: None)

    async def scenario() -> None:
        await asyncio.wait_for(api.fires_first(), 0.5)
        api.firing = lambda: False
        await asyncio.wait_for(api.fires_first(), 0.5)

    asyncio.run(scenario())
    assert api.yielded_s == 0.0
