"""The versioned-register linearizability checker, on histories whose verdict is known."""

from __future__ import annotations

import random

import pytest

from raftsched.testing.chaos.linearizability import CAS, READ, Op, check


def read(p: str, call: float, ret: float | None, version: int, value: str = "") -> Op:
    return Op(p, READ, call, ret, version=version, value=value)


def cas(p: str, call: float, ret: float | None, expected: int, value: str, ok: bool = True) -> Op:
    return Op(p, CAS, call, ret, expected=expected, value=value, ok=ok)


def test_a_sequential_history_is_linearizable() -> None:
    h = [
        read("a", 0, 1, 1),
        cas("a", 2, 3, 1, "x"),
        read("b", 4, 5, 2, "x"),
        cas("b", 6, 7, 1, "y", ok=False),  # conflict: the version had moved on
        read("a", 8, 9, 2, "x"),
    ]
    assert check(h)


def test_a_read_concurrent_with_a_write_may_see_either_value() -> None:
    for seen in ((1, ""), (2, "x")):
        h = [cas("a", 0, 10, 1, "x"), read("b", 1, 2, *seen), read("c", 11, 12, 2, "x")]
        assert check(h), seen


def test_a_stale_read_after_an_acknowledged_write_is_not_linearizable() -> None:
    # Issue 33: the write returned at 3; a read called at 4 returned the older version.
    h = [read("a", 0, 1, 1), cas("a", 2, 3, 1, "x"), read("b", 4, 5, 1)]
    verdict = check(h)
    assert not verdict
    assert "b read v1" in verdict.problem


def test_two_successful_cas_from_one_version_are_not_linearizable() -> None:
    h = [cas("a", 0, 5, 1, "x"), cas("b", 1, 6, 1, "y")]
    assert not check(h)


def test_reads_that_go_back_in_time_are_not_linearizable() -> None:
    h = [
        cas("w", 0, 10, 1, "x"),
        read("a", 1, 2, 2, "x"),  # saw the write while it was in flight
        read("b", 3, 4, 1),  # then a later read did not: no order places both
    ]
    assert not check(h)


def test_an_unknown_write_may_or_may_not_have_applied() -> None:
    applied = [cas("a", 0, None, 1, "x"), read("b", 5, 6, 2, "x")]
    never = [cas("a", 0, None, 1, "x"), read("b", 5, 6, 1), read("b", 7, 8, 1)]
    late = [cas("a", 0, None, 1, "x"), read("b", 5, 6, 1), read("b", 7, 8, 2, "x")]
    assert check(applied) and check(never) and check(late)
    # but not applied and then undone
    flip = [cas("a", 0, None, 1, "x"), read("b", 5, 6, 2, "x"), read("b", 7, 8, 1)]
    assert not check(flip)


def test_a_conflict_is_a_definite_observation() -> None:
    # A conflict at [2, 3] says the version was not 1 then; nothing wrote before it.
    assert not check([cas("a", 2, 3, 1, "x", ok=False)])
    assert check([cas("w", 0, 1, 1, "x"), cas("a", 2, 3, 1, "y", ok=False)])


def test_bad_ops_are_refused() -> None:
    with pytest.raises(ValueError, match="before it is called"):
        read("a", 5, 4, 1)
    with pytest.raises(ValueError, match="kind"):
        Op("a", "write", 0, 1)


def _simulated(seed: int, clients: int = 5, ops: int = 400) -> list[Op]:
    """A history of a real register: each op takes effect at a random instant inside its span
    (one at a time, in that order); about one CAS in three names a version already gone."""
    rng = random.Random(seed)
    spans = []
    t = 0.0
    for k in range(ops):
        t += rng.random()
        apply_at = t + rng.random() * 3
        spans.append((apply_at, k, f"c{rng.randrange(clients)}", t, apply_at + rng.random() * 3))
    version, value = 1, ""
    out: list[Op] = []
    for _apply_at, k, process, call, ret in sorted(spans):
        if rng.random() < 0.6:
            out.append(Op(process, READ, call, ret, version=version, value=value))
            continue
        expected = version if rng.random() < 0.67 else version - 1
        ok = expected == version
        if ok:
            version, value = version + 1, f"{process}-{k}"
        out.append(Op(process, CAS, call, ret, expected=expected, value=f"{process}-{k}", ok=ok))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_histories_of_a_real_register_are_linearizable(seed: int) -> None:
    verdict = check(_simulated(seed))
    assert verdict, verdict.problem
    assert verdict.ops == 400


def test_one_stale_read_at_the_end_of_a_long_concurrent_history_is_found() -> None:
    history = _simulated(7)
    end = max(op.ret or 0 for op in history)
    writes = [op for op in history if op.kind == CAS and op.ok]
    last, before = writes[-1], writes[-2]
    fresh = read("z", end + 1, end + 2, last.expected + 1, last.value)
    stale = read("z", end + 1, end + 2, before.expected + 1, before.value)
    assert check([*history, fresh])
    verdict = check([*history, stale])
    assert not verdict
    assert "z read" in verdict.problem
