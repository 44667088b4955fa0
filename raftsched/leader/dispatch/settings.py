"""The dispatcher's settings (from the node's ``[dispatch]`` config) and its fixed bounds."""

from __future__ import annotations

from dataclasses import dataclass

# Effects (or a takeover's pending attempts) handled per state view: the applier waits while a
# view is open, so a batch of thousands is taken in pieces.
EFFECTS_PER_VIEW = 256

# Wait reasons named in one AssignAttempts command: bounded, to keep the entry well under the
# Raft entry size limit when a whole backlog starts waiting at once.
MAX_WAITS_PER_COMMAND = 200


@dataclass(frozen=True, slots=True)
class DispatchSettings:
    lease_ms: int = 10_000  # an assigned attempt whose executor stays silent this long is lost
    heartbeat_ms: int = 2_000  # executors heartbeat this often
    grace_ms: int = 5_000  # SIGTERM -> SIGKILL grace; part of the timeout backstop
    retry_base_ms: int = 10_000  # first retry after ~this long, doubling per attempt...
    retry_cap_ms: int = 900_000  # ...up to this (15 min)
    retry_jitter: float = 0.2  # plus up to 20 % random jitter, drawn here and written to the log
    max_assign_per_command: int = 1000
    # A dispatch stream that closed (its executor's process died, or its connection reset) and
    # was not reopened this long declares the executor dead. Longer than a reconnect takes
    # (register + stream: well under a second), shorter than the lease.
    stream_grace_ms: int = 3_000
