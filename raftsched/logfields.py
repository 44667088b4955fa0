"""The ``extra=`` fields of log records about an attempt or a leadership change.

A JSON log line carries them as top-level keys (``execution_id``, ``run_id``, ``task``; ``term``,
``epoch``), so one attempt's records can be found across nodes and executors by its id. Pure:
building the dict is all these do. On hot paths, call them only when the level is enabled
(``log.isEnabledFor``), so a disabled record costs no dict and no formatting.
"""

from __future__ import annotations

__all__ = ["attempt_fields", "leadership_fields", "run_fields", "run_of", "task_of"]


def run_of(execution_id: str) -> str:
    """The run id in an execution id (``run_id/shard/attempt``), or ``""`` if it has no such form."""
    run_id, sep, _ = execution_id.rpartition("/")
    run_id, sep2, _ = run_id.rpartition("/")
    return run_id if sep and sep2 else ""


def task_of(run_id: str) -> str:
    """The task name in a run id (``task@nominal_ms``, optionally ``~m<seq>``), or ``""``."""
    task, sep, _ = run_id.rpartition("@")
    return task if sep else ""


def attempt_fields(execution_id: str, run_id: str = "", task: str = "", **more: object) -> dict[str, object]:
    """``execution_id``, ``run_id`` and ``task`` of one attempt (the last two taken from the id
    when not given), plus ``more`` (e.g. ``executor=``, ``attempt=``)."""
    run_id = run_id or run_of(execution_id)
    return {"execution_id": execution_id, "run_id": run_id, "task": task or task_of(run_id), **more}


def run_fields(run_id: str, shard: int, attempt: int, task: str = "", **more: object) -> dict[str, object]:
    """:func:`attempt_fields` for an attempt named by its run, shard and attempt number."""
    return attempt_fields(f"{run_id}/{shard}/{attempt}", run_id, task, attempt=attempt, **more)


def leadership_fields(term: int, epoch: int | None = None, **more: object) -> dict[str, object]:
    """``term`` (the Raft term) and ``epoch`` (the fencing epoch, which is the term the leader
    was elected in; the same number unless given), plus ``more`` (e.g. ``node=``, ``leader=``)."""
    return {"term": term, "epoch": term if epoch is None else epoch, **more}
