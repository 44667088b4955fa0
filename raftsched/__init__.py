"""raftsched: a highly available cron and DAG scheduler, built as a Raft-replicated cluster.

Public names are re-exported here; everything else is internal. ``Client`` and ``Node`` are
imported lazily so that using the pure parts (specs, cron preview) does not load gRPC or pysyncobj.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raftsched.errors import (
    AlreadyExists,
    ConfigError,
    Conflict,
    InvalidSpec,
    NotFound,
    NotLeader,
    RaftschedError,
    StaleEpoch,
    TlsError,
    Unavailable,
)
from raftsched.model import (
    CronTrigger,
    IntervalTrigger,
    Lock,
    LockMode,
    ManualTrigger,
    Misfire,
    OnceTrigger,
    Outcome,
    Overlap,
    RetryBackoff,
    Runner,
    RunState,
    TaskSpec,
)
from raftsched.readinfo import ReadInfo

if TYPE_CHECKING:
    from raftsched.client import Client
    from raftsched.executor.agent import Executor
    from raftsched.security.tls import TlsConfig
    from raftsched.server.node import Node

__version__ = "0.1.0"

__all__ = [
    "AlreadyExists",
    "Client",
    "ConfigError",
    "Conflict",
    "CronTrigger",
    "Executor",
    "IntervalTrigger",
    "InvalidSpec",
    "Lock",
    "LockMode",
    "ManualTrigger",
    "Misfire",
    "Node",
    "NotFound",
    "NotLeader",
    "OnceTrigger",
    "Outcome",
    "Overlap",
    "RaftschedError",
    "ReadInfo",
    "RetryBackoff",
    "RunState",
    "Runner",
    "StaleEpoch",
    "TaskSpec",
    "TlsConfig",
    "TlsError",
    "Unavailable",
]


def __getattr__(name: str) -> Any:
    if name == "Client":
        from raftsched.client import Client

        return Client
    if name == "Executor":
        from raftsched.executor.agent import Executor

        return Executor
    if name == "Node":
        from raftsched.server.node import Node

        return Node
    if name == "TlsConfig":
        from raftsched.security.tls import TlsConfig

        return TlsConfig
    raise AttributeError(f"module 'raftsched' has no attribute {name!r}")
