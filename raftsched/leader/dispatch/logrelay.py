"""The leader's side of full logs (issue 29 part 2): pairs a reader with an executor's answer.

Executors dial the leader and nothing dials them, so a log travels this way:

1. a reader calls ``Logs.ReadLogs`` on the leader (:mod:`raftsched.rpc.logs_service`);
2. :meth:`LogRelay.open` puts a ``WorkItem`` with ``log_request`` (a fresh ``request_id``) on
   the executor's open dispatch stream (only an executor that said ``log_channel`` when it
   opened the stream gets one);
3. the executor dials ``ExecutorService.SendLogs`` and streams a header, the bytes, an end;
   :meth:`LogRelay.attach` hands the servicer the waiting reader's queue;
4. the reader takes the parts off that queue and sends them on.

Memory is bounded whatever the size of the file: the queue holds :data:`QUEUE_PARTS` parts of
at most 64 KiB; while it is full the servicer stops reading, and gRPC flow control stops the
executor's writes. A reader that goes away closes its pending entry: the servicer sees it,
answers the executor, and the executor stops reading its file.

Everything here runs on the node's event loop.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Final, Protocol

from raftsched.leader.dispatch.work import Work
from raftsched.v1 import raftsched_pb2 as pb

QUEUE_PARTS: Final = 16
"""Parts (each at most 64 KiB of log) queued between the executor's upload and the reader."""
MAX_READERS: Final = 256
"""Log reads one leader relays at once (each holds at most QUEUE_PARTS parts, and a task and an
open file on its executor); more are refused as unavailable."""


class Streams(Protocol):
    """What the relay uses of the hub: the open dispatch streams and the epoch."""

    @property
    def streams(self) -> dict[str, asyncio.Queue[list[Work]]]: ...

    @property
    def log_channels(self) -> set[str]: ...

    def dispatch_epoch(self) -> int: ...


class Pending:
    """One reader waiting for one executor's answer."""

    def __init__(self, request_id: str, executor: str) -> None:
        self.request_id = request_id
        self.executor = executor
        self.queue: asyncio.Queue[pb.LogUpload | None] = asyncio.Queue(QUEUE_PARTS)
        self.attached = False
        self.closed = False
        self.gone = asyncio.Event()  # set by close(): the upload may stop at once

    async def put(self, part: pb.LogUpload | None) -> bool:
        """Queue a part (None: the upload ended); False once the reader went away."""
        if self.closed:
            return False
        await self.queue.put(part)
        return not self.closed

    def close(self) -> None:
        """The reader is done: free a put blocked on a full queue and refuse the rest."""
        self.closed = True
        self.gone.set()
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait(None)  # a reader still waiting on the queue wakes and ends


class LogRelay:
    def __init__(self, hub: Streams) -> None:
        self.hub = hub
        self.pending: dict[str, Pending] = {}

    def reachable(self, executor: str) -> bool:
        """Whether ``executor`` has a dispatch stream open here and answers log requests."""
        return executor in self.hub.streams and executor in self.hub.log_channels

    def busy(self) -> bool:
        """Whether :data:`MAX_READERS` reads are under way (refuse another)."""
        return len(self.pending) >= MAX_READERS

    def open(self, executor: str, request: pb.LogRequest) -> Pending | None:
        """Ask ``executor`` for a log (``request_id`` is filled in); None if it is not reachable.
        The caller must :meth:`done` the result."""
        queue = self.hub.streams.get(executor)
        if queue is None or executor not in self.hub.log_channels:
            return None
        request_id = uuid.uuid4().hex
        pending = self.pending[request_id] = Pending(request_id, executor)
        item = pb.WorkItem(epoch=self.hub.dispatch_epoch())
        item.log_request.CopyFrom(request)
        item.log_request.request_id = request_id
        queue.put_nowait([item])
        return pending

    def attach(self, request_id: str, executor: str) -> Pending | None:
        """The reader waiting for this answer, if it still waits and asked this executor."""
        pending = self.pending.get(request_id)
        if pending is None or pending.executor != executor or pending.attached or pending.closed:
            return None
        pending.attached = True
        return pending

    def done(self, pending: Pending) -> None:
        pending.close()
        self.pending.pop(pending.request_id, None)
