"""A linearizability checker for a versioned register (Wing & Gong's search, with Lowe's memo).

The register holds ``(version, value)``. Clients read it and write it conditionally: a CAS names
the version it expects and the value it writes, and, applied, makes the version one higher. A
history is linearizable if every operation can be given one instant between its call and its
return such that, in the order of those instants, each operation's outcome is what the register
would have answered:

* a read returns the register as it is;
* a CAS that succeeded found its expected version (and wrote ``expected + 1``, its value);
* a CAS refused as a conflict found another version (and changed nothing);
* an operation whose outcome is unknown (a timeout, "unavailable": it may have been applied)
  either took effect at some instant after its call, as a successful CAS would, or never did.
  An unknown read constrains nothing and is dropped.

The search (Wing & Gong 1993, with the memo of Lowe 2017 as in Knossos and Porcupine) tries, at
each step, every pending operation called before the earliest return among the operations not
yet placed, and remembers every ``(placed set, register)`` it has explored, so permutations of
concurrent reads that leave the register alike are explored once. It is exponential in the worst
case and fast on histories of a few clients and a few thousand operations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

READ = "read"
CAS = "cas"

State = tuple[int, str]


@dataclass(frozen=True, slots=True)
class Op:
    """One client operation. ``call``/``ret`` are instants on one clock (``ret`` None: the outcome
    is unknown). A read has ``version``/``value`` as read. A CAS has ``expected``/``value`` as asked
    and ``ok``: True applied, False refused as a conflict (ignored when the outcome is unknown)."""

    process: str
    kind: str
    call: float
    ret: float | None
    version: int = 0
    value: str = ""
    expected: int = 0
    ok: bool = True

    def __post_init__(self) -> None:
        if self.kind not in (READ, CAS):
            raise ValueError(f"op kind {self.kind!r} is not read or cas")
        if self.ret is not None and self.ret < self.call:
            raise ValueError(f"op returns ({self.ret}) before it is called ({self.call})")

    def describe(self) -> str:
        span = f"[{self.call:.3f}, {'?' if self.ret is None else f'{self.ret:.3f}'}]"
        if self.kind == READ:
            return f"{self.process} read v{self.version}={self.value!r} {span}"
        outcome = "unknown" if self.ret is None else "ok" if self.ok else "conflict"
        return f"{self.process} cas v{self.expected}->{self.value!r} {outcome} {span}"


@dataclass(frozen=True, slots=True)
class Verdict:
    linearizable: bool
    ops: int  # operations checked (unknown reads dropped)
    problem: str = ""  # not linearizable: the operation no order could place, and around it

    def __bool__(self) -> bool:
        return self.linearizable


def _step(state: State, op: Op) -> State | None:
    """The register after ``op`` at ``state``; None if ``op``'s outcome is impossible there."""
    version, value = state
    if op.kind == READ:
        return state if (op.version, op.value) == (version, value) else None
    if op.ret is None or op.ok:
        return (version + 1, op.value) if version == op.expected else None
    return state if version != op.expected else None


def check(history: Sequence[Op], initial: State = (1, ""), max_explored: int = 5_000_000) -> Verdict:
    """Whether ``history`` is linearizable for a register starting at ``initial``.

    Raises :class:`RuntimeError` if the search visits more than ``max_explored`` configurations
    (the history is too concurrent to decide in reasonable time)."""
    ops = sorted((op for op in history if not (op.kind == READ and op.ret is None)), key=lambda o: o.call)
    n = len(ops)
    inf = float("inf")
    rets = [op.ret if op.ret is not None else inf for op in ops]
    definite = 0
    for i, op in enumerate(ops):
        if op.ret is not None:
            definite |= 1 << i
    seen: set[tuple[int, State]] = set()
    stack: list[tuple[int, State]] = [(0, initial)]
    deepest = (0, 0, initial)  # (definite ops placed, placed set, register)
    while stack:
        placed, state = stack.pop()
        if placed & definite == definite:
            return Verdict(True, n)
        key = (placed, state)
        if key in seen:
            continue
        seen.add(key)
        if len(seen) > max_explored:
            raise RuntimeError(f"gave up after {max_explored} configurations ({n} operations)")
        done = (placed & definite).bit_count()
        if done > deepest[0]:
            deepest = (done, placed, state)
        # The window: ops not placed yet and called before the earliest return among them (an op
        # called later must follow that one). Sorted by call, so the scan stops at the horizon.
        lo = (~placed & (placed + 1)).bit_length() - 1
        horizon = inf
        window = []
        j = lo
        while j < n and ops[j].call <= horizon:
            if not placed >> j & 1:
                horizon = min(horizon, rets[j])
                window.append(j)
            j += 1
        for i in window:
            op = ops[i]
            if op.call > horizon:
                continue
            after = _step(state, op)
            if after is not None:
                stack.append((placed | 1 << i, after))
    _, placed, state = deepest
    pending = [ops[i] for i in range(n) if not placed >> i & 1 and ops[i].ret is not None]
    first = min(pending, key=lambda o: o.ret or inf)
    return Verdict(
        False,
        n,
        f"with the register at v{state[0]}={state[1]!r} after {deepest[0]} operations in order, no "
        f"order places {first.describe()} (nor any other operation pending then)",
    )
