"""The leader's side of an executor's ``Session`` stream (issue 31 P2; docs/dev/batched-executor.md).

The dispatcher decides exactly as for a ``DispatchBatch`` stream: it queues work in its outbox
(work items, and hot rows that stand for one: :mod:`raftsched.leader.dispatch.work`) and the
hub puts each flush's list in the executor's sink. A :class:`SessionSink` is that sink for an
executor with a session (an ``asyncio.Queue`` of lists, like the dispatch stream's, so the hub
and the dispatcher need not know which one an executor has). What differs is the encoding on
the wire, done here once per message by :func:`encode_work`:

* a *row* (five packed columns: task ref, nominal time, shard, attempt) per work item whose
  every field follows from its task definition and its key: the execution id and run id are
  ``run_id_for(task, nominal)`` and ``run_id/shard/attempt``, no env, no cancel, no log
  request. The definition (task, version and the six fields a work item copies from the spec)
  goes once per stream, the first time a row uses it. The dispatcher's hot rows are such
  attempts already (read as they are: no work item is built for them); a work item is checked;
* a *cold* ``WorkItem``, unchanged, for everything else (cancels, log requests, workflow tasks'
  rendered command, params or env, manual runs).

The executor rebuilds the same work item from a row, so nothing the executor sees changes.
Results come back as :func:`report_rows` (the rows of a ``SessionReport``), which enter the
dispatcher through :meth:`~raftsched.leader.dispatch.dispatcher.Dispatcher.results_columns`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from raftsched import bounds
from raftsched.errors import InvalidSpec, quote
from raftsched.leader.dispatch.work import DefKey, Work, key_fields, to_item
from raftsched.v1 import raftsched_pb2 as pb

SESSION_VERSION = 1
"""The Session stream version this build serves and speaks (``RegisterReply.session_version``)."""

MAX_SESSION_DEFS = 65_536
"""Definitions a stream remembers (a key per task version and work fields, ≈ 0.2 KB here and
≈ 0.5 KB on the executor each). A message that begins with this many forgets them all: refs
start at 1 again and each is defined anew in the message before a row uses it, which an
executor of any session version takes as it is (a definition replaces the one its ref had; a
message's definitions are read before its rows, and a ref is never used again until it is
defined again). A long-lived stream of a cluster with many tasks, or tasks updated often, so
stays bounded instead of growing with every version ever dispatched."""


class SessionSink(asyncio.Queue[list[Work]]):
    """An executor's session, as the hub sees its dispatch stream (``put_nowait`` of one list per
    flush; the hub's ``CLOSE`` ends it), plus what the stream has sent so far: the definitions
    (key -> ref) and the report ids acknowledged."""

    def __init__(self) -> None:
        super().__init__()
        self.defs: dict[DefKey, int] = {}
        self.acked_through = 0  # every report up to this id is committed (sent with the next work)
        self.ack_sent = 0
        self.replied = asyncio.Event()  # set when the writer has sent the heartbeat answers it had


def encode_work(items: Sequence[Work], defs: dict[DefKey, int], epoch: int) -> pb.SessionWork:
    """One ``SessionWork`` for ``items`` (see the module docstring); ``defs`` is the stream's
    definitions so far, extended with those this message sends. A hot row and the work item
    it stands for (:func:`~raftsched.leader.dispatch.work.to_item`) encode alike."""
    out = pb.SessionWork(epoch=epoch)
    if len(defs) >= MAX_SESSION_DEFS:
        defs.clear()  # (between messages only: see MAX_SESSION_DEFS)
    refs: list[int] = []
    nominals: list[int] = []
    shards: list[int] = []
    attempts: list[int] = []
    cold: list[pb.WorkItem] = []
    # A cancel of an attempt a row earlier in the message dispatches: that row goes as its cold
    # work item just before the cancel. An executor reads a message's cold items before its
    # rows: the cancel would find nothing to stop, then the row would start a cancelled attempt.
    rows_by_id: _RowIndex | None = None
    moved = False
    for item in items:
        if isinstance(item, tuple):  # a hot row (raftsched.leader.dispatch.work.HotRow)
            _, _, nominal, shard, attempt, row_epoch, wdef = item
            if row_epoch != epoch:
                cold.append(to_item(item))
                continue
            key = wdef.key
        else:
            task = item.task
            nominal = item.nominal_ms
            shard = item.shard
            attempt = item.attempt
            if (
                item.cancel
                or item.env
                or item.epoch != epoch
                or item.HasField("log_request")
                or item.execution_id != f"{task}@{nominal}/{shard}/{attempt}"
            ):
                if item.cancel and refs:
                    if rows_by_id is None:
                        rows_by_id = _RowIndex()
                    row = rows_by_id.take(item.execution_id, refs, nominals, shards, attempts, defs, epoch)
                    if row is not None:
                        cold.append(row)
                        moved = True
                cold.append(item)
                continue
            key = (
                task,
                item.task_version,
                item.shards,
                item.command,
                item.handler,
                item.params_json,
                item.timeout_ms,
                item.runner,
            )
        ref = defs.get(key)
        if ref is None:
            ref = defs[key] = len(defs) + 1
            out.defs.add(ref=ref, task=key[0], version=key[1], **key_fields(key))
        refs.append(ref)
        nominals.append(nominal)
        shards.append(shard)
        attempts.append(attempt)
    if moved:  # (a ref is never 0: refs start at 1)
        keep = [j for j, ref in enumerate(refs) if ref]
        refs, nominals = [refs[j] for j in keep], [nominals[j] for j in keep]
        shards, attempts = [shards[j] for j in keep], [attempts[j] for j in keep]
    if refs:
        out.task_ref.extend(refs)
        out.nominal_ms.extend(nominals)
        out.shard.extend(shards)
        out.attempt.extend(attempts)
    if cold:
        out.cold.extend(cold)
    return out


class _RowIndex:
    """The rows of one message by execution id, built at its first cancel (see
    :func:`encode_work`) and extended with the rows added since at each later one: a cancel
    is rare, a row is not, so rows are looked at only when a message has a cancel."""

    __slots__ = ("by_id", "indexed", "keys")

    def __init__(self) -> None:
        self.by_id: dict[str, int] = {}
        self.indexed = 0  # rows indexed so far
        self.keys: dict[int, DefKey] = {}  # ref -> definition key

    def take(
        self,
        exec_id: str,
        refs: list[int],
        nominals: list[int],
        shards: list[int],
        attempts: list[int],
        defs: dict[DefKey, int],
        epoch: int,
    ) -> pb.WorkItem | None:
        """The cold work item of the row that dispatches ``exec_id`` in this message (no longer
        to be sent as a row), or None if there is none."""
        if len(self.keys) != len(defs):
            self.keys = {ref: key for key, ref in defs.items()}
        keys, by_id = self.keys, self.by_id
        for j in range(self.indexed, len(refs)):
            by_id[f"{keys[refs[j]][0]}@{nominals[j]}/{shards[j]}/{attempts[j]}"] = j
        self.indexed = len(refs)
        j = by_id.pop(exec_id, -1)
        if j < 0:
            return None
        key, nominal = keys[refs[j]], nominals[j]
        refs[j] = 0  # (dropped from the columns once the message is done)
        return pb.WorkItem(
            execution_id=exec_id,
            run_id=f"{key[0]}@{nominal}",
            task=key[0],
            nominal_ms=nominal,
            shard=shards[j],
            attempt=attempts[j],
            epoch=epoch,
            task_version=key[1],
            **key_fields(key),
        )


def report_rows(report: pb.SessionReport) -> list[tuple[str, int, int]]:
    """``(run id, shard, attempt)`` of each row of ``report``, or :class:`InvalidSpec` naming the
    first bad one (a column whose length differs from the ids', an id that is not
    ``run_id/shard/attempt`` with both in range, a value outside its :mod:`raftsched.bounds`
    range). Nothing of a bad report is used."""
    ids = report.execution_id
    n = len(ids)
    if len(report.duration_ms) != n or len(report.start_lateness_ms) != n:
        raise InvalidSpec(
            "report",
            f"{n} execution ids but {len(report.duration_ms)} durations and "
            f"{len(report.start_lateness_ms)} start latenesses (one each per row)",
        )
    bounds.check(report)  # every column's values and the cold results' (min/max per column: cheap)
    out: list[tuple[str, int, int]] = []
    for i, exec_id in enumerate(ids):
        out.append(check_execution_id(f"report.execution_id[{i}]", exec_id))
    return out


def check_execution_id(where: str, exec_id: str) -> tuple[str, int, int]:
    """``(run id, shard, attempt)`` of a reported id; refuse one that is not
    ``run_id/shard/attempt`` with shard and attempt in their ranges (:mod:`raftsched.bounds`)."""
    run_id, _, rest = exec_id.partition("/")
    shard, _, attempt = rest.partition("/")
    if (
        run_id
        and shard.isascii()
        and shard.isdigit()
        and attempt.isascii()
        and attempt.isdigit()
        and len(shard) <= 20
        and len(attempt) <= 20
    ):
        shard_no, attempt_no = int(shard), int(attempt)
        if shard_no <= bounds.SHARD.high and attempt_no <= bounds.ATTEMPT.high:
            return run_id, shard_no, attempt_no
    raise InvalidSpec(
        where,
        f"{quote(exec_id)} is not run_id/shard/attempt "
        f"(shard {bounds.SHARD.text()}, attempt {bounds.ATTEMPT.text()})",
    )
