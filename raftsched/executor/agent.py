"""The executor agent: registers with the cluster, holds the dispatch stream, runs attempts.

``raftsched.Executor`` (embedded, with ``@executor.handler("name")`` Python callables) and
``raftsched-executor`` (standalone) are this class. Contract:

* at most ``slots`` attempts run at once (the leader never assigns more than it registered);
  with ``prefetch`` P it registers ``slots + P`` and the attempts assigned while every slot runs
  wait, unstarted, in arrival order (:mod:`raftsched.executor.rungate`);
* a dispatch from an epoch older than the newest seen is refused (a deposed leader);
* nothing starts before its nominal time by the executor's own clock either (a leader whose
  clock runs ahead cannot make work start early; it waits until its nominal time);
* an ``execution_id`` already running or done is never run again (the execution log, which
  survives restarts); a done one has its stored result reported again. The log forgets an id
  ``execution_log_keep`` after the cluster acknowledged its result (default 10 minutes; None
  keeps everything): by then no leader can send it again (see
  :data:`raftsched.executor.retention.DEFAULT_EXECUTION_LOG_KEEP`);
* results are reported until the cluster acknowledges them (committed), across leader changes;
* heartbeats renew the leases of running attempts and say which have started (one is sent at
  once when an attempt starts), so the leader can tell an attempt it may re-place without
  consuming a retry from one that ran; losing the leader (stream error) makes the agent find
  the new one and register again — dispatching resumes as soon as it has. A leader that goes
  silent (a paused process closes nothing and answers nothing) is not waited out: while a
  heartbeat to it stays unanswered past half a heartbeat interval (at most 0.5 s), the agent
  asks the other nodes, with the same heartbeat, who leads, and moves to a new leader as soon as
  one is named (a new leader re-sends at once the attempts it inherited that never reached us);
* an attempt received on a dispatch stream that broke before it started waits: it starts only
  if the leader sends it again on the new stream (it does for every attempt still assigned
  here), else it ends unstarted ("not started") after two leases, a result the cluster refuses
  as stale because the attempt was re-placed;
* draining (``run(drain=...)`` set, or :meth:`Executor.request_drain`; ``raftsched-executor``
  on SIGTERM): the agent asks the leader to place nothing new on it (replicated), lets the
  attempts it runs finish and their results be acknowledged, then leaves the membership and
  ``run`` returns (prefetched attempts still waiting for a slot do not start: they go back
  unstarted with the Leave). Attempts still running after ``drain_grace_s`` are killed and left to the
  leader's rules for a leaving executor (lost, retried by policy).

* health (issue 36 §3): before each heartbeat it reads the fraction in use of its data
  directory's filesystem and of its execution log's map (``health_probe`` replaces the reading,
  e.g. in a simulation). At or over ``full_at`` (default 0.9) it drains itself (replicated, the
  reason shown by ``raftsched executors``, an ``executor_unhealthy`` alert naming it): nothing new
  is placed on it, what runs finishes and is reported. Below ``resume_at`` (default 0.8) again it
  undoes that drain and takes work again. The fractions and its clock offset go with every
  heartbeat, for the leader's view and metrics.

Its IO goes through two seams: an :class:`raftsched.abc.ExecutorTransport` (gRPC by default) and
an :class:`raftsched.abc.ExecutionLog` (LMDB in ``data_dir`` by default). With the in-memory
ones the same agent runs inside a simulation (:mod:`raftsched.testing`) or a unit test.

This module is the protocol (registration, the streams, heartbeats, reports, the leader watch,
draining and leaving); what it holds, each attempt from its arrival to its result in the
execution log, is an :class:`raftsched.executor.attempts.Attempts` (``Executor.attempts``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from raftsched.abc import (
    Clock,
    DispatchStream,
    ExecutionLog,
    ExecutorTransport,
    LogUploader,
    SessionTransport,
    TransportError,
)
from raftsched.config.values import DEFAULT_MAP_SIZE, parse_address, parse_map_size
from raftsched.errors import InvalidSpec, TlsError
from raftsched.executor.aio import wait_event
from raftsched.executor.attempts import Attempts
from raftsched.executor.batched import exec_result
from raftsched.executor.commands import SubprocessRunner
from raftsched.executor.dedupe import DedupeLog
from raftsched.executor.handlers import CallableRunner
from raftsched.executor.health import DEFAULT_FULL_AT, DEFAULT_RESUME_AT, DiskHealth
from raftsched.executor.leaders import WATCH_POLL_S, Asker, call_leader, find_leader, who_leads
from raftsched.executor.logfiles import LogFiles, LogSettings, answer_log_request, prune_log_files
from raftsched.executor.retention import DEFAULT_EXECUTION_LOG_KEEP, LogPruner, keep_ms
from raftsched.executor.runners import CommandRunner
from raftsched.executor.secrets import SecretStore
from raftsched.executor.session import SESSION_VERSION
from raftsched.logfields import attempt_fields, leadership_fields
from raftsched.model import validate_name
from raftsched.observability.executor_http import ExecutorObservability
from raftsched.observability.executor_metrics import ExecutorSample
from raftsched.rpc.executor_client import TLS_CODE, GrpcExecutorTransport
from raftsched.security.tls import TlsConfig
from raftsched.sharding.placement import validate_capacity
from raftsched.timing.clock import SystemClock
from raftsched.v1 import raftsched_pb2 as pb

log = logging.getLogger(__name__)

H = TypeVar("H", bound=Callable[..., Any])


_TLS_WARN_INTERVAL_S = 10.0
_EARLY_HEARTBEAT_GAP_S = 0.05  # at most ~20 heartbeats a second, however many attempts start
_WATCH_SUSPECT_CAP_S = 0.5  # a heartbeat unanswered this long (at most) makes it ask the others


class LeaderLost(Exception):
    """The stream or an RPC says this target no longer leads; find the leader again."""


class Executor:
    """One executor; see the module docstring for its contract.

    ``transport`` defaults to gRPC (over TLS with ``tls``; give one or the other);
    ``execution_log`` to an LMDB log in ``data_dir``, which
    :meth:`run` opens (creating the directory), fsyncs every second and closes when it returns.
    A log passed in is the caller's to open, flush and close: ``run`` only reads and writes it
    (so a simulated restart can hand the same log to a new agent). ``map_size`` bounds that
    LMDB log (bytes, or a size string such as ``"512MiB"``; 256 KiB to 1 PiB). ``command_runner`` runs
    tasks' shell commands (default: a :class:`SubprocessRunner` with ``grace_s``); handlers
    registered with :meth:`handler` run Python callables. ``http`` (``host:port``) serves
    ``/metrics``, ``/healthz`` and ``/readyz`` while :meth:`run` runs (off when None); a port in
    use makes :meth:`run` raise :class:`raftsched.observability.listener.ListenError` before it
    connects anywhere.
    ``token`` is the executor token of a
    cluster with auth on (else ``RAFTSCHED_TOKEN``, if set), sent with every call of the default
    transport; the executor's name is bound to it on its first registration.
    ``drain_grace_s`` bounds a drain's wait for running attempts (see the module docstring).
    ``grace_s`` (``raftsched-executor --kill-grace``): a timed-out or cancelled attempt's command
    gets SIGTERM, then SIGKILL after this long; a cancelled handler has this long to return.
    ``execution_log_keep`` (a duration such as ``"10m"``, or seconds; 1 s to 1 year; None keeps
    every entry) is how long an execution id stays in the log after the cluster acknowledged its
    result: a worker thread drops older entries (:class:`~raftsched.executor.retention.LogPruner`),
    so the log (and its LMDB file, whose freed pages are reused) stays flat under a steady load.
    Why the default is safe: :data:`~raftsched.executor.retention.DEFAULT_EXECUTION_LOG_KEEP`.
    ``secrets`` (a :class:`~raftsched.executor.secrets.SecretStore`, or the path of a secrets
    file or directory for one) resolves ``{{ secret.NAME }}`` in params and env just before an
    attempt starts; every value it knows is masked as ``***`` in what the agent reports and logs.
    A bad path raises :class:`InvalidSpec` here; a missing secret fails the attempt, naming it.
    ``logs`` bounds the full logs of commands (files in ``data_dir/logs``, see
    :mod:`raftsched.executor.logfiles`; None: the defaults). They are written by the default
    command runner only, and served to readers through the leader when the transport is a
    :class:`raftsched.abc.LogUploader` (the gRPC one is).
    """

    # What holds its attempts: a subclass may watch them (bench/noop_executor.py does).
    attempts_type: type[Attempts] = Attempts

    def __init__(
        self,
        targets: str | Sequence[str],
        name: str,
        *,
        slots: int = 4,
        data_dir: str | Path = "executor-data",
        labels: Mapping[str, str] | None = None,
        grace_s: float = 5.0,
        clock: Clock | None = None,
        transport: ExecutorTransport | None = None,
        execution_log: ExecutionLog | None = None,
        command_runner: CommandRunner | None = None,
        map_size: int | str = DEFAULT_MAP_SIZE,
        tls: TlsConfig | None = None,
        http: str | None = None,
        token: str | None = None,
        cpu: float = 0.0,
        memory_mb: int = 0,
        drain_grace_s: float = 30.0,
        execution_log_keep: str | float | None = DEFAULT_EXECUTION_LOG_KEEP,
        rebuilt: bool = False,
        secrets: SecretStore | str | Path | None = None,
        logs: LogSettings | None = None,
        full_at: float = DEFAULT_FULL_AT,
        resume_at: float = DEFAULT_RESUME_AT,
        health_probe: Callable[[], tuple[float, float]] | None = None,
        session: bool = True,
        prefetch: int = 0,
    ) -> None:
        validate_name(name, "executor.name")
        self.health_drained = False  # the leader committed its own drain (and no resume since)
        # Where {{ secret.NAME }} references are resolved (raftsched.executor.secrets).
        self.secrets = secrets if isinstance(secrets, SecretStore) else SecretStore(secrets)
        self.execution_log_keep_ms = keep_ms(execution_log_keep)
        # Its execution log was moved aside (raftsched-executor --rebuild): it leaves the
        # membership before it registers again (see _leave_before_rebuilt_start).
        self.rebuilt = rebuilt
        if not 0 <= drain_grace_s <= 86_400:
            raise InvalidSpec("executor.grace", f"{drain_grace_s!r} s out of range (0 s to 1 day)")
        self.drain_grace_s = drain_grace_s
        validate_capacity(cpu, memory_mb)
        self.cpu = float(cpu)
        self.memory_mb = memory_mb
        self.map_size = parse_map_size(map_size, "executor.map_size")
        if isinstance(slots, bool) or not isinstance(slots, int) or not 1 <= slots <= 10_000:
            raise InvalidSpec("executor.slots", f"{slots!r} out of range (1-10000)")
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or not 0 <= prefetch <= 10_000 - slots:
            most = 10_000 - slots
            raise InvalidSpec(
                "executor.prefetch", f"{prefetch!r} out of range (0-{most}: slots + prefetch <= 10000)"
            )
        raw = targets.split(",") if isinstance(targets, str) else list(targets)
        self.targets = [t.strip() for t in raw if t.strip()]
        if not self.targets:
            raise InvalidSpec("targets", "at least one host:port is required")
        for t in self.targets:
            parse_address(t, "targets")
        self.name = name
        self.slots = slots
        # Attempts the cluster may assign beyond the slots; they wait here for a run slot.
        self.prefetch = prefetch
        self.labels = dict(labels or {})
        self.data_dir = Path(data_dir)
        # How full its disk and execution log are (raftsched.executor.health); ``health_probe``
        # replaces the reading.
        self.health = DiskHealth(
            name, self.data_dir, self.map_size, full_at=full_at, resume_at=resume_at, probe=health_probe
        )
        self.callables = CallableRunner(grace_s=grace_s)
        self.log_files = LogFiles(self.data_dir / "logs", logs)
        self.subprocess: CommandRunner = command_runner or SubprocessRunner(
            grace_s=grace_s, env={"RAFTSCHED_EXECUTOR": name}, log_files=self.log_files
        )
        if transport is not None and tls is not None:
            raise InvalidSpec("tls", "give tls or a transport, not both (the transport owns its channels)")
        if transport is not None and token is not None:
            raise InvalidSpec("token", "give token or a transport, not both (the transport sends it)")
        # ``token``: an executor token for a cluster with auth on (else RAFTSCHED_TOKEN, if set).
        self.transport: ExecutorTransport = transport or GrpcExecutorTransport(tls, token=token)
        self._registered_once = False
        self._tls_warned = -_TLS_WARN_INTERVAL_S
        self._store = execution_log
        # Our clock minus the leader's, from the leader's time on each register and heartbeat
        # reply with the round trip halved (None until the first reply).
        self.clock_offset_ms: int | None = None
        self._heartbeat_s = 2.0
        self._rpc_timeout_s = 3.0
        self._hb_sent_at: float | None = None  # loop time of the heartbeat in flight (None: answered)
        self._next_target: str | None = None  # the leader the watch found: register there next
        self._partial_ok = False  # the leader we registered with takes partial heartbeats
        self._registered = False  # the current leader accepted our registration
        self._leader = self.targets[0]  # where we registered last (drain and leave go there first)
        self._drain: asyncio.Event | None = None  # set: drain, then leave and return from run()
        self.draining = False  # a drain has begun
        self.left = False  # the drain ended with a committed Leave
        self._log_senders: set[asyncio.Task[None]] = set()  # answers to log requests under way
        # What it holds, each attempt from its arrival to its result (raftsched.executor.attempts).
        # Its clock and observability are the attempts' (the properties below): one of each.
        self.attempts = self.attempts_type(
            name,
            slots=slots,
            prefetch=prefetch,
            clock=clock or SystemClock(),
            secrets=self.secrets,
            callables=self.callables,
            subprocess=self.subprocess,
            observability=ExecutorObservability(name, http, self._observed) if http is not None else None,
            on_log_request=self._answer_log_request,
        )
        # The Session stream (issue 31 P2): used with a leader that serves it (RegisterReply.
        # session_version) unless ``session`` is False (raftsched-executor --no-session).
        self.session = session
        self._session_version = 0  # what the leader we registered with serves (0: none)
        self.sessions_opened = 0

    def _observed(self) -> ExecutorSample:
        # Read at scrape time, on this agent's event loop.
        waiting = self.attempts.gate.waiting if self.attempts.gate is not None else 0
        running = len(self.attempts.running) - waiting
        if self.attempts.dedupe is None:
            return ExecutorSample(
                self.attempts.connected,
                self._registered,
                self.slots,
                running,
                0,
                self.clock_offset_ms,
                prefetched=waiting,
            )
        pending = self.attempts.dedupe.pending_count()
        entries, size = self.attempts.dedupe.sizes()  # one short read transaction
        return ExecutorSample(
            self.attempts.connected,
            self._registered,
            self.slots,
            running,
            pending,
            self.clock_offset_ms,
            log_entries=entries,
            log_bytes=size,
            disk_used=self.disk_used,
            log_used=self.log_used,
            unhealthy=self.health_drained,
            prefetched=waiting,
        )

    def _clock_sample(self, leader_now_ms: int, sent_mono: float) -> None:
        """The leader's clock read ``leader_now_ms`` while our call was under way: taken to be
        half-way through the round trip (a leader of an older build sends 0: no sample)."""
        if leader_now_ms <= 0:
            return
        now_mono = self.clock.monotonic()
        at_wall = self.clock.now_ms() - round((now_mono - sent_mono) * 500)  # our clock half-way
        self.clock_offset_ms = at_wall - leader_now_ms

    @property
    def clock(self) -> Clock:
        """This executor's clock: the one its attempts read too (assignable, as a test does)."""
        return self.attempts.clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self.attempts.clock = clock

    @property
    def observability(self) -> ExecutorObservability | None:
        """Its ``/metrics`` and probes (None without ``http``): the one its attempts report to."""
        return self.attempts.observability

    @observability.setter
    def observability(self, observability: ExecutorObservability | None) -> None:
        self.attempts.observability = observability

    @property
    def started(self) -> int:
        """Attempts started here since the agent was made."""
        return self.attempts.started

    @property
    def refused_stale(self) -> int:
        """Work refused as sent by a deposed leader (an epoch older than the newest seen)."""
        return self.attempts.refused_stale

    @property
    def eager_rows(self) -> int:
        """Session rows started eagerly, in the batch that delivered them."""
        return self.attempts.eager_rows

    @property
    def suspended_rows(self) -> int:
        """Of the eager rows, those that suspended and went on in a Task."""
        return self.attempts.suspended_rows

    def _count_log_writes(self, op: str) -> Callable[[int], None]:
        """A callback counting execution-log writes of ``op`` in the metrics (if any, then)."""

        def count(records: int) -> None:
            if self.observability is not None:
                self.observability.on_log_write(op, records)

        return count

    def handler(self, name: str, *, eager: bool = False) -> Callable[[H], H]:
        """Register a Python callable run for tasks whose ``handler`` is ``name``. ``eager``: an
        async handler started at once in the batch that delivered it, over a Session stream
        (see :meth:`CallableRunner.register` for what it must not do before its first await)."""
        return self.callables.handler(name, eager=eager)

    # -- lifecycle ---------------------------------------------------------------------------------

    def run_forever(self) -> None:
        asyncio.run(self.run())

    def request_drain(self) -> None:
        """Begin draining (see the module docstring); call on the agent's event loop while
        :meth:`run` runs. Idempotent."""
        if self._drain is not None:
            self._drain.set()

    async def run(self, stop: asyncio.Event | None = None, *, drain: asyncio.Event | None = None) -> None:
        """Serve until ``stop`` is set (or forever): connect, take work, report, reconnect.

        When ``drain`` is set (or :meth:`request_drain` is called), drain and leave the cluster,
        then return (see the module docstring); ``stop`` still stops at once."""
        obs = self.observability
        if obs is not None:
            obs.bind()  # a taken port fails here, before anything is opened or dialled
        own_log = self._store is None
        if self._store is None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            # No fsync per begin/finish on the event loop (two per attempt capped an executor near
            # 1,500 attempts/s, measured by bench/executors.py): LMDB commits survive a killed
            # process without it; a flusher fsyncs every second against power loss.
            dedupe = DedupeLog.open(self.data_dir, sync=False, map_size=self.map_size, batched=True)
        else:
            dedupe = DedupeLog(self._store, batched=True)
        for result in dedupe.recover():
            log.warning(
                "%s: %s was interrupted by a restart; reporting it failed",
                self.name,
                result.execution_id,
                extra=attempt_fields(result.execution_id, executor=self.name),
            )
        self.attempts.open(dedupe)
        stop = stop or asyncio.Event()
        self._drain = drain or asyncio.Event()
        flusher = asyncio.ensure_future(self._flush_loop()) if own_log else None
        pruner = None
        if self.execution_log_keep_ms is not None:
            pruner = LogPruner(
                dedupe,
                self.execution_log_keep_ms,
                lambda: self.clock.now_ms(),
                lambda: self.clock.monotonic(),
                name=self.name,
                in_thread=own_log,
                on_removed=self._count_log_writes("prune"),
            )
        pruning = asyncio.ensure_future(pruner.run()) if pruner is not None else None
        drainer = asyncio.ensure_future(self._drain_when_asked(stop))
        masked_handlers = self.attempts.masking.install()  # secret values never reach a log line
        log_pruner = asyncio.ensure_future(
            prune_log_files(
                self.log_files, lambda: self.clock.now_ms(), lambda: list(self.attempts.running), self.name
            )
        )
        try:
            if obs is not None:
                await obs.start()
            if self.rebuilt:
                await self._leave_before_rebuilt_start(stop)
            target_index = 0
            while not stop.is_set():
                target = self._next_target or self.targets[target_index % len(self.targets)]
                self._next_target = None
                try:
                    target = await self._register(target)
                    await self._serve(target, stop)
                except (LeaderLost, TransportError) as exc:
                    self._registered = False
                    if isinstance(exc, TransportError) and exc.code == TLS_CODE:
                        if not self._registered_once:
                            # A configuration mistake, not an outage: say so and stop.
                            raise TlsError(exc.details) from None
                        # Once registered, a certificate rotation may be under way: keep trying,
                        # and say so every few seconds rather than on every attempt.
                        now = self.clock.monotonic()
                        if now - self._tls_warned >= _TLS_WARN_INTERVAL_S:
                            self._tls_warned = now
                            log.warning("%s: %s", self.name, exc.details)
                    else:
                        log.info("%s: lost %s (%s); finding the leader", self.name, target, exc)
                    target_index += 1
                    if self._next_target is None:
                        self._next_target = await self._find_leader(stop, target)
                    await _sleep_or_stop(stop, 0.2 if self._next_target is None else 0.02)
        finally:
            if flusher is not None:
                flusher.cancel()
            if pruner is not None and pruning is not None:
                pruning.cancel()
                await pruner.settled()  # a step in its thread runs to its end before the log closes
            drainer.cancel()
            log_pruner.cancel()
            for sender in list(self._log_senders):
                sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await drainer
            await asyncio.gather(log_pruner, *self._log_senders, return_exceptions=True)
            running = list(self.attempts.running.values())
            for task in running:
                task.cancel()
            if self.draining:
                # Killed at the end of the grace: let their cancellation (SIGKILL of the process
                # group) finish before the Leave makes the leader declare them lost.
                await asyncio.gather(*running, return_exceptions=True)
                await self._leave_cluster()
            await self.transport.close()
            if isinstance(self.subprocess, SubprocessRunner):
                await asyncio.to_thread(self.subprocess.close)  # its commands ended: the reaper exits
            if obs is not None:
                await obs.stop()
            if own_log:
                dedupe.close()
            self.attempts.masking.remove(masked_handlers)

    async def _register(self, target: str) -> str:
        """Register with the leader, following redirects; returns the leader's address."""
        for _ in range(len(self.targets) + 3):
            sent = self.clock.monotonic()
            try:
                reply = await self.transport.register(
                    target,
                    pb.RegisterRequest(
                        name=self.name,
                        slots=self.slots + self.prefetch,
                        labels=self.labels,
                        cpu=self.cpu,
                        memory_mb=self.memory_mb,
                    ),
                    timeout_s=max(1.0, self._rpc_timeout_s),  # a paused old leader must not hold us
                )
            except TransportError as exc:
                hint = exc.leader
                if hint:
                    if hint not in self.targets:
                        self.targets.append(hint)
                    target = hint
                    continue
                if exc.code == InvalidSpec.code:
                    raise InvalidSpec("executor", exc.details or "refused") from None
                raise
            self.attempts.max_epoch = max(self.attempts.max_epoch, reply.epoch)
            self._clock_sample(reply.leader_now_ms, sent)
            self.health_drained = reply.health_drained  # its own drain survives a restart
            self._partial_ok = reply.partial_heartbeats  # an older leader leaves it false
            self._session_version = reply.session_version  # an older leader leaves it 0
            self._heartbeat_s = max(0.1, reply.heartbeat_ms / 1000)
            self.attempts.lease_s = max(0.1, reply.lease_ms / 1000)
            # A leader that does not answer within a third of the lease is treated as gone: we
            # must find its successor and heartbeat there before the successor's lease on our
            # attempts runs out (a fixed 5 s timeout outlived a 2 s lease: healthy executors were
            # declared dead while the old leader was paused - found by the chaos suite).
            self._rpc_timeout_s = max(0.2, reply.lease_ms / 3000)
            self._registered_once = True
            self._registered = True
            log.info(
                "%s: registered with %s (epoch %d, %d slots%s)",
                self.name,
                target,
                reply.epoch,
                self.slots,
                f" + {self.prefetch} prefetched" if self.prefetch else "",
                extra=leadership_fields(reply.epoch, executor=self.name, leader=target),
            )
            self._leader = target
            return target
        raise LeaderLost(f"no leader found among {self.targets}")

    async def _serve(self, target: str, stop: asyncio.Event) -> None:
        transport = self.transport
        if (
            self.session
            and self._session_version >= 1
            and isinstance(transport, SessionTransport)
            and await self._serve_session(transport, target, stop)
        ):
            return
        logs = isinstance(self.transport, LogUploader)
        stream = self.transport.dispatch(target, pb.DispatchRequest(name=self.name, log_channel=logs))
        self.attempts.stream_opened()
        tasks = [
            asyncio.ensure_future(self._consume(stream)),
            asyncio.ensure_future(self._heartbeats(target)),
            asyncio.ensure_future(self._reports(target)),
            asyncio.ensure_future(self._watch(target)),
            asyncio.ensure_future(self._health(target)),
            asyncio.ensure_future(stop.wait()),
        ]
        try:
            await _until_one_ends(tasks, stop, "dispatch stream ended")
        finally:
            self.attempts.connected = False
            stream.cancel()
            for task in tasks:
                task.cancel()
            # Collect every outcome: a loop whose RPC had already failed ends with that RpcError
            # even when cancelled (one disconnect fails several loops at once), and an outcome
            # nobody retrieves is logged by asyncio as an ERROR.
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- the Session stream (issue 31 P2) ------------------------------------------------------------

    async def _serve_session(self, transport: SessionTransport, target: str, stop: asyncio.Event) -> bool:
        """Serve ``target`` over one Session stream; False (at once) if it has none (an older
        build answers UNIMPLEMENTED): the caller serves it as before. Raises as :meth:`_serve`."""
        stream = transport.session(target)
        logs = isinstance(transport, LogUploader)
        try:
            await stream.send(
                pb.SessionUp(
                    open=pb.SessionOpen(name=self.name, session_version=SESSION_VERSION, log_channel=logs)
                )
            )
            downs = aiter(stream)
            first = await asyncio.wait_for(anext(downs, None), timeout=max(1.0, self._rpc_timeout_s * 3))
        except TransportError as exc:
            stream.cancel()
            if exc.code == "unimplemented":
                log.info(
                    "%s: %s has no Session stream; using DispatchBatch, Report and Heartbeat",
                    self.name,
                    target,
                )
                return False
            raise
        except TimeoutError:
            stream.cancel()
            raise LeaderLost("no answer to the session's open") from None
        if first is None or first.WhichOneof("body") != "accept":
            stream.cancel()
            raise LeaderLost("session ended before it was accepted")
        self.attempts.max_epoch = max(self.attempts.max_epoch, first.accept.epoch)
        self.sessions_opened += 1
        self.attempts.stream_opened()
        link = self.attempts.session_link(stream, self._count_log_writes("acknowledge"))
        self.attempts.session_opened()
        log.info(
            "%s: session %d open with %s (version %d)",
            self.name,
            self.sessions_opened,
            target,
            first.accept.session_version,
        )
        tasks = [
            asyncio.ensure_future(link.read(downs)),
            asyncio.ensure_future(self._heartbeats(target, link.heartbeat)),
            asyncio.ensure_future(link.report()),
            asyncio.ensure_future(self._watch(target)),
            asyncio.ensure_future(self._health(target)),
            asyncio.ensure_future(stop.wait()),
        ]
        try:
            await _until_one_ends(tasks, stop, "session ended")
        finally:
            self.attempts.connected = False
            link.close()
            stream.cancel()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return True

    # -- draining ------------------------------------------------------------------------------------

    async def _drain_when_asked(self, stop: asyncio.Event) -> None:
        """Wait for the drain request; drain; then end :meth:`run` (which leaves)."""
        assert self._drain is not None and self.attempts.dedupe is not None
        await self._drain.wait()
        self.draining = True
        waiting = 0
        if self.attempts.gate is not None:
            # Prefetched attempts still waiting for a slot never start here: they go back to the
            # cluster unstarted with the Leave (placed again elsewhere without a try).
            self.attempts.gate.close()
            waiting = self.attempts.gate.waiting
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.drain_grace_s
        log.info(
            "%s: draining: no new attempts; %d running, %.0f s grace%s",
            self.name,
            self.attempts.busy(),
            self.drain_grace_s,
            f"; {waiting} waiting for a slot go back unstarted" if waiting else "",
        )
        request = pb.DrainRequest(name=self.name, reason="executor shutting down")
        if not await self._to_leader(lambda t, s: self.transport.drain(t, request, timeout_s=s), deadline):
            log.warning("%s: no leader confirmed the drain; waiting for running attempts anyway", self.name)
        # Running attempts finish, and their results are acknowledged, within the grace.
        while (self.attempts.busy() or self.attempts.dedupe.pending_count()) and loop.time() < deadline:
            await asyncio.sleep(0.05)
        if self.attempts.busy():
            log.warning(
                "%s: grace of %.0f s over with %d attempt(s) still running: killing them; the leader "
                "declares them lost when this executor leaves",
                self.name,
                self.drain_grace_s,
                self.attempts.busy(),
            )
        stop.set()

    async def _leave_cluster(self) -> None:
        """Leave the membership (a few seconds at most: the leader otherwise declares us dead)."""
        deadline = asyncio.get_running_loop().time() + 5.0
        request = pb.LeaveRequest(name=self.name)
        self.left = await self._to_leader(
            lambda t, s: self.transport.leave(t, request, timeout_s=s), deadline
        )
        if self.left:
            log.info("%s: drained and left the cluster", self.name)
        else:
            log.warning("%s: could not leave (no leader answered); it will be declared dead", self.name)

    async def _leave_before_rebuilt_start(self, stop: asyncio.Event) -> None:
        """A fresh execution log knows nothing of what this executor ran before. The leader only
        ever sends an executor attempts the replicated state holds RUNNING on it (never one whose
        result it has, nor a superseded one), but one of those may have started or finished
        here before the log was lost: a fresh log would run it again. So first leave: the leader
        declares those attempts lost (its retry policy decides, under new execution ids, as for
        any dead executor), and only then register anew. Retries until a leader commits it."""
        request = pb.LeaveRequest(name=self.name)
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            left = await self._to_leader(
                lambda t, s: self.transport.leave(t, request, timeout_s=s), loop.time() + 5.0
            )
            if left:
                log.info(
                    "%s: rebuilt execution log: left the cluster (its attempts there are declared "
                    "lost) before registering again",
                    self.name,
                )
                return
            log.warning("%s: rebuilt execution log: no leader answered the leave yet; retrying", self.name)
            await _sleep_or_stop(stop, 1.0)

    async def _to_leader(self, call: Callable[[str, float], Awaitable[object]], deadline: float) -> bool:
        """:func:`~raftsched.executor.leaders.call_leader` from where we registered last."""
        return await call_leader(call, self._leader, self.targets, lambda: self._rpc_timeout_s, deadline)

    # -- work ----------------------------------------------------------------------------------------

    def _answer_log_request(self, request: pb.LogRequest) -> None:
        """A reader wants an attempt's log: send it through the leader, off the reader's loop."""
        sender = asyncio.ensure_future(
            answer_log_request(
                self.transport, self._leader, self.name, self.log_files, request, self.attempts.running
            )
        )
        self._log_senders.add(sender)
        sender.add_done_callback(self._log_senders.discard)

    async def _consume(self, stream: DispatchStream) -> None:
        async for batch in stream:
            for item in batch:
                self.attempts.accept(item)

    async def _flush_loop(self) -> None:
        assert self.attempts.dedupe is not None
        while True:
            await asyncio.sleep(1.0)
            await asyncio.to_thread(self.attempts.dedupe.flush)

    def _heartbeat_request(self, partial: bool = False) -> pb.HeartbeatRequest:
        """:meth:`Attempts.heartbeat_request` with this agent's health and clock offset."""
        return self.attempts.heartbeat_request(
            partial, disk_used=self.disk_used, log_used=self.log_used, clock_offset_ms=self.clock_offset_ms
        )

    # -- health (disk and execution log) --------------------------------------------------------

    def check_health(self) -> str:
        """Read the disk and execution-log fractions and decide, with hysteresis, whether this
        executor is unhealthy (:meth:`raftsched.executor.health.DiskHealth.check`). Returns the
        reason ("" while healthy)."""
        return self.health.check(self.attempts.dedupe)

    @property
    def health_reason(self) -> str:
        """Why it is unhealthy ("" while healthy)."""
        return self.health.reason

    @property
    def disk_used(self) -> float:
        """The fraction of the data directory's filesystem in use, as last read."""
        return self.health.disk_used

    @property
    def log_used(self) -> float:
        """The fraction of the execution log's map in use, as last read."""
        return self.health.log_used

    async def _health(self, target: str) -> None:
        """Make the leader's view follow :meth:`check_health`: drain this executor while it is
        unhealthy, undo that drain once it recovers (replicated; retried every heartbeat)."""
        while True:
            if not self.draining:  # a shutdown's drain is final: nothing to undo
                try:
                    reason = self.check_health()
                except Exception:  # an unreadable log size: keep the last verdict
                    log.exception("%s: reading the disk and execution log use failed", self.name)
                    reason = self.health_reason
                if reason and not self.health_drained:
                    request = pb.DrainRequest(name=self.name, reason=reason[:500], health=True)
                    self.health_drained = await self._health_call(target, request)
                elif not reason and self.health_drained:
                    request = pb.DrainRequest(name=self.name, reason="recovered", resume=True)
                    self.health_drained = not await self._health_call(target, request)
            await asyncio.sleep(self._heartbeat_s)

    async def _health_call(self, target: str, request: pb.DrainRequest) -> bool:
        try:
            await self.transport.drain(target, request, timeout_s=self._rpc_timeout_s * 3)
        except TransportError as exc:
            log.info("%s: health drain/resume not confirmed (retrying): %s", self.name, exc)
            return False
        return True

    async def _heartbeats(
        self, target: str, call: Callable[..., Awaitable[pb.HeartbeatReply]] | None = None
    ) -> None:
        """Heartbeat ``target`` (with ``call``: over the open session) until it fails."""
        send = call or self.transport.heartbeat
        loop = asyncio.get_running_loop()
        full_at: float | None = None  # loop time of the last full heartbeat to ``target``
        woken = False
        while True:
            sent = self.clock.monotonic()
            self._hb_sent_at = now = loop.time()
            # Full every heartbeat interval (and first); an early one, woken by starts, partial
            # where the leader takes it.
            partial = woken and self._partial_ok and full_at is not None and now - full_at < self._heartbeat_s
            if not partial:
                full_at = now
                self.attempts.started_since = []  # the full one lists them
            try:
                reply = await send(target, self._heartbeat_request(partial), timeout_s=self._rpc_timeout_s)
            finally:
                self._hb_sent_at = None
            if not reply.registered:
                raise LeaderLost("the leader does not know this executor")
            self._clock_sample(reply.leader_now_ms, sent)
            if reply.epoch > self.attempts.max_epoch:
                self.attempts.max_epoch = reply.epoch
            # Every heartbeat_s, or soon after an attempt starts (starts in a burst share one).
            gap = min(_EARLY_HEARTBEAT_GAP_S, self._heartbeat_s / 4)
            await asyncio.sleep(gap)
            wake = self.attempts.hb_wake
            assert wake is not None
            await wait_event(wake, self._heartbeat_s - gap)
            woken = wake.is_set()
            wake.clear()

    async def _watch(self, target: str) -> None:
        """Leave ``target`` as soon as another node is known to lead while it is silent.

        While a heartbeat to ``target`` stays unanswered past half a heartbeat interval (at most
        ``_WATCH_SUSPECT_CAP_S``), the same heartbeat goes to every other node: one that accepts
        it leads; one that refuses it names the leader it knows. A leader other than ``target``
        ends serving it (:class:`LeaderLost`) and :meth:`run` registers there next. A node that
        names ``target``, or no leader (an election under way), changes nothing: a slow leader
        is kept, and the heartbeat's own timeout stays the backstop."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(WATCH_POLL_S)
            sent = self._hb_sent_at
            suspect = max(WATCH_POLL_S, min(self._heartbeat_s / 2, _WATCH_SUSPECT_CAP_S))
            others = [t for t in self.targets if t != target]
            if sent is None or loop.time() - sent < suspect or not others:
                continue
            found = await self._who_leads(others, suspect, silent=target)
            if found is not None and self._hb_sent_at is not None:
                self._next_target = found
                raise LeaderLost(f"{target} silent for {loop.time() - sent:.1f} s; {found} leads")

    def _asker(self) -> Asker:
        return Asker(self.transport, self.name, self._heartbeat_request, lambda: self.attempts.max_epoch)

    async def _find_leader(self, stop: asyncio.Event, lost: str) -> str | None:
        """After losing ``lost``: who leads now (:func:`raftsched.executor.leaders.find_leader`)."""
        return await find_leader(self._asker(), self.targets, self._rpc_timeout_s, stop, lost)

    async def _who_leads(
        self, nodes: list[str], timeout_s: float, silent: str = "", for_s: float = 0.0
    ) -> str | None:
        """Ask ``nodes`` who leads (:func:`raftsched.executor.leaders.who_leads`)."""
        return await who_leads(self._asker(), nodes, timeout_s, silent=silent, for_s=for_s)

    async def _reports(self, target: str) -> None:
        """Report finished results with the unary Report RPC (a leader without sessions, or
        ``--no-session``): one call at a time, its results acknowledged by its reply. Not
        pipelined as the session's reports are: that path is the fallback, not the fast one."""
        dedupe, wake, start_late = self.attempts.dedupe, self.attempts.report_wake, self.attempts.start_late
        assert dedupe is not None and wake is not None
        acknowledged = self._count_log_writes("acknowledge")
        while True:
            pending = dedupe.pending_reports(500)
            if pending:
                reply = await self.transport.report(
                    target,
                    pb.ReportRequest(
                        name=self.name,
                        results=[exec_result(r, start_late.get(r.execution_id)) for r in pending],
                    ),
                    timeout_s=15,
                )
                dedupe.acknowledge(reply.acknowledged, self.clock.now_ms())
                for execution_id in reply.acknowledged:
                    start_late.pop(execution_id, None)
                acknowledged(len(reply.acknowledged))
                continue
            wake.clear()
            await wait_event(wake, 1.0)


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    await wait_event(stop, seconds)


async def _until_one_ends(tasks: Sequence[asyncio.Future[Any]], stop: asyncio.Event, what: str) -> None:
    """Wait until one of a connection's ``tasks`` ends: re-raise what it raised, or
    :class:`LeaderLost` (``what``) unless ``stop`` was set (the caller cancels the others)."""
    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in done:
        if task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    if not stop.is_set():
        raise LeaderLost(what)
