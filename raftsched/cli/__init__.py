"""Command-line programs: ``raftsched`` (the admin CLI), ``raftsched-node`` and ``raftsched-executor``.

One module per concern: :mod:`~raftsched.cli.parser` (the admin CLI's arguments and :func:`main`),
:mod:`~raftsched.cli.input` (time, duration and param grammars), :mod:`~raftsched.cli.tasks`,
:mod:`~raftsched.cli.workflows`, :mod:`~raftsched.cli.cluster`, :mod:`~raftsched.cli.cron` and
:mod:`~raftsched.cli.demo` (the commands), :mod:`~raftsched.cli.render` (output),
:mod:`~raftsched.cli.errors` (one-line errors and exit statuses), :mod:`~raftsched.cli.options` (the
cluster and TLS options the programs share), and the programs that run a
process until stopped, :mod:`~raftsched.cli.node` and :mod:`~raftsched.cli.executor`, with
:mod:`~raftsched.cli.process` (logging, stop signals). The wall clock is read only to resolve
``now`` and relative times (:func:`raftsched.cli.input.lazy_now`).

The admin CLI (:mod:`~raftsched.cli.parser`, and through its commands the state machine's
validators) is imported on first use of its names, not with the package: ``raftsched-executor``
runs from this package and loads no ``raftsched.fsm`` module (``tests/unit/test_layers.py``).
The node entry module is not imported here: ``python -m raftsched.cli.node`` runs it as
``__main__``, and a copy imported first by the package would be a second, different module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raftsched.cli.errors import UsageError
from raftsched.cli.input import parse_duration_ms, parse_time
from raftsched.cli.options import CLUSTER_ENV

if TYPE_CHECKING:
    from raftsched.cli.parser import build_parser, main
    from raftsched.cli.tasks import merge_spec, spec_from_args

__all__ = [
    "CLUSTER_ENV",
    "UsageError",
    "build_parser",
    "main",
    "merge_spec",
    "parse_duration_ms",
    "parse_time",
    "spec_from_args",
]


def __getattr__(name: str) -> Any:
    if name in ("build_parser", "main"):
        from raftsched.cli import parser

        return getattr(parser, name)
    if name in ("merge_spec", "spec_from_args"):
        from raftsched.cli import tasks

        return getattr(tasks, name)
    raise AttributeError(f"module 'raftsched.cli' has no attribute {name!r}")
