"""The composition root: config → store, state machine, consensus, leader driver, gRPC.

``Node`` is one scheduler node, usable standalone (``raftsched-node``) or embedded in a Python
service. Threads: pysyncobj's tick thread applies entries (and must be created by the main
thread); the leader driver runs on its own thread; gRPC runs on an asyncio loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import logging
import random
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from raftsched import __version__, codec
from raftsched.abc import (
    BarrierCallback,
    Clock,
    CommitHook,
    ConsensusNode,
    FormatTooNew,
    Leadership,
    ProposeCallback,
    ProposeError,
    RaftStatus,
    StoreFailed,
)
from raftsched.alerts.delivery import AlertLoop, describe
from raftsched.alerts.health import FleetView, fleet_view
from raftsched.alerts.monitor import StartDelays
from raftsched.config.types import ClusterConfig
from raftsched.config.values import parse_address
from raftsched.consensus.pysyncobj.node import PySyncObjNode
from raftsched.consensus.pysyncobj.snapshot import check_raft_files
from raftsched.errors import (
    CannotStart,
    ConfigError,
    InvalidSpec,
    RaftschedError,
    SnapshotFormatError,
    StoreDamaged,
    Unavailable,
)
from raftsched.fsm import keys
from raftsched.fsm.effects import AttemptReady, BarrierCommitted, Effect, ReadyColumns
from raftsched.fsm.membership import REMOVE
from raftsched.fsm.records import Retention
from raftsched.fsm.snapshot import check_stored_format
from raftsched.fsm.state import SchedulerState
from raftsched.fsm.tally import ApplyTally
from raftsched.leader.dispatch.hub import ExecutorHub
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.leader.driver import DriverThread
from raftsched.leader.formats import COLUMNS_FORMAT, MemberFormats
from raftsched.leader.gate import LeaderGate
from raftsched.leader.reads import ReadIndex
from raftsched.leader.window import FiringWindow
from raftsched.logfields import leadership_fields
from raftsched.model import STORE_DAMAGED
from raftsched.observability.lateness import LatenessLog, rss_bytes
from raftsched.observability.node_http import NodeObservability
from raftsched.readinfo import ReadInfo
from raftsched.rpc.admin import AdminServicer
from raftsched.rpc.executor_service import ExecutorServicer
from raftsched.rpc.http_api import HttpApi
from raftsched.rpc.local_calls import LocalCalls
from raftsched.rpc.logs_service import LogsServicer
from raftsched.rpc.openapi import document_bytes as openapi_document
from raftsched.rpc.peercheck import PeerCheck
from raftsched.rpc.plumbing import DamagedGuard, DecodeGuard, propose_and_wait
from raftsched.security.auth import Role
from raftsched.security.authz import Authenticator, AuthInterceptor, RefusalLog
from raftsched.security.tls import HttpTls, ServerTls, node_client_tls
from raftsched.security.tokens import TokenVerifier, create_command, read_token_file, token_id
from raftsched.server.core import Core
from raftsched.server.membership import MembershipOps, describe_mismatch
from raftsched.storage.lmdb_store import LmdbStore
from raftsched.timing.clock import SystemClock
from raftsched.timing.schedule import MisfireSettings
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc
from raftsched.web.console import Console

if TYPE_CHECKING:
    from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

log = logging.getLogger("raftsched.node")

LEADER_HEALTH_SERVICE = "raftsched.v1.Leader"
SWITCH_INTERVAL_S = 0.001
ADMIN_SERVICE = "raftsched.v1.Admin"
STEP_DOWN_TIMEOUT_S = 2.0
CLOCK_WATCH_PERIOD_S = 0.2
# The Leader health service says SERVING only while this node leads and has heard from a
# majority within this long: a leader cut off from its followers believes it leads until
# leader_fallback_timeout, and a load balancer should not send it work meanwhile.
LEADER_CONTACT_MAX_MS = 1000
PEER_CHECK_FIRST_S = 10.0  # the first comparison with the peers, after start-up
# How often a leader asks the other voters which command format they apply (the columnar
# bodies' gate, raftsched.leader.formats); a follower does not ask.
FORMAT_POLL_S = 2.0
# How often the flush thread drops the store's mapped pages from the node's resident set
# (LmdbStore.release_pages): the pages stay in the page cache, and the ones still in use are
# mapped again by their next read (a minor fault each).
PAGES_RELEASE_S = 10.0


class StartPhases:
    """Wall and CPU time of each phase of a node's start, for its start-up log lines: a restart's
    time is read there phase by phase (bench/scale.py does), not guessed from the total."""

    def __init__(self) -> None:
        self._wall = time.monotonic()
        self._cpu = time.process_time()
        # The interpreter's start, the imports and the config, before the node is built.
        self.ended: list[str] = [f"before the node ({self._cpu * 1000:.0f} ms CPU)"]

    def __call__(self, name: str) -> None:
        """The phase ``name`` ended now."""
        wall, cpu = time.monotonic(), time.process_time()
        took, cpu_took = (wall - self._wall) * 1000, (cpu - self._cpu) * 1000
        self.ended.append(f"{name} {took:.0f} ms ({cpu_took:.0f} ms CPU)")
        self._wall, self._cpu = wall, cpu

    def text(self) -> str:
        return ", ".join(self.ended)


def rebuild_remedy(node_id: str) -> str:
    """The way out of a damaged store, as a node's error says it."""
    return (
        f"start node {node_id} with --rebuild: it moves its damaged files aside (nothing is "
        "deleted) and catches up from the current leader's snapshot and log"
    )


class Node:
    """One scheduler node. Call :meth:`start` on the main thread, then ``await serve()``.

    It is the :class:`raftsched.rpc.plumbing.NodeServices` its servicers are given.
    """

    def __init__(
        self,
        config: ClusterConfig,
        node_id: str,
        clock: Clock | None = None,
        *,
        per_task_metrics: bool = False,
        joining: bool = False,
        rebuilding: bool = False,
    ) -> None:
        self.config = config
        # A rebuilt node (its store moved aside, see raftsched-node --rebuild) starts empty and
        # is caught up by the leader like a joining one, and votes only once caught up.
        self.rebuilding = rebuilding
        self.joining = joining or rebuilding
        self.me = config.node(node_id)
        self.node_id = node_id
        # Read and check the certificate files now: a bad [tls] stops the node before it joins Raft.
        self.server_tls = ServerTls(config.tls) if config.tls is not None else None
        self.clock: Clock = clock or SystemClock()
        s = config.scheduler
        self.retention = Retention(
            keep_count=s.history_keep_count,
            keep_ms=s.history_keep_seconds * 1000,
            idempotency_keep_ms=s.idempotency_keep_seconds * 1000,
            event_dedupe_ms=s.event_dedupe_window_seconds * 1000,
            **({"audit_keep_ms": config.auth.audit_keep_ms} if config.auth is not None else {}),
        )
        self.misfire = MisfireSettings(
            grace_ms=s.misfire_grace_seconds * 1000,
            all_cap=s.misfire_all_cap,
            all_window_ms=s.misfire_all_window_seconds * 1000,
        )
        self.me.data_dir.mkdir(parents=True, exist_ok=True)
        phases = StartPhases()
        # No fsync on the apply thread: a commit per Raft tick must not block heartbeats on the
        # disk (that caused elections under load). Commits keep LMDB's ACI properties and survive
        # a process kill; a flusher thread fsyncs every second against power loss. pysyncobj's
        # own journal is never fsynced at all (docs/architecture.md §10), so this costs no durability
        # the Raft log itself would have offered.
        # A damaged store is one clear error (StoreDamaged, naming the file and the way out),
        # found here before anything runs: LMDB pages it cannot read, or content that does not
        # match the checksum committed with it (verify reads the whole store once).
        try:
            self.store = LmdbStore(
                self.me.data_dir,
                map_size=config.storage.map_size,
                sync=False,
                replicated_below=keys.LOCAL_PREFIX,
            )
        except StoreDamaged as exc:
            raise exc.with_remedy(rebuild_remedy(node_id)) from None
        phases("store open")
        try:
            verified = self.store.verify()
            phases("store verify")
            self.state = SchedulerState.load(self.store, self.retention, on_phase=phases)
        except StoreDamaged as exc:
            self.store.close()
            raise exc.with_remedy(rebuild_remedy(node_id)) from None
        except SnapshotFormatError:
            self.store.close()
            raise
        except Exception as exc:  # a stored record that does not decode (a store of no checksum)
            self.store.close()
            raise StoreDamaged(
                str(self.me.data_dir / "state" / "data.mdb"),
                f"the stored state does not load: {exc!r}",
                rebuild_remedy(node_id),
            ) from None
        with self.state.view() as v:
            loaded_tasks = len(v.tasks)
        # The verify and the load read every page of the store: drop them from the resident set
        # now, not between the two (the load would map them all again).
        self.store.release_pages()
        # Logged once the node has started (start()): a node that cannot start says one line only.
        # The time is the node's clock (skew included), in unix seconds: bench/scale.py reads it.
        loaded_at = self.clock.now_ms() / 1000.0
        self._load_report = (verified.applied_index, verified.pairs, loaded_tasks, phases.text(), loaded_at)
        # Set when the store cannot take writes: the node has left the cluster (see _store_failed).
        self.failure: BaseException | None = None
        # Why the stored state is damaged, found while running ("" = sound as last verified):
        # the node then serves nothing from it, does not lead and is not ready (see _damaged).
        self.store_damaged = ""
        self._verify_every_s = float(config.storage.verify_every_seconds)
        self._failed_event: asyncio.Event | None = None
        self._flusher_stop = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, name="raftsched-flush", daemon=True)
        # Clocks (raftsched.clockwatch): measured over Raft; a leader whose clock is off the
        # majority's plans and stamps nothing and hands leadership over (see _watch_clock).
        self._members = max(1, len(config.nodes))
        self.consensus: ConsensusNode | None = None
        self.raft_node: PySyncObjNode | None = None  # the same object, with its membership API
        self.core = Core(
            node_id,
            self.store,
            self.state,
            clock=self.clock,
            consensus=lambda: self.consensus,
            dispatch=DispatchSettings(
                lease_ms=s.lease_ms,
                heartbeat_ms=s.heartbeat_ms,
                grace_ms=s.kill_grace_ms,
                retry_base_ms=s.retry_backoff_ms,
                retry_cap_ms=s.retry_backoff_cap_ms,
            ),
            rng=random.Random(),
            misfire=self.misfire,
            max_skew_ms=s.max_clock_skew_ms,
            members=lambda: self._members,
            member_formats=MemberFormats(lambda: [node_id for node_id, _ in self._peer_list()]),
            max_fires_per_batch=s.max_fires_per_batch,
            max_dispatch_backlog=s.max_dispatch_backlog,
            leader_address=self.leader_grpc,
            damaged=lambda: self.store_damaged,
            content_sum=self.store.content_sum,
        )
        self.clock_watch = self.core.clock_watch
        self.driver = self.core.driver
        self.gate = self.core.gate
        self.replica = self.core.replica
        # Effects leave the applier thread: to the driver's thread and to the event loop.
        self.core.to_driver = self._driver_effects
        self.core.to_dispatcher = self._dispatcher_effects
        self.lateness = LatenessLog()  # commit lateness (at Raft commit)
        self.apply_lateness = LatenessLog()  # apply lateness (run visible in the leader's state)
        # Reported attempt starts per namespace, for the start-delay alert (every replica keeps
        # them, so a new leader measures the same window).
        self.start_delays = StartDelays(config.alerts.start_delay)
        self.state.on_start = self.start_delays.record
        # Counts of what apply did, for /metrics; a per-task label is opt-in (cardinality).
        self.tally = ApplyTally(per_task=per_task_metrics or config.metrics.per_task)
        self.observability: NodeObservability | None = None
        self.http_api: HttpApi | None = None
        self.http_tls: HttpTls | None = None
        # When the leader's firing path is busy; the HTTP API gives way to it ([api]).
        self.firing_window = FiringWindow(config.api.firing_lead_ms)
        if self.me.http is not None:
            self.http_api = HttpApi(
                self.http_of_grpc,
                now_ms=self.clock.now_ms,
                max_calls=config.api.max_calls,
                max_waiting=config.api.max_waiting,
                firing=self.firing_window,
                firing_hold_ms=config.api.firing_hold_ms,
            )
            self.http_api.openapi = openapi_document
            self.http_api.event_hooks = {hook.name: hook for hook in config.events}
            tls = config.tls
            self.http_tls = HttpTls(tls) if tls is not None and tls.http else None
            self.observability = NodeObservability(
                self,
                self.me.http,
                self.tally,
                console=Console(self, leads=self._leads_now, confirm_read=self.confirm_read),
                api=self.http_api,
                ssl_context=self.http_tls.context if self.http_tls is not None else None,
                metrics_client_cert=tls is not None and tls.http_metrics_client_cert,
                alert_targets=[hook.name for hook in self.config.alerts.webhooks],
            )
            self.state.tally = self.tally  # without http nothing reads it: do not count
        self.membership = MembershipOps(self, lambda: self.raft_node)
        # Linearizable reads: a read barrier through the log per batch (raftsched.leader.reads).
        self.reads = ReadIndex(self.gate.stamp, self.propose_barrier)
        self.driver_thread: DriverThread | None = None
        self._server: grpc.aio.Server | None = None
        self.hub: ExecutorHub | None = None
        self._health: health.aio.HealthServicer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.alert_loop: AlertLoop | None = None
        # Authentication (the [auth] table): one verifier per node, its cache in memory only.
        self.refusals = RefusalLog()
        self._bootstrap_token: str | None = None
        if config.auth is not None and config.auth.bootstrap_token_file is not None:
            try:
                self._bootstrap_token = read_token_file(config.auth.bootstrap_token_file)
            except InvalidSpec as exc:
                raise ConfigError(config.source, [f"auth.bootstrap_token_file: {exc.reason}"]) from None
        self.tokens = TokenVerifier(
            self.state.access.get,
            self.clock.now_ms,
            self._bootstrap_token,
            leads=lambda: self.consensus is not None and self.consensus.is_leader(),
        )

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Join the Raft cluster. Must run on the main thread (pysyncobj's requirement).

        Sets the interpreter's GIL switch interval to 1 ms (process-wide): pysyncobj's tick
        thread is IO-bound and waits for the GIL once per socket event; behind CPU-bound threads
        (applier, leader driver, gRPC) each wait took up to the default 5 ms, and ticks stalled
        for hundreds of milliseconds under load - long enough to lose the leader.
        """
        if self.observability is not None:
            self.observability.bind()  # a taken port fails here, before this node joins anything
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        tls = self.server_tls
        host = parse_address(self.me.grpc, "grpc")[0]
        if tls is not None and not tls.names_host(host):
            log.warning(
                "tls.cert_file %s does not name %s (the host of this node's grpc address): clients "
                "dialling %s will refuse the certificate; add it to the subject alternative names",
                tls.settings.cert_file,
                host,
                self.me.grpc,
            )
        if self.config.insecure:
            log.warning(
                "cluster.insecure = true: the gRPC API on %s is served %s; anyone who can reach it "
                "can run commands on the executors",
                self.me.grpc_listen,
                "with TLS but without authentication"
                if self.server_tls is not None
                else "without TLS and without authentication",
            )
        # A node holds millions of long-lived objects (tasks, wheel entries). A full cyclic GC
        # pass over them holds the GIL for seconds; freeze what is loaded now and keep freezing
        # (see _flush_loop) so collections only scan young objects. Refcounting still frees
        # everything non-cyclic, which is all our state.
        gc.freeze()
        self.driver_thread = DriverThread(self.driver, self.clock, self.propose, window=self.firing_window)
        self.driver_thread.on_commit_lateness = self._commit_lateness
        self.driver_thread.start()
        self._flusher.start()
        mismatch = describe_mismatch(self.config, self.state.membership.record)
        if mismatch:
            log.warning(
                "this node's config file disagrees with the replicated membership, which it follows "
                "(the config file only seeds a new cluster): %s",
                mismatch,
            )
        joining = self.joining and not self.state.membership.seeded
        raft_started = time.monotonic()
        try:
            check_raft_files(self.me.data_dir)
        except StoreDamaged as exc:
            raise exc.with_remedy(rebuild_remedy(self.node_id)) from None
        self.raft_node = self.consensus = PySyncObjNode(
            node_id=self.node_id,
            self_addr=self.me.raft,
            bind_addr=self.me.raft_listen,
            peers=self._start_peers(),
            secret=self.config.secret,
            data_dir=self.me.data_dir,
            tuning=self.config.raft,
            apply_fn=self.replica.apply_entry,
            on_tick=self.replica.end_of_tick,
            on_leadership=self._leadership,
            write_snapshot=self._write_snapshot,
            load_snapshot=self._load_snapshot,
            applied_index=lambda: self.replica.last_applied,
            addr_to_id=self._addr_to_id,
            on_store_failure=self._store_failed,
            dial_address=self.dial_address,
            cluster_view=self._cluster_view,
            # Joining: not campaigning until the leader reaches it, or this node's term would
            # climb while it waits and depose the leader when they connect.
            hold_until_leader=joining,
            clock_watch=self.clock_watch,
            rebuilding=self.rebuilding,
        )
        if joining:
            log.info(
                "node %s joins an existing cluster: it waits for the leader (run `raftsched cluster "
                "add-node %s ...` first if it is not a member yet)",
                self.node_id,
                self.node_id,
            )
        index, entries, tasks, text, loaded_at = self._load_report
        log.info(
            "node %s: state loaded at index %d (%d entries, %d tasks) at %.3f: %s",
            self.node_id,
            index,
            entries,
            tasks,
            loaded_at,
            text,
        )
        with self.state.view() as v:
            loaded = len(v.tasks)
        log.info(
            "node %s started: raft %s, grpc %s, data %s, %d tasks loaded at index %d (Raft journal "
            "and snapshot opened in %.0f ms)",
            self.node_id,
            self.me.raft,
            self.me.grpc,
            self.me.data_dir,
            loaded,
            self.replica.last_applied,
            (time.monotonic() - raft_started) * 1000,
        )

    async def serve(self, stop: asyncio.Event | None = None) -> None:
        """Serve gRPC until ``stop`` is set (or forever)."""
        self._loop = asyncio.get_running_loop()
        obs = self.observability
        auth = self.config.auth
        # Metrics outermost, so refused calls are counted with their status code too.
        interceptors: list[grpc.aio.ServerInterceptor] = list(obs.interceptors()) if obs is not None else []
        interceptors.append(DecodeGuard())  # outside auth: it never sees an unparsed request
        interceptors.append(DamagedGuard(lambda: self.store_damaged))
        if auth is not None:
            interceptors.append(AuthInterceptor(Authenticator(self.tokens, auth.subjects), self.refusals))
        self._failed_event = asyncio.Event()
        if self.failure is not None:
            self._failed_event.set()
        server = grpc.aio.server(
            interceptors=interceptors,
            options=[
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.min_ping_interval_without_data_ms", 5000),
                # Without this a second node on the same port binds too and shares the traffic.
                ("grpc.so_reuseport", 0),
            ],
        )
        admin = AdminServicer(
            self,
            self._live_executors,
            self.membership,
            executor_health=lambda: self.hub.dispatcher.executor_health if self.hub is not None else {},
        )
        pb_grpc.add_AdminServicer_to_server(admin, server)
        self.hub = ExecutorHub(self, self.core.dispatcher)
        logs = LogsServicer(self, self.hub)
        if self.http_api is not None:
            # The HTTP API calls the same servicer through the same damage guard and authorization: its own
            # interceptor instance (each caches the handlers it wrapped), the same authenticator
            # settings, token verifier and refusal log. Not the gRPC metrics interceptor: those
            # count gRPC traffic.
            local = [DamagedGuard(lambda: self.store_damaged)] + (
                [AuthInterceptor(Authenticator(self.tokens, auth.subjects), self.refusals)]
                if auth is not None
                else []
            )
            self.http_api.attach(LocalCalls(admin, local, logs))
        if obs is not None:
            self.hub.on_results = obs.observe_results
            self.hub.on_lateness = obs.metrics.observe_start_lateness
        pb_grpc.add_ExecutorServiceServicer_to_server(ExecutorServicer(self.hub), server)
        pb_grpc.add_LogsServicer_to_server(logs, server)
        self.hub.start()
        self.alert_loop = AlertLoop(
            self,
            self.config.alerts,
            self.config.name,
            start_delays=self.start_delays,
            fleet=self._fleet,
        )
        self.alert_loop.start()
        log.info("node %s %s", self.node_id, describe(self.config.alerts))
        for note in self.config.alerts.deprecated:
            log.warning("config: %s", note)
        peer_check = PeerCheck(
            self.node_id,
            self._peer_grpc,
            lambda: self.replica.last_applied,
            self._own_sum,
            node_client_tls(self.config),
            retention=self.retention.fingerprint(),
        )
        peer_checking = asyncio.ensure_future(self._peer_check_loop(peer_check))
        format_polling = asyncio.ensure_future(self._format_loop(peer_check))
        self._health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        await self._health.set("", health_pb2.HealthCheckResponse.SERVING)
        await self._health.set(ADMIN_SERVICE, health_pb2.HealthCheckResponse.SERVING)
        await self._health.set(LEADER_HEALTH_SERVICE, health_pb2.HealthCheckResponse.NOT_SERVING)
        # Reflection lets stock tools (grpcurl, grpc_cli) list and call the services without the
        # .proto files.
        reflection.enable_server_reflection(
            (
                pb.DESCRIPTOR.services_by_name["Admin"].full_name,
                pb.DESCRIPTOR.services_by_name["ExecutorService"].full_name,
                pb.DESCRIPTOR.services_by_name["Logs"].full_name,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ),
            server,
        )
        try:
            if self.server_tls is not None:
                bound = server.add_secure_port(self.me.grpc_listen, self.server_tls.credentials())
            else:
                bound = server.add_insecure_port(self.me.grpc_listen)
        except RuntimeError:  # grpc's "Failed to bind to address"
            bound = 0
        if not bound:
            raise CannotStart(f"cannot listen on the gRPC address {self.me.grpc_listen}: the port is in use")
        await server.start()
        self._server = server
        log.info(
            "node %s serving gRPC on %s (advertised as %s), %s",
            self.node_id,
            self.me.grpc_listen,
            self.me.grpc,
            self._transport_description(),
        )
        self.membership.start()
        clock_task = asyncio.ensure_future(self._watch_clock())
        leader_health = asyncio.ensure_future(self._leader_health_loop())
        try:
            if obs is not None:
                await obs.start()
            # Until stopped, or until the store fails (then the caller exits non-zero).
            waits = [asyncio.ensure_future(self._failed_event.wait())]
            waits.append(
                asyncio.ensure_future(server.wait_for_termination() if stop is None else stop.wait())
            )
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
        finally:
            clock_task.cancel()
            leader_health.cancel()
            # Hand leadership over first: stopping the gRPC server waits up to its grace period,
            # and the cluster should not wait that long for a leader.
            await asyncio.to_thread(self.step_down)
            peer_checking.cancel()
            format_polling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await peer_checking
            with contextlib.suppress(asyncio.CancelledError):
                await format_polling
            await peer_check.close()
            await self.membership.stop()
            await self.alert_loop.stop()
            if obs is not None:
                await obs.stop()
            await server.stop(grace=1.0)

    def leads_for_health(self) -> bool:
        """Whether the Leader health service should say SERVING: Raft says this node leads, it
        has heard from a majority within :data:`LEADER_CONTACT_MAX_MS`, and its store and clock
        are sound. A report for load balancers and probes; reads decide by the read barrier."""
        consensus = self.consensus
        if consensus is None or not consensus.is_leader() or self.store_damaged:
            return False
        if self.clock_watch.faulty():
            return False
        age = consensus.status().contact_age_ms
        return 0 <= age <= LEADER_CONTACT_MAX_MS

    async def _leader_health_loop(self) -> None:
        """Keep the Leader health service in step with :meth:`leads_for_health` (leadership
        changes set it at once too, see _on_leadership; this catches a leader cut off)."""
        serving: bool | None = None
        while True:
            await asyncio.sleep(CLOCK_WATCH_PERIOD_S)
            try:
                now = await asyncio.to_thread(self.leads_for_health)
                health_servicer = self._health
                if now != serving and health_servicer is not None and self.failure is None:
                    serving = now
                    await health_servicer.set(
                        LEADER_HEALTH_SERVICE,
                        health_pb2.HealthCheckResponse.SERVING
                        if now
                        else health_pb2.HealthCheckResponse.NOT_SERVING,
                    )
            except Exception:
                log.exception("leader health check failed")

    async def _watch_clock(self) -> None:
        """While this node leads with a damaged store, or with a clock off the majority's by more
        than max_clock_skew, hand leadership to a follower (Raft TimeoutNow to the most caught-up
        one; a follower the leader found off does not campaign, so it is not elected). The driver
        and the gate have stopped stamping already (at the first read of the stepped clock, or
        when the damage was found)."""
        handed_at = 0.0
        while True:
            await asyncio.sleep(CLOCK_WATCH_PERIOD_S)
            try:
                self._members = max(1, len(self._peer_list()) + 1)
                raft = self.raft_node
                if raft is None or self.failure is not None or not raft.is_leader():
                    continue
                view = self.clock_watch.view(leading=True)
                if not (view.faulty or self.store_damaged):
                    continue
                if self.clock.monotonic() - handed_at < STEP_DOWN_TIMEOUT_S:
                    continue
                handed_at = self.clock.monotonic()
                if self.store_damaged:
                    # _damaged asked once; a hand-over that failed (no caught-up follower then)
                    # is asked again here until another node leads.
                    log.warning("node %s leads with a damaged store: handing leadership over", self.node_id)
                    await asyncio.to_thread(raft.hand_over, STEP_DOWN_TIMEOUT_S)
                    continue
                log.warning(
                    "node %s leads with a clock %+.1f s off the majority's (max_clock_skew %.1f s; "
                    "peers' clocks minus this one, ms: %s): handing leadership over",
                    self.node_id,
                    (view.skew_ms or 0) / 1000,
                    self.config.scheduler.max_clock_skew_ms / 1000,
                    view.peers,
                )
                new = await asyncio.to_thread(raft.hand_over, STEP_DOWN_TIMEOUT_S)
                if new is not None:
                    log.info("node %s handed leadership to %s", self.node_id, self._addr_to_id(new) or new)
            except Exception:
                log.exception("clock watch failed")

    async def _peer_check_loop(self, check: PeerCheck) -> None:
        """Compare this node's content with its peers' (:mod:`raftsched.rpc.peercheck`) soon after
        start-up, then every ``storage.verify_every``; a majority that disagrees with it makes it
        unhealthy like a failed verify (:meth:`_damaged`)."""
        every = self._verify_every_s
        await asyncio.sleep(min(PEER_CHECK_FIRST_S, every) if every else PEER_CHECK_FIRST_S)
        while not self.store_damaged:
            try:
                why = await check.check_once()
            except Exception as exc:  # a peer's odd answer must not end the loop
                log.debug("node %s: peer check failed: %r", self.node_id, exc)
                why = ""
            if why:
                path = str(self.me.data_dir / "state" / "data.mdb")
                await asyncio.to_thread(self._damaged, StoreDamaged(path, why, rebuild_remedy(self.node_id)))
                return
            if not every:
                return
            await asyncio.sleep(every)

    async def _format_loop(self, check: PeerCheck) -> None:
        """While this node leads, ask the other voters every :data:`FORMAT_POLL_S` which command
        format they apply (:mod:`raftsched.leader.formats`: the leader proposes the columnar
        bodies only while all of them apply them); a follower forgets what it heard."""
        formats = self.core.member_formats
        assert formats is not None
        while True:
            raft = self.raft_node
            if raft is not None and self.failure is None and raft.is_leader():
                try:
                    heard = await check.formats()
                except Exception as exc:  # a peer's odd answer must not end the loop
                    log.debug("node %s: format poll failed: %r", self.node_id, exc)
                    heard = {}
                before = formats.all_apply()
                formats.update(heard)
                if formats.all_apply() != before:
                    log.info(
                        "node %s: %s",
                        self.node_id,
                        f"every voter applies command format {COLUMNS_FORMAT}: proposing the columnar bodies"
                        if not before
                        else f"voters {', '.join(formats.unknown_or_older(COLUMNS_FORMAT))} do not report "
                        f"command format {COLUMNS_FORMAT}: back to today's bodies",
                    )
            else:
                formats.forget()
            await asyncio.sleep(FORMAT_POLL_S)

    def _peer_grpc(self) -> list[tuple[str, str]]:
        """``(id, gRPC address)`` of every other voter."""
        out = []
        for node_id, _raft in self._peer_list():
            member = self.state.membership.get(node_id)
            grpc_addr = member.grpc if member is not None else None
            if not grpc_addr:
                grpc_addr = next((n.grpc for n in self.config.nodes if n.id == node_id), None)
            if grpc_addr:
                out.append((node_id, grpc_addr))
        return out

    def _own_sum(self, index: int) -> str:
        value = self.replica.recent_sums.get(index)
        return "" if value is None else f"{value:032x}"

    def _fleet(self, now_ms: int) -> FleetView:
        """The leader's fleet view for the health alerts (on the event loop, the dispatcher's)."""
        hub = self.hub
        if hub is None:
            return FleetView(now_ms)
        view = self.clock_watch.view(leading=True)
        names = {peer: self._addr_to_id(peer) or peer for peer in view.peers}
        return fleet_view(hub.dispatcher, now_ms, view, names)

    def _live_executors(self) -> dict[str, tuple[int, str]] | None:
        return self.hub.live_view() if self.hub is not None else None

    def reload_tls(self) -> bool:
        """Re-read the ``[tls]`` certificate, key and CA files (what SIGHUP does for
        ``raftsched-node``): handshakes from now on use them; open connections are not cut.

        Returns True if the new files are in use. A file that cannot be read or does not match
        is logged and the certificates in use stay in use (False). The file paths are the ones
        the node started with; the config file itself is not read again.
        """
        if self.server_tls is None:
            log.warning("TLS reload asked for, but this node has no [tls]: nothing to reload")
            return False
        try:
            summary = self.server_tls.reload()
            if self.http_tls is not None:
                self.http_tls.reload()
        except ConfigError as bad:
            log.error("TLS reload failed; the current certificate stays in use: %s", "; ".join(bad.problems))
            return False
        log.info("TLS certificates reloaded: new handshakes present %s", summary)
        return True

    def _transport_description(self) -> str:
        tls = self.server_tls
        if tls is None:
            return "plaintext (no [tls])"
        clients = (
            "client certificates required" if tls.settings.require_client_cert else "no client certificates"
        )
        return f"TLS ({clients}; certificate {tls.summary})"

    def _flush_loop(self) -> None:
        next_verify = self.clock.monotonic() + self._verify_every_s
        next_release = self.clock.monotonic() + PAGES_RELEASE_S
        while not self._flusher_stop.wait(1.0):
            gc.freeze()  # cheap (moves the tracked objects to the permanent generation)
            try:
                self.store.flush()
                if self.clock.monotonic() >= next_release:
                    # Mapped store pages this node read (B-tree walks of every write, scans) count
                    # in its RSS until dropped: ~400 B per task at 1,000,000 tasks.
                    self.store.release_pages()
                    next_release = self.clock.monotonic() + PAGES_RELEASE_S
            except Exception:
                log.exception("periodic LMDB flush failed")
            if self._verify_every_s and not self.store_damaged and self.clock.monotonic() >= next_verify:
                self.verify_store()
                next_verify = self.clock.monotonic() + self._verify_every_s

    def verify_store(self) -> bool:
        """Read the whole committed store and check it against its checksum (``storage.verify_every``
        runs this periodically; at start-up the constructor does). False, and the node unhealthy,
        if it is damaged. Any thread but the event loop's (it reads the whole store)."""
        try:
            checked = self.store.verify()
        except StoreDamaged as exc:
            self._damaged(exc.with_remedy(rebuild_remedy(self.node_id)))
            return False
        finally:
            self.store.release_pages()  # the verify read every page
        log.debug(
            "node %s: store verified at index %d (%d entries)",
            self.node_id,
            checked.applied_index,
            checked.pairs,
        )
        return True

    def _damaged(self, exc: StoreDamaged) -> None:
        """The stored state was found damaged while running: say it once, stop serving reads from
        it (:class:`raftsched.rpc.plumbing.DamagedGuard`), report not ready (health NOT_SERVING,
        ``/readyz``, ``store_damaged`` in status, ``raftsched_store_damaged``), and hand over
        leadership and stop campaigning. It stays a Raft follower (its journal is sound) until
        an operator restarts it with ``--rebuild``."""
        if self.store_damaged:
            return
        self.store_damaged = str(exc)
        log.critical(
            "node %s: its stored state is damaged, so it serves no reads, does not lead and reports "
            "not ready: %s",
            self.node_id,
            exc,
        )
        self._health_all(serving=False)
        loop, alerts = self._loop, self.alert_loop
        if loop is not None and alerts is not None:
            at_ms = self.clock.now_ms()
            loop.call_soon_threadsafe(
                alerts.raise_node_alert, STORE_DAMAGED, self.node_id, self.store_damaged, at_ms
            )
        raft = self.raft_node
        if raft is not None and self.failure is None:
            raft.step_down(STEP_DOWN_TIMEOUT_S)  # also holds its campaigns for good

    def step_down(self, timeout_s: float = STEP_DOWN_TIMEOUT_S) -> None:
        """Stop campaigning and, when leading, hand leadership to a caught-up follower, so a
        planned stop does not wait for an election timeout. Blocks up to ``timeout_s``."""
        raft = self.raft_node
        if raft is None or self.failure is not None:
            return
        leading = raft.is_leader()
        new = raft.step_down(timeout_s)
        if leading:
            if new is not None:
                log.info(
                    "node %s handed leadership to %s before stopping",
                    self.node_id,
                    self._addr_to_id(new) or new,
                )
            elif any(p.connected for p in raft.status().peers):
                log.warning(
                    "node %s: no follower took over within %.1f s; stopping anyway", self.node_id, timeout_s
                )
            else:
                log.info("node %s leads no connected peer: stopping without a hand-over", self.node_id)

    def stop(self) -> None:
        """Stop the driver, leave the Raft cluster and close the store; idempotent."""
        if self._flusher_stop.is_set():
            return
        self._flusher_stop.set()
        self.step_down()  # a planned stop hands leadership over instead of waiting for a timeout
        if self.observability is not None:
            self.observability.close()  # a port bound by start() but never served
        if self.driver_thread is not None:
            self.driver_thread.stop()
        if self.consensus is not None:
            self.consensus.destroy()
        if self.failure is None:  # after a store failure nothing more can be committed
            self.replica.end_of_tick()
        self.store.close()

    # -- wiring ----------------------------------------------------------------------------------

    def propose(self, data: bytes, callback: ProposeCallback, on_commit: CommitHook | None = None) -> None:
        """Propose to this node's consensus layer (see :class:`raftsched.abc.ConsensusNode`);
        before :meth:`start` the proposal fails as ``unavailable``."""
        consensus = self.consensus
        if consensus is None:
            callback(None, ProposeError("unavailable", f"{self.node_id} has not joined the cluster yet"))
            return
        consensus.propose(data, callback, on_commit)

    def propose_barrier(self, data: bytes, callback: BarrierCallback) -> None:
        """A read barrier (see :meth:`raftsched.abc.ConsensusNode.propose_barrier`); before
        :meth:`start` it fails as ``unavailable``."""
        consensus = self.consensus
        if consensus is None:
            callback(0, ProposeError("unavailable", f"{self.node_id} has not joined the cluster yet"))
            return
        consensus.propose_barrier(data, callback)

    def confirm_read(self) -> int:
        """Blocking, from a worker thread: one read barrier (``ReadIndex.confirm``) on the node's
        event loop; its log index once this node's state covers every write acknowledged before
        the call. Raises Unavailable ("not sure I still lead") or NotLeader."""
        loop = self._loop
        if loop is None:
            raise Unavailable(f"{self.node_id} is starting; retry shortly")
        future = asyncio.run_coroutine_threadsafe(self.reads.confirm(), loop)
        try:
            return future.result(timeout=self.reads.timeout_s + 1.0)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise Unavailable("not sure I still lead; retry") from None

    def _leads_now(self) -> bool:
        gate: LeaderGate = self.gate
        return gate.leading_and_ready()

    def stale_read_info(self) -> ReadInfo:
        """How fresh this node's own state is, for a stale read's reply (raftsched.readinfo)."""
        raft = self.consensus.status() if self.consensus is not None else RaftStatus()
        applied = self.replica.last_applied
        return ReadInfo(False, self.node_id, applied, max(applied, raft.commit_index), raft.contact_age_ms)

    def token_last_used(self, token_id: str) -> int:
        return self.tokens.last_used.get(token_id, 0)

    def _driver_effects(self, effects: tuple[Effect, ...]) -> None:
        """The applier's effects, on its thread: the node's own observers, then the driver's thread."""
        if self._bootstrap_token is not None and self._loop is not None:
            for effect in effects:
                if isinstance(effect, BarrierCommitted) and effect.node_id == self.node_id:
                    self._loop.call_soon_threadsafe(self._seed_bootstrap_soon)
        if self.driver.leading:
            now = self.clock.now_ms()
            epoch = self.driver.epoch
            # Run-length encoded, one lock per entry: one record per nominal time, not per fire.
            nominals = Counter(
                effect.nominal_ms
                for effect in effects
                if isinstance(effect, AttemptReady) and effect.shard == 0 and effect.epoch == epoch
            )
            for effect in effects:
                if isinstance(effect, ReadyColumns):  # (only ever of this leadership's entries)
                    nominals.update(effect.nominals)
            if nominals:
                self.apply_lateness.record_runs([(n, now - n, count) for n, count in nominals.items()])
        if self.driver_thread is not None:
            self.driver_thread.effects_applied(effects)

    def _dispatcher_effects(self, effects: tuple[Effect, ...]) -> None:
        """The applier's effects, to the dispatcher on the event loop (the executor service's)."""
        if self.hub is not None:
            self.hub.effects_threadsafe(effects)

    def _seed_bootstrap_soon(self) -> None:
        task = asyncio.get_running_loop().create_task(self._seed_bootstrap())
        self._seeding = task  # keep a reference until it is done

    async def _seed_bootstrap(self) -> None:
        """As a new leader: create the ``[auth] bootstrap_token_file`` token as an admin token,
        unless a token of its id exists already (created before, or revoked: then it stays so)."""
        token = self._bootstrap_token
        assert token is not None
        tid = token_id(token)
        if self.state.access.get(tid) is not None:
            return
        loop = asyncio.get_running_loop()
        body = await loop.run_in_executor(
            None,
            lambda: create_command(
                token,
                Role.ADMIN,
                [],
                ttl_ms=0,
                description="bootstrap admin ([auth] bootstrap_token_file)",
                created_by="bootstrap",
            ),
        )
        for _ in range(50):  # the driver may need a moment after its barrier to be ready
            if self.state.access.get(tid) is not None:
                return
            try:
                stamp = self.gate.stamp()
            except RaftschedError:
                await asyncio.sleep(0.1)
                continue
            cmd = logpb.Command(idempotency_key=f"bootstrap-token-{tid}", **stamp.as_kwargs())
            cmd.create_token.CopyFrom(body)
            try:
                await propose_and_wait(self, codec.encode_command(cmd))
                log.info("bootstrap admin token %s created", tid)
                return
            except RaftschedError as exc:
                if exc.code in ("already_exists", "not_leader", "stale_epoch"):
                    return
                await asyncio.sleep(0.1)
        log.warning("could not create the bootstrap admin token %s; a later leader will retry", tid)

    def _leadership(self, change: Leadership) -> None:
        log.info(
            "node %s %s (term %d, leader %s)",
            self.node_id,
            "became the leader" if change.is_leader else "is a follower",
            change.epoch,
            change.leader_id or "unknown",
            extra=leadership_fields(change.epoch, node=self.node_id, leader=change.leader_id),
        )
        if self.driver_thread is not None:
            self.driver_thread.leadership_changed(change.is_leader, change.epoch)
        if self.hub is not None:
            self.hub.leadership_threadsafe(change.is_leader)
        loop, health_servicer = self._loop, self._health
        if loop is not None and health_servicer is not None:
            status = (
                health_pb2.HealthCheckResponse.SERVING
                if change.is_leader
                else health_pb2.HealthCheckResponse.NOT_SERVING
            )
            asyncio.run_coroutine_threadsafe(health_servicer.set(LEADER_HEALTH_SERVICE, status), loop)

    def _commit_lateness(self, runs: list[tuple[int, int, int]]) -> None:
        """``(nominal_ms, lateness_ms, count)`` per nominal time of a committed fire batch (the
        consensus thread)."""
        self.lateness.record_runs(runs)
        if self.observability is not None:
            self.observability.observe_commit_lateness(runs)

    def _store_failed(self, exc: BaseException) -> None:
        """The store cannot take writes (applier thread; the consensus node has already left the
        Raft cluster): say so once, loudly, report not ready, and end :meth:`serve`."""
        self.failure = exc
        cause = exc.cause if isinstance(exc, StoreFailed) else exc
        classified = self.store.failure()  # a commit's LMDB error, as the store classified it
        if not isinstance(cause, StoreDamaged) and isinstance(classified, StoreDamaged):
            cause = classified
        if isinstance(cause, StoreDamaged):
            self.failure = damaged = cause.with_remedy(rebuild_remedy(self.node_id))
            self.store_damaged = str(damaged)
            log.critical(
                "node %s stopped: its state store is damaged, so it left the Raft cluster and applies "
                "nothing more: %s",
                self.node_id,
                damaged,
            )
        elif isinstance(exc, FormatTooNew):
            log.critical(
                "node %s stopped: %s, so it left the Raft cluster and applies nothing more. Upgrade "
                "raftsched on this node and restart it: it replays the Raft log from there, nothing "
                "is lost",
                self.node_id,
                exc,
            )
        else:
            self._log_store_failure(exc)
        self._not_ready()

    def _log_store_failure(self, exc: BaseException) -> None:
        cause = exc.cause if isinstance(exc, StoreFailed) else exc
        usage = self.store.usage()
        log.critical(
            "node %s stopped: its state store cannot take writes (%s: %s; %d of %d bytes used), so it "
            "left the Raft cluster and a healthy node leads. Free disk space or raise "
            "storage.map_size, then restart it: it replays the Raft log and catches up, nothing is lost",
            self.node_id,
            type(cause).__name__,
            cause,
            usage.used_bytes,
            usage.map_bytes,
        )

    def _health_all(self, serving: bool) -> None:
        loop, health_servicer = self._loop, self._health
        if loop is None or health_servicer is None:
            return
        status = (
            health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        )

        async def set_all() -> None:
            for service in ("", ADMIN_SERVICE, LEADER_HEALTH_SERVICE):
                await health_servicer.set(service, status)

        asyncio.run_coroutine_threadsafe(set_all(), loop)

    def _not_ready(self) -> None:
        loop, health_servicer, event = self._loop, self._health, self._failed_event
        if loop is not None and health_servicer is not None and event is not None:
            not_serving = health_pb2.HealthCheckResponse.NOT_SERVING

            async def not_ready() -> None:
                for service in ("", ADMIN_SERVICE, LEADER_HEALTH_SERVICE):
                    await health_servicer.set(service, not_serving)
                event.set()

            asyncio.run_coroutine_threadsafe(not_ready(), loop)

    def _write_snapshot(self, f: BinaryIO) -> None:
        started = self.clock.monotonic()
        self.store.write_snapshot(f)
        if self.observability is not None:
            self.observability.observe_snapshot(self.clock.monotonic() - started)

    def _load_snapshot(self, path: Path, offset: int) -> None:
        with self.state.lock:
            self.store.load_snapshot_copy(path, offset, validate=check_stored_format)
            self.replica.reset_from_store()

    def _addr_to_id(self, raft_addr: str) -> str | None:
        # pysyncobj names a peer by the address this node dials it at (its raft_via entry).
        node = self.config.peer_by_raft(self.node_id, raft_addr)
        if node is not None:
            return node.id
        for m in self.state.membership.known():
            if m.raft == raft_addr or self.dial_address(m.raft) == raft_addr:
                return m.id
        return None

    def dial_address(self, raft: str) -> str:
        """Where this node dials the node whose Raft identity is ``raft``: its ``raft_via``
        entry for that node's id, else ``raft`` itself."""
        via = dict(self.me.raft_via)
        if not via:
            return raft
        node = self.config.node_by_raft(raft)
        nid = (
            node.id
            if node is not None
            else next((m.id for m in self.state.membership.known() if m.raft == raft), None)
        )
        return via.get(nid, raft) if nid is not None else raft

    def _voters(self) -> list[logpb.Member]:
        """The replicated membership as Raft should see it: a node being added counts, a node
        being removed does not (either way the Raft entry may already be appended)."""
        book = self.state.membership
        pending = book.pending()
        gone = pending.member.id if pending is not None and pending.kind == REMOVE else None
        return [m for m in book.known() if m.id != gone]

    def _start_peers(self) -> list[str]:
        """The Raft peers to start with: the replicated membership once recorded (the truth),
        else the config file (a new cluster, or a node joining one)."""
        if not self.state.membership.seeded:
            return self.config.raft_peers(self.node_id)
        return [self.dial_address(m.raft) for m in self._voters() if m.id != self.node_id]

    def _peer_list(self) -> list[tuple[str, str]]:
        """``(id, raft identity)`` of every other voter: the replicated membership, else the config."""
        if self.state.membership.seeded:
            return [(m.id, m.raft) for m in self._voters() if m.id != self.node_id]
        return [(n.id, n.raft) for n in self.config.nodes if n.id != self.node_id]

    def _cluster_view(self) -> list[str] | None:
        if not self.state.membership.seeded:
            return None
        return [self.dial_address(m.raft) for m in self._voters() if m.id != self.node_id]

    def http_of_grpc(self, grpc_address: str) -> str | None:
        """The HTTP listener address of the node whose gRPC address is ``grpc_address`` (the
        replicated membership first, then the config file); None if it has none or is unknown."""
        for m in self.state.membership.known():
            if m.grpc == grpc_address and m.http:
                return m.http
        return next((n.http for n in self.config.nodes if n.grpc == grpc_address and n.http), None)

    def leader_grpc(self) -> str | None:
        """The gRPC address of the leader this node follows (None while unknown)."""
        leader_id = self.consensus.leader_id() if self.consensus is not None else None
        if not leader_id:
            return None
        member = self.state.membership.get(leader_id)
        if member is not None:
            return member.grpc
        return next((n.grpc for n in self.config.nodes if n.id == leader_id), None)

    # -- status ----------------------------------------------------------------------------------

    def node_status(
        self, lateness_since_ms: int = 0, include_digest: bool = False, chain_at_index: int = 0
    ) -> pb.NodeStatusReply:
        c = self.consensus
        raft = c.status() if c is not None else RaftStatus()
        leader_id = c.leader_id() if c is not None else None
        with self.state.view() as v:  # the figures of one applied index
            reply = pb.NodeStatusReply(
                node_id=self.node_id,
                raft=self.me.raft,
                grpc=self.me.grpc,
                role=raft.role,
                leader_id=leader_id or "",
                leader_grpc=self.leader_grpc() or "",
                term=raft.term,
                commit_index=raft.commit_index,
                applied_index=self.replica.last_applied,
                tasks=len(v.tasks),
                active_runs=v.active_count,
                max_leader_now_ms=v.max_now_ms,
                max_epoch=self.state.max_epoch,
                log_len=raft.log_len,
                fires_committed=self.lateness.total,
                rss_bytes=rss_bytes(),
                chain=self.state.chain.hex(),
                command_format=codec.COMMAND_FORMAT,
                snapshot_format=codec.SNAPSHOT_FORMAT,
                build_version=__version__,
                state_format=self.state.state_format,
                contact_age_ms=raft.contact_age_ms if raft.contact_age_ms >= 0 else None,
                read_barriers=self.reads.barriers,
                reads_refused=self.reads.refused,
                store_damaged=self.store_damaged,
            )
            clock = self.clock_watch.view(leading=raft.role == "leader")
            reply.clock_known = clock.offset_ms is not None
            reply.clock_offset_ms = clock.offset_ms or 0
            reply.clock_skew_ms = clock.skew_ms or 0
            reply.clock_faulty = clock.faulty
            self._add_peer_links(reply.raft_peers, raft)
            at = self.replica.recent_chains.get(chain_at_index) if chain_at_index else None
            if at is not None:
                reply.chain_at_index = at.hex()
            reply.retention = self.retention.fingerprint()
            content = self.replica.recent_sums.get(chain_at_index) if chain_at_index else None
            if content is not None:
                reply.content_sum_at_index = f"{content:032x}"
            record = self.state.membership.record
            reply.membership.CopyFrom(record)
            reply.config_mismatch = describe_mismatch(self.config, record)
        if self.raft_node is not None:
            reply.raft_members.extend(self.raft_node.member_addresses())
        if lateness_since_ms > 0:
            # Sorting up to a million samples is not for the frequent status polls (leader
            # discovery): only a caller that asks for a window gets the summaries.
            reply.commit_lateness.CopyFrom(self.lateness.summary(lateness_since_ms))
            reply.apply_lateness.CopyFrom(self.apply_lateness.summary(lateness_since_ms))
        if include_digest:
            reply.state_digest = self.state.digest()
            reply.content_digest, reply.accepted_commands = self.state.content_digest()
        return reply

    def cluster_status(self) -> pb.ClusterStatusReply:
        out = pb.ClusterStatusReply(self=self.node_status())
        raft = self.consensus.status() if self.consensus is not None else RaftStatus()
        self._add_peer_links(out.peers, raft)
        return out

    def _add_peer_links(
        self, peers: RepeatedCompositeFieldContainer[pb.PeerStatus], raft: RaftStatus
    ) -> None:
        """Add each other voter's Raft link as ``raft`` reports it to the repeated ``peers``."""
        for node_id, raft_addr in self._peer_list():
            link = raft.peer(self.dial_address(raft_addr))
            peers.add(
                node_id=node_id,
                raft=raft_addr,
                connected=link.connected,
                match_index=link.match_index,
                refused=link.refused,
            )
