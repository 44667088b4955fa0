"""The shard ring against a dumb oracle, and the property that makes it a consistent-hash ring.

The oracle is a sorted list of ``(md5(f"{executor}-{i}") as int, executor)`` points, ``i <
vnodes``; a key is owned by the first point strictly after ``md5(key)``, wrapping around. That is
how uhashring's default ring names and places its points (``ring_meta.MetaRing._create_ring``)
and looks keys up (``HashRing._get_pos`` uses ``bisect_right``). Strictly-after and at-or-after
differ only when a key's md5 equals a point's, and a key (``...:<digits>``) never spells a point
name (``...-<digits>``), so that would take an md5 collision.
"""

from __future__ import annotations

from bisect import bisect_right
from hashlib import md5

from hypothesis import given, settings
from hypothesis import strategies as st

from raftsched.sharding.assignment import ShardKey, assign, moved, place
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

    def start(self, task: str, shard: int) -> int:
        return bisect_right(self.hashes, md5_int(f"{task}:{shard}")) % len(self.points)

    def owner(self, task: str, shard: int) -> str | None:
        if not self.points:
            return None
        return self.points[self.start(task, shard)][1]

    def candidates(self, task: str, shard: int) -> list[str]:
        if not self.points:
            return []
        first = self.start(task, shard)
        walk: list[str] = []
        for _, name in self.points[first:] + self.points[:first]:
            if name not in walk:
                walk.append(name)
        return walk


@settings(max_examples=200, deadline=None)
@given(members=MEMBERS, vnodes=VNODES, keys=KEY_LISTS)
def test_ring_agrees_with_the_naive_ring(members: set[str], vnodes: int, keys: list[ShardKey]) -> None:
    ring = ShardRing(members, vnodes=vnodes)
    naive = NaiveRing(members, vnodes)
    assert ring.members == tuple(sorted(members))
    for task, shard in keys:
        assert shard_key(task, shard) == f"{task}:{shard}"
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


@settings(max_examples=60, deadline=None)
@given(members=st.sets(NAMES, min_size=1, max_size=8), vnodes=VNODES, data=st.data())
def test_a_leave_moves_only_the_leavers_shards(members: set[str], vnodes: int, data: st.DataObject) -> None:
    leaver = data.draw(st.sampled_from(sorted(members)))
    old = ShardRing(members, vnodes=vnodes)
    new = ShardRing(members - {leaver}, vnodes=vnodes)
    before, after = assign(old, MANY_KEYS), assign(new, MANY_KEYS)
    assert moved(old, new, MANY_KEYS) == {key for key, owner in before.items() if owner == leaver}
    for key, owner in before.items():
        if owner != leaver:
            assert after[key] == owner  # no shard moves between survivors


@settings(max_examples=60, deadline=None)
@given(members=st.sets(NAMES, max_size=8), joiner=NAMES, vnodes=VNODES)
def test_a_join_moves_only_shards_to_the_joiner(members: set[str], joiner: str, vnodes: int) -> None:
    members = members - {joiner}
    old = ShardRing(members, vnodes=vnodes)
    new = ShardRing(members | {joiner}, vnodes=vnodes)
    before, after = assign(old, MANY_KEYS), assign(new, MANY_KEYS)
    assert moved(old, new, MANY_KEYS) == {
        key for key, owner in after.items() if owner == joiner or key not in before
    }
    for key, owner in after.items():
        if owner != joiner:
            assert before[key] == owner


@settings(max_examples=25, deadline=None)
@given(members=st.sets(NAMES, min_size=2, max_size=10))
def test_a_leave_moves_about_one_nth(members: set[str]) -> None:
    # With 160 points each, one executor's share is within ~25% of 1/N (about 8% standard
    # deviation), and 2,000 keys add a few percent of sampling noise: 0.4x..1.75x is over 5 sigma.
    n = len(members)
    old = ShardRing(members)
    for leaver in sorted(members)[:3]:
        fraction = len(moved(old, ShardRing(members - {leaver}), MANY_KEYS)) / len(MANY_KEYS)
        assert 0.4 / n < fraction < 1.75 / n, (leaver, n, fraction)


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
