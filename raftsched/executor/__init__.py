"""The executor side: runners that carry out attempts, and the dedupe log that runs each once.

``runners`` runs a shell command or a registered Python handler and turns every outcome into an
:class:`AttemptResult`; ``dedupe`` records execution ids durably (in an
:class:`raftsched.abc.ExecutionLog`) so a re-delivered attempt is not run again and its result is
re-reported; ``memory`` is the in-process :class:`raftsched.abc.ExecutorTransport`.
"""

from raftsched.executor.dedupe import BeginOutcome, BeginStatus, DedupeLog, ExecutionRecord, ExecutionState
from raftsched.executor.runners import (
    AttemptContext,
    AttemptResult,
    CallableRunner,
    CommandRunner,
    SubprocessRunner,
)

__all__ = [
    "AttemptContext",
    "AttemptResult",
    "BeginOutcome",
    "BeginStatus",
    "CallableRunner",
    "CommandRunner",
    "DedupeLog",
    "ExecutionRecord",
    "ExecutionState",
    "SubprocessRunner",
]
