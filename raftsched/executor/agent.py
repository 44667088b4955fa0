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
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
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
from raftsched.executor.batched import BatchRunner, exec_result
from raftsched.executor.dedupe import BeginOutcome, BeginStatus, DedupeLog
from raftsched.executor.health import DEFAULT_FULL_AT, DEFAULT_RESUME_AT, DiskHealth
from raftsched.executor.leaders import WATCH_POLL_S, Asker, call_leader, find_leader, who_leads
from raftsched.executor.logfiles import LogFiles, LogSettings, answer_log_request, prune_log_files
from raftsched.executor.retention import DEFAULT_EXECUTION_LOG_KEEP, LogPruner, keep_ms
from raftsched.executor.rungate import RunGate
from raftsched.executor.runners import (
    AttemptResult,
    CallableRunner,
    Cancellation,
    CommandRunner,
    ParamsCache,
    SubprocessRunner,
    attempt_context,
    describe,
    python_command,
)
from raftsched.executor.secrets import Masker, MaskingFilter, MissingSecret, SecretStore, resolve_attempt
from raftsched.executor.session import SESSION_VERSION, SessionLink
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
_RESEND_POLL_S = 0.05  # how often an attempt whose stream broke checks whether it was re-sent
_WATCH_SUSPECT_CAP_S = 0.5  # a heartbeat unanswered this long (at most) makes it ask the others


class LeaderLost(Exception):
    """The stream or an RPC says this target no longer leads; find the leader again."""


class Executor(BatchRunner):
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
        self._masking = MaskingFilter(self.secrets)
        self._masker = Masker(self.secrets.values())
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
        # Attempts the cluster may assign beyond the slots; they wait here for a run slot (the
        # gate; None without prefetch: the leader never sends more than the slots).
        self.prefetch = prefetch
        self._gate = RunGate(slots) if prefetch else None
        self._placed: set[str] = set()  # attempts holding a place of the gate
        self._tickets: dict[str, asyncio.Future[None]] = {}  # attempts waiting for one
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
        self._log: DedupeLog | None = None
        self._running: dict[str, asyncio.Task[None]] = {}
        self._to_begin: list[tuple[str, asyncio.Future[BeginOutcome]]] = []
        self._to_finish: list[tuple[AttemptResult, asyncio.Future[None]]] = []
        self._cancelled: set[str] = set()
        # Stop requests of running attempts whose runner honours them (SIGTERM, grace, SIGKILL;
        # a handler's cancellation): a cancel of one that has started sets it.
        self._stops: dict[str, Cancellation] = {}
        self._max_epoch = 0
        self._report_wake: asyncio.Event | None = None
        self.clock: Clock = clock or SystemClock()
        self.started = 0
        self.refused_stale = 0
        # Our clock minus the leader's, from the leader's time on each register and heartbeat
        # reply with the round trip halved (None until the first reply).
        self.clock_offset_ms: int | None = None
        self._heartbeat_s = 2.0
        self._lease_s = 10.0
        self._rpc_timeout_s = 3.0
        self._hb_wake: asyncio.Event | None = None  # set when an attempt starts: heartbeat now
        self._hb_sent_at: float | None = None  # loop time of the heartbeat in flight (None: answered)
        self._next_target: str | None = None  # the leader the watch found: register there next
        self._started_ids: set[str] = set()  # running attempts that have started
        # Started since the last heartbeat, for a partial one (only to a leader that takes them).
        self._started_since: list[str] = []
        self._partial_ok = False  # the leader we registered with takes partial heartbeats
        # Dispatch streams opened so far, and the one each running attempt was last sent on: an
        # attempt starts only while the stream it came on (or re-came on) is the open one.
        self._stream_gen = 0
        self._item_gen: dict[str, int] = {}
        self._registered = False  # the current leader accepted our registration
        self._connected = False  # a dispatch stream is open
        self._leader = self.targets[0]  # where we registered last (drain and leave go there first)
        self._drain: asyncio.Event | None = None  # set: drain, then leave and return from run()
        self.draining = False  # a drain has begun
        self.left = False  # the drain ended with a committed Leave
        # execution id -> ms late at start, from its start until the cluster acknowledges its
        # result (then reported with it). Not in the execution log: after a restart a result is
        # re-reported without it, which only leaves it out of the leader's histogram.
        self._start_late: dict[str, int] = {}
        self._params = ParamsCache()  # each task version's params, parsed once
        self.observability = ExecutorObservability(name, http, self._observed) if http is not None else None
        self._log_senders: set[asyncio.Task[None]] = set()  # answers to log requests under way
        # The Session stream (issue 31 P2): used with a leader that serves it (RegisterReply.
        # session_version) unless ``session`` is False (raftsched-executor --no-session).
        self.session = session
        self._session_version = 0  # what the leader we registered with serves (0: none)
        self._batch_init()
        self.sessions_opened = 0
        self.session_link: SessionLink | None = None  # the open session's, if any

    def _observed(self) -> ExecutorSample:
        # Read at scrape time, on this agent's event loop.
        waiting = self._gate.waiting if self._gate is not None else 0
        running = len(self._running) - waiting
        if self._log is None:
            return ExecutorSample(
                self._connected,
                self._registered,
                self.slots,
                running,
                0,
                self.clock_offset_ms,
                prefetched=waiting,
            )
        pending = self._log.pending_count()
        entries, size = self._log.sizes()  # one short read transaction
        return ExecutorSample(
            self._connected,
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
            self._log = DedupeLog.open(self.data_dir, sync=False, map_size=self.map_size, batched=True)
        else:
            self._log = DedupeLog(self._store, batched=True)
        for result in self._log.recover():
            log.warning(
                "%s: %s was interrupted by a restart; reporting it failed",
                self.name,
                result.execution_id,
                extra=attempt_fields(result.execution_id, executor=self.name),
            )
        self._report_wake = asyncio.Event()
        self._hb_wake = asyncio.Event()
        if self.prefetch:  # all slots free, none closed by an earlier run's drain
            self._gate = RunGate(self.slots)
            self._placed.clear()
            self._tickets.clear()
        stop = stop or asyncio.Event()
        self._drain = drain or asyncio.Event()
        flusher = asyncio.ensure_future(self._flush_loop()) if own_log else None
        pruner = None
        if self.execution_log_keep_ms is not None:
            on_removed = None if obs is None else functools.partial(obs.on_log_write, "prune")
            pruner = LogPruner(
                self._log,
                self.execution_log_keep_ms,
                self.clock,
                name=self.name,
                in_thread=own_log,
                on_removed=on_removed,
            )
        pruning = asyncio.ensure_future(pruner.run()) if pruner is not None else None
        drainer = asyncio.ensure_future(self._drain_when_asked(stop))
        masked_handlers = self._masking.install()  # secret values never reach a log line
        log_pruner = asyncio.ensure_future(
            prune_log_files(self.log_files, self.clock.now_ms, lambda: list(self._running), self.name)
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
                    if self._next_target is None and self._log is not None:
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
            running = list(self._running.values())
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
                self._log.close()
            self._masking.remove(masked_handlers)

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
            self._max_epoch = max(self._max_epoch, reply.epoch)
            self._clock_sample(reply.leader_now_ms, sent)
            self.health_drained = reply.health_drained  # its own drain survives a restart
            self._partial_ok = reply.partial_heartbeats  # an older leader leaves it false
            self._session_version = reply.session_version  # an older leader leaves it 0
            self._heartbeat_s = max(0.1, reply.heartbeat_ms / 1000)
            self._lease_s = max(0.1, reply.lease_ms / 1000)
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
        self._stream_gen += 1
        self._connected = True
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
            self._connected = False
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
        self._max_epoch = max(self._max_epoch, first.accept.epoch)
        self.sessions_opened += 1
        self._stream_gen += 1
        self._connected = True
        assert self._log is not None and self._report_wake is not None
        obs = self.observability
        link = self.session_link = SessionLink(
            stream,
            self._log,
            self.clock,
            self._report_wake,  # set by finished results and by acknowledgements alike
            name=self.name,
            start_late=self._start_late,
            on_work=self._session_work,
            on_acknowledged=None if obs is None else functools.partial(obs.on_log_write, "acknowledge"),
        )
        self._session_opened()
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
            self._connected = False
            self.session_link = None
            link.close()
            stream.cancel()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return True

    # -- draining ------------------------------------------------------------------------------------

    async def _drain_when_asked(self, stop: asyncio.Event) -> None:
        """Wait for the drain request; drain; then end :meth:`run` (which leaves)."""
        assert self._drain is not None and self._log is not None
        await self._drain.wait()
        self.draining = True
        waiting = 0
        if self._gate is not None:
            # Prefetched attempts still waiting for a slot never start here: they go back to the
            # cluster unstarted with the Leave (placed again elsewhere without a try).
            self._gate.close()
            waiting = self._gate.waiting
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.drain_grace_s
        log.info(
            "%s: draining: no new attempts; %d running, %.0f s grace%s",
            self.name,
            self._busy(),
            self.drain_grace_s,
            f"; {waiting} waiting for a slot go back unstarted" if waiting else "",
        )
        request = pb.DrainRequest(name=self.name, reason="executor shutting down")
        if not await self._to_leader(lambda t, s: self.transport.drain(t, request, timeout_s=s), deadline):
            log.warning("%s: no leader confirmed the drain; waiting for running attempts anyway", self.name)
        # Running attempts finish, and their results are acknowledged, within the grace.
        while (self._busy() or self._log.pending_count()) and loop.time() < deadline:
            await asyncio.sleep(0.05)
        if self._busy():
            log.warning(
                "%s: grace of %.0f s over with %d attempt(s) still running: killing them; the leader "
                "declares them lost when this executor leaves",
                self.name,
                self.drain_grace_s,
                self._busy(),
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
        return await call_leader(call, self._leader, self.targets, self._rpc_timeout_s, deadline)

    # -- work ----------------------------------------------------------------------------------------

    async def _consume(self, stream: DispatchStream) -> None:
        async for batch in stream:
            for item in batch:
                self._accept(item)

    def _accept(self, item: pb.WorkItem) -> None:
        assert self._log is not None and self._report_wake is not None
        if item.epoch < self._max_epoch:
            self.refused_stale += 1
            if self.observability is not None:
                self.observability.on_refused_stale()
            log.warning(
                "%s: refused %s from stale epoch %d (newest seen %d)",
                self.name,
                item.execution_id,
                item.epoch,
                self._max_epoch,
                extra=_item_fields(item, self.name),
            )
            return
        self._max_epoch = item.epoch
        if item.HasField("log_request"):  # not work: a reader wants an attempt's log
            sender = asyncio.ensure_future(
                answer_log_request(
                    self.transport, self._leader, self.name, self.log_files, item.log_request, self._running
                )
            )
            self._log_senders.add(sender)
            sender.add_done_callback(self._log_senders.discard)
            return
        if item.cancel:  # its run was cancelled: stop it if it runs here (else nothing to do)
            task = self._running.get(item.execution_id)
            if task is not None and item.execution_id not in self._cancelled:
                log.info(
                    "%s: cancelling %s: its run was cancelled",
                    self.name,
                    item.execution_id,
                    extra=_item_fields(item, self.name),
                )
                self._cancelled.add(item.execution_id)
                stop = self._stops.get(item.execution_id)
                if stop is not None and item.execution_id in self._started_ids:
                    stop.set(item.cancel_reason or "its run was cancelled")  # TERM, grace, KILL
                else:
                    task.cancel()  # not started yet (or a runner that cannot be asked): at once
            return
        if item.execution_id in self._running:
            self._item_gen[item.execution_id] = self._stream_gen  # sent again: still ours
            if self.observability is not None:
                self.observability.on_duplicate()
            return  # already running here: never twice
        seen = self._log.known(item.execution_id)  # a re-sent attempt is answered at once
        if seen is not None:
            if self.observability is not None:
                self.observability.on_duplicate()
            if seen.status is BeginStatus.DONE:
                self._report_wake.set()  # its stored result is pending or re-reported
            return
        self._item_gen[item.execution_id] = self._stream_gen
        if item.handler or isinstance(self.subprocess, SubprocessRunner):
            self._stops[item.execution_id] = Cancellation()
        if self._gate is not None and item.nominal_ms <= self.clock.now_ms():
            # A run slot now, or a place in the queue for one, in arrival order. (One early by our
            # clock queues when it is due, in _execute: it holds no slot it may not use yet.)
            ticket = self._gate.ticket()
            if ticket is None:
                self._placed.add(item.execution_id)
            else:
                self._tickets[item.execution_id] = ticket
        task = self._running[item.execution_id] = asyncio.ensure_future(self._execute(item))
        task.add_done_callback(functools.partial(self._forget, item.execution_id))

    def _leave(self, execution_id: str) -> None:
        """``execution_id`` no longer runs here (finished, or never to start)."""
        self._running.pop(execution_id, None)
        self._started_ids.discard(execution_id)
        self._item_gen.pop(execution_id, None)
        self._stops.pop(execution_id, None)

    async def _still_ours(self, execution_id: str) -> bool:
        """Whether the attempt may start now: it came (or came again) on the open stream. After
        a break it waits for the leader to send it again; False after two leases without."""
        polls = int(2 * self._lease_s / _RESEND_POLL_S) + 1
        while not (self._connected and self._item_gen.get(execution_id) == self._stream_gen):
            polls -= 1
            if polls <= 0:
                return False
            await asyncio.sleep(_RESEND_POLL_S)
        return True

    def _busy(self) -> int:
        """Attempts held here less those waiting for a slot (prefetch): running, or on their way."""
        return len(self._running) - (self._gate.waiting if self._gate is not None else 0)

    def _release(self, execution_id: str) -> None:
        """Give back ``execution_id``'s run slot, or its place in the queue for one (prefetch)."""
        gate = self._gate
        if gate is None:
            return
        if execution_id in self._placed:
            self._placed.discard(execution_id)
            gate.give()
            return
        ticket = self._tickets.pop(execution_id, None)
        if ticket is not None:
            gate.drop(ticket)

    def _forget(self, execution_id: str, task: asyncio.Task[None]) -> None:
        # Normally _execute removes itself; this covers a task cancelled before it started.
        if self._running.get(execution_id) is task:
            self._release(execution_id)
            del self._running[execution_id]
            self._cancelled.discard(execution_id)
            self._started_ids.discard(execution_id)
            self._item_gen.pop(execution_id, None)
            self._stops.pop(execution_id, None)

    # The execution log is written in batches: every attempt accepted (or finished) in one pass
    # of the event loop shares one LMDB transaction. One transaction per begin and per finish
    # was ~15 % of an executor's CPU at 500 attempts/s (bench/profile.py). Still recorded before
    # the attempt starts, and before its result is reported.

    def _begin_soon(self, execution_id: str) -> asyncio.Future[BeginOutcome]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[BeginOutcome] = loop.create_future()
        if not self._to_begin:
            loop.call_soon(self._begin_batch)
        self._to_begin.append((execution_id, fut))
        return fut

    def _begin_batch(self) -> None:
        assert self._log is not None
        batch, self._to_begin = self._to_begin, []
        try:
            outcomes: list[BeginOutcome | BaseException] = list(self._log.begin_many([e for e, _ in batch]))
            if self.observability is not None:
                self.observability.on_log_write("begin", len(batch))
        except Exception:  # e.g. one id too long: then each on its own, so only that one fails
            outcomes = []
            for execution_id, _ in batch:
                try:
                    outcomes.append(self._log.begin(execution_id))
                except Exception as exc:
                    outcomes.append(exc)
        for (_, fut), outcome in zip(batch, outcomes, strict=True):
            if fut.done():
                continue
            if isinstance(outcome, BaseException):
                fut.set_exception(outcome)
            else:
                fut.set_result(outcome)

    def _finish_soon(self, result: AttemptResult) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        if not self._to_finish:
            loop.call_soon(self._finish_batch)
        self._to_finish.append((result, fut))
        return fut

    def _finish_batch(self) -> None:
        assert self._log is not None
        batch, self._to_finish = self._to_finish, []
        if self.observability is not None:
            self.observability.on_finished([r for r, _ in batch])
        try:
            self._log.finish_many([r for r, _ in batch])
            if self.observability is not None:
                self.observability.on_log_write("finish", len(batch))
            errors: list[BaseException | None] = [None] * len(batch)
        except Exception:
            errors = []
            for result, _ in batch:
                try:
                    self._log.finish(result.execution_id, result)
                    errors.append(None)
                except Exception as exc:
                    errors.append(exc)
        for (_, fut), error in zip(batch, errors, strict=True):
            if fut.done():
                continue
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(None)

    async def _execute(self, item: pb.WorkItem) -> None:
        if self._gate is None:
            await self._execute_placed(item)
            return
        execution_id = item.execution_id
        try:
            if execution_id not in self._placed and execution_id not in self._tickets:
                await self._queue_when_due(item)
            ticket = self._tickets.get(execution_id)
            if ticket is not None:  # prefetched while every run slot was taken: wait for one
                try:
                    await ticket
                except asyncio.CancelledError:
                    if execution_id not in self._cancelled:
                        raise  # the agent is stopping
                    # Its run was cancelled while it waited: it never starts (recorded as such).
                else:
                    del self._tickets[execution_id]
                    self._placed.add(execution_id)
            await self._execute_placed(item)
        finally:
            self._release(execution_id)

    async def _queue_when_due(self, item: pb.WorkItem) -> None:
        """Wait until ``item`` is due by our clock, then take a run slot or a ticket for one. A
        cancel meanwhile takes neither: the attempt is recorded cancelled, never started."""
        early_ms = item.nominal_ms - self.clock.now_ms()
        try:
            if early_ms > 0:
                await asyncio.sleep(early_ms / 1000)
        except asyncio.CancelledError:
            if item.execution_id not in self._cancelled:
                raise  # the agent is stopping
            return
        assert self._gate is not None
        ticket = self._gate.ticket()
        if ticket is None:
            self._placed.add(item.execution_id)
        else:
            self._tickets[item.execution_id] = ticket

    async def _execute_placed(self, item: pb.WorkItem) -> None:
        assert self._log is not None and self._report_wake is not None
        execution_id = item.execution_id
        try:
            outcome = await self._begin_soon(execution_id)
        except asyncio.CancelledError:
            if execution_id not in self._cancelled:
                raise  # the agent is stopping
            # Its workflow run was killed while the begin was being recorded. The batch records
            # it anyway (or already has): record it now if not, so the log holds it either way;
            # RUNNING here means our own batch recorded it.
            outcome = self._log.begin(execution_id)
            if outcome.status is BeginStatus.RUNNING:
                outcome = BeginOutcome(BeginStatus.NEW)
        except Exception:
            log.exception(
                "%s: cannot record %s in the execution log",
                self.name,
                execution_id,
                extra=_item_fields(item, self.name),
            )
            self._leave(execution_id)
            return
        if outcome.status is not BeginStatus.NEW:
            # RUNNING: only after a restart, until recover(); DONE: its stored result is pending
            # or re-reported. Either way it does not run again.
            if self.observability is not None:
                self.observability.on_duplicate()
            self._cancelled.discard(execution_id)
            self._leave(execution_id)
            if outcome.status is BeginStatus.DONE:
                self._report_wake.set()
            return
        if execution_id in self._cancelled:  # killed while its begin was being recorded
            result = _failed(execution_id, "cancelled: its run was cancelled or killed")
        else:
            result = self._mask(await self._attempt(item))
        self._log_outcome(item, result)
        finished = self._finish_soon(result)
        try:
            await finished
        except asyncio.CancelledError:
            if execution_id not in self._cancelled:
                raise  # the agent is stopping
            # A cancel that came too late to stop it: the batch still records the result.
        self._cancelled.discard(execution_id)
        self._leave(execution_id)
        self._report_wake.set()

    async def _attempt(self, item: pb.WorkItem) -> AttemptResult:
        # Never early, by our own clock too: a leader whose clock runs ahead would otherwise start
        # attempts early in real time (the chaos suite's +2 s skew did, by ~2 s). Rather late.
        try:
            early_ms = item.nominal_ms - self.clock.now_ms()
            if early_ms > 0:
                await asyncio.sleep(early_ms / 1000)
            if not await self._still_ours(item.execution_id):
                log.info("%s: %s not started: the leader did not send it again", self.name, item.execution_id)
                return _failed(
                    item.execution_id,
                    "not started: its dispatch stream broke and the leader did not send it again",
                )
            self.started += 1
            self._started_ids.add(item.execution_id)
            self._started_since.append(item.execution_id)
            if self._hb_wake is not None:
                self._hb_wake.set()  # tell the leader now: a loss from here on is a try
            late = max(0, self.clock.now_ms() - item.nominal_ms)
            self._start_late[item.execution_id] = late
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "%s: starting %s (attempt %d, %d ms after its nominal time)",
                    self.name,
                    item.execution_id,
                    item.attempt,
                    late,
                    extra=_item_fields(item, self.name),
                )
            try:
                params_json, env, used = resolve_attempt(item.params_json, item.env, self.secrets)
            except MissingSecret as exc:
                return _failed(item.execution_id, f"{exc}: the attempt did not start")
            if used:
                self._know_secrets(used)
            ctx = attempt_context(
                item.execution_id,
                item.run_id,
                item.task,
                item.nominal_ms,
                item.shard,
                max(1, item.shards),
                item.attempt,
                self._params.get(item.task, item.task_version, params_json),
                item.timeout_ms,
                env,
                self._masker.values,
                self._stops.get(item.execution_id) or Cancellation(),
            )
            if item.handler:
                return await self.callables.run(item.handler, ctx)
            if item.command:
                command = python_command(item.command) if item.runner == "python" else item.command
                return await self.subprocess.run(command, ctx)
            return _failed(item.execution_id, "task has neither a command nor a handler")
        except InvalidSpec as exc:
            return _failed(item.execution_id, f"bad dispatch: {exc}")
        except asyncio.CancelledError:
            if item.execution_id not in self._cancelled:
                raise  # the agent is stopping
            self._cancelled.discard(item.execution_id)
            return _failed(item.execution_id, "cancelled: its run was cancelled or killed")
        except Exception as exc:  # a runner bug must not kill the agent or leave the attempt running
            log.exception(
                "%s: attempt %s crashed the runner",
                self.name,
                item.execution_id,
                extra=_item_fields(item, self.name),
            )
            return _failed(item.execution_id, f"runner error: {describe(exc)}")

    def _know_secrets(self, used: list[str]) -> None:
        """Mask ``used`` (and every value the store knows now) in results and log lines."""
        if any(value and value not in self._masker.values for value in used):
            self._masker = Masker([*self.secrets.values(), *used])
            self._masking.refresh(used)

    def _mask(self, result: AttemptResult) -> AttemptResult:
        """``result`` with every secret value masked, before it is logged, stored or reported."""
        masker = self._masker
        if not masker:
            return result
        return dataclasses.replace(
            result,
            error=masker.mask(result.error),
            stdout_tail=masker.mask_tail(result.stdout_tail),
            stderr_tail=masker.mask_tail(result.stderr_tail),
        )

    def _log_outcome(self, item: pb.WorkItem, result: AttemptResult) -> None:
        """A failure at info, a success at debug: at a thousand attempts a second, a record per
        success would be most of the executor's own work when nobody reads them."""
        if result.success:
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "%s: %s succeeded in %d ms",
                    self.name,
                    item.execution_id,
                    result.duration_ms,
                    extra=_item_fields(item, self.name),
                )
        elif log.isEnabledFor(logging.INFO):
            log.info(
                "%s: %s failed in %d ms: %s",
                self.name,
                item.execution_id,
                result.duration_ms,
                result.error,
                extra=_item_fields(item, self.name),
            )

    async def _flush_loop(self) -> None:
        assert self._log is not None
        while True:
            await asyncio.sleep(1.0)
            await asyncio.to_thread(self._log.flush)

    def _heartbeat_request(self, partial: bool = False) -> pb.HeartbeatRequest:
        """A full heartbeat: every attempt held here. ``partial``: only those started since the
        previous heartbeat (a leader that takes them renews those and learns they started;
        the full one, every heartbeat interval, renews the rest): a start no longer costs a
        list of every open id on both sides."""
        assert self._log is not None
        if partial:
            since, self._started_since = self._started_since, []
            running = self._running
            request = pb.HeartbeatRequest(
                name=self.name,
                running=since,
                free_slots=max(0, self.slots + self.prefetch - len(running)),
                started=since,
                reports_started=True,
                finished=[e for e in since if e not in running],
                disk_used=self.disk_used,
                log_used=self.log_used,
                partial=True,
            )
            if self.clock_offset_ms is not None:
                request.clock_offset_ms = self.clock_offset_ms
            return request
        # Finished attempts whose report is not acknowledged yet keep their leases too, or a
        # slow report would turn a success into a lost attempt and a retry.
        done = self._log.pending_ids()
        request = pb.HeartbeatRequest(
            name=self.name,
            running=[*self._running, *done],
            free_slots=max(0, self.slots + self.prefetch - len(self._running)),
            started=[*self._started_ids, *done],
            reports_started=True,
            finished=done,
            disk_used=self.disk_used,
            log_used=self.log_used,
        )
        if self.clock_offset_ms is not None:
            request.clock_offset_ms = self.clock_offset_ms
        return request

    # -- health (disk and execution log) --------------------------------------------------------

    def check_health(self) -> str:
        """Read the disk and execution-log fractions and decide, with hysteresis, whether this
        executor is unhealthy (:meth:`raftsched.executor.health.DiskHealth.check`). Returns the
        reason ("" while healthy)."""
        return self.health.check(self._log)

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
                self._started_since = []  # the full one lists them
            try:
                reply = await send(target, self._heartbeat_request(partial), timeout_s=self._rpc_timeout_s)
            finally:
                self._hb_sent_at = None
            if not reply.registered:
                raise LeaderLost("the leader does not know this executor")
            self._clock_sample(reply.leader_now_ms, sent)
            if reply.epoch > self._max_epoch:
                self._max_epoch = reply.epoch
            # Every heartbeat_s, or soon after an attempt starts (starts in a burst share one).
            gap = min(_EARLY_HEARTBEAT_GAP_S, self._heartbeat_s / 4)
            await asyncio.sleep(gap)
            wake = self._hb_wake
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
        return Asker(self.transport, self.name, self._heartbeat_request, lambda: self._max_epoch)

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
        assert self._log is not None and self._report_wake is not None
        while True:
            pending = self._log.pending_reports(500)
            if pending:
                reply = await self.transport.report(
                    target,
                    pb.ReportRequest(
                        name=self.name,
                        results=[exec_result(r, self._start_late.get(r.execution_id)) for r in pending],
                    ),
                    timeout_s=15,
                )
                self._log.acknowledge(reply.acknowledged, self.clock.now_ms())
                for execution_id in reply.acknowledged:
                    self._start_late.pop(execution_id, None)
                if self.observability is not None:
                    self.observability.on_log_write("acknowledge", len(reply.acknowledged))
                continue
            self._report_wake.clear()
            await wait_event(self._report_wake, 1.0)


def _item_fields(item: pb.WorkItem, executor: str) -> dict[str, object]:
    return attempt_fields(item.execution_id, item.run_id, item.task, attempt=item.attempt, executor=executor)


def _failed(execution_id: str, error: str) -> AttemptResult:
    return AttemptResult(
        execution_id=execution_id,
        success=False,
        exit_code=None,
        error=error,
        stdout_tail="",
        stderr_tail="",
        duration_ms=0,
        timed_out=False,
    )


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
