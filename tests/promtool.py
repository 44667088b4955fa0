"""``promtool`` and the Prometheus server for tests: lint an exposition as Prometheus would, run rules.

promtool comes from Debian's ``prometheus`` package (``tools/install-test-deps.sh`` installs it).
Without it a test skips with the reason, except in CI (``CI=true``), where it fails: CI must
prove the exposition, not skip it.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def promtool() -> str:
    """The promtool executable; skips the test (fails it in CI) if there is none."""
    return _tool("promtool")


def prometheus() -> str:
    """The Prometheus server executable; skips the test (fails it in CI) if there is none."""
    return _tool("prometheus")


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    message = (
        f"{name} not found: install Debian's 'prometheus' package (tools/install-test-deps.sh does, "
        f"as root) or put {name} on PATH"
    )
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail(f"{message} (CI=true: this check must run in CI)")
    pytest.skip(message)


def check_metrics(exposition: bytes) -> None:
    """Fail the test with promtool's findings if it rejects the exposition (lint problems included)."""
    done = subprocess.run(
        [promtool(), "check", "metrics"], input=exposition, capture_output=True, timeout=30, check=False
    )
    findings = (done.stdout + done.stderr).decode(errors="replace").strip()
    assert done.returncode == 0 and not findings, f"promtool check metrics:\n{findings}"
