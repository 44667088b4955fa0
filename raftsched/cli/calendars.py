"""Calendar commands: ``calendar set|list|show|delete``, and the calendars ``cron preview`` marks.

A calendar is a set of local days (dates from a file, weekdays from a rule) in a time zone; tasks
and workflows ``exclude`` calendars, and their fires on those days are accounted
``skipped_calendar``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from raftsched import codec
from raftsched.cli.cluster import connect
from raftsched.cli.errors import UsageError
from raftsched.cli.render import print_fields, print_json, print_table, to_dict
from raftsched.display import iso
from raftsched.errors import InvalidSpec
from raftsched.timing import calendar as cal
from raftsched.v1 import raftsched_pb2 as pb

__all__ = [
    "calendar_from_file",
    "calendars_for_preview",
    "cmd_calendar_delete",
    "cmd_calendar_list",
    "cmd_calendar_set",
    "cmd_calendar_show",
]

_SHOWN_DATES = 50


def read_dates_file(path: str) -> list[int]:
    """The day numbers a holidays file lists (see :func:`raftsched.timing.calendar.parse_dates_text`)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidSpec(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InvalidSpec(path, f"cannot read the file: {exc.strerror or exc}") from None
    return cal.parse_dates_text(text, path)


def cmd_calendar_set(args: argparse.Namespace) -> int:
    if not args.file and args.weekdays is None:
        raise UsageError("give --file HOLIDAYS (one date a line) and/or --weekdays RULE (e.g. sat,sun)")
    days: set[int] = set()
    for path in args.file or ():
        days.update(read_dates_file(path))
    weekdays = cal.parse_weekdays(args.weekdays, "--weekdays") if args.weekdays is not None else 0
    with connect(args) as client:
        record = client.set_calendar(
            args.name,
            dates=[cal.date_of(d) for d in sorted(days)],
            weekdays=cal.weekdays_text(weekdays),
            zone=args.zone,
            description=args.description,
        )
        _, used_by = client.get_calendar(args.name)
    print(f"set calendar {record.spec.name} (version {record.version}): {_summary(record.spec)}")
    if used_by:
        print(f"excluded by: {', '.join(used_by)}")
    return 0


def _summary(spec: pb.CalendarSpec) -> str:
    parts = []
    if spec.dates:
        first, last = cal.date_of(spec.dates[0]), cal.date_of(spec.dates[-1])
        parts.append(f"{len(spec.dates)} date(s) from {first} to {last}")
    if spec.weekdays:
        parts.append(f"every {cal.weekdays_text(spec.weekdays)}")
    return " and ".join(parts) + f", in {spec.zone or 'UTC'}"


def cmd_calendar_list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        records = client.list_calendars()
    if args.json:
        return print_json([_calendar_dict(r, None) for r in records])
    rows = [
        [
            r.spec.name,
            r.spec.zone or "UTC",
            str(len(r.spec.dates)),
            cal.weekdays_text(r.spec.weekdays) or "-",
            str(r.version),
            iso(r.updated_ms),
            r.spec.description,
        ]
        for r in records
    ]
    print_table(["NAME", "ZONE", "DATES", "WEEKDAYS", "VERSION", "UPDATED", "DESCRIPTION"], rows)
    return 0


def _calendar_dict(record: pb.CalendarRecord, used_by: list[str] | None) -> dict[str, object]:
    out = to_dict(record)
    spec = out["spec"]
    assert isinstance(spec, dict)
    spec["dates"] = [cal.date_of(d).isoformat() for d in record.spec.dates]
    spec["weekdays"] = cal.weekdays_text(record.spec.weekdays)
    # The expanded offsets are the replicated detail apply decides with, not what a user reads.
    out.pop("transition_ms", None)
    out.pop("offset_s", None)
    out["transitions"] = len(record.transition_ms)
    if used_by is not None:
        out["used_by"] = used_by
    return out


def cmd_calendar_show(args: argparse.Namespace) -> int:
    with connect(args) as client:
        record, used_by = client.get_calendar(args.name)
    if args.json:
        return print_json(_calendar_dict(record, used_by))
    spec = record.spec
    dates = [cal.date_of(d).isoformat() for d in spec.dates]
    shown = ", ".join(dates[:_SHOWN_DATES]) + (
        f" ... ({len(dates)} in all)" if len(dates) > _SHOWN_DATES else ""
    )
    print_fields(
        [
            ("name", spec.name),
            ("zone", spec.zone or "UTC"),
            ("weekdays", cal.weekdays_text(spec.weekdays) or "-"),
            ("dates", shown or "-"),
            ("description", spec.description or "-"),
            ("version", str(record.version)),
            ("created", iso(record.created_ms)),
            ("updated", iso(record.updated_ms)),
            ("excluded by", ", ".join(used_by) or "-"),
        ]
    )
    return 0


def cmd_calendar_delete(args: argparse.Namespace) -> int:
    with connect(args) as client:
        client.delete_calendar(args.name)
    print(f"deleted calendar {args.name}")
    return 0


def calendar_from_file(path: str, weekdays: str | None, zone: str) -> cal.Calendar:
    """A calendar built offline from a holidays file (and a weekday rule) in ``zone``."""
    days = read_dates_file(path)
    mask = cal.parse_weekdays(weekdays, "--exclude-weekdays") if weekdays else 0
    transitions, offsets = cal.zone_offsets(zone, "--exclude-zone")
    return cal.Calendar.build(Path(path).name, days, mask, zone, transitions, offsets)


def calendars_for_preview(args: argparse.Namespace) -> list[cal.Calendar]:
    """The calendars ``cron preview`` marks: ``--exclude NAME`` (read from the cluster) and
    ``--exclude-file FILE`` (offline, in ``--exclude-zone``, default the preview's ``--tz``)."""
    out = [calendar_from_file(path, None, args.exclude_zone or args.tz) for path in args.exclude_file or ()]
    if args.exclude:
        with connect(args) as client:
            for name in args.exclude:
                record, _ = client.get_calendar(name)
                out.append(codec.calendar_from_pb(record.spec, record.transition_ms, record.offset_s))
    return out
