"""The executor side: runners that carry out attempts, and the dedupe log that runs each once.

``commands`` runs a shell command and ``handlers`` a registered Python handler, each turning
every outcome into an :class:`AttemptResult` (``runners``: their contract and the attempt's
context and result); ``dedupe`` records execution ids durably (in an
:class:`raftsched.abc.ExecutionLog`; ``execlog_records``: how its entries are encoded) so a
re-delivered attempt is not run again and its result is re-reported; ``memory`` is the
in-process :class:`raftsched.abc.ExecutorTransport`.
"""

from raftsched.executor.commands import SubprocessRunner
from raftsched.executor.dedupe import DedupeLog
from raftsched.executor.execlog_records import BeginOutcome, BeginStatus, ExecutionRecord, ExecutionState
from raftsched.executor.handlers import CallableRunner
from raftsched.executor.runners import AttemptContext, AttemptResult, CommandRunner

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
