"""The ``[alerts]`` table and its ``[[alerts.webhook]]`` targets: parsed and validated up front.

Every problem is reported with its key path (``alerts.webhook[1].url: ...``), all at once.
Durations accept the shared grammar (``"90s"``, ``"1h"``) or a number of seconds.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from raftsched.errors import InvalidSpec
from raftsched.model import ALERT_KINDS
from raftsched.timing.durations import parse_duration_ms

DEFAULT_ZOMBIE_AFTER_MS = 3_600_000
DEFAULT_DELAY_P99_THRESHOLD_MS = 2_000
DEFAULT_WINDOW_MS = 300_000
DEFAULT_TIMEOUT_MS = 10_000
DEFAULT_MAX_WAITING_MS = 600_000
DEFAULT_HEARTBEAT_MISSING_MS = 6_000
DEFAULT_MAX_SKEW_MS = 500
_NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclass(frozen=True, slots=True)
class Webhook:
    """One delivery target. ``name`` keys its replicated cursor (default: the URL), so renaming a
    target restarts its delivery from the oldest retained event. Empty filters take every event."""

    url: str
    name: str
    secret: str = dataclasses.field(default="", repr=False)
    owners: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset()
    timeout_ms: int = DEFAULT_TIMEOUT_MS

    def takes(self, kind: str, owner: str, namespace: str) -> bool:
        """Whether an event of ``kind`` for ``owner`` / ``namespace`` passes this target's filters."""
        return (
            (not self.kinds or kind in self.kinds)
            and (not self.owners or owner in self.owners)
            and (not self.namespaces or namespace in self.namespaces)
        )


@dataclass(frozen=True, slots=True)
class HealthSettings:
    """Fleet health and clock skew (issue 36 §3, §4; :mod:`raftsched.alerts.health`): the
    ``[alerts]`` keys ``max_waiting`` (an attempt due this long without an executor),
    ``heartbeat_missing`` (an executor silent this long) and ``max_skew`` (a clock off the
    leader's by more), in ms."""

    max_waiting_ms: int = DEFAULT_MAX_WAITING_MS
    heartbeat_missing_ms: int = DEFAULT_HEARTBEAT_MISSING_MS
    max_skew_ms: int = DEFAULT_MAX_SKEW_MS


@dataclass(frozen=True, slots=True)
class AlertsConfig:
    """``[alerts]``: detection thresholds, the console link base and the webhook targets."""

    zombie_after_ms: int = DEFAULT_ZOMBIE_AFTER_MS
    delay_p99_threshold_ms: int = DEFAULT_DELAY_P99_THRESHOLD_MS
    window_ms: int = DEFAULT_WINDOW_MS
    console_url: str = ""  # e.g. "http://sched.example:8080": links are <console_url>/runs/<run id>
    webhooks: tuple[Webhook, ...] = ()
    health: HealthSettings = HealthSettings()


_KEYS = (
    "zombie_after",
    "delay_p99_threshold",
    "window",
    "console_url",
    "webhook",
    "max_waiting",
    "heartbeat_missing",
    "max_skew",
)
_WEBHOOK_KEYS = ("url", "name", "secret", "secret_file", "owners", "namespaces", "kinds", "timeout")


def _duration(path: str, value: object, problems: list[str]) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        problems.append(f'{path}: expected a duration ("90s", "1h") or seconds, got {type(value).__name__}')
        return None
    try:
        ms = parse_duration_ms(value, path) if isinstance(value, str) else round(value * 1000)
    except InvalidSpec as bad:
        problems.append(f"{path}: {bad.reason}")
        return None
    if ms <= 0:
        problems.append(f"{path}: must be positive, got {value!r}")
        return None
    return ms


def _strings(path: str, value: object, problems: list[str]) -> frozenset[str] | None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        problems.append(f"{path}: expected a list of non-empty strings")
        return None
    return frozenset(value)


def _url(path: str, value: object, problems: list[str]) -> str | None:
    if not isinstance(value, str):
        problems.append(f"{path}: required (the http:// or https:// URL to POST alerts to)")
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        problems.append(f"{path}: {value!r} is not an http:// or https:// URL with a host")
        return None
    return value


def _secret(path: str, table: Mapping[str, object], base: Path, problems: list[str]) -> str:
    secret, secret_file = table.get("secret"), table.get("secret_file")
    if secret is not None and secret_file is not None:
        problems.append(f"{path}.secret_file: set at most one of secret and secret_file")
        return ""
    if secret is not None:
        if not isinstance(secret, str) or not secret:
            problems.append(f"{path}.secret: expected a non-empty string")
            return ""
        return secret
    if secret_file is not None:
        if not isinstance(secret_file, str):
            problems.append(f"{path}.secret_file: expected a path")
            return ""
        file = Path(secret_file)
        file = file if file.is_absolute() else base / file
        try:
            text = file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            problems.append(f"{path}.secret_file: cannot read {file}: {getattr(e, 'strerror', None) or e}")
            return ""
        if not text:
            problems.append(f"{path}.secret_file: {file} is empty")
        return text
    return ""


def _webhook(path: str, raw: object, base: Path, problems: list[str]) -> Webhook | None:
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected a table ([[alerts.webhook]])")
        return None
    before = len(problems)
    for key in raw:
        if key not in _WEBHOOK_KEYS:
            problems.append(f"{path}.{key}: unknown key (known: {', '.join(_WEBHOOK_KEYS)})")
    url = _url(f"{path}.url", raw.get("url"), problems)
    name = raw.get("name", url)
    if "name" in raw and (not isinstance(name, str) or not _NAME_RE.fullmatch(name)):
        problems.append(f"{path}.name: 1-64 characters from A-Z a-z 0-9 _ . -")
    secret = _secret(path, raw, base, problems)
    filters: dict[str, frozenset[str]] = {}
    for key in ("owners", "namespaces", "kinds"):
        if key in raw:
            got = _strings(f"{path}.{key}", raw[key], problems)
            filters[key] = got or frozenset()
    unknown = sorted(filters.get("kinds", frozenset()) - set(ALERT_KINDS))
    if unknown:
        problems.append(f"{path}.kinds: unknown kind {', '.join(unknown)} (known: {', '.join(ALERT_KINDS)})")
    timeout = (
        _duration(f"{path}.timeout", raw["timeout"], problems) if "timeout" in raw else DEFAULT_TIMEOUT_MS
    )
    if len(problems) > before or url is None or timeout is None or not isinstance(name, str):
        return None
    return Webhook(url=url, name=name, secret=secret, timeout_ms=timeout, **filters)


def parse_alerts(table: Mapping[str, object] | None, base: Path, problems: list[str]) -> AlertsConfig:
    """``[alerts]`` as a value (defaults when absent); each problem is appended to ``problems``."""
    if not table:
        return AlertsConfig()
    for key in table:
        if key not in _KEYS:
            problems.append(f"alerts.{key}: unknown key (known: {', '.join(_KEYS)})")
    values: dict[str, int] = {}
    for key, field in (
        ("zombie_after", "zombie_after_ms"),
        ("delay_p99_threshold", "delay_p99_threshold_ms"),
        ("window", "window_ms"),
    ):
        if key in table:
            ms = _duration(f"alerts.{key}", table[key], problems)
            if ms is not None:
                values[field] = ms
    console = table.get("console_url", "")
    if not isinstance(console, str) or (console and not urlsplit(console).scheme.startswith("http")):
        problems.append("alerts.console_url: expected an http:// or https:// URL")
        console = ""
    raw_hooks = table.get("webhook", [])
    hooks: list[Webhook] = []
    if not isinstance(raw_hooks, list):
        problems.append("alerts.webhook: expected an array of tables ([[alerts.webhook]])")
        raw_hooks = []
    for i, raw in enumerate(raw_hooks):
        hook = _webhook(f"alerts.webhook[{i}]", raw, base, problems)
        if hook is not None:
            hooks.append(hook)
    seen: dict[str, int] = {}
    for i, hook in enumerate(hooks):
        if hook.name in seen:
            problems.append(f"alerts.webhook[{i}].name: {hook.name!r} is already used by another webhook")
        seen[hook.name] = i
    health: dict[str, int] = {}
    for key in ("max_waiting", "heartbeat_missing", "max_skew"):
        if key in table:
            ms = _duration(f"alerts.{key}", table[key], problems)
            if ms is not None:
                health[f"{key}_ms"] = ms
    return AlertsConfig(
        console_url=console.rstrip("/"), webhooks=tuple(hooks), health=HealthSettings(**health), **values
    )
