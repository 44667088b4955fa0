"""Who is calling, and what each role may do: :class:`Principal`, :class:`Role`, :class:`Permission`.

A principal is what the server knows about the caller of one RPC, derived once per call (once
per stream for executors) by the authentication interceptor (:mod:`raftsched.security.authz`)
from a bearer token (:mod:`raftsched.security.tokens`) or, under mutual TLS, from the client
certificate's subject (:func:`principal_from_cert`). Everything downstream (the authorization
table, namespace filtering, executor name binding, the audit log) works on this value only.

This module is pure: no clock, no IO (the ``[auth]`` table parser only names files).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from raftsched.errors import InvalidSpec
from raftsched.timing.durations import parse_duration_ms

__all__ = [
    "ALL_NAMESPACES",
    "ANONYMOUS",
    "DEFAULT_NAMESPACE",
    "AuthSettings",
    "Permission",
    "Principal",
    "Role",
    "parse_auth_table",
    "principal_from_cert",
]

DEFAULT_NAMESPACE: Final = "default"
ALL_NAMESPACES: Final = "*"
AUDIT_KEEP_MS: Final = 90 * 24 * 3600 * 1000


class Role(enum.StrEnum):
    """The four roles. ``admin`` may do everything in every namespace (tokens, audit, cluster
    operations); ``maintainer`` reads and writes in its namespaces; ``viewer`` reads in its
    namespaces; ``executor`` registers, streams work, heartbeats and reports."""

    ADMIN = "admin"
    MAINTAINER = "maintainer"
    VIEWER = "viewer"
    EXECUTOR = "executor"


class Permission(enum.StrEnum):
    """What an RPC needs; the authorization table maps every RPC to exactly one of these."""

    STATUS = "cluster.status"  # node and cluster status (leader discovery)
    TASKS_READ = "tasks.read"  # tasks, runs, fire accounting, explain
    TASKS_WRITE = "tasks.write"  # create, update, delete, enable, disable
    RUNS_OPERATE = "runs.operate"  # trigger, retry
    WORKFLOWS_READ = "workflows.read"  # workflows, their runs, backfills, lineage
    WORKFLOWS_WRITE = "workflows.write"  # apply a workflow definition
    WORKFLOWS_OPERATE = "workflows.operate"  # start, kill, rerun, mark-success, backfill
    EXECUTE = "executor.work"  # register, dispatch stream, heartbeat, report, leave
    TOKENS = "tokens.manage"  # create, list, revoke tokens
    AUDIT = "audit.read"  # read the audit log
    QUOTAS = "quotas.manage"  # set and delete owner and namespace quotas
    BACKUP = "cluster.backup"  # stream a backup of the whole replicated state (admin only)
    EXECUTORS_MANAGE = "executors.manage"  # drain an executor (admin only)
    CALENDARS = "calendars.manage"  # set and delete calendars (shared by every namespace)
    MEMBERSHIP = "cluster.membership"  # add and remove scheduler nodes
    EVENTS_EMIT = "events.emit"  # emit events (per namespace) that trigger tasks and workflows
    POOLS = "pools.manage"  # set and delete pools (shared by every namespace and owner)


ROLE_PERMISSIONS: Final[Mapping[Role, frozenset[Permission]]] = {
    Role.ADMIN: frozenset(Permission),
    Role.MAINTAINER: frozenset(
        {
            Permission.STATUS,
            Permission.TASKS_READ,
            Permission.TASKS_WRITE,
            Permission.RUNS_OPERATE,
            Permission.WORKFLOWS_READ,
            Permission.WORKFLOWS_WRITE,
            Permission.WORKFLOWS_OPERATE,
            Permission.EVENTS_EMIT,
        }
    ),
    Role.VIEWER: frozenset({Permission.STATUS, Permission.TASKS_READ, Permission.WORKFLOWS_READ}),
    Role.EXECUTOR: frozenset({Permission.STATUS, Permission.EXECUTE}),
}
"""Each role's permissions. A role not listed here has none (fail closed)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """The authenticated caller of one RPC.

    ``id`` is what the audit log and executor binding record: ``token:<token id>`` or
    ``cert:<subject>``; it never contains a secret. ``namespaces`` are those the principal may
    use; ``ALL_NAMESPACES`` in it (always the case for ``admin``) means every namespace.
    ``expires_ms`` is 0 for no expiry (certificates: their validity is checked by TLS).
    """

    id: str
    role: Role
    namespaces: frozenset[str] = field(default_factory=lambda: frozenset({DEFAULT_NAMESPACE}))
    expires_ms: int = 0

    def __post_init__(self) -> None:
        if self.role is Role.ADMIN and ALL_NAMESPACES not in self.namespaces:
            object.__setattr__(self, "namespaces", frozenset({ALL_NAMESPACES}))

    def may(self, permission: Permission) -> bool:
        """Whether the principal's role grants ``permission``."""
        return permission in ROLE_PERMISSIONS.get(self.role, frozenset())

    @property
    def every_namespace(self) -> bool:
        return ALL_NAMESPACES in self.namespaces

    def in_namespace(self, namespace: str) -> bool:
        """Whether the principal may see or touch objects of ``namespace`` ("" is the default)."""
        return self.every_namespace or (namespace or DEFAULT_NAMESPACE) in self.namespaces

    def namespaces_text(self) -> str:
        return ",".join(sorted(self.namespaces))


ANONYMOUS: Final = Principal(id="anonymous", role=Role.ADMIN)
"""The caller when authentication is off: everything is allowed, as without auth."""


def principal_from_cert(
    auth_context: Mapping[str, Sequence[bytes]],
    roles: Mapping[str, tuple[Role, Iterable[str]]],
) -> Principal | None:
    """The principal of a peer authenticated by a client certificate, or None.

    ``auth_context`` is gRPC's ``context.auth_context()``; ``roles`` maps a certificate subject
    (its common name) to the role and namespaces it has (the ``[auth.subjects]`` table).
    A certificate whose subject is not listed gets no principal: a certificate proves identity,
    the configuration grants rights.
    """
    names = auth_context.get("x509_common_name") or ()
    for raw in names:
        subject = raw.decode("utf-8", "replace")
        grant = roles.get(subject)
        if grant is not None:
            role, namespaces = grant
            return Principal(id=f"cert:{subject}", role=role, namespaces=frozenset(namespaces))
    return None


@dataclass(frozen=True, slots=True)
class AuthSettings:
    """The ``[auth]`` table: callers must authenticate (bearer token, or a client certificate
    granted a role here).

    ``bootstrap_token_file``: a file holding a token (``rst_<id>_<secret>``, see
    :mod:`raftsched.security.tokens`); the first leader that finds no token of that id creates it
    as an ``admin`` token. ``audit_keep_ms``: how long the audit log keeps a record (every node
    must use the same value). ``subjects``: client-certificate common name → (role, namespaces),
    for mutual TLS without tokens (an executor's certificate, say).
    """

    bootstrap_token_file: Path | None = None
    audit_keep_ms: int = AUDIT_KEEP_MS
    subjects: Mapping[str, tuple[Role, tuple[str, ...]]] = field(default_factory=dict)


AUTH_KEYS: Final = ("bootstrap_token_file", "audit_keep", "subjects")
"""The keys of the ``[auth]`` table (raftsched/config/reference.py documents each)."""


def parse_auth_table(table: Mapping[str, object], base: Path, problems: list[str]) -> AuthSettings:
    """Read the ``[auth]`` table, appending each problem (with its key path) to ``problems``.

    Keys: ``bootstrap_token_file`` (path, relative to the config file), ``audit_keep`` (duration
    string such as ``"90d"``, or seconds), ``subjects`` (table: common name → ``"role"`` or
    ``"role:ns1,ns2"``). Reads no file.
    """
    for key in table:
        if key not in AUTH_KEYS:
            problems.append(f"auth.{key}: unknown key (expected bootstrap_token_file, audit_keep, subjects)")
    boot: Path | None = None
    raw = table.get("bootstrap_token_file")
    if raw is not None:
        if isinstance(raw, str) and raw:
            boot = Path(raw) if Path(raw).is_absolute() else base / raw
        else:
            problems.append("auth.bootstrap_token_file: expected a non-empty path string")
    keep_ms = AUDIT_KEEP_MS
    keep = table.get("audit_keep")
    if keep is not None:
        try:
            if isinstance(keep, bool) or not isinstance(keep, int | str):
                raise ValueError('expected a duration such as "90d" or a number of seconds')
            keep_ms = keep * 1000 if isinstance(keep, int) else parse_duration_ms(keep, "auth.audit_keep")
            if keep_ms <= 0:
                raise ValueError("must be > 0")
        except ValueError as exc:
            problems.append(f"auth.audit_keep: {exc}")
        except InvalidSpec as exc:  # from the duration grammar; its message names the key
            problems.append(str(exc))
    subjects: dict[str, tuple[Role, tuple[str, ...]]] = {}
    raw_subjects = table.get("subjects", {})
    if not isinstance(raw_subjects, Mapping):
        problems.append('auth.subjects: expected a table of common name = "role[:ns1,ns2]"')
    else:
        for cn, grant in raw_subjects.items():
            role_text, _, ns_text = str(grant).partition(":")
            try:
                role = Role(role_text)
            except ValueError:
                problems.append(
                    f"auth.subjects.{cn}: role {role_text!r} is not one of {', '.join(r.value for r in Role)}"
                )
                continue
            namespaces = tuple(n.strip() for n in ns_text.split(",") if n.strip()) or (DEFAULT_NAMESPACE,)
            subjects[str(cn)] = (role, namespaces)
    return AuthSettings(bootstrap_token_file=boot, audit_keep_ms=keep_ms, subjects=subjects)
