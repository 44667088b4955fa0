"""A node's observability: its metric set, gRPC interceptor and HTTP listener, wired together.

The node creates one :class:`NodeObservability` when its config entry has ``http`` (with the web
console, :mod:`raftsched.web`, on the same listener), and calls it
at four points of its life: :meth:`~NodeObservability.bind` before it joins the cluster (a port
in use fails the start with one line), :meth:`~NodeObservability.start` and
:meth:`~NodeObservability.stop` around serving, and the ``observe_*`` methods from the paths
that already compute the values. Everything else is read from the node at scrape time, through
the public attributes :class:`ObservedNode` names.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import ssl
from collections.abc import Iterable, Sequence
from typing import Final, Protocol

from raftsched.abc import Clock, ConsensusNode
from raftsched.clockwatch import ClockWatch
from raftsched.fsm import alerts as outbox
from raftsched.fsm.state import SchedulerState
from raftsched.fsm.tally import ApplyTally
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.observability.grpc_metrics import MetricsInterceptor
from raftsched.observability.listener import Handler, HttpListener, Probe
from raftsched.observability.node_metrics import NodeMetrics, NodeSample
from raftsched.rpc.http_api import HttpApi
from raftsched.v1 import raftsched_pb2 as pb

__all__ = ["DEFAULT_ZOMBIE_AFTER_MS", "NodeObservability", "ObservedNode", "dispatch_sample"]

log = logging.getLogger(__name__)

DEFAULT_ZOMBIE_AFTER_MS: Final = 3_600_000
"""An attempt assigned longer ago than this (1 h) counts as a zombie."""

_HUB_SAMPLE_TIMEOUT_S: Final = 2.0
_WORKFLOW_STATES: Final = {
    pb.WORKFLOW_RUNNING: "running",
    pb.WORKFLOW_SUCCESS: "success",
    pb.WORKFLOW_FAILED: "failed",
    pb.WORKFLOW_KILLED: "killed",
}


class _Hub(Protocol):
    """The part of :class:`raftsched.leader.dispatch.hub.ExecutorHub` a scrape reads."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...

    @property
    def dispatcher(self) -> Dispatcher: ...


class _Applied(Protocol):
    @property
    def last_applied(self) -> int: ...


class _Planner(Protocol):
    """The part of :class:`raftsched.leader.driver.LeaderDriver` a scrape reads."""

    @property
    def leading(self) -> bool: ...

    @property
    def held_since_ms(self) -> int: ...


class _Reads(Protocol):
    """The read index's counters (:class:`raftsched.leader.reads.ReadIndex`)."""

    @property
    def barriers(self) -> int: ...

    @property
    def refused(self) -> int: ...


class Site(Protocol):
    """Pages served on the listener beside the built-in routes, closed when it stops (the web
    console, :class:`raftsched.web.console.Console`; the node passes it in, so this module
    knows no page)."""

    def routes(self) -> Sequence[tuple[str, str, Handler]]: ...

    def close(self) -> None: ...


class ObservedNode(Protocol):
    """What a scrape reads of a node (its public surface)."""

    @property
    def node_id(self) -> str: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def state(self) -> SchedulerState: ...

    @property
    def replica(self) -> _Applied: ...

    @property
    def consensus(self) -> ConsensusNode | None: ...

    @property
    def hub(self) -> _Hub | None: ...

    @property
    def clock_watch(self) -> ClockWatch: ...

    @property
    def reads(self) -> _Reads: ...

    @property
    def driver(self) -> _Planner: ...

    @property
    def store_damaged(self) -> str: ...


class NodeObservability:
    """Metrics and the HTTP listener of ``node``, serving on ``address``.

    ``tally`` is the counter object the node's state machine updates as it applies.
    Threading: ``observe_*`` may be called from any thread; :meth:`start` and :meth:`stop` on
    the node's event loop.
    """

    def __init__(
        self,
        node: ObservedNode,
        address: str,
        tally: ApplyTally,
        zombie_after_ms: int = DEFAULT_ZOMBIE_AFTER_MS,
        console: Site | None = None,
        api: HttpApi | None = None,
        ssl_context: ssl.SSLContext | None = None,
        metrics_client_cert: bool = False,
        alert_targets: Sequence[str] = (),
    ) -> None:
        self.node = node
        self.zombie_after_ms = zombie_after_ms
        self.alert_targets = tuple(alert_targets)  # webhook names: their undelivered events
        self.metrics = NodeMetrics(node.node_id, self._sample, tally)
        self.listener = HttpListener(
            address,
            metrics=self.metrics.exposition,
            readyz=self._readyz,
            name=f"node {node.node_id}",
            ssl_context=ssl_context,
            metrics_client_cert=metrics_client_cert,
        )
        # The HTTP/JSON API takes /api/v1/ (before the console, whose routes take every path);
        # the web console takes every path the built-in routes (/metrics, /healthz, /readyz) do not.
        self.api = api
        if api is not None:
            api.scheme = self.listener.scheme
            api.observe = self.metrics.observe_http_api
            api.observe_held = self.metrics.observe_http_api_held
            api.monotonic = node.clock.monotonic
            for method, path, handler in api.routes():
                self.listener.add_route(method, path, handler)
        self.console = console
        if console is not None:
            for method, path, handler in console.routes():
                self.listener.add_route(method, path, handler)

    # -- lifecycle -------------------------------------------------------------------------------

    def bind(self) -> None:
        """Take the port now (raises :class:`raftsched.observability.listener.ListenError`)."""
        self.listener.bind()

    def interceptors(self) -> list[MetricsInterceptor]:
        """The gRPC server interceptors to install (count and time every call)."""
        m = self.metrics
        return [MetricsInterceptor(m.grpc_requests, m.grpc_seconds, self.node.clock.monotonic)]

    async def start(self) -> None:
        await self.listener.start()

    async def stop(self) -> None:
        await self.listener.stop()
        if self.console is not None:
            self.console.close()

    def close(self) -> None:
        """Release the port if it was bound but never served; idempotent."""
        self.listener.close()

    # -- pushed values ---------------------------------------------------------------------------

    def observe_commit_lateness(self, runs: Sequence[tuple[int, int, int]]) -> None:
        """``[(nominal_ms, lateness_ms, count), ...]`` of one committed fire batch (consensus
        thread; one entry per nominal time)."""
        self.metrics.observe_commit_lateness(runs)

    def observe_results(self, results: Iterable[pb.ExecResult]) -> None:
        """A batch of executor results arrived at the leader: their start lateness."""
        self.metrics.observe_start_lateness(
            r.start_lateness_ms for r in results if r.HasField("start_lateness_ms")
        )

    def observe_snapshot(self, seconds: float) -> None:
        self.metrics.snapshot_seconds.observe(seconds)

    # -- read at scrape time ---------------------------------------------------------------------

    def _readyz(self) -> Probe:
        node = self.node
        if node.store_damaged:
            return Probe(False, f"stored state damaged: {node.store_damaged}")
        consensus = node.consensus
        if consensus is None:
            return Probe(False, "not joined to the cluster yet")
        leader = consensus.leader_id()
        if not leader:
            return Probe(False, "no leader known")
        commit = consensus.status().commit_index
        applied = node.replica.last_applied
        if applied < commit:
            return Probe(False, f"applied {applied} of {commit} committed entries")
        return Probe(True, f"leader {leader}, applied {applied}")

    def _sample(self) -> NodeSample:
        """Runs on the scraping worker thread: the node's state is read in one state view (the
        counts only, never across the event loop); the dispatcher (owned by the loop) is read on
        the loop."""
        node = self.node
        consensus = node.consensus
        raft = consensus.status() if consensus is not None else None
        with node.state.view() as v:
            slots_alive = [e.slots for e in v.executors.values() if e.alive]
            executors = len(v.executors)
            tasks, active_runs = len(v.tasks), v.active_count
            hot_slots = v.hot_slots()
            run_states = v.workflow_run_states()
        workflow_runs: dict[str, int] = {}
        for state in run_states:
            name = _WORKFLOW_STATES.get(state, "unknown")
            workflow_runs[name] = workflow_runs.get(name, 0) + 1
        (backlog, oldest_ms, zombies, busy), offsets = self._dispatch_sample()
        clock = node.clock_watch.view(leading=raft is not None and raft.role == "leader")
        held_since = node.driver.held_since_ms if node.driver.leading else 0  # one read each
        return NodeSample(
            is_leader=raft is not None and raft.role == "leader",
            leader_known=consensus is not None and consensus.leader_id() is not None,
            term=raft.term if raft is not None else 0,
            commit_index=raft.commit_index if raft is not None else 0,
            applied_index=node.replica.last_applied,
            tasks=tasks,
            active_runs=active_runs,
            hot_slots=hot_slots,
            dispatch_backlog=backlog,
            planning_held_seconds=max(0, node.clock.now_ms() - held_since) / 1000.0 if held_since else 0.0,
            oldest_waiting_seconds=oldest_ms / 1000.0,
            zombie_attempts=zombies,
            executors_alive=len(slots_alive),
            executors_dead=executors - len(slots_alive),
            slots_total=sum(slots_alive),
            slots_busy=busy,
            workflow_runs=workflow_runs,
            clock_offset_ms=clock.offset_ms,
            clock_skew_ms=clock.skew_ms,
            executor_clock_offsets=offsets,
            alert_events=node.state.alert_seq,
            alerts_undelivered=self._undelivered(node.state.alert_seq),
            read_barriers=node.reads.barriers,
            reads_refused=node.reads.refused,
            contact_age_seconds=raft.contact_age_ms / 1000.0
            if raft is not None and raft.contact_age_ms >= 0
            else -1.0,
            store_damaged=bool(node.store_damaged),
        )

    def _undelivered(self, newest: int) -> dict[str, int]:
        """Per webhook target, the alert events after its delivered cursor (one short read)."""
        if not self.alert_targets:
            return {}
        with self.node.state.store.reader() as r:
            done = outbox.cursors(r)
        return {name: max(0, newest - done.get(name, 0)) for name in self.alert_targets}

    def _dispatch_sample(self) -> tuple[tuple[int, int, int, int], dict[str, int]]:
        """:func:`dispatch_sample`, and each live executor's reported clock offset (ms)."""
        hub = self.node.hub
        loop = hub.loop if hub is not None else None
        if hub is None or loop is None or loop.is_closed():
            return (0, 0, 0, 0), {}
        now = self.node.clock.now_ms()

        async def read() -> tuple[tuple[int, int, int, int], dict[str, int]]:
            d = hub.dispatcher
            members = d.members
            offsets = {
                name: h.clock_offset_ms
                for name, h in d.executor_health.items()
                if name in members and h.clock_offset_ms is not None
            }
            return dispatch_sample(d, now, self.zombie_after_ms), offsets

        try:
            return asyncio.run_coroutine_threadsafe(read(), loop).result(_HUB_SAMPLE_TIMEOUT_S)
        except (concurrent.futures.TimeoutError, RuntimeError):
            # A loop too busy to answer in time (or shutting down): report nothing rather than
            # hold the scrape.
            log.debug("dispatcher sample unavailable for this scrape")
            return (0, 0, 0, 0), {}


def dispatch_sample(d: Dispatcher, now_ms: int, zombie_after_ms: int) -> tuple[int, int, int, int]:
    """``(backlog, age of the oldest waiting attempt in ms, zombies, busy slots)`` of a leader's
    dispatcher (zeros on a follower). On the dispatcher's own thread: O(waiting + leases)."""
    if not d.leading:
        return 0, 0, 0, 0
    oldest = min((w.ready.nominal_ms for w in d.waiting.values()), default=now_ms)
    horizon = now_ms - zombie_after_ms
    zombies = sum(1 for lease in d.leases.values() if 0 < lease.assigned_ms <= horizon)
    return len(d.waiting), max(0, now_ms - oldest), zombies, sum(d.used.values())
