"""The executor's end of a gRPC Session call (:class:`raftsched.rpc.executor_client._GrpcSession`)
against a loopback server (OS-assigned port): what gRPC itself allows on one call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc

from raftsched.rpc.executor_client import _GrpcSession
from raftsched.v1 import raftsched_pb2 as pb


def test_a_heartbeat_sent_while_a_large_report_waits_for_the_window_does_not_break_the_call() -> None:
    """The agent's report and heartbeat tasks send on the same call. gRPC allows one message in
    flight per call: a second write while the first waits for the peer's flow-control window
    ended the whole call with INTERNAL (GRPC_CALL_ERROR_TOO_MANY_OPERATIONS), so a leader slow
    to read a large report cost the executor its session. Sends now wait their turn."""

    async def main() -> tuple[list[str], grpc.StatusCode]:
        reading = asyncio.Event()
        taken: list[str] = []

        async def session(
            requests: AsyncIterator[pb.SessionUp], context: object
        ) -> AsyncIterator[pb.SessionDown]:
            await reading.wait()  # a leader whose loop is busy: the window fills
            async for up in requests:
                taken.append(up.WhichOneof("body") or "")
                if taken[-1] == "heartbeat":
                    break
            yield pb.SessionDown(accept=pb.SessionAccept(session_version=1))

        server = grpc.aio.server()
        handler = grpc.stream_stream_rpc_method_handler(
            session,
            request_deserializer=pb.SessionUp.FromString,
            response_serializer=pb.SessionDown.SerializeToString,
        )
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.S", {"Session": handler}),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                call = channel.stream_stream(
                    "/t.S/Session",
                    request_serializer=pb.SessionUp.SerializeToString,
                    response_deserializer=pb.SessionDown.FromString,
                )()
                stream = _GrpcSession(call)
                big = pb.SessionUp(report=pb.SessionReport(cold=[pb.ExecResult(stdout_tail="x" * 3_000_000)]))
                # One report at a time, as the agent sends them, until one waits for the window.
                sent = 0
                while True:
                    report = asyncio.ensure_future(stream.send(big))
                    sent += 1
                    done, _ = await asyncio.wait([report], timeout=0.5)
                    if not done:
                        break
                    assert sent < 4, "the window never filled: the test proves nothing"
                heartbeat = asyncio.ensure_future(
                    stream.send(pb.SessionUp(heartbeat=pb.HeartbeatRequest(name="x")))
                )
                done, _ = await asyncio.wait([heartbeat], timeout=0.5)
                assert not done or heartbeat.exception() is None, heartbeat.exception()
                reading.set()
                await asyncio.wait_for(asyncio.gather(report, heartbeat), 30)
                downs = [down async for down in stream]
                assert [d.WhichOneof("body") for d in downs] == ["accept"]
                return taken, await call.code()
        finally:
            await server.stop(0)

    taken, code = asyncio.run(main())
    assert code == grpc.StatusCode.OK
    assert taken[-1] == "heartbeat" and set(taken[:-1]) == {"report"}, taken
