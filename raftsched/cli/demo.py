"""``raftsched demo``: a local cluster, executors and sample tasks (see :mod:`raftsched.testing.demo`)."""

from __future__ import annotations

import argparse

from raftsched.cli.errors import run_guarded

__all__ = ["DEFAULT_DEMO_CONFIG", "cmd_demo", "demo_main", "run_demo"]

DEFAULT_DEMO_CONFIG = "cluster.example.toml"


def cmd_demo(args: argparse.Namespace) -> int:
    """``demo``: the demo cluster of ``--config`` (the command's, else the global one)."""
    return demo_main(args.demo_config or args.config or DEFAULT_DEMO_CONFIG, args.duration)


def demo_main(config_path: str = DEFAULT_DEMO_CONFIG, duration: float = 0.0) -> int:
    """Run the local demo cluster described by ``config_path``; returns the exit status.

    ``duration`` > 0 stops the demo after that many seconds (0 runs until Ctrl-C)."""
    return run_guarded("raftsched", run_demo, config_path, str(duration))


def run_demo(config_path: str, duration: str = "0") -> int:
    """Run the demo (``duration`` in seconds, as text; ``"0"`` runs until Ctrl-C)."""
    # Imported here: the demo starts node processes, which the admin commands never need.
    from raftsched.testing.demo import run_demo as demo

    return demo(config_path, duration)
