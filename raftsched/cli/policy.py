"""``raftsched quota set|list|delete`` and ``raftsched locks``: the dispatch policies."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from raftsched.cli.cluster import connect
from raftsched.cli.errors import UsageError
from raftsched.cli.render import print_json, print_table, to_dict
from raftsched.display import iso
from raftsched.fsm.policy import TOKEN, format_rate
from raftsched.v1 import raftsched_pb2 as pb

__all__ = ["add_commands", "cmd_locks", "cmd_quota_delete", "cmd_quota_list", "cmd_quota_set"]


def add_commands(
    commands: Any, leaf: Callable[..., argparse.ArgumentParser], json_option: Callable[..., None]
) -> None:
    """``quota set|list|delete`` and ``locks``."""
    quota = commands.add_parser("quota", help="set, list or delete owner and namespace quotas")
    actions = quota.add_subparsers(dest="action", metavar="ACTION", required=True)
    set_ = leaf(
        actions,
        "set",
        cmd_quota_set,
        "create or replace the quota of an owner or a namespace (admin); work over it waits",
    )
    _subject(set_)
    set_.add_argument("--rate", metavar="N/s", help="attempt starts per second (N/s, N/m, N/h)")
    set_.add_argument(
        "--burst",
        type=int,
        default=0,
        metavar="N",
        help="bucket size in attempts (default: one second's worth)",
    )
    set_.add_argument(
        "--max-running", type=int, default=0, metavar="N", help="attempts running at once (0 = no cap)"
    )
    json_option(set_)
    listing = leaf(actions, "list", cmd_quota_list, "list the quotas with their buckets and running attempts")
    json_option(listing)
    delete = leaf(actions, "delete", cmd_quota_delete, "delete the quota of an owner or a namespace (admin)")
    _subject(delete)
    locks = leaf(commands, "locks", cmd_locks, "resource locks: who holds each, and who waits for it")
    json_option(locks)


def _subject(parser: argparse.ArgumentParser) -> None:
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--owner", metavar="O", help="the quota of tasks with this owner")
    who.add_argument("--namespace", metavar="NS", help="the quota of tasks in this namespace")


def cmd_quota_set(args: argparse.Namespace) -> int:
    if args.rate is None and not args.max_running:
        raise UsageError("give --rate, --max-running or both")
    if args.burst < 0 or args.max_running < 0:
        raise UsageError("--burst and --max-running must be >= 0")
    with connect(args) as client:
        q = client.set_quota(
            owner=args.owner or "",
            namespace=args.namespace or "",
            rate=args.rate,
            burst=args.burst,
            max_running=args.max_running,
        )
    if args.json:
        return print_json(to_dict(q))
    print(f"quota {q.kind} {q.name}: {_limits(q)}")
    return 0


def cmd_quota_list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        quotas = client.list_quotas()
    if args.json:
        return print_json([to_dict(q) for q in quotas])
    rows = [
        [
            q.kind,
            q.name,
            format_rate(q.rate_milli),
            str(q.burst) if q.rate_milli else "-",
            f"{q.tokens_micro / TOKEN:.1f}" if q.rate_milli else "-",
            f"{q.running}/{q.max_running}" if q.max_running else str(q.running),
            str(q.waited),
            iso(q.updated_ms),
        ]
        for q in quotas
    ]
    print_table(["KIND", "NAME", "RATE", "BURST", "TOKENS", "RUNNING", "WAITED", "UPDATED (UTC)"], rows)
    return 0


def cmd_quota_delete(args: argparse.Namespace) -> int:
    with connect(args) as client:
        q = client.delete_quota(owner=args.owner or "", namespace=args.namespace or "")
    print(f"deleted quota {q.kind} {q.name}")
    return 0


def cmd_locks(args: argparse.Namespace) -> int:
    with connect(args) as client:
        locks = client.list_locks()
    if args.json:
        return print_json([to_dict(lk) for lk in locks])
    rows: list[list[str]] = []
    for lk in locks:
        for role, people in (("holder", lk.holders), ("waiter", lk.waiters)):
            for h in people:
                rows.append(
                    [
                        lk.name,
                        role,
                        "shared" if h.shared else "exclusive",
                        h.execution_id,
                        h.task,
                        iso(h.since_ms),
                        h.reason or "-",
                    ]
                )
    print_table(["LOCK", "ROLE", "MODE", "EXECUTION", "TASK", "SINCE (UTC)", "WAITING FOR"], rows)
    return 0


def _limits(q: pb.QuotaRecord) -> str:
    parts = []
    if q.rate_milli:
        parts.append(f"rate {format_rate(q.rate_milli)}, burst {q.burst}")
    if q.max_running:
        parts.append(f"max-running {q.max_running}")
    return "; ".join(parts)
