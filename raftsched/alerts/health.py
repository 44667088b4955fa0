"""Fleet health and clock skew, detected by the leader (issue 36 §3, §4).

Pure: the caller reads a :class:`FleetView` on the leader (the dispatcher's waiting attempts and
heartbeats, the clock watch's node offsets: :func:`fleet_view`) and the monitor returns the alert
events to propose (:func:`raftsched.leader.writes.raise_alerts`), each with a dedupe key so a
condition is reported once per episode (apply drops a key raised before):

* ``no_executor``: attempts are due and no live, undrained executor exists that could take them
  (none registered, all drained or dead), and the oldest has waited ``alerts.heartbeat_missing``
  (an executor that lost its stream, or a new leader's executors, come back within it); one event
  per task and episode (until an executor can take work again), naming the task. (A task whose declared
  cpu, memory or labels no executor offers is ``unplaceable``, raised by apply.)
* ``waiting_too_long``: an attempt has been due for longer than ``alerts.max_waiting``; one event
  per task and episode (while some attempt of it stays over the limit), naming its oldest.
* ``heartbeat_missing``: a live executor has not heartbeated this leader for
  ``alerts.heartbeat_missing`` (before its lease runs out and it is declared dead).
* ``clock_skew``: a node's clock (measured over Raft against the leader's) or an executor's (as it
  reports it) is off by more than ``alerts.max_skew``; once per episode and leadership.

An executor whose disk or execution log fills drains itself; apply raises that one
(``executor_unhealthy``, :meth:`raftsched.fsm.executors.ExecutorBook.drain`).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from raftsched.alerts.config import HealthSettings
from raftsched.clockwatch import ClockView
from raftsched.fsm.workflow_model import is_internal, split_internal
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.model import CLOCK_SKEW, HEARTBEAT_MISSING, NO_EXECUTOR, WAITING_TOO_LONG, execution_id
from raftsched.v1 import log_pb2 as pb

MAX_EVENTS_PER_CHECK = 100  # bounded work and entry size, whatever the backlog


@dataclass(frozen=True, slots=True)
class WaitingAttempt:
    """The oldest waiting attempt of one task: due since ``due_ms`` (its nominal time, or the end
    of its retry backoff)."""

    task: str
    execution_id: str
    run_id: str
    due_ms: int
    owner: str = ""
    namespace: str = ""


@dataclass(frozen=True, slots=True)
class FleetView:
    """What the leader knows of its fleet at ``now_ms`` (see :func:`fleet_view`)."""

    now_ms: int
    waiting: tuple[WaitingAttempt, ...] = ()  # per task, its oldest due attempt, oldest first
    placeable: int = 0  # live, undrained executors
    last_seen: Mapping[str, int] = field(default_factory=dict)  # live executor -> last heartbeat ms
    executor_offsets: Mapping[str, int] = field(default_factory=dict)  # executor -> clock - leader's ms
    node_offsets: Mapping[str, int] = field(default_factory=dict)  # node -> clock - leader's ms
    # executors this leader declared dead (silent, or their stream gone) -> (last heartbeat, why)
    dead: Mapping[str, tuple[int, str]] = field(default_factory=dict)


MAX_REMEMBERED = 50_000
"""Dedupe keys a leader's health monitor remembers before it forgets them all."""


class HealthMonitor:
    """One leader's fleet-health detector. Not thread-safe: one caller (the alert loop)."""

    def __init__(self, settings: HealthSettings | None = None) -> None:
        self.settings = settings or HealthSettings()
        self._proposed: set[str] = set()
        self._skewed: dict[str, int] = {}  # "node/<id>" or "executor/<name>" -> episode start ms
        self._late: dict[str, int] = {}  # task with an attempt over max_waiting -> episode start ms
        self._unplaced: dict[str, int] = {}  # task alerted no_executor -> episode start ms

    def reset(self) -> None:
        """Leadership changed: forget what this leader proposed (apply still dedupes)."""
        self._proposed.clear()
        self._skewed.clear()
        self._late.clear()
        self._unplaced.clear()

    def _new(self, dedupe: str) -> bool:
        if dedupe in self._proposed:
            return False
        self._proposed.add(dedupe)
        return True

    def check(self, fleet: FleetView) -> list[pb.AlertRecord]:
        """The events to raise for ``fleet``: at most :data:`MAX_EVENTS_PER_CHECK`; what is over
        the budget (tasks waiting, oldest first) is raised by the next checks."""
        if len(self._proposed) > MAX_REMEMBERED:
            self._proposed.clear()  # bounded: apply dedupes what is proposed again
        out = [*self._heartbeats(fleet), *self._skew(fleet)]
        return [*out, *self._waiting(fleet, MAX_EVENTS_PER_CHECK - len(out))]

    def _waiting(self, fleet: FleetView, budget: int) -> list[pb.AlertRecord]:
        out: list[pb.AlertRecord] = []
        limit = self.settings.max_waiting_ms
        # waiting_too_long is one event per task and episode (while some attempt of it stays over
        # the limit), not one per attempt: a backlog draining slowly would raise one per start.
        late = {w.task for w in fleet.waiting if fleet.now_ms - w.due_ms > limit}
        for task in [t for t in self._late if t not in late]:
            del self._late[task]
        if fleet.placeable:  # an executor can take work: the no_executor episodes are over
            self._unplaced.clear()
        grace = self.settings.heartbeat_missing_ms
        for w in fleet.waiting:
            if len(out) >= budget - 1:  # room for both events of this attempt
                break
            if w.due_ms > fleet.now_ms:
                continue
            waited_s = (fleet.now_ms - w.due_ms) / 1000
            if fleet.placeable == 0 and fleet.now_ms - w.due_ms >= grace and w.task not in self._unplaced:
                episode = self._unplaced.setdefault(w.task, fleet.now_ms)
                self._new(f"no_executor/{w.task}/{episode}")
                out.append(
                    _about(
                        w,
                        NO_EXECUTOR,
                        f"no_executor/{w.task}/{episode}",
                        f"task {w.task} has work due ({w.execution_id}, waiting {waited_s:.0f} s) and "
                        "no live executor could take it: none is registered, or every one is drained "
                        "or dead",
                    )
                )
            if w.task not in late:
                continue
            dedupe = f"waiting/{w.task}/{self._late.setdefault(w.task, fleet.now_ms)}"
            if self._new(dedupe):
                out.append(
                    _about(
                        w,
                        WAITING_TOO_LONG,
                        dedupe,
                        f"attempt {w.execution_id} of task {w.task} has waited {waited_s:.0f} s to start "
                        f"(for a slot, a pool, a quota or a lock; max_waiting {limit / 1000:g} s)",
                    )
                )
        return out

    def _heartbeats(self, fleet: FleetView) -> list[pb.AlertRecord]:
        out: list[pb.AlertRecord] = []
        limit = self.settings.heartbeat_missing_ms
        # One event per silence (keyed by its last heartbeat): while it lasts, or when the
        # leader declares it dead first (a dispatch stream that closed tells before a lease).
        for name, seen in sorted(fleet.last_seen.items()):
            silent = fleet.now_ms - seen
            dead = fleet.dead.get(name)
            if silent <= limit and dead is None:
                continue
            dedupe = f"heartbeat/{name}/{seen}"
            if not self._new(dedupe):
                continue
            if dead is not None:
                why = (
                    f"executor {name} was declared dead ({dead[1]}), {silent / 1000:.1f} s after its "
                    "last heartbeat; its running attempts are lost and retried by policy"
                )
            else:
                why = (
                    f"executor {name} has sent no heartbeat for {silent / 1000:.1f} s (heartbeat_missing "
                    f"{limit / 1000:g} s); its attempts are lost if it stays silent for a lease"
                )
            out.append(pb.AlertRecord(kind=HEARTBEAT_MISSING, dedupe=dedupe, executor=name, error=why))
        return out

    def _skew(self, fleet: FleetView) -> list[pb.AlertRecord]:
        out: list[pb.AlertRecord] = []
        limit = self.settings.max_skew_ms
        seen: set[str] = set()
        for what, offsets in (("node", fleet.node_offsets), ("executor", fleet.executor_offsets)):
            for name, offset in sorted(offsets.items()):
                if abs(offset) <= limit:
                    continue
                key = f"{what}/{name}"
                seen.add(key)
                since = self._skewed.setdefault(key, fleet.now_ms)
                dedupe = f"clock_skew/{key}/{since}"
                if not self._new(dedupe):
                    continue
                record = pb.AlertRecord(
                    kind=CLOCK_SKEW,
                    dedupe=dedupe,
                    error=f"{what} {name}'s clock is {offset / 1000:+.3f} s off the leader's "
                    f"(max_skew {limit / 1000:g} s)",
                )
                if what == "node":
                    record.node = name
                else:
                    record.executor = name
                out.append(record)
        for key in [k for k in self._skewed if k not in seen]:
            del self._skewed[key]  # back within bounds: a later episode is a new event
        return out


def _about(w: WaitingAttempt, kind: str, dedupe: str, error: str) -> pb.AlertRecord:
    return pb.AlertRecord(
        kind=kind,
        dedupe=dedupe,
        error=error,
        task=w.task,
        workflow=split_internal(w.task)[0] if is_internal(w.task) else "",
        run_id=w.run_id,
        execution_id=w.execution_id,
        owner=w.owner,
        namespace=w.namespace,
    )


def waiting_attempts(d: Dispatcher, unplaceable: AbstractSet[str]) -> tuple[WaitingAttempt, ...]:
    """Per task, its oldest due waiting attempt, oldest first, but for the tasks flagged
    ``unplaceable`` (the dispatcher's thread; one pass over the waiting attempts)."""
    oldest: dict[str, WaitingAttempt] = {}
    for w in d.waiting.values():
        r = w.ready
        if r.backfill_share:
            continue  # a backfill's attempt: due days ago and throttled to its share by design
        due = max(r.nominal_ms, r.not_before_ms)
        have = oldest.get(r.task)
        if have is not None and have.due_ms <= due:
            continue
        oldest[r.task] = WaitingAttempt(
            r.task, execution_id(r.run_id, r.shard, r.attempt), r.run_id, due, w.task_owner, w.namespace
        )
    return tuple(
        sorted(
            # A task no executor could ever run is ``unplaceable`` (raised by apply) instead.
            (w for w in oldest.values() if w.task not in unplaceable),
            key=lambda w: (w.due_ms, w.task),
        )
    )


def fleet_view(
    d: Dispatcher, now_ms: int, clock: ClockView, node_name: Mapping[str, str] | None = None
) -> FleetView:
    """The leader's :class:`FleetView`, read on the dispatcher's thread. ``clock`` is the
    leader's clock-watch view (its peers' clocks minus its own); ``node_name`` maps a peer key
    to a node id (default: the key)."""
    if not d.leading:
        return FleetView(now_ms)
    names = node_name or {}
    members = d.members
    with d.state.view() as v:
        waiting = waiting_attempts(d, v.unplaceable_tasks())
        placeable = len(v.placeable_executors())
        dead = {
            n: (d.last_seen.get(n, now_ms), v.executors[n].left_reason)
            for n in sorted(d.declared_dead)
            if n in v.executors and not v.executors[n].alive
        }
    return FleetView(
        now_ms,
        waiting,
        placeable,
        {n: seen for n, seen in d.last_seen.items() if n in members or n in dead},
        {
            n: h.clock_offset_ms
            for n, h in d.executor_health.items()
            if n in members and h.clock_offset_ms is not None
        },
        {names.get(p, p): offset for p, offset in clock.peers.items()},
        dead,
    )
