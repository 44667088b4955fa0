"""Reaching the cluster (``--cluster``, ``--config``, ``$RAFTSCHED_CLUSTER``), and ``status``."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from raftsched.cli.errors import UsageError, fail
from raftsched.cli.render import print_json, print_table, to_dict

if TYPE_CHECKING:
    from raftsched.client import Client, ClusterView

__all__ = ["CLUSTER_ENV", "cmd_status", "connect"]

CLUSTER_ENV = "RAFTSCHED_CLUSTER"


def connect(args: argparse.Namespace) -> Client:
    """A client for the cluster the global options (or the environment) name.

    Raises UsageError when none is given, ConfigError for a bad ``--config`` file."""
    from raftsched.client import Client  # lazily: 'cron preview' and --help need no gRPC

    targets: str | list[str]
    if args.cluster is not None:
        targets = args.cluster
    elif args.config is not None:
        from raftsched.config import load_config

        targets = load_config(args.config).grpc_targets()
    elif os.environ.get(CLUSTER_ENV, "").strip():
        targets = os.environ[CLUSTER_ENV]
    else:
        raise UsageError(
            f"no cluster given: use --cluster HOST:PORT,... or --config FILE, or set {CLUSTER_ENV}"
        )
    return Client(targets, timeout=args.rpc_timeout)


def cmd_status(args: argparse.Namespace) -> int:
    """``status``: leader, term and every node's state; exit status 1 if no node answered."""
    with connect(args) as client:
        view = client.cluster_status()
    if args.json:
        print_json(_cluster_dict(view))
    else:
        leader = f"{view.leader_id} ({view.leader_addr})" if view.leader_id else "unknown"
        print(f"leader: {leader}   term: {view.term}   commit index: {view.commit_index}")
        rows = []
        refused = _raft_refusals(view)
        for n in view.nodes:
            s = n.status
            if s is None:
                rows.append([n.target, "-", "-", "-", "-", "-", "-", f"unreachable: {n.error}"])
                continue
            rows.append(
                [
                    n.target,
                    s.node_id,
                    s.role,
                    str(s.term),
                    str(s.commit_index),
                    str(s.applied_index),
                    s.state_digest[:12] or "-",
                    refused.get(s.node_id, "ok"),
                ]
            )
        print_table(["TARGET", "NODE", "ROLE", "TERM", "COMMIT", "APPLIED", "DIGEST", "STATUS"], rows)
        for warning in _digest_warnings(view):
            print(f"warning: {warning}")
    if not view.reachable:
        tried = ", ".join(n.target for n in view.nodes)
        return fail(f"no node reachable (tried {tried})", 1)
    return 0


def _raft_refusals(view: ClusterView) -> dict[str, str]:
    """node id -> "raft refused by ..." for each node that most of the other answering nodes
    report as refused lately. A wrong-secret node and its peers each see the other side refuse;
    the majority view tells which one is the odd node out."""
    reports: dict[str, list[str]] = {}
    asked: dict[str, int] = {}
    for n in view.nodes:
        s = n.status
        if s is None:
            continue
        for p in s.raft_peers:
            asked[p.node_id] = asked.get(p.node_id, 0) + 1
            if p.refused and not p.connected:
                reports.setdefault(p.node_id, []).append(f"{s.node_id}: {p.refused}")
    return {
        node: "raft refused by " + "; ".join(why)
        for node, why in reports.items()
        if len(why) * 2 > asked.get(node, 0)
    }


def _digest_warnings(view: ClusterView) -> list[str]:
    """Nodes that applied the same index must hold the same state; say so loudly if not."""
    by_index: dict[int, set[str]] = {}
    for n in view.nodes:
        if n.status is not None and n.status.state_digest:
            by_index.setdefault(n.status.applied_index, set()).add(n.status.state_digest)
    return [
        f"nodes at applied index {index} report {len(digests)} different state digests"
        for index, digests in sorted(by_index.items())
        if len(digests) > 1
    ]


def _cluster_dict(view: ClusterView) -> dict[str, Any]:
    return {
        "leader_id": view.leader_id,
        "leader_addr": view.leader_addr,
        "term": view.term,
        "commit_index": view.commit_index,
        "nodes": [
            {
                "target": n.target,
                "reachable": n.status is not None,
                "status": to_dict(n.status) if n.status is not None else None,
                "error": n.error,
            }
            for n in view.nodes
        ],
    }
