"""The error vocabulary of raftsched.

Every error a caller can see is one of these. Each docstring says what the error means for the
caller and what to do about it.

Inside the replicated state machine nothing is raised for bad input: ``apply`` returns a
:class:`raftsched.fsm.state.Rejected` value with one of the ``code`` strings below, so every
replica records the same outcome. The SDK turns a rejection back into the matching exception.
"""

from __future__ import annotations


class RaftschedError(Exception):
    """Base class of every raftsched error."""

    code = "internal"


class InvalidSpec(RaftschedError):
    """The input is malformed: a bad cron expression, zone, interval, policy or an oversized field.

    ``field`` names where the problem is (``trigger.cron``, ``nodes[2].raft``); the message says
    why. Nothing was stored. Fix the input and send it again.
    """

    code = "invalid_argument"

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}" if field else reason)


class InvalidWorkflow(InvalidSpec):
    """A workflow definition (or workflow file) is invalid; nothing was stored.

    ``problems`` lists *every* problem found, each as ``(location, message)``. The location names
    the field path (``tasks[2].depends_on[0]``), with the task's name in parentheses where it
    helps, prefixed by the file position (``etl.yaml:14``) when the definition came from a file;
    it is ``""`` for a problem with the workflow as a whole. Fix them all and submit again.
    """

    def __init__(self, problems: list[tuple[str, str]], workflow: str = "") -> None:
        self.problems = list(problems)
        self.workflow = workflow
        count = len(self.problems)
        what = f"workflow {_quote(workflow)}" if workflow else "workflow"
        head = f"invalid {what}: {count} problem{'' if count == 1 else 's'}"
        lines = [f"{loc}: {msg}" if loc else msg for loc, msg in self.problems]
        super().__init__("", "\n  ".join([head, *lines]))


class TemplateError(InvalidSpec):
    """A ``{{ ... }}`` template cannot be parsed or rendered (unknown variable, missing param).

    Raised at submission where it can be detected; otherwise (a param missing only at run time)
    the workflow task fails with this message. The message names the variable.
    """

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(field, message)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class ConfigError(RaftschedError):
    """A configuration file is invalid. ``problems`` lists every problem, each with its key path."""

    code = "invalid_config"

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = list(problems)
        joined = "\n  ".join(self.problems)
        super().__init__(f"{source}: {len(self.problems)} problem(s):\n  {joined}")


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


class SnapshotFormatError(RaftschedError):
    """A snapshot was written by a newer (or unknown) format version and cannot be restored."""

    code = "snapshot_format"


class CannotStart(RaftschedError):
    """A node or executor cannot start as configured: its data directory is locked by another
    process, or an address it must listen on (gRPC, Raft) is in use or not on this host.

    Nothing was started and nothing was written. The message names the directory or address:
    stop the other process, or give this one its own directory and ports.
    """

    code = "cannot_start"


def error_for_code(code: str, message: str) -> RaftschedError:
    """Rebuild the exception matching a rejection ``code`` (used by the SDK)."""
    simple: dict[str, type[RaftschedError]] = {
        NotFound.code: NotFound,
        AlreadyExists.code: AlreadyExists,
        Conflict.code: Conflict,
        StaleEpoch.code: StaleEpoch,
        Unavailable.code: Unavailable,
        SnapshotFormatError.code: SnapshotFormatError,
    }
    if code == InvalidSpec.code:
        field, sep, reason = message.partition(": ")
        return InvalidSpec(field, reason) if sep else InvalidSpec("", message)
    if code == NotLeader.code:
        return NotLeader(message)
    cls = simple.get(code, RaftschedError)
    return cls(message)
