"""Jitter: a stable start offset per fire, so many tasks due at one instant do not start at once.

``offset_ms(name, nominal_ms, jitter_ms)`` is a deterministic value in ``[0, jitter_ms)`` hashed
from the task (or workflow) name and the fire's nominal time with BLAKE2b, never Python's
``hash()`` (salted per process): every replica, every leader and every release computes the same
offset, so a failover does not move a start. The fire keeps its nominal time (fire records,
logical time, ``{{ ds }}``); only the start of its attempts waits until ``nominal + offset``.

Pure: no clock, no randomness, no IO.
"""

from __future__ import annotations

import hashlib

__all__ = ["offset_ms", "start_ms"]


def offset_ms(name: str, nominal_ms: int, jitter_ms: int) -> int:
    """The start offset in ``[0, jitter_ms)`` of ``name``'s fire at ``nominal_ms`` (0 without jitter)."""
    if jitter_ms <= 0:
        return 0
    digest = hashlib.blake2b(f"{name}\x00{nominal_ms}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % jitter_ms


def start_ms(name: str, nominal_ms: int, jitter_ms: int) -> int:
    """The earliest start of that fire: ``nominal_ms`` plus its offset."""
    return nominal_ms + offset_ms(name, nominal_ms, jitter_ms)
