"""A probe of pysyncobj's tick thread, per part, in every process of a benchmark's cluster.

    PYTHONPATH=bench/raft_probe:$PWD RAFT_PROBE=/tmp/probe python -m bench.executors ... > /tmp/probe.out
    python -m bench.raft_probe.report /tmp/probe

Python imports this ``sitecustomize`` at start-up in every process whose ``PYTHONPATH`` leads
with this directory, so the nodes a benchmark spawns carry it too. With ``RAFT_PROBE`` set, it
wraps pysyncobj's ``SyncObj._onTick``, ``__sendAppendEntries``, ``_checkCommandsToApply``,
``__applyLogEntries``, ``__tryLogCompaction``, the poller's ``poll`` and ``TcpConnection.send``
(the latter re-implemented as pysyncobj 0.3.17 has it, timing its pickle, zlib, Fernet and write
steps), counting thread CPU time (``time.thread_time``, the tick thread's own), and every 2 s
appends the running totals as a JSON line to ``$RAFT_PROBE.<pid>.jsonl``. The wrappers cost a few
µs per call: compare runs that all carry the probe. Used for stage 4 of issue 31
(docs/dev/performance-history.md, "Stage 4: the Raft thread and the leader's apply").
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

if os.environ.get("RAFT_PROBE"):
    import pysyncobj.poller as _poller
    import pysyncobj.syncobj as _syncobj
    import pysyncobj.tcp_connection as _tcp

    S: dict[str, float] = dict.fromkeys(
        [
            "send_n",
            "send_bytes_pickled",
            "send_bytes_z",
            "t_pickle",
            "t_zlib",
            "t_enc",
            "t_write",
            "ae_n",
            "ae_entries",
            "ae_entry_bytes",
            "tick_n",
            "t_tick",
            "t_poll",
            "t_sendae",
            "t_check",
            "t_apply",
            "t_compact",
        ],
        0.0,
    )
    _clock = time.thread_time

    def _send(self: Any, message: Any) -> None:
        t0 = _clock()
        if isinstance(message, dict) and message.get("type") == "append_entries":
            entries = message.get("entries") or ()
            S["ae_n"] += 1
            S["ae_entries"] += len(entries)
            S["ae_entry_bytes"] += sum(len(e[0]) for e in entries)
        if self.sendRandKey:
            message = (self.sendRandKey, message)
        pickled = pickle.dumps(message)
        t1 = _clock()
        data = zlib.compress(pickled, 3)
        t2 = _clock()
        if self.encryptor:
            data = self.encryptor.encrypt_at_time(data, int(time.monotonic()))
        t3 = _clock()
        self._TcpConnection__writeBuffer += struct.pack("i", len(data)) + data
        self._TcpConnection__trySendBuffer()
        t4 = _clock()
        S["send_n"] += 1
        S["send_bytes_pickled"] += len(pickled)
        S["send_bytes_z"] += len(data)
        S["t_pickle"] += t1 - t0
        S["t_zlib"] += t2 - t1
        S["t_enc"] += t3 - t2
        S["t_write"] += t4 - t3

    _tcp.TcpConnection.send = _send

    def _timed(cls: Any, name: str, key: str, count: str | None = None) -> None:
        original: Callable[..., Any] = getattr(cls, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if count is not None:
                S[count] += 1
            t0 = _clock()
            try:
                return original(*args, **kwargs)
            finally:
                S[key] += _clock() - t0

        setattr(cls, name, wrapper)

    _timed(_syncobj.SyncObj, "_onTick", "t_tick", "tick_n")
    _timed(_syncobj.SyncObj, "_SyncObj__sendAppendEntries", "t_sendae")
    _timed(_syncobj.SyncObj, "_checkCommandsToApply", "t_check")
    _timed(_syncobj.SyncObj, "_SyncObj__applyLogEntries", "t_apply")
    _timed(_syncobj.SyncObj, "_SyncObj__tryLogCompaction", "t_compact")
    _timed(_poller.PollPoller, "poll", "t_poll")
    _timed(_poller.SelectPoller, "poll", "t_poll")

    def _dump() -> None:
        path = f"{os.environ['RAFT_PROBE']}.{os.getpid()}.jsonl"
        while True:
            time.sleep(2)
            with open(path, "a") as f:
                f.write(json.dumps({**S, "wall": time.time(), "cpu": time.process_time()}) + "\n")

    threading.Thread(target=_dump, name="raft-probe", daemon=True).start()
