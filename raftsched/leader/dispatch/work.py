"""What the dispatcher's outbox carries to an executor's stream: a work item, or a hot row.

Most attempts a leader sends are plain: a task's run at its nominal time (run id
``task@nominal_ms``), every field of its work item taken from the task's definition (spec) and
its key, nothing from the run itself (no rendered command, params or environment). For such an
attempt the dispatcher queues a :data:`HotRow`, a plain tuple that points at its task's
:class:`WorkDef`, instead of building a ``WorkItem`` that a ``Session`` stream would only read
back into its rows (:func:`raftsched.leader.dispatch.session.encode_work` reads a row directly).
Everything else (cancels, log requests, a run with its own command, params or environment, a
manual run) stays a ``WorkItem``.

:func:`to_item` builds the row's ``WorkItem``, field for field the one the dispatcher built
before rows existed; it is called only where a work item is really needed: a ``Dispatch`` or
``DispatchBatch`` stream (an executor without a session), the re-sends a reconnect returns, and
:meth:`~raftsched.leader.dispatch.dispatcher.Dispatcher.take_outbox` (tests, the simulation).
So what an executor receives is the same, byte for byte, on either stream.
"""

from __future__ import annotations

from typing import Any

from raftsched.v1 import raftsched_pb2 as pb

# A definition key: (task, version, shards, command, handler, params_json, timeout_ms, runner);
# what a Session stream sends once per stream (raftsched.leader.dispatch.session).
DefKey = tuple[str, int, int, str, str, str, int, str]


class WorkDef:
    """The part of a work item its task's definition (one version of its spec) decides, built
    once per task version (the dispatcher keeps the current version's) and shared by every row
    of it: never to be changed."""

    __slots__ = ("fields", "key", "task", "timeout_ms", "version")

    def __init__(self, task: str, version: int, fields: dict[str, Any]) -> None:
        self.task = task
        self.version = version
        # The work item's fields from the spec, those not at their default (constructor kwargs).
        self.fields = fields
        # The spec's timeout (0: none), what a lease's deadline is computed from.
        self.timeout_ms: int = fields.get("timeout_ms", 0)
        self.key: DefKey = (
            task,
            version,
            fields.get("shards", 0),
            fields.get("command", ""),
            fields.get("handler", ""),
            fields.get("params_json", ""),
            self.timeout_ms,
            fields.get("runner", ""),
        )


# (execution id, run id, nominal ms, shard, attempt, epoch, its WorkDef); the run id is always
# ``task@nominal_ms`` and the execution id ``run_id/shard/attempt`` (the dispatcher builds a row
# only then). A tuple: the cheapest value Python builds, told apart from a WorkItem by its type.
HotRow = tuple[str, str, int, int, int, int, WorkDef]
Work = pb.WorkItem | HotRow


def to_item(row: HotRow) -> pb.WorkItem:
    """The work item ``row`` stands for (the dispatcher's, before rows: the same fields)."""
    exec_id, run_id, nominal_ms, shard, attempt, epoch, wdef = row
    return pb.WorkItem(
        execution_id=exec_id,
        run_id=run_id,
        task=wdef.task,
        nominal_ms=nominal_ms,
        shard=shard,
        attempt=attempt,
        epoch=epoch,
        task_version=wdef.version,  # the executor parses params once per task version
        **wdef.fields,  # the spec's: shards, command, handler, params, timeout, runner
    )


def key_fields(key: DefKey) -> dict[str, Any]:
    """The fields ``key`` decides besides the task and its version (``SessionTaskDef`` and
    ``WorkItem`` name them alike): shards, command, handler, params, timeout, runner."""
    return {
        "shards": key[2],
        "command": key[3],
        "handler": key[4],
        "params_json": key[5],
        "timeout_ms": key[6],
        "runner": key[7],
    }


def work_items(work: list[Work]) -> list[pb.WorkItem]:
    """``work`` as work items, in order."""
    return [to_item(w) if isinstance(w, tuple) else w for w in work]
