"""One TOML file to a :class:`raftsched.config.types.ClusterConfig`, with every problem listed at
once (see :mod:`raftsched.config`).
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

from raftsched.alerts.config import parse_alerts
from raftsched.config.eventhooks import parse_event_hooks
from raftsched.config.types import (
    API_RULES,
    CLIENT_CERT_NEEDS_CA,
    DEFAULT_VERIFY_EVERY_S,
    MAX_VERIFY_EVERY_S,
    METRICS_CERT_NEEDS,
    RAFT_RULES,
    SCHEDULER_RULES,
    ApiSettings,
    ClusterConfig,
    MetricsSettings,
    NodeConfig,
    NodeKeys,
    RaftTuning,
    Relations,
    Rule,
    SchedulerSettings,
    Section,
    StorageSettings,
    TlsSettings,
    check_numbers,
    node_set_problems,
    raft_relations,
    raft_via_problems,
    scheduler_relations,
    section_defaults,
)
from raftsched.config.values import (
    DEFAULT_MAP_SIZE,
    check_bind_address,
    check_node_id,
    check_peer_address,
    check_secret,
    check_string,
    key_path,
    parse_map_size,
    toml_type_name,
)
from raftsched.errors import ConfigError, InvalidSpec
from raftsched.security.auth import parse_auth_table
from raftsched.timing.durations import UNIT_MS, Unit, parse_duration_ms

DEFAULT_CLUSTER_NAME: Final = "raftsched"

_SECRET_REQUIRED: Final = (
    "cluster.secret: required (a shared secret of at least 16 characters; "
    "the Raft port accepts pickle from anyone without one)"
)


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
        raise ConfigError(source, [f"expected a table at the top level, got {toml_type_name(data)}"])
    top_level = (
        "cluster",
        "raft",
        "scheduler",
        "storage",
        "metrics",
        "api",
        "tls",
        "auth",
        "nodes",
        "alerts",
        "events",
    )
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
        _table(data, "raft", problems), "raft", RaftTuning, RAFT_RULES, raft_relations, problems
    )
    scheduler = _parse_section(
        _table(data, "scheduler", problems),
        "scheduler",
        SchedulerSettings,
        SCHEDULER_RULES,
        scheduler_relations,
        problems,
    )
    storage = _parse_storage(_table(data, "storage", problems), problems)
    metrics = _parse_metrics(_table(data, "metrics", problems), problems)
    api = _parse_section(_table(data, "api", problems), "api", ApiSettings, API_RULES, None, problems)
    nodes = _parse_nodes(data.get("nodes", _MISSING), base, problems)
    alerts = parse_alerts(_table(data, "alerts", problems), base, problems)
    events = parse_event_hooks(_table(data, "events", problems) if "events" in data else None, base, problems)

    if (
        problems
        or name is None
        or secret is None
        or raft is None
        or scheduler is None
        or storage is None
        or api is None
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
        api=api,
        tls=tls,
        insecure=insecure,
        alerts=alerts,
        auth=auth,
        events=events,
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
        problems.append(f"metrics.per_task: expected true or false, got {toml_type_name(per_task)}")
        return MetricsSettings()
    return MetricsSettings(per_task=per_task)


class _Missing:
    """Marks an absent key (TOML has no null, but a Python caller may pass None)."""


_MISSING: Final = _Missing()


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
    "event_dedupe_window_seconds": "s",
    "lease_ms": "ms",
    "heartbeat_ms": "ms",
    "kill_grace_ms": "ms",
    "retry_backoff_ms": "ms",
    "retry_backoff_cap_ms": "ms",
    "max_clock_skew_ms": "ms",
    "firing_hold_ms": "ms",
    "firing_lead_ms": "ms",
}


def _parse_section(
    table: Mapping[str, object] | None,
    prefix: str,
    cls: type[Section],
    rules: Mapping[str, Rule],
    relations: Relations | None,
    problems: list[str],
) -> Section | None:
    if table is None:
        return None
    _unknown_keys(prefix, table, tuple(section_defaults(cls)), problems)
    before = len(problems)
    values, unreadable = _durations_read(prefix, table, cls, problems)
    good = check_numbers(prefix, values, cls, rules, relations, problems, skip=unreadable)
    build: Callable[..., Section] = cls  # the values were checked against the fields just above
    return build(**good) if len(problems) == before else None


def _durations_read(
    prefix: str,
    table: Mapping[str, object],
    cls: type[RaftTuning | SchedulerSettings | ApiSettings],
    problems: list[str],
) -> tuple[dict[str, object], frozenset[str]]:
    """``table`` with each duration string converted to its key's unit, and the keys that failed.

    A failed key is reported here; the caller leaves it out (the section is refused anyway), so
    a default never stands in for a value the file got wrong.
    """
    kinds = section_defaults(cls)
    out: dict[str, object] = {}
    failed: set[str] = set()
    for key, value in table.items():
        unit = _DURATION_UNITS.get(key)
        if unit is None or not isinstance(value, str) or key not in kinds:
            out[key] = value
            continue
        path = key_path(prefix, key)
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
        name = check_string("cluster.name", table["name"], problems)
        if name is not None and not name.strip():
            problems.append("cluster.name: must not be empty")
            name = None

    has_secret, has_file = "secret" in table, "secret_file" in table
    if has_secret and has_file:
        problems.append("cluster.secret_file: set exactly one of cluster.secret and cluster.secret_file")
        return name, None
    if has_secret:
        return name, check_secret("cluster.secret", table["secret"], problems)
    if has_file:
        return name, _read_secret_file(table["secret_file"], base, problems)
    problems.append(_SECRET_REQUIRED)
    return name, None


def _parse_insecure(table: Mapping[str, object] | None, problems: list[str]) -> bool:
    if table is None or "insecure" not in table:
        return False
    value = table["insecure"]
    if not isinstance(value, bool):
        problems.append(f"cluster.insecure: expected a boolean (true or false), got {toml_type_name(value)}")
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
            f"tls.require_client_cert: expected a boolean (true or false), got {toml_type_name(require)}"
        )
        require = False
    if require and "ca_file" not in table:
        problems.append(CLIENT_CERT_NEEDS_CA)
    flags = {}
    for name in ("http", "http_metrics_client_cert"):
        value = table.get(name, False)
        if not isinstance(value, bool):
            problems.append(f"tls.{name}: expected a boolean (true or false), got {toml_type_name(value)}")
            value = False
        flags[name] = value
    if flags["http_metrics_client_cert"] and ("ca_file" not in table or not flags["http"]):
        problems.append(METRICS_CERT_NEEDS)
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
    return check_secret(f"cluster.secret_file: the secret in {path}", secret, problems)


_NODE_KEYS: Final[Mapping[str, str]] = {
    "id": "1-64 characters from A-Z a-z 0-9 _ -",
    "raft": "host:port of this node's Raft port",
    "grpc": "host:port of this node's gRPC API",
    "data_dir": "the directory this node keeps its state in",
}
_OPTIONAL_NODE_KEYS: Final = ("grpc_bind", "raft_bind", "raft_via", "http")


def _parse_nodes(raw: object, base: Path, problems: list[str]) -> tuple[NodeConfig, ...] | None:
    if isinstance(raw, _Missing) or raw is None:
        problems.append("nodes: required (at least one [[nodes]] table)")
        return None
    if isinstance(raw, str | bytes) or not isinstance(raw, Sequence):
        problems.append(f"nodes: expected an array of tables ([[nodes]]), got {toml_type_name(raw)}")
        return None
    if not raw:
        problems.append("nodes: at least one node is required")
        return None

    before = len(problems)
    parsed: list[NodeKeys] = []
    for i, item in enumerate(raw):
        path = f"nodes[{i}]"
        if not isinstance(item, Mapping):
            problems.append(f"{path}: expected a table, got {toml_type_name(item)}")
            continue
        _unknown_keys(path, item, (*_NODE_KEYS, *_OPTIONAL_NODE_KEYS), problems)
        for key, meaning in _NODE_KEYS.items():
            if key not in item:
                problems.append(f"{path}.{key}: required ({meaning})")
        node_id = check_node_id(f"{path}.id", item["id"], problems) if "id" in item else None
        raft = check_peer_address(f"{path}.raft", item["raft"], problems) if "raft" in item else None
        grpc = check_peer_address(f"{path}.grpc", item["grpc"], problems) if "grpc" in item else None
        data_dir = (
            _resolve_path(f"{path}.data_dir", item["data_dir"], base, problems)
            if "data_dir" in item
            else None
        )
        grpc_bind = (
            check_bind_address(f"{path}.grpc_bind", item["grpc_bind"], problems)
            if "grpc_bind" in item
            else None
        )
        raft_bind = (
            check_bind_address(f"{path}.raft_bind", item["raft_bind"], problems)
            if "raft_bind" in item
            else None
        )
        via = _parse_raft_via(f"{path}.raft_via", item.get("raft_via", {}), problems)
        http = check_bind_address(f"{path}.http", item["http"], problems) if "http" in item else None
        parsed.append(NodeKeys(path, node_id, raft, grpc, data_dir, grpc_bind, via, http, raft_bind))
    problems.extend(node_set_problems(parsed))
    problems.extend(raft_via_problems(parsed))
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
        problems.append(f'{path}: expected a table of peer id = "host:port", got {toml_type_name(raw)}')
        return {}
    return {
        str(peer): check_peer_address(key_path(path, str(peer)), via, problems) for peer, via in raw.items()
    }


def _resolve_path(path: str, value: object, base: Path, problems: list[str]) -> Path | None:
    text = check_string(path, value, problems)
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


def _table(data: Mapping[str, object], key: str, problems: list[str]) -> Mapping[str, object] | None:
    """The table at ``key`` ({} if absent), or None if it is not a table (reported here).

    For None the caller checks nothing inside: "secret required" under a broken [cluster] is noise.
    """
    value = data.get(key, _MISSING)
    if isinstance(value, _Missing) or value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(f"{key}: expected a table ([{key}]), got {toml_type_name(value)}")
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
        problems.append(f"{key_path(prefix, str(key))}: unknown key ({hint})")
