"""Pure helpers over a :class:`~raftsched.sharding.ring.ShardRing`: assign, diff, and place.

A shard is identified by its key ``(task, shard)``. Everything here is a function of its
arguments: no clock, no IO, no randomness, and results never depend on ``set``/``dict`` iteration
order (dicts come back in input order), so every node computes the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeAlias

from raftsched.sharding.ring import ShardRing, shard_key

__all__ = ["ShardKey", "assign", "moved", "place"]

ShardKey: TypeAlias = tuple[str, int]
"""``(task, shard)``: one shard of one task."""


def assign(ring: ShardRing, shards: Iterable[ShardKey]) -> dict[ShardKey, str]:
    """Map each shard to its owner on ``ring``, in input order (a repeated key appears once).

    On an empty ring no shard has an owner and the result is empty.

    Raises:
        ValueError: a shard number is not a non-negative int.
    """
    result: dict[ShardKey, str] = {}
    for key in shards:
        task, shard = key
        owner = ring.owner(task, shard)
        if owner is not None:
            result[key] = owner
    return result


def moved(old: ShardRing, new: ShardRing, keys: Iterable[ShardKey]) -> set[ShardKey]:
    """The keys whose owner differs between ``old`` and ``new``.

    "No owner" (an empty ring) counts as an owner, so going from or to an empty ring moves every
    key. The result is a ``set``: sort it before letting its order reach anything replicated.

    Raises:
        ValueError: a shard number is not a non-negative int.
    """
    return {(task, shard) for task, shard in keys if old.owner(task, shard) != new.owner(task, shard)}


def place(
    ring: ShardRing,
    pending: Sequence[ShardKey],
    free_slots: Mapping[str, int],
    max_fallbacks: int = 0,
) -> tuple[dict[ShardKey, str], list[ShardKey]]:
    """Place pending shards on executors with free slots, never overcommitting a slot.

    ``pending`` is taken in order (the caller's priority: oldest fire first), and each shard goes

    1. to its ring owner, if the owner has a free slot; else
    2. if ``max_fallbacks > 0``, to the first of the owner's next ``max_fallbacks`` distinct ring
       successors (:meth:`ShardRing.candidates`) that has a free slot; else
    3. nowhere: it waits.

    Each placement consumes one slot of ``free_slots`` (which is not modified; a copy is counted
    down). An executor missing from ``free_slots`` has no free slot, a negative count (slots
    reduced below the number running) counts as zero, and executors not on the ring are never
    chosen. So for every executor, the number of shards placed on it is at most
    ``max(0, free_slots[executor])``.

    Fallbacks trade locality for latency: a shard that spills onto a successor starts sooner but
    runs away from its owner (caches, local state, the executor an operator expects), and a hot
    owner's overflow lands on its successors. The default ``0`` is strict ownership: a shard
    waits for its owner's slot, which is the intended backpressure: a busy owner slows its own
    keys, never others'.

    A key that appears more than once in ``pending`` (two overlapping runs of one task) is placed
    at most once per call: the earliest copy is considered and later copies wait, so the caller
    can match placements to its own entries by order and place the rest next round.

    Returns:
        ``(placed, waiting)``: ``placed`` maps each placed shard to its executor, in input order;
        ``waiting`` lists the shards not placed, in input order.

    Raises:
        ValueError: ``max_fallbacks`` is not an int >= 0, or a shard number is not a non-negative
            int.
    """
    if isinstance(max_fallbacks, bool) or not isinstance(max_fallbacks, int) or max_fallbacks < 0:
        raise ValueError(f"max_fallbacks must be an int >= 0, got {max_fallbacks!r}")
    # Only ring members with at least one free slot; an executor leaves this dict at zero, so an
    # empty dict means the whole fleet is full and the rest of `pending` waits without a lookup.
    free = {name: count for name in ring.members if (count := free_slots.get(name, 0)) > 0}
    placed: dict[ShardKey, str] = {}
    waiting: list[ShardKey] = []
    for key in pending:
        task, shard = key
        shard_key(task, shard)  # validate every key, not only those reaching a lookup
        target = None
        if free and key not in placed:
            owner = ring.owner(task, shard)
            if owner in free:
                target = owner
            elif max_fallbacks:
                for candidate in ring.candidates(task, shard, limit=1 + max_fallbacks)[1:]:
                    if candidate in free:
                        target = candidate
                        break
        if target is None:
            waiting.append(key)
            continue
        placed[key] = target
        free[target] -= 1
        if not free[target]:
            del free[target]
    return placed, waiting
