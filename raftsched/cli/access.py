"""``token create|list|revoke`` and ``audit``: managing tokens and reading the audit log.

Both need an admin token (``--token``, ``--token-file`` or ``$RAFTSCHED_TOKEN``). ``token create``
prints the new token once, on stdout, and nowhere else: the cluster keeps only its hash.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from raftsched.cli.cluster import connect
from raftsched.cli.input import duration_arg, lazy_now, non_negative_int, optional_time
from raftsched.cli.render import print_json, print_table, to_dict
from raftsched.display import iso

__all__ = [
    "add_commands",
    "add_token_options",
    "cmd_audit",
    "cmd_token_create",
    "cmd_token_generate",
    "cmd_token_list",
    "cmd_token_revoke",
]

ROLES = ("admin", "maintainer", "viewer", "executor")


def add_token_options(parser: argparse.ArgumentParser) -> None:
    """The global ``--token`` / ``--token-file`` options (else ``$RAFTSCHED_TOKEN``)."""
    how = parser.add_mutually_exclusive_group()
    how.add_argument(
        "--token", metavar="TOKEN", help="bearer token (visible in the process list: prefer --token-file)"
    )
    how.add_argument("--token-file", metavar="FILE", help="read the bearer token from FILE")


def add_commands(
    commands: Any, leaf: Callable[..., argparse.ArgumentParser], json_option: Callable[..., None]
) -> None:
    """``token create|list|revoke`` and ``audit`` (admin tokens only)."""
    token = commands.add_parser("token", help="create, list or revoke tokens (admin)")
    actions = token.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = leaf(actions, "create", cmd_token_create, "create a token and print it (once)")
    create.add_argument("--role", required=True, choices=ROLES)
    create.add_argument(
        "--namespace",
        action="append",
        metavar="NS",
        help="a namespace it may use (repeatable; default: default)",
    )
    create.add_argument(
        "--ttl", type=duration_arg, metavar="DURATION", help="expire after this long (e.g. 30d)"
    )
    create.add_argument("--description", metavar="TEXT", help="what the token is for")
    json_option(create)
    leaf(
        actions,
        "generate",
        cmd_token_generate,
        "print a fresh token, locally (for [auth] bootstrap_token_file)",
    )
    listing = leaf(actions, "list", cmd_token_list, "list tokens (never their secrets)")
    json_option(listing)
    revoke = leaf(actions, "revoke", cmd_token_revoke, "revoke a token on every node")
    revoke.add_argument("id", metavar="ID", help="the token's id (or the whole token)")
    audit = leaf(commands, "audit", cmd_audit, "show the audit log of accepted writes", times=True)
    audit.add_argument("--since", metavar="T", help="records at or after T")
    audit.add_argument("--principal", metavar="P", help="only this principal (token:<id> or cert:<subject>)")
    audit.add_argument("--limit", type=non_negative_int, default=0, help="at most this many (default 1000)")
    json_option(audit)


def _when(ms: int, never: str = "-") -> str:
    return iso(ms) if ms else never


def cmd_token_create(args: argparse.Namespace) -> int:
    with connect(args) as client:
        token, info = client.create_token(
            args.role, args.namespace or [], ttl_ms=args.ttl or 0, description=args.description or ""
        )
    if args.json:
        out = to_dict(info)
        out["token"] = token
        return print_json(out)
    print(token)
    expires = _when(info.expires_ms, "never")
    print(
        f"# token {info.id}: role {info.role}, namespaces {','.join(info.namespaces)}, expires {expires}."
        " Store it now: it is not shown again.",
    )
    return 0


def cmd_token_generate(args: argparse.Namespace) -> int:
    """A new random token, made here without asking any node: write it to the file that
    ``[auth] bootstrap_token_file`` names (mode 600), and the first leader makes it an admin token."""
    from raftsched.security.tokens import new_token  # lazily: the CLI imports no gRPC until it dials

    print(new_token())
    return 0


def cmd_token_list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        tokens = client.list_tokens()
    if args.json:
        return print_json([to_dict(t) for t in tokens])
    rows = [
        [
            t.id,
            t.role,
            ",".join(t.namespaces),
            _when(t.created_ms),
            _when(t.expires_ms, "never"),
            _when(t.last_used_ms),
            f"revoked {_when(t.revoked_ms)}" if t.revoked else "active",
            t.description,
        ]
        for t in tokens
    ]
    print_table(["ID", "ROLE", "NAMESPACES", "CREATED", "EXPIRES", "LAST USED", "STATE", "DESCRIPTION"], rows)
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    with connect(args) as client:
        info = client.revoke_token(args.id)
    print(f"token {info.id} revoked at {_when(info.revoked_ms)}")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    since = optional_time(args.since, lazy_now(), "--since")
    with connect(args) as client:
        records = client.audit(since_ms=since, principal=args.principal or "", limit=args.limit)
    if args.json:
        return print_json([to_dict(r) for r in records])
    rows = [[iso(r.at_ms), r.principal, r.rpc.rsplit("/", 1)[-1], r.target] for r in records]
    print_table(["AT", "PRINCIPAL", "RPC", "TARGET"], rows)
    return 0
