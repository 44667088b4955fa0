"""The executor's end of a ``Session`` stream (``GrpcExecutorTransport.session``) against a real
in-process gRPC server on loopback.

The agent writes to one session from two tasks: its heartbeat loop and its report loop. A gRPC
call takes ONE write at a time: a second ``write`` while the first is still pending (the
peer's flow-control window is full, as it is under load) is refused by gRPC core with
``GRPC_CALL_ERROR_TOO_MANY_OPERATIONS``, which grpc.aio turns into ``INTERNAL: Internal error
from Core`` and ends the call: the executor lost its session and registered again, several
times a second in the 4,000-task benchmark. ``send`` must take concurrent callers one after
the other, in the order they called, and lose nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from raftsched.rpc.executor_client import GrpcExecutorTransport
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

SENDERS = 4
MESSAGES = 40
TOTAL = SENDERS * MESSAGES
PAYLOAD = ["x" * 1000] * 60  # about the flow-control window: most writes wait for the reader


class _SlowReader(pb_grpc.ExecutorServiceServicer):  # type: ignore[misc]
    """Reads a session slowly (so the client's writes pend) and answers once it has every
    message."""

    def __init__(self) -> None:
        self.received: list[str] = []

    async def Session(self, requests: Any, context: Any) -> Any:
        async for up in requests:
            if up.WhichOneof("body") == "open":
                yield pb.SessionDown(accept=pb.SessionAccept(session_version=1, epoch=1))
                continue
            self.received.append(up.heartbeat.name)
            await asyncio.sleep(0.001)
            if len(self.received) == TOTAL:
                yield pb.SessionDown(work=pb.SessionWork(epoch=1, acked_through=TOTAL))


def test_concurrent_sends_on_one_session_are_taken_one_at_a_time_and_none_is_lost() -> None:
    async def scenario() -> tuple[list[str], int]:
        server = grpc.aio.server()
        servicer = _SlowReader()
        pb_grpc.add_ExecutorServiceServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        transport = GrpcExecutorTransport()
        try:
            stream = transport.session(f"127.0.0.1:{port}")
            await stream.send(pb.SessionUp(open=pb.SessionOpen(name="e", session_version=1)))
            downs = aiter(stream)
            first = await anext(downs)
            assert first.WhichOneof("body") == "accept"

            async def sender(k: int) -> None:
                for i in range(MESSAGES):
                    # The name carries the sender and the sequence; the padding fills the window.
                    request = pb.HeartbeatRequest(name=f"{k}:{i}", running=PAYLOAD)
                    await stream.send(pb.SessionUp(heartbeat=request))

            await asyncio.wait_for(asyncio.gather(*(sender(k) for k in range(SENDERS))), 60)
            last = await asyncio.wait_for(anext(downs), 30)
            stream.cancel()
            return servicer.received, last.work.acked_through
        finally:
            await transport.close()
            await server.stop(None)

    received, acked = asyncio.run(scenario())
    assert acked == TOTAL
    assert sorted(received) == sorted(f"{k}:{i}" for k in range(SENDERS) for i in range(MESSAGES))
    for k in range(SENDERS):  # each sender's messages arrive in the order it sent them
        mine = [int(r.split(":")[1]) for r in received if r.startswith(f"{k}:")]
        assert mine == list(range(MESSAGES))
