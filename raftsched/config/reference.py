"""Every key of the cluster config file: its type, default and meaning, in one table.

The docs site's configuration reference is generated from :data:`KEYS` (docs/gen/reference.py), and
``tests/unit/test_config_reference.py`` fails when a key the loaders accept has no entry here (or an
entry names a key no loader accepts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["KEYS", "TYPES", "Key"]

TYPES: Final = ("bool", "integer", "number", "string", "duration", "size", "path", "table", "list", "url")


@dataclass(frozen=True, slots=True)
class Key:
    """One config key: ``path`` as written in the file (``nodes[].raft``, ``events.<name>.namespace``)."""

    path: str
    type: str  # one of TYPES
    default: str  # as written in the file; "—" when there is none
    meaning: str  # Markdown; links are relative to the docs' reference/ directory


KEYS: Final[tuple[Key, ...]] = (
    Key(
        "cluster.name",
        "string",
        '"raftsched"',
        "cluster name, shown in logs",
    ),
    Key(
        "cluster.secret",
        "string",
        "— (required unless `secret_file`)",
        (
            "shared secret, ≥ 16 characters, identical on every node. It encrypts and authenticates "
            "the Raft port, which otherwise accepts pickle from anyone who can reach it: **a node "
            "refuses to start without one**"
        ),
    ),
    Key(
        "cluster.secret_file",
        "path",
        "—",
        "read the secret from this file instead (exactly one of the two)",
    ),
    Key(
        "cluster.insecure",
        "bool",
        "false",
        (
            "serve the gRPC API on non-loopback addresses without TLS and authentication (see [Safe "
            "defaults](../guide/tls.md#safe-defaults)); every start logs a warning"
        ),
    ),
    Key(
        "tls.cert_file",
        "path",
        "— (required in `[tls]`)",
        (
            "the node's PEM certificate chain and unencrypted PEM key; with `[tls]` the gRPC port "
            "(Admin, Executor and health services) speaks TLS only"
        ),
    ),
    Key(
        "tls.key_file",
        "path",
        "— (required in `[tls]`)",
        (
            "the node's PEM certificate chain and unencrypted PEM key; with `[tls]` the gRPC port "
            "(Admin, Executor and health services) speaks TLS only"
        ),
    ),
    Key(
        "tls.ca_file",
        "path",
        "—",
        (
            "PEM CA certificate(s): client certificates are checked against it; nodes, the CLI and "
            "executors reading this config trust it"
        ),
    ),
    Key(
        "tls.require_client_cert",
        "bool",
        "false",
        ("mutual TLS: refuse clients without a certificate from `ca_file` (needs `ca_file`)"),
    ),
    Key(
        "tls.http",
        "bool",
        "false",
        (
            "serve the HTTP listener (console, `/api/v1/`, `/metrics`, probes) over TLS with the same"
            " certificate; reloaded on SIGHUP with the gRPC port's"
        ),
    ),
    Key(
        "tls.http_metrics_client_cert",
        "bool",
        "false",
        (
            "`/metrics` answers only clients with a certificate from `ca_file` (403 otherwise); other"
            " paths take clients with or without one (needs `tls.http` and `ca_file`)"
        ),
    ),
    Key(
        "raft.append_entries_period",
        "duration",
        "0.02",
        "heartbeat / batch period, s",
    ),
    Key(
        "raft.auto_tick_period",
        "duration",
        "0.02",
        (
            "longest wait of a node's Raft loop for network events, s (a leader also wakes when"
            " its next append is due)"
        ),
    ),
    Key(
        "raft.raft_min_timeout",
        "duration",
        "0.4",
        "election timeout range, s",
    ),
    Key(
        "raft.raft_max_timeout",
        "duration",
        "1.4",
        "election timeout range, s",
    ),
    Key(
        "raft.connection_timeout",
        "duration",
        "3.5",
        (
            "a silent peer connection is dead after this, s (a link that carried nothing for a "
            "quarter of it carries a keepalive, so two followers' link is open when an election needs"
            " it)"
        ),
    ),
    Key(
        "raft.connection_retry_time",
        "duration",
        "1.0",
        "reconnect interval, s",
    ),
    Key(
        "raft.leader_fallback_timeout",
        "duration",
        "2.0",
        "a leader that cannot reach a majority steps down after this, s",
    ),
    Key(
        "raft.log_compaction_min_entries",
        "integer",
        "20000",
        "snapshot (LMDB copy) and truncate the log after this many entries or seconds",
    ),
    Key(
        "raft.log_compaction_min_time",
        "duration",
        "300",
        "snapshot (LMDB copy) and truncate the log after this many entries or seconds",
    ),
    Key(
        "storage.verify_every",
        "duration",
        '"1h"',
        (
            "how often a running node reads its whole state store and checks it against the checksum "
            "committed with it (always at start-up); `0` = only at start-up. Node-local. See [Damaged"
            " stores](../guide/backup.md#damaged-stores)"
        ),
    ),
    Key(
        "storage.map_size",
        "size",
        '"64GiB"',
        (
            'the most a node\'s LMDB state store may grow to: bytes, or a size such as `"512MiB"`, '
            '`"64GiB"` (`B`, `KiB`…`TiB`, `KB`…`TB`), 256 KiB to 1 PiB. Address space, not disk. A '
            "warning is logged (at most once a minute) past 80 %; a node whose store cannot take "
            "writes leaves the cluster (below)"
        ),
    ),
    Key(
        "metrics.per_task",
        "bool",
        "false",
        (
            "add a `task` label to the per-owner counters (fires, runs finished, attempts): one "
            "series per task and outcome, for clusters of hundreds of tasks, not a million"
        ),
    ),
    Key(
        "api.max_calls",
        "integer",
        "64",
        "HTTP/JSON API calls one node answers at once (1 to 10000); more wait their turn",
    ),
    Key(
        "api.max_waiting",
        "integer",
        "256",
        (
            "API calls that may wait (for a turn, or for the firing window below); past that a call "
            "is refused at once with 429 and `Retry-After: 1` (0 to 100000)"
        ),
    ),
    Key(
        "api.firing_hold_ms",
        "integer",
        "100",
        (
            "on the leader, an API call that arrives while a fire batch is due within "
            "`firing_lead_ms` or waits for its commit waits until it committed, at most this long "
            "(0: never waits; up to 10000). See [Firing goes first](http.md#firing-goes-first)"
        ),
    ),
    Key(
        "api.firing_lead_ms",
        "integer",
        "20",
        (
            "how long before a fire batch is due API calls start to wait (0 to 1000): long enough for "
            "calls already running to finish"
        ),
    ),
    Key(
        "scheduler.misfire_grace_seconds",
        "duration",
        "5",
        "lateness beyond which a fire counts as missed",
    ),
    Key(
        "scheduler.misfire_all_cap",
        "integer",
        "100",
        "defaults for `misfire = all`",
    ),
    Key(
        "scheduler.misfire_all_window_seconds",
        "duration",
        "3600",
        "defaults for `misfire = all`",
    ),
    Key(
        "scheduler.history_keep_count",
        "integer",
        "1000",
        "fire records and finished runs kept per task (pruned in batches: up to 64 more)",
    ),
    Key(
        "scheduler.history_keep_seconds",
        "duration",
        "604800",
        "fire records and finished runs kept per task",
    ),
    Key(
        "scheduler.idempotency_keep_seconds",
        "duration",
        "3600",
        "how long client idempotency keys are remembered",
    ),
    Key(
        "scheduler.event_dedupe_window_seconds",
        "duration",
        "604800",
        (
            "an event's (name, key) is accepted once within this window, leader time "
            "([Events](../explanation/semantics.md#events-and-data-triggers))"
        ),
    ),
    Key(
        "scheduler.max_fires_per_batch",
        "integer",
        "1000",
        "fires per log entry (entries are also split at 60 KB)",
    ),
    Key(
        "scheduler.max_dispatch_backlog",
        "integer",
        "100000",
        (
            "attempts waiting for an executor slot at which the leader holds fire planning of "
            "the tasks that have attempts waiting until they are down to three quarters of it; "
            "0: no limit "
            "([Overload](../explanation/semantics.md#overload))"
        ),
    ),
    Key(
        "scheduler.lease_ms",
        "duration",
        "10000",
        "an attempt (or executor) silent this long is lost (declared dead)",
    ),
    Key(
        "scheduler.heartbeat_ms",
        "duration",
        "2000",
        "how often executors heartbeat (at most `lease_ms / 3`)",
    ),
    Key(
        "scheduler.kill_grace_ms",
        "duration",
        "5000",
        "timeout backstop slack",
    ),
    Key(
        "scheduler.retry_backoff_ms",
        "duration",
        "10000",
        "retry backoff base and cap (plus ≤ 20 % jitter)",
    ),
    Key(
        "scheduler.retry_backoff_cap_ms",
        "duration",
        "900000",
        "retry backoff base and cap (plus ≤ 20 % jitter)",
    ),
    Key(
        "scheduler.max_clock_skew_ms",
        "duration",
        "10000",
        (
            "how far a node's clock may be from the majority's: beyond it a leader hands leadership "
            "over and a node does not campaign; a committed leader time further ahead of a new "
            "leader's clock is a clock fault, not a floor (see "
            "[Clocks](../explanation/semantics.md#clocks))"
        ),
    ),
    Key(
        "nodes[].id",
        "string",
        "—",
        "node id, `[A-Za-z0-9_-]{1,64}`",
    ),
    Key(
        "nodes[].raft",
        "string",
        "—",
        "`host:port` Raft and gRPC addresses (dialable, unique)",
    ),
    Key(
        "nodes[].grpc",
        "string",
        "—",
        "`host:port` Raft and gRPC addresses (dialable, unique)",
    ),
    Key(
        "nodes[].data_dir",
        "path",
        "—",
        "the node's log, snapshots and LMDB state (relative to the config file)",
    ),
    Key(
        "nodes[].grpc_bind",
        "string",
        "grpc",
        (
            "where the gRPC server listens when `grpc` is a proxy or NAT address in front of it "
            "(`grpc` stays what clients dial and redirects name)"
        ),
    ),
    Key(
        "nodes[].raft_bind",
        "string",
        "raft",
        (
            "where the Raft port listens when `raft` is not a local address (a proxy or NAT in front "
            "of it); `raft` stays the node's identity among its peers. The Raft port binds exactly "
            "this address, never every interface"
        ),
    ),
    Key(
        "nodes[].raft_via",
        "table",
        "—",
        (
            '`{ peer id = "host:port" }`: reach a peer\'s Raft port through a proxy; the peer keeps '
            "its `raft` identity. pysyncobj dials only from the node whose `raft` sorts after the "
            "peer's, so an entry is valid only there and must sort before the node's own `raft` "
            "(checked at load). The chaos suite's partitions use it"
        ),
    ),
    Key(
        "nodes[].http",
        "string",
        "— (off)",
        (
            "`host:port` of the node's HTTP listener: `/metrics`, `/healthz`, `/readyz` (see "
            "[Observability](../guide/monitor.md#observability)); a wildcard is fine"
        ),
    ),
    Key(
        "alerts.severity",
        "table",
        "—",
        (
            'per alert kind, its severity: `kind = "info" | "warning" | "critical"` (defaults: '
            "[Severity and routing](../guide/monitor.md#severity-and-routing))"
        ),
    ),
    Key(
        "alerts.streak_interval",
        "duration",
        "4h",
        "a failure streak sends its first alert, then a count at most once per this",
    ),
    Key(
        "alerts.webhook[].format",
        "string",
        "json",
        "the body: `json`, `slack` or `alertmanager` (then `url` is Alertmanager's base URL)",
    ),
    Key("alerts.webhook[].min_severity", "string", "— (all)", "only events of this severity and above"),
    Key(
        "alerts.email[].name", "string", "email:<first of to>", "the target's name; keys its delivered cursor"
    ),
    Key("alerts.email[].host", "string", "— (required)", "the SMTP server"),
    Key("alerts.email[].port", "integer", "587", "its port (STARTTLS; implicit TLS on 465 is not supported)"),
    Key("alerts.email[].user", "string", "—", "AUTH user (needs `starttls`)"),
    Key("alerts.email[].password_file", "path", "—", "the AUTH password (required with `user`)"),
    Key("alerts.email[].from", "string", "— (required)", "the sender address"),
    Key("alerts.email[].to", "list", "— (required)", "the recipients"),
    Key("alerts.email[].starttls", "bool", "true", "STARTTLS, verifying the server's certificate"),
    Key("alerts.email[].ca_file", "path", "— (the system's)", "trust this CA for the server's certificate"),
    Key("alerts.email[].owners", "list", "— (all)", "only events of these owners"),
    Key("alerts.email[].namespaces", "list", "— (all)", "only events of these namespaces"),
    Key("alerts.email[].kinds", "list", "— (all)", "only events of these kinds"),
    Key("alerts.email[].min_severity", "string", "— (all)", "only events of this severity and above"),
    Key("alerts.email[].timeout", "duration", "10s", "a send not done within this is retried"),
    Key(
        "events.<name>.secret_file",
        "path",
        "—",
        (
            "the shared secret (≥ 16 bytes, file relative to the config) a webhook signs `POST "
            "/api/v1/events/<name>` with (`X-Signature-256`); a signed call needs no token"
        ),
    ),
    Key(
        "events.<name>.namespace",
        "string",
        "default",
        (
            "that event's namespace for signed calls; the header, else the JSON pointer into the body"
            " (`/partition/date`), that gives the dedupe key"
        ),
    ),
    Key(
        "events.<name>.key_header",
        "string",
        "X-Event-Key",
        (
            "that event's namespace for signed calls; the header, else the JSON pointer into the body"
            " (`/partition/date`), that gives the dedupe key"
        ),
    ),
    Key(
        "events.<name>.key_pointer",
        "string",
        "—",
        (
            "that event's namespace for signed calls; the header, else the JSON pointer into the body"
            " (`/partition/date`), that gives the dedupe key"
        ),
    ),
    Key(
        "auth.bootstrap_token_file",
        "path",
        "—",
        (
            "an admin token file (mode 600, the same on every node) the first leader creates as a "
            "token; with `[auth]`, every call needs a token ([Tokens](../guide/auth.md#tokens))"
        ),
    ),
    Key(
        "auth.audit_keep",
        "duration",
        "90d",
        "how long audit records are kept (the same on every node)",
    ),
    Key(
        "auth.subjects",
        "table",
        "—",
        ('mutual-TLS client certificates by common name: `"cn" = "role"` or `"role:ns1,ns2"`'),
    ),
    Key(
        "alerts.zombie_after",
        "duration",
        "1h",
        ("a `zombie` alert for an attempt RUNNING longer than this ([Alerts](../guide/monitor.md#alerts))"),
    ),
    Key(
        "alerts.delay_p99_threshold",
        "duration",
        "—",
        (
            "deprecated: without `[alerts.start_delay]` it sets that table's critical level at "
            "quantile 0.99 (the node logs a note); with it, a config error"
        ),
    ),
    Key(
        "alerts.window",
        "duration",
        "—",
        (
            "deprecated: does nothing alone (use `alerts.start_delay.window`); with "
            "`delay_p99_threshold`, its window"
        ),
    ),
    Key(
        "alerts.console_url",
        "url",
        "—",
        "the console's base URL: each alert event's `link`",
    ),
    Key(
        "alerts.max_waiting",
        "duration",
        "10m",
        (
            "an attempt due this long without starting raises `waiting_too_long` (once per task and "
            "episode); work due with no live executor at all raises `no_executor` at once"
        ),
    ),
    Key(
        "alerts.heartbeat_missing",
        "duration",
        "6s",
        ("an executor that sends the leader no heartbeat this long raises `heartbeat_missing`, naming it"),
    ),
    Key(
        "alerts.max_skew",
        "duration",
        "500ms",
        ("a node's or executor's clock off the leader's by more than this raises `clock_skew`, naming it"),
    ),
    Key(
        "alerts.start_delay.quantile",
        "number",
        "0.95",
        (
            "the quantile of nominal time → start (the executor began the attempt) checked per "
            "namespace ([Start delay, SLAs and freshness](../guide/monitor.md#start-delay-slas-and-"
            "freshness))"
        ),
    ),
    Key(
        "alerts.start_delay.window",
        "duration",
        "5m",
        "the window the quantile is taken over",
    ),
    Key(
        "alerts.start_delay.warning",
        "duration",
        "2m",
        "a `start_delay` alert of severity warning above this",
    ),
    Key(
        "alerts.start_delay.critical",
        "duration",
        "5m",
        "a `start_delay` alert of severity critical above this",
    ),
    Key(
        "alerts.start_delay.namespaces.<ns>.quantile",
        "number",
        "the table's",
        "per namespace: overrides `alerts.start_delay.quantile`",
    ),
    Key(
        "alerts.start_delay.namespaces.<ns>.window",
        "duration",
        "the table's",
        "per namespace: overrides `alerts.start_delay.window`",
    ),
    Key(
        "alerts.start_delay.namespaces.<ns>.warning",
        "duration",
        "the table's",
        "per namespace: overrides `alerts.start_delay.warning`",
    ),
    Key(
        "alerts.start_delay.namespaces.<ns>.critical",
        "duration",
        "the table's",
        "per namespace: overrides `alerts.start_delay.critical`",
    ),
    Key(
        "alerts.webhook[].url",
        "url",
        "— (required)",
        "where the leader POSTs each alert event the target's filters take",
    ),
    Key(
        "alerts.webhook[].name",
        "string",
        "the url",
        "the target's name; keys its delivered cursor",
    ),
    Key(
        "alerts.webhook[].secret",
        "string",
        "—",
        "signs every POST (`X-Raftsched-Signature: sha256=…`)",
    ),
    Key(
        "alerts.webhook[].secret_file",
        "path",
        "—",
        "read the signing secret from this file instead",
    ),
    Key(
        "alerts.webhook[].owners",
        "list",
        "— (all)",
        "only events of these owners",
    ),
    Key(
        "alerts.webhook[].namespaces",
        "list",
        "— (all)",
        "only events of these namespaces",
    ),
    Key(
        "alerts.webhook[].kinds",
        "list",
        "— (all)",
        "only events of these kinds",
    ),
    Key(
        "alerts.webhook[].timeout",
        "duration",
        "10s",
        "a POST not answered within this is retried",
    ),
)
