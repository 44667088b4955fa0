"""``raftsched alerts``: list alert events with their delivery state; ``alerts ack ID``."""

from __future__ import annotations

import argparse

from raftsched.cli.cluster import connect
from raftsched.cli.input import lazy_now, optional_time
from raftsched.cli.render import print_json, print_table, to_dict
from raftsched.display import iso

__all__ = ["cmd_alerts", "cmd_alerts_ack"]


def cmd_alerts(args: argparse.Namespace) -> int:
    since = optional_time(args.since, lazy_now(), "--since")
    with connect(args) as client:
        infos = client.alerts(since_ms=since, limit=args.limit)
    if args.json:
        return print_json([to_dict(i) for i in infos])
    rows = []
    for info in infos:
        a = info.alert
        delivery = ", ".join(f"{d.target}: {d.state}" for d in info.deliveries) or "(no webhooks)"
        rows.append(
            [
                a.id,
                iso(a.at_ms),
                a.kind,
                a.workflow or a.task or "-",
                a.owner or "-",
                a.execution_id or a.run_id or "-",
                a.error,
                delivery,
                iso(a.acked_ms) if a.acked_ms else "-",
            ]
        )
    print_table(["ID", "AT (UTC)", "KIND", "TASK", "OWNER", "EXECUTION", "REASON", "DELIVERY", "ACKED"], rows)
    return 0


def cmd_alerts_ack(args: argparse.Namespace) -> int:
    with connect(args) as client:
        alert = client.ack_alert(args.id)
    print(f"{alert.id} acknowledged at {iso(alert.acked_ms)}")
    return 0
