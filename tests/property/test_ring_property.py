"""The shard ring against a dumb oracle, and the property that makes it a consistent-hash ring.

The oracle is a sorted list of ``(md5(f"{executor}-{i}") as int, executor)`` points, ``i <
vnodes``; a task's walk is the distinct executors met from the first point strictly after
``md5(task)``, wrapping around, and shard ``s`` goes to ``walk[s % n]``. That is how uhashring's
default ring names and places its points (``ring_meta.MetaRing._create_ring``) and looks keys up
(``HashRing._get_pos`` uses ``bisect_right``). Strictly-after and at-or-after differ only when a
task's md5 equals a point's, which takes a task named like a point (``<executor>-<digits>``):
the oracle and the ring then still agree, both use ``bisect_right``.

"Moves only what it gains or loses", for the walk (see :mod:`raftsched.sharding.ring`): a join
or leave of ``X`` inserts or deletes ``X`` in every walk and changes nothing else, so a run of
``k`` shards moves only if ``X`` is among the first ``k`` of its walk, and then only by the
one-step shift after ``X``'s place. The tests below check exactly that, shard by shard.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from hashlib import md5

from hypothesis import given, settings
from hypothesis import strategies as st

from raftsched.sharding.assignment import ShardKey, place
from raftsched.sharding.ring import ShardRing, shard_key

# Names from a tiny alphabet collide in interesting ways ("a-1" vs "a" + "-1"...), plus any text.
NAMES = st.one_of(
    st.text(alphabet="ab-:1", min_size=1, max_size=5),
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=0, max_size=12),
)
MEMBERS = st.sets(NAMES, min_size=0, max_size=8)
VNODES = st.sampled_from([1, 2, 3, 7, 40, 160])
TASKS = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=20)
SHARD_KEYS = st.tuples(TASKS, st.integers(min_value=0, max_value=1023))
KEY_LISTS = st.lists(SHARD_KEYS, min_size=1, max_size=40)

# A fixed, larger key set for the movement properties, where a few keys prove little.
MANY_KEYS: list[ShardKey] = [(f"task-{t:04d}", s) for t in range(400) for s in range(5)]


def md5_int(text: str) -> int:
    return int(md5(text.encode("utf-8")).hexdigest(), 16)


class NaiveRing:
    def __init__(self, members: set[str], vnodes: int) -> None:
        self.points = sorted((md5_int(f"{name}-{i}"), name) for name in members for i in range(vnodes))
        self.hashes = [point for point, _ in self.points]

    def walk(self, task: str) -> list[str]:
        if not self.points:
            return []
        first = bisect_right(self.hashes, md5_int(task)) % len(self.points)
        walk: list[str] = []
        for _, name in self.points[first:] + self.points[:first]:
            if name not in walk:
                walk.append(name)
        return walk

    def owner(self, task: str, shard: int) -> str | None:
        walk = self.walk(task)
        return walk[shard % len(walk)] if walk else None

    def candidates(self, task: str, shard: int) -> list[str]:
        walk = self.walk(task)
        if not walk:
            return []
        i = shard % len(walk)
        return walk[i:] + walk[:i]


@settings(max_examples=200, deadline=None)
@given(members=MEMBERS, vnodes=VNODES, keys=KEY_LISTS)
def test_ring_agrees_with_the_naive_ring(members: set[str], vnodes: int, keys: list[ShardKey]) -> None:
    ring = ShardRing(members, vnodes=vnodes)
    naive = NaiveRing(members, vnodes)
    assert ring.members == tuple(sorted(members))
    for task, shard in keys:
        assert shard_key(task, shard) == f"{task}:{shard}"
        assert list(ring.walk(task)) == naive.walk(task)
        assert ring.owner(task, shard) == naive.owner(task, shard)
        assert ring.candidates(task, shard) == naive.candidates(task, shard)


@settings(max_examples=100, deadline=None)
@given(members=st.lists(NAMES, max_size=8), vnodes=VNODES, keys=KEY_LISTS, data=st.data())
def test_input_order_never_matters(
    members: list[str], vnodes: int, keys: list[ShardKey], data: st.DataObject
) -> None:
    shuffled = data.draw(st.permutations(members + members[:2]))
    one, other = ShardRing(members, vnodes=vnodes), ShardRing(shuffled, vnodes=vnodes)
    assert one == other
    assert [one.candidates(*key) for key in keys] == [other.candidates(*key) for key in keys]


TASK_NAMES = sorted({task for task, _ in MANY_KEYS})


def run_owners(ring: ShardRing, task: str, k: int) -> list[str | None]:
    return [ring.owner(task, shard) for shard in range(k)]


@settings(max_examples=100, deadline=None)
@given(members=st.sets(NAMES, min_size=1, max_size=8), vnodes=VNODES, tasks=st.lists(TASKS, max_size=10))
def test_a_run_of_k_shards_uses_k_distinct_executors(
    members: set[str], vnodes: int, tasks: list[str]
) -> None:
    ring = ShardRing(members, vnodes=vnodes)
    n = len(members)
    for task in [*tasks, *TASK_NAMES[:20]]:
        for k in range(1, n + 1):
            assert len(set(run_owners(ring, task, k))) == k  # n >= k: all distinct
        # More shards than executors: every executor is used, none more than once above another.
        counts = Counter(run_owners(ring, task, 2 * n + 1))
        assert set(counts) == members
        assert max(counts.values()) - min(counts.values()) <= 1


def shift_on_leave(old_walk: tuple[str, ...], leaver: str, k: int) -> list[str]:
    """The new owners of shards 0..k-1 by the statement: the walk with the leaver deleted."""
    return [e for e in old_walk if e != leaver][:k]


@settings(max_examples=60, deadline=None)
@given(members=st.sets(NAMES, min_size=2, max_size=8), vnodes=VNODES, data=st.data())
def test_a_leave_moves_only_runs_that_held_the_leaver_and_only_by_one_step(
    members: set[str], vnodes: int, data: st.DataObject
) -> None:
    leaver = data.draw(st.sampled_from(sorted(members)))
    k = data.draw(st.integers(min_value=1, max_value=len(members) - 1))  # n >= k before and after
    old = ShardRing(members, vnodes=vnodes)
    new = ShardRing(members - {leaver}, vnodes=vnodes)
    for task in TASK_NAMES:
        old_walk = old.walk(task)
        assert new.walk(task) == tuple(e for e in old_walk if e != leaver)  # survivors keep order
        before, after = run_owners(old, task, k), run_owners(new, task, k)
        if leaver not in before:
            assert after == before  # the run did not hold the leaver: nothing moves
            continue
        p = before.index(leaver)
        assert after[:p] == before[:p]  # shards before the leaver's place stay
        assert after[p : k - 1] == before[p + 1 : k]  # the rest move one step along the walk
        assert after[k - 1] == old_walk[k]  # the last onto the next executor of the walk
        assert set(after) - set(before) == {old_walk[k]}
        assert after == shift_on_leave(old_walk, leaver, k)


@settings(max_examples=60, deadline=None)
@given(members=st.sets(NAMES, min_size=1, max_size=8), joiner=NAMES, vnodes=VNODES, data=st.data())
def test_a_join_moves_only_runs_that_now_hold_the_joiner_and_only_by_one_step(
    members: set[str], joiner: str, vnodes: int, data: st.DataObject
) -> None:
    members = members - {joiner}
    if not members:
        return
    k = data.draw(st.integers(min_value=1, max_value=len(members)))  # n >= k before and after
    old = ShardRing(members, vnodes=vnodes)
    new = ShardRing(members | {joiner}, vnodes=vnodes)
    for task in TASK_NAMES:
        new_walk = new.walk(task)
        assert old.walk(task) == tuple(e for e in new_walk if e != joiner)  # survivors keep order
        before, after = run_owners(old, task, k), run_owners(new, task, k)
        if joiner not in after:
            assert after == before
            continue
        p = after.index(joiner)
        assert after[:p] == before[:p]
        assert after[p + 1 :] == before[p : k - 1]  # one step along the walk
        assert set(before) - set(after) <= {before[-1]}  # at most the last falls off the run


@settings(max_examples=25, deadline=None)
@given(members=st.sets(NAMES, min_size=3, max_size=10))
def test_a_leave_moves_about_k_over_n_of_the_runs(members: set[str]) -> None:
    # A run of k shards moves iff the leaver is among the first k of its walk: about k/n of the
    # runs. With 160 points each an executor's share of first places is within ~25 % of 1/n, and
    # 400 tasks add sampling noise: 0.4x..1.75x is well outside both.
    n, k = len(members), 2
    old = ShardRing(members)
    for leaver in sorted(members)[:3]:
        new = ShardRing(members - {leaver})
        runs = [t for t in TASK_NAMES if run_owners(old, t, k) != run_owners(new, t, k)]
        fraction = len(runs) / len(TASK_NAMES)
        assert 0.4 * k / n < fraction < 1.75 * k / n, (leaver, n, fraction)
        assert runs == [t for t in TASK_NAMES if leaver in old.walk(t, limit=k)]


@settings(max_examples=200, deadline=None)
@given(
    members=st.sets(st.sampled_from(["ex-a", "ex-b", "ex-c", "ex-d", "ex-e"]), max_size=5),
    pending=st.lists(
        st.tuples(st.sampled_from(["t0", "t1", "t2:x"]), st.integers(min_value=0, max_value=15)),
        max_size=60,
    ),
    free_slots=st.dictionaries(
        st.sampled_from(["ex-a", "ex-b", "ex-c", "ex-d", "ex-e", "ex-z"]),
        st.integers(min_value=-2, max_value=6),
    ),
    max_fallbacks=st.integers(min_value=0, max_value=6),
)
def test_place_never_overcommits_and_leaves_nothing_placeable_waiting(
    members: set[str],
    pending: list[ShardKey],
    free_slots: dict[str, int],
    max_fallbacks: int,
) -> None:
    ring = ShardRing(members)
    snapshot = dict(free_slots)
    placed, waiting = place(ring, pending, free_slots, max_fallbacks=max_fallbacks)
    assert free_slots == snapshot

    # Every pending entry comes back exactly once, each list in input order.
    assert list(placed) == list(dict.fromkeys(key for key in pending if key in placed))
    assert len(placed) + len(waiting) == len(pending)
    rest = list(pending)
    for key in placed:
        rest.remove(key)
    assert waiting == rest

    # Slots are never overcommitted; placements stay within the owner's fallback window.
    remaining = {name: max(0, free_slots.get(name, 0)) for name in ring.members}
    for (task, shard), executor in placed.items():
        assert executor in ring.candidates(task, shard, limit=1 + max_fallbacks)
        remaining[executor] -= 1
    assert all(count >= 0 for count in remaining.values())

    # Slots only go down, so a shard that waits (other than a repeat of a placed key) found every
    # executor in its window full, and they are still full at the end.
    for task, shard in waiting:
        if (task, shard) not in placed:
            window = ring.candidates(task, shard, limit=1 + max_fallbacks)
            assert all(remaining[name] == 0 for name in window)
