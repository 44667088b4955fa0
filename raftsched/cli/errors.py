"""How the command-line programs fail: one line on stderr and an exit status, never a traceback.

Exit status: 0 on success, 2 for usage errors and invalid input (including input the cluster
rejects as invalid, and an invalid config file) and for a node or executor that cannot start
(its data dir locked by another process, an address in use), 1 for every other error (not found, conflict,
unreachable cluster...), 5 for a node or executor whose stored state is damaged (the message names
the file and the way out, ``--rebuild``), 130 when interrupted. An error is one line on stderr,
``<prog>: error: <message>``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn

from raftsched.errors import (
    CannotStart,
    ConfigError,
    InvalidBackup,
    InvalidSpec,
    InvalidWorkflow,
    RaftschedError,
    SnapshotFormatError,
    StoreDamaged,
)
from raftsched.taskfields import TASK_FIELDS, option_of_error

__all__ = [
    "STORE_DAMAGED_EXIT",
    "ArgParser",
    "UsageError",
    "config_message",
    "fail",
    "fail_workflow",
    "invalid_message",
    "is_grpc_error",
    "run_guarded",
]

STORE_DAMAGED_EXIT = 5
"""A node's or executor's stored state is damaged: start it with ``--rebuild``."""

# Model field names (as InvalidSpec reports them) -> the option a CLI user typed: the task
# fields' from their table, then the other commands'.
_FLAGS = {
    **option_of_error(TASK_FIELDS),
    "name": "NAME",
    "task": "NAME",
    "targets": "--cluster",
    "tls.ca_file": "--tls-ca",
    "tls.cert_file": "--tls-cert",
    "tls.key_file": "--tls-key",
    "count": "--count",
    "workflow": "NAME",
    "param": "--param",
    "run_id": "RUN_ID",
    "from": "--from",
    "to": "--to",
    "logical_ms": "--logical",
    "version": "--version",
}


class UsageError(Exception):
    """Bad command-line input: reported as one line, exit status 2."""


class ArgParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors become :class:`UsageError` (one line, no usage dump)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def fail(message: str, status: int, *, prog: str = "raftsched") -> int:
    """Print ``message`` (folded onto one line) as ``prog``'s error; returns ``status``."""
    one_line = " ".join(part.strip() for part in message.splitlines() if part.strip())
    print(f"{prog}: error: {one_line}", file=sys.stderr)
    return status


def fail_workflow(exc: InvalidWorkflow) -> int:
    """An invalid workflow: a headline, then every problem on its own line (file:line first)."""
    headline = str(exc).split("\n", 1)[0]  # "invalid workflow "etl": 3 problems"
    print(f"raftsched: error: {headline}", file=sys.stderr)
    for location, message in exc.problems:
        print(f"  {location}: {message}" if location else f"  {message}", file=sys.stderr)
    return 2


def invalid_message(exc: InvalidSpec) -> str:
    """The rejection, naming the option the user typed rather than the model field."""
    if not exc.field:
        return exc.reason
    return f"{_FLAGS.get(exc.field, exc.field)}: {exc.reason}"


def config_message(exc: ConfigError) -> str:
    """Every problem of an invalid config file, on one line."""
    return f"invalid config {exc.source}: " + "; ".join(exc.problems)


def is_grpc_error(exc: Exception) -> bool:
    """Whether ``exc`` is a gRPC error, without importing grpc for commands that never load it."""
    grpc = sys.modules.get("grpc")
    return grpc is not None and isinstance(exc, grpc.RpcError)


def run_guarded(prog: str, function: Callable[..., int], *args: str) -> int:
    """``function(*args)`` for a program that runs processes (a node, the demo): its errors become
    ``prog``'s one-line error and exit status (a bad config, or a start refused because the data
    dir or an address is taken, a backup that cannot be restored, a state of a newer format, 2;
    any other rejection 1; a damaged store 5)."""
    try:
        return int(function(*args))
    except StoreDamaged as exc:
        return fail(str(exc), STORE_DAMAGED_EXIT, prog=prog)
    except ConfigError as exc:
        return fail(config_message(exc), 2, prog=prog)
    except (InvalidSpec, CannotStart, InvalidBackup, SnapshotFormatError) as exc:
        return fail(str(exc), 2, prog=prog)
    except RaftschedError as exc:
        return fail(str(exc) or exc.code, 1, prog=prog)
    except KeyboardInterrupt:
        return fail("interrupted", 130, prog=prog)
