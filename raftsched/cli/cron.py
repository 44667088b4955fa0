"""``cron preview``: a cron expression's next fires, in UTC and local time (local; no cluster,
unless ``--exclude`` names a cluster calendar whose skipped fires are to be marked)."""

from __future__ import annotations

import argparse

from raftsched.cli.calendars import calendars_for_preview
from raftsched.cli.input import lazy_now, parse_time
from raftsched.cli.render import offset_of, print_json, print_table
from raftsched.display import duration_text, iso
from raftsched.errors import InvalidSpec
from raftsched.timing import cron, jitter
from raftsched.timing.calendar import Calendar

__all__ = ["cmd_cron_preview"]


def cmd_cron_preview(args: argparse.Namespace) -> int:
    start = parse_time(args.from_, lazy_now(), "--from")
    cron.CronSchedule.parse(args.expr, args.tz, field="EXPR", tz_field="--tz")  # errors name the CLI's words
    if args.jitter and not args.task:
        raise InvalidSpec(
            "--task", "--jitter needs --task NAME: a fire's offset is hashed from the task's name"
        )
    fires = cron.preview(args.expr, args.tz, start, args.count)

    def start_of(ms: int) -> int:
        return jitter.start_ms(args.task, ms, args.jitter)

    excluding = calendars_for_preview(args)

    def skipped_by(ms: int) -> Calendar | None:
        return next((c for c in excluding if c.excludes(ms)), None)

    if args.json:
        return print_json(
            {
                "expr": args.expr,
                "timezone": args.tz,
                "from": iso(start),
                "from_ms": start,
                "fires": [
                    {
                        "utc": iso(ms),
                        "utc_ms": ms,
                        "local": local,
                        **({"start": iso(start_of(ms)), "start_ms": start_of(ms)} if args.jitter else {}),
                        **(
                            {"skipped_calendar": c.name, "reason": c.why(ms)} if (c := skipped_by(ms)) else {}
                        ),
                    }
                    for ms, local in fires
                ],
                **({"day_rule": note} if (note := cron.day_rule_note(args.expr)) else {}),
            }
        )
    print(f"cron {args.expr!r} in {args.tz}: {len(fires)} fire(s) after {iso(start)}")
    rows: list[list[str]] = []
    previous = ""
    for i, (ms, local) in enumerate(fires, 1):
        offset = offset_of(local)
        note = f"UTC offset {previous} -> {offset}" if previous and offset != previous else ""
        excluded = skipped_by(ms)
        if excluded is not None:
            skip = f"skipped_calendar: {excluded.why(ms)}"
            note = f"{note}; {skip}" if note else skip
        row = [str(i), iso(ms), local, note]
        if args.jitter:
            row.insert(3, iso(start_of(ms)))
        rows.append(row)
        previous = offset
    headers = ["#", "UTC", f"LOCAL ({args.tz})", "NOTE"]
    if args.jitter:
        headers.insert(3, "START")
        print(f"jitter {duration_text(args.jitter)} for task {args.task!r}: START is when each fire starts")
    print_table(headers, rows)
    day_rule = cron.day_rule_note(args.expr)
    if day_rule is not None:
        print(day_rule)
    if any("UTC offset" in row[-1] for row in rows):
        print(
            "DST policy: a wall time that occurs twice fires once, at its first occurrence; "
            "one that does not exist fires at the end of the gap (or is skipped if the hour field is *)."
        )
    return 0
