"""The ``Logs`` gRPC service: an attempt's full stdout or stderr, live or after the fact.

Served by the leader only: executors keep their one connection to the leader, so only the leader
can reach them; a follower answers ``FAILED_PRECONDITION`` with the leader's address (trailing
metadata ``raftsched-leader``) and the SDK follows it, as for every other read. The caller needs
``tasks.read`` (the authorization table) and the run's namespace, as for ``GetRun``: a run the
caller may not see does not exist for it.

The answer is a header, the bytes in order, an end (``ReadLogsChunk``). When the executor that ran
the attempt is not connected to the leader, does not answer log requests, does not answer in
time or has no file any more (its retention deleted it), the header says so (``source =
"stored_tail"``, ``note``) and the data is the 8 KiB tail stored with the run. How the bytes get
here: :mod:`raftsched.leader.dispatch.logrelay`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Final

import grpc

from raftsched import bounds
from raftsched.errors import NotFound, RaftschedError, Unavailable, quote
from raftsched.leader.dispatch.hub import ExecutorHub
from raftsched.leader.dispatch.logrelay import MAX_READERS
from raftsched.rpc.plumbing import NodeServices, abort
from raftsched.security import authz
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

ANSWER_TIMEOUT_S: Final = 10.0
"""How long the leader waits for an executor to begin its answer before showing the stored tail."""


class LogsServicer(pb_grpc.LogsServicer):  # type: ignore[misc]
    def __init__(self, node: NodeServices, hub: ExecutorHub) -> None:
        self.node = node
        self.hub = hub

    async def ReadLogs(
        self, request: pb.ReadLogsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ReadLogsChunk]:
        try:
            bounds.check(request)
            self.hub.require_leader()
            shard, attempt, executor = self._attempt(request)
            if self.hub.logs.busy():
                raise Unavailable(f"this leader relays {MAX_READERS} log reads already; try again shortly")
        except RaftschedError as exc:
            await abort(context, exc)
        execution_id = f"{request.run_id}/{request.shard}/{attempt}"
        stream = "stderr" if request.stderr else "stdout"
        stored = shard.stderr_tail if request.stderr else shard.stdout_tail
        if attempt != shard.attempt:
            stored = ""  # the stored tails are the latest attempt's
        relay = self.hub.logs
        ask = pb.LogRequest(
            execution_id=execution_id,
            stderr=request.stderr,
            follow=request.follow,
            since_line=request.since_line,
            tail_bytes=request.tail_bytes,
        )
        pending = relay.open(executor, ask) if executor else None
        if pending is None:
            if not executor:
                why = f"attempt {execution_id} was never assigned to an executor"
            elif executor in self.hub.streams:
                why = (
                    f"executor {quote(executor)} is connected but does not serve full logs (an older version)"
                )
            else:
                why = f"executor {quote(executor)} is gone (not connected to the leader)"
            for chunk in _tail_answer(execution_id, executor, why, stored, stream):
                yield chunk
            return
        # gRPC may tell a handler blocked on the queue that its caller hung up only when it next
        # writes: a followed attempt that prints nothing would hold the upload open until it
        # ends. The call's end closes the request at once instead (the executor stops).
        context.add_done_callback(lambda _: relay.done(pending))
        try:
            try:
                first = await asyncio.wait_for(pending.queue.get(), ANSWER_TIMEOUT_S)
            except TimeoutError:
                first = None
            if first is None or not first.HasField("header") or not first.header.found:
                why = (
                    first.header.problem
                    if first is not None and first.HasField("header") and first.header.problem
                    else f"executor {quote(executor)} did not answer within {ANSWER_TIMEOUT_S:g} s"
                )
                for chunk in _tail_answer(execution_id, executor, why, stored, stream):
                    yield chunk
                return
            yield pb.ReadLogsChunk(
                header=pb.LogsHeader(
                    execution_id=execution_id,
                    executor=executor,
                    source="executor",
                    running=first.header.running,
                )
            )
            while True:
                part = await pending.queue.get()
                if part is None:  # the upload ended without an end: the executor went away
                    yield pb.ReadLogsChunk(end=pb.LogEnd(complete=False))
                    return
                if part.HasField("data"):
                    yield pb.ReadLogsChunk(data=part.data)
                elif part.HasField("end"):
                    yield pb.ReadLogsChunk(end=part.end)
                    return
        finally:
            relay.done(pending)

    def _attempt(self, request: pb.ReadLogsRequest) -> tuple[pb.ShardAttempt, int, str]:
        """The shard record, the attempt number asked for and the executor that ran it."""
        node = self.node
        run = None
        if "@" in request.run_id:
            try:  # (a live run of the columnar hot path has no stored record yet: read_run)
                run = node.state.read_run(request.run_id)
            except ValueError:
                run = None
        if run is None or not authz.visible(node.state.task_namespace(run.task)):
            raise NotFound(f"run {request.run_id!r} does not exist (or its history was pruned)")
        shard = next((s for s in run.shards if s.shard == request.shard), None)
        if shard is None:
            raise NotFound(f"run {request.run_id!r} has no shard {request.shard} (it has {len(run.shards)})")
        attempt = request.attempt or shard.attempt
        if attempt == 0 or attempt > shard.attempt:
            raise NotFound(
                f"shard {request.shard} of run {request.run_id!r} has no attempt {attempt} "
                f"(latest: {shard.attempt or 'none yet'})"
            )
        executor = shard.executor if attempt == shard.attempt else ""
        if not executor or attempt != shard.attempt:
            for entry in reversed(run.timeline):
                if entry.shard == request.shard and entry.attempt == attempt and entry.executor:
                    executor = entry.executor
                    break
        return shard, attempt, executor


def _tail_answer(
    execution_id: str, executor: str, why: str, stored: str, stream: str
) -> list[pb.ReadLogsChunk]:
    note = f"{why}; the full log is not available. Showing the stored tail of {stream} (at most 8 KiB)."
    if not stored:
        note = f"{why}; the full log is not available, and no tail of {stream} is stored for this attempt."
    out = [
        pb.ReadLogsChunk(
            header=pb.LogsHeader(
                execution_id=execution_id, executor=executor, source="stored_tail", note=note
            )
        )
    ]
    data = stored.encode("utf-8")
    if data:
        out.append(pb.ReadLogsChunk(data=data))
    out.append(pb.ReadLogsChunk(end=pb.LogEnd(bytes=len(data), complete=False)))
    return out
