"""The configuration's value types: frozen, and validated again at construction, so a hand-built
:class:`ClusterConfig` (in tests, in :mod:`raftsched.testing`) holds the same invariants as one
read from a file (:mod:`raftsched.config.load`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Final, TypeVar

from raftsched.alerts.config import AlertsConfig
from raftsched.config.eventhooks import EventHook
from raftsched.config.values import (
    DEFAULT_MAP_SIZE,
    Number,
    as_number,
    canonical_address,
    check_bind_address,
    check_node_id,
    check_peer_address,
    check_secret,
    is_loopback,
    key_path,
    map_size_problem,
)
from raftsched.errors import ConfigError
from raftsched.security.auth import AuthSettings


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """One ``[[nodes]]`` entry.

    ``raft`` and ``grpc`` are ``host:port`` (IPv6 as ``[::1]:7001``); :func:`parse_config` stores
    them in canonical form (hostname lower-cased, IP literal compressed, port without leading
    zeros), so equal addresses compare equal as strings. ``data_dir`` is absolute when read from a
    file. Raises :class:`ConfigError` if the id or an address is invalid.

    Two optional keys put something between nodes (a proxy, a NAT; the chaos suite's partitions
    are TCP proxies):

    * ``grpc_bind``: where this node listens for gRPC when that differs from ``grpc``, the address
      clients and executors dial and that leader redirects name (default: ``grpc``);
    * ``raft_bind``: where this node listens for Raft when that differs from ``raft``, its identity
      (pysyncobj names a peer by the address it sends first) and what peers dial unless they have
      a ``raft_via`` entry for it (default: ``raft``);
    * ``raft_via``: ``{peer id = "host:port"}``, the address this node dials to reach that peer's
      Raft port. The peer is still identified by its own ``raft`` address (pysyncobj sends it as
      the first message of a connection). pysyncobj dials a peer only from the node whose
      address sorts after the peer's, so an entry is only valid on that side and must itself sort
      before this node's ``raft`` (:class:`ClusterConfig` checks both).

    ``http`` (optional) is where the node's HTTP listener (``/metrics``, ``/healthz``,
    ``/readyz``) binds; a wildcard is fine. Absent, the node serves no HTTP at all.
    """

    id: str
    raft: str
    grpc: str
    data_dir: Path
    grpc_bind: str | None = None
    raft_via: tuple[tuple[str, str], ...] = ()
    http: str | None = None
    raft_bind: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "raft_via", tuple(sorted(dict(self.raft_via).items())))
        problems: list[str] = []
        check_node_id("id", self.id, problems)
        raft = check_peer_address("raft", self.raft, problems)
        grpc = check_peer_address("grpc", self.grpc, problems)
        if raft is not None and raft == grpc:
            problems.append(f"grpc: address {grpc} already used by raft")
        if self.grpc_bind is not None:
            check_bind_address("grpc_bind", self.grpc_bind, problems)
        if self.http is not None:
            check_bind_address("http", self.http, problems)
        if self.raft_bind is not None:
            check_bind_address("raft_bind", self.raft_bind, problems)
        for peer, via in self.raft_via:
            check_node_id(f"raft_via: peer id {peer!r}", peer, problems)
            check_peer_address(key_path("raft_via", str(peer)), via, problems)
        if problems:
            raise ConfigError("NodeConfig", problems)

    @property
    def grpc_listen(self) -> str:
        """The address the node's gRPC server binds: ``grpc_bind`` if given, else ``grpc``."""
        return self.grpc_bind or self.grpc

    @property
    def raft_listen(self) -> str:
        """The address the node's Raft port binds: ``raft_bind`` if given, else ``raft``."""
        return self.raft_bind or self.raft


@dataclass(frozen=True, slots=True)
class RaftTuning:
    """The ``[raft]`` table: pysyncobj timing and log compaction. Durations are in seconds.

    In a file, a duration may also be a string with a unit in the shared duration grammar
    (``"20ms"``, ``"1.5s"``, see :mod:`raftsched.timing.durations`).

    The constraints are pysyncobj's own (its ``SyncObjConf.validate`` asserts them, and asserts
    vanish under ``python -O``), checked here so a bad value is reported with its key path.
    Raises :class:`ConfigError` if a value or a relation between values is invalid.
    """

    append_entries_period: float = 0.02
    auto_tick_period: float = 0.02
    raft_min_timeout: float = 0.4
    raft_max_timeout: float = 1.4
    connection_timeout: float = 3.5
    connection_retry_time: float = 1.0
    leader_fallback_timeout: float = 2.0
    log_compaction_min_entries: int = 20000
    log_compaction_min_time: int = 300

    def __post_init__(self) -> None:
        _validate_instance(self, "raft", RAFT_RULES, raft_relations)


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    """The ``[scheduler]`` table: misfire handling, history retention and batching.

    Each node reads its own copy of the file, and copies differ during a rolling change, so code
    inside ``apply`` must not read these from the local config: the leader stamps the values it
    acts on into its commands, and every replica applies the same numbers. Raises
    :class:`ConfigError` if a value is out of range.

    Each duration is a number in the unit its name ends with (``_seconds``, ``_ms``). In a file it
    may also be a string with a unit in the shared duration grammar (``"90s"``, ``"10m"``,
    ``"7d"``, see :mod:`raftsched.timing.durations`) that comes to a whole number of that unit.
    """

    misfire_grace_seconds: int = 5
    misfire_all_cap: int = 100
    misfire_all_window_seconds: int = 3600
    history_keep_count: int = 1000
    history_keep_seconds: int = 604800
    idempotency_keep_seconds: int = 3600
    event_dedupe_window_seconds: int = 7 * 24 * 3600
    max_fires_per_batch: int = 1000
    max_dispatch_backlog: int = 100_000
    lease_ms: int = 10_000
    heartbeat_ms: int = 2_000
    kill_grace_ms: int = 5_000
    retry_backoff_ms: int = 10_000
    retry_backoff_cap_ms: int = 900_000
    # How far a node's clock may be from the majority's before it stops leading (and committed
    # leader time from a new leader's clock before it is a clock fault); see raftsched.clockwatch.
    max_clock_skew_ms: int = 10_000

    def __post_init__(self) -> None:
        _validate_instance(self, "scheduler", SCHEDULER_RULES, scheduler_relations)


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """The ``[api]`` table: how much of a node the HTTP/JSON API (``/api/v1/``) may take, and
    how it gives way to firing (see the HTTP API guide, *Firing goes first*).

    ``max_calls`` calls are answered at once; ``max_waiting`` more wait (for a turn or for the
    firing window), and past that a call is refused at once with 429 and ``Retry-After``. On
    the leader a call that arrives while a fire batch is due within ``firing_lead_ms`` or waits
    for its commit waits until the batch committed, at most ``firing_hold_ms`` (0: never waits).
    Each node reads its own copy; nothing replicated depends on these."""

    max_calls: int = 64
    max_waiting: int = 256
    firing_hold_ms: int = 100
    firing_lead_ms: int = 20

    def __post_init__(self) -> None:
        _validate_instance(self, "api", API_RULES, None)


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    """The ``[metrics]`` table. ``per_task`` adds a ``task`` label to the per-owner counters
    (fires, runs finished, attempts): one series per task and outcome, so meant for clusters of
    hundreds of tasks, not a million. Off by default."""

    per_task: bool = False


DEFAULT_VERIFY_EVERY_S = 3600
MAX_VERIFY_EVERY_S = 30 * 86_400


@dataclass(frozen=True, slots=True)
class StorageSettings:
    """The ``[storage]`` table: limits of each node's LMDB state store.

    ``map_size`` is the most the store may grow to, in bytes (in a file also a string such as
    ``"64GiB"``, see :func:`parse_size`), between 256 KiB and 1 PiB. It reserves address space,
    not disk. A node warns when the store passes 80 % of it; a node whose store is full stops
    leading and exits, and a restart with a larger ``map_size`` catches up. Raises
    :class:`ConfigError` if out of range.

    ``verify_every_seconds``: how often a running node reads its whole store and checks it
    against the checksum committed with it (0: only at start-up); a mismatch makes it unhealthy.
    """

    map_size: int = DEFAULT_MAP_SIZE
    verify_every_seconds: int = DEFAULT_VERIFY_EVERY_S

    def __post_init__(self) -> None:
        problem = map_size_problem(self.map_size)
        if problem:
            raise ConfigError("<config>", [f"storage.map_size: {problem}"])
        if not 0 <= self.verify_every_seconds <= MAX_VERIFY_EVERY_S:
            raise ConfigError(
                "<config>",
                [f"storage.verify_every: must be 0 (off) to 30d, got {self.verify_every_seconds} s"],
            )


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """The ``[tls]`` table: TLS on the node's gRPC port (the Admin and Executor services).

    ``cert_file`` is the node's PEM certificate chain (leaf first) and ``key_file`` its PEM private
    key (unencrypted). ``ca_file`` holds the PEM CA certificates that client certificates are
    checked against and that this node trusts when it dials other nodes; it is required when
    ``require_client_cert`` is true (mutual TLS: a client without a certificate signed by that CA
    is refused during the handshake). Paths are absolute when read from a file.

    Raises :class:`ConfigError` if ``require_client_cert`` is set without ``ca_file``.
    """

    cert_file: Path
    key_file: Path
    ca_file: Path | None = None
    require_client_cert: bool = False
    http: bool = False
    """Serve the node's HTTP listener (console, ``/api/v1/``, ``/metrics``, probes) over TLS too,
    with the same certificate (off by default: existing plaintext scrapers and probes keep
    working; the safe-defaults rule asks for it when the listener is not on loopback)."""
    http_metrics_client_cert: bool = False
    """With ``http``: ``/metrics`` answers only clients presenting a certificate signed by
    ``ca_file`` (other paths take clients with or without one)."""

    def __post_init__(self) -> None:
        if self.require_client_cert and self.ca_file is None:
            raise ConfigError("TlsSettings", [CLIENT_CERT_NEEDS_CA])
        if self.http_metrics_client_cert and (self.ca_file is None or not self.http):
            raise ConfigError("TlsSettings", [METRICS_CERT_NEEDS])


CLIENT_CERT_NEEDS_CA: Final = (
    "tls.ca_file: required when tls.require_client_cert is true (client certificates are checked against it)"
)
METRICS_CERT_NEEDS: Final = (
    "tls.http_metrics_client_cert: needs tls.http = true and tls.ca_file (scrapers' certificates "
    "are checked against it)"
)


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """A whole, valid cluster configuration.

    ``nodes`` keeps file order and has at least one entry; ids, data dirs and all raft and grpc
    addresses are unique (no raft address equals any grpc address either). ``secret`` is at least
    :data:`MIN_SECRET_LENGTH` characters and is left out of ``repr``. ``source`` names where the
    configuration came from (the file path as given) and is used in every error.

    ``tls`` is the ``[tls]`` table (None: plaintext gRPC). ``insecure`` is ``cluster.insecure``:
    only with it may a gRPC address that is not loopback go without TLS and authentication
    (see :meth:`exposure_problems`).

    Raises :class:`ConfigError` if those invariants do not hold.
    """

    name: str
    secret: str = dataclasses.field(repr=False)
    nodes: tuple[NodeConfig, ...]
    raft: RaftTuning = dataclasses.field(default_factory=RaftTuning)
    scheduler: SchedulerSettings = dataclasses.field(default_factory=SchedulerSettings)
    source: str = "<config>"
    storage: StorageSettings = dataclasses.field(default_factory=StorageSettings)
    metrics: MetricsSettings = dataclasses.field(default_factory=MetricsSettings)
    api: ApiSettings = dataclasses.field(default_factory=ApiSettings)
    tls: TlsSettings | None = None
    insecure: bool = False
    alerts: AlertsConfig = dataclasses.field(default_factory=AlertsConfig)
    auth: AuthSettings | None = None  # the [auth] table; None: the gRPC API is unauthenticated
    events: tuple[EventHook, ...] = ()  # the [events.<name>] tables: webhook secrets and keys

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))  # a list would make the value unhashable
        problems: list[str] = []
        if not isinstance(self.name, str) or not self.name.strip():
            problems.append("cluster.name: must be a non-empty string")
        check_secret("cluster.secret", self.secret, problems)
        if not self.nodes:
            problems.append("nodes: at least one node is required")
        keys = [
            NodeKeys(
                f"nodes[{i}]",
                n.id,
                canonical_address(n.raft),
                canonical_address(n.grpc),
                n.data_dir,
                canonical_address(n.grpc_bind) if n.grpc_bind is not None else None,
                {peer: canonical_address(via) for peer, via in n.raft_via},
                canonical_address(n.http) if n.http is not None else None,
                canonical_address(n.raft_bind) if n.raft_bind is not None else None,
            )
            for i, n in enumerate(self.nodes)
        ]
        problems.extend(node_set_problems(keys))
        problems.extend(raft_via_problems(keys))
        if not problems:
            problems.extend(self.exposure_problems())
        if problems:
            raise ConfigError(self.source, problems)

    @property
    def auth_configured(self) -> bool:
        """Whether callers of the gRPC API must authenticate: the ``[auth]`` table is present."""
        return self.auth is not None

    def exposure_problems(self) -> list[str]:
        """The safe-defaults rule: each ``grpc``/``grpc_bind`` address that is not loopback, while
        TLS or authentication is missing and ``insecure`` is not set. Empty when the rule holds."""
        if self.insecure:
            return []
        missing = []
        if self.tls is None:
            missing.append("TLS (the [tls] table)")
        if not self.auth_configured:
            missing.append("authentication (the [auth] table)")
        # The HTTP listener serves the same API (/api/v1/) and the console: the same rule, with
        # TLS on that listener (tls.http).
        http_missing = [m for m in missing if m.startswith("auth")]
        if self.tls is None or not self.tls.http:
            http_missing.insert(0, "TLS on it (the [tls] table with http = true)")
        out = []
        for i, n in enumerate(self.nodes):
            for key, address in (("grpc", n.grpc), ("grpc_bind", n.grpc_bind)):
                if missing and address is not None and not is_loopback(address):
                    out.append(
                        f"nodes[{i}].{key}: {address} is not a loopback address, and serving the "
                        f"gRPC API beyond this machine requires {' and '.join(missing)}; configure "
                        "them, or set cluster.insecure = true to accept the exposure "
                        "(anyone who reaches the port can then run commands on the executors)"
                    )
            if http_missing and n.http is not None and not is_loopback(n.http):
                out.append(
                    f"nodes[{i}].http: {n.http} is not a loopback address, and serving the HTTP "
                    f"API and console beyond this machine requires {' and '.join(http_missing)}; "
                    "configure them, or set cluster.insecure = true to accept the exposure"
                )
        return out

    def node(self, node_id: str) -> NodeConfig:
        """The node with this id. Raises :class:`ConfigError` (listing the known ids) if there is none."""
        for node in self.nodes:
            if node.id == node_id:
                return node
        known = ", ".join(n.id for n in self.nodes)
        raise ConfigError(self.source, [f"nodes: no node with id {node_id!r} (known ids: {known})"])

    def grpc_targets(self) -> list[str]:
        """Every node's gRPC address, in file order (what the CLI and SDK dial)."""
        return [n.grpc for n in self.nodes]

    def raft_peers(self, node_id: str) -> list[str]:
        """The raft addresses ``node_id`` knows its peers by, in file order: each peer's
        ``raft``, or the address ``node_id`` reaches it through (its ``raft_via`` entry).

        Raises :class:`ConfigError` if ``node_id`` is unknown.
        """
        via = dict(self.node(node_id).raft_via)
        return [via.get(n.id, n.raft) for n in self.nodes if n.id != node_id]

    def peer_by_raft(self, node_id: str, raft_addr: str) -> NodeConfig | None:
        """The node that ``node_id`` knows by ``raft_addr`` (one of :meth:`raft_peers`, or any
        node's own ``raft``), compared in canonical form; None if there is none.

        Raises :class:`ConfigError` if ``node_id`` is unknown.
        """
        wanted = canonical_address(raft_addr)
        for peer, via in self.node(node_id).raft_via:
            if wanted is not None and canonical_address(via) == wanted:
                return self.node(peer)
        return self.node_by_raft(raft_addr)

    def node_by_raft(self, raft_addr: str) -> NodeConfig | None:
        """The node whose raft address equals ``raft_addr`` (compared in canonical form), else None.

        An unparseable ``raft_addr`` matches nothing.
        """
        wanted = canonical_address(raft_addr)
        if wanted is None:
            return None
        for node in self.nodes:
            if canonical_address(node.raft) == wanted:
                return node
        return None


@dataclass(frozen=True, slots=True)
class Rule:
    """A range rule: ``ok(value)`` must hold; ``text`` completes "must be ..."."""

    ok: Callable[[float], bool]
    text: str


_POSITIVE: Final = Rule(lambda v: v > 0, "> 0")
_NON_NEGATIVE: Final = Rule(lambda v: v >= 0, ">= 0")
_AT_LEAST_ONE: Final = Rule(lambda v: v >= 1, ">= 1")

RAFT_RULES: Final[Mapping[str, Rule]] = {
    "append_entries_period": _POSITIVE,
    "auto_tick_period": _POSITIVE,
    "raft_min_timeout": _POSITIVE,
    "raft_max_timeout": _POSITIVE,
    "connection_timeout": _POSITIVE,
    "connection_retry_time": _NON_NEGATIVE,
    "leader_fallback_timeout": _POSITIVE,
    "log_compaction_min_entries": Rule(lambda v: v >= 2, ">= 2"),
    "log_compaction_min_time": _POSITIVE,
}

SCHEDULER_RULES: Final[Mapping[str, Rule]] = {
    "misfire_grace_seconds": _NON_NEGATIVE,
    "misfire_all_cap": _AT_LEAST_ONE,
    "misfire_all_window_seconds": _POSITIVE,
    "history_keep_count": _AT_LEAST_ONE,
    "history_keep_seconds": _POSITIVE,
    "idempotency_keep_seconds": _POSITIVE,
    "event_dedupe_window_seconds": _POSITIVE,
    "max_fires_per_batch": Rule(lambda v: 1 <= v <= 100_000, "between 1 and 100000"),
    "max_dispatch_backlog": Rule(lambda v: 0 <= v <= 10_000_000, "between 0 (no limit) and 10000000"),
    "lease_ms": Rule(lambda v: 500 <= v <= 3_600_000, "between 500 and 3600000"),
    "heartbeat_ms": Rule(lambda v: 100 <= v <= 600_000, "between 100 and 600000"),
    "kill_grace_ms": _NON_NEGATIVE,
    "retry_backoff_ms": _NON_NEGATIVE,
    "retry_backoff_cap_ms": _NON_NEGATIVE,
    "max_clock_skew_ms": Rule(lambda v: 500 <= v <= 86_400_000, "between 500 and 86400000"),
}

# Keys that hold a duration, and the unit of the field's value (and of a plain TOML number).
Relations = Callable[[str, Mapping[str, Number]], list[str]]


API_RULES: Final[Mapping[str, Rule]] = {
    "max_calls": Rule(lambda v: 1 <= v <= 10_000, "between 1 and 10000"),
    "max_waiting": Rule(lambda v: 0 <= v <= 100_000, "between 0 and 100000"),
    "firing_hold_ms": Rule(lambda v: 0 <= v <= 10_000, "between 0 (never wait) and 10000"),
    "firing_lead_ms": Rule(lambda v: 0 <= v <= 1_000, "between 0 and 1000"),
}


def scheduler_relations(prefix: str, v: Mapping[str, Number]) -> list[str]:
    """Executors must heartbeat several times per lease, or healthy ones are declared dead."""
    lease = v.get("lease_ms")
    beat = v.get("heartbeat_ms")
    if lease is not None and beat is not None and not beat * 3 <= lease:
        return [f"{prefix}.heartbeat_ms: must be at most lease_ms / 3 ({lease / 3:g}), got {beat!r}"]
    return []


def raft_relations(prefix: str, v: Mapping[str, Number]) -> list[str]:
    """Cross-field rules, checked only between values that are valid on their own."""
    out: list[str] = []
    aep = v.get("append_entries_period")
    lo = v.get("raft_min_timeout")
    hi = v.get("raft_max_timeout")
    conn = v.get("connection_timeout")
    fallback = v.get("leader_fallback_timeout")
    if aep is not None and lo is not None and not lo > 3 * aep:
        out.append(
            f"{prefix}.raft_min_timeout: must be > 3 * append_entries_period ({3 * aep:g}), got {lo!r}"
        )
    if lo is not None and hi is not None and not hi > lo:
        # Strictly greater: pysyncobj draws the election timeout from [min, max) and asserts max > min.
        out.append(f"{prefix}.raft_max_timeout: must be > raft_min_timeout ({lo!r}), got {hi!r}")
    if hi is not None and conn is not None and not conn >= hi:
        out.append(f"{prefix}.connection_timeout: must be >= raft_max_timeout ({hi!r}), got {conn!r}")
    if aep is not None and fallback is not None and not fallback > aep:
        out.append(
            f"{prefix}.leader_fallback_timeout: must be > append_entries_period ({aep!r}), got {fallback!r}"
        )
    return out


Section = TypeVar("Section", RaftTuning, SchedulerSettings, ApiSettings)


def section_defaults(cls: type[RaftTuning | SchedulerSettings | ApiSettings]) -> dict[str, Number]:
    """Field name → default, for the all-number dataclasses; the default's type is the field's type."""
    out: dict[str, Number] = {}
    for f in fields(cls):
        default: object = f.default
        if isinstance(default, int | float):
            out[f.name] = default
    return out


def check_numbers(
    prefix: str,
    values: Mapping[str, object],
    cls: type[RaftTuning | SchedulerSettings | ApiSettings],
    rules: Mapping[str, Rule],
    relations: Relations | None,
    problems: list[str],
    skip: frozenset[str] = frozenset(),
) -> dict[str, Number]:
    """Type- and range-check every field of ``cls`` (absent ones take their default).

    Fields in ``skip`` (already reported unreadable) are left out, also from the relations.

    Returns the valid values, converted to their field's type (an int where a float is expected
    becomes a float).
    """
    good: dict[str, Number] = {}
    for name, default in section_defaults(cls).items():
        if name in skip:
            continue
        path = key_path(prefix, name)
        number = as_number(path, values.get(name, default), type(default), problems)
        if number is None:
            continue
        rule = rules[name]
        if not rule.ok(number):
            problems.append(f"{path}: must be {rule.text}, got {number!r}")
            continue
        good[name] = number
    if relations is not None:
        problems.extend(relations(prefix, good))
    return good


def _validate_instance(
    obj: RaftTuning | SchedulerSettings | ApiSettings,
    prefix: str,
    rules: Mapping[str, Rule],
    relations: Relations | None,
) -> None:
    problems: list[str] = []
    values = {f.name: getattr(obj, f.name) for f in fields(obj)}
    good = check_numbers(prefix, values, type(obj), rules, relations, problems)
    if problems:
        raise ConfigError(type(obj).__name__, problems)
    for name, number in good.items():
        if type(values[name]) is not type(number):  # an int given for a float field
            object.__setattr__(obj, name, number)


@dataclass(frozen=True, slots=True)
class NodeKeys:
    """The parts of one node that passed their own checks (None where they did not)."""

    path: str
    id: str | None
    raft: str | None
    grpc: str | None
    data_dir: Path | None
    grpc_bind: str | None = None
    raft_via: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    http: str | None = None
    raft_bind: str | None = None


def raft_via_problems(nodes: Sequence[NodeKeys]) -> list[str]:
    """``raft_via`` entries must name another node and respect pysyncobj's dialling rule: of two
    nodes only the one whose address sorts after the other's dials, and it dials an address only
    if that sorts before its own. An entry on the other side would break the link."""
    out: list[str] = []
    by_id = {n.id: n for n in nodes if n.id is not None}
    taken = {a: f"{n.path}.{k}" for n in nodes for k, a in (("raft", n.raft), ("grpc", n.grpc)) if a}
    for n in nodes:
        used: dict[str, str] = {}
        for peer, via in n.raft_via.items():
            where = key_path(f"{n.path}.raft_via", peer)
            other = by_id.get(peer)
            if other is None or peer == n.id:
                what = "this node itself" if peer == n.id else "no node has this id"
                out.append(f"{where}: {what}; expected the id of another node")
                continue
            if via is None or n.raft is None or other.raft is None:
                continue
            if not n.raft > other.raft:
                out.append(
                    f"{where}: this node never dials {peer} (pysyncobj dials only from the node whose "
                    f"raft address sorts after the other's: {n.raft} < {other.raft}); "
                    f"set the entry on {peer} instead"
                )
            elif not via < n.raft:
                out.append(
                    f"{where}: {via} must sort before this node's raft address {n.raft} "
                    "(pysyncobj only dials addresses that sort before its own)"
                )
            if via in used:
                out.append(f"{where}: {via} is also the address of peer {used[via]}")
            used[via] = peer
            if via in taken and via != other.raft:
                out.append(f"{where}: {via} is {taken[via]}, not {peer}'s raft address")
    return out


def node_set_problems(nodes: Iterable[NodeKeys]) -> list[str]:
    """Uniqueness across nodes: ids, data dirs, and raft and grpc addresses all in one namespace."""
    out: list[str] = []
    ids: dict[str, str] = {}
    addresses: dict[str, str] = {}
    dirs: dict[Path, str] = {}
    for n in nodes:
        if n.id is not None:
            if n.id in ids:
                out.append(f"{n.path}.id: duplicate id {n.id!r} (also {ids[n.id]}.id)")
            else:
                ids[n.id] = n.path
        bind = n.grpc_bind if n.grpc_bind != n.grpc else None
        raft_bind = n.raft_bind if n.raft_bind != n.raft else None
        for key, address in (
            ("raft", n.raft),
            ("raft_bind", raft_bind),
            ("grpc", n.grpc),
            ("grpc_bind", bind),
            ("http", n.http),
        ):
            if address is None:
                continue
            if address in addresses:
                out.append(f"{n.path}.{key}: address {address} already used by {addresses[address]}")
            else:
                addresses[address] = f"{n.path}.{key}"
        if n.data_dir is not None:
            if n.data_dir in dirs:
                out.append(f"{n.path}.data_dir: {n.data_dir} is also the data_dir of {dirs[n.data_dir]}")
            else:
                dirs[n.data_dir] = n.path
    return out
