"""The leader's log relay (raftsched.leader.dispatch.logrelay): who gets a log request, who may
answer it, and that a reader going away frees an upload blocked on a full queue."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from raftsched.leader.dispatch.logrelay import MAX_READERS, QUEUE_PARTS, LogRelay
from raftsched.leader.dispatch.work import Work
from raftsched.v1 import raftsched_pb2 as pb


@dataclass
class FakeHub:
    streams: dict[str, asyncio.Queue[list[Work]]] = field(default_factory=dict)
    log_channels: set[str] = field(default_factory=set)

    def dispatch_epoch(self) -> int:
        return 7


def test_only_a_connected_executor_that_serves_logs_is_asked() -> None:
    async def go() -> None:
        hub = FakeHub()
        relay = LogRelay(hub)
        ask = pb.LogRequest(execution_id="t@1/0/1", follow=True)
        assert relay.open("ex1", ask) is None  # not connected
        hub.streams["ex1"] = asyncio.Queue()
        assert relay.open("ex1", ask) is None  # connected, an older executor: no log channel
        hub.log_channels.add("ex1")
        pending = relay.open("ex1", ask)
        assert pending is not None
        [item] = hub.streams["ex1"].get_nowait()  # one list per put
        assert isinstance(item, pb.WorkItem)
        assert item.epoch == 7 and item.log_request.execution_id == "t@1/0/1" and item.log_request.follow
        assert item.log_request.request_id == pending.request_id and not item.execution_id
        # Only the executor asked may answer, once.
        assert relay.attach(pending.request_id, "ex2") is None
        assert relay.attach("unknown", "ex1") is None
        assert relay.attach(pending.request_id, "ex1") is pending
        assert relay.attach(pending.request_id, "ex1") is None
        relay.done(pending)
        assert relay.pending == {}

    asyncio.run(go())


def test_a_reader_going_away_frees_a_blocked_upload() -> None:
    async def go() -> None:
        hub = FakeHub(streams={"ex1": asyncio.Queue()}, log_channels={"ex1"})
        relay = LogRelay(hub)
        pending = relay.open("ex1", pb.LogRequest(execution_id="t@1/0/1"))
        assert pending is not None
        for _ in range(QUEUE_PARTS):
            assert await pending.put(pb.LogUpload(data=b"x" * 1024))
        blocked = asyncio.ensure_future(pending.put(pb.LogUpload(data=b"y")))
        await asyncio.sleep(0)  # one turn of the loop: the put runs and waits
        # The queue is full: the upload waits (bounded memory).
        assert pending.queue.full() and not blocked.done()
        relay.done(pending)  # the reader went away
        assert await asyncio.wait_for(blocked, 5) is False
        assert pending.gone.is_set()
        assert await pending.put(pb.LogUpload(data=b"z")) is False
        # A reader still waiting on the queue wakes with the end marker.
        assert pending.queue.get_nowait() is None

    asyncio.run(go())


def test_reads_under_way_are_bounded() -> None:
    async def go() -> None:
        hub = FakeHub(streams={"ex1": asyncio.Queue()}, log_channels={"ex1"})
        relay = LogRelay(hub)
        opened = []
        while not relay.busy():
            pending = relay.open("ex1", pb.LogRequest(execution_id="t@1/0/1"))
            assert pending is not None
            opened.append(pending)
        assert len(opened) == MAX_READERS
        relay.done(opened[0])
        assert not relay.busy()

    asyncio.run(go())
