"""The replicated calendars (``cal/<name>``) and the exclusion decision for a fire.

A calendar is set whole (a new version replaces the old) and deleted only while no task or
workflow excludes it: the refusal lists who does, so a deletion never silently changes what a
schedule runs. Tasks and workflows may exclude only calendars that exist when they are written.
Apply thread only (like the rest of the state machine); readers hold the state's lock.
"""

from __future__ import annotations

from collections.abc import Iterable

from raftsched import codec
from raftsched.abc import StateStore
from raftsched.fsm import keys
from raftsched.fsm.rules import Reject
from raftsched.model import validate_name
from raftsched.timing.calendar import Calendar
from raftsched.v1 import log_pb2 as pb

__all__ = ["CalendarBook"]


class CalendarBook:
    """Calendars by name: the stored records and the :class:`Calendar` each decides with."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.records: dict[str, pb.CalendarRecord] = {}
        self.calendars: dict[str, Calendar] = {}

    def load(self) -> None:
        self.records.clear()
        self.calendars.clear()
        for _, value in self.store.scan(keys.CALENDAR, keys.CALENDAR + keys.END):
            rec = pb.CalendarRecord()
            rec.ParseFromString(value)
            self._keep(rec, codec.calendar_from_pb(rec.spec, rec.transition_ms, rec.offset_s))

    def _keep(self, rec: pb.CalendarRecord, cal: Calendar) -> None:
        self.records[rec.spec.name] = rec
        self.calendars[rec.spec.name] = cal

    def set(self, body: pb.SetCalendar, now: int) -> pb.CalendarRecord:
        """Create or replace a calendar. Raises Reject / InvalidSpec before changing anything."""
        spec = body.spec
        validate_name(spec.name, "calendar")
        if list(spec.dates) != sorted(set(spec.dates)):
            raise Reject("invalid_argument", "calendar dates must be ascending and unique")
        cal = codec.calendar_from_pb(spec, body.transition_ms, body.offset_s)
        old = self.records.get(spec.name)
        rec = pb.CalendarRecord(
            spec=spec,
            transition_ms=body.transition_ms,
            offset_s=body.offset_s,
            version=(old.version + 1) if old is not None else 1,
            created_ms=old.created_ms if old is not None else now,
            updated_ms=now,
        )
        self.store.put(keys.calendar_key(spec.name), rec.SerializeToString(deterministic=True))
        self._keep(rec, cal)
        return rec

    def delete(self, name: str, users: list[str]) -> None:
        """Delete calendar ``name``; refused while ``users`` (tasks, workflows) exclude it."""
        if name not in self.records:
            raise Reject("not_found", f"calendar {name!r} does not exist")
        if users:
            shown = ", ".join(users[:20]) + (f" and {len(users) - 20} more" if len(users) > 20 else "")
            raise Reject(
                "conflict",
                f"calendar {name!r} is excluded by {shown}; remove it from their exclude lists first",
            )
        del self.records[name]
        del self.calendars[name]
        self.store.delete(keys.calendar_key(name))

    def require(self, names: Iterable[str], what: str) -> None:
        """Refuse a definition (``what``: "task 'x'") that excludes a calendar that does not exist."""
        missing = [n for n in names if n not in self.calendars]
        if missing:
            listed = ", ".join(repr(n) for n in missing)
            raise Reject(
                "invalid_argument",
                f"{what}: exclude names calendar {listed}, which does not exist (create it with "
                "`raftsched calendar set`)",
            )

    def excluding(self, names: Iterable[str], nominal_ms: int) -> Calendar | None:
        """The first of ``names`` whose days hold ``nominal_ms`` (in its zone), or None.

        A name with no calendar (impossible while deletion is refused for used calendars, but a
        stored definition is never trusted blindly) excludes nothing."""
        for name in names:
            cal = self.calendars.get(name)
            if cal is not None and cal.excludes(nominal_ms):
                return cal
        return None
