"""The leader's side of an executor's Session stream (issue 31 P2,
:meth:`ExecutorServicer.Session`), driven in process: a real hub and dispatcher, a fake Raft
that commits when the test says, a fake gRPC context. What a peer's messages may make the
leader do: nothing unbounded, and a clear refusal for what is wrong."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest

from raftsched import bounds
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.rpc.executor_service import MAX_SESSION_REPORTS, MAX_SESSION_UNANSWERED, ExecutorServicer
from raftsched.rpc.plumbing import DamagedGuard, DecodeGuard
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc
from tests.support.fsm import T0
from tests.support.wait import until
from tests.unit.test_dispatch_hot_loop import leading_hub


class Aborted(Exception):
    """What grpc.aio's ``context.abort`` raises."""


class Context:
    """The part of ``grpc.aio.ServicerContext`` the Session handler uses."""

    def __init__(self) -> None:
        self.status: grpc.StatusCode | None = None
        self.details = ""

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    def set_trailing_metadata(self, metadata: object) -> None:
        pass

    async def abort(self, status: grpc.StatusCode, details: str) -> None:
        self.status, self.details = status, details
        raise Aborted(details)


class Session:
    """One Session call: ``ups`` feeds the executor's messages (counting what the handler took),
    ``downs`` collects the leader's; ``proposals`` holds every proposal's ``done`` callback, not
    called: nothing commits unless the test commits it."""

    def __init__(self, patch: Callable[[Dispatcher], None] | None = None) -> None:
        _, hub = leading_hub()
        self.proposals: list[Callable[[bytes | None, Exception | None], None]] = []
        proposals = self.proposals

        def propose(data: bytes, done: Callable[[bytes | None, Exception | None], None]) -> None:
            proposals.append(done)

        node: Any = hub.node
        node.propose = propose
        if patch is not None:
            patch(hub.dispatcher)
        self.hub = hub
        self.servicer = ExecutorServicer(hub)
        self.context = Context()
        self.queue: asyncio.Queue[pb.SessionUp | None] = asyncio.Queue()
        self.taken = 0
        self.downs: list[pb.SessionDown] = []
        self.error: BaseException | None = None

    async def _ups(self) -> AsyncIterator[pb.SessionUp]:
        while (up := await self.queue.get()) is not None:
            self.taken += 1
            yield up

    async def run(self, read: bool = True) -> None:
        """Serve the call; ``read``: take the leader's messages as they come (else only the
        first, the accept: the executor does not read, its window is full)."""
        call: Any = self.servicer.Session(self._ups(), self.context)
        try:
            self.downs.append(await anext(call))
            if read:
                async for down in call:
                    self.downs.append(down)
            else:
                await asyncio.Event().wait()  # never reads again
        except Aborted as exc:
            self.error = exc

    def send(self, up: pb.SessionUp) -> None:
        self.queue.put_nowait(up)


@contextlib.asynccontextmanager
async def served(*interceptors: grpc.aio.ServerInterceptor) -> AsyncIterator[grpc.aio.Channel]:
    """A leader's ExecutorService on a loopback port behind ``interceptors``, and a channel to it."""
    _, hub = leading_hub()
    server = grpc.aio.server(interceptors=list(interceptors))
    pb_grpc.add_ExecutorServiceServicer_to_server(ExecutorServicer(hub), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield channel
    finally:
        await server.stop(0)


def opening() -> pb.SessionUp:
    return pb.SessionUp(open=pb.SessionOpen(name="ex1", session_version=1))


def a_report(report_id: int, lateness: int = 3) -> pb.SessionUp:
    return pb.SessionUp(
        report=pb.SessionReport(
            report_id=report_id,
            execution_id=[f"t@{T0 + report_id}/0/1"],
            duration_ms=[5],
            start_lateness_ms=[lateness],
        )
    )


def heartbeat() -> pb.HeartbeatRequest:
    return pb.HeartbeatRequest(name="ex1", free_slots=2)


def test_a_row_whose_lateness_is_out_of_range_refuses_the_report_naming_the_field() -> None:
    """As the Report RPC refuses a ReportRequest (every integer checked, :mod:`raftsched.bounds`);
    before, the rows' columns were not checked and the report was proposed and acknowledged."""

    async def main() -> Session:
        s = Session()
        served = asyncio.ensure_future(s.run())
        s.send(opening())
        s.send(a_report(1, lateness=bounds.LATENESS.high + 1))
        await asyncio.wait_for(served, 5)
        return s

    s = asyncio.run(main())
    assert s.context.status == grpc.StatusCode.INVALID_ARGUMENT, (s.context.status, s.context.details)
    assert "report.start_lateness_ms[0]" in s.context.details and "out of range" in s.context.details
    assert not any(d.work.acked_through for d in s.downs)


def test_reports_waiting_to_commit_stop_the_leader_reading_more() -> None:
    """Backpressure: an executor sending reports faster than they commit is not read further
    (its gRPC window fills) beyond MAX_SESSION_REPORTS in flight; before, each report became a
    proposal at once, without bound."""

    async def main() -> Session:
        s = Session()
        served = asyncio.ensure_future(s.run())
        s.send(opening())
        for i in range(1, 41):
            s.send(a_report(i))
        await until(lambda: len(s.proposals) >= MAX_SESSION_REPORTS, 5, "proposals")
        for _ in range(50):  # the loop runs everything that is ready (no wall-clock wait)
            await asyncio.sleep(0)
        taken, proposed = s.taken, len(s.proposals)
        assert proposed == MAX_SESSION_REPORTS, proposed
        assert taken <= 1 + MAX_SESSION_REPORTS + 1, taken
        served.cancel()
        await asyncio.gather(served, return_exceptions=True)
        return s

    asyncio.run(main())


def test_heartbeats_a_peer_does_not_read_the_answers_to_stop_the_leader_reading_more() -> None:
    """An executor sends one heartbeat at a time; one that sends them without reading the
    answers gets no more read than MAX_SESSION_UNANSWERED (before: a reply queued per
    heartbeat, without bound)."""

    async def main() -> Session:
        s = Session()
        served = asyncio.ensure_future(s.run(read=False))
        s.send(opening())
        for _ in range(40):
            s.send(pb.SessionUp(heartbeat=heartbeat()))
        await until(lambda: s.taken > MAX_SESSION_UNANSWERED, 5, "heartbeats read")
        for _ in range(50):
            await asyncio.sleep(0)
        assert s.taken <= 1 + MAX_SESSION_UNANSWERED + 1, s.taken
        served.cancel()
        await asyncio.gather(served, return_exceptions=True)
        return s

    asyncio.run(main())


def test_a_failure_inside_a_report_ends_the_session_at_once_as_internal() -> None:
    """A bug while taking a report (here: the dispatcher raises) ends the session with INTERNAL
    (the executor opens another and reports again); before, the report's task died unseen and
    the session stayed open with the report never acknowledged, until the executor's 15 s
    deadline."""

    def broken(d: Dispatcher) -> None:
        def results_columns(*_: object, **__: object) -> list[object]:
            raise RuntimeError("a bug")

        d.results_columns = results_columns  # type: ignore[method-assign,assignment]

    async def main() -> Session:
        s = Session(broken)
        served = asyncio.ensure_future(s.run())
        s.send(opening())
        s.send(a_report(1))
        await asyncio.wait_for(served, 5)
        return s

    s = asyncio.run(main())
    assert s.context.status == grpc.StatusCode.INTERNAL, (s.context.status, s.context.details)
    assert "a bug" in s.context.details


@pytest.mark.parametrize("n", [1, 3])
def test_committed_reports_are_acknowledged_in_order(n: int) -> None:
    """The ordinary path (so the tests above do not pass for a session that acknowledges
    nothing): n reports, committed, acknowledged through the last."""

    async def main() -> Session:
        s = Session()
        served = asyncio.ensure_future(s.run())
        s.send(opening())
        for i in range(1, n + 1):
            s.send(a_report(i))
        await until(lambda: len(s.proposals) >= n, 5, "proposals")
        ok = b"\x08\x01"  # CommandResult(ok=True)
        for done in s.proposals:
            done(ok, None)
        await until(lambda: any(d.work.acked_through == n for d in s.downs), 5, "acknowledged")
        s.send(None)  # type: ignore[arg-type]  # the executor hangs up
        await asyncio.wait_for(served, 5)
        return s

    s = asyncio.run(main())
    assert s.error is None


@pytest.mark.parametrize("first", [True, False], ids=["first-message", "later-message"])
def test_a_message_that_does_not_parse_ends_the_session_as_invalid_argument(first: bool) -> None:
    """As DecodeGuard answers a unary request that does not parse. Before, it did not guard a
    bidirectional stream: a bad first message ended the call with UNKNOWN (and a traceback),
    a bad later one closed the session with OK, as if the executor had hung up, no reason given."""
    bad = b"\x12\x05\x12\x03\xff\xfe\xfd"  # SessionUp.report.execution_id: not UTF-8

    async def main() -> tuple[grpc.StatusCode, str]:
        try:
            async with served(DecodeGuard()) as channel:
                call = channel.stream_stream("/raftsched.v1.ExecutorService/Session")()
                if not first:
                    await call.write(opening().SerializeToString())
                await call.write(bad)
                await call.done_writing()
                async for _ in call:
                    pass
                return await call.code(), await call.details()
        except grpc.aio.AioRpcError as exc:
            return exc.code(), exc.details() or ""

    code, details = asyncio.run(main())
    assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
    assert "cannot be decoded" in details and "UTF-8" in details, details


def test_a_log_upload_that_does_not_parse_is_refused_as_invalid_argument() -> None:
    """SendLogs (a client stream) too: before, a header that did not parse escaped as UNKNOWN,
    with a DecodeError traceback in the node log (found by test_fuzz's random part)."""
    bad = b"\x0a\x05\x0a\x03\xff\xfe\xfd"  # LogUpload.header.request_id: not UTF-8

    async def main() -> tuple[grpc.StatusCode, str]:
        try:
            async with served(DecodeGuard()) as channel:
                call = channel.stream_unary("/raftsched.v1.ExecutorService/SendLogs")()
                await call.write(bad)
                await call.done_writing()
                await call
                return await call.code(), await call.details()
        except grpc.aio.AioRpcError as exc:
            return exc.code(), exc.details() or ""

    code, details = asyncio.run(main())
    assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
    assert "cannot be decoded" in details and "UTF-8" in details, details


def test_a_failure_taking_a_heartbeat_ends_the_session_as_internal() -> None:
    """A bug in the reader's own work (here: the heartbeat's) ends the session with INTERNAL and
    a log line; before, the reader took it for a broken call and closed the session with OK."""

    async def main() -> Session:
        s = Session()

        def broken(request: pb.HeartbeatRequest) -> pb.HeartbeatReply:
            raise RuntimeError("a bug")

        s.servicer._heartbeat = broken  # type: ignore[method-assign]
        served = asyncio.ensure_future(s.run())
        s.send(opening())
        s.send(pb.SessionUp(heartbeat=heartbeat()))
        await asyncio.wait_for(served, 5)
        return s

    s = asyncio.run(main())
    assert s.context.status == grpc.StatusCode.INTERNAL, (s.context.status, s.context.details)
    assert "a bug" in s.context.details


def test_a_node_whose_stored_state_is_damaged_refuses_a_session_as_it_refuses_dispatch() -> None:
    """DamagedGuard refuses every call but status and health with UNAVAILABLE ("its executor
    streams would place work from it"); it passed a bidirectional stream through, so a damaged
    node went on serving an executor's Session."""
    damaged = ["a record does not decode"]

    async def main() -> tuple[grpc.StatusCode, str]:
        async with served(DecodeGuard(), DamagedGuard(lambda: damaged[0])) as channel:
            call = channel.stream_stream(
                "/raftsched.v1.ExecutorService/Session",
                request_serializer=pb.SessionUp.SerializeToString,
                response_deserializer=pb.SessionDown.FromString,
            )()
            # The refusal may end the call before the opening is written (the write then
            # raises with the call's status): either way the status is what is checked below.
            with contextlib.suppress(grpc.aio.AioRpcError):
                await call.write(opening())
                await call.done_writing()
            with contextlib.suppress(grpc.aio.AioRpcError):
                async for _ in call:
                    pass
            logs = channel.stream_unary(
                "/raftsched.v1.ExecutorService/SendLogs",
                request_serializer=pb.LogUpload.SerializeToString,
                response_deserializer=pb.SendLogsReply.FromString,
            )
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await logs(iter([pb.LogUpload()]))
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE  # (SendLogs, likewise)
            return await call.code(), await call.details()

    code, details = asyncio.run(main())
    assert code == grpc.StatusCode.UNAVAILABLE, (code, details)
    assert "stored state is damaged" in details, details
