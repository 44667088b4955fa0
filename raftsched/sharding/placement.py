"""Resource-aware placement: what an attempt needs, what an executor has, and whether it fits.

Pure (no clock, no IO, no randomness). Both the state machine (which refuses an assignment that
would over-commit an executor, so the replicated state never does) and the leader's dispatcher
(which picks the executor) use these functions, so they agree on every decision.

Rules:

* A need is ``(cpu, memory_mb, selector)``; ``cpu == 0`` / ``memory_mb == 0`` mean "not declared"
  and consume nothing. A selector is a set of labels the executor must carry with equal values.
* An executor's capacity ``cpu == 0`` / ``memory_mb == 0`` means "not declared": unlimited for
  that resource (executors registered before capacities existed keep taking any task).
* An attempt fits an executor *now* when the executor has a free slot, the selector matches, and
  its declared cpu and memory less what its running attempts hold cover the need. It could
  *ever* fit when the selector matches and the capacity (not the free part) covers the need.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from raftsched.errors import InvalidSpec
from raftsched.model import validate_selector

__all__ = [
    "MAX_EXECUTOR_CPU",
    "MAX_EXECUTOR_MEMORY_MB",
    "NO_NEED",
    "ExecutorUsage",
    "Need",
    "could_ever_fit",
    "fits_now",
    "need_of",
    "parse_memory_mb",
    "validate_capacity",
    "validate_selector",
]

MAX_EXECUTOR_CPU = 4096.0
MAX_EXECUTOR_MEMORY_MB = 1 << 30  # 1 PiB in MiB
_EPS = 1e-9  # cpu sums are floats: 0.1 + 0.2 must still fit into 0.3

_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|[KMGT]|B)?\s*$", re.IGNORECASE)
_UNIT_MB = {"": 1.0, "B": 1 / (1 << 20), "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 * 1024}


@dataclass(frozen=True, slots=True)
class Need:
    """What one attempt of a task holds while it runs, besides its slot."""

    cpu: float = 0.0
    memory_mb: int = 0
    selector: tuple[tuple[str, str], ...] = ()

    @property
    def declared(self) -> bool:
        """Whether placement has to look at more than slots for it."""
        return bool(self.cpu or self.memory_mb or self.selector)

    def text(self) -> str:
        parts = []
        if self.cpu:
            parts.append(f"cpu {self.cpu:g}")
        if self.memory_mb:
            parts.append(f"memory {self.memory_mb} MiB")
        if self.selector:
            parts.append("labels " + ",".join(f"{k}={v}" for k, v in self.selector))
        return ", ".join(parts) or "nothing"


NO_NEED = Need()


def need_of(cpu: float, memory_mb: int, selector: Mapping[str, str]) -> Need:
    """The :class:`Need` of a spec's fields (the selector sorted: equal needs compare equal)."""
    if not cpu and not memory_mb and not selector:
        return NO_NEED
    return Need(float(cpu), int(memory_mb), tuple(sorted(selector.items())))


def validate_capacity(cpu: object, memory_mb: object, field_name: str = "executor") -> None:
    """Refuse an executor capacity that is negative, not finite or absurd (0 = not declared)."""
    if isinstance(cpu, bool) or not isinstance(cpu, int | float) or not math.isfinite(cpu):
        raise InvalidSpec(f"{field_name}.cpu", f"must be a finite number, got {cpu!r}")
    if not 0 <= cpu <= MAX_EXECUTOR_CPU:
        raise InvalidSpec(f"{field_name}.cpu", f"{cpu:g} out of range (0-{MAX_EXECUTOR_CPU:g})")
    if isinstance(memory_mb, bool) or not isinstance(memory_mb, int):
        raise InvalidSpec(f"{field_name}.memory", f"must be a whole number of MiB, got {memory_mb!r}")
    if not 0 <= memory_mb <= MAX_EXECUTOR_MEMORY_MB:
        raise InvalidSpec(
            f"{field_name}.memory", f"{memory_mb} MiB out of range (0-{MAX_EXECUTOR_MEMORY_MB})"
        )


def parse_memory_mb(text: str | int, field_name: str = "memory") -> int:
    """``"8GiB"``, ``"512M"``, ``"1.5G"``, ``"2048"`` (MiB) or an int (MiB) → whole MiB.

    Raises:
        InvalidSpec: not a size, or not a whole number of MiB.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value = float(text)
    else:
        m = _MEMORY.match(str(text))
        if m is None:
            raise InvalidSpec(field_name, f"{text!r} is not a size (examples: 8GiB, 512MiB, 2048)")
        unit = (m.group(2) or "").upper()[:1]
        value = float(m.group(1)) * _UNIT_MB[unit]
    if value != int(value):
        raise InvalidSpec(field_name, f"{text!r} is not a whole number of MiB")
    return int(value)


def could_ever_fit(need: Need, cpu: float, memory_mb: int, labels: Mapping[str, str]) -> bool:
    """Whether an executor with this capacity and these labels could run the attempt when idle."""
    if need.cpu and cpu and need.cpu > cpu + _EPS:
        return False
    if need.memory_mb and memory_mb and need.memory_mb > memory_mb:
        return False
    return all(labels.get(k) == v for k, v in need.selector)


@dataclass(slots=True)
class _Held:
    slots: int = 0
    cpu: float = 0.0
    memory_mb: int = 0


@dataclass(slots=True)
class ExecutorUsage:
    """Slots, cpu and memory held per executor by the attempts running on it.

    Keyed by attempt (``(run id, shard)``), so releasing an attempt gives back exactly what it
    took even if its task changed meanwhile, and releasing twice is harmless.
    """

    held: dict[str, _Held] = field(default_factory=dict)
    running: dict[tuple[str, int], tuple[str, Need]] = field(default_factory=dict)
    # Attempts of the columnar hot path running per executor (raftsched.fsm.hot): one slot each
    # and nothing else (a hot task declares no cpu, memory or selector); not in `running`.
    hot: dict[str, int] = field(default_factory=dict)

    def clear(self) -> None:
        self.held.clear()
        self.running.clear()
        self.hot.clear()

    def take(self, key: tuple[str, int], executor: str, need: Need) -> None:
        self.release(key)
        self.running[key] = (executor, need)
        h = self.held.get(executor)
        if h is None:
            h = self.held[executor] = _Held()
        h.slots += 1
        h.cpu += need.cpu
        h.memory_mb += need.memory_mb

    def release(self, key: tuple[str, int]) -> None:
        entry = self.running.pop(key, None)
        if entry is None:
            return
        executor, need = entry
        h = self.held[executor]
        h.slots -= 1
        h.cpu = max(0.0, h.cpu - need.cpu) if h.slots else 0.0
        h.memory_mb -= need.memory_mb
        if not h.slots:
            del self.held[executor]

    def used(self, executor: str) -> tuple[int, float, int]:
        """``(slots, cpu, memory_mb)`` held on ``executor``."""
        h = self.held.get(executor)
        hot = self.hot.get(executor, 0)
        return (h.slots + hot, h.cpu, h.memory_mb) if h is not None else (hot, 0.0, 0)


def fits_now(
    need: Need,
    slots: int,
    cpu: float,
    memory_mb: int,
    labels: Mapping[str, str],
    used: tuple[int, float, int],
) -> bool:
    """Whether the attempt fits an executor of this capacity holding ``used`` right now."""
    used_slots, used_cpu, used_mem = used
    if used_slots >= slots:
        return False
    if need is NO_NEED:
        return True
    if need.cpu and cpu and used_cpu + need.cpu > cpu + _EPS:
        return False
    if need.memory_mb and memory_mb and used_mem + need.memory_mb > memory_mb:
        return False
    return all(labels.get(k) == v for k, v in need.selector)
