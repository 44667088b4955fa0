"""The metric set of one scheduler node.

Three kinds of source, chosen so the hot paths stay cheap:

* state read at scrape time: the node hands over a function returning a :class:`NodeSample`
  (Raft indices, backlog, slots, ...), called once per scrape;
* counts the applier keeps anyway: an :class:`~raftsched.fsm.tally.ApplyTally` read at
  scrape time (fires by outcome, finished runs, attempt results);
* values the code already computes, pushed in batches: commit lateness per committed fire batch,
  start lateness per reported result batch, snapshot durations, gRPC calls.

Every name, label and meaning here is documented in docs/guide/monitor.md; a test
keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from raftsched.fsm.tally import ApplyTally, TallySnapshot
from raftsched.observability.metrics import RPC_BUCKETS, LabelValues, MetricSet

__all__ = ["NodeMetrics", "NodeSample"]

_OWNER: Final = ("owner", "namespace")


@dataclass(frozen=True, slots=True)
class NodeSample:
    """What a node reports about itself at one instant (a scrape).

    Leader-only values (backlog, waiting, zombies, busy slots) are 0 on a follower.
    """

    is_leader: bool = False
    leader_known: bool = False
    term: int = 0
    commit_index: int = 0
    applied_index: int = 0
    tasks: int = 0
    active_runs: int = 0
    hot_slots: int = 0  # the hot path's in-memory slot table (raftsched.fsm.hot_slots.SlotTable)
    dispatch_backlog: int = 0
    planning_held_seconds: float = 0.0  # how long fire planning has been held for the backlog
    oldest_waiting_seconds: float = 0.0
    zombie_attempts: int = 0
    executors_alive: int = 0
    executors_dead: int = 0
    slots_total: int = 0
    slots_busy: int = 0
    workflow_runs: Mapping[str, int] = field(default_factory=dict)
    clock_offset_ms: int | None = None  # this node's clock minus the leader's (None: unknown)
    clock_skew_ms: int | None = None  # this node's clock minus the majority's
    read_barriers: int = 0
    reads_refused: int = 0
    contact_age_seconds: float = -1.0  # -1: unknown (see RaftStatus.contact_age_ms)
    store_damaged: bool = False
    # executor -> its clock minus the leader's (ms), as it reports it (leader only)
    executor_clock_offsets: Mapping[str, int] = field(default_factory=dict)
    alert_events: int = 0  # alert events raised (the replicated alert sequence)
    alerts_undelivered: Mapping[str, int] = field(default_factory=dict)  # webhook -> events not yet delivered


class NodeMetrics:
    """The metrics of node ``node_id``; ``sample`` is called once per scrape (any thread).

    ``tally`` is the applier's counter object; pass the one the state machine updates.
    """

    def __init__(self, node_id: str, sample: Callable[[], NodeSample], tally: ApplyTally) -> None:
        self.tally = tally
        self._sample_fn = sample
        self._sample = NodeSample()
        self._counts = tally.snapshot()
        m = self.set = MetricSet({"node": node_id})
        m.before_scrape(self._refresh)
        s = self._get
        # -- Raft ---------------------------------------------------------------------------------
        m.gauge("raftsched_is_leader", "1 if this node is the Raft leader, else 0.", lambda: s().is_leader)
        m.gauge("raftsched_leader_known", "1 if this node knows a leader, else 0.", lambda: s().leader_known)
        m.gauge("raftsched_raft_term", "The current Raft term (the fencing epoch).", lambda: s().term)
        m.gauge(
            "raftsched_raft_commit_index",
            "The highest Raft log index known committed.",
            lambda: s().commit_index,
        )
        m.gauge(
            "raftsched_raft_applied_index",
            "The highest Raft log index applied to this node's state.",
            lambda: s().applied_index,
        )
        m.gauge(
            "raftsched_apply_lag_entries",
            "Committed entries not yet applied here (commit index - applied index).",
            lambda: max(0, s().commit_index - s().applied_index),
        )
        m.gauge(
            "raftsched_raft_contact_age_seconds",
            "Since this node's Raft view was last confirmed: on a leader, the age of the newest "
            "answer it holds from a majority; on a follower, since the leader last reached it "
            "(-1: never).",
            lambda: s().contact_age_seconds,
        )
        m.counter_view(
            "raftsched_read_barriers_total",
            "Read barriers this node committed as leader, one per batch of linearizable reads.",
            lambda: {(): s().read_barriers},
        )
        m.counter_view(
            "raftsched_reads_refused_total",
            "Linearizable reads this node refused as 'not sure I still lead' (its read barrier "
            "did not commit in time).",
            lambda: {(): s().reads_refused},
        )
        m.gauge(
            "raftsched_store_damaged",
            "1 if this node found its stored state damaged (it serves no reads, does not lead and is "
            "not ready; restart it with --rebuild), else 0.",
            lambda: s().store_damaged,
        )
        self.snapshot_seconds = m.histogram(
            "raftsched_snapshot_seconds", "Time to write one Raft snapshot of the state."
        )
        # -- scheduling -------------------------------------------------------------------------
        m.gauge(
            "raftsched_clock_offset_seconds",
            "This node's clock minus the leader's, measured over Raft with the round trip halved "
            "(0 on the leader; NaN while unknown); on the leader also each live executor's clock "
            "minus the leader's, as it reports it (executor label; empty for the node itself).",
            lambda: {
                ("",): _seconds(s().clock_offset_ms),
                **{(name,): ms / 1000.0 for name, ms in s().executor_clock_offsets.items()},
            },
            ("executor",),
        )
        m.gauge(
            "raftsched_clock_skew_seconds",
            "This node's clock minus the majority's (the median of the measured clocks; NaN while "
            "unknown). Beyond scheduler.max_clock_skew_ms the node does not lead or campaign.",
            lambda: _seconds(s().clock_skew_ms),
        )
        m.counter_view(
            "raftsched_alert_events_total",
            "Alert events raised (the replicated alert sequence: the same on every node; "
            "aggregate with max).",
            lambda: {(): s().alert_events},
        )
        m.gauge(
            "raftsched_alerts_undelivered",
            "Alert events after a webhook target's delivered cursor (not yet delivered, or "
            "waiting behind a failing POST), by target.",
            lambda: {(name,): n for name, n in s().alerts_undelivered.items()},
            ("target",),
        )
        m.gauge("raftsched_tasks", "Task definitions in the replicated state.", lambda: s().tasks)
        m.gauge("raftsched_active_runs", "Runs not yet finished.", lambda: s().active_runs)
        m.gauge(
            "raftsched_hot_slots",
            "Slots in the hot path's in-memory table: its unfinished hot runs and the finished ones "
            "after the oldest of them (a long attempt keeps them until the leader promotes it).",
            lambda: s().hot_slots,
        )
        labels = (*_OWNER, "task") if tally.per_task else _OWNER
        m.counter_view(
            "raftsched_fires_total",
            "Nominal fires accounted, by outcome (fired, coalesced, skipped_overlap, skipped_misfire, "
            "skipped_disabled, skipped_calendar). Counted as the log is applied: equal on every node.",
            lambda: self._counts.fires,
            ("outcome", *labels),
        )
        m.counter_view(
            "raftsched_runs_finished_total",
            "Runs that reached a final state (succeeded, failed, cancelled).",
            lambda: self._counts.runs_finished,
            ("state", *labels),
        )
        m.counter_view(
            "raftsched_attempts_total",
            "Attempts by how they ended (succeeded, failed, timeout, lost); retried counts the "
            "retries scheduled after a failed, timed-out or lost attempt.",
            lambda: self._counts.attempts,
            ("result", *labels),
        )
        self.commit_lateness = m.histogram(
            "raftsched_fire_commit_lateness_seconds",
            "Nominal time to Raft commit of the fire, per fired run (leader only).",
        )
        self.start_lateness = m.histogram(
            "raftsched_start_lateness_seconds",
            "Nominal time to start on the executor, per attempt, as executors report it with "
            "their results (leader only).",
        )
        # -- dispatch ------------------------------------------------------------------------------
        m.gauge(
            "raftsched_dispatch_backlog",
            "Attempts due and waiting for an executor slot (leader only).",
            lambda: s().dispatch_backlog,
        )
        m.gauge(
            "raftsched_planning_held_seconds",
            "How long the leader has held fire planning because scheduler.max_dispatch_backlog "
            "attempts wait for a slot; 0 while it plans (leader only).",
            lambda: s().planning_held_seconds,
        )
        m.gauge(
            "raftsched_oldest_waiting_seconds",
            "Age of the oldest attempt waiting for a slot, from its nominal time (leader only).",
            lambda: s().oldest_waiting_seconds,
        )
        m.gauge(
            "raftsched_zombie_attempts",
            "Attempts running longer than the zombie threshold (leader only).",
            lambda: s().zombie_attempts,
        )
        m.gauge(
            "raftsched_executors",
            "Registered executors, by state (alive, dead).",
            lambda: {("alive",): s().executors_alive, ("dead",): s().executors_dead},
            ("state",),
        )
        m.gauge(
            "raftsched_executor_slots",
            "Slots of live executors, by state (total, busy, free); busy and free on the leader only.",
            lambda: _slots(s()),
            ("state",),
        )
        m.gauge(
            "raftsched_workflow_runs",
            "Workflow runs in the replicated state, by state.",
            lambda: {(k,): v for k, v in s().workflow_runs.items()},
            ("state",),
        )
        # -- gRPC ----------------------------------------------------------------------------------
        self.grpc_requests = m.counter(
            "raftsched_grpc_requests_total",
            "gRPC calls served, by service, method and status code.",
            ("service", "method", "code"),
        )
        self.grpc_seconds = m.histogram(
            "raftsched_grpc_request_seconds",
            "Time to serve a unary gRPC call, by service and method.",
            ("service", "method"),
            RPC_BUCKETS,
        )
        # -- the HTTP/JSON API (raftsched.rpc.http_api) --------------------------------------------
        self.http_api_requests = m.counter(
            "raftsched_http_api_requests_total",
            "HTTP/JSON API calls answered, by the Admin RPC they called and HTTP status.",
            ("rpc", "status"),
        )
        self.http_api_seconds = m.histogram(
            "raftsched_http_api_request_seconds",
            "Time to answer an HTTP/JSON API call (an event stream: until it opens), by Admin RPC.",
            ("rpc",),
            RPC_BUCKETS,
        )
        self.http_api_held = m.counter(
            "raftsched_http_api_held_total",
            "HTTP/JSON API calls that waited for the leader's firing window (a fire batch due or "
            "committing) before they ran ([api] firing_hold_ms).",
        )
        self.http_api_held_seconds = m.counter(
            "raftsched_http_api_held_seconds_total",
            "Time HTTP/JSON API calls waited for the leader's firing window, summed.",
        )

    def observe_http_api_held(self, seconds: float) -> None:
        """One HTTP/JSON API call that waited ``seconds`` for the leader's firing window."""
        self.http_api_held.inc()
        self.http_api_held_seconds.inc(amount=seconds)

    def observe_http_api(self, rpc: str, status: int, seconds: float) -> None:
        """One HTTP/JSON API answer (``rpc``: the Admin RPC, ``none`` for a path that is no route)."""
        self.http_api_requests.inc(rpc, str(status))
        self.http_api_seconds.observe(seconds, rpc)

    def _refresh(self) -> None:
        self._sample = self._sample_fn()
        self._counts = self.tally.snapshot()

    def _get(self) -> NodeSample:
        return self._sample

    @property
    def counts(self) -> TallySnapshot:
        """The applier's counts as of the last scrape."""
        return self._counts

    def observe_commit_lateness(self, runs: Iterable[tuple[int, int, int]]) -> None:
        """``[(nominal_ms, lateness_ms, count), ...]`` for the fires of one committed batch (one
        entry per nominal time: its fires are equally late)."""
        self.commit_lateness.observe_counted((late / 1000.0, count) for _, late, count in runs)

    def observe_start_lateness(self, lateness_ms: Iterable[int]) -> None:
        """Start lateness (ms) of the attempts in one batch of reported results."""
        self.start_lateness.observe_many(late / 1000.0 for late in lateness_ms)

    def exposition(self) -> tuple[bytes, str]:
        return self.set.exposition()


def _slots(sample: NodeSample) -> Mapping[LabelValues, float]:
    free = max(0, sample.slots_total - sample.slots_busy) if sample.is_leader else 0
    return {("total",): sample.slots_total, ("busy",): sample.slots_busy, ("free",): free}


def _seconds(ms: int | None) -> float:
    return float("nan") if ms is None else ms / 1000.0
