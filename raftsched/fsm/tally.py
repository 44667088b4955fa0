"""Counts of what the state machine applied on this node: pure, node-local, never replicated.

The state machine calls :class:`ApplyTally` as it applies fires, finishes runs and records attempt
results; the node's metrics read the counts at scrape time. Because every replica applies the
same log, every node's counts move the same way (each restarts from zero with its process), so
dashboards aggregate them with ``max``, not ``sum``.

Label cardinality is bounded by design: series are keyed by ``(owner, namespace)`` and the
outcome, never by task, unless ``per_task`` is set (an opt-in for small installations: with a
million tasks it means a million series per counter).

Cost: one dict update per call, on the applying thread. Not thread-safe for writers (the applier
is the only one); readers take :meth:`snapshot`, which copies under the GIL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from raftsched.model import TaskSpec

__all__ = ["ATTEMPT_RESULTS", "FIRE_OUTCOMES", "RUN_STATES", "ApplyTally", "TallySnapshot"]

FIRE_OUTCOMES: Final = (
    "fired",
    "coalesced",
    "skipped_overlap",
    "skipped_misfire",
    "skipped_disabled",
    "skipped_calendar",
)
RUN_STATES: Final = ("succeeded", "failed", "cancelled")
ATTEMPT_RESULTS: Final = ("succeeded", "failed", "timeout", "lost", "retried")

Key = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TallySnapshot:
    """The counts at one instant: ``{(outcome, owner, namespace[, task]): count}`` per kind."""

    fires: Mapping[Key, int]
    runs_finished: Mapping[Key, int]
    attempts: Mapping[Key, int]
    per_task: bool


class ApplyTally:
    """Node-local counters the applier updates (see the module docstring)."""

    __slots__ = ("attempts", "fires", "per_task", "runs_finished")

    def __init__(self, per_task: bool = False) -> None:
        self.per_task = per_task
        self.fires: dict[Key, int] = {}
        self.runs_finished: dict[Key, int] = {}
        self.attempts: dict[Key, int] = {}

    def _key(self, what: str, owner: str, namespace: str, task: str) -> Key:
        return (what, owner, namespace, task) if self.per_task else (what, owner, namespace)

    def fire(self, outcome: str, owner: str, namespace: str, task: str, count: int = 1) -> None:
        """``count`` fires of ``task`` were accounted with ``outcome`` (one of FIRE_OUTCOMES)."""
        key = self._key(outcome, owner, namespace, task)
        self.fires[key] = self.fires.get(key, 0) + count

    def run_finished(self, state: str, owner: str, namespace: str, task: str) -> None:
        """A run of ``task`` reached ``state`` (one of RUN_STATES)."""
        key = self._key(state, owner, namespace, task)
        self.runs_finished[key] = self.runs_finished.get(key, 0) + 1

    def attempt(self, result: str, owner: str, namespace: str, task: str) -> None:
        """An attempt of ``task`` ended with ``result`` (one of ATTEMPT_RESULTS)."""
        key = self._key(result, owner, namespace, task)
        self.attempts[key] = self.attempts.get(key, 0) + 1

    def _counts(self, what: str, specs: Iterable[TaskSpec]) -> Counter[Key]:
        if self.per_task:
            return Counter((what, s.owner, s.namespace, s.name) for s in specs)
        return Counter((what, s.owner, s.namespace) for s in specs)

    def hot_fired(self, specs: Iterable[TaskSpec]) -> None:
        """One fire "fired" per spec in ``specs`` (a hot fire entry's rows, repeats counted):
        what :meth:`fire` per row counts, with one dict update per key instead of per row."""
        fires = self.fires
        for key, count in self._counts("fired", specs).items():
            fires[key] = fires.get(key, 0) + count

    def hot_succeeded(self, specs: Iterable[TaskSpec]) -> None:
        """One attempt "succeeded" and one run "succeeded" per spec in ``specs`` (a hot results
        entry's rows, repeats counted): what :meth:`attempt` and :meth:`run_finished` per row
        count, with one dict update per key instead of per row."""
        attempts, runs = self.attempts, self.runs_finished
        for key, count in self._counts("succeeded", specs).items():
            attempts[key] = attempts.get(key, 0) + count
            runs[key] = runs.get(key, 0) + count

    def snapshot(self) -> TallySnapshot:
        # dict() of a dict copies in one C call, atomic under the GIL against the applier.
        return TallySnapshot(dict(self.fires), dict(self.runs_finished), dict(self.attempts), self.per_task)
