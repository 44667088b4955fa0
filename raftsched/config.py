"""Cluster configuration: one TOML file → frozen, validated values.

Every node (``raftsched-node --config cluster.toml --node-id n1``) and the CLI
(``raftsched --config cluster.toml ...``) read the same file. It is validated as a whole before
anything starts: :class:`raftsched.errors.ConfigError` lists *every* problem at once, each prefixed
with its key path (``nodes[2].raft: port 70000 out of range (1-65535)``). ``nodes[i]`` counts the
``[[nodes]]`` tables from 0 in file order. Unknown keys are problems too, so a typo is never
silently ignored.

The value types validate again at construction, so a hand-built :class:`ClusterConfig` (in tests,
in :mod:`raftsched.testing`) holds the same invariants as one read from a file.

This module reads no clock and starts nothing. :func:`parse_config` reads one file at most: the
``cluster.secret_file``, when given. The ``[tls]`` files are only named here; the node reads and
checks them when it starts serving (:mod:`raftsched.security.tls`), and again on SIGHUP.

Safe defaults: a configuration whose gRPC API would be reachable beyond this machine (any
``grpc`` or ``grpc_bind`` address that is not loopback) is refused unless TLS *and*
authentication are configured, or ``cluster.insecure = true`` says the exposure is deliberate.
The same holds for a node's HTTP listener (``http``, which serves the HTTP/JSON API and the
console), with TLS on that listener (``tls.http = true``).
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import json
import math
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import date, datetime, time
from pathlib import Path
from typing import Final, TypeVar

from raftsched.alerts.config import AlertsConfig, parse_alerts
from raftsched.errors import ConfigError, InvalidSpec
from raftsched.security.auth import AuthSettings, parse_auth_table
from raftsched.timing.durations import UNIT_MS, Unit, parse_duration_ms
from raftsched.workflow.located import type_name

__all__ = [
    "MIN_SECRET_LENGTH",
    "ClusterConfig",
    "NodeConfig",
    "RaftTuning",
    "SchedulerSettings",
    "StorageSettings",
    "TlsSettings",
    "load_config",
    "parse_address",
    "parse_config",
    "parse_map_size",
    "parse_size",
]

MIN_SECRET_LENGTH: Final = 16
"""Shortest accepted ``cluster.secret``, in characters."""

DEFAULT_CLUSTER_NAME: Final = "raftsched"

_NODE_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PORT: Final = re.compile(r"[0-9]+")
_HOST_LABEL: Final = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
_DOTTED_NUMBERS: Final = re.compile(r"[0-9.]+")
_BARE_KEY: Final = re.compile(r"[A-Za-z0-9_-]+")

_SECRET_REQUIRED: Final = (
    "cluster.secret: required (a shared secret of at least 16 characters; "
    "the Raft port accepts pickle from anyone without one)"
)

_Number = int | float


# ----------------------------------------------------------------------------------------------
# Value types
# ----------------------------------------------------------------------------------------------


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
        _check_node_id("id", self.id, problems)
        raft = _check_peer_address("raft", self.raft, problems)
        grpc = _check_peer_address("grpc", self.grpc, problems)
        if raft is not None and raft == grpc:
            problems.append(f"grpc: address {grpc} already used by raft")
        if self.grpc_bind is not None:
            _check_bind_address("grpc_bind", self.grpc_bind, problems)
        if self.http is not None:
            _check_bind_address("http", self.http, problems)
        if self.raft_bind is not None:
            _check_bind_address("raft_bind", self.raft_bind, problems)
        for peer, via in self.raft_via:
            _check_node_id(f"raft_via: peer id {peer!r}", peer, problems)
            _check_peer_address(_key("raft_via", str(peer)), via, problems)
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
    auto_tick_period: float = 0.005
    raft_min_timeout: float = 0.4
    raft_max_timeout: float = 1.4
    connection_timeout: float = 3.5
    connection_retry_time: float = 1.0
    leader_fallback_timeout: float = 2.0
    log_compaction_min_entries: int = 20000
    log_compaction_min_time: int = 300

    def __post_init__(self) -> None:
        _validate_instance(self, "raft", _RAFT_RULES, _raft_relations)


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
    max_fires_per_batch: int = 1000
    lease_ms: int = 10_000
    heartbeat_ms: int = 2_000
    kill_grace_ms: int = 5_000
    retry_backoff_ms: int = 10_000
    retry_backoff_cap_ms: int = 900_000
    # How far a node's clock may be from the majority's before it stops leading (and committed
    # leader time from a new leader's clock before it is a clock fault); see raftsched.clockwatch.
    max_clock_skew_ms: int = 10_000

    def __post_init__(self) -> None:
        _validate_instance(self, "scheduler", _SCHEDULER_RULES, _scheduler_relations)


DEFAULT_MAP_SIZE: Final = 64 << 30
"""The default LMDB map size (64 GiB): address space only, no disk until data fills it."""

MIN_MAP_SIZE: Final = 256 << 10
MAX_MAP_SIZE: Final = 1 << 50  # 1 PiB: beyond any disk, below what LMDB's page numbers allow

_SIZE: Final = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*")
_SIZE_UNITS: Final[Mapping[str, int]] = {
    "": 1,
    "b": 1,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}


def parse_size(value: object, field: str = "size") -> int:
    """A byte count from an integer or a string such as ``"64GiB"``, ``"512MiB"``, ``"1.5GB"``.

    Units (case-insensitive): ``B``, ``KiB``/``MiB``/``GiB``/``TiB`` (powers of 1024) and
    ``KB``/``MB``/``GB``/``TB`` (powers of 1000); no unit means bytes. The result must be a whole
    number of bytes. Raises :class:`InvalidSpec` (naming ``field``) for anything else.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidSpec(field, f"expected a size such as 512MiB or 64GiB, got {_type_name(value)}")
    if isinstance(value, int):
        if value < 0:
            raise InvalidSpec(field, f"must not be negative, got {value}")
        return value
    m = _SIZE.fullmatch(value)
    unit = _SIZE_UNITS.get(m.group(2).lower()) if m else None
    if m is None or unit is None:
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise InvalidSpec(
            field, f"{shown!r} is not a size (a number and one of B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
        )
    number = m.group(1)
    whole, _, frac = number.partition(".")
    scale: int = 10 ** len(frac)
    size, rest = divmod((int(whole) * scale + int(frac or "0")) * unit, scale)
    if rest:
        raise InvalidSpec(field, f"{value!r} is not a whole number of bytes")
    return size


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
        problem = _map_size_problem(self.map_size)
        if problem:
            raise ConfigError("<config>", [f"storage.map_size: {problem}"])
        if not 0 <= self.verify_every_seconds <= MAX_VERIFY_EVERY_S:
            raise ConfigError(
                "<config>",
                [f"storage.verify_every: must be 0 (off) to 30d, got {self.verify_every_seconds} s"],
            )


def parse_map_size(value: object, field: str = "map_size") -> int:
    """An LMDB map size: :func:`parse_size`, then 256 KiB to 1 PiB. Raises :class:`InvalidSpec`."""
    size = parse_size(value, field)
    problem = _map_size_problem(size)
    if problem:
        raise InvalidSpec(field, problem)
    return size


def _map_size_problem(size: int) -> str | None:
    if not MIN_MAP_SIZE <= size <= MAX_MAP_SIZE:
        return f"must be between 256KiB and 1PiB, got {size} bytes"
    return None


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
            raise ConfigError("TlsSettings", [_CLIENT_CERT_NEEDS_CA])
        if self.http_metrics_client_cert and (self.ca_file is None or not self.http):
            raise ConfigError("TlsSettings", [_METRICS_CERT_NEEDS])


_CLIENT_CERT_NEEDS_CA: Final = (
    "tls.ca_file: required when tls.require_client_cert is true (client certificates are checked against it)"
)
_METRICS_CERT_NEEDS: Final = (
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
    tls: TlsSettings | None = None
    insecure: bool = False
    alerts: AlertsConfig = dataclasses.field(default_factory=AlertsConfig)
    auth: AuthSettings | None = None  # the [auth] table; None: the gRPC API is unauthenticated

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))  # a list would make the value unhashable
        problems: list[str] = []
        if not isinstance(self.name, str) or not self.name.strip():
            problems.append("cluster.name: must be a non-empty string")
        _check_secret("cluster.secret", self.secret, problems)
        if not self.nodes:
            problems.append("nodes: at least one node is required")
        keys = [
            _NodeKeys(
                f"nodes[{i}]",
                n.id,
                _canonical(n.raft),
                _canonical(n.grpc),
                n.data_dir,
                _canonical(n.grpc_bind) if n.grpc_bind is not None else None,
                {peer: _canonical(via) for peer, via in n.raft_via},
                _canonical(n.http) if n.http is not None else None,
                _canonical(n.raft_bind) if n.raft_bind is not None else None,
            )
            for i, n in enumerate(self.nodes)
        ]
        problems.extend(_node_set_problems(keys))
        problems.extend(_raft_via_problems(keys))
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
        wanted = _canonical(raft_addr)
        for peer, via in self.node(node_id).raft_via:
            if wanted is not None and _canonical(via) == wanted:
                return self.node(peer)
        return self.node_by_raft(raft_addr)

    def node_by_raft(self, raft_addr: str) -> NodeConfig | None:
        """The node whose raft address equals ``raft_addr`` (compared in canonical form), else None.

        An unparseable ``raft_addr`` matches nothing.
        """
        wanted = _canonical(raft_addr)
        if wanted is None:
            return None
        for node in self.nodes:
            if _canonical(node.raft) == wanted:
                return node
        return None


# ----------------------------------------------------------------------------------------------
# Entry points
# ----------------------------------------------------------------------------------------------


def load_config(path: str | Path) -> ClusterConfig:
    """Read and validate a TOML config file.

    Relative paths inside it (``data_dir``, ``secret_file``) resolve against the file's directory.
    Raises :class:`ConfigError` (``source`` is ``str(path)``) if the file cannot be read, is not
    valid TOML (the message carries tomllib's line and column), or describes an invalid cluster.
    """
    file = Path(path)
    source = str(path)
    try:
        with file.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(source, ["cannot read config file: no such file"]) from None
    except OSError as e:
        raise ConfigError(source, [f"cannot read config file: {e.strerror or e}"]) from None
    except UnicodeDecodeError as e:
        raise ConfigError(source, [f"config file is not valid UTF-8 (byte {e.start})"]) from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(source, [f"TOML syntax error: {e}"]) from None
    return parse_config(data, source=source, base_dir=file.absolute().parent)


def parse_config(
    data: Mapping[str, object], source: str = "<config>", base_dir: Path | None = None
) -> ClusterConfig:
    """Validate already-parsed TOML data (as :func:`tomllib.loads` returns it).

    Relative paths resolve against ``base_dir`` (default: the current directory), so every
    ``data_dir`` in the result is absolute. If ``cluster.secret_file`` is given, it is read here.
    Raises :class:`ConfigError` listing every problem, each with its key path.
    """
    base = (base_dir if base_dir is not None else Path.cwd()).absolute()
    problems: list[str] = []
    if not isinstance(data, Mapping):
        raise ConfigError(source, [f"expected a table at the top level, got {_type_name(data)}"])
    top_level = ("cluster", "raft", "scheduler", "storage", "metrics", "tls", "auth", "nodes", "alerts")
    _unknown_keys("", data, top_level, problems)
    auth_table = _table(data, "auth", problems) if "auth" in data else None
    auth = parse_auth_table(auth_table, base, problems) if auth_table is not None else None

    cluster_table = _table(data, "cluster", problems)
    name, secret = _parse_cluster(cluster_table, base, problems)
    insecure = _parse_insecure(cluster_table, problems)
    tls_table = data.get("tls", _MISSING)
    tls = (
        _parse_tls(_table(data, "tls", problems), base, problems)
        if not isinstance(tls_table, _Missing)
        else None
    )
    raft = _parse_section(
        _table(data, "raft", problems), "raft", RaftTuning, _RAFT_RULES, _raft_relations, problems
    )
    scheduler = _parse_section(
        _table(data, "scheduler", problems),
        "scheduler",
        SchedulerSettings,
        _SCHEDULER_RULES,
        _scheduler_relations,
        problems,
    )
    storage = _parse_storage(_table(data, "storage", problems), problems)
    metrics = _parse_metrics(_table(data, "metrics", problems), problems)
    nodes = _parse_nodes(data.get("nodes", _MISSING), base, problems)
    alerts = parse_alerts(_table(data, "alerts", problems), base, problems)

    if (
        problems
        or name is None
        or secret is None
        or raft is None
        or scheduler is None
        or storage is None
        or nodes is None
    ):
        raise ConfigError(source, problems or ["invalid configuration"])
    return ClusterConfig(
        name=name,
        secret=secret,
        nodes=nodes,
        raft=raft,
        scheduler=scheduler,
        source=source,
        storage=storage,
        metrics=metrics,
        tls=tls,
        insecure=insecure,
        alerts=alerts,
        auth=auth,
    )


def _parse_storage(table: Mapping[str, object] | None, problems: list[str]) -> StorageSettings | None:
    if table is None:
        return None
    _unknown_keys("storage", table, ("map_size", "verify_every"), problems)
    try:
        size = parse_map_size(table.get("map_size", DEFAULT_MAP_SIZE), "storage.map_size")
        raw = table.get("verify_every", DEFAULT_VERIFY_EVERY_S)
        if isinstance(raw, bool) or not isinstance(raw, int | str):
            raise InvalidSpec("storage.verify_every", f'expected a duration such as "1h", got {raw!r}')
        every_ms = raw * 1000 if isinstance(raw, int) else parse_duration_ms(raw, "storage.verify_every")
        if every_ms % 1000 or not 0 <= every_ms <= MAX_VERIFY_EVERY_S * 1000:
            raise InvalidSpec("storage.verify_every", f"must be whole seconds, 0 (off) to 30d, got {raw!r}")
    except InvalidSpec as exc:
        problems.append(str(exc))
        return None
    return StorageSettings(map_size=size, verify_every_seconds=every_ms // 1000)


def _parse_metrics(table: Mapping[str, object] | None, problems: list[str]) -> MetricsSettings:
    if table is None:
        return MetricsSettings()
    _unknown_keys("metrics", table, ("per_task",), problems)
    per_task = table.get("per_task", False)
    if not isinstance(per_task, bool):
        problems.append(f"metrics.per_task: expected true or false, got {_type_name(per_task)}")
        return MetricsSettings()
    return MetricsSettings(per_task=per_task)


def is_loopback(address: str) -> bool:
    """Whether ``host:port`` names this machine only: a loopback IP literal (127.0.0.0/8, ::1)
    or ``localhost`` (and names under ``.localhost``). Any other hostname counts as exposed:
    what it resolves to is not known here. An unparseable address is not loopback."""
    try:
        host, _ = parse_address(address, "")
    except InvalidSpec:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost" or host.endswith(".localhost")


def parse_address(value: str, field: str) -> tuple[str, int]:
    """Split ``host:port`` (IPv6 as ``[::1]:7001``) into ``(host, port)``.

    The host comes back without brackets; an IP literal is compressed, a hostname lower-cased.
    The port is 1-65535. Raises :class:`InvalidSpec` naming ``field`` if the value is malformed.
    """
    if not isinstance(value, str):
        raise InvalidSpec(field, f"expected a host:port string, got {_type_name(value)}")
    example = "e.g. 127.0.0.1:7001 or [::1]:7001"
    if not value:
        raise InvalidSpec(field, f"empty address; expected host:port, {example}")
    if value.startswith("["):
        host, sep, port_text = value[1:].partition("]:")
        if not sep:
            raise InvalidSpec(field, f"{value!r}: expected [ipv6-address]:port, {example}")
        try:
            ip = ipaddress.IPv6Address(host)
        except ValueError:
            raise InvalidSpec(field, f"{value!r}: {host!r} is not an IPv6 address") from None
        host = ip.compressed
    else:
        host, sep, port_text = value.rpartition(":")
        if not sep:
            raise InvalidSpec(field, f"{value!r}: missing port; expected host:port, {example}")
        if ":" in host:
            raise InvalidSpec(field, f"{value!r}: an IPv6 address needs brackets, e.g. [::1]:7001")
        host = _check_host(value, host, field)
    if not port_text:
        raise InvalidSpec(field, f"{value!r}: missing port; expected host:port, {example}")
    if not _PORT.fullmatch(port_text):
        raise InvalidSpec(field, f"{value!r}: port {port_text!r} is not a number")
    digits = port_text.lstrip("0") or "0"
    port = int(digits) if len(digits) <= 5 else 0  # int() of thousands of digits would raise
    if not 1 <= port <= 65535:
        raise InvalidSpec(field, f"port {digits} out of range (1-65535)")
    return host, port


# ----------------------------------------------------------------------------------------------
# Sections
# ----------------------------------------------------------------------------------------------


class _Missing:
    """Marks an absent key (TOML has no null, but a Python caller may pass None)."""


_MISSING: Final = _Missing()


@dataclass(frozen=True, slots=True)
class _Rule:
    """A range rule: ``ok(value)`` must hold; ``text`` completes "must be ..."."""

    ok: Callable[[float], bool]
    text: str


_POSITIVE: Final = _Rule(lambda v: v > 0, "> 0")
_NON_NEGATIVE: Final = _Rule(lambda v: v >= 0, ">= 0")
_AT_LEAST_ONE: Final = _Rule(lambda v: v >= 1, ">= 1")

_RAFT_RULES: Final[Mapping[str, _Rule]] = {
    "append_entries_period": _POSITIVE,
    "auto_tick_period": _POSITIVE,
    "raft_min_timeout": _POSITIVE,
    "raft_max_timeout": _POSITIVE,
    "connection_timeout": _POSITIVE,
    "connection_retry_time": _NON_NEGATIVE,
    "leader_fallback_timeout": _POSITIVE,
    "log_compaction_min_entries": _Rule(lambda v: v >= 2, ">= 2"),
    "log_compaction_min_time": _POSITIVE,
}

_SCHEDULER_RULES: Final[Mapping[str, _Rule]] = {
    "misfire_grace_seconds": _NON_NEGATIVE,
    "misfire_all_cap": _AT_LEAST_ONE,
    "misfire_all_window_seconds": _POSITIVE,
    "history_keep_count": _AT_LEAST_ONE,
    "history_keep_seconds": _POSITIVE,
    "idempotency_keep_seconds": _POSITIVE,
    "max_fires_per_batch": _Rule(lambda v: 1 <= v <= 100_000, "between 1 and 100000"),
    "lease_ms": _Rule(lambda v: 500 <= v <= 3_600_000, "between 500 and 3600000"),
    "heartbeat_ms": _Rule(lambda v: 100 <= v <= 600_000, "between 100 and 600000"),
    "kill_grace_ms": _NON_NEGATIVE,
    "retry_backoff_ms": _NON_NEGATIVE,
    "retry_backoff_cap_ms": _NON_NEGATIVE,
    "max_clock_skew_ms": _Rule(lambda v: 500 <= v <= 86_400_000, "between 500 and 86400000"),
}

# Keys that hold a duration, and the unit of the field's value (and of a plain TOML number).
_DURATION_UNITS: Final[Mapping[str, Unit]] = {
    "append_entries_period": "s",
    "auto_tick_period": "s",
    "raft_min_timeout": "s",
    "raft_max_timeout": "s",
    "connection_timeout": "s",
    "connection_retry_time": "s",
    "leader_fallback_timeout": "s",
    "log_compaction_min_time": "s",
    "misfire_grace_seconds": "s",
    "misfire_all_window_seconds": "s",
    "history_keep_seconds": "s",
    "idempotency_keep_seconds": "s",
    "lease_ms": "ms",
    "heartbeat_ms": "ms",
    "kill_grace_ms": "ms",
    "retry_backoff_ms": "ms",
    "retry_backoff_cap_ms": "ms",
    "max_clock_skew_ms": "ms",
}

_Relations = Callable[[str, Mapping[str, _Number]], list[str]]


def _scheduler_relations(prefix: str, v: Mapping[str, _Number]) -> list[str]:
    """Executors must heartbeat several times per lease, or healthy ones are declared dead."""
    lease = v.get("lease_ms")
    beat = v.get("heartbeat_ms")
    if lease is not None and beat is not None and not beat * 3 <= lease:
        return [f"{prefix}.heartbeat_ms: must be at most lease_ms / 3 ({lease / 3:g}), got {beat!r}"]
    return []


def _raft_relations(prefix: str, v: Mapping[str, _Number]) -> list[str]:
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


_Section = TypeVar("_Section", RaftTuning, SchedulerSettings)


def _defaults(cls: type[RaftTuning | SchedulerSettings]) -> dict[str, _Number]:
    """Field name → default, for the all-number dataclasses; the default's type is the field's type."""
    out: dict[str, _Number] = {}
    for f in fields(cls):
        default: object = f.default
        if isinstance(default, int | float):
            out[f.name] = default
    return out


def _check_numbers(
    prefix: str,
    values: Mapping[str, object],
    cls: type[RaftTuning | SchedulerSettings],
    rules: Mapping[str, _Rule],
    relations: _Relations | None,
    problems: list[str],
    skip: frozenset[str] = frozenset(),
) -> dict[str, _Number]:
    """Type- and range-check every field of ``cls`` (absent ones take their default).

    Fields in ``skip`` (already reported unreadable) are left out, also from the relations.

    Returns the valid values, converted to their field's type (an int where a float is expected
    becomes a float).
    """
    good: dict[str, _Number] = {}
    for name, default in _defaults(cls).items():
        if name in skip:
            continue
        path = _key(prefix, name)
        number = _as_number(path, values.get(name, default), type(default), problems)
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
    obj: RaftTuning | SchedulerSettings, prefix: str, rules: Mapping[str, _Rule], relations: _Relations | None
) -> None:
    problems: list[str] = []
    values = {f.name: getattr(obj, f.name) for f in fields(obj)}
    good = _check_numbers(prefix, values, type(obj), rules, relations, problems)
    if problems:
        raise ConfigError(type(obj).__name__, problems)
    for name, number in good.items():
        if type(values[name]) is not type(number):  # an int given for a float field
            object.__setattr__(obj, name, number)


def _parse_section(
    table: Mapping[str, object] | None,
    prefix: str,
    cls: type[_Section],
    rules: Mapping[str, _Rule],
    relations: _Relations | None,
    problems: list[str],
) -> _Section | None:
    if table is None:
        return None
    _unknown_keys(prefix, table, tuple(_defaults(cls)), problems)
    before = len(problems)
    values, unreadable = _durations_read(prefix, table, cls, problems)
    good = _check_numbers(prefix, values, cls, rules, relations, problems, skip=unreadable)
    build: Callable[..., _Section] = cls  # the values were checked against the fields just above
    return build(**good) if len(problems) == before else None


def _durations_read(
    prefix: str, table: Mapping[str, object], cls: type[RaftTuning | SchedulerSettings], problems: list[str]
) -> tuple[dict[str, object], frozenset[str]]:
    """``table`` with each duration string converted to its key's unit, and the keys that failed.

    A failed key is reported here; the caller leaves it out (the section is refused anyway), so
    a default never stands in for a value the file got wrong.
    """
    kinds = _defaults(cls)
    out: dict[str, object] = {}
    failed: set[str] = set()
    for key, value in table.items():
        unit = _DURATION_UNITS.get(key)
        if unit is None or not isinstance(value, str) or key not in kinds:
            out[key] = value
            continue
        path = _key(prefix, key)
        try:
            ms = parse_duration_ms(value, path, bare_unit=None)  # a string says its unit
        except InvalidSpec as bad:
            problems.append(f"{path}: {bad.reason}")
            failed.add(key)
            continue
        per_unit = UNIT_MS[unit]
        if isinstance(kinds[key], float):
            out[key] = ms / per_unit
        elif ms % per_unit:  # only seconds can fail: every duration is a whole number of ms
            problems.append(f"{path}: {value!r} is not a whole number of seconds")
            failed.add(key)
        else:
            out[key] = ms // per_unit
    return out, frozenset(failed)


def _parse_cluster(
    table: Mapping[str, object] | None, base: Path, problems: list[str]
) -> tuple[str | None, str | None]:
    if table is None:
        return None, None
    _unknown_keys("cluster", table, ("name", "secret", "secret_file", "insecure"), problems)

    name: str | None = DEFAULT_CLUSTER_NAME
    if "name" in table:
        name = _string("cluster.name", table["name"], problems)
        if name is not None and not name.strip():
            problems.append("cluster.name: must not be empty")
            name = None

    has_secret, has_file = "secret" in table, "secret_file" in table
    if has_secret and has_file:
        problems.append("cluster.secret_file: set exactly one of cluster.secret and cluster.secret_file")
        return name, None
    if has_secret:
        return name, _check_secret("cluster.secret", table["secret"], problems)
    if has_file:
        return name, _read_secret_file(table["secret_file"], base, problems)
    problems.append(_SECRET_REQUIRED)
    return name, None


def _parse_insecure(table: Mapping[str, object] | None, problems: list[str]) -> bool:
    if table is None or "insecure" not in table:
        return False
    value = table["insecure"]
    if not isinstance(value, bool):
        problems.append(f"cluster.insecure: expected a boolean (true or false), got {_type_name(value)}")
        return False
    return value


_TLS_KEYS: Final = (
    "cert_file",
    "key_file",
    "ca_file",
    "require_client_cert",
    "http",
    "http_metrics_client_cert",
)


def _parse_tls(table: Mapping[str, object] | None, base: Path, problems: list[str]) -> TlsSettings | None:
    if table is None:
        return None
    before = len(problems)
    _unknown_keys("tls", table, _TLS_KEYS, problems)
    paths: dict[str, Path | None] = {}
    for name in ("cert_file", "key_file", "ca_file"):
        if name in table:
            paths[name] = _resolve_path(f"tls.{name}", table[name], base, problems)
        elif name != "ca_file":
            what = "the node's PEM certificate chain" if name == "cert_file" else "the node's PEM private key"
            problems.append(f"tls.{name}: required ({what})")
    require = table.get("require_client_cert", False)
    if not isinstance(require, bool):
        problems.append(
            f"tls.require_client_cert: expected a boolean (true or false), got {_type_name(require)}"
        )
        require = False
    if require and "ca_file" not in table:
        problems.append(_CLIENT_CERT_NEEDS_CA)
    flags = {}
    for name in ("http", "http_metrics_client_cert"):
        value = table.get(name, False)
        if not isinstance(value, bool):
            problems.append(f"tls.{name}: expected a boolean (true or false), got {_type_name(value)}")
            value = False
        flags[name] = value
    if flags["http_metrics_client_cert"] and ("ca_file" not in table or not flags["http"]):
        problems.append(_METRICS_CERT_NEEDS)
    cert_file, key_file = paths.get("cert_file"), paths.get("key_file")
    if len(problems) > before or cert_file is None or key_file is None:
        return None
    return TlsSettings(
        cert_file=cert_file,
        key_file=key_file,
        ca_file=paths.get("ca_file"),
        require_client_cert=require,
        http=flags["http"],
        http_metrics_client_cert=flags["http_metrics_client_cert"],
    )


def _read_secret_file(value: object, base: Path, problems: list[str]) -> str | None:
    path = _resolve_path("cluster.secret_file", value, base, problems)
    if path is None:
        return None
    try:
        # Surrounding whitespace is dropped: `echo secret > file` adds a newline.
        secret = path.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        problems.append(f"cluster.secret_file: {path} is not valid UTF-8 text")
        return None
    except OSError as e:
        problems.append(f"cluster.secret_file: cannot read {path}: {e.strerror or e}")
        return None
    return _check_secret(f"cluster.secret_file: the secret in {path}", secret, problems)


def _check_secret(path: str, value: object, problems: list[str]) -> str | None:
    secret = _string(path, value, problems)
    if secret is not None and len(secret) < MIN_SECRET_LENGTH:
        problems.append(
            f"{path}: too short ({len(secret)} characters; at least {MIN_SECRET_LENGTH} required)"
        )
        return None
    return secret


_NODE_KEYS: Final[Mapping[str, str]] = {
    "id": "1-64 characters from A-Z a-z 0-9 _ -",
    "raft": "host:port of this node's Raft port",
    "grpc": "host:port of this node's gRPC API",
    "data_dir": "the directory this node keeps its state in",
}
_OPTIONAL_NODE_KEYS: Final = ("grpc_bind", "raft_bind", "raft_via", "http")


@dataclass(frozen=True, slots=True)
class _NodeKeys:
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


def _parse_nodes(raw: object, base: Path, problems: list[str]) -> tuple[NodeConfig, ...] | None:
    if isinstance(raw, _Missing) or raw is None:
        problems.append("nodes: required (at least one [[nodes]] table)")
        return None
    if isinstance(raw, str | bytes) or not isinstance(raw, Sequence):
        problems.append(f"nodes: expected an array of tables ([[nodes]]), got {_type_name(raw)}")
        return None
    if not raw:
        problems.append("nodes: at least one node is required")
        return None

    before = len(problems)
    parsed: list[_NodeKeys] = []
    for i, item in enumerate(raw):
        path = f"nodes[{i}]"
        if not isinstance(item, Mapping):
            problems.append(f"{path}: expected a table, got {_type_name(item)}")
            continue
        _unknown_keys(path, item, (*_NODE_KEYS, *_OPTIONAL_NODE_KEYS), problems)
        for key, meaning in _NODE_KEYS.items():
            if key not in item:
                problems.append(f"{path}.{key}: required ({meaning})")
        node_id = _check_node_id(f"{path}.id", item["id"], problems) if "id" in item else None
        raft = _check_peer_address(f"{path}.raft", item["raft"], problems) if "raft" in item else None
        grpc = _check_peer_address(f"{path}.grpc", item["grpc"], problems) if "grpc" in item else None
        data_dir = (
            _resolve_path(f"{path}.data_dir", item["data_dir"], base, problems)
            if "data_dir" in item
            else None
        )
        grpc_bind = (
            _check_bind_address(f"{path}.grpc_bind", item["grpc_bind"], problems)
            if "grpc_bind" in item
            else None
        )
        raft_bind = (
            _check_bind_address(f"{path}.raft_bind", item["raft_bind"], problems)
            if "raft_bind" in item
            else None
        )
        via = _parse_raft_via(f"{path}.raft_via", item.get("raft_via", {}), problems)
        http = _check_bind_address(f"{path}.http", item["http"], problems) if "http" in item else None
        parsed.append(_NodeKeys(path, node_id, raft, grpc, data_dir, grpc_bind, via, http, raft_bind))
    problems.extend(_node_set_problems(parsed))
    problems.extend(_raft_via_problems(parsed))
    if len(problems) > before:
        return None
    # No problems means every part of every node passed; the condition only narrows the types.
    return tuple(
        NodeConfig(
            id=n.id,
            raft=n.raft,
            grpc=n.grpc,
            data_dir=n.data_dir,
            grpc_bind=n.grpc_bind,
            raft_via=tuple((peer, via) for peer, via in n.raft_via.items() if via is not None),
            http=n.http,
            raft_bind=n.raft_bind,
        )
        for n in parsed
        if n.id is not None and n.raft is not None and n.grpc is not None and n.data_dir is not None
    )


def _parse_raft_via(path: str, raw: object, problems: list[str]) -> dict[str, str | None]:
    if not isinstance(raw, Mapping):
        problems.append(f'{path}: expected a table of peer id = "host:port", got {_type_name(raw)}')
        return {}
    return {str(peer): _check_peer_address(_key(path, str(peer)), via, problems) for peer, via in raw.items()}


def _raft_via_problems(nodes: Sequence[_NodeKeys]) -> list[str]:
    """``raft_via`` entries must name another node and respect pysyncobj's dialling rule: of two
    nodes only the one whose address sorts after the other's dials, and it dials an address only
    if that sorts before its own. An entry on the other side would break the link."""
    out: list[str] = []
    by_id = {n.id: n for n in nodes if n.id is not None}
    taken = {a: f"{n.path}.{k}" for n in nodes for k, a in (("raft", n.raft), ("grpc", n.grpc)) if a}
    for n in nodes:
        used: dict[str, str] = {}
        for peer, via in n.raft_via.items():
            where = _key(f"{n.path}.raft_via", peer)
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


def _node_set_problems(nodes: Iterable[_NodeKeys]) -> list[str]:
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


# ----------------------------------------------------------------------------------------------
# Single values
# ----------------------------------------------------------------------------------------------


def _check_node_id(path: str, value: object, problems: list[str]) -> str | None:
    node_id = _string(path, value, problems)
    if node_id is None:
        return None
    if not _NODE_ID.fullmatch(node_id):
        problems.append(f"{path}: invalid id {node_id!r} (1-64 characters from A-Z a-z 0-9 _ -)")
        return None
    return node_id


def _check_peer_address(path: str, value: object, problems: list[str]) -> str | None:
    """Validate an address other nodes and clients dial; return its canonical form."""
    text = _string(path, value, problems)
    if text is None:
        return None
    try:
        host, port = parse_address(text, path)
    except InvalidSpec as e:
        problems.append(str(e))
        return None
    canonical = _format_address(host, port)
    if _is_wildcard(host):
        problems.append(
            f"{path}: {canonical} is a wildcard address; give one that other nodes and clients can dial"
        )
        return None
    return canonical


def _check_host(value: str, host: str, field: str) -> str:
    if not host:
        raise InvalidSpec(field, f"{value!r}: missing host")
    if _DOTTED_NUMBERS.fullmatch(host):
        try:
            return ipaddress.IPv4Address(host).compressed
        except ValueError:
            raise InvalidSpec(field, f"{value!r}: {host!r} is not an IPv4 address") from None
    labels = host.split(".")
    if len(host) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        raise InvalidSpec(field, f"{value!r}: {host!r} is not a valid hostname")
    return host.lower()


def _check_bind_address(path: str, value: object, problems: list[str]) -> str | None:
    """Validate an address to listen on (a wildcard is fine); return its canonical form."""
    text = _string(path, value, problems)
    if text is None:
        return None
    try:
        return _format_address(*parse_address(text, path))
    except InvalidSpec as e:
        problems.append(str(e))
        return None


def _format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _canonical(address: object) -> str | None:
    if not isinstance(address, str):
        return None
    try:
        return _format_address(*parse_address(address, ""))
    except InvalidSpec:
        return None


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _resolve_path(path: str, value: object, base: Path, problems: list[str]) -> Path | None:
    text = _string(path, value, problems)
    if text is None:
        return None
    if not text.strip():
        problems.append(f"{path}: must be a non-empty path")
        return None
    try:
        expanded = os.path.expanduser(text)
    except RuntimeError:  # "~user" for an unknown user
        problems.append(f"{path}: cannot expand {text!r}")
        return None
    # normpath, not resolve(): no filesystem access, and "./data/n1" and "data/n1" compare equal.
    return Path(os.path.normpath(base / expanded))


def _string(path: str, value: object, problems: list[str]) -> str | None:
    if not isinstance(value, str):
        problems.append(f"{path}: expected a string, got {_type_name(value)}")
        return None
    return value


def _as_number(path: str, value: object, kind: type, problems: list[str]) -> _Number | None:
    """``value`` as ``kind`` (int or float): a bool is not a number; an int is accepted as a float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        wanted = "an integer" if kind is int else "a number"
        problems.append(f"{path}: expected {wanted}, got {_type_name(value)}")
        return None
    if kind is int:
        if not isinstance(value, int):
            problems.append(f"{path}: expected an integer, got float {value!r}")
            return None
        return value
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        problems.append(f"{path}: must be a finite number, got {value!r}")
        return None
    return number


def _table(data: Mapping[str, object], key: str, problems: list[str]) -> Mapping[str, object] | None:
    """The table at ``key`` ({} if absent), or None if it is not a table (reported here).

    For None the caller checks nothing inside: "secret required" under a broken [cluster] is noise.
    """
    value = data.get(key, _MISSING)
    if isinstance(value, _Missing) or value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(f"{key}: expected a table ([{key}]), got {_type_name(value)}")
        return None
    return value


def _unknown_keys(
    prefix: str, table: Mapping[str, object], allowed: Sequence[str], problems: list[str]
) -> None:
    for key in table:
        if key in allowed:
            continue
        close = difflib.get_close_matches(str(key), allowed, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"expected one of: {', '.join(allowed)}"
        problems.append(f"{_key(prefix, str(key))}: unknown key ({hint})")


def _key(prefix: str, key: str) -> str:
    """A key path; keys that are not TOML bare keys are quoted as TOML would."""
    part = key if _BARE_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)
    return f"{prefix}.{part}" if prefix else part


def _type_name(value: object) -> str:
    """The TOML name of a value's type, for messages (scalars named as workflow files name them)."""
    if isinstance(value, bool | int | float | str):
        return type_name(value)
    if isinstance(value, Mapping):
        return "table"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, datetime):
        return "datetime"
    if isinstance(value, date):
        return "date"
    if isinstance(value, time):
        return "time"
    return type(value).__name__
