"""The error vocabulary of raftsched.

Every error a caller can see is one of these. Each docstring says what the error means for the
caller and what to do about it.

Inside the replicated state machine nothing is raised for bad input: ``apply`` returns a
:class:`raftsched.fsm.state.Rejected` value with one of the ``code`` strings below, so every
replica records the same outcome. The SDK turns a rejection back into the matching exception.

Messages are bounded whatever the input: they travel as gRPC status messages (metadata, a few KiB
at most) and into logs. A message quotes an offending value through :func:`quote` (at most
:data:`QUOTE_CHARS` characters of it, then its length), lists at most :data:`MAX_PROBLEMS_SHOWN`
problems and then how many more, and every message is cut at :data:`MAX_MESSAGE_CHARS` as a
backstop for one that quotes input unbounded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

QUOTE_CHARS = 200
"""How much of an offending value a message quotes."""
MAX_PROBLEMS_SHOWN = 20
"""How many problems an InvalidWorkflow or ConfigError message lists before "and K more"."""
MAX_LINE_CHARS = 240
"""How long one listed problem may be in a message."""
MAX_MESSAGE_CHARS = 6_000
"""The backstop: no error message is longer (a headline, 20 problems and the "more" line fit)."""
_ELLIPSIS = "\u2026"


def clip(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` if it has at most ``limit`` characters, else as much of its head as fits in
    ``limit`` together with "… (N characters)", its full length."""
    if len(text) <= limit:
        return text
    suffix = f"{_ELLIPSIS} ({len(text):,} characters)"
    return text[: max(0, limit - len(suffix))] + suffix


def quote(value: object, limit: int = QUOTE_CHARS, *, double: bool = False) -> str:
    """Quote an offending input value for a message, bounded: ``'aaaa…' (3,145,728 characters)``.

    A string is quoted like :func:`repr` (``double``: as a JSON string, for messages that quote
    names between double quotes); anything else is its ``repr``. At most ``limit`` characters of
    the value are shown; a longer value is cut and followed by its length, so a message never
    grows with its input. Control characters are escaped, never printed raw.
    """
    if not isinstance(value, str):
        return clip(repr(value), limit)
    head = value[:limit]
    shown = json.dumps(head, ensure_ascii=False) if double else repr(head)
    if len(value) > limit:
        return f"{shown[:-1]}{_ELLIPSIS}{shown[-1]} ({len(value):,} characters)"
    return shown


def cap_problems(lines: Sequence[str], limit: int = MAX_PROBLEMS_SHOWN) -> list[str]:
    """At most ``limit`` of ``lines``, each clipped to :data:`MAX_LINE_CHARS`, then "and K more"."""
    shown = [clip(line, MAX_LINE_CHARS) for line in lines[:limit]]
    if len(lines) > limit:
        more = len(lines) - limit
        shown.append(f"{_ELLIPSIS} and {more:,} more problem{'' if more == 1 else 's'}")
    return shown


class RaftschedError(Exception):
    """Base class of every raftsched error. Its message is bounded (:data:`MAX_MESSAGE_CHARS`)."""

    code = "internal"

    def __init__(self, message: str = "") -> None:
        super().__init__(clip(message))


class InvalidSpec(RaftschedError):
    """The input is malformed: a bad cron expression, zone, interval, policy or an oversized field.

    ``field`` names where the problem is (``trigger.cron``, ``nodes[2].raft``); the message says
    why. Nothing was stored. Fix the input and send it again.
    """

    code = "invalid_argument"

    def __init__(self, field: str, reason: str) -> None:
        # The field path can carry input too (an env name, a map key): bounded like a value.
        self.field = clip(field, QUOTE_CHARS)
        self.reason = clip(reason, MAX_MESSAGE_CHARS - len(self.field) - 2)
        super().__init__(f"{self.field}: {self.reason}" if self.field else self.reason)


class InvalidWorkflow(InvalidSpec):
    """A workflow definition (or workflow file) is invalid; nothing was stored.

    ``problems`` lists *every* problem found, each as ``(location, message)``. The location names
    the field path (``tasks[2].depends_on[0]``), with the task's name in parentheses where it
    helps, prefixed by the file position (``etl.yaml:14``) when the definition came from a file;
    it is ``""`` for a problem with the workflow as a whole. Fix them all and submit again.

    ``problems`` keeps every problem; the message shows the first :data:`MAX_PROBLEMS_SHOWN`
    (each cut at :data:`MAX_LINE_CHARS`), then "… and K more problems".
    """

    def __init__(self, problems: list[tuple[str, str]], workflow: str = "") -> None:
        self.problems = list(problems)
        self.workflow = workflow
        count = len(self.problems)
        what = f"workflow {_quote(workflow)}" if workflow else "workflow"
        head = f"invalid {what}: {count} problem{'' if count == 1 else 's'}"
        lines = cap_problems([f"{loc}: {msg}" if loc else msg for loc, msg in self.problems])
        super().__init__("", "\n  ".join([head, *lines]))


class TemplateError(InvalidSpec):
    """A ``{{ ... }}`` template cannot be parsed or rendered (unknown variable, missing param).

    Raised at submission where it can be detected; otherwise (a param missing only at run time)
    the workflow task fails with this message. The message names the variable.
    """

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(field, message)


def _quote(text: str) -> str:
    return quote(text, double=True)


class ConfigError(RaftschedError):
    """A configuration file is invalid. ``problems`` lists every problem, each with its key path.

    The message shows the first :data:`MAX_PROBLEMS_SHOWN` of them, then "… and K more problems".
    """

    code = "invalid_config"

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = list(problems)
        joined = "\n  ".join(cap_problems(self.problems))
        super().__init__(f"{clip(source, QUOTE_CHARS)}: {len(self.problems)} problem(s):\n  {joined}")


class NotFound(RaftschedError):
    """The named task (or run) does not exist. Nothing was changed."""

    code = "not_found"


class AlreadyExists(RaftschedError):
    """A task with that name exists already. Use update, or pick another name."""

    code = "already_exists"


class Conflict(RaftschedError):
    """The command lost a race (expected version mismatch, stale fire). Re-read and retry."""

    code = "conflict"


class StaleEpoch(RaftschedError):
    """A leader command carried an epoch older than the newest the cluster has applied.

    The sender is a deposed leader; the command was refused on every replica. Safe to retry
    against the current leader.
    """

    code = "stale_epoch"


class NotLeader(RaftschedError):
    """This node is not the leader. ``leader`` is the leader's gRPC address if known.

    The SDK follows the hint automatically.
    """

    code = "not_leader"

    def __init__(self, message: str, leader: str | None = None) -> None:
        self.leader = leader
        super().__init__(message)


class Unavailable(RaftschedError):
    """No leader could commit the write in time (no quorum, election in progress).

    The outcome is unknown: the write may or may not have been applied. Retrying with the same
    idempotency key is safe; the SDK does it for you.
    """

    code = "unavailable"


class TlsError(RaftschedError):
    """A TLS handshake with a node failed for a reason that retrying cannot fix: plaintext against
    a TLS port or the reverse, a server certificate the CA does not vouch for, a client
    certificate missing or refused. The message names the address and what to pass. Nothing
    was sent; fix the TLS settings (``--tls-ca``/``--tls-cert``/``--tls-key``, ``TlsConfig``).
    """

    code = "tls_handshake"


class SnapshotFormatError(RaftschedError):
    """A snapshot was written by a newer (or unknown) format version and cannot be restored.
    Nothing was loaded: run a raftsched build that reads that format (upgrade this node)."""

    code = "snapshot_format"


class Unauthenticated(RaftschedError):
    """The call carried no credentials the cluster accepts: no token, an unknown, expired or
    revoked token, or a client certificate no role is granted to. Nothing was done. Pass a
    valid token (``--token``/``--token-file``/``RAFTSCHED_TOKEN``, ``Client(token=...)``)."""

    code = "unauthenticated"


class PermissionDenied(RaftschedError):
    """The caller is authenticated but its role or namespaces do not allow this call; the message
    names the permission (or namespace) missing. Nothing was done. Use a token that has it."""

    code = "permission_denied"


class CannotStart(RaftschedError):
    """A node or executor cannot start as configured: its data directory is locked by another
    process, or an address it must listen on (gRPC, Raft) is in use or not on this host.

    Nothing was started and nothing was written. The message names the directory or address:
    stop the other process, or give this one its own directory and ports.
    """

    code = "cannot_start"


class StoreDamaged(RaftschedError):
    """A file a node or executor keeps its state in is damaged or unreadable: the LMDB state store,
    the Raft journal or snapshot file, or an executor's execution log (``path``). ``problem`` says
    what is wrong, ``remedy`` the way out.

    Nothing was started and nothing was written. The way out loses nothing: ``raftsched-node
    --rebuild`` (``raftsched-executor --rebuild``) moves the damaged files aside, into a
    timestamped directory beside them, and starts empty; a node then catches up from the
    leader's snapshot and log, an executor registers afresh (the cluster's state knows which
    attempts finished). The CLI exits with status 5.
    """

    code = "store_damaged"

    def __init__(self, path: str, problem: str, remedy: str = "") -> None:
        self.path = path
        self.problem = problem
        self.remedy = remedy
        tail = f": {remedy}" if remedy else ""
        super().__init__(f"{path} is damaged ({problem}){tail}")

    def with_remedy(self, remedy: str) -> StoreDamaged:
        """The same damage, with ``remedy`` as the way out (the program that met it knows it)."""
        return StoreDamaged(self.path, self.problem, remedy)


def error_for_code(code: str, message: str) -> RaftschedError:
    """Rebuild the exception matching a rejection ``code`` (used by the SDK)."""
    simple: dict[str, type[RaftschedError]] = {
        NotFound.code: NotFound,
        AlreadyExists.code: AlreadyExists,
        Conflict.code: Conflict,
        StaleEpoch.code: StaleEpoch,
        Unavailable.code: Unavailable,
        SnapshotFormatError.code: SnapshotFormatError,
        Unauthenticated.code: Unauthenticated,
        PermissionDenied.code: PermissionDenied,
    }
    if code == InvalidSpec.code:
        field, sep, reason = message.partition(": ")
        return InvalidSpec(field, reason) if sep else InvalidSpec("", message)
    if code == NotLeader.code:
        return NotLeader(message)
    cls = simple.get(code, RaftschedError)
    return cls(message)


class InvalidBackup(RaftschedError):
    """A backup file cannot be restored: not a raftsched backup, truncated, corrupt (its checksum
    does not match), or written in a newer format than this build reads. Nothing was restored
    and nothing was written; the message says which. Take a new backup (``raftsched backup``),
    or restore with a raftsched build as new as the one that made the file."""

    code = "invalid_backup"
