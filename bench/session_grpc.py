"""PROTOTYPE (issue 31, gate 2): per-attempt CPU of the executor protocol over gRPC on loopback,
the batched Session shape against today's shape, each side in its own process.

    python -m bench.session_grpc [--attempts 20000] [--burst 20] [--shape session|session-echo|unary]

A leader stub (a subprocess, grpc.aio, generic handlers: no service in protos/) sends
``--attempts`` no-op attempts in messages of ``--burst``, as fast as gRPC's flow control lets it,
and acknowledges results; the executor side is this process. Shapes:

* ``session``: one bidirectional stream; down WorkColumns (packed columns, the task definition
  once, ``acked_through`` piggybacked), up ReportBatch (columns); the executor side is the
  prototype :class:`bench.batched_executor.BatchedExecutor` (execution log in LMDB, eager async
  no-op handler, reports every 10 ms or 500 results);
* ``session-echo``: the same stream, the executor side answering each result at once with no
  handler and no execution log (the transport and codecs alone);
* ``unary``: today's wire shape: a server stream of ``WorkBatch`` (one ``WorkItem`` per attempt,
  the fields the dispatcher sets) and a unary ``Report`` (one ``ExecResult`` per attempt, at
  most 500, one call in flight, the reply listing the acknowledged ids); the executor side echoes
  (no handler, no log), like ``session-echo``. The leader stub builds each WorkItem and each
  acknowledgement list, which the real dispatcher does too; it proposes nothing.

Neither side heartbeats. Prints each side's CPU time per attempt from the stream's opening to
the last acknowledgement: ``executor_cpu_us_per_attempt`` and ``leader_cpu_us_per_attempt``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc

from bench.batched_executor import BatchContext, BatchedExecutor
from bench.common import Provenance
from bench.executor_hotpath import work_messages
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.v1 import execbatch_pb2 as eb
from raftsched.v1 import raftsched_pb2 as pb

SERVICE = "raftsched.bench.ProtoSession"
REPORT_EVERY_S = 0.01
REPORT_MAX = 500


# -- the leader stub (subprocess) ------------------------------------------------------------------


class _Leader:
    def __init__(self, attempts: int, burst: int) -> None:
        self.attempts = attempts
        self.burst = burst
        self.c0 = 0.0
        self.reported = 0
        self.done = asyncio.Event()

    def finish(self) -> None:
        cpu = time.process_time() - self.c0
        print(json.dumps({"leader_cpu_s": cpu}), flush=True)
        self.done.set()

    async def session(self, requests: AsyncIterator[bytes], context: Any) -> None:
        self.c0 = time.process_time()
        msgs = [eb.WorkColumns.FromString(m) for m in work_messages(self.attempts, self.burst)]
        rows = 0
        last = 0
        acked_sent = 0
        got = asyncio.Event()
        all_in = asyncio.Event()

        async def reader() -> None:
            nonlocal rows, last
            async for data in requests:
                rb = eb.ReportBatch.FromString(data)
                rows += len(rb.seq)  # the leader would check each seq's lease and forward the columns
                last = rb.report_id
                got.set()
                if rows >= self.attempts:
                    all_in.set()

        read = asyncio.ensure_future(reader())
        for msg in msgs:
            msg.acked_through = acked_sent = last
            await context.write(msg.SerializeToString())
        while acked_sent < last or not all_in.is_set():
            await got.wait()
            got.clear()
            if last > acked_sent:
                acked_sent = last
                await context.write(eb.WorkColumns(epoch=1, acked_through=last).SerializeToString())
        self.finish()
        await read

    async def dispatch(self, request: bytes, context: Any) -> AsyncIterator[bytes]:
        self.c0 = time.process_time()
        for k in range(0, self.attempts, self.burst):
            items = []
            for i in range(k, min(k + self.burst, self.attempts)):
                run_id = f"t@{1000 + i}"
                items.append(
                    pb.WorkItem(
                        execution_id=f"{run_id}/0/1",
                        run_id=run_id,
                        task="t",
                        nominal_ms=1000 + i,
                        shard=0,
                        attempt=1,
                        epoch=1,
                        shards=1,
                        handler="noop",
                    )
                )
            yield pb.WorkBatch(items=items).SerializeToString()
        await self.done.wait()

    async def report(self, request: bytes, context: Any) -> bytes:
        req = pb.ReportRequest.FromString(request)
        reply = pb.ReportReply(acknowledged=[r.execution_id for r in req.results])
        self.reported += len(req.results)
        if self.reported >= self.attempts:
            asyncio.get_running_loop().call_soon(self.finish)
        return reply.SerializeToString()


async def serve(attempts: int, burst: int) -> None:
    leader = _Leader(attempts, burst)
    server = grpc.aio.server()
    handlers = {
        "Session": grpc.stream_stream_rpc_method_handler(leader.session),
        "Dispatch": grpc.unary_stream_rpc_method_handler(leader.dispatch),
        "Report": grpc.unary_unary_rpc_method_handler(leader.report),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(json.dumps({"port": port}), flush=True)
    await leader.done.wait()
    await asyncio.sleep(0.2)  # let the last replies leave
    await server.stop(None)


# -- the executor side (this process) --------------------------------------------------------------


async def _session_executor(channel: grpc.aio.Channel, attempts: int, data_dir: Path | None) -> float:
    call = channel.stream_stream(f"/{SERVICE}/Session")()
    out: asyncio.Queue[bytes] = asyncio.Queue()

    async def writer() -> None:
        while True:
            await call.write(await out.get())

    c0 = time.process_time()
    write = asyncio.ensure_future(writer())
    try:
        if data_dir is not None:
            log = LmdbExecutionLog(data_dir, sync=False)
            try:

                async def noop(ctx: BatchContext) -> None:
                    pass

                ex = BatchedExecutor(log, {"noop": noop}, lambda _rid, data: out.put_nowait(data))
                ex.recover()
                while ex.acknowledged < attempts:
                    data = await call.read()
                    if data is grpc.aio.EOF:
                        raise RuntimeError(f"stream ended with {ex.acknowledged} of {attempts} acknowledged")
                    ex.on_work(data)
                c1 = time.process_time()
            finally:
                log.close()
        else:
            c1 = await _echo(call, out, attempts)
    finally:
        write.cancel()
    await call.done_writing()
    return c1 - c0


async def _echo(call: Any, out: asyncio.Queue[bytes], attempts: int) -> float:
    """Answer every attempt as succeeded, reports every 10 ms or 500 rows, no log, no handler."""
    rows_of: dict[int, int] = {}
    acked = 0
    pending = eb.ReportBatch()
    next_id = 1
    loop = asyncio.get_running_loop()
    timer: asyncio.TimerHandle | None = None

    def flush() -> None:
        nonlocal pending, next_id, timer
        if timer is not None:
            timer.cancel()
            timer = None
        if not pending.seq:
            return
        pending.report_id = next_id
        pending.status = b"\x01" * len(pending.seq)
        rows_of[next_id] = len(pending.seq)
        next_id += 1
        out.put_nowait(pending.SerializeToString())
        pending = eb.ReportBatch()

    while acked < attempts:
        data = await call.read()
        if data is grpc.aio.EOF:
            raise RuntimeError("stream ended early")
        msg = eb.WorkColumns.FromString(data)
        for rid in [r for r in rows_of if r <= msg.acked_through]:
            acked += rows_of.pop(rid)
        if msg.seq:
            n = len(msg.seq)
            pending.seq.extend(msg.seq)
            pending.shard.extend(msg.shard)
            pending.attempt.extend(msg.attempt)
            pending.duration_ms.extend([0] * n)
            pending.start_lateness_ms.extend([0] * n)
            if len(pending.seq) >= REPORT_MAX:
                flush()
            elif timer is None:
                timer = loop.call_later(REPORT_EVERY_S, flush)
    return time.process_time()


async def _unary_executor(channel: grpc.aio.Channel, attempts: int) -> float:
    stream = channel.unary_stream(f"/{SERVICE}/Dispatch")(pb.DispatchRequest(name="e").SerializeToString())
    report = channel.unary_unary(f"/{SERVICE}/Report")
    pending: list[pb.ExecResult] = []
    wake = asyncio.Event()
    acked = 0
    c0 = time.process_time()

    async def reporter() -> None:
        nonlocal pending, acked
        while acked < attempts:
            if not pending:
                wake.clear()
                await wake.wait()
                continue
            batch, pending = pending[:REPORT_MAX], pending[REPORT_MAX:]
            data = await report(pb.ReportRequest(name="e", results=batch).SerializeToString())
            reply = pb.ReportReply.FromString(data)
            acked += len(set(reply.acknowledged))

    rep = asyncio.ensure_future(reporter())
    received = 0
    async for data in stream:
        wb = pb.WorkBatch.FromString(data)
        for item in wb.items:
            pending.append(pb.ExecResult(execution_id=item.execution_id, success=True, start_lateness_ms=0))
        received += len(wb.items)
        wake.set()
        if received >= attempts:
            break
    await rep
    c1 = time.process_time()
    stream.cancel()
    return c1 - c0


def run(attempts: int, burst: int, shape: str, data_dir: Path) -> dict[str, object]:
    root = Path(__file__).resolve().parents[1]  # this checkout: the stub runs the same code
    paths = [str(root), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.session_grpc",
            "--serve",
            "--attempts",
            str(attempts),
            "--burst",
            str(burst),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=root,
        env=env,
    )
    try:
        assert server.stdout is not None
        port = json.loads(server.stdout.readline())["port"]

        async def client() -> float:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                if shape == "unary":
                    return await _unary_executor(channel, attempts)
                return await _session_executor(channel, attempts, data_dir if shape == "session" else None)

        executor_cpu = asyncio.run(client())
        leader_cpu = json.loads(server.stdout.readline())["leader_cpu_s"]
        server.wait(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return {
        "attempts": attempts,
        "burst": burst,
        "shape": shape,
        "executor_cpu_us_per_attempt": round(executor_cpu / attempts * 1e6, 2),
        "leader_cpu_us_per_attempt": round(leader_cpu / attempts * 1e6, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attempts", type=int, default=20_000)
    ap.add_argument("--burst", type=int, default=20)
    ap.add_argument("--shape", choices=["session", "session-echo", "unary"], default="session")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", type=Path, help="also write the result here")
    args = ap.parse_args()
    if args.serve:
        asyncio.run(serve(args.attempts, args.burst))
        return 0
    provenance = Provenance.start()
    with tempfile.TemporaryDirectory(prefix="raftsched-session-grpc-") as tmp:
        result = run(args.attempts, args.burst, args.shape, Path(tmp))
    provenance.emit(result, args.json, indent=None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
