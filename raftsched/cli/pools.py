"""``raftsched pool set|list|delete``: named capacities shared by tasks of any owner."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from raftsched.cli.cluster import connect
from raftsched.cli.errors import UsageError
from raftsched.cli.render import print_json, print_table, to_dict
from raftsched.display import iso

__all__ = ["add_commands", "cmd_pool_delete", "cmd_pool_list", "cmd_pool_set"]


def add_commands(
    commands: Any, leaf: Callable[..., argparse.ArgumentParser], json_option: Callable[..., None]
) -> None:
    """``pool set|list|delete``."""
    pool = commands.add_parser("pool", help="set, list or delete pools (capacities shared by tasks)")
    actions = pool.add_subparsers(dest="action", metavar="ACTION", required=True)
    set_ = leaf(
        actions,
        "set",
        cmd_pool_set,
        "create or resize a pool (admin): at most SLOTS attempts of tasks naming it run at once",
    )
    set_.add_argument("name", metavar="NAME")
    set_.add_argument("--slots", type=int, required=True, metavar="N", help="attempts at once (1-1000000)")
    set_.add_argument("--description", default="", metavar="TEXT")
    json_option(set_)
    listing = leaf(actions, "list", cmd_pool_list, "list the pools with their slots, used and waiting")
    json_option(listing)
    delete = leaf(actions, "delete", cmd_pool_delete, "delete a pool (admin; refused while tasks name it)")
    delete.add_argument("name", metavar="NAME")
    json_option(delete)


def cmd_pool_set(args: argparse.Namespace) -> int:
    if args.slots < 1:
        raise UsageError("--slots must be at least 1")
    with connect(args) as client:
        p = client.set_pool(args.name, args.slots, description=args.description)
    if args.json:
        return print_json(to_dict(p))
    print(f"pool {p.name}: {p.slots} slot{'s' if p.slots != 1 else ''}")
    return 0


def cmd_pool_list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        pools = client.list_pools()
    if args.json:
        return print_json([to_dict(p) for p in pools])
    rows = [
        [
            p.pool.name,
            str(p.pool.slots),
            str(p.used),
            str(p.waiting),
            iso(p.pool.updated_ms),
            p.pool.description,
        ]
        for p in pools
    ]
    print_table(["POOL", "SLOTS", "USED", "WAITING", "UPDATED (UTC)", "DESCRIPTION"], rows)
    return 0


def cmd_pool_delete(args: argparse.Namespace) -> int:
    with connect(args) as client:
        p = client.delete_pool(args.name)
    if args.json:
        return print_json(to_dict(p))
    print(f"deleted pool {p.name}")
    return 0
