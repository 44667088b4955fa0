"""An executor's observability: its metric set and HTTP listener, wired together.

The agent creates one :class:`ExecutorObservability` when it is given ``http``; it binds the
port before it connects anywhere, serves while it runs, and calls the ``on_*`` methods from the
attempt path with values it already has. Connection state, slots and running attempts are read
at scrape time from the sample function the agent provides.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from raftsched.executor.runners import AttemptResult
from raftsched.observability.executor_metrics import ExecutorMetrics, ExecutorSample
from raftsched.observability.listener import HttpListener, Probe

__all__ = ["ExecutorObservability"]

_CANCELLED_PREFIX: Final = "cancelled"


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

    def on_refused_stale(self) -> None:
        self.metrics.attempts.inc("refused_stale")

    def on_duplicate(self) -> None:
        self.metrics.attempts.inc("duplicate")

    def on_finished(self, result: AttemptResult) -> None:
        if result.success:
            outcome = "succeeded"
        elif result.timed_out:
            outcome = "timeout"
        elif result.error.startswith(_CANCELLED_PREFIX):
            outcome = "cancelled"
        else:
            outcome = "failed"
        self.metrics.attempts.inc(outcome)
        self.metrics.duration.observe(result.duration_ms / 1000.0)

    def on_log_write(self, op: str, records: int) -> None:
        """One execution-log transaction (``begin``, ``finish``, ``acknowledge``)."""
        self.metrics.log_write(op, records)
