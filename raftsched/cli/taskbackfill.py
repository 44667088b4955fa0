"""``raftsched backfill TASK`` and ``raftsched backfills TASK``: backfill for plain tasks (the
progress bar and ``--wait`` are the workflow backfill's)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from raftsched.cli.cluster import connect
from raftsched.cli.input import backfill_end, lazy_now, params_from_args, parse_time
from raftsched.cli.render import print_json, print_table, progress_bar, to_dict
from raftsched.cli.workflows import watch_backfill
from raftsched.display import iso

__all__ = ["add_commands", "cmd_backfill", "cmd_backfills"]


def add_commands(
    commands: Any,
    leaf: Callable[..., argparse.ArgumentParser],
    json_option: Callable[..., None],
    param_options: Callable[[argparse.ArgumentParser], None],
) -> None:
    """``backfill TASK`` and ``backfills TASK``."""
    backfill = leaf(
        commands,
        "backfill",
        cmd_backfill,
        "backfill a task: one run per nominal time of its schedule in [--from, --to] that has no "
        "run yet, in the slots regular work leaves (progress: workflow backfill-status ID)",
        times=True,
    )
    backfill.add_argument("task", metavar="TASK")
    backfill.add_argument("--from", dest="from_", required=True, metavar="T", help="first nominal time")
    backfill.add_argument(
        "--to", required=True, metavar="T", help="last nominal time (inclusive; a date means the whole day)"
    )
    backfill.add_argument("--wait", action="store_true", help="show a progress bar until every run finished")
    param_options(backfill)
    json_option(backfill)
    listing = leaf(commands, "backfills", cmd_backfills, "list a task's backfills with their progress")
    listing.add_argument("task", metavar="TASK")
    json_option(listing)


def cmd_backfill(args: argparse.Namespace) -> int:
    now = lazy_now()
    start = parse_time(args.from_, now, "--from")
    end = backfill_end(args.to, now)
    params = params_from_args(args.params, args.param)
    with connect(args) as client:
        record = client.backfill_task(args.task, start, end, params or None)
        if args.json and not args.wait:
            return print_json(to_dict(record))
        if not args.json:
            print(
                f"backfill {record.backfill_id}: {record.runs_total} run(s) of {record.task}, "
                f"nominal times {iso(record.from_ms)} .. {iso(record.to_ms)} "
                f"({record.runs_skipped} skipped: a run exists or the scheduler has not reached it), "
                f"at most {record.share_pct or 30}% of executor slots"
            )
        if not args.wait:
            print(f"watch it: raftsched workflow backfill-status {record.backfill_id} --wait")
            return 0
        return watch_backfill(client, record, as_json=args.json)


def cmd_backfills(args: argparse.Namespace) -> int:
    with connect(args) as client:
        records = client.list_task_backfills(args.task)
    if args.json:
        return print_json([to_dict(b) for b in records])
    rows = [
        [
            b.backfill_id,
            iso(b.from_ms),
            iso(b.to_ms),
            progress_bar(b.runs_finished, b.runs_total, width=10),
            str(b.runs_failed),
            str(b.runs_skipped),
            iso(b.created_ms),
            iso(b.finished_ms),
        ]
        for b in records
    ]
    print_table(["BACKFILL", "FROM", "TO", "PROGRESS", "FAILED", "SKIPPED", "CREATED", "FINISHED"], rows)
    return 0
