"""The chaos harness: a real cluster and executor fleet on loopback, and a fault schedule.

:class:`ChaosHarness` starts 3 (or 5) ``raftsched-node`` processes (:class:`LocalCluster`) and 2
``raftsched.executor`` processes with fast leases, installs per-second cron tasks whose command
appends one line per execution to a marker file::

    execution_id task nominal_iso shard attempt start_wall_ns executor

and injects faults, one at a time. After each fault it waits, with deadlines, for recovery: a
leader among the live nodes, every live node caught up with the leader's commit index, every
executor registered with the current leader (its log names the leader's epoch) and executing
fires decided after the fault. Faults:

* :meth:`~ChaosHarness.kill_leader` — SIGKILL the leader; restart it once a new leader has fired;
* :meth:`~ChaosHarness.kill_follower` — SIGKILL a follower, restart it;
* :meth:`~ChaosHarness.kill_executor` — SIGKILL an executor while an attempt runs on it, restart it;
* :meth:`~ChaosHarness.pause_leader` — SIGSTOP the leader past the election timeout, then SIGCONT;
* :meth:`~ChaosHarness.restart_node` — SIGTERM a node (the leader) and start it from its data dir;
* :meth:`~ChaosHarness.wipe_follower` — SIGKILL a follower, delete its data dir, start it empty;
  it catches up from a snapshot or from the log (the report notes which);
* :meth:`~ChaosHarness.skew_leader` — restart a follower with its clock off by ``offset_ms``
  (``RAFTSCHED_TEST_CLOCK_OFFSET_MS``), SIGKILL leaders until it leads, let it fire, then restart
  it with a true clock;
* :meth:`~ChaosHarness.step_leader_clock` — step the running leader's wall clock (its offset file,
  ``RAFTSCHED_TEST_CLOCK_OFFSET_FILE``), optionally SIGKILL it right after; measures the
  hand-over, the time to on-time executions and the committed leader time left behind;
* :meth:`~ChaosHarness.add_node` — add a node (``raftsched cluster add-node``) and start it
  empty with ``--join``; it catches up from the leader;
* :meth:`~ChaosHarness.remove_node` — remove a follower from the membership, then stop it;
* :meth:`~ChaosHarness.replace_node` — SIGKILL a follower, remove it, add a fresh node;
* :meth:`~ChaosHarness.partition_leader` — cut the leader's Raft links to every follower and
  (by default) the gRPC links of executors and clients to it, until the majority has elected and
  fired under a new leader and the old one has stepped down; then heal.

**Partitions** use TCP proxies (:mod:`raftsched.testing.chaos.netproxy`), not network namespaces: they
need no privileges, so they run wherever the suite runs. Every Raft link goes through a proxy
of its own, and every node's gRPC port through one front proxy. pysyncobj identifies a peer by
the address string the peer sends first, and of two nodes only the one whose address sorts after
the other's dials. So each node's ``raft`` (its identity) is ``127.0.0.2:port`` (nobody connects
there: the node listens on ``raft_bind`` 127.0.0.1:port, where the proxies dial), and the dialling
node reaches its peer through ``raft_via = {peer = "127.0.0.1:proxy"}``, which sorts before every
identity. A node added at runtime (:meth:`~ChaosHarness.add_node`) gets an identity that sorts
after every node's so far (``127.0.0.3``, ``127.0.0.4``, ...): it dials every member, each through
a proxy of its own, and nobody dials it, so its links can be cut like the others'. A node's
``grpc`` (what executors dial and redirects name) is its front proxy; it listens on
``grpc_bind``, where the harness observes it directly.

:func:`run_chaos` runs a schedule (:func:`ci_schedule`, :func:`soak_schedule`), heals everything,
runs :mod:`raftsched.testing.chaos.checker` and computes the figures. Every process it starts is stopped
when it returns or raises.
"""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from raftsched.client import Client
from raftsched.model import CronTrigger, Misfire, Overlap, TaskSpec
from raftsched.testing.chaos.checker import (
    ChaosReport,
    CheckSettings,
    ClockStepWindow,
    Execution,
    ExecutorFault,
    SkewWindow,
    TaskExpectation,
    analyse,
    parse_marker_line,
    read_markers,
    settle,
)
from raftsched.testing.chaos.netproxy import ProxyNet
from raftsched.testing.cluster import (
    TEST_CLOCK_OFFSET_ENV,
    TEST_CLOCK_OFFSET_FILE_ENV,
    LocalCluster,
    free_ports,
    stop_processes,
    wait_until,
)
from raftsched.timing.clock import SystemClock
from raftsched.v1 import raftsched_pb2 as pb

Progress = Callable[[str], None]

_MARK = (
    '"$RAFTSCHED_EXECUTION_ID $RAFTSCHED_TASK $RAFTSCHED_NOMINAL_TIME $RAFTSCHED_SHARD '
    '$RAFTSCHED_ATTEMPT $(date +%s%N) $RAFTSCHED_EXECUTOR"'
)
_REGISTERED = re.compile(r": registered with \S+ \(epoch (\d+),")
_DISCONNECTED = "finding the leader"
_LOG_PROBLEM = re.compile(r" (ERROR|CRITICAL) |^Traceback ")
# pysyncobj logs this after a paused leader resumes: it truncates entries and takes identical
# ones again (a pysyncobj "spurious truncation", docs/architecture.md §10); our replica guard
# never applies an index twice. A real divergence would show as unequal apply chains or state
# digests, which the checker tests after every run - so this line alone is reported, not counted as a problem.
_KNOWN_LIBRARY_NOISE = re.compile(r"CRITICAL pysyncobj\.syncobj: truncating already-applied log entries")


# -- what runs -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskPlan:
    """A per-second task of the suite. Its first attempt fails on purpose for nominal seconds
    whose last digit is in ``fail_digits`` (exit 3) or ``hang_digits`` (sleeps past the timeout)."""

    name: str
    shards: int = 1
    max_retries: int = 0
    timeout_ms: int = 0
    sleep_s: float = 0.0
    fail_digits: frozenset[int] = frozenset()
    hang_digits: frozenset[int] = frozenset()
    overlap: Overlap = Overlap.ALLOW
    misfire: Misfire = Misfire.LATEST

    def spec(self, marker: Path) -> TaskSpec:
        command = f"echo {_MARK} >> {shlex.quote(str(marker))}"
        if self.sleep_s:
            command += f"; sleep {self.sleep_s}"
        cases = [f"*{d}Z/1) exit 3 ;;" for d in sorted(self.fail_digits)]
        cases += [f"*{d}Z/1) exec sleep 5 ;;" for d in sorted(self.hang_digits)]
        if cases:
            command += '; case "$RAFTSCHED_NOMINAL_TIME/$RAFTSCHED_ATTEMPT" in ' + " ".join(cases) + " esac"
        return TaskSpec(
            self.name,
            CronTrigger("* * * * * *"),
            command=command,
            shards=self.shards,
            overlap=self.overlap,
            misfire=self.misfire,
            max_retries=self.max_retries,
            timeout_ms=self.timeout_ms,
        )

    def fails_by_design(self, nominal_ms: int, attempt: int) -> bool:
        digit = (nominal_ms // 1000) % 10
        return attempt == 1 and (digit in self.fail_digits or digit in self.hang_digits)

    def expectation(self) -> TaskExpectation:
        # Only a plain echo (no sleep, no designed failure) is known to end at once.
        instant = not (self.sleep_s or self.fail_digits or self.hang_digits)
        return TaskExpectation(self.name, self.shards, self.fails_by_design, 0 if instant else None)


SLOW = "chaos-slow"  # its attempts run ~1 s: the executor kill waits for one to be in flight
# Instant and overlap=skip: a fire skipped as overlapping is checked against what really ran
# (the other tasks allow overlap, so a stall's stale state could never show as a false skip).
OVERLAP = "chaos-overlap"

DEFAULT_TASKS: tuple[TaskPlan, ...] = (
    TaskPlan("chaos-tick"),
    TaskPlan("chaos-sharded", shards=3),
    TaskPlan(SLOW, shards=3, max_retries=1, sleep_s=1.0),
    TaskPlan(
        "chaos-retry",
        max_retries=2,
        timeout_ms=1500,
        fail_digits=frozenset({0, 5}),
        hang_digits=frozenset({3}),
    ),
    TaskPlan(OVERLAP, shards=2, overlap=Overlap.SKIP, misfire=Misfire.ALL),
)


@dataclass(frozen=True, slots=True)
class ChaosSettings:
    nodes: int = 3
    executors: int = 2
    slots: int = 8
    prefetch: int = 0  # each executor's --prefetch (0: none)
    lease_ms: int = 2000
    heartbeat_ms: int = 400
    retry_backoff_ms: int = 300
    # Small enough that the log is compacted within a CI run, so a wiped node can need a snapshot.
    log_compaction_min_entries: int = 50
    pause_s: float = 3.0  # SIGSTOP length: > leader_fallback_timeout (2 s) and the election timeout
    partitions: bool = True  # route Raft and gRPC links through proxies the harness can cut
    partition_s: float = 3.0  # shortest partition; it lasts until the old leader has stepped down
    skew_ms: int = 2000
    skew_hold_fires: int = 3  # seconds a skewed leader fires before it is restarted
    recovery_timeout_s: float = 60.0
    tasks: tuple[TaskPlan, ...] = DEFAULT_TASKS

    def extra_config(self) -> str:
        return (
            f"[scheduler]\nlease_ms = {self.lease_ms}\nheartbeat_ms = {self.heartbeat_ms}\n"
            f"retry_backoff_ms = {self.retry_backoff_ms}\nhistory_keep_count = 1000000\n"
            f"[raft]\nlog_compaction_min_entries = {self.log_compaction_min_entries}\n"
        )

    def check_settings(self) -> CheckSettings:
        return CheckSettings(lease_ms=self.lease_ms)

    def drain_budget_ms(self) -> int:
        """How long runs may legitimately stay unfinished after their task is disabled."""
        longest = max((p.timeout_ms or int(p.sleep_s * 1000)) for p in self.tasks)
        retries = max(p.max_retries for p in self.tasks)
        backoff = sum((self.retry_backoff_ms << i) * 12 // 10 for i in range(retries))
        return (retries + 1) * (longest + self.heartbeat_ms) + backoff


# -- what happened -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FaultEvent:
    kind: str
    target: str
    start_ms: int
    recovered_ms: int
    detail: str = ""

    def describe(self) -> str:
        took = (self.recovered_ms - self.start_ms) / 1000
        return f"{self.kind} {self.target}: recovered in {took:.1f} s" + (
            f" ({self.detail})" if self.detail else ""
        )


@dataclass(frozen=True, slots=True)
class Partition:
    node: str
    term: int
    cut_ms: int
    grpc_cut: bool
    new_leader: str
    new_term: int
    first_commit_ms: int  # cut to the first fire committed by the new leader
    step_down_ms: int  # cut to the isolated leader no longer calling itself leader
    healed_ms: int


@dataclass(frozen=True, slots=True)
class ClockStep:
    """The leader's wall clock stepped by ``offset_ms`` while it ran (issue 35 §5).

    ``killed``: the leader was SIGKILLed right after the step (its successor inherits whatever it
    committed). Times in ms from the step (from the kill when ``killed``): ``handover_ms`` until
    another node led, ``on_time_ms`` until the first execution of a later nominal time that
    started within :data:`ON_TIME_MS` of it (None: none within the recovery timeout).
    """

    node: str
    offset_ms: int
    step_ms: int
    from_ms: int  # the step, or the kill with ``killed``: what the times below count from
    killed: bool
    led_at_kill: bool  # killed while it still led (it had not handed over yet)
    new_leader: str  # "" if no other node led within the recovery timeout
    handover_ms: int | None
    on_time_ms: int | None
    max_leader_now_ahead_ms: int  # the newest committed leader time minus the wall clock, after


ON_TIME_MS = 1000  # an execution that starts within this of its nominal time is on time


@dataclass(frozen=True, slots=True)
class LeaderKill:
    node: str
    term: int
    kill_ms: int
    new_leader: str
    new_term: int
    first_commit_ms: int  # SIGKILL to the first fire committed by the new leader (its own report)


@dataclass
class ChaosResult:
    report: ChaosReport
    events: list[FaultEvent]
    leader_kills: list[LeaderKill]
    executor_faults: list[ExecutorFault]
    skews: list[SkewWindow]
    partitions: list[Partition]
    figures: dict[str, object]
    log_problems: list[str]
    seconds: float

    def describe(self) -> str:
        lines = [f"chaos run: {self.seconds:.0f} s, {len(self.events)} faults"]
        lines += [f"  {e.describe()}" for e in self.events]
        lines.append(self.report.summary())
        lines += [f"LOG: {p}" for p in self.log_problems]
        return "\n".join(lines)


# -- the marker file -----------------------------------------------------------------------------


class MarkerTail:
    """Reads the marker file incrementally (complete lines only; malformed ones are skipped
    here and reported by the checker, which rereads the whole file)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.executions: list[Execution] = []
        self._offset = 0
        self._partial = b""

    def poll(self) -> list[Execution]:
        if not self.path.exists():
            return self.executions
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        for raw in lines:
            try:
                self.executions.append(parse_marker_line(raw.decode(errors="replace")))
            except ValueError:
                continue
        return self.executions


# -- the harness ---------------------------------------------------------------------------------


class ChaosHarness:
    """The processes of one chaos run and the faults injected into them. Use as a context manager:
    leaving it stops every process (resumed first if paused)."""

    def __init__(
        self, base: Path, settings: ChaosSettings | None = None, progress: Progress | None = None
    ) -> None:
        self.settings = s = settings or ChaosSettings()
        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        self.net: ProxyNet | None = None
        if s.partitions:
            self.net = ProxyNet()
            try:
                self.cluster = _proxied_cluster(base / "cluster", s.nodes, self.net, s.extra_config())
            except BaseException:
                self.net.close()
                raise
        else:
            self.cluster = LocalCluster.create(base / "cluster", s.nodes, extra_config=s.extra_config())
        self.node_ids = [n.id for n in self.cluster.config.nodes]
        self.marker = base / "executions.log"
        self.tail = MarkerTail(self.marker)
        self.executors: dict[str, subprocess.Popen[bytes]] = {}
        self.executor_names = [f"ex{i + 1}" for i in range(s.executors)]
        self.node_env: dict[str, dict[str, str]] = {}
        self.paused: set[str] = set()
        self.isolated: set[str] = set()  # cut off by a partition
        self.partitions: list[Partition] = []
        self.events: list[FaultEvent] = []
        self.leader_kills: list[LeaderKill] = []
        self.executor_faults: list[ExecutorFault] = []
        self.skews: list[SkewWindow] = []
        self.clock_steps: list[ClockStep] = []
        # Every node's clock follows its own offset file (absent: no step), for step_leader_clock.
        self.cluster.env[TEST_CLOCK_OFFSET_FILE_ENV] = str(base / "clock-{name}")
        self.notes: list[str] = []
        self.clock = SystemClock()
        self.progress: Progress = progress or (lambda _msg: None)
        self._next_executor = 0
        self.node_args: dict[str, list[str]] = {}  # extra raftsched-node arguments (--join)
        self.removed: list[str] = []  # nodes removed from the membership
        self.planned_restarts: list[int] = []  # SIGTERM of the leader -> next leader's first fire, ms
        self._joined = 0

    # -- lifecycle ---------------------------------------------------------------------------------

    def __enter__(self) -> ChaosHarness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the nodes and executors, install the tasks, wait until every executor executes."""
        t0 = self.clock.now_ms()
        self.cluster.start()
        self.cluster.wait_for_leader(self.settings.recovery_timeout_s)
        for name in self.executor_names:
            self.start_executor(name)
        with Client(self.cluster.targets(), timeout=10) as client:
            for plan in self.settings.tasks:
                client.add_task(plan.spec(self.marker))
        self.await_recovery(t0, "startup")
        dead = sorted(set(self.node_ids) - set(self.cluster.alive()))
        if dead:
            raise RuntimeError(f"node(s) {', '.join(dead)} exited at startup (logs in {self.base})")
        wait_until(
            lambda: all(self.cluster.status(n).applied_index > 0 for n in self.node_ids),
            self.settings.recovery_timeout_s,
            0.05,
            "every node to be up and applying (a run must start with its whole cluster)",
        )
        self.progress(
            f"started {len(self.node_ids)} nodes, {len(self.executors)} executors in {self._since(t0)}"
        )

    def stop(self) -> None:
        try:
            for nid in list(self.paused):
                self.cluster.resume(nid)
            self.paused.clear()
            stop_processes(self.executors.values())
            self.cluster.stop()
        finally:
            if self.net is not None:
                self.net.close()

    def start_executor(self, name: str) -> None:
        log = open(self.base / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
        self.executors[name] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "raftsched.executor",
                "--cluster",
                ",".join(self.cluster.targets()),
                "--name",
                name,
                "--slots",
                str(self.settings.slots),
                *(["--prefetch", str(self.settings.prefetch)] if self.settings.prefetch else []),
                "--data-dir",
                str(self.base / name),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

    def start_node(self, node_id: str) -> None:
        self.cluster.start(
            node_id, extra_env=self.node_env.get(node_id), extra_args=self.node_args.get(node_id, ())
        )

    # -- observation -------------------------------------------------------------------------------

    def live_nodes(self) -> list[str]:
        """Running nodes that are neither paused nor cut off by a partition."""
        return [n for n in self.cluster.alive() if n not in self.paused and n not in self.isolated]

    def leader(self) -> str:
        return self.cluster.wait_for_leader(self.settings.recovery_timeout_s, among=self.live_nodes())

    def leader_and_term(self) -> tuple[str, int]:
        """The leader and its term, read from one status reply that says it leads.

        Reading the term after :meth:`leader` races an election: the deposed leader may already
        report the winner's term, and waiting for "a leader with a newer term" then waits for an
        election that never comes (a 5-node soak timed out on exactly that)."""

        def read() -> tuple[str, int] | None:
            leader = self.cluster.leader(self.live_nodes())
            if leader is None:
                return None
            st = self.cluster.status(leader)
            return (leader, int(st.term)) if st.role == "leader" else None

        return wait_until(read, self.settings.recovery_timeout_s, 0.05, "a leader and its term")

    def _new_leader_fired(
        self, candidates: list[str], term: int, before: dict[str, int], what: str
    ) -> tuple[str, int]:
        """Wait until one of ``candidates`` leads a term newer than ``term`` and has committed a
        fire since ``before`` (its ``fires_committed`` then); its id and term."""

        def fired() -> tuple[str, int] | None:
            for nid in candidates:
                try:
                    st = self.cluster.status(nid, timeout=0.5)
                except Exception:
                    continue
                if st.role == "leader" and st.term > term and st.fires_committed > before[nid]:
                    return nid, int(st.term)
            return None

        return wait_until(fired, self.settings.recovery_timeout_s, 0.02, what)

    def followers(self, leader: str) -> list[str]:
        return [n for n in self.live_nodes() if n != leader]

    def registered_epoch(self, name: str) -> int:
        """The epoch the executor last registered in, 0 if it has lost its leader since."""
        path = self.base / f"{name}.log"
        if not path.exists():
            return 0
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - 65536))
            text = f.read().decode(errors="replace")
        matches = list(_REGISTERED.finditer(text))
        if not matches or text.rfind(_DISCONNECTED) > matches[-1].start():
            return 0
        return int(matches[-1].group(1))

    def await_recovery(self, since_ms: int, what: str) -> None:
        """Wait until the cluster serves again after a fault that began at ``since_ms``: a leader
        among the live nodes, every live node caught up, every executor registered with the
        current leader and executing a fire whose nominal time is after ``since_ms``."""
        timeout = self.settings.recovery_timeout_s
        live = self.live_nodes()
        leader = self.cluster.wait_for_leader(timeout, among=live)
        target = self.cluster.status(leader).commit_index
        wait_until(
            lambda: all(self.cluster.status(n).applied_index >= target for n in live),
            timeout,
            0.1,
            f"{', '.join(live)} to apply index {target} ({what})",
        )

        def registered() -> bool:
            # Connected (registered, not disconnected since). The epoch a Register reply names
            # can trail the Raft term by a moment around a quick re-election, so it is not
            # compared; the next check proves the executor really runs fires again.
            if self.cluster.leader(live) is None:
                return False
            return all(
                self.executors[n].poll() is None and self.registered_epoch(n) > 0 for n in self.executor_names
            )

        wait_until(registered, timeout, 0.1, f"every executor to register with the leader ({what})")

        def executing() -> bool:
            fresh = {e.executor for e in self.tail.poll() if e.nominal_ms > since_ms}
            return fresh >= set(self.executor_names)

        wait_until(executing, timeout, 0.1, f"every executor to run fires after the fault ({what})")

    def _record(self, kind: str, target: str, start_ms: int, detail: str = "") -> None:
        event = FaultEvent(kind, target, start_ms, self.clock.now_ms(), detail)
        self.events.append(event)
        self.progress(event.describe())

    def _since(self, start_ms: int) -> str:
        return f"{(self.clock.now_ms() - start_ms) / 1000:.1f} s"

    # -- faults ------------------------------------------------------------------------------------

    def kill_leader(self) -> LeaderKill:
        """SIGKILL the leader; once a survivor leads a newer term and has committed a fire, restart
        the victim from its data dir and wait for recovery."""
        leader, term = self.leader_and_term()
        survivors = self.followers(leader)
        before = {n: self.cluster.status(n).fires_committed for n in survivors}
        kill_ms = self.clock.now_ms()
        t0 = time.monotonic()
        self.cluster.kill(leader, signal.SIGKILL)

        new_leader, new_term = self._new_leader_fired(
            survivors, term, before, "a new leader to commit a fire"
        )
        kill = LeaderKill(leader, term, kill_ms, new_leader, new_term, round((time.monotonic() - t0) * 1000))
        self.leader_kills.append(kill)
        self.start_node(leader)
        self.await_recovery(kill_ms, f"after SIGKILL of leader {leader}")
        self._record(
            "sigkill-leader",
            leader,
            kill_ms,
            f"term {term}; {new_leader} (term {new_term}) fired after {kill.first_commit_ms} ms",
        )
        return kill

    def kill_follower(self) -> None:
        leader = self.leader()
        victim = self.followers(leader)[0]
        start = self.clock.now_ms()
        self.cluster.kill(victim, signal.SIGKILL)
        self.start_node(victim)
        self.await_recovery(start, f"after SIGKILL of follower {victim}")
        self._record("sigkill-follower", victim, start)

    def kill_executor(self, name: str | None = None) -> ExecutorFault:
        """SIGKILL an executor while an attempt of the slow task runs on it; restart it at once.

        Unnamed, the victims take turns; if the ring gives the one whose turn it is no slow
        shard for a few seconds, whichever executor is running one is killed instead.
        """
        preferred = name or self.executor_names[self._next_executor % len(self.executor_names)]
        if name is None:
            self._next_executor += 1
        slow = next((p for p in self.settings.tasks if p.name == SLOW), None)
        running_ms = int((slow.sleep_s if slow else 0.5) * 1000 * 0.6)
        patience = time.monotonic() + 5.0

        def in_flight() -> Execution | None:
            now = self.clock.now_ms()
            anyone = name is None and time.monotonic() > patience
            return next(
                (
                    e
                    for e in reversed(self.tail.poll())
                    if (e.executor == preferred or anyone)
                    and e.task == SLOW
                    and now - running_ms <= e.start_ms <= now
                ),
                None,
            )

        running = wait_until(
            in_flight, self.settings.recovery_timeout_s, 0.02, f"an attempt running on {preferred}"
        )
        name = running.executor
        kill_ms = self.clock.now_ms()
        proc = self.executors[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        self.start_executor(name)
        self.await_recovery(kill_ms, f"after SIGKILL of executor {name}")
        fault = ExecutorFault(name, kill_ms, self.clock.now_ms())
        self.executor_faults.append(fault)
        self._record("sigkill-executor", name, kill_ms, f"mid-run: {running.execution_id}")
        return fault

    def pause_leader(self) -> None:
        """SIGSTOP the leader until another node leads and ``pause_s`` has passed, then SIGCONT."""
        leader, term = self.leader_and_term()
        others = self.followers(leader)
        start = self.clock.now_ms()
        self.cluster.pause(leader)
        self.paused.add(leader)
        try:
            new_leader = self.cluster.wait_for_leader(self.settings.recovery_timeout_s, among=others)
            pause_ms = int(self.settings.pause_s * 1000)
            wait_until(
                lambda: self.clock.now_ms() >= start + pause_ms, pause_ms / 1000 + 5, 0.05, "the pause"
            )
        finally:
            self.cluster.resume(leader)
            self.paused.discard(leader)
        resumed = self.clock.now_ms()
        wait_until(
            lambda: (st := self.cluster.status(leader)).role != "leader" or st.term > term,
            self.settings.recovery_timeout_s,
            0.05,
            f"{leader} to step down after SIGCONT",
        )
        self.await_recovery(resumed, f"after SIGSTOP/SIGCONT of leader {leader}")
        self._record(
            "sigstop-leader",
            leader,
            start,
            f"term {term}, paused {(resumed - start) / 1000:.1f} s; {new_leader} led meanwhile",
        )

    def restart_node(self, node_id: str | None = None) -> None:
        """A planned restart: SIGTERM a node (the leader unless named) and start it again from its
        data dir. When it led, the time from SIGTERM until another node leads a newer term and
        has committed a fire is recorded (it hands leadership over before it exits)."""
        leader, term = self.leader_and_term()
        victim = node_id or leader
        others = self.followers(victim)
        before = {n: self.cluster.status(n).fires_committed for n in others}
        start = self.clock.now_ms()
        t0 = time.monotonic()
        proc = self.cluster.procs[victim]
        proc.send_signal(signal.SIGTERM)
        detail = "SIGTERM, then started from its data dir"
        if victim == leader:
            new_leader, new_term = self._new_leader_fired(others, term, before, "the next leader to fire")
            gap = round((time.monotonic() - t0) * 1000)
            self.planned_restarts.append(gap)
            detail += f"; {new_leader} (term {new_term}) fired {gap} ms after the SIGTERM"
        self.cluster.kill(victim, signal.SIGTERM)  # waits for the exit
        self.start_node(victim)
        self.await_recovery(start, f"after restarting {victim}")
        self._record("restart", victim, start, detail)

    # -- membership ------------------------------------------------------------------------------

    def _join_entry(self, node_id: str) -> list[str]:
        """The new node's ``[[nodes]]`` lines: plain loopback ports, or behind proxies (an
        identity sorting after every member's, and a proxied link to each member)."""
        if self.net is None:
            return []
        k = self._joined
        identity_host = f"127.0.{k // 8}.{3 + k % 8}"  # sorts after 127.0.0.2 and earlier joins
        raft_port, grpc_port = free_ports(2)
        front = self.net.add(f"grpc:{node_id}", f"127.0.0.1:{grpc_port}")
        via = {
            peer: self.net.add(f"raft:{node_id}->{peer}", self.cluster.config.node(peer).raft_listen).address
            for peer in self.node_ids
        }
        return [
            f'raft = "{identity_host}:{raft_port}"',
            f'raft_bind = "127.0.0.1:{raft_port}"',
            f'grpc = "{front.address}"',
            f'grpc_bind = "127.0.0.1:{grpc_port}"',
            f'data_dir = "data/{node_id}"',
            "raft_via = { " + ", ".join(f'{peer} = "{addr}"' for peer, addr in via.items()) + " }",
        ]

    def add_node(self) -> str:
        """Add a new node to the membership, start it empty with ``--join``, wait until it has
        caught up and the cluster serves; its id."""
        start = self.clock.now_ms()
        taken = {n.id for n in self.cluster.config.nodes}
        nid = next(f"n{i}" for i in range(1, 1000) if f"n{i}" not in taken)
        self.cluster.add_node_entry(nid, self._join_entry(nid))
        self._joined += 1
        me = self.cluster.config.node(nid)
        with Client(self.cluster.targets(), timeout=30) as client:
            reply = client.add_node(nid, me.raft, me.grpc)
        members = [m.id for m in reply.membership.members]
        assert nid in members, f"add-node {nid} did not finish: {reply}"
        self.node_ids.append(nid)
        self.node_args[nid] = ["--join"]
        log = self.cluster.log_dir / f"{nid}.log"
        self.start_node(nid)
        self.await_recovery(start, f"after adding {nid}")
        self._check_raft_membership(f"adding {nid}")
        how = "a snapshot" if log.exists() and b"installed snapshot" in log.read_bytes() else "the log"
        self._record("add-node", nid, start, f"members now {', '.join(members)}; caught up from {how}")
        return nid

    def remove_node(self, victim: str | None = None, stop: bool = True) -> str:
        """Remove a follower (or ``victim``) from the membership; then stop its process."""
        start = self.clock.now_ms()
        leader = self.leader()
        victim = victim or self.followers(leader)[-1]
        with Client(self.cluster.targets(), timeout=30) as client:
            reply = client.remove_node(victim)
            if reply.note:  # the leader itself: it handed over, the next leader finishes

                def finished() -> pb.MembershipRecord | None:
                    survivors = [n for n in self.live_nodes() if n != victim]
                    record = self.cluster.status(survivors[0]).membership
                    gone = victim not in [m.id for m in record.members]
                    return record if gone and not record.HasField("pending") else None

                reply.membership.CopyFrom(
                    wait_until(finished, self.settings.recovery_timeout_s, 0.05, f"{victim} removed")
                )
        members = [m.id for m in reply.membership.members]
        assert victim not in members, f"remove-node {victim} did not finish: {reply}"
        if stop:
            self.cluster.kill(victim, signal.SIGTERM)
        self.cluster.procs.pop(victim, None)
        self.node_ids.remove(victim)
        self.removed.append(victim)
        self.await_recovery(start, f"after removing {victim}")
        self._check_raft_membership(f"removing {victim}")
        self._record("remove-node", victim, start, f"members now {', '.join(members)}")
        return victim

    def _check_raft_membership(self, what: str) -> None:
        """Every live node's Raft layer counts as many voters as the replicated membership lists
        (a peer it dials through a proxy is known by the proxy's address, so counts compare)."""

        def agree() -> bool:
            for nid in self.live_nodes():
                st = self.cluster.status(nid)
                if len(st.raft_members) != len(st.membership.members) or st.membership.HasField("pending"):
                    return False
            return True

        wait_until(
            agree, self.settings.recovery_timeout_s, 0.1, f"Raft's voters to match the membership ({what})"
        )

    def replace_node(self) -> str:
        """SIGKILL a follower, remove it from the membership and add a fresh node in its place."""
        start = self.clock.now_ms()
        victim = self.followers(self.leader())[-1]
        self.cluster.kill(victim, signal.SIGKILL)
        self.remove_node(victim, stop=False)
        new = self.add_node()
        self._record("replace", victim, start, f"SIGKILLed, removed, replaced by {new}")
        return new

    def wipe_follower(self) -> None:
        """SIGKILL a follower, delete its data dir, start it empty; it must catch up."""
        leader = self.leader()
        victim = self.followers(leader)[-1]
        log = self.cluster.log_dir / f"{victim}.log"
        start = self.clock.now_ms()
        self.cluster.kill(victim, signal.SIGKILL)
        self.cluster.wipe(victim)
        offset = log.stat().st_size if log.exists() else 0
        self.start_node(victim)
        self.await_recovery(start, f"after wiping {victim}")
        with log.open("rb") as f:
            f.seek(offset)
            how = "a snapshot" if b"installed snapshot" in f.read() else "the log"
        self.notes.append(f"wiped {victim} caught up from {how}")
        self._record("wipe", victim, start, f"caught up from {how}")

    def skew_leader(self, offset_ms: int, max_kills: int = 0) -> SkewWindow:
        """Make a node whose clock is off by ``offset_ms`` the leader, let it fire, then restore it.

        A follower is restarted with the skew; leaders are SIGKILLed (each is a recorded leader
        kill) until the skewed node wins an election; it fires for ``skew_hold_fires`` seconds;
        then it is restarted with a true clock. The window returned tells the checker which
        epochs the skewed node led.
        """
        s = self.settings
        max_kills = max_kills or 4 * s.nodes
        victim = self.followers(self.leader())[0]
        start = self.clock.now_ms()
        self.node_env[victim] = {TEST_CLOCK_OFFSET_ENV: str(offset_ms)}
        self.cluster.kill(victim, signal.SIGTERM)
        self.start_node(victim)
        self.await_recovery(start, f"after restarting {victim} with a {offset_ms:+d} ms clock")
        epochs: set[int] = set()
        kills = 0
        while self.leader() != victim and kills < max_kills:
            self.kill_leader()
            kills += 1
        if self.leader() == victim:
            st = self.cluster.status(victim)
            epochs.add(int(st.term))
            target = st.fires_committed + s.skew_hold_fires * len(s.tasks)
            wait_until(
                lambda: (x := self.cluster.status(victim)).fires_committed >= target or x.role != "leader",
                s.recovery_timeout_s,
                0.1,
                f"{victim} to fire with its skewed clock",
            )
            epochs.add(int(self.cluster.status(victim).term))
        else:
            self.notes.append(f"skew {offset_ms:+d} ms: {victim} did not win an election in {kills} kills")
        del self.node_env[victim]
        restored = self.clock.now_ms()
        self.cluster.kill(victim, signal.SIGTERM)
        self.start_node(victim)
        self.await_recovery(restored, f"after restarting {victim} with a true clock")
        window = SkewWindow(victim, offset_ms, start, self.clock.now_ms(), frozenset(epochs))
        self.skews.append(window)
        self._record(
            "skew",
            victim,
            start,
            f"{offset_ms:+d} ms; led epochs {sorted(epochs) or 'none'} after {kills} leader kill(s)",
        )
        return window

    def step_leader_clock(self, offset_ms: int, kill: bool = False, kill_after_ms: int = 100) -> ClockStep:
        """Step the running leader's wall clock by ``offset_ms`` (as an NTP step or a VM resume
        does), through its offset file; with ``kill``, SIGKILL it ``kill_after_ms`` later (the
        clock adapter reads the file within 50 ms; a leader fires within a tick of that).

        The leader must stop stamping at once and hand leadership to a node whose clock agrees
        (or, killed, its successor must not inherit a leader time from the stepped clock), and
        executions must be on time again within seconds. The step is then undone (the node,
        restarted if killed, rejoins with a true clock) and the cluster recovers."""
        s = self.settings
        leader, term = self.leader_and_term()
        clock_file = self.base / f"clock-{leader}"
        step_ms = self.clock.now_ms()
        clock_file.write_text(f"{offset_ms}\n")
        start = step_ms
        if kill:
            wait_until(lambda: self.clock.now_ms() >= step_ms + kill_after_ms, 5, 0.005, "the kill's moment")
            start = self.clock.now_ms()
            self.cluster.kill(leader, signal.SIGKILL)
        led_at_kill = kill and self.cluster.leader([n for n in self.live_nodes() if n != leader]) is None
        try:

            def other_leader() -> str | None:
                now = self.cluster.leader([n for n in self.live_nodes() if n != leader])
                return now if now is not None and now != leader else None

            try:
                new_leader = wait_until(
                    other_leader, s.recovery_timeout_s, 0.02, f"a leader other than {leader}"
                )
                handover_ms: int | None = self.clock.now_ms() - start
            except TimeoutError:  # the stepped leader kept leading (a build without the fix)
                new_leader, handover_ms = "", None

            def on_time() -> int | None:
                late = [
                    e.nominal_ms
                    for e in self.tail.poll()
                    if e.nominal_ms > start and 0 <= e.lateness_ms <= ON_TIME_MS
                ]
                return min(late) if late else None

            try:
                back: int | None = wait_until(on_time, s.recovery_timeout_s, 0.05, "an on-time execution")
            except TimeoutError:
                back = None
            leading = new_leader or self.leader()
            ahead = self.cluster.status(leading).max_leader_now_ms - self.clock.now_ms()
        finally:
            clock_file.write_text("0\n")
        step = ClockStep(
            leader,
            offset_ms,
            step_ms,
            start,
            kill,
            led_at_kill,
            new_leader,
            handover_ms,
            None if back is None else back - start,
            ahead,
        )
        self.clock_steps.append(step)  # before the recovery, which a build without the fix fails
        self._record(
            "clock-step",
            leader,
            step_ms,
            f"{offset_ms:+d} ms, term {term}{', SIGKILLed' if kill else ''}; {new_leader or 'no other node'} "
            f"led after {handover_ms} ms; on time again {step.on_time_ms} ms after the "
            f"{'kill' if kill else 'step'}; committed leader time {ahead:+d} ms from the wall clock",
        )
        if kill:
            self.start_node(leader)
        self.await_recovery(self.clock.now_ms(), f"after the clock step of {leader}")
        return step

    def links_of(self, group: set[str], grpc: bool = True) -> list[str]:
        """The proxy links that cut ``group`` off from the other nodes: every Raft link with one
        end inside and one outside, and (``grpc``) the front proxies every executor and client
        reaches the group's gRPC ports through."""
        if self.net is None:
            raise RuntimeError("this harness runs without proxies (ChaosSettings.partitions=False)")
        raft = [
            name
            for name in self.net.names()
            if name.startswith("raft:") and len(group & set(name[5:].split("->"))) == 1
        ]
        return raft + ([f"grpc:{n}" for n in sorted(group)] if grpc else [])

    def partition_leader(self, grpc: bool = True, keep: int = 0, hold_s: float = 0.0) -> Partition:
        """Cut the leader, and ``keep`` followers with it, off from the other nodes (and, with
        ``grpc``, from every executor and client) until the majority has a new leader that
        committed a fire, the old leader has stepped down, and ``hold_s`` (default
        ``partition_s``) has passed; then heal and wait for recovery.

        A partition shorter than ``raft.connection_timeout`` (3.5 s) keeps the TCP connections:
        what queued during the cut is delivered, late, after the heal. A longer one makes both
        sides drop them and reconnect.

        The old leader keeps running throughout: whatever it still believes, it can commit
        nothing, so it must dispatch nothing (the checker proves that from the executions).
        """
        s = self.settings
        leader, term = self.leader_and_term()
        minority = {leader, *self.followers(leader)[:keep]}
        others = [n for n in self.live_nodes() if n not in minority]
        if len(minority) * 2 >= len(self.node_ids):
            raise ValueError(f"a partition of {sorted(minority)} leaves no majority of {len(self.node_ids)}")
        before = {n: self.cluster.status(n).fires_committed for n in others}
        links = self.links_of(minority, grpc)
        assert self.net is not None
        cut_ms = self.clock.now_ms()
        t0 = time.monotonic()
        self.net.cut(links)
        self.isolated |= minority
        try:
            new_leader, new_term = self._new_leader_fired(
                others, term, before, "the majority to elect a leader that fires"
            )
            first_commit_ms = round((time.monotonic() - t0) * 1000)
            wait_until(
                lambda: (st := self.cluster.status(leader)).role != "leader" or st.term > term,
                s.recovery_timeout_s,
                0.05,
                f"the partitioned leader {leader} to step down",
            )
            step_down_ms = round((time.monotonic() - t0) * 1000)
            held_ms = int((hold_s or s.partition_s) * 1000)
            wait_until(
                lambda: self.clock.now_ms() >= cut_ms + held_ms,
                held_ms / 1000 + 5,
                0.05,
                "the partition to last",
            )
        finally:
            self.net.heal(links)
            self.isolated -= minority
        healed_ms = self.clock.now_ms()
        self.await_recovery(healed_ms, f"after healing the partition of {', '.join(sorted(minority))}")
        part = Partition(
            leader, term, cut_ms, grpc, new_leader, new_term, first_commit_ms, step_down_ms, healed_ms
        )
        self.partitions.append(part)
        self._record(
            "partition",
            leader,
            cut_ms,
            f"term {term}, {'+'.join(sorted(minority))} cut off "
            f"({'raft+grpc' if grpc else 'raft only'}) for {(healed_ms - cut_ms) / 1000:.1f} s; "
            f"{new_leader} (term {new_term}) fired after {first_commit_ms} ms; "
            f"{leader} stepped down after {step_down_ms} ms",
        )
        return part

    # -- the end -----------------------------------------------------------------------------------

    def heal(self) -> None:
        """Every node running unpaused, connected, with a true clock; every executor running."""
        for nid in list(self.paused):
            self.cluster.resume(nid)
        self.paused.clear()
        if self.net is not None:
            self.net.heal()
        self.isolated.clear()
        for nid in list(self.node_env):
            del self.node_env[nid]
            self.cluster.kill(nid, signal.SIGTERM)
        for nid in self.node_ids:
            self.start_node(nid)
        for name in self.executor_names:
            if self.executors[name].poll() is not None:
                self.start_executor(name)
        self.await_recovery(self.clock.now_ms(), "healing")

    def check(self) -> ChaosReport:
        """Settle the cluster through its public API and check the whole history."""
        s = self.settings
        settled = settle(
            self.cluster,
            [p.name for p in s.tasks],
            lease_ms=s.lease_ms,
            drain_budget_ms=s.drain_budget_ms(),
            nodes=self.node_ids,
            timeout_s=s.recovery_timeout_s,
        )
        executions, malformed = read_markers([self.marker])
        report = analyse(
            settled.observations,
            executions,
            [p.expectation() for p in s.tasks],
            executor_faults=self.executor_faults,
            skews=self.skews,
            clock_steps=[ClockStepWindow(c.node, c.offset_ms, c.from_ms) for c in self.clock_steps],
            disabled_at_ms=settled.disabled_at_ms,
            settings=s.check_settings(),
        )
        report.violations = settled.problems + malformed + report.violations
        report.notes = self.notes + settled.notes + report.notes
        self._executions = executions
        return report

    def figures(self, report: ChaosReport) -> dict[str, object]:
        """The published figures: failover times, and the checker's delayed/lost/duplicated/early."""
        executions = getattr(self, "_executions", None) or read_markers([self.marker])[0]
        commit = sorted(k.first_commit_ms for k in self.leader_kills)
        partition_commit = sorted(p.first_commit_ms for p in self.partitions)
        step_down = sorted(p.step_down_ms for p in self.partitions)
        first_exec: list[int] = []
        for k in self.leader_kills:
            later = [e.start_ms for e in executions if e.nominal_ms > k.kill_ms]
            if later:
                first_exec.append(min(later) - k.kill_ms)
        first_exec.sort()
        return {
            "nodes": self.settings.nodes,
            "executors": self.settings.executors,
            "leader_kills": len(self.leader_kills),
            "executor_kills": len(self.executor_faults),
            "faults": len(self.events),
            "kill_to_first_fire_committed_ms": _summary(commit),
            "kill_to_first_execution_ms": _summary(first_exec),
            "planned_restarts": len(self.planned_restarts),
            "sigterm_to_first_fire_committed_ms": _summary(sorted(self.planned_restarts)),
            "membership_changes": sum(e.kind in ("add-node", "remove-node") for e in self.events),
            "partitions": len(self.partitions),
            "partition_to_first_fire_committed_ms": _summary(partition_commit),
            "partition_to_old_leader_step_down_ms": _summary(step_down),
            "clock_steps": [
                {
                    "offset_ms": c.offset_ms,
                    "killed": c.killed,
                    "led_at_kill": c.led_at_kill,
                    "handover_ms": c.handover_ms,
                    "on_time_ms": c.on_time_ms,
                    "max_leader_now_ahead_ms": c.max_leader_now_ahead_ms,
                }
                for c in self.clock_steps
            ],
            "fires": report.fired + report.coalesced + report.skipped,
            "fired": report.fired,
            "coalesced": report.coalesced,
            "skipped_overlap": report.skipped_overlap,
            "false_skips": report.false_skips,
            "executions": report.executed,
            "delayed": report.delayed,
            "delayed_threshold_ms": self.settings.check_settings().delayed_ms,
            "delay_ms": {"p50": report.delay_p50_ms, "p99": report.delay_p99_ms, "max": report.max_delay_ms},
            "lost": report.lost,
            "duplicated": report.duplicates,
            "early": report.early,
            "early_during_skew": report.early_during_skew,
            "early_after_skew": report.early_after_skew,
            "max_early_ms": report.max_early_ms,
            "reexecuted_after_executor_fault": report.reexecuted_after_executor_fault,
            "failed_after_executor_fault": report.failed_after_executor_fault,
            "violations": len(report.violations),
        }

    def log_problems(self, limit: int = 40) -> list[str]:
        """ERROR/CRITICAL lines and tracebacks in the node and executor logs."""
        logs = sorted(self.cluster.log_dir.glob("*.log")) + sorted(self.base.glob("ex*.log"))
        found = [
            f"{log.name}: {line}"
            for log in logs
            for line in log.read_text(errors="replace").splitlines()
            if _LOG_PROBLEM.search(line) and not _KNOWN_LIBRARY_NOISE.search(line)
        ]
        return found[:limit] + ([f"... {len(found) - limit} more"] if len(found) > limit else [])

    def post_mortem(self, lines: int = 30) -> str:
        """The faults so far and the tail of every log: attached to an exception that ends a run."""
        parts = [f"chaos run in {self.base}; faults so far:", *(f"  {e.describe()}" for e in self.events)]
        logs = sorted(self.cluster.log_dir.glob("*.log")) + sorted(self.base.glob("ex*.log"))
        for log in logs:
            text = log.read_text(errors="replace").splitlines()
            parts += [f"==== {log.name} (last {lines} of {len(text)} lines)", *text[-lines:]]
        return "\n".join(parts)


def _summary(values: Sequence[int]) -> dict[str, int] | None:
    if not values:
        return None
    ordered = sorted(values)

    def pct(q: float) -> int:
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))]

    return {"n": len(ordered), "p50": pct(0.5), "p99": pct(0.99), "max": ordered[-1]}


# -- a cluster behind proxies ---------------------------------------------------------------------

_IDENTITY_HOST = "127.0.0.2"  # sorts after the proxies' 127.0.0.1; never dialled (see the docstring)


def _proxied_cluster(base: Path, nodes: int, net: ProxyNet, extra_config: str) -> LocalCluster:
    """Write a cluster config whose every Raft link and gRPC port goes through a proxy of ``net``
    (links named ``raft:a->b`` for the connection node a dials to node b, and ``grpc:a``)."""
    base.mkdir(parents=True, exist_ok=True)
    ids = [f"n{i + 1}" for i in range(nodes)]
    ports = free_ports(2 * nodes)
    raft_port = {nid: ports[2 * i] for i, nid in enumerate(ids)}
    grpc_port = {nid: ports[2 * i + 1] for i, nid in enumerate(ids)}
    identity = {nid: f"{_IDENTITY_HOST}:{raft_port[nid]}" for nid in ids}
    lines = ["[cluster]", 'name = "chaos"', 'secret = "local-cluster-secret-0123456789"', ""]
    for nid in ids:
        front = net.add(f"grpc:{nid}", f"127.0.0.1:{grpc_port[nid]}")
        via = {
            peer: net.add(f"raft:{nid}->{peer}", f"127.0.0.1:{raft_port[peer]}").address
            for peer in ids
            if peer != nid and identity[nid] > identity[peer]  # pysyncobj: the greater one dials
        }
        lines += [
            "[[nodes]]",
            f'id = "{nid}"',
            f'raft = "{identity[nid]}"',
            f'raft_bind = "127.0.0.1:{raft_port[nid]}"',
            f'grpc = "{front.address}"',
            f'grpc_bind = "127.0.0.1:{grpc_port[nid]}"',
            f'data_dir = "data/{nid}"',
            "raft_via = { " + ", ".join(f'{peer} = "{addr}"' for peer, addr in via.items()) + " }",
            "",
        ]
    path = base / "cluster.toml"
    path.write_text("\n".join(lines) + "\n" + extra_config)
    return LocalCluster(path, base / "logs")


# -- schedules -----------------------------------------------------------------------------------


Schedule = Callable[[ChaosHarness], None]


def ci_schedule(h: ChaosHarness, leader_kills: int = 5) -> None:
    """One of every fault (a node replacement and a planned leader restart included), and at
    least ``leader_kills`` leader SIGKILLs (the skew phases count).

    The replacement comes right before the skew phases on purpose: that order found a node that
    joined with campaigns held until it heard a leader, and whose hold never ended when a vote
    request made pysyncobj forget that leader first (PySyncObjNode.hold_elections); the
    cluster then had no leader for good."""
    h.kill_leader()
    h.kill_follower()
    h.kill_executor()
    h.pause_leader()
    h.kill_leader()
    h.restart_node()
    h.wipe_follower()
    h.replace_node()  # membership: a SIGKILLed follower removed, a fresh node added in its place
    h.skew_leader(+h.settings.skew_ms)
    h.skew_leader(-h.settings.skew_ms)
    h.partition_leader()
    h.partition_leader(grpc=False)  # executors still reach the old leader: it must send nothing stale
    while len(h.leader_kills) < leader_kills:
        h.kill_leader()


def ci5_schedule(h: ChaosHarness) -> None:
    """The 5-node CI run: leader kills, the leader cut off together with a follower (a minority
    of two that still has a quorum of nothing), an executor kill, a follower kill, and the leader
    cut off alone from its followers while executors still reach it."""
    h.kill_leader()
    h.partition_leader(keep=1)
    h.kill_executor()
    h.kill_follower()
    h.partition_leader(grpc=False)
    h.kill_leader()


def other_faults(h: ChaosHarness) -> list[Callable[[], object]]:
    """One of each fault other than leader and executor SIGKILLs: process faults, a planned
    leader restart, membership changes (a SIGKILLed follower replaced by a fresh node; a node
    added, then a follower removed) and partitions (only with proxies: a full one, a Raft-only
    one, a long full one; on 5 nodes also the leader cut off together with a follower)."""
    faults: list[Callable[[], object]] = [
        h.kill_follower,
        h.pause_leader,
        h.restart_node,
        h.wipe_follower,
        h.replace_node,
        lambda: (h.add_node(), h.remove_node()),  # grow by one, then shrink back
    ]
    if h.net is not None:
        faults += [
            h.partition_leader,
            lambda: h.partition_leader(grpc=False),
            # longer than raft.connection_timeout: connections drop and reconnect
            lambda: h.partition_leader(hold_s=3 * h.settings.partition_s),
        ]
        if h.settings.nodes >= 5:
            faults.append(lambda: h.partition_leader(keep=1))
    return faults


def soak_schedule(
    leader_kills: int, executor_kills: int, other_rounds: int = 1, skew: bool = False
) -> Schedule:
    """Leader and executor kills interleaved, with ``other_rounds`` rounds of :func:`other_faults`
    spread evenly among them; with ``skew``, first the +/- skewed leader clocks."""

    def schedule(h: ChaosHarness) -> None:
        if skew:
            h.skew_leader(+h.settings.skew_ms)
            h.skew_leader(-h.settings.skew_ms)
        others = other_faults(h) * other_rounds
        rounds = max(leader_kills, executor_kills, 1)
        due = [len(others) * i // rounds for i in range(rounds + 1)]  # others done after round i
        done = 0
        for i in range(rounds):
            if len(h.leader_kills) < leader_kills:
                h.kill_leader()
            if i < executor_kills:
                h.kill_executor()
            while done < due[i + 1]:
                others[done]()
                done += 1

    return schedule


def run_chaos(
    base: Path,
    schedule: Schedule = ci_schedule,
    settings: ChaosSettings | None = None,
    progress: Progress | None = None,
) -> ChaosResult:
    """Start, run ``schedule``, heal, check; always stop every process."""
    t0 = time.monotonic()
    with ChaosHarness(base, settings, progress) as h:
        try:
            h.start()
            schedule(h)
            h.heal()
            report = h.check()
        except Exception as exc:
            exc.add_note(h.post_mortem())
            raise
        result = ChaosResult(
            report=report,
            events=h.events,
            leader_kills=h.leader_kills,
            executor_faults=h.executor_faults,
            skews=h.skews,
            partitions=h.partitions,
            figures=h.figures(report),
            log_problems=[],
            seconds=0.0,
        )
    result.log_problems = h.log_problems()
    result.seconds = time.monotonic() - t0
    return result


__all__ = [
    "DEFAULT_TASKS",
    "ON_TIME_MS",
    "ChaosHarness",
    "ChaosResult",
    "ChaosSettings",
    "ClockStep",
    "FaultEvent",
    "LeaderKill",
    "Partition",
    "TaskPlan",
    "ci5_schedule",
    "ci_schedule",
    "other_faults",
    "run_chaos",
    "soak_schedule",
]
