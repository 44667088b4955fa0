"""A real Alertmanager for tests: Debian's ``prometheus-alertmanager``, started on loopback.

``tools/install-test-deps.sh`` installs it. Without it a test skips with the reason, except in CI
(``CI=true``), where it fails: CI must prove the delivery to a real Alertmanager, not skip it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from raftsched.testing.cluster import free_ports, wait_until

# A route to a receiver that sends nothing: the test reads the alerts back from the API.
CONFIG = """\
route:
  receiver: blackhole
  group_wait: 1s
receivers:
  - name: blackhole
"""


def binary() -> str:
    """The Alertmanager executable; skips the test (fails it in CI) if there is none."""
    for name in ("prometheus-alertmanager", "alertmanager"):
        found = shutil.which(name)
        if found:
            return found
    message = (
        "prometheus-alertmanager not found: install Debian's 'prometheus-alertmanager' package "
        "(tools/install-test-deps.sh does, as root) or put alertmanager on PATH"
    )
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail(f"{message} (CI=true: this check must run in CI)")
    pytest.skip(message)


class Alertmanager:
    """A running Alertmanager at :attr:`url` (``http://127.0.0.1:<port>``)."""

    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.log = log

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as answer:
            return json.loads(answer.read())

    def alerts(self, **labels: str) -> list[dict[str, Any]]:
        """The alerts the API lists (active ones; a resolved alert is not listed) whose labels
        include ``labels``."""
        found: list[dict[str, Any]] = self.get("/api/v2/alerts")
        return [a for a in found if all(a["labels"].get(k) == v for k, v in labels.items())]

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False


@contextmanager
def running(directory: Path) -> Iterator[Alertmanager]:
    """Start Alertmanager with its config and storage under ``directory`` (gossip off), wait
    until it is ready, and stop it afterwards."""
    exe = binary()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "alertmanager.yml").write_text(CONFIG)
    [port] = free_ports(1)
    log = directory / "alertmanager.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                exe,
                f"--config.file={directory / 'alertmanager.yml'}",
                f"--storage.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    am = Alertmanager(f"http://127.0.0.1:{port}", log)
    try:
        wait_until(lambda: am.ready() or proc.poll() is not None, 30, 0.1, "Alertmanager ready (or exited)")
        if proc.poll() is not None:
            pytest.fail(f"Alertmanager exited with {proc.returncode}:\n{log.read_text(errors='replace')}")
        yield am
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
