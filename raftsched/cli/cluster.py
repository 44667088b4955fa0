"""Reaching the cluster (``--cluster``, ``--config``, ``$RAFTSCHED_CLUSTER``), ``status``,
``executors``, ``executor drain`` and ``backup``."""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

from raftsched.cli.errors import UsageError, fail
from raftsched.cli.input import lazy_now
from raftsched.cli.options import CLUSTER_ENV, tls_from_args
from raftsched.cli.render import print_json, print_table, to_dict
from raftsched.display import duration_text, enum_name, iso
from raftsched.v1 import raftsched_pb2 as pb

if TYPE_CHECKING:
    from raftsched.client import Client, ClusterView
    from raftsched.config.types import ClusterConfig

__all__ = [
    "cmd_add_node",
    "cmd_backup",
    "cmd_executor_drain",
    "cmd_executors",
    "cmd_members",
    "cmd_remove_node",
    "cmd_status",
    "connect",
]


def connect(args: argparse.Namespace) -> Client:
    """A client for the cluster the global options (or the environment) name, over TLS when
    the TLS options, environment or config ask for it.

    Raises UsageError when none is given, ConfigError for a bad ``--config`` file, InvalidSpec
    for a TLS file that cannot be used."""
    from raftsched.client import Client  # lazily: 'cron preview' and --help need no gRPC

    targets: str | list[str]
    config: ClusterConfig | None = None
    if args.cluster is not None:
        targets = args.cluster
    elif args.config is not None:
        from raftsched.config.load import load_config

        config = load_config(args.config)
        targets = config.grpc_targets()
    elif os.environ.get(CLUSTER_ENV, "").strip():
        targets = os.environ[CLUSTER_ENV]
    else:
        raise UsageError(
            f"no cluster given: use --cluster HOST:PORT,... or --config FILE, or set {CLUSTER_ENV}"
        )
    from raftsched.security.tokens import resolve_token

    token = resolve_token(getattr(args, "token", None), getattr(args, "token_file", None))
    stale = bool(getattr(args, "stale_reads", False))
    return (_stale_noting_client() if stale else Client)(
        targets,
        timeout=args.rpc_timeout,
        tls=tls_from_args(args, config),
        token=token,
        stale_reads=stale,
    )


def stale_note(client: Client) -> str:
    """The line ``--stale`` prints on stderr after its reads: which node answered and how far
    behind it may have been ("" if the last read was linearizable or nothing was read)."""
    info = client.last_read
    if info is None or info.linearizable:
        return ""
    return f"note: {info.describe()}"


def _stale_noting_client() -> type[Client]:
    from raftsched.client import Client

    class StaleNoting(Client):
        """A client that, when the command is done with it, says how stale its last read was."""

        def __exit__(self, *exc: Any) -> None:
            note = stale_note(self)
            if note:
                print(note, file=sys.stderr)
            super().__exit__(*exc)

    return StaleNoting


UNCONFIRMED_MS = 1000
"""A leader whose newest answer from a majority is older than this is shown as unconfirmed: it
may have been deposed without knowing it yet (it believes it leads until the fallback timeout;
its linearizable reads are refused meanwhile)."""


def contact_ms(status: pb.NodeStatusReply) -> int:
    """The node's contact age in ms; -1 if it does not say (never confirmed, or an older build)."""
    return status.contact_age_ms if status.HasField("contact_age_ms") else -1


def role_text(role: str, contact_age_ms: int) -> str:
    """A node's role for people: a leader that has not heard from a majority lately says so."""
    if role == "leader" and contact_age_ms > UNCONFIRMED_MS:
        return f"leader? (no majority for {contact_age_ms / 1000:.1f} s)"
    return role


def cmd_status(args: argparse.Namespace) -> int:
    """``status``: leader, term and every node's state (with its state digest unless
    ``--no-digest``); exit status 1 if no node answered."""
    with connect(args) as client:
        view = client.cluster_status(digests=args.digests)
        applied = [n.status.applied_index for n in view.reachable if n.status is not None]
        sums = client.content_sums(min(applied)) if args.digests and len(applied) > 1 else {}
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
                rows.append(
                    [n.target, "-", "-", "-", "-", "-", "-", "-", "-", "-", f"unreachable: {n.error}"]
                )
                continue
            rows.append(
                [
                    n.target,
                    s.node_id,
                    role_text(s.role, contact_ms(s)),
                    str(s.term),
                    str(s.commit_index),
                    str(s.applied_index),
                    "-" if contact_ms(s) < 0 else f"{contact_ms(s)}ms",
                    _offset_text(s.clock_offset_ms) if s.clock_known else "-",
                    s.state_digest[:12] or "-",
                    _build_text(s),
                    "STORE DAMAGED" if s.store_damaged else refused.get(s.node_id, "ok"),
                ]
            )
        print_table(
            [
                "TARGET",
                "NODE",
                "ROLE",
                "TERM",
                "COMMIT",
                "APPLIED",
                "CONTACT",
                "CLOCK",
                "DIGEST",
                "BUILD",
                "STATUS",
            ],
            rows,
        )
        for warning in (
            _digest_warnings(view)
            + content_warnings_by_format(sums, _state_formats(view))
            + _damage_warnings(view)
            + _format_notes(view)
            + _clock_warnings(view)
        ):
            print(f"warning: {warning}")
        answered = [n.status for n in view.nodes if n.status is not None]
        if answered:
            freshest = max(answered, key=lambda s: s.applied_index)
            for line in membership_lines(freshest.membership):
                print(line)
        for n in view.nodes:
            if n.status is not None and n.status.config_mismatch:
                print(
                    f"warning: {n.status.node_id}'s config file disagrees with the replicated membership "
                    f"(it follows the membership): {n.status.config_mismatch}"
                )
    if not view.reachable:
        tried = ", ".join(n.target for n in view.nodes)
        # One reason, when all agree (a TLS mismatch says so for every node): it is the fix.
        reasons = {n.error.replace(n.target, "NODE") for n in view.nodes}
        why = f": {view.nodes[0].error}" if len(reasons) == 1 else ""
        return fail(f"no node reachable (tried {tried}){why}", 1)
    return 0


def _offset_text(ms: int) -> str:
    """A clock's offset from the leader's for people: ``+12ms``, ``-1.30s``."""
    return f"{ms:+d}ms" if abs(ms) < 1000 else f"{ms / 1000:+.2f}s"


def _build_text(s: pb.NodeStatusReply) -> str:
    """``0.2.0 c2/s2``: the node's raftsched version and the newest command / state formats it
    applies (a build from before formats were reported shows ``? c1/s1``)."""
    return f"{s.build_version or '?'} c{s.command_format or 1}/s{s.snapshot_format or 1}"


def _format_notes(view: ClusterView) -> list[str]:
    """A rolling upgrade in progress: nodes of different builds (fine, one step at a time)."""
    builds = {_build_text(n.status) for n in view.nodes if n.status is not None}
    if len(builds) < 2:
        return []
    return [
        f"nodes run {len(builds)} different builds ({', '.join(sorted(builds))}): finish the "
        "upgrade one node at a time, the leader last"
    ]


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


def content_warnings(sums: dict[str, str]) -> list[str]:
    """Replicas at one index must hold the same content: name the nodes whose checksum differs
    from the one most nodes report (all of them when no value has a majority)."""
    counts = Counter(sums.values())
    if len(counts) < 2:
        return []
    top, votes = counts.most_common(1)[0]
    majority = votes * 2 > len(sums)
    odd = sorted(node for node, value in sums.items() if not majority or value != top)
    what = "differs from the majority's" if majority else "disagrees (no majority)"
    return [
        f"the replicated content of {', '.join(odd)} {what} at the same log index: its state diverged; "
        "restart it with --rebuild"
    ]


def _state_formats(view: ClusterView) -> dict[str, int]:
    return {n.status.node_id: n.status.state_format for n in view.nodes if n.status is not None}


def content_warnings_by_format(sums: dict[str, str], formats: dict[str, int]) -> list[str]:
    """:func:`content_warnings` among the nodes of each stored state format: in a rolling upgrade
    across a state format the formats store the same state differently (not a divergence)."""
    return [
        warning
        for fmt in sorted(set(formats.values()))
        for warning in content_warnings({n: v for n, v in sums.items() if formats.get(n) == fmt})
    ]


def _damage_warnings(view: ClusterView) -> list[str]:
    return [
        f"{n.status.node_id}: {n.status.store_damaged}"
        for n in view.nodes
        if n.status is not None and n.status.store_damaged
    ]


def _digest_warnings(view: ClusterView) -> list[str]:
    """Nodes that applied the same index must hold the same state; say so loudly if not. Nodes of
    different stored state formats (a rolling upgrade across one) are not compared."""
    by_index: dict[tuple[int, int], set[str]] = {}
    for n in view.nodes:
        if n.status is not None and n.status.state_digest:
            key = (n.status.applied_index, n.status.state_format)
            by_index.setdefault(key, set()).add(n.status.state_digest)
    return [
        f"nodes at applied index {index} report {len(digests)} different state digests"
        for (index, _fmt), digests in sorted(by_index.items())
        if len(digests) > 1
    ]


def _clock_warnings(view: ClusterView) -> list[str]:
    """Nodes whose clock is off the majority's by more than max_clock_skew_ms (they do not lead)."""
    return [
        f"{n.status.node_id}'s clock is {n.status.clock_skew_ms / 1000:+.1f} s off the majority's, more "
        "than scheduler.max_clock_skew_ms: it does not lead or campaign until its clock is fixed"
        for n in view.nodes
        if n.status is not None and n.status.clock_faulty
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


def cmd_executors(args: argparse.Namespace) -> int:
    """``executors``: every executor in the membership (``--all``: also those that left)."""
    with connect(args) as client:
        reply = client.list_executors(include_left=args.all)
    if args.json:
        return print_json(to_dict(reply))
    now = lazy_now()
    # The capacity columns only when some executor declared one (most fleets place by slots).
    sized = any(e.cpu or e.memory_mb for e in reply.executors)
    rows = [
        [
            e.name,
            enum_name(pb.ExecutorState, e.state),
            f"{e.slots_used}/{e.slots}",
            *(
                [
                    f"{e.cpu_used:g}/{e.cpu:g}" if e.cpu else "-",
                    f"{e.memory_used_mb}/{e.memory_mb}MiB" if e.memory_mb else "-",
                ]
                if sized
                else []
            ),
            ",".join(f"{k}={v}" for k, v in sorted(e.labels.items())) or "-",
            e.address or "-",
            _heartbeat_text(e.last_heartbeat_ms, now()) if e.last_heartbeat_ms else "-",
            _offset_text(e.clock_offset_ms) if e.HasField("clock_offset_ms") else "-",
            f"{e.disk_used:.0%}/{e.log_used:.0%}" if e.last_heartbeat_ms else "-",
            iso(e.joined_ms),
            f"{iso(e.left_ms)} {e.left_reason}".strip()
            if e.left_ms
            else (
                f"{'unhealthy, drained itself' if e.health_drain else 'draining'} since "
                f"{iso(e.draining_ms)}: {e.draining_reason}"
                if e.draining_ms
                else "-"
            ),
        ]
        for e in reply.executors
    ]
    print_table(
        [
            "NAME",
            "STATE",
            "SLOTS",
            *(["CPU", "MEMORY"] if sized else []),
            "LABELS",
            "ADDRESS",
            "LAST HEARTBEAT",
            "CLOCK",
            "DISK/LOG",
            "JOINED",
            "LEFT",
        ],
        rows,
    )
    if not reply.leader_view:
        print(
            f"note: {reply.node_id or 'the node'} answered without leading: heartbeats and addresses "
            "are known to the leader only"
        )
    return 0


def cmd_executor_drain(args: argparse.Namespace) -> int:
    """``executor drain NAME``: no new attempts on it; the running ones finish."""
    with connect(args) as client:
        info = client.drain_executor(args.name, args.reason)
    if args.json:
        return print_json(to_dict(info))
    state = enum_name(pb.ExecutorState, info.state)
    running = (
        f"{info.slots_used} attempt(s) still running" if info.slots_used else "nothing running: it may leave"
    )
    print(f"executor {info.name}: {state} ({running})")
    return 0


def cmd_backup(args: argparse.Namespace) -> int:
    """``backup FILE``: a consistent snapshot of the replicated state, from any node."""
    with connect(args) as client:
        header = client.backup(args.file)
    if args.json:
        return print_json({"file": args.file, "header": to_dict(header)})
    size = os.path.getsize(args.file)
    print(
        f"backup {args.file}: {size} bytes, {header.entries} entries, log index {header.log_index} "
        f"(term {header.term}) on {header.node_id}, snapshot format {header.snapshot_format}, "
        f"chain {header.chain[:12]}"
    )
    return 0


def _heartbeat_text(at_ms: int, now_ms: int) -> str:
    """``2026-11-30T10:00:00Z (3s ago)``: the age in the largest unit that fits, whole."""
    age = max(0, now_ms - at_ms)
    for size in (86_400_000, 3_600_000, 60_000, 1000):
        if age >= size:
            return f"{iso(at_ms)} ({duration_text(age - age % size)} ago)"
    return f"{iso(at_ms)} (now)"


def cmd_add_node(args: argparse.Namespace) -> int:
    """``cluster add-node ID --raft HOST:PORT --grpc HOST:PORT [--http HOST:PORT]``."""
    with connect(args) as client:
        reply = client.add_node(args.id, args.raft, args.grpc, args.http)
    return _print_membership(args, reply.membership, reply.note, f"added {args.id}; now start it with --join")


def cmd_remove_node(args: argparse.Namespace) -> int:
    """``cluster remove-node ID``."""
    with connect(args) as client:
        reply = client.remove_node(args.id)
    return _print_membership(args, reply.membership, reply.note, f"removed {args.id}; stop its process")


def cmd_members(args: argparse.Namespace) -> int:
    """``cluster members``: the replicated membership and a change in progress."""
    with connect(args) as client:
        record = client.membership()
    return _print_membership(args, record, "", "")


def _print_membership(args: argparse.Namespace, record: pb.MembershipRecord, note: str, done: str) -> int:
    if args.json:
        return print_json({**to_dict(record), "note": note})
    for line in membership_lines(record):
        print(line)
    if note:
        print(f"note: {note}")
    elif done and not record.HasField("pending"):
        print(done)
    return 0


def membership_lines(record: pb.MembershipRecord) -> list[str]:
    """``members (N):`` with one line per member (id, raft, grpc, http), and the change in
    progress, if any."""
    if not record.members:
        return ["members: not recorded yet (the first leader seeds them from its config file)"]
    lines = [f"members ({len(record.members)}):"]
    lines += [
        f"  {m.id}  raft {m.raft}  grpc {m.grpc}" + (f"  http {m.http}" if m.http else "")
        for m in record.members
    ]
    if record.HasField("pending"):
        p = record.pending
        lines.append(
            f"change in progress: {p.kind} {p.member.id} (raft {p.member.raft}) since {iso(p.started_ms)}"
        )
    return lines
