"""The leader's alert loop: webhook delivery from the replicated outbox, and time-based detection.

Runs on the node's event loop and acts only while the node is leading and ready. For each
``[[alerts.webhook]]`` target it reads the events after the target's replicated cursor, POSTs
each one the target's filters take (JSON, signed with HMAC-SHA256 when the target has a secret),
and after each success proposes ``AlertsDelivered(target, seq)``. A failed POST is retried with
capped exponential backoff and jitter; later events wait behind it (delivery is in order).

Guarantee: every retained event reaches every target that takes it at least once, with the same
id and the same body, across leader changes: a new leader starts from the committed cursor. An
event may arrive twice (a leader posted it and lost leadership before its cursor committed);
receivers dedupe on ``id`` (also sent as the ``X-Raftsched-Alert-Id`` header).

Threads: everything here runs on the event loop except the blocking HTTP request, which runs in
the loop's default executor (the standard library's ``http.client``; no third-party client).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import http.client
import json
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol
from urllib.parse import urlsplit

from raftsched.abc import CommitHook, ProposeCallback, StateStore
from raftsched.alerts.config import AlertsConfig, Webhook
from raftsched.alerts.monitor import AlertMonitor, SlaTask, StartDelays
from raftsched.errors import RaftschedError
from raftsched.fsm import alerts as outbox
from raftsched.fsm.state import SchedulerState
from raftsched.fsm.workflows import is_internal
from raftsched.leader import writes
from raftsched.leader.gate import Stamp
from raftsched.logfields import attempt_fields
from raftsched.model import BACKFILL_FAILED, WORKFLOW_RUN_FAILED
from raftsched.timing import sla
from raftsched.timing.durations import format_duration
from raftsched.v1 import log_pb2 as pb
from raftsched.v1 import raftsched_pb2 as rpcpb

log = logging.getLogger("raftsched.alerts")

POLL_S = 0.25
BATCH = 100
RAISE_CHUNK = 50
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 60.0
SIGNATURE_HEADER = "X-Raftsched-Signature"
ID_HEADER = "X-Raftsched-Alert-Id"
USER_AGENT = "raftsched-alerts/1"


class DeliveryFailed(Exception):
    """A POST did not succeed (connection error, timeout or a non-2xx status)."""


Post = Callable[[Webhook, bytes, Mapping[str, str]], Awaitable[None]]
"""Sends one body to one target; raises :class:`DeliveryFailed` unless the target answered 2xx."""


def link(config: AlertsConfig, alert: pb.AlertRecord) -> str:
    """The web console's page for the event's run ("" without ``alerts.console_url``)."""
    base = config.console_url
    if not base or not alert.run_id:
        return ""
    if alert.kind == BACKFILL_FAILED:
        return f"{base}/backfills/{alert.run_id}"
    if alert.kind == WORKFLOW_RUN_FAILED:
        return f"{base}/workflow-runs/{alert.run_id}"
    return f"{base}/runs/{alert.run_id}"


def payload(alert: pb.AlertRecord, cluster: str, link_url: str) -> dict[str, object]:
    """The JSON object a webhook receives for ``alert`` (documented in the README). An event
    that clears an earlier one (``upstream_late`` when the upstream finished) also has
    ``"resolved": true``."""
    body: dict[str, object] = {
        "id": alert.id,
        "kind": alert.kind,
        "cluster": cluster,
        "at_ms": alert.at_ms,
        "task": alert.task,
        "workflow": alert.workflow,
        "workflow_run": alert.workflow_run,
        "run_id": alert.run_id,
        "execution_id": alert.execution_id,
        "owner": alert.owner,
        "namespace": alert.namespace,
        "reason": alert.error,
        "output_tail": alert.output_tail,
        "link": link_url,
    }
    if alert.resolved:
        body["resolved"] = True
    if alert.severity:  # start_delay: "warning" or "critical"
        body["severity"] = alert.severity
    return body


def encode(body: Mapping[str, object]) -> bytes:
    """Canonical JSON (sorted keys, no spaces): the same event always gives the same bytes."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sign(secret: str, body: bytes) -> str:
    """The signature header's value: ``sha256=`` and the hex HMAC-SHA256 of the body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str) -> bool:
    """What a receiver does: recompute the signature over the raw body, compare in constant time."""
    return hmac.compare_digest(sign(secret, body), header)


def headers_for(hook: Webhook, alert_id: str, body: bytes) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, ID_HEADER: alert_id}
    if hook.secret:
        headers[SIGNATURE_HEADER] = sign(hook.secret, body)
    return headers


def _post_blocking(url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> None:
    parts = urlsplit(url)
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname or "", parts.port, timeout=timeout_s)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request("POST", path, body=body, headers=dict(headers))
        status = conn.getresponse().status
    except (OSError, http.client.HTTPException) as exc:
        raise DeliveryFailed(f"{type(exc).__name__}: {exc}") from None
    finally:
        conn.close()
    if not 200 <= status < 300:
        raise DeliveryFailed(f"HTTP {status}")


async def http_post(hook: Webhook, body: bytes, headers: Mapping[str, str]) -> None:
    """POST ``body`` to ``hook.url`` within ``hook.timeout_ms`` (redirects are failures)."""
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, _post_blocking, hook.url, body, headers, hook.timeout_ms / 1000)


class LeaderStamps(Protocol):
    """The part of :class:`raftsched.leader.gate.LeaderGate` the alert loop uses."""

    def leading_and_ready(self) -> bool: ...

    def stamp(self) -> Stamp: ...


class AlertNode(Protocol):
    """What the alert loop needs from its node."""

    def propose(
        self, data: bytes, callback: ProposeCallback, on_commit: CommitHook | None = None
    ) -> None: ...

    @property
    def state(self) -> SchedulerState: ...

    @property
    def store(self) -> StateStore: ...

    @property
    def gate(self) -> LeaderStamps: ...


def backoff_s(failures: int, rng: random.Random) -> float:
    """Capped exponential backoff with ±20 % jitter after ``failures`` consecutive failures."""
    base = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2.0 ** min(failures - 1, 16))
    return base * rng.uniform(0.8, 1.2)


class AlertLoop:
    """The leader's alert work on one node. :meth:`start` on the node's event loop; :meth:`stop`."""

    def __init__(
        self,
        node: AlertNode,
        config: AlertsConfig,
        cluster: str,
        post: Post = http_post,
        start_delays: StartDelays | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.node = node
        self.config = config
        self.cluster = cluster
        self.post = post
        self.start_delays = start_delays
        self.monitor = AlertMonitor(config)
        # Jitter randomness enters here, at the edge; it decides nothing replicated.
        self.rng = rng or random.Random()
        self._epoch = 0
        self._sent: dict[str, int] = {}  # target -> highest seq delivered this epoch
        self._tasks: list[asyncio.Task[None]] = []
        self.delivered = 0  # POSTs that succeeded (diagnostics and tests)

    def raise_node_alert(self, kind: str, node_id: str, error: str, at_ms: int, attempts: int = 20) -> None:
        """Deliver an event this node found about itself (:data:`~raftsched.model.STORE_DAMAGED`)
        straight to every webhook that takes it, with the usual body and signature, retried with
        backoff (at most ``attempts`` POSTs per target). Not replicated: at least once only while
        this process lives. Call on the event loop."""
        alert = pb.AlertRecord(
            id=f"{node_id}/{kind}/{at_ms}", kind=kind, at_ms=at_ms, error=f"node {node_id}: {error}"
        )
        body = encode(payload(alert, self.cluster, ""))
        loop = asyncio.get_running_loop()
        for hook in self.config.webhooks:
            if hook.takes(kind, "", ""):
                self._tasks.append(loop.create_task(self._deliver_node_alert(hook, alert, body, attempts)))

    async def _deliver_node_alert(
        self, hook: Webhook, alert: pb.AlertRecord, body: bytes, attempts: int
    ) -> None:
        for failures in range(1, attempts + 1):
            try:
                await self.post(hook, body, headers_for(hook, alert.id, body))
            except DeliveryFailed as exc:
                log.warning("alert %s to webhook %s failed (will retry): %s", alert.id, hook.name, exc)
                await asyncio.sleep(backoff_s(failures, self.rng))
                continue
            self.delivered += 1
            return
        log.error("alert %s to webhook %s: gave up after %d attempts", alert.id, hook.name, attempts)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._deliver_loop(hook)) for hook in self.config.webhooks]
        self._tasks.append(loop.create_task(self._monitor_loop()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    # -- leadership -------------------------------------------------------------------------------

    def _stamp(self) -> Stamp | None:
        """This leader's stamp, or None while the node is not leading and ready. A new epoch
        starts over from the committed cursors."""
        if not self.node.gate.leading_and_ready():
            return None
        try:
            stamp = self.node.gate.stamp()
        except RaftschedError:
            return None
        if stamp.epoch != self._epoch:
            self._epoch = stamp.epoch
            self._sent.clear()
            self.monitor.reset()
        return stamp

    def _propose(self, data: bytes, what: str) -> None:
        def done(result: bytes | None, error: Exception | None) -> None:
            if error is not None:
                log.info("alert command %s not committed: %s", what, error)
            elif result:
                res = pb.CommandResult.FromString(result)
                if not res.ok:
                    log.warning("alert command %s refused: %s %s", what, res.code, res.message)

        self.node.propose(data, done)

    # -- delivery ---------------------------------------------------------------------------------

    def _pending(self, hook: Webhook) -> tuple[int, list[pb.AlertRecord]]:
        with self.node.store.reader() as r:
            committed = outbox.cursors(r).get(hook.name, 0)
            start = max(committed, self._sent.get(hook.name, 0))
            return start, outbox.alerts_after(r, start, BATCH)

    def _advance(self, hook: Webhook, through: int) -> bool:
        stamp = self._stamp()
        if stamp is None:
            return False
        self._sent[hook.name] = through
        self._propose(writes.alerts_delivered(hook.name, through, **stamp.as_kwargs()), "alerts_delivered")
        return True

    async def _deliver_loop(self, hook: Webhook) -> None:
        failures = 0
        while True:
            try:
                failed = await self._deliver_once(hook)
            except Exception:
                log.exception("alert delivery to %s failed unexpectedly", hook.name)
                failed = True
            if failed:
                failures += 1
                await asyncio.sleep(backoff_s(failures, self.rng))
            else:
                failures = 0
                await asyncio.sleep(POLL_S)

    async def _deliver_once(self, hook: Webhook) -> bool:
        """Deliver what is pending for ``hook``; True if a POST failed (back off)."""
        if self._stamp() is None:
            return False
        start, batch = self._pending(hook)
        through = start  # events up to here are done (delivered, or not taken by the filters)
        for alert in batch:
            if not hook.takes(alert.kind, alert.owner, alert.namespace):
                through = alert.seq
                continue
            body = encode(payload(alert, self.cluster, link(self.config, alert)))
            try:
                await self.post(hook, body, headers_for(hook, alert.id, body))
            except DeliveryFailed as exc:
                log.warning(
                    "alert %s to webhook %s failed (will retry): %s",
                    alert.id,
                    hook.name,
                    exc,
                    extra=_alert_fields(alert),
                )
                if through > start:
                    self._advance(hook, through)
                return True
            self.delivered += 1
            through = start = alert.seq
            if not self._advance(hook, through):
                return False  # lost leadership: the next leader goes on from the committed cursor
        if through > start:
            self._advance(hook, through)
        return False

    # -- detection --------------------------------------------------------------------------------

    async def _monitor_loop(self) -> None:
        while True:
            await asyncio.sleep(POLL_S * 2)
            try:
                if self.start_delays is not None:  # every node: a new leader has the samples
                    self.start_delays.drain()
                await self._monitor_once()
            except Exception:
                log.exception("alert detection failed")

    async def _monitor_once(self) -> None:
        stamp = self._stamp()
        if stamp is None or not self.monitor.due(stamp.now_ms):
            return
        events = detect_zombies(self.monitor, self.node.state, stamp.now_ms)
        events.extend(detect_sla(self.monitor, self.node.state, stamp.now_ms))
        if self.start_delays is not None:
            measured = await asyncio.get_running_loop().run_in_executor(
                None, self.start_delays.measure, stamp.now_ms
            )
            events.extend(self.monitor.start_delay(measured, stamp.now_ms))
        if events:
            stamp = self._stamp()
            if stamp is None:
                return
            for event in events:
                log.warning("alert detected: %s %s", event.kind, event.error)
            # Chunks keep each log entry well under the 64 KB pysyncobj entries should stay below.
            for i in range(0, len(events), RAISE_CHUNK):
                chunk = events[i : i + RAISE_CHUNK]
                self._propose(writes.raise_alerts(chunk, **stamp.as_kwargs()), "raise_alerts")


def detect_zombies(monitor: AlertMonitor, state: SchedulerState, now_ms: int) -> list[pb.AlertRecord]:
    """Run the monitor's zombie check over ``state``'s runs with a RUNNING attempt (takes the state
    lock). Only those runs are parsed, found from the running attempts the state counts
    (``state.usage``): parsing every active run held the state lock and the node's event loop
    for 2 s with 200,000 runs pending, once per check, and stalled firing with it."""
    with state.view() as v:
        runs = v.running_runs()
        owners = {}
        for run in runs:
            spec = v.task_spec(run.task)
            if spec is not None:
                owners[run.task] = (spec.owner, spec.namespace)
    return monitor.zombies(runs, owners, now_ms)


def sla_tasks(state: SchedulerState) -> tuple[list[SlaTask], list[pb.Run]]:
    """The tasks with an SLA or freshness and their unfinished runs (takes the state lock).

    Costs one attribute check per task, and nothing more without such tasks; their unfinished
    runs are found by the task name in the run id (``task@nominal``) and only they are parsed."""
    tasks: list[SlaTask] = []
    with state.view() as v:
        for name, st in v.tasks.items():
            spec = st.spec
            if not (spec.sla_start_within_ms or spec.sla_finish_within_ms or spec.freshness_ms):
                continue
            if is_internal(name):
                continue
            tasks.append(
                SlaTask(
                    name,
                    spec.owner,
                    spec.namespace,
                    st.enabled,
                    st.created_ms,
                    st.last_success_ms,
                    st.last_success_run,
                    spec.sla_start_within_ms,
                    spec.sla_finish_within_ms,
                    spec.freshness_ms,
                )
            )
        timed = {t.name for t in tasks if t.start_within_ms or t.finish_within_ms}
        runs = []
        if timed:
            for run_id, raw in v.active.items():
                if run_id.rpartition("@")[0] in timed:
                    runs.append(pb.Run.FromString(raw))
        for wspec, rec, active in v.sla_workflows():
            key = sla.workflow_key(wspec.name)
            tasks.append(
                SlaTask(
                    key,
                    wspec.owner,
                    wspec.namespace or "default",
                    not rec.paused,
                    rec.created_ms,
                    rec.last_success_ms,
                    sla.workflow_key(rec.last_success_run) if rec.last_success_run else "",
                    wspec.sla_start_within_ms,
                    wspec.sla_finish_within_ms,
                    wspec.freshness_ms,
                    workflow=True,
                )
            )
            if wspec.sla_start_within_ms or wspec.sla_finish_within_ms:
                runs.extend(
                    workflow_run_view(key, wr) for wr in active if not wr.manual and not wr.backfill_id
                )
    return tasks, runs


def workflow_run_view(key: str, wr: pb.WorkflowRun) -> pb.Run:
    """An unfinished workflow run as the monitor's SLA check reads a run: keyed by
    ``workflow:<run id>``, nominal at its logical time, started when its first task was launched."""
    run = pb.Run(run_id=sla.workflow_key(wr.run_id), task=key, nominal_ms=wr.logical_ms, state=pb.RUNNING)
    started = sla.workflow_start_ms(wr)
    if started:
        run.timeline.add(event="started", at_ms=started)
    return run


def detect_sla(monitor: AlertMonitor, state: SchedulerState, now_ms: int) -> list[pb.AlertRecord]:
    """Run the monitor's SLA and freshness check over ``state`` (see :func:`sla_tasks`)."""
    tasks, runs = sla_tasks(state)
    return monitor.sla_misses(tasks, runs, now_ms) if tasks else []


def delivery_view(
    store: StateStore, config: AlertsConfig, since_ms: int, limit: int
) -> list[rpcpb.AlertInfo]:
    """Retained events since ``since_ms`` (newest ``limit``), each with its state per configured
    target: ``delivered`` (the target's cursor covers it), ``filtered`` (the target does not take
    it) or ``pending``."""
    with store.reader() as r:
        events = outbox.list_alerts(r, since_ms, limit)
        done = outbox.cursors(r)
    out = []
    for alert in events:
        info = rpcpb.AlertInfo(alert=alert, link=link(config, alert))
        for hook in config.webhooks:
            if done.get(hook.name, 0) >= alert.seq:
                state = "delivered" if hook.takes(alert.kind, alert.owner, alert.namespace) else "filtered"
            else:
                state = "pending" if hook.takes(alert.kind, alert.owner, alert.namespace) else "filtered"
            info.deliveries.add(target=hook.name, state=state)
        out.append(info)
    return out


def describe(config: AlertsConfig) -> str:
    """One line for the node's start log: what alerts do here."""
    if not config.webhooks:
        return "alerts: no webhook targets (events are kept; `raftsched alerts` lists them)"
    names = ", ".join(h.name for h in config.webhooks)
    after = format_duration(config.zombie_after_ms)
    return f"alerts: {len(config.webhooks)} webhook target(s) ({names}), zombie after {after}"


def _alert_fields(alert: pb.AlertRecord) -> dict[str, object]:
    """The attempt fields of an alert about one (none for, e.g., a schedule-delay alert)."""
    if alert.execution_id:
        return attempt_fields(alert.execution_id, alert.run_id, alert.task)
    return {"run_id": alert.run_id or None, "task": alert.task or None}
