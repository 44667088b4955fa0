"""An executor's observability: its metric set and HTTP listener, wired together.

The agent creates one :class:`ExecutorObservability` when it is given ``http``; it binds the
port before it connects anywhere, serves while it runs, and calls the ``on_*`` methods from the
attempt path with values it already has, a loop pass's batch at a time where it can.
Connection state, slots and running attempts are read at scrape time from the sample function
the agent provides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from raftsched.executor.runners import AttemptResult
from raftsched.observability.executor_metrics import ExecutorMetrics, ExecutorSample
from raftsched.observability.listener import HttpListener, Probe

__all__ = ["ExecutorObservability"]

_CANCELLED_PREFIX: Final = "cancelled"
_SUCCEEDED: Final = ("succeeded",)
_TIMEOUT: Final = ("timeout",)
_CANCELLED: Final = ("cancelled",)
_FAILED: Final = ("failed",)


class ExecutorObservability:
    """Metrics and the HTTP listener of executor ``name`` on ``address``.

    ``sample`` is called once per scrape, and every ``on_*`` method, on the agent's event loop.
    """

    def __init__(self, name: str, address: str, sample: Callable[[], ExecutorSample]) -> None:
        self._sample = sample
        self.metrics = ExecutorMetrics(name, sample)
        # Scraped on the agent's loop: an executor's few series render in well under a
        # millisecond, and the sample then reads the agent's state on the thread that owns it.
        self.listener = HttpListener(
            address,
            metrics=self.metrics.exposition,
            readyz=self._readyz,
            name=f"executor {name}",
            metrics_in_thread=False,
        )

    def bind(self) -> None:
        """Take the port now (raises :class:`raftsched.observability.listener.ListenError`)."""
        self.listener.bind()

    async def start(self) -> None:
        await self.listener.start()

    async def stop(self) -> None:
        await self.listener.stop()

    def _readyz(self) -> Probe:
        s = self._sample()
        if not s.registered:
            return Probe(False, "not registered with a leader")
        if not s.connected:
            return Probe(False, "no dispatch stream to the leader")
        return Probe(True, f"{s.running} of {s.slots} slots busy")

    # -- the attempt path --------------------------------------------------------------------------

    def on_refused_stale(self, n: int = 1) -> None:
        """``n`` attempts refused: they came from an epoch older than the newest seen."""
        self.metrics.attempts.inc("refused_stale", amount=n)

    def on_duplicate(self) -> None:
        self.metrics.attempts.inc("duplicate")

    def on_finished(self, results: Sequence[AttemptResult]) -> None:
        """A batch of finished attempts (one pass of the loop): counted and timed at once."""
        counts: dict[tuple[str, ...], float] = {}
        for result in results:
            if result.success:
                key = _SUCCEEDED
            elif result.timed_out:
                key = _TIMEOUT
            elif result.error.startswith(_CANCELLED_PREFIX):
                key = _CANCELLED
            else:
                key = _FAILED
            counts[key] = counts.get(key, 0.0) + 1
        self.metrics.attempts.add(counts)
        self.metrics.duration.observe_many(r.duration_ms / 1000.0 for r in results)

    def on_log_write(self, op: str, records: int) -> None:
        """One execution-log transaction (``begin``, ``finish``, ``acknowledge``, ``prune``)."""
        self.metrics.log_write(op, records)
