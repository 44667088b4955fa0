"""Event commands: ``event emit NAME`` and ``events [NAME]`` (issue 28 §3)."""

from __future__ import annotations

import argparse
import json

from raftsched.cli.cluster import connect
from raftsched.cli.errors import UsageError
from raftsched.cli.render import print_json, print_table, to_dict
from raftsched.display import iso
from raftsched.v1 import raftsched_pb2 as pb

__all__ = ["cmd_event_emit", "cmd_events"]


def cmd_event_emit(args: argparse.Namespace) -> int:
    payload = args.payload or ""
    if payload:
        try:
            json.loads(payload)
        except ValueError as exc:
            raise UsageError(f"--payload: not valid JSON: {exc}") from None
    with connect(args) as client:
        record, duplicate = client.emit_event(
            args.name, key=args.key or "", payload=payload, namespace=args.namespace or ""
        )
    if args.json:
        return print_json({"event": to_dict(record), "duplicate": duplicate})
    if duplicate:
        print(
            f"duplicate: event {record.name} key {record.key} was accepted at {iso(record.accepted_ms)} "
            f"(#{record.seq}); nothing new was triggered"
        )
    else:
        print(f"accepted event {record.name} key {record.key} (#{record.seq}) at {iso(record.accepted_ms)}")
        for run_id in record.runs:
            print(f"  started {run_id}")
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    with connect(args) as client:
        if args.unused:
            return _unused(args, client.list_tasks(), client.events(limit=1_000_000))
        records = client.events(args.name or "", limit=args.limit)
    if args.json:
        return print_json([to_dict(r) for r in records])
    rows = [
        [
            str(r.seq),
            r.name,
            r.key,
            iso(r.accepted_ms),
            r.namespace,
            r.emitted_by or "-",
            _short(", ".join(r.runs), 50) or "-",
            _short(r.payload_json),
        ]
        for r in records
    ]
    print_table(["SEQ", "NAME", "KEY", "ACCEPTED", "NAMESPACE", "BY", "RUNS", "PAYLOAD"], rows)
    return 0


def _unused(args: argparse.Namespace, tasks: list[pb.TaskRecord], seen: list[pb.EventRecord]) -> int:
    """Event names tasks subscribe to (``on_event``) that no event inside the window has: a typo,
    or an outside system that never sent one."""
    accepted = {e.name for e in seen}
    waiting: dict[str, list[str]] = {}
    for rec in tasks:
        name = rec.spec.on_event
        if name and name not in accepted and (not args.name or name == args.name):
            waiting.setdefault(name, []).append(rec.spec.name)
    if args.json:
        return print_json([{"event": n, "subscribers": waiting[n]} for n in sorted(waiting)])
    print_table(["EVENT", "SUBSCRIBERS"], [[n, ", ".join(waiting[n])] for n in sorted(waiting)])
    return 0


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
