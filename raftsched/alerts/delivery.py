"""The leader's alert loop: delivery from the replicated outbox, recovery and time-based detection.

Runs on the node's event loop and acts only while the node is leading and ready. For each
target (``[[alerts.webhook]]``, ``[[alerts.email]]``) it reads the events after the target's
replicated cursor, routes each one (:mod:`raftsched.alerts.routing`: its severity, and whether a
failure streak suppresses it), sends each one the target's filters take in the target's format
(:mod:`raftsched.alerts.formats`; webhook bodies signed with HMAC-SHA256 when the target has a
secret; mail through :mod:`raftsched.alerts.smtp`), and after each success proposes
``AlertsDelivered(target, seq)``. A failed send is retried with capped exponential backoff and
jitter; later events wait behind it (delivery is in order). Nothing here runs on the apply path.

Recovery: the loop also watches the open failure streaks and, when a task's run succeeds after
its newest failure, proposes the resolved ``run_failed`` record that ends the streak
(:func:`raftsched.alerts.routing.recovered`; apply dedupes it).

Guarantee: every retained event reaches every target that takes it at least once, with the same
id and the same body, across leader changes: a new leader starts from the committed cursor. An
event may arrive twice (a leader posted it and lost leadership before its cursor committed);
receivers dedupe on ``id`` (also sent as the ``X-Raftsched-Alert-Id`` header).

Threads: everything here runs on the event loop except the blocking HTTP request and SMTP
session, which run in the loop's default executor (the standard library's ``http.client`` and
``smtplib``; no third-party client).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import hmac
import http.client
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Protocol
from urllib.parse import urlsplit

from raftsched.abc import CommitHook, ProposeCallback, StateStore
from raftsched.alerts import formats, routing, smtp
from raftsched.alerts.config import AlertsConfig, EmailTarget, Webhook
from raftsched.alerts.health import FleetView, HealthMonitor
from raftsched.alerts.monitor import AlertMonitor, SlaTask, StartDelays
from raftsched.alerts.routing import Notice, StreakBook
from raftsched.errors import RaftschedError
from raftsched.fsm import alerts as outbox
from raftsched.fsm.queries import list_runs
from raftsched.fsm.state import SchedulerState
from raftsched.fsm.workflow_model import is_internal
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
RECOVERY_POLL_S = 1.0
RECOVERY_CHECKS = 200  # open streaks looked at per pass (the next pass goes on from there)
RECOVERY_RUNS = 5  # newest runs of a task read to find the success that ends its streak
HEALTH_CHECK_MS = 1_000  # fleet health and clock skew are checked this often (leader time)
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 60.0
SIGNATURE_HEADER = "X-Raftsched-Signature"
ID_HEADER = "X-Raftsched-Alert-Id"
USER_AGENT = "raftsched-alerts/1"


class DeliveryFailed(Exception):
    """A send did not succeed (connection error, timeout, a non-2xx status, a refused mail)."""


Target = Webhook | EmailTarget

Post = Callable[[Webhook, bytes, Mapping[str, str]], Awaitable[None]]
"""Sends one body to one target; raises :class:`DeliveryFailed` unless the target answered 2xx."""

Mail = Callable[[EmailTarget, EmailMessage], Awaitable[list[str]]]
"""Sends one mail; returns the recipients the server refused; raises
:class:`raftsched.alerts.smtp.SendFailed` if it took none."""


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


encode = formats.encode


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
        mail: Mail = smtp.send,
        fleet: Callable[[int], FleetView] | None = None,
    ) -> None:
        self.node = node
        self.config = config
        self.cluster = cluster
        self.post = post
        self.mail = mail
        self.start_delays = start_delays
        self.monitor = AlertMonitor(config)
        # Fleet health and clock skew (raftsched.alerts.health): ``fleet(now_ms)`` reads the
        # leader's view on this loop (the dispatcher's thread); checked every HEALTH_CHECK_MS.
        self.fleet = fleet
        self.health = HealthMonitor(config.health)
        self._next_health_ms = 0
        # Jitter randomness enters here, at the edge; it decides nothing replicated.
        self.rng = rng or random.Random()
        self._epoch = 0
        self._lanes: dict[str, _Lane] = {}  # target -> its routed events this epoch
        self._head: StreakBook | None = None  # the open streaks, for recovery
        self._resolving: set[int] = set()  # streaks (newest failure seq) whose recovery was proposed
        self._recovery_from = 0  # where the next recovery pass starts among the open streaks
        self._tasks: list[asyncio.Task[None]] = []
        self.delivered = 0  # sends that succeeded (diagnostics and tests)

    def raise_node_alert(self, kind: str, node_id: str, error: str, at_ms: int, attempts: int = 20) -> None:
        """Deliver an event this node found about itself (:data:`~raftsched.model.STORE_DAMAGED`)
        straight to every target that takes it, in the target's format (webhooks signed as usual),
        retried with backoff (at most ``attempts`` sends per target). Not replicated: at least once
        only while this process lives. Call on the event loop."""
        alert = pb.AlertRecord(
            id=f"{node_id}/{kind}/{at_ms}", kind=kind, at_ms=at_ms, error=f"node {node_id}: {error}"
        )
        notice = Notice(alert, send=True, since_ms=at_ms)
        severity = self.config.severity(kind)
        loop = asyncio.get_running_loop()
        for target in self.config.targets:
            if target.takes(kind, "", "", severity):
                self._tasks.append(loop.create_task(self._deliver_node_alert(target, notice, attempts)))

    async def _deliver_node_alert(self, target: Target, notice: Notice, attempts: int) -> None:
        alert = notice.alert
        for failures in range(1, attempts + 1):
            try:
                await self._send(target, notice)
            except DeliveryFailed as exc:
                log.warning("alert %s to target %s failed (will retry): %s", alert.id, target.name, exc)
                await asyncio.sleep(backoff_s(failures, self.rng))
                continue
            self.delivered += 1
            return
        log.error("alert %s to target %s: gave up after %d attempts", alert.id, target.name, attempts)

    async def _send(self, target: Target, notice: Notice) -> None:
        """Send one routed event to one target in its format; raises :class:`DeliveryFailed`."""
        alert = notice.alert
        severity = self.config.severity(alert.kind, alert.severity)  # start_delay: its level
        link_url = link(self.config, alert)
        if isinstance(target, EmailTarget):
            subject, text = formats.email_text(notice, severity, self.cluster, link_url)
            try:
                refused = await self.mail(target, smtp.message(target, subject, text, alert.id, alert.at_ms))
            except smtp.SendFailed as exc:
                raise DeliveryFailed(str(exc)) from None
            if refused:
                log.warning(
                    "alert %s to %s: recipients refused: %s", alert.id, target.name, ", ".join(refused)
                )
            return
        body = formats.body_for(target.format, notice, severity, self.cluster, link_url)
        await self.post(target, body, headers_for(target, alert.id, body))

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._deliver_loop(target)) for target in self.config.targets]
        self._tasks.append(loop.create_task(self._monitor_loop()))
        self._tasks.append(loop.create_task(self._recovery_loop()))

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
            self._lanes.clear()
            self._head = None
            self._resolving.clear()
            self.monitor.reset()
            self.health.reset()
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

    def _fill(self, target: Target) -> _Lane:
        """``target``'s lane with its queue topped up: a new lane (a new epoch) replays the retained
        outbox from the start through the routing book, so its decisions are every leader's."""
        lane = self._lanes.get(target.name)
        with self.node.store.reader() as r:
            if lane is None:
                committed = outbox.cursors(r).get(target.name, 0)
                lane = _Lane(StreakBook(self.config.streak_interval_ms), sent=committed)
                self._lanes[target.name] = lane
            while len(lane.queue) < BATCH:
                batch = outbox.alerts_after(r, lane.book.through, BATCH)
                if not batch:
                    break
                for alert in batch:
                    notice = lane.book.observe(alert)
                    if alert.seq > lane.sent:
                        lane.queue.append(notice)
        return lane

    def _advance(self, target: Target, lane: _Lane, through: int) -> bool:
        stamp = self._stamp()
        if stamp is None:
            return False
        lane.sent = through
        self._propose(writes.alerts_delivered(target.name, through, **stamp.as_kwargs()), "alerts_delivered")
        return True

    async def _deliver_loop(self, target: Target) -> None:
        failures = 0
        while True:
            try:
                failed = await self._deliver_once(target)
            except Exception:
                log.exception("alert delivery to %s failed unexpectedly", target.name)
                failed = True
            if failed:
                failures += 1
                await asyncio.sleep(backoff_s(failures, self.rng))
            else:
                failures = 0
                await asyncio.sleep(POLL_S)

    async def _deliver_once(self, target: Target) -> bool:
        """Deliver what is pending for ``target``; True if a send failed (back off)."""
        if self._stamp() is None:
            return False
        lane = self._fill(target)
        through = lane.sent  # events up to here are done (delivered, suppressed or filtered out)
        while lane.queue:
            notice = lane.queue[0]
            alert = notice.alert
            if not notice.send or not target.takes(
                alert.kind, alert.owner, alert.namespace, self.config.severity(alert.kind, alert.severity)
            ):
                lane.queue.popleft()
                through = alert.seq
                continue
            try:
                await self._send(target, notice)
            except DeliveryFailed as exc:
                log.warning(
                    "alert %s to target %s failed (will retry): %s",
                    alert.id,
                    target.name,
                    exc,
                    extra=_alert_fields(alert),
                )
                if through > lane.sent:
                    self._advance(target, lane, through)
                return True
            self.delivered += 1
            lane.queue.popleft()
            through = alert.seq
            if not self._advance(target, lane, through):
                return False  # lost leadership: the next leader goes on from the committed cursor
        if through > lane.sent:
            self._advance(target, lane, through)
        return False

    # -- recovery ---------------------------------------------------------------------------------

    async def _recovery_loop(self) -> None:
        while True:
            await asyncio.sleep(RECOVERY_POLL_S)
            try:
                self._recovery_once()
            except Exception:
                log.exception("alert recovery check failed")

    def _recovery_once(self) -> None:
        """Propose the resolved record of each open streak whose task has succeeded since its
        newest failure (at most :data:`RECOVERY_CHECKS` streaks looked at per pass)."""
        stamp = self._stamp()
        if stamp is None:
            return
        if self._head is None:
            self._head = StreakBook(self.config.streak_interval_ms)
        found = []
        with self.node.store.reader() as r:
            while batch := outbox.alerts_after(r, self._head.through, BATCH):
                for alert in batch:
                    self._head.observe(alert)
            streaks = [s for s in self._head.open_streaks() if s.last_seq not in self._resolving]
            if not streaks:
                return
            start = self._recovery_from % len(streaks)
            looked = (streaks[start:] + streaks[:start])[:RECOVERY_CHECKS]
            self._recovery_from = start + len(looked)
            for streak in looked:
                run = routing.recovery_run(streak, list_runs(r, [streak.task], 0, 0, 0, RECOVERY_RUNS))
                if run is not None:
                    found.append(routing.recovered(streak, run))
                    self._resolving.add(streak.last_seq)
        for i in range(0, len(found), RAISE_CHUNK):
            chunk = found[i : i + RAISE_CHUNK]
            self.node.propose(writes.raise_alerts(chunk, **stamp.as_kwargs()), self._resolved_done(chunk))

    def _resolved_done(self, chunk: list[pb.AlertRecord]) -> ProposeCallback:
        """The callback of a proposal of resolved records: if it did not commit, look at those
        streaks again on the next pass (apply dedupes a record proposed twice)."""

        def done(result: bytes | None, error: Exception | None) -> None:
            refused = result is not None and not pb.CommandResult.FromString(result).ok
            if error is not None or refused:
                log.info("resolved alerts not committed (will look again): %s", error or "refused")
                self._resolving.difference_update(a.resolves_seq for a in chunk)

        return done

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
        if stamp is None:
            return
        events: list[pb.AlertRecord] = []
        if self.fleet is not None and stamp.now_ms >= self._next_health_ms:
            loop = asyncio.get_running_loop()
            began = loop.time()
            events.extend(self.health.check(self.fleet(stamp.now_ms)))
            # It reads every waiting attempt on the loop: with a huge backlog, check less often,
            # so it takes at most ~1 % of the loop (5.6 ms at 10,000 waiting on the 2-core box).
            spent_ms = (loop.time() - began) * 1000
            self._next_health_ms = stamp.now_ms + max(HEALTH_CHECK_MS, round(spent_ms * 100))
        if self.monitor.due(stamp.now_ms):
            events.extend(detect_zombies(self.monitor, self.node.state, stamp.now_ms))
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
            # peek: a spec not decoded yet stays bytes (decoding a million specs here held the
            # state lock for ~20 s on a new leader; TaskState.peek)
            spec = st.peek()
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
                    run = pb.Run.FromString(raw)
                    if not run.backfill_id:  # a backfill's runs are late by design (as for workflows)
                        runs.append(run)
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
    target: ``delivered`` (the target's cursor covers it and it was sent), ``suppressed`` (a
    failure streak's event sent only as a later count), ``filtered`` (the target does not take
    it) or ``pending``."""
    book = StreakBook(config.streak_interval_ms)
    with store.reader() as r:
        notices = [book.observe(a) for a in outbox.list_alerts(r, 0, 0)]
        done = outbox.cursors(r)
    notices = [n for n in notices if n.alert.at_ms >= since_ms]
    if limit:
        notices = notices[-limit:]
    out = []
    for notice in notices:
        alert = notice.alert
        info = rpcpb.AlertInfo(alert=alert, link=link(config, alert))
        severity = config.severity(alert.kind, alert.severity)
        for target in config.targets:
            if not target.takes(alert.kind, alert.owner, alert.namespace, severity):
                state = "filtered"
            elif not notice.send:
                state = "suppressed"
            else:
                state = "delivered" if done.get(target.name, 0) >= alert.seq else "pending"
            info.deliveries.add(target=target.name, state=state)
        out.append(info)
    return out


def describe(config: AlertsConfig) -> str:
    """One line for the node's start log: what alerts do here."""
    if not config.targets:
        return "alerts: no targets (events are kept; `raftsched alerts` lists them)"
    names = ", ".join(t.name for t in config.targets)
    after = format_duration(config.zombie_after_ms)
    return f"alerts: {len(config.targets)} target(s) ({names}), zombie after {after}"


def _alert_fields(alert: pb.AlertRecord) -> dict[str, object]:
    """The attempt fields of an alert about one (none for, e.g., a schedule-delay alert)."""
    if alert.execution_id:
        return attempt_fields(alert.execution_id, alert.run_id, alert.task)
    return {"run_id": alert.run_id or None, "task": alert.task or None}


@dataclass(slots=True)
class _Lane:
    """One target's routing in this leadership: its book (fed every retained event in order),
    the routed events after its cursor not yet done, and the cursor this leader proposed."""

    book: StreakBook
    sent: int
    queue: collections.deque[Notice] = field(default_factory=collections.deque)
