"""Defined means called: vulture over ``raftsched/`` finds no unused function, method, class,
attribute, variable or import, except the names in ``tests/deadcode_whitelist.txt``, each with the
reason it only looks unused. A whitelist line that no longer matches a finding fails too, so the
list shrinks with the code.

gRPC servicer methods (the ``Admin`` and ``ExecutorService`` services of ``raftsched/v1``) are
called by grpc through the generated ``add_*Servicer_to_server``: their names come from the
service descriptors, not from the whitelist.
"""

from __future__ import annotations

from pathlib import Path

import vulture

from raftsched.v1 import raftsched_pb2

ROOT = Path(__file__).resolve().parents[2]
WHITELIST = ROOT / "tests" / "deadcode_whitelist.txt"
MIN_CONFIDENCE = 60  # vulture's lowest: attributes, methods and variables it cannot prove unused


def servicer_methods() -> list[str]:
    return [m.name for s in raftsched_pb2.DESCRIPTOR.services_by_name.values() for m in s.methods]


def whitelist() -> dict[str, str]:
    """``path:name`` -> why it only looks unused (one line each, ``#`` starts the reason)."""
    out: dict[str, str] = {}
    for number, line in enumerate(WHITELIST.read_text().splitlines(), 1):
        entry, _, why = line.partition("#")
        if not entry.strip():
            continue
        assert why.strip(), f"{WHITELIST.name}:{number}: {entry.strip()} says no reason"
        assert entry.strip() not in out, f"{WHITELIST.name}:{number}: {entry.strip()} listed twice"
        out[entry.strip()] = why.strip()
    return out


def findings() -> list[tuple[str, str, int, str]]:
    v = vulture.Vulture(ignore_names=servicer_methods())
    v.scavenge([str(ROOT / "raftsched")], exclude=[str(ROOT / "raftsched" / "v1")])
    return [
        (
            f"{Path(item.filename).resolve().relative_to(ROOT)}:{item.name}",
            item.typ,
            item.first_lineno,
            item.message,
        )
        for item in v.get_unused_code(min_confidence=MIN_CONFIDENCE)
    ]


def test_nothing_in_raftsched_is_defined_and_never_used() -> None:
    allowed = whitelist()
    found = findings()
    unused = [
        f"{key.split(':')[0]}:{line}: {message}" for key, _, line, message in found if key not in allowed
    ]
    assert not unused, "dead code (remove it, or whitelist it with the reason it is used):\n" + "\n".join(
        unused
    )
    stale = sorted(set(allowed) - {key for key, _, _, _ in found})
    assert not stale, f"{WHITELIST.name} lists names that are used now or gone; drop them:\n" + "\n".join(
        stale
    )
