"""A pure hierarchical timing wheel: the leader's index of pending fires.

The leader keeps every armed fire here and asks two questions of it: "which fires are due now?"
(:meth:`TimingWheel.advance`) and "how long may I sleep?" (:meth:`TimingWheel.next_due_ms`). The
structure is the hashed hierarchical wheel of Varghese & Lauck (as in Kafka's purgatory and the
Linux timer wheel). It is pure: it reads no clock, does no IO, uses no randomness and owns no
thread. Time enters only as integer milliseconds passed by the caller, so the same calls always
give the same answers on every replica.

Layout. Time is cut into ticks of ``tick_ms``. With ``W = wheel_size`` and ``L = levels``, a tick
number ``t`` is read as base-``W`` digits, and ``t // W**l`` is its *level-l block*. A key due in
tick ``d`` while the current tick is ``T`` lives at:

* the *ready* set, if its due time is at or before the current time (it fires on the next advance);
* level 0, slot ``d % W``, if ``d`` and ``T`` share their level-1 block (``d >= T``; ``d == T`` only
  when the exact due time is still ahead of ``now_ms``);
* level ``l`` (``1 <= l < L``), slot ``(d // W**l) % W``, if ``d`` and ``T`` share their
  level-``l+1`` block but not their level-``l`` block, i.e. ``l`` is the highest digit in which
  they differ;
* the overflow heap, if ``d`` and ``T`` are not even in the same level-``L`` block
  (more than about ``tick_ms * W**L`` ahead).

With the defaults (10 ms ticks, 256 slots, 5 levels) the wheel proper spans about 348 years, so
the overflow heap is there for correctness, not for the common case.

Advancing from tick ``T`` to ``T'`` never walks the ticks in between. Let ``h`` be the highest
level whose block differs between ``T`` and ``T'``. Every key below level ``h`` is then due; the
slots of level ``h`` strictly between the two digits are due; the one slot of level ``h`` that
``T'`` has just entered is *cascaded* (re-bucketed relative to ``T'``, dropping each key to a
lower level); levels above ``h`` are untouched. If even the level-``L`` block changed, the whole
wheel is due and the overflow heap is drained down to the new block. Every cascade moves a key
strictly downwards, so a key is touched at most ``levels + 1`` times in its life however time
jumps: a jump of years costs the same as a jump of one tick with the same keys.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Hashable, Iterator, KeysView
from operator import itemgetter
from typing import Generic, TypeVar

__all__ = ["TimingWheel"]

K = TypeVar("K", bound=Hashable)

# Fired items are collected as (packed, key); ordering must never fall through to the key,
# which need not be comparable (seq is unique, so it never would, but say so explicitly).
_FIRE_ORDER = itemgetter(0)
_FIRED_KEY = itemgetter(1)


# An armed key is one int: its exact due time and its insertion sequence, packed as
# ``due << _SEQ_BITS | seq``. Packed ints order as ``(due, seq)`` (negative dues included: the
# shift is arithmetic), and the same int object is held by the key index and by the slot that
# holds the key, so a key costs one int and two dict entries (an object per key with due, seq,
# level and slot cost ~110 B more: ~210 B per armed key measured with tracemalloc, ~100 now).
# A key's level and slot are not stored: its due time says which slot of each level it would
# be in, and :meth:`TimingWheel.cancel` looks there.
_SEQ_BITS = 48
_SEQ_MASK = (1 << _SEQ_BITS) - 1
# Sequences are renumbered (order kept) before they would need more bits: after 2**48 inserts.
_SEQ_LIMIT = 1 << _SEQ_BITS


def _consume(iterator: Iterator[object]) -> None:
    """Run ``iterator`` to its end in C (a ``deque`` of length 0), keeping nothing: the keys of a
    fired slot are dropped from the index this way, a thousand at a time."""
    deque(iterator, maxlen=0)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class TimingWheel(Generic[K]):
    """Pending fires keyed by ``K``, each with an exact due time in milliseconds.

    Contracts:

    * **Never early.** :meth:`advance` returns a key only when its exact ``due_ms <= now_ms``;
      ticks are an internal bucketing granularity, not a rounding of due times.
    * **Deterministic order.** Fired keys come out sorted by ``(due_ms, insertion sequence)``;
      re-inserting a key gives it a fresh sequence number, as if cancelled and inserted anew.
    * **Monotonic time.** The wheel's time only moves forwards; an earlier ``now_ms`` is read as
      the current time.
    * **Not thread-safe.** The wheel is plain single-owner state; the leader's driver loop owns it.

    Complexity: :meth:`insert`, :meth:`cancel`, ``in``, :func:`len` and :meth:`due_of` are O(1)
    for keys within the wheel's span (O(levels) to pick the level), O(log n) for keys beyond it
    (overflow heap). :meth:`advance` costs O(levels + keys fired or cascaded + occupied slots
    visited), plus sorting what fires; it never iterates over elapsed ticks.
    """

    def __init__(self, tick_ms: int = 10, wheel_size: int = 256, levels: int = 5, start_ms: int = 0) -> None:
        """Create an empty wheel whose current time is ``start_ms``.

        Raises:
            ValueError: listing every invalid parameter at once. ``tick_ms`` and ``levels`` must
                be ints >= 1, ``wheel_size`` an int >= 2, ``start_ms`` an int (may be negative).
        """
        problems: list[str] = []
        for name, value, minimum in (
            ("tick_ms", tick_ms, 1),
            ("wheel_size", wheel_size, 2),
            ("levels", levels, 1),
        ):
            if not _is_int(value):
                problems.append(f"{name}: must be an int, got {value!r}")
            elif value < minimum:
                problems.append(f"{name}: must be >= {minimum}, got {value}")
        if not _is_int(start_ms):
            problems.append(f"start_ms: must be an int, got {start_ms!r}")
        if problems:
            raise ValueError("invalid TimingWheel parameters: " + "; ".join(problems))

        self._tick_ms = tick_ms
        self._size = wheel_size
        self._levels = levels
        # _pow[l] = W**l ticks per level-l slot; _pow[levels] is the span of the whole wheel.
        self._pow = [wheel_size**level for level in range(levels + 1)]
        self._now = start_ms
        self._tick = start_ms // tick_ms
        # _blocks[l] = current tick // W**l, cached because every placement compares against it.
        self._blocks = [self._tick // p for p in self._pow]

        # Each slot maps its keys to their packed (due, seq).
        self._slots: list[list[dict[K, int]]] = [[{} for _ in range(wheel_size)] for _ in range(levels)]
        # Earliest exact due per slot, or None when unknown (a cancel removed the earliest key) or
        # the slot is empty. Lets next_due_ms be exact without rescanning a busy slot every call.
        self._slot_min: list[list[int | None]] = [[None] * wheel_size for _ in range(levels)]
        # Bit i of _occupied[l] is set iff slot i of level l is non-empty: finding the next
        # occupied slot, or all occupied slots in a range, is then a few big-int operations.
        self._occupied: list[int] = [0] * levels

        # Keys that were already due when inserted (they fire on the next advance).
        self._ready: dict[K, int] = {}
        # Overflow heap of (packed, key). Cancel is lazy (O(1)): a heap item is live only while
        # the index still maps its key to the same packed value (its seq is unique).
        self._overflow: list[tuple[int, K]] = []
        self._overflow_live = 0

        self._index: dict[K, int] = {}
        self._seq = 0
        self._seq_limit = _SEQ_LIMIT
        # Cached answer of next_due_ms; kept exact through inserts, dropped by advance and by
        # cancelling the earliest key.
        self._next_valid = True
        self._next: int | None = None

    # ------------------------------------------------------------------ queries

    @property
    def now_ms(self) -> int:
        """The wheel's current time: ``start_ms`` or the latest ``now_ms`` given to :meth:`advance`."""
        return self._now

    def __len__(self) -> int:
        """Number of armed keys, including those already due but not yet returned by :meth:`advance`."""
        return len(self._index)

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is armed (inserted, not cancelled, not yet returned by :meth:`advance`)."""
        return key in self._index

    def armed(self) -> KeysView[K]:
        """A live, read-only view of the armed keys: ``key in view`` is ``key in wheel`` without
        a method call (the leader's driver asks once per fire)."""
        return self._index.keys()

    def due_of(self, key: K) -> int | None:
        """The exact due time of ``key`` in ms, or None if it is not armed."""
        packed = self._index.get(key)
        return None if packed is None else packed >> _SEQ_BITS

    def next_due_ms(self) -> int | None:
        """The earliest due time among armed keys, or None when the wheel is empty.

        Contract: the result is never later than the true earliest due time, so sleeping until it
        can never make a fire late. This implementation returns the exact earliest due time, so
        ``advance(next_due_ms())`` always fires at least one key; the result may be at or before
        :attr:`now_ms` when a key is already due (fire it with :meth:`advance` straight away).

        Cost: cached between mutations; otherwise O(levels) big-int operations to find the first
        occupied slot, plus one pass over that slot only if a cancel removed its earliest key.
        """
        if not self._next_valid:
            self._next = self._compute_next()
            self._next_valid = True
        return self._next

    # ---------------------------------------------------------------- mutations

    def insert(self, key: K, due_ms: int) -> None:
        """Arm ``key`` to fire at ``due_ms``, replacing any due time it already had.

        Replacing is exactly cancel + insert: the key takes a new insertion sequence, so among
        keys with the same due time it now fires last. A due time at or before :attr:`now_ms`
        fires on the next :meth:`advance`, whatever ``now_ms`` that call passes.
        O(1) within the wheel's span, O(log n) beyond it.
        """
        if key in self._index:
            self.cancel(key)
        if self._seq >= self._seq_limit:
            self._renumber()
        packed = due_ms << _SEQ_BITS | self._seq
        self._seq += 1
        self._index[key] = packed
        if due_ms <= self._now:
            self._ready[key] = packed
        else:
            self._place(key, packed, due_ms)
        # Adding a key can only lower the minimum, so an exact cached answer stays exact.
        if self._next_valid and (self._next is None or due_ms < self._next):
            self._next = due_ms

    def insert_many(self, items: list[tuple[K, int]]) -> None:
        """``insert(key, due_ms)`` for each pair, in order: the same wheel as those calls.

        The leader re-arms a committed batch's tasks (a thousand at a time) with this: one call,
        the wheel's fields read once, and the placement of a key due within the current level-1
        block (the next fire of an every-second task) done inline; a key due when the one before
        it was (every-second tasks share their next fire) goes where that one went.
        """
        if self._seq + len(items) >= self._seq_limit:
            for key, due_ms in items:  # a renumbering may come in the middle: one at a time
                self.insert(key, due_ms)
            return
        index, ready = self._index, self._ready  # cancel and _place never replace these
        tick_ms, now, size = self._tick_ms, self._now, self._size
        block1, pow1 = self._blocks[1], self._pow[1]
        slots0, mins0 = self._slots[0], self._slot_min[0]
        seq = self._seq
        shift = _SEQ_BITS
        # The due time of the previous key and the dict it went into (the ready set or a slot,
        # non-empty since), None after a cancel (which may empty a slot or drop the cached
        # earliest due) or a placement in the overflow heap. A key due at the same time goes
        # there too; the slot's earliest due and next_due_ms's cache already allow for it.
        last_due: int | None = None
        last: dict[K, int] = ready
        for key, due_ms in items:
            if key in index:
                self.cancel(key)
                last_due = None
            packed = due_ms << shift | seq
            seq += 1
            index[key] = packed
            if due_ms == last_due:
                last[key] = packed
                continue
            if due_ms <= now:
                ready[key] = packed
                last_due, last = due_ms, ready
            else:
                due_tick = due_ms // tick_ms
                if due_tick // pow1 == block1:  # level 0 (what _locate answers first)
                    slot = due_tick % size
                    bucket = slots0[slot]
                    if not bucket:
                        self._occupied[0] |= 1 << slot
                        mins0[slot] = due_ms
                    else:
                        current = mins0[slot]
                        if current is not None and due_ms < current:
                            mins0[slot] = due_ms
                    bucket[key] = packed
                    last_due, last = due_ms, bucket
                else:
                    placed = self._place(key, packed, due_ms)
                    if placed is None:  # the overflow heap
                        last_due = None
                    else:
                        last_due, last = due_ms, placed
            if self._next_valid and (self._next is None or due_ms < self._next):
                self._next = due_ms
        self._seq = seq

    def cancel(self, key: K) -> bool:
        """Disarm ``key``. Returns True if it was armed, False if unknown (already fired or cancelled).

        O(levels): the key's due time says which slot of each level may hold it; overflow keys
        are dropped from the heap lazily.
        """
        packed = self._index.pop(key, None)
        if packed is None:
            return False
        due = packed >> _SEQ_BITS
        if self._ready.pop(key, None) is None:
            due_tick = due // self._tick_ms
            pow_, size = self._pow, self._size
            for level in range(self._levels):
                slot = (due_tick // pow_[level]) % size
                bucket = self._slots[level][slot]
                if bucket.pop(key, None) is not None:
                    if not bucket:
                        self._occupied[level] &= ~(1 << slot)
                        self._slot_min[level][slot] = None
                    elif self._slot_min[level][slot] == due:
                        self._slot_min[level][slot] = None
                    break
            else:  # in the overflow heap
                self._overflow_live -= 1
                # Lazy deletion leaves dead heap items; rebuild once they outnumber the live ones
                # so memory stays proportional to the armed keys under insert/cancel churn.
                if len(self._overflow) > 2 * self._overflow_live + 64:
                    self._compact_overflow()
        if not self._index:
            self._next_valid, self._next = True, None
        elif self._next_valid and due == self._next:
            self._next_valid = False
        return True

    def advance(self, now_ms: int) -> list[tuple[K, int]]:
        """Move the wheel's time to ``now_ms`` and pop every key with ``due_ms <= now_ms``.

        Returns ``(key, due_ms)`` pairs sorted by ``(due_ms, insertion sequence)``; returned keys
        are no longer armed. Never returns a key whose due time is after ``now_ms`` (keys sharing
        the current tick but due later in it stay armed). A ``now_ms`` earlier than
        :attr:`now_ms` is treated as :attr:`now_ms`: time never goes backwards, and the call
        still returns keys inserted with a due time in the past.

        Cost: O(levels + keys fired or cascaded + occupied slots visited) plus sorting the result;
        independent of how many ticks elapsed.
        """
        return [(key, packed >> _SEQ_BITS) for packed, key in self._advance(now_ms)]

    def advance_keys(self, now_ms: int) -> list[K]:
        """:meth:`advance` without the due times: the same keys in the same order (the leader's
        driver, which reads each key's due time from its state, takes these)."""
        return list(map(_FIRED_KEY, self._advance(now_ms)))

    def _advance(self, now_ms: int) -> list[tuple[int, K]]:
        """:meth:`advance`'s work: the fired ``(packed, key)`` pairs, sorted."""
        if now_ms < self._now:
            now_ms = self._now
        fired: list[tuple[int, K]] = []
        index = self._index
        if self._ready:
            for key, packed in self._ready.items():
                fired.append((packed, key))
                del index[key]
            self._ready.clear()

        old_blocks = self._blocks
        new_tick = now_ms // self._tick_ms
        self._now = now_ms
        if new_tick == self._tick:
            self._drain_current_slot(fired)
        else:
            self._tick = new_tick
            new_blocks = [new_tick // p for p in self._pow]
            self._blocks = new_blocks
            # h = the highest level whose block changed (levels means: even the top block).
            # Level-0 blocks are ticks themselves, so this stops at 0 at the latest.
            h = self._levels
            while old_blocks[h] == new_blocks[h]:
                h -= 1
            for level in range(min(h, self._levels)):
                # Keys below level h share T's old level-h block, which now lies wholly in the past.
                self._fire_level(level, fired)
            if h == self._levels:
                self._drain_overflow(fired)
            else:
                size = self._size
                old_digit = old_blocks[h] % size
                new_digit = new_blocks[h] % size
                # Slots we jumped over are wholly in the past. (For h > 0 the old digit's slot
                # is empty by construction; for h == 0 it held keys due in the old tick.)
                self._fire_slots(h, old_digit, new_digit, fired)
                if h == 0:
                    self._drain_current_slot(fired)
                else:
                    self._cascade(h, new_digit, fired)
        self._next_valid = False
        fired.sort(key=_FIRE_ORDER)
        return fired

    # ---------------------------------------------------------------- internals

    def _renumber(self) -> None:
        """Give every armed key a new sequence from 0, in (due, seq) order: the fire order stays,
        and sequences fit their bits again (after 2**48 inserts)."""
        armed = sorted(self._index.items(), key=itemgetter(1))
        for level in range(self._levels):
            self._slots[level] = [{} for _ in range(self._size)]
            self._slot_min[level] = [None] * self._size
            self._occupied[level] = 0
        self._ready.clear()
        self._overflow = []
        self._overflow_live = 0
        self._index.clear()
        self._seq = 0
        for key, packed in armed:
            due = packed >> _SEQ_BITS
            new = due << _SEQ_BITS | self._seq
            self._seq += 1
            self._index[key] = new
            if due <= self._now:
                self._ready[key] = new
            else:
                self._place(key, new, due)

    def _locate(self, due_tick: int) -> int:
        """The level for a key due in ``due_tick`` (> current tick, or == with due > now);
        ``levels`` means overflow."""
        blocks = self._blocks
        pow_ = self._pow
        for level in range(self._levels):
            if due_tick // pow_[level + 1] == blocks[level + 1]:
                return level
        return self._levels

    def _place(self, key: K, packed: int, due: int) -> dict[K, int] | None:
        """Bucket a key that is not yet due (``due > now``) relative to the current tick; return
        its slot (None: the overflow heap)."""
        due_tick = due // self._tick_ms
        level = self._locate(due_tick)
        if level == self._levels:
            heapq.heappush(self._overflow, (packed, key))
            self._overflow_live += 1
            return None
        slot = (due_tick // self._pow[level]) % self._size
        bucket: dict[K, int] = self._slots[level][slot]
        mins = self._slot_min[level]
        if not bucket:
            self._occupied[level] |= 1 << slot
            mins[slot] = due
        else:
            current = mins[slot]
            if current is not None and due < current:
                mins[slot] = due
        bucket[key] = packed
        return bucket

    def _fire_or_place(self, key: K, packed: int, fired: list[tuple[int, K]]) -> None:
        due = packed >> _SEQ_BITS
        if due <= self._now:
            fired.append((packed, key))
            del self._index[key]
        else:
            self._place(key, packed, due)

    def _fire_bucket(self, bucket: dict[K, int], fired: list[tuple[int, K]]) -> None:
        # In C, not a Python loop per key: a slot of every-second tasks holds thousands.
        fired.extend(zip(bucket.values(), bucket, strict=True))
        _consume(map(self._index.__delitem__, bucket))
        bucket.clear()

    def _fire_level(self, level: int, fired: list[tuple[int, K]]) -> None:
        mask = self._occupied[level]
        slots = self._slots[level]
        mins = self._slot_min[level]
        while mask:
            low = mask & -mask
            mask ^= low
            slot = low.bit_length() - 1
            self._fire_bucket(slots[slot], fired)
            mins[slot] = None
        self._occupied[level] = 0

    def _fire_slots(self, level: int, start: int, stop: int, fired: list[tuple[int, K]]) -> None:
        """Fire every key in slots ``[start, stop)`` of ``level``."""
        bits = self._occupied[level] & ((1 << stop) - (1 << start))
        if not bits:
            return
        self._occupied[level] &= ~bits
        slots = self._slots[level]
        mins = self._slot_min[level]
        while bits:
            low = bits & -bits
            bits ^= low
            slot = low.bit_length() - 1
            self._fire_bucket(slots[slot], fired)
            mins[slot] = None

    def _drain_current_slot(self, fired: list[tuple[int, K]]) -> None:
        """Fire the keys of the current tick's level-0 slot whose exact due time has passed."""
        slot = self._tick % self._size
        bucket = self._slots[0][slot]
        if not bucket:
            return
        now = self._now
        mins = self._slot_min[0]
        known_min = mins[slot]
        if known_min is not None and known_min > now:
            return
        if max(bucket.values()) >> _SEQ_BITS <= now:  # the common case: the whole slot is due
            self._fire_bucket(bucket, fired)
            mins[slot] = None
            self._occupied[0] &= ~(1 << slot)
            return
        gone: list[K] = []
        remaining_min: int | None = None
        for key, packed in bucket.items():
            due = packed >> _SEQ_BITS
            if due <= now:
                fired.append((packed, key))
                gone.append(key)
            elif remaining_min is None or due < remaining_min:
                remaining_min = due
        index = self._index
        for key in gone:
            del bucket[key]
            del index[key]
        mins[slot] = remaining_min
        if not bucket:
            self._occupied[0] &= ~(1 << slot)

    def _cascade(self, level: int, slot: int, fired: list[tuple[int, K]]) -> None:
        """Re-bucket the slot of ``level`` that the current tick just entered.

        Its keys now share the current tick's level-``level`` block, so each either fires or
        lands on a strictly lower level (which the caller has already emptied).
        """
        bucket = self._slots[level][slot]
        if not bucket:
            return
        self._slots[level][slot] = {}
        self._slot_min[level][slot] = None
        self._occupied[level] &= ~(1 << slot)
        if max(bucket.values()) >> _SEQ_BITS <= self._now:  # every key fires (none is re-bucketed)
            self._fire_bucket(bucket, fired)
            return
        for key, packed in bucket.items():
            self._fire_or_place(key, packed, fired)

    def _drain_overflow(self, fired: list[tuple[int, K]]) -> None:
        """Pull every overflow key that falls in the current top-level block (or before it)."""
        heap = self._overflow
        index = self._index
        # Due times below this bound are in the current level-``levels`` block or earlier.
        bound = ((self._blocks[self._levels] + 1) * self._pow[self._levels] * self._tick_ms) << _SEQ_BITS
        while heap and heap[0][0] < bound:
            packed, key = heapq.heappop(heap)
            if index.get(key) != packed:
                continue  # cancelled or replaced since it was pushed
            self._overflow_live -= 1
            self._fire_or_place(key, packed, fired)

    def _compact_overflow(self) -> None:
        index = self._index
        live = [item for item in self._overflow if index.get(item[1]) == item[0]]
        heapq.heapify(live)
        self._overflow = live

    def _slot_earliest(self, level: int, slot: int) -> int:
        earliest = self._slot_min[level][slot]
        if earliest is None:
            earliest = min(self._slots[level][slot].values()) >> _SEQ_BITS
            self._slot_min[level][slot] = earliest
        return earliest

    def _compute_next(self) -> int | None:
        if self._ready:
            return min(self._ready.values()) >> _SEQ_BITS
        # Levels, and slots within a level, are ordered by time: every occupied slot of level l
        # is at or after the current digit, and all of level l precedes all of level l + 1.
        # So the lowest occupied slot of the lowest occupied level holds the earliest key.
        for level in range(self._levels):
            mask = self._occupied[level]
            if mask:
                return self._slot_earliest(level, (mask & -mask).bit_length() - 1)
        heap = self._overflow
        index = self._index
        while heap:
            packed, key = heap[0]
            if index.get(key) == packed:
                return packed >> _SEQ_BITS
            heapq.heappop(heap)  # dead item (cancelled or replaced); drop it now
        return None

    def _check_invariants(self) -> None:
        """Verify the internal layout against the placement rules (for tests; O(n + levels * W)).

        Raises AssertionError describing the first violation found.
        """

        def fail(message: str) -> None:
            raise AssertionError(message)

        seen = 0
        for key, packed in self._ready.items():
            seen += 1
            if self._index.get(key) != packed:
                fail(f"ready key {key!r} not indexed as ready")
            if any(key in bucket for slots in self._slots for bucket in slots):
                fail(f"ready key {key!r} also in a slot")
        for level in range(self._levels):
            mask = 0
            for slot, bucket in enumerate(self._slots[level]):
                if bucket:
                    mask |= 1 << slot
                    known = self._slot_min[level][slot]
                    true_min = min(bucket.values()) >> _SEQ_BITS
                    if known is not None and known != true_min:
                        fail(f"slot min of level {level} slot {slot} is {known}, true {true_min}")
                elif self._slot_min[level][slot] is not None:
                    fail(f"empty slot {level}/{slot} has a min")
                for key, packed in bucket.items():
                    seen += 1
                    due = packed >> _SEQ_BITS
                    if self._index.get(key) != packed:
                        fail(f"key {key!r} in level {level} slot {slot} but indexed elsewhere")
                    if due <= self._now:
                        fail(f"key {key!r} due {due} <= now {self._now} still in the wheel")
                    due_tick = due // self._tick_ms
                    if self._locate(due_tick) != level:
                        fail(f"key {key!r} due tick {due_tick} belongs to level {self._locate(due_tick)}")
                    if (due_tick // self._pow[level]) % self._size != slot:
                        fail(f"key {key!r} due tick {due_tick} in wrong slot {slot} of level {level}")
                    if (packed & _SEQ_MASK) >= self._seq:
                        fail(f"key {key!r} has a sequence not yet given out")
            if mask != self._occupied[level]:
                fail(f"occupied mask of level {level} is stale")
        live = 0
        for packed, key in self._overflow:
            if self._index.get(key) != packed:
                continue
            live += 1
            due = packed >> _SEQ_BITS
            if key in self._ready or any(key in bucket for slots in self._slots for bucket in slots):
                fail(f"overflow key {key!r} indexed elsewhere")
            if self._locate(due // self._tick_ms) != self._levels or due <= self._now:
                fail(f"overflow key {key!r} due {due} belongs in the wheel")
        if live != self._overflow_live:
            fail(f"overflow live count {self._overflow_live}, true {live}")
        if seen + live != len(self._index):
            fail(f"index holds {len(self._index)} keys, structures hold {seen + live}")
        if self._next_valid and self._next != self._compute_next():
            fail(f"cached next_due_ms {self._next} is stale")
