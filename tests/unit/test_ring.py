"""Unit tests for the shard ring and the pure assignment helpers: small, hand-checked cases."""

from __future__ import annotations

import ast
import itertools
import sys
from pathlib import Path

import pytest

from raftsched.sharding.assignment import ShardKey, assign, moved, place
from raftsched.sharding.ring import DEFAULT_VNODES, ShardRing, shard_key

FLEET = ("ex-a", "ex-b", "ex-c", "ex-d")
KEYS: list[ShardKey] = [(f"task-{t:03d}", s) for t in range(100) for s in range(5)]

# Computed once, in another process, with an independent md5 ring (points f"{name}-{i}" for
# i < 160; a task's walk = the distinct names met from the first point strictly after md5(task),
# wrapping; shard s's owner = walk[s % 4], its candidates the walk rotated to start there). Any
# change here means every node of a mixed-version cluster would disagree about who runs what:
# treat it as a breaking change.
EXPECTED_OWNERS = {
    ("backup", 0): "ex-d",
    ("backup", 1): "ex-a",
    ("backup", 2): "ex-c",
    ("report:daily", 0): "ex-c",
    ("etl.load", 7): "ex-d",
    ("t", 1023): "ex-c",
}
EXPECTED_CANDIDATES = {
    ("backup", 0): ["ex-d", "ex-a", "ex-c", "ex-b"],
    ("backup", 2): ["ex-c", "ex-b", "ex-d", "ex-a"],
    ("etl.load", 7): ["ex-d", "ex-c", "ex-b", "ex-a"],
}


def owners(ring: ShardRing, keys: list[ShardKey] = KEYS) -> list[str | None]:
    return [ring.owner(task, shard) for task, shard in keys]


# --------------------------------------------------------------------------- construction


def test_empty_ring_owns_nothing() -> None:
    ring = ShardRing([])
    assert len(ring) == 0
    assert ring.members == ()
    assert ring.owner("t", 0) is None
    assert ring.candidates("t", 0) == []
    assert assign(ring, KEYS) == {}


def test_single_executor_owns_every_shard() -> None:
    ring = ShardRing(["solo"])
    assert len(ring) == 1
    assert set(owners(ring)) == {"solo"}
    assert ring.candidates("t", 3) == ["solo"]


def test_members_are_sorted_and_deduplicated() -> None:
    ring = ShardRing(["ex-c", "ex-a", "ex-c", "ex-b"])
    assert ring.members == ("ex-a", "ex-b", "ex-c")
    assert len(ring) == 3
    assert "ex-a" in ring
    assert "ex-z" not in ring
    assert ring.vnodes == DEFAULT_VNODES == 160


@pytest.mark.parametrize("executors", ["ex-a", [1, 2], ["ex-a", None]])
def test_names_must_be_strings(executors: object) -> None:
    with pytest.raises(TypeError):
        ShardRing(executors)  # type: ignore[arg-type]


@pytest.mark.parametrize("vnodes", [0, -1, True, 1.5, "160"])
def test_vnodes_must_be_a_positive_int(vnodes: object) -> None:
    with pytest.raises(ValueError, match="vnodes"):
        ShardRing(FLEET, vnodes=vnodes)  # type: ignore[arg-type]


def test_ring_is_immutable() -> None:
    ring = ShardRing(FLEET)
    with pytest.raises(AttributeError):
        ring._members = ("ex-z",)
    with pytest.raises(AttributeError):
        del ring._ring
    with pytest.raises(AttributeError):
        ring.members = ()  # type: ignore[misc]
    # No mutators leak through from uhashring.
    for name in ("add_node", "remove_node", "regenerate", "__setitem__", "__delitem__"):
        assert not hasattr(ring, name), name
    assert ring.members == FLEET


def test_equality_and_hash_follow_members_and_vnodes() -> None:
    ring = ShardRing(FLEET)
    assert ring == ShardRing(reversed(FLEET))
    assert hash(ring) == hash(ShardRing([*FLEET, "ex-a"]))
    assert ring != ShardRing(FLEET, vnodes=40)
    assert ring != ShardRing(FLEET[:3])
    assert ring != FLEET
    assert len({ring, ShardRing(sorted(FLEET, reverse=True))}) == 1
    assert repr(ring) == "ShardRing(members=('ex-a', 'ex-b', 'ex-c', 'ex-d'), vnodes=160)"


# --------------------------------------------------------------------------- determinism


def test_same_answers_whatever_the_input_order() -> None:
    reference = owners(ShardRing(FLEET))
    for order in itertools.permutations(FLEET):
        assert owners(ShardRing(order)) == reference
    assert owners(ShardRing(name for name in FLEET * 3)) == reference
    assert owners(ShardRing(set(FLEET))) == reference


def test_owners_match_values_computed_in_another_process() -> None:
    # PYTHONHASHSEED differs between processes; md5 and the sorted build make the ring immune.
    ring = ShardRing(reversed(FLEET))
    assert {key: ring.owner(*key) for key in EXPECTED_OWNERS} == EXPECTED_OWNERS
    assert {key: ring.candidates(*key) for key in EXPECTED_CANDIDATES} == EXPECTED_CANDIDATES


def test_vnodes_is_part_of_the_ring() -> None:
    assert owners(ShardRing(FLEET, vnodes=1)) != owners(ShardRing(FLEET))


def test_every_executor_gets_a_fair_share() -> None:
    counts = {name: 0 for name in FLEET}
    for owner in owners(ShardRing(FLEET)):
        assert owner is not None
        counts[owner] += 1
    for name, count in counts.items():
        assert len(KEYS) / 8 < count < len(KEYS) / 2, (name, counts)


# --------------------------------------------------------------------------- keys


def test_shard_key_format() -> None:
    assert shard_key("backup", 3) == "backup:3"
    # Task names may hold ':'; the int shard after the last ':' keeps keys distinct.
    assert shard_key("a:1", 2) != shard_key("a", 12)


@pytest.mark.parametrize("shard", [-1, True, 1.0, "0"])
def test_invalid_shards_are_refused(shard: object) -> None:
    ring = ShardRing(FLEET)
    with pytest.raises(ValueError, match="shard"):
        ring.owner("t", shard)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shard"):
        ring.candidates("t", shard)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shard"):
        ShardRing([]).owner("t", shard)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- candidates


def test_candidates_start_with_the_owner_and_list_each_member_once() -> None:
    ring = ShardRing(FLEET)
    for task, shard in KEYS:
        walk = ring.candidates(task, shard)
        assert walk[0] == ring.owner(task, shard)
        assert sorted(walk) == list(FLEET)


def test_candidates_limit_is_a_prefix() -> None:
    ring = ShardRing(FLEET)
    for task, shard in KEYS[:50]:
        walk = ring.candidates(task, shard)
        for limit in range(len(FLEET) + 3):
            assert ring.candidates(task, shard, limit=limit) == walk[:limit]
    with pytest.raises(ValueError, match="limit"):
        ring.candidates("t", 0, limit=-1)


def test_candidates_are_not_always_in_member_order() -> None:
    # The fallback order must come from the ring, or every full owner would spill onto ex-a.
    ring = ShardRing(FLEET)
    assert len({tuple(ring.candidates(*key)) for key in KEYS}) > 4


# --------------------------------------------------------------------------- assign / moved


def test_assign_keeps_input_order() -> None:
    ring = ShardRing(FLEET)
    keys = [*reversed(KEYS[:20]), KEYS[3]]
    result = assign(ring, keys)
    assert list(result) == list(reversed(KEYS[:20]))
    assert all(result[key] == ring.owner(*key) for key in result)


def test_moved_between_identical_rings_is_empty() -> None:
    assert moved(ShardRing(FLEET), ShardRing(reversed(FLEET)), KEYS) == set()


def test_moved_to_or_from_an_empty_ring_is_everything() -> None:
    assert moved(ShardRing([]), ShardRing(FLEET), KEYS) == set(KEYS)
    assert moved(ShardRing(FLEET), ShardRing([]), KEYS) == set(KEYS)


def test_removing_an_executor_takes_it_out_of_every_walk_and_nothing_else() -> None:
    old, new = ShardRing(FLEET), ShardRing(FLEET[1:])
    for task in {task for task, _ in KEYS}:
        assert new.walk(task) == tuple(e for e in old.walk(task) if e != "ex-a")
    # A task whose first two walk places do not hold ex-a keeps both shards of a 2-shard run.
    two = [(task, s) for task in sorted({t for t, _ in KEYS}) for s in range(2)]
    kept = {t for t, _ in two if "ex-a" not in old.walk(t, limit=2)}
    assert kept and {t for t, _ in moved(old, new, two)} == {t for t, _ in two} - kept


def test_adding_an_executor_puts_it_into_every_walk_and_nothing_else() -> None:
    old, new = ShardRing(FLEET), ShardRing([*FLEET, "ex-e"])
    for task in {task for task, _ in KEYS}:
        assert old.walk(task) == tuple(e for e in new.walk(task) if e != "ex-e")


def test_a_run_spreads_over_distinct_executors() -> None:
    ring = ShardRing(FLEET)
    for task in {task for task, _ in KEYS}:
        for k in range(1, len(FLEET) + 1):
            assert len({ring.owner(task, s) for s in range(k)}) == k
        # More shards than executors: round the walk again.
        assert [ring.owner(task, s) for s in range(6)] == [*ring.walk(task), *ring.walk(task)[:2]]


def test_the_demo_sharded_task_uses_both_demo_executors() -> None:
    # raftsched demo: a 3-shard task on two executors (every shard landed on demo-ex2 before).
    from raftsched.testing.demo import EXECUTORS, SAMPLES

    ring = ShardRing(EXECUTORS)
    (sharded,) = [spec for spec in SAMPLES if spec.shards > 1]
    assert {ring.owner(sharded.name, s) for s in range(sharded.shards)} == set(EXECUTORS)


# --------------------------------------------------------------------------- place


def owned_by(ring: ShardRing, executor: str, count: int, skip: int = 0) -> list[ShardKey]:
    keys = [key for key in KEYS if ring.owner(*key) == executor]
    return keys[skip : skip + count]


def test_place_gives_each_shard_to_its_owner_when_slots_allow() -> None:
    ring = ShardRing(FLEET)
    pending = KEYS[:12]
    placed, waiting = place(ring, pending, dict.fromkeys(FLEET, 100))
    assert placed == assign(ring, pending)
    assert list(placed) == pending
    assert waiting == []


def test_place_never_overcommits_and_the_earliest_shard_wins() -> None:
    ring = ShardRing(FLEET)
    mine = owned_by(ring, "ex-b", 5)
    others = owned_by(ring, "ex-c", 2)
    pending = [mine[0], others[0], *mine[1:], others[1]]
    placed, waiting = place(ring, pending, {"ex-b": 2, "ex-c": 1})
    assert placed == {mine[0]: "ex-b", others[0]: "ex-c", mine[1]: "ex-b"}
    assert waiting == [*mine[2:], others[1]]


def test_place_strict_by_default_a_full_owner_makes_its_shards_wait() -> None:
    ring = ShardRing(FLEET)
    pending = owned_by(ring, "ex-a", 3)
    free = {"ex-a": 0, "ex-b": 10, "ex-c": 10, "ex-d": 10}
    assert place(ring, pending, free) == ({}, pending)


def test_place_missing_negative_and_foreign_slot_counts() -> None:
    ring = ShardRing(FLEET)
    pending = owned_by(ring, "ex-a", 2) + owned_by(ring, "ex-b", 2)
    # ex-a is missing (no free slot), ex-b is over-committed already, ex-z is not on the ring.
    free = {"ex-b": -3, "ex-z": 50}
    assert place(ring, pending, free, max_fallbacks=3) == ({}, pending)


def test_place_does_not_modify_free_slots() -> None:
    ring = ShardRing(FLEET)
    free = dict.fromkeys(FLEET, 1)
    place(ring, KEYS[:10], free, max_fallbacks=2)
    assert free == dict.fromkeys(FLEET, 1)


def test_place_on_an_empty_ring_leaves_everything_waiting() -> None:
    assert place(ShardRing([]), KEYS[:5], {"ex-a": 5}, max_fallbacks=2) == ({}, KEYS[:5])


def test_place_falls_back_along_the_ring() -> None:
    ring = ShardRing(FLEET)
    key = ("backup", 0)  # candidates: ex-d, ex-a, ex-c, ex-b
    assert ring.candidates(*key) == ["ex-d", "ex-a", "ex-c", "ex-b"]
    free = {"ex-d": 0, "ex-a": 0, "ex-c": 1, "ex-b": 1}
    assert place(ring, [key], free) == ({}, [key])
    assert place(ring, [key], free, max_fallbacks=1) == ({}, [key])  # ex-a only: full
    assert place(ring, [key], free, max_fallbacks=2) == ({key: "ex-c"}, [])
    assert place(ring, [key], {**free, "ex-a": 1}, max_fallbacks=2) == ({key: "ex-a"}, [])
    assert place(ring, [key], {**free, "ex-d": 1}, max_fallbacks=2) == ({key: "ex-d"}, [])
    assert place(ring, [key], {"ex-b": 1}, max_fallbacks=99) == ({key: "ex-b"}, [])


def test_place_fallbacks_still_never_overcommit() -> None:
    ring = ShardRing(FLEET)
    free = {"ex-a": 1, "ex-b": 2, "ex-c": 0, "ex-d": 1}
    placed, waiting = place(ring, KEYS, free, max_fallbacks=3)
    assert len(placed) == 4
    assert waiting == [key for key in KEYS if key not in placed]
    for name in FLEET:
        assert sum(1 for owner in placed.values() if owner == name) == free[name]


def test_place_duplicate_keys_are_placed_once_per_call() -> None:
    ring = ShardRing(FLEET)
    key = owned_by(ring, "ex-a", 1)[0]
    placed, waiting = place(ring, [key, key], {"ex-a": 5})
    assert placed == {key: "ex-a"}
    assert waiting == [key]


@pytest.mark.parametrize("max_fallbacks", [-1, True, 1.5])
def test_place_rejects_bad_max_fallbacks(max_fallbacks: object) -> None:
    with pytest.raises(ValueError, match="max_fallbacks"):
        place(ShardRing(FLEET), KEYS[:1], {}, max_fallbacks=max_fallbacks)  # type: ignore[arg-type]


def test_place_validates_keys_even_when_the_fleet_is_full() -> None:
    with pytest.raises(ValueError, match="shard"):
        place(ShardRing(FLEET), [("t", -1)], {})


# --------------------------------------------------------------------------- purity

SHARDING = Path(__file__).resolve().parents[2] / "raftsched" / "sharding"


@pytest.mark.parametrize("module", ["ring.py", "assignment.py"])
def test_sharding_imports_only_the_standard_library_uhashring_and_itself(module: str) -> None:
    tree = ast.parse((SHARDING / module).read_text())
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    allowed = {"__future__", "collections", "typing", "raftsched"}
    if module == "ring.py":
        allowed.add("uhashring")
    assert roots <= allowed, sorted(roots - allowed)
    impure = {"time", "random", "uuid", "secrets", "os", "socket", "threading", "asyncio"}
    assert not roots & impure
    assert roots - {"raftsched", "uhashring"} <= set(sys.stdlib_module_names)
