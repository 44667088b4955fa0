"""The shard ring: which executor owns shard ``s`` of task ``t``. The only uhashring import.

Every scheduler node derives the same :class:`ShardRing` from the replicated list of live
executors, so the leader and the followers agree on the shard -> executor map without
replicating the map itself. It is pure: no clock, no IO, no randomness, and its
answers do not depend on the order in which members are given or on ``PYTHONHASHSEED``.

Why uhashring's default md5 ring and nothing else: every executor gets ``vnodes`` points named
``f"{executor}-{i}"`` at ``int(md5(name).hexdigest(), 16)``, and a key is owned by the first point
strictly after ``md5(key)`` (wrapping around). A point's position depends only on its own name,
so adding or removing one executor adds or removes only its own points: every other point stays
where it was. Weighted and ketama rings recompute every node's point count when membership
changes and do move keys between survivors (uhashring's behaviour, measured), so neither is
exposed here.

Placement is a *walk*: a task's walk is the list of distinct executors met going round the ring
from the task's own point (``md5(task)``), each once. Shard ``i`` of a run is placed on the
``i``-th executor of its task's walk, wrapping when shards outnumber executors
(``walk[i % n]``), and falls back along the walk from there (:meth:`ShardRing.candidates`). So a
run of ``k`` shards on ``n >= k`` executors uses ``k`` distinct executors; keying each shard on
its own point (``task:shard``, before) spread a run only by chance (the demo's three shards all
landed on one of its two executors).

What "minimal movement" means for the walk. Adding or removing one executor ``X`` changes every
task's walk only by inserting or deleting ``X``: the others keep their relative order (a point's
position depends only on its own name). Hence, for a run of ``k`` shards on ``n`` executors
(``k <= n`` before and after):

* a task whose first ``k`` walk positions do not hold ``X`` (after a join: in the new walk; after
  a leave: in the old one) keeps every shard where it was - with ``n`` much larger than ``k``,
  all but about ``k/n`` of the tasks;
* otherwise, with ``X`` at walk position ``p < k``: shards before ``p`` keep their executor; on a
  join shard ``p`` moves to ``X`` and each later shard moves one step along the walk (onto the
  executor its predecessor held), on a leave shard ``p`` and each later shard moves one step the
  other way, the last onto the executor at old position ``k``. So the run's set of executors
  changes by ``X`` plus at most one survivor (the one that falls off, or comes into, its first
  ``k``), and no shard moves to an executor outside that old set plus those two.

Within a moved run the shards after ``X`` shift one place along the walk, so about
``(k+1)/(2n)`` of all shards move on a leave, where keying each shard on its own point moved
``1/n`` (``bench/shard_spread.py``: 26 % against 11 % for 4 shards on 10 executors). That is
the price of guaranteeing the spread; placement only chooses where *new* attempts go (running
attempts never migrate).

Keys: a task's point is ``md5(task)``; :func:`shard_key` (``f"{task}:{shard}"``) still names a
shard in messages and validates the shard number. The last ``:`` separates the shard, since the
shard is a non-negative int.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from uhashring import HashRing

__all__ = ["DEFAULT_VNODES", "ShardRing", "shard_key", "shard_order"]

#: uhashring's default for its md5 ring: with 160 points per executor each one's share stays
#: within a few percent of 1/N (measured: 1918-2065 of 10,000 keys over 5 executors).
DEFAULT_VNODES = 160


def shard_key(task: str, shard: int) -> str:
    """The ring key of one shard of a task: ``f"{task}:{shard}"``.

    Raises:
        ValueError: ``shard`` is not a non-negative int. The FSM only creates shards
            ``0..shards-1``, so this is an invariant violation, not a user error.
    """
    if isinstance(shard, bool) or not isinstance(shard, int) or shard < 0:
        raise ValueError(f"shard must be a non-negative int, got {shard!r}")
    return f"{task}:{shard}"


def shard_order(walk: Sequence[str], shard: int) -> tuple[str, ...]:
    """Where shard ``shard`` goes, best first, given its task's ``walk``: the walk rotated to start
    at ``walk[shard % len(walk)]`` (its own executor), then the rest in walk order. Empty for an
    empty walk. The dispatcher uses it on a walk it has filtered (e.g. executors barred from the
    task's namespace left out), so the spread holds among the executors that may take the task.

    Raises:
        ValueError: ``shard`` is not a non-negative int.
    """
    if isinstance(shard, bool) or not isinstance(shard, int) or shard < 0:
        raise ValueError(f"shard must be a non-negative int, got {shard!r}")
    if not walk:
        return ()
    i = shard % len(walk)
    return (*walk[i:], *walk[:i])


class ShardRing:
    """An immutable consistent-hash ring over executor names.

    Contracts:

    * **Deterministic.** Two rings with the same set of members and ``vnodes`` give the same
      answers on every node and in every process, whatever the order (or repetition) of the names
      passed in. Members are deduplicated and the ring is built in sorted order, so even an md5
      collision between two points (last writer wins in uhashring) resolves the same way everywhere.
    * **Minimal movement.** A ring with one executor more or fewer than another assigns every key
      to the same owner as the other, except the keys the added executor now owns or the removed
      one owned.
    * **Immutable, so safe to share between threads.** uhashring's ring is not thread-safe to
      mutate; this class never mutates it after construction and offers no way to. When
      membership changes, build a new ring and swap the reference.

    Equal rings (same members and ``vnodes``) compare and hash equal.
    """

    __slots__ = ("_members", "_ring", "_vnodes")

    _members: tuple[str, ...]
    _vnodes: int
    _ring: HashRing

    def __init__(self, executors: Iterable[str], vnodes: int = DEFAULT_VNODES) -> None:
        """Build the ring over ``executors`` (duplicates ignored) with ``vnodes`` points each.

        Cost: O(N * vnodes) md5 hashes and a sort; about 17 ms for 100 executors x 160 points.

        Raises:
            TypeError: ``executors`` is a single ``str`` (which would be read as its characters)
                or holds a non-``str`` (uhashring ``str()``s names, so ``1`` and ``"1"`` would
                silently be one executor).
            ValueError: ``vnodes`` is not an int >= 1.
        """
        if isinstance(executors, str):
            raise TypeError(f"executors must be an iterable of names, not one str: {executors!r}")
        names: set[str] = set()
        for name in executors:
            if not isinstance(name, str):
                raise TypeError(f"executor names must be str, got {name!r}")
            names.add(name)
        if isinstance(vnodes, bool) or not isinstance(vnodes, int) or vnodes < 1:
            raise ValueError(f"vnodes must be an int >= 1, got {vnodes!r}")
        members = tuple(sorted(names))
        # The default hash_fn is uhashring's md5 MetaRing; an explicit vnodes keeps the point
        # count independent of uhashring's default should it ever change.
        ring = HashRing(nodes=list(members), vnodes=vnodes)
        object.__setattr__(self, "_members", members)
        object.__setattr__(self, "_vnodes", vnodes)
        object.__setattr__(self, "_ring", ring)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ShardRing is immutable; build a new ring instead of setting {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ShardRing is immutable; cannot delete {name!r}")

    @property
    def members(self) -> tuple[str, ...]:
        """The executor names on the ring, sorted."""
        return self._members

    @property
    def vnodes(self) -> int:
        """Points per executor."""
        return self._vnodes

    def __len__(self) -> int:
        """The number of executors on the ring."""
        return len(self._members)

    def __contains__(self, executor: object) -> bool:
        return executor in self._members

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ShardRing):
            return NotImplemented
        return self._members == other._members and self._vnodes == other._vnodes

    def __hash__(self) -> int:
        return hash((self._members, self._vnodes))

    def __repr__(self) -> str:
        return f"ShardRing(members={self._members!r}, vnodes={self._vnodes})"

    def walk(self, task: str, limit: int | None = None) -> tuple[str, ...]:
        """The distinct executors met going round the ring from ``task``'s point, each once, in
        that order (the first ``limit`` of them, or all). Empty on an empty ring.

        Raises:
            ValueError: ``limit`` is negative.
        """
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"limit must be None or an int >= 0, got {limit!r}")
        if not self._members or limit == 0:
            return ()
        # uhashring's range() reads size=None (or 0) as "all members".
        return tuple(conf["nodename"] for conf in self._ring.range(task, size=limit, unique=True))

    def owner(self, task: str, shard: int) -> str | None:
        """The executor of ``shard`` of ``task``: ``walk(task)[shard % n]``; None on an empty ring.

        Raises:
            ValueError: ``shard`` is not a non-negative int (see :func:`shard_key`).
        """
        shard_key(task, shard)
        if not self._members:
            return None
        return self.walk(task, limit=shard % len(self._members) + 1)[-1]

    def candidates(self, task: str, shard: int, limit: int | None = None) -> list[str]:
        """Executors for ``shard`` of ``task``, best first: its owner, then the rest of the task's
        walk in order, wrapping (:func:`shard_order`).

        These are the fallbacks when the owner cannot take the shard. The list holds every member
        once (or the first ``limit`` of them), is empty on an empty ring, and its first element is
        always :meth:`owner`.

        Raises:
            ValueError: ``shard`` is not a non-negative int, or ``limit`` is negative.
        """
        shard_key(task, shard)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"limit must be None or an int >= 0, got {limit!r}")
        order = shard_order(self.walk(task), shard)
        return list(order if limit is None else order[:limit])
