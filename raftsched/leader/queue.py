"""The order in which attempts waiting for an executor slot start: the one place that defines it.

Attempts wait per executor (the one the shard ring picks for them). When that executor has free
slots, the dispatcher walks its queue in **start order** and proposes the first attempts that may
start now (backoff over, quota and locks available):

1. higher ``priority`` first (0-9, 9 most urgent; the task's, or the workflow task's);
2. then the older nominal time (a fire that is already late goes before a newer one);
3. then run id and shard: a total, deterministic tie-break, so every leader that rebuilds the
   queue from the replicated state walks it in the same order.

Backfill attempts are in the same queue; the dispatcher takes them in a second walk, only in
slots that regular work left free (and within the backfill's share). Anything that changes which
attempt starts first (placement by resources, overlap policies) should extend :func:`start_order`
rather than sort elsewhere.

Cost: insertion is a binary search plus a list insert (attempts mostly arrive in order, at the
end); removal is O(1) (lazy, compacted when half the entries are dead: the dead prefix a walk skipped
and an emptied queue need no look-up each); a walk is a list
iteration with one dict look-up per entry.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from itertools import islice
from typing import Generic, Protocol, TypeVar

StartOrder = tuple[int, int, str, int]
"""``(-priority, nominal_ms, run_id, shard)``: ascending order is start order."""


def start_order(priority: int, nominal_ms: int, run_id: str, shard: int) -> StartOrder:
    """The sort key of a waiting attempt (see the module docstring)."""
    return (-priority, nominal_ms, run_id, shard)


class Ordered(Protocol):
    @property
    def order(self) -> StartOrder: ...


W = TypeVar("W", bound=Ordered)


class WaitQueue(Generic[W]):
    """Attempts waiting for one executor, by ``(run_id, shard)``, iterated in start order.

    Removal is lazy (O(1)): the entry stays in the ordered list until a compaction, and a walk
    skips entries whose item is gone or was replaced (told by the identity of its order tuple).
    Not thread-safe (the dispatcher's loop owns it). Iteration must not overlap a mutation."""

    __slots__ = ("_dead", "_head", "_items", "_order")

    def __init__(self) -> None:
        self._items: dict[tuple[str, int], W] = {}
        self._order: list[StartOrder] = []
        self._dead = 0  # entries of _order whose item was removed
        self._head = 0  # every entry before it is dead (walks start here)

    def add(self, key: tuple[str, int], item: W) -> None:
        self.remove(key)
        self._items[key] = item
        order = item.order
        entries = self._order
        if not entries or entries[-1] < order:
            entries.append(order)  # the common case: fires arrive in nominal order
            return
        i = bisect_left(entries, order)
        entries.insert(i, order)
        if i < self._head:
            self._head = i  # an urgent attempt went in front of the dead prefix

    def remove(self, key: tuple[str, int]) -> W | None:
        item = self._items.pop(key, None)
        if item is not None:
            self._dead += 1
            if self._dead > 64 and self._dead > len(self._items):
                self._compact()
        return item

    def _compact(self) -> None:
        items = self._items
        if not items:
            self._order = []  # the steady state: every attempt that waited has left
        else:
            # Entries before the head are dead (known without a look-up each).
            self._order = [
                o
                for o in islice(self._order, self._head, None)
                if (it := items.get((o[2], o[3]))) is not None and it.order is o
            ]
        self._dead = 0
        self._head = 0

    def __iter__(self) -> Iterator[W]:
        items, entries = self._items, self._order
        # Skip the dead prefix for good: the head of a queue is where attempts leave it.
        head, end = self._head, len(entries)
        while head < end:
            o = entries[head]
            it = items.get((o[2], o[3]))
            if it is not None and it.order is o:
                break
            head += 1
        self._head = head
        for order in islice(entries, head, None):
            item = items.get((order[2], order[3]))
            if item is not None and item.order is order:
                yield item

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items
