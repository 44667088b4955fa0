"""The event book: accepted events (``ev/<name>\\x00<key>``) and their dedupe window (issue 28 §3).

An ``EmitEvent`` command is accepted once per distinct ``(name, key)`` within the dedupe window
(``Retention.event_dedupe_ms``, leader time): the first acceptance is stored with the leader
time and a replicated sequence number, and a later emit of the same pair inside the window is
answered with that first record (``CommandResult.duplicate``) and changes nothing. Apply starts
the runs an event triggers from here (so exactly once, across failovers: the runs are part of
the command that accepted the event, not of anything the leader does after).

Memory stays bounded by the window: records live in the store only, with an expiry index
(``evx/<accepted:016x>/...``); every emit deletes a few records whose window has passed
(``Retention.prune_step`` + 1, so pruning outpaces acceptance), and a record found expired when
its pair is emitted again is replaced.

Pure (part of the core): no clock, no IO but the host's store, deterministic.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final, Protocol

from raftsched.abc import StateStore, StoreReader
from raftsched.errors import InvalidSpec
from raftsched.fsm import keys
from raftsched.fsm.effects import Effect
from raftsched.fsm.records import Retention, TaskState
from raftsched.fsm.rules import Reject
from raftsched.model import MAX_TIME_MS, validate_name
from raftsched.v1 import log_pb2 as pb

if TYPE_CHECKING:
    from raftsched.fsm.runs import RunBook
    from raftsched.fsm.workflows import WorkflowBook

__all__ = [
    "MAX_EVENT_KEY",
    "MAX_EVENT_PAYLOAD",
    "EventBook",
    "EventHost",
    "check_event",
    "list_events",
    "logical_from_key",
]

MAX_EVENT_PAYLOAD: Final = 64 * 1024
"""Largest accepted event payload, in bytes of UTF-8 JSON."""
MAX_EVENT_KEY: Final = 256
"""Longest dedupe key, in characters."""


def check_event(name: str, key: str, payload_json: str, where: str = "") -> None:
    """Refuse a bad event (InvalidSpec naming the field): a name that is not a valid name, a key
    over :data:`MAX_EVENT_KEY` characters or holding a NUL, a payload over 64 KiB or that is not a
    JSON object. The leader checks before it proposes; apply checks again (a value, never trust a
    log entry)."""
    validate_name(name, where + "name")
    if len(key) > MAX_EVENT_KEY:
        raise InvalidSpec(where + "key", f"{len(key):,} characters, at most {MAX_EVENT_KEY} allowed")
    if "\x00" in key:
        raise InvalidSpec(where + "key", "must not contain a NUL character")
    size = len(payload_json.encode("utf-8", "surrogatepass"))
    if size > MAX_EVENT_PAYLOAD:
        raise InvalidSpec(
            where + "payload",
            f"{size:,} bytes, at most {MAX_EVENT_PAYLOAD:,} (64 KiB) allowed; "
            "send a reference to the data, not the data",
        )
    if payload_json:
        try:
            value = json.loads(payload_json)
        except ValueError as exc:
            raise InvalidSpec(where + "payload", f"not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise InvalidSpec(where + "payload", f"must be a JSON object, got {type(value).__name__}")


_ISO_KEY: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?([Zz]|[+-]\d{2}:\d{2})?)?"
)
_EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def logical_from_key(key: str, accepted_ms: int) -> int:
    """The logical time of a run an event starts: its key when the key is an ISO 8601 date
    (``2026-12-04``, midnight UTC) or date and time (``2026-12-04T02:00:00Z``, an offset, or
    none: UTC), inside the time range; else the event's accept time. Pure (no zone database)."""
    # An explicit grammar, not datetime.fromisoformat: what that accepts differs between Python
    # versions, and replicas on two versions must agree on every run's logical time.
    m = _ISO_KEY.fullmatch(key.strip())
    if m is None:
        return accepted_ms
    year, month, day, hour, minute, second, frac, zone = m.groups()
    try:
        moment = _dt.datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            tzinfo=_dt.UTC,
        )
    except ValueError:
        return accepted_ms
    ms = (moment - _EPOCH) // _dt.timedelta(milliseconds=1) + int((frac or "").ljust(3, "0")[:3] or 0)
    if zone and zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        ms -= sign * (int(zone[1:3]) * 60 + int(zone[4:6])) * 60_000
    return ms if 0 <= ms <= MAX_TIME_MS else accepted_ms


def key_for_logical(logical_ms: int) -> str:
    """The key a data trigger emits for a run of logical time ``logical_ms`` (ISO 8601 UTC)."""
    moment = _dt.datetime.fromtimestamp(logical_ms // 1000, _dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class EventHost(Protocol):
    """What the event book needs from the state machine (``SchedulerState``). Apply thread only."""

    @property
    def store(self) -> StateStore: ...

    @property
    def retention(self) -> Retention: ...

    @property
    def tasks(self) -> Mapping[str, TaskState]: ...

    @property
    def runs(self) -> RunBook: ...

    @property
    def wf(self) -> WorkflowBook: ...

    def next_event_seq(self) -> int:
        """The next value of the replicated sequence of accepted events."""
        ...

    def next_sequence(self) -> int:
        """The next value of the replicated sequence that makes manual run ids unique."""
        ...

    def put_task(self, st: TaskState) -> None: ...


class EventBook:
    """Accepted events, deduplicated per ``(name, key)`` within the window, and the runs each
    newly accepted one starts."""

    # Commands that may change which tasks subscribe to what: they drop the subscriber index.
    CHANGES_TASKS: Final = frozenset(
        {
            "create_task",
            "create_tasks",
            "update_task",
            "delete_task",
            "apply_workflow",
            "stage_workflow_tasks",
            "delete_workflow",
        }
    )

    def __init__(self, host: EventHost) -> None:
        self.host = host
        # Event name -> the task names and the workflow names subscribed to it, each sorted;
        # None: rebuild on next use. Derived (never stored): equal on every replica.
        self._subscribers: dict[str, tuple[list[str], list[str]]] | None = None

    def invalidate(self) -> None:
        """The tasks may have changed: rebuild the subscriber index when next needed."""
        self._subscribers = None

    def subscribers(self, name: str) -> tuple[list[str], list[str]]:
        """The tasks and the workflows whose ``on_event`` is ``name``, each by name."""
        index = self._subscribers
        if index is None:
            index = {}
            for task, st in self.host.tasks.items():
                on_event = st.peek().on_event  # peek: reads no spec into memory to keep
                if on_event:
                    index.setdefault(on_event, ([], []))[0].append(task)
            for workflow, wf in self.host.wf.workflows.items():
                if wf.spec.on_event:
                    index.setdefault(wf.spec.on_event, ([], []))[1].append(workflow)
            for tasks, workflows in index.values():
                tasks.sort()
                workflows.sort()
            self._subscribers = index
        return index.get(name, ([], []))

    def emit(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        """Accept ``cmd.emit_event`` or answer a duplicate with the first acceptance. Raises
        Reject (a value in the result) for a bad event, before changing anything."""
        body = cmd.emit_event
        try:
            check_event(body.name, body.key, body.payload_json)
        except InvalidSpec as exc:
            raise Reject("invalid_argument", str(exc)) from None
        effects: list[Effect] = []
        res = self.accept(
            body.name,
            body.key,
            body.payload_json,
            body.namespace,
            now,
            cmd.audit.principal,
            cmd.epoch,
            effects,
        )
        return res, tuple(effects)

    def emit_for_run(self, st: TaskState, run: pb.Run, now: int, epoch: int, effects: list[Effect]) -> None:
        """A run of ``st`` succeeded: emit its task's ``emits`` events, keyed by its logical time
        (a workflow task's: its workflow run's)."""
        logical = run.nominal_ms
        if run.workflow_run:
            wr = self.host.wf.runs.get(run.workflow_run)
            if wr is not None:
                logical = wr.logical_ms
        key = key_for_logical(logical)
        for name in st.spec.emits:
            self.accept(name, key, "", st.spec.namespace, now, f"task:{st.spec.name}", epoch, effects)

    def emit_keyed(
        self,
        task: str,
        names: Sequence[str],
        namespace: str,
        logical_ms: int,
        now: int,
        epoch: int,
        effects: list[Effect],
    ) -> None:
        """Task ``task`` emits ``names`` keyed by ``logical_ms`` (a workflow task marked succeeded
        by hand: the same events, keys and emitter as its task run succeeding)."""
        key = key_for_logical(logical_ms)
        for name in names:
            self.accept(name, key, "", namespace, now, f"task:{task}", epoch, effects)

    def emit_for_workflow_run(
        self, spec: pb.WorkflowSpec, wr: pb.WorkflowRun, now: int, epoch: int, effects: list[Effect]
    ) -> None:
        """A run of workflow ``spec`` succeeded: emit its ``emits``, keyed by its logical time."""
        key = key_for_logical(wr.logical_ms)
        namespace = spec.namespace or "default"
        for name in spec.emits:
            self.accept(name, key, "", namespace, now, f"workflow:{spec.name}", epoch, effects)

    def accept(
        self,
        name: str,
        key: str,
        payload_json: str,
        namespace: str,
        now: int,
        emitted_by: str,
        epoch: int,
        effects: list[Effect],
    ) -> pb.CommandResult:
        """Record the event unless its pair is inside the window (then the first record), and
        start one run of every enabled task subscribed to it."""
        store = self.host.store
        window = self.host.retention.event_dedupe_ms
        self.prune(now)
        rkey = keys.event_key(name, key)
        prior = store.get(rkey)
        if prior is not None:
            first = pb.EventRecord.FromString(prior)
            if now < first.accepted_ms + window:
                return pb.CommandResult(ok=True, event=first, duplicate=True)
            store.delete(keys.event_expiry_key(first.accepted_ms, name, key))
        rec = pb.EventRecord(
            name=name,
            key=key,
            payload_json=payload_json,
            namespace=namespace or "default",
            accepted_ms=now,
            emitted_by=emitted_by,
            seq=self.host.next_event_seq(),
        )
        self._start_runs(rec, now, epoch, effects)
        store.put(rkey, rec.SerializeToString(deterministic=True))
        store.put(keys.event_expiry_key(now, name, key), b"")
        return pb.CommandResult(ok=True, event=rec)

    def _start_runs(self, rec: pb.EventRecord, now: int, epoch: int, effects: list[Effect]) -> None:
        """One run of each enabled task whose ``on_event`` is the event (by task name, so every
        replica starts them in the same order), at the key's logical time (the accept time when
        the key is no date or time, or one after the accept time)."""
        host = self.host
        tasks, workflows = self.subscribers(rec.name)
        subscribed = [n for n in tasks if n in host.tasks and host.tasks[n].enabled]
        flows = [n for n in workflows if n in host.wf.workflows and not host.wf.workflows[n].paused]
        if not subscribed and not flows:
            return
        # Never in the future: a run's logical time is also its nominal time, before which no
        # executor starts it; the event says its data is ready now.
        logical = min(logical_from_key(rec.key, rec.accepted_ms), rec.accepted_ms)
        for task in subscribed:
            st = host.tasks[task]
            run_id, data, started = host.runs.new(st, logical, now, epoch, manual_seq=host.next_sequence())
            rec.runs.append(run_id)
            run = pb.Run.FromString(data)
            run.env["RAFTSCHED_EVENT_NAME"] = rec.name
            run.env["RAFTSCHED_EVENT_KEY"] = rec.key
            run.env["RAFTSCHED_EVENT_PAYLOAD"] = rec.payload_json or "{}"
            host.runs.save(run)
            host.put_task(st)
            effects.extend(started)
        for workflow in flows:
            rec.runs.append(host.wf.start_for_event(workflow, rec, logical, now, epoch, effects))

    def prune(self, now: int) -> int:
        """Delete a few events whose window has passed; how many."""
        horizon = now - self.host.retention.event_dedupe_ms
        if horizon <= 0:
            return 0
        store = self.host.store
        end = keys.EVENT_EXPIRY + f"{horizon + 1:016x}/".encode()
        done = 0
        for k, _ in store.scan(keys.EVENT_EXPIRY, end, limit=self.host.retention.prune_step + 1):
            name, _, key = k[len(keys.EVENT_EXPIRY) + 17 :].partition(b"\x00")
            store.delete(k)
            store.delete(keys.EVENT + name + b"\x00" + key)
            done += 1
        return done


def list_events(reader: StoreReader, name: str, limit: int) -> list[pb.EventRecord]:
    """Accepted events still in the window (of ``name`` if given), newest first, at most
    ``limit``; ``reader`` is a committed-store reader (``store.reader()``)."""
    scan = reader.scan
    get = reader.get
    out: list[pb.EventRecord] = []
    for k, _ in scan(keys.EVENT_EXPIRY, keys.EVENT_EXPIRY + keys.END, reverse=True):
        ename, _, key = k[len(keys.EVENT_EXPIRY) + 17 :].partition(b"\x00")
        if name and ename.decode() != name:
            continue
        value = get(keys.EVENT + ename + b"\x00" + key)
        if value is None:
            continue
        out.append(pb.EventRecord.FromString(value))
        if len(out) >= limit:
            break
    return out
