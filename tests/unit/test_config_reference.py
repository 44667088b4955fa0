"""The configuration reference (raftsched/config/reference.py, rendered into the docs site) names
every key a loader accepts, no other, and the defaults the code uses.

The accepted keys are not copied here: the loader is run on a config with every table, and each
table's "unknown key" check reports what it allows.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from raftsched.alerts import config as alerts_config
from raftsched.config import load, reference
from raftsched.config.eventhooks import _KEYS as EVENT_KEYS
from raftsched.config.types import RaftTuning, SchedulerSettings, section_defaults
from raftsched.security.auth import AUTH_KEYS

ROOT = Path(__file__).resolve().parents[2]


def accepted_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> set[str]:
    seen: set[str] = set()
    real = load._unknown_keys

    def record(prefix: str, table: Mapping[str, object], allowed: Sequence[str], problems: list[str]) -> None:
        prefix = re.sub(r"\[\d+\]", "[]", prefix)
        if prefix:  # the top level lists the tables, not keys
            seen.update(f"{prefix}.{k}" for k in allowed)
        real(prefix, table, allowed, problems)

    monkeypatch.setattr(load, "_unknown_keys", record)
    data = tomllib.loads((ROOT / "cluster.example.toml").read_text())
    data.setdefault("tls", {"cert_file": "c.pem", "key_file": "k.pem"})
    load.parse_config(data, base_dir=tmp_path)
    seen.update(f"auth.{k}" for k in AUTH_KEYS)
    seen.update(f"alerts.{k}" for k in alerts_config._KEYS if k not in ("webhook", "email", "start_delay"))
    levels = [k for k in alerts_config._START_DELAY_KEYS if k != "namespaces"]
    seen.update(f"alerts.start_delay.{k}" for k in levels)
    seen.update(f"alerts.start_delay.namespaces.<ns>.{k}" for k in levels)
    seen.update(f"alerts.webhook[].{k}" for k in alerts_config._WEBHOOK_KEYS)
    seen.update(f"alerts.email[].{k}" for k in alerts_config._EMAIL_KEYS)
    seen.update(f"events.<name>.{k}" for k in EVENT_KEYS)
    return seen


def test_the_reference_names_every_accepted_key_and_no_other(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    documented = {k.path for k in reference.KEYS}
    accepted = accepted_keys(monkeypatch, tmp_path)
    assert not accepted - documented, (
        f"keys without an entry in raftsched/config/reference.py: {accepted - documented}"
    )
    assert not documented - accepted, f"entries for keys no loader accepts: {documented - accepted}"
    assert len(documented) == len(reference.KEYS), "a key is documented twice"


@pytest.mark.parametrize(("section", "cls"), [("raft", RaftTuning), ("scheduler", SchedulerSettings)])
def test_the_documented_defaults_are_the_codes(
    section: str, cls: type[RaftTuning | SchedulerSettings]
) -> None:
    by_path = {k.path: k for k in reference.KEYS}
    for name, default in section_defaults(cls).items():
        entry = by_path[f"{section}.{name}"]
        assert float(entry.default) == float(default), (
            f"{entry.path}: documented {entry.default}, code {default}"
        )


def test_every_entry_is_complete() -> None:
    for key in reference.KEYS:
        assert key.type in reference.TYPES, f"{key.path}: type {key.type!r}"
        assert key.meaning.strip() and key.default.strip(), key.path
