"""The firing window: when the leader's firing path is busy, so that other work on the node can
give way to it (the HTTP/JSON API holds new calls, :mod:`raftsched.rpc.http_api`).

A node is one process: the leader driver's thread, pysyncobj's tick thread and the event loop
that answers API calls share one interpreter lock and, on a small machine, the same cores. Under
many API clients the loop runs back to back, and a fire batch's way to commit (the driver wakes
at the due time, builds the batch, proposes; the tick thread sends it, reads the followers'
acknowledgements, commits) waits behind it at each step. The window is the span in which that
matters: from :attr:`FiringWindow.lead_ms` before the next batch is due until nothing the driver
proposed is still waiting for its commit. Work that can wait for it, waits in it, so the firing
path runs on an idle node.

Threading: :meth:`FiringWindow.publish` is called by the driver's thread only; :meth:`busy` from
any thread (it reads two attributes, each written whole under the interpreter lock: a reader sees
the old or the new value, and both are safe, since a waiter never waits longer than its own
bound). Listeners (:meth:`on_open`) run on the driver's thread and must only hand off (for an
event loop: ``loop.call_soon_threadsafe``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

__all__ = ["DEFAULT_LEAD_MS", "FiringWindow"]

DEFAULT_LEAD_MS: Final = 20
"""How long before a batch is due the window opens: long enough for API calls already running
to finish (tens of them at well under a millisecond of the interpreter each)."""


class FiringWindow:
    """Whether the leader's firing path is busy now (see the module docstring).

    ``next_due_ms``: when the driver next has work (a fire batch, a wait's deadline), None while
    this node does not lead (or is paused); ``in_flight``: proposals the driver sent whose commit
    it has not seen yet. A follower's window is never busy.
    """

    def __init__(self, lead_ms: int = DEFAULT_LEAD_MS) -> None:
        if lead_ms < 0:
            raise ValueError(f"lead_ms must be >= 0, got {lead_ms}")
        self.lead_ms = lead_ms
        self.next_due_ms: int | None = None
        self.in_flight = 0
        self._listeners: list[Callable[[], None]] = []

    def busy(self, now_ms: int) -> bool:
        """True while a proposal waits for its commit, or the next batch is due within
        :attr:`lead_ms` (or overdue: the driver has not proposed it yet)."""
        if self.in_flight > 0:
            return True
        due = self.next_due_ms
        return due is not None and due - now_ms <= self.lead_ms

    def on_open(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (on the driver's thread) each time the window may have closed:
        the last proposal in flight committed, or the next due time moved later."""
        self._listeners.append(listener)

    def publish(self, next_due_ms: int | None, in_flight: int) -> None:
        """The driver's state after a step (the driver's thread only)."""
        was_due, was_in_flight = self.next_due_ms, self.in_flight
        self.next_due_ms = next_due_ms
        self.in_flight = in_flight
        moved_later = was_due is not None and (next_due_ms is None or next_due_ms > was_due)
        if (was_in_flight > 0 and in_flight == 0) or (in_flight == 0 and moved_later):
            for listener in self._listeners:
                listener()
