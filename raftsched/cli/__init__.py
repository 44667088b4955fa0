"""Command-line programs: ``raftsched`` (the admin CLI), ``raftsched-node`` and ``raftsched-executor``.

One module per concern: :mod:`~raftsched.cli.parser` (the admin CLI's arguments and :func:`main`),
:mod:`~raftsched.cli.input` (time, duration and param grammars), :mod:`~raftsched.cli.tasks`,
:mod:`~raftsched.cli.workflows`, :mod:`~raftsched.cli.cluster`, :mod:`~raftsched.cli.cron` and
:mod:`~raftsched.cli.demo` (the commands), :mod:`~raftsched.cli.render` (output),
:mod:`~raftsched.cli.errors` (one-line errors and exit statuses), and the programs that run a
process until stopped, :mod:`~raftsched.cli.node` and :mod:`~raftsched.cli.executor`, with
:mod:`~raftsched.cli.process` (logging, stop signals). The wall clock is read only to resolve
``now`` and relative times (:func:`raftsched.cli.input.lazy_now`).

The node entry module is not imported here: ``python -m raftsched.cli.node`` runs it as
``__main__``, and a copy imported first by the package would be a second, different module.
"""

from __future__ import annotations

from raftsched.cli.cluster import CLUSTER_ENV
from raftsched.cli.errors import UsageError
from raftsched.cli.input import parse_duration_ms, parse_time
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
