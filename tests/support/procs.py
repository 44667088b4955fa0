"""The one way a test builds a ``raftsched-executor`` process outside a :class:`LocalCluster`.

Tests with a :class:`~raftsched.testing.cluster.LocalCluster` start executors with its
``start_executor`` (it adds the cluster's targets, TLS options and environment). This module is
for the rest: an executor that must refuse to start (run with :func:`subprocess.run` on
:func:`executor_argv`), one that dials a node started in-process, or one that presents a
certificate of its own (:func:`start_executor`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

EXECUTOR_COMMAND = (sys.executable, "-m", "raftsched.executor")


def executor_argv(
    targets: str | Sequence[str], name: str, data_dir: Path, *extra: str, slots: int | None = None
) -> list[str]:
    """The command line of executor ``name`` dialling ``targets`` (``host:port``, one or a list),
    keeping its execution log in ``data_dir``; ``extra``: more of its options."""
    cluster = targets if isinstance(targets, str) else ",".join(targets)
    return [
        *EXECUTOR_COMMAND,
        "--cluster",
        cluster,
        "--name",
        name,
        *(("--slots", str(slots)) if slots is not None else ()),
        "--data-dir",
        str(data_dir),
        *extra,
    ]


def start_executor(
    argv: Sequence[str], log: Path, *, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` (from :func:`executor_argv`) with stdout and stderr appended to ``log`` and
    ``env`` as its whole environment (default: this process's). The caller owns the process."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(os.environ if env is None else env),
        )
