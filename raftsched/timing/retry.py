"""Per-task retry delays: a list of delays, or exponential backoff with a cap and a stable jitter.

``delay_ms(n, delays, backoff, key)`` is how long the ``n``-th retry (1-based) of an attempt
waits after its failure:

* ``delays`` (``retry_delays: [2m, 5m, 15m]``): the n-th delay; past the end the last repeats;
* ``backoff`` (``retry_backoff: {base, cap, jitter}``): ``min(cap, base x 2^(n-1))`` plus a
  jitter in ``[0, that x jitter_pct / 100]`` hashed (BLAKE2b, as :mod:`raftsched.timing.jitter`)
  from ``key``, the failed attempt's execution id: every replica computes the same delay, and
  two attempts failing at once do not retry at once.

Pure: no clock, no randomness, no IO. The state machine calls it in apply with the command's
leader time; the result is replicated as the shard's ``not_before_ms``.
"""

from __future__ import annotations

import hashlib

from raftsched.model import MAX_RETRY_DELAY_MS, RetryBackoff

__all__ = ["backoff_ms", "delay_ms", "has_policy", "jitter_ms"]

# 2^62 x any base is past any cap: the exponent stops here, so an attempt number near 2^32
# never builds a huge integer.
_MAX_EXPONENT = 62


def has_policy(delays: tuple[int, ...], backoff: RetryBackoff | None) -> bool:
    """Whether the task has its own retry timing (else the cluster's backoff applies)."""
    return bool(delays) or backoff is not None


def backoff_ms(n: int, backoff: RetryBackoff) -> int:
    """The capped exponential delay of the ``n``-th retry, before jitter."""
    cap = backoff.cap_ms or MAX_RETRY_DELAY_MS
    return min(cap, backoff.base_ms << min(max(0, n - 1), _MAX_EXPONENT))


def jitter_ms(delay: int, jitter_pct: int, key: str) -> int:
    """A stable jitter in ``[0, delay x jitter_pct // 100]`` for ``key`` (0 without jitter)."""
    span = delay * jitter_pct // 100
    if span <= 0:
        return 0
    digest = hashlib.blake2b(f"retry\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % (span + 1)


def delay_ms(n: int, delays: tuple[int, ...], backoff: RetryBackoff | None, key: str) -> int:
    """How long the ``n``-th retry (1-based) waits; 0 when the task has no policy of its own."""
    if delays:
        return delays[min(max(n, 1), len(delays)) - 1]
    if backoff is None:
        return 0
    base = backoff_ms(n, backoff)
    return base + jitter_ms(base, backoff.jitter_pct, key)
