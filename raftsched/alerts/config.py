"""The ``[alerts]`` table, its ``[[alerts.webhook]]`` and ``[[alerts.email]]`` targets and its
``[alerts.severity]`` levels: parsed and validated up front.

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

from raftsched.alerts.formats import FORMATS, alertmanager_url
from raftsched.alerts.routing import DEFAULT_STREAK_INTERVAL_MS, SEVERITIES, at_least, severity_of
from raftsched.errors import InvalidSpec
from raftsched.model import ALERT_KINDS
from raftsched.timing.durations import parse_duration_ms

DEFAULT_ZOMBIE_AFTER_MS = 3_600_000
DEFAULT_TIMEOUT_MS = 10_000
DEFAULT_SMTP_PORT = 587
DEFAULT_MAX_WAITING_MS = 600_000
DEFAULT_HEARTBEAT_MISSING_MS = 6_000
DEFAULT_MAX_SKEW_MS = 500
DEFAULT_START_DELAY_QUANTILE = 0.95
DEFAULT_START_DELAY_WINDOW_MS = 300_000
DEFAULT_START_DELAY_WARNING_MS = 120_000
DEFAULT_START_DELAY_CRITICAL_MS = 300_000
WARNING = "warning"
CRITICAL = "critical"
_NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclass(frozen=True, slots=True)
class Webhook:
    """One delivery target. ``name`` keys its replicated cursor (default: the URL), so renaming a
    target restarts its delivery from the oldest retained event. Empty filters take every event.
    With ``format = "alertmanager"``, ``url`` is where to POST (``/api/v2/alerts`` appended to
    an Alertmanager's base URL)."""

    url: str
    name: str
    secret: str = dataclasses.field(default="", repr=False)
    owners: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset()
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    format: str = "json"  # json, slack or alertmanager (raftsched.alerts.formats)
    min_severity: str = ""  # "": every level

    def takes(self, kind: str, owner: str, namespace: str, severity: str = "") -> bool:
        """Whether an event of ``kind`` for ``owner`` / ``namespace`` at level ``severity`` passes
        this target's filters (``severity`` "": the level is not checked)."""
        return _takes(self, kind, owner, namespace, severity)


@dataclass(frozen=True, slots=True)
class EmailTarget:
    """One ``[[alerts.email]]`` target: mail over SMTP (``raftsched.alerts.smtp``). ``name`` keys
    its replicated cursor (default ``email:<first recipient>``)."""

    name: str
    host: str
    sender: str
    to: tuple[str, ...]
    port: int = DEFAULT_SMTP_PORT
    user: str = ""
    password: str = dataclasses.field(default="", repr=False)
    starttls: bool = True
    ca_file: str = ""  # "": the system's CAs verify the server's certificate
    owners: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset()
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    min_severity: str = ""

    def takes(self, kind: str, owner: str, namespace: str, severity: str = "") -> bool:
        """As :meth:`Webhook.takes`."""
        return _takes(self, kind, owner, namespace, severity)


def _takes(target: Webhook | EmailTarget, kind: str, owner: str, namespace: str, severity: str) -> bool:
    return (
        (not target.kinds or kind in target.kinds)
        and (not target.owners or owner in target.owners)
        and (not target.namespaces or namespace in target.namespaces)
        and (not severity or not target.min_severity or at_least(severity, target.min_severity))
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
class StartDelayLevels:
    """The start-delay check of one namespace: the ``quantile`` of nominal -> start over the last
    ``window_ms`` is compared with ``warning_ms`` and ``critical_ms`` (the higher level wins)."""

    quantile: float = DEFAULT_START_DELAY_QUANTILE
    window_ms: int = DEFAULT_START_DELAY_WINDOW_MS
    warning_ms: int = DEFAULT_START_DELAY_WARNING_MS
    critical_ms: int = DEFAULT_START_DELAY_CRITICAL_MS

    def level(self, delay_ms: int) -> str:
        """``critical``, ``warning`` or "" for a measured delay."""
        if delay_ms > self.critical_ms:
            return CRITICAL
        if delay_ms > self.warning_ms:
            return WARNING
        return ""


@dataclass(frozen=True, slots=True)
class StartDelayConfig:
    """``[alerts.start_delay]`` and its ``[alerts.start_delay.namespaces.<ns>]`` overrides (each
    key an override leaves out is the default table's)."""

    default: StartDelayLevels = StartDelayLevels()
    namespaces: tuple[tuple[str, StartDelayLevels], ...] = ()

    def for_namespace(self, namespace: str) -> StartDelayLevels:
        for name, levels in self.namespaces:
            if name == namespace:
                return levels
        return self.default


@dataclass(frozen=True, slots=True)
class AlertsConfig:
    """``[alerts]``: detection thresholds, the console link base, the targets (webhooks and email),
    the severity overrides and the streak interval."""

    zombie_after_ms: int = DEFAULT_ZOMBIE_AFTER_MS
    console_url: str = ""  # e.g. "http://sched.example:8080": links are <console_url>/runs/<run id>
    webhooks: tuple[Webhook, ...] = ()
    emails: tuple[EmailTarget, ...] = ()
    severities: tuple[tuple[str, str], ...] = ()  # [alerts.severity]: (kind, level) overrides
    streak_interval_ms: int = DEFAULT_STREAK_INTERVAL_MS

    health: HealthSettings = HealthSettings()
    start_delay: StartDelayConfig = StartDelayConfig()
    deprecated: tuple[str, ...] = ()  # notes the node logs at start (a deprecated key was used)

    def severity(self, kind: str, measured: str = "") -> str:
        """An event's level: ``[alerts.severity]`` for its kind, else the level the event carries
        (``measured``: a ``start_delay`` event's warning or critical), else the kind's default
        (``alerts.routing``). An operator's setting wins: ``start_delay = "info"`` stops its pages."""
        configured = dict(self.severities)
        if kind in configured or not measured:
            return severity_of(kind, configured)
        return measured

    @property
    def targets(self) -> tuple[Webhook | EmailTarget, ...]:
        """Every delivery target: the webhooks, then the email targets."""
        return (*self.webhooks, *self.emails)


_KEYS = (
    "zombie_after",
    "delay_p99_threshold",
    "window",
    "console_url",
    "webhook",
    "email",
    "severity",
    "streak_interval",
    "max_waiting",
    "heartbeat_missing",
    "max_skew",
    "start_delay",
)
_START_DELAY_KEYS = ("quantile", "window", "warning", "critical", "namespaces")
_FILTER_KEYS = ("owners", "namespaces", "kinds", "min_severity")
_WEBHOOK_KEYS = (
    "url",
    "name",
    "secret",
    "secret_file",
    *_FILTER_KEYS[:3],
    "timeout",
    "format",
    "min_severity",
)
_EMAIL_KEYS = (
    "name",
    "host",
    "port",
    "user",
    "password_file",
    "from",
    "to",
    "starttls",
    "ca_file",
    *_FILTER_KEYS,
    "timeout",
)


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
        return _file_text(f"{path}.secret_file", secret_file, base, problems)
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
    filters = _filters(path, raw, problems)
    fmt = raw.get("format", "json")
    if fmt not in FORMATS:
        problems.append(f"{path}.format: {fmt!r} is not one of {', '.join(FORMATS)}")
    timeout = (
        _duration(f"{path}.timeout", raw["timeout"], problems) if "timeout" in raw else DEFAULT_TIMEOUT_MS
    )
    if len(problems) > before or url is None or timeout is None or not isinstance(name, str):
        return None
    return Webhook(
        url=alertmanager_url(url) if fmt == "alertmanager" else url,
        name=name,
        secret=secret,
        timeout_ms=timeout,
        format=str(fmt),
        owners=filters.owners,
        namespaces=filters.namespaces,
        kinds=filters.kinds,
        min_severity=filters.min_severity,
    )


@dataclass(frozen=True, slots=True)
class _Filters:
    owners: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset()
    min_severity: str = ""


def _filters(path: str, raw: Mapping[str, object], problems: list[str]) -> _Filters:
    """A target's ``owners``, ``namespaces``, ``kinds`` and ``min_severity``."""
    got: dict[str, frozenset[str]] = {}
    for key in ("owners", "namespaces", "kinds"):
        if key in raw:
            got[key] = _strings(f"{path}.{key}", raw[key], problems) or frozenset()
    unknown = sorted(got.get("kinds", frozenset()) - set(ALERT_KINDS))
    if unknown:
        problems.append(f"{path}.kinds: unknown kind {', '.join(unknown)} (known: {', '.join(ALERT_KINDS)})")
    level = raw.get("min_severity", "")
    if "min_severity" in raw and level not in SEVERITIES:
        problems.append(f"{path}.min_severity: {level!r} is not one of {', '.join(SEVERITIES)}")
        level = ""
    return _Filters(min_severity=str(level), **got)


def _file_text(path: str, value: object, base: Path, problems: list[str]) -> str:
    if not isinstance(value, str) or not value:
        problems.append(f"{path}: expected a path")
        return ""
    file = Path(value)
    file = file if file.is_absolute() else base / file
    try:
        text = file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        problems.append(f"{path}: cannot read {file}: {getattr(e, 'strerror', None) or e}")
        return ""
    if not text:
        problems.append(f"{path}: {file} is empty")
    return text


def _email(path: str, raw: object, base: Path, problems: list[str]) -> EmailTarget | None:
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected a table ([[alerts.email]])")
        return None
    before = len(problems)
    for key in raw:
        if key not in _EMAIL_KEYS:
            problems.append(f"{path}.{key}: unknown key (known: {', '.join(_EMAIL_KEYS)})")
    host = raw.get("host")
    if not isinstance(host, str) or not host:
        problems.append(f"{path}.host: required (the SMTP server's host name)")
    port = raw.get("port", DEFAULT_SMTP_PORT)
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        problems.append(f"{path}.port: expected a port number 1-65535, got {port!r}")
    sender = raw.get("from")
    if not isinstance(sender, str) or "@" not in sender:
        problems.append(f"{path}.from: required (the sender's address)")
    to = raw.get("to")
    if not isinstance(to, list) or not to or not all(isinstance(a, str) and "@" in a for a in to):
        problems.append(f"{path}.to: expected a non-empty list of addresses")
        to = []
    user = raw.get("user", "")
    if not isinstance(user, str):
        problems.append(f"{path}.user: expected a string")
        user = ""
    password = (
        _file_text(f"{path}.password_file", raw["password_file"], base, problems)
        if "password_file" in raw
        else ""
    )
    if user and "password_file" not in raw:
        problems.append(f"{path}.password_file: required with user (a file holding the password)")
    starttls = raw.get("starttls", True)
    if not isinstance(starttls, bool):
        problems.append(f"{path}.starttls: expected true or false")
    if user and starttls is False:
        problems.append(f"{path}.starttls: a password is never sent in clear text: set starttls = true")
    ca_file = raw.get("ca_file", "")
    if not isinstance(ca_file, str):
        problems.append(f"{path}.ca_file: expected a path")
        ca_file = ""
    elif ca_file:
        file = Path(ca_file) if Path(ca_file).is_absolute() else base / ca_file
        if not file.is_file():
            problems.append(f"{path}.ca_file: {file} is not a file")
        ca_file = str(file)
    name = raw.get("name", f"email:{to[0]}" if to else "")
    if "name" in raw and (not isinstance(name, str) or not _NAME_RE.fullmatch(name)):
        problems.append(f"{path}.name: 1-64 characters from A-Z a-z 0-9 _ . -")
    filters = _filters(path, raw, problems)
    timeout = (
        _duration(f"{path}.timeout", raw["timeout"], problems) if "timeout" in raw else DEFAULT_TIMEOUT_MS
    )
    if len(problems) > before or timeout is None or not isinstance(port, int):
        return None
    return EmailTarget(
        name=str(name),
        host=str(host),
        port=port,
        sender=str(sender),
        to=tuple(str(a) for a in to),
        user=user,
        password=password,
        starttls=bool(starttls),
        ca_file=ca_file,
        timeout_ms=timeout,
        owners=filters.owners,
        namespaces=filters.namespaces,
        kinds=filters.kinds,
        min_severity=filters.min_severity,
    )


def _severities(table: object, problems: list[str]) -> tuple[tuple[str, str], ...]:
    if not isinstance(table, Mapping):
        problems.append("alerts.severity: expected a table of kind = level")
        return ()
    out = []
    for kind, level in table.items():
        if kind not in ALERT_KINDS:
            problems.append(f"alerts.severity.{kind}: unknown kind (known: {', '.join(ALERT_KINDS)})")
        elif level not in SEVERITIES:
            problems.append(f"alerts.severity.{kind}: {level!r} is not one of {', '.join(SEVERITIES)}")
        else:
            out.append((str(kind), str(level)))
    return tuple(sorted(out))


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
        ("streak_interval", "streak_interval_ms"),
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
    raw_mails = table.get("email", [])
    emails: list[EmailTarget] = []
    if not isinstance(raw_mails, list):
        problems.append("alerts.email: expected an array of tables ([[alerts.email]])")
        raw_mails = []
    for i, raw in enumerate(raw_mails):
        mail = _email(f"alerts.email[{i}]", raw, base, problems)
        if mail is None:
            continue
        if mail.name in seen:
            problems.append(f"alerts.email[{i}].name: {mail.name!r} is already used by another target")
        seen[mail.name] = i
        emails.append(mail)
    severities = _severities(table["severity"], problems) if "severity" in table else ()
    health: dict[str, int] = {}
    for key in ("max_waiting", "heartbeat_missing", "max_skew"):
        if key in table:
            ms = _duration(f"alerts.{key}", table[key], problems)
            if ms is not None:
                health[f"{key}_ms"] = ms
    notes: list[str] = []
    if "start_delay" in table:
        start_delay = _start_delay(table["start_delay"], problems)
        if "delay_p99_threshold" in table:
            problems.append(
                "alerts.delay_p99_threshold: deprecated and replaced by [alerts.start_delay]; "
                "remove it (set alerts.start_delay.quantile = 0.99 and critical instead)"
            )
    elif "delay_p99_threshold_ms" in values:
        # Deprecated: the p99 of nominal -> commit. It keeps working as the critical level of the
        # start-delay check at p99 (now measured to the executor's start, as the issue asked).
        threshold = values.pop("delay_p99_threshold_ms")
        start_delay = StartDelayConfig(
            StartDelayLevels(
                quantile=0.99,
                window_ms=values.get("window_ms", DEFAULT_START_DELAY_WINDOW_MS),
                warning_ms=threshold,
                critical_ms=threshold,
            )
        )
        notes.append(
            "alerts.delay_p99_threshold is deprecated: it now sets [alerts.start_delay] "
            f"quantile = 0.99, critical = {threshold / 1000:g}s (measured nominal -> start, not "
            "nominal -> commit); replace it with [alerts.start_delay]"
        )
    else:
        start_delay = StartDelayConfig()
        if "window_ms" in values:
            notes.append(
                "alerts.window is deprecated and does nothing alone (it was the window of "
                "delay_p99_threshold); use alerts.start_delay.window"
            )
    return AlertsConfig(
        zombie_after_ms=values.get("zombie_after_ms", DEFAULT_ZOMBIE_AFTER_MS),
        console_url=console.rstrip("/"),
        webhooks=tuple(hooks),
        emails=tuple(emails),
        severities=severities,
        streak_interval_ms=values.get("streak_interval_ms", DEFAULT_STREAK_INTERVAL_MS),
        health=HealthSettings(**health),
        start_delay=start_delay,
        deprecated=tuple(notes),
    )


def _levels(
    path: str, raw: object, base: StartDelayLevels, problems: list[str], *, top: bool
) -> StartDelayLevels:
    if not isinstance(raw, Mapping):
        problems.append(f"{path}: expected a table")
        return base
    known = _START_DELAY_KEYS if top else _START_DELAY_KEYS[:-1]
    for key in raw:
        if key not in known:
            problems.append(f"{path}.{key}: unknown key (known: {', '.join(known)})")
    quantile = base.quantile
    if "quantile" in raw:
        q = raw["quantile"]
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q <= 1:
            problems.append(f"{path}.quantile: expected a number in (0, 1] (0.95 for p95), got {q!r}")
        else:
            quantile = float(q)
    got: dict[str, int] = {}
    for key in ("window", "warning", "critical"):
        if key in raw:
            ms = _duration(f"{path}.{key}", raw[key], problems)
            if ms is not None:
                got[key] = ms
    levels = StartDelayLevels(
        quantile=quantile,
        window_ms=got.get("window", base.window_ms),
        warning_ms=got.get("warning", base.warning_ms),
        critical_ms=got.get("critical", base.critical_ms),
    )
    if levels.warning_ms > levels.critical_ms:
        problems.append(
            f"{path}: warning ({levels.warning_ms / 1000:g}s) must not be above critical "
            f"({levels.critical_ms / 1000:g}s)"
        )
    return levels


def _start_delay(raw: object, problems: list[str]) -> StartDelayConfig:
    """``[alerts.start_delay]`` with its per-namespace overrides."""
    default = _levels("alerts.start_delay", raw, StartDelayLevels(), problems, top=True)
    spaces = raw.get("namespaces", {}) if isinstance(raw, Mapping) else {}
    per_namespace: list[tuple[str, StartDelayLevels]] = []
    if not isinstance(spaces, Mapping):
        problems.append("alerts.start_delay.namespaces: expected a table of namespace tables")
        spaces = {}
    for name in sorted(spaces):
        path = f"alerts.start_delay.namespaces.{name}"
        per_namespace.append((name, _levels(path, spaces[name], default, problems, top=False)))
    return StartDelayConfig(default, tuple(per_namespace))
