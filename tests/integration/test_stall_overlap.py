"""A leader stalled between committing a run and dispatching it, then the next leader killed
(issue 35 §1), on a real 3-node cluster with two executor processes.

An every-second task with 2 shards (misfire=all, overlap=skip). The leader is SIGSTOPped a few
milliseconds after a whole second S: the run of S is in its log (committed, or about to be by the
next leader) and its dispatch has not reached the executors. 6 s later it gets SIGCONT; 4 s later
the new leader is SIGKILLed the same way. Nothing really overlapped (the command ends in
milliseconds, or in half a second), so no fire may be ``skipped_overlap`` against a run that had
not started or had already ended; none runs twice or early; and the run of S starts soon after
the stall (within 1.5 s in at least 9 of 10 iterations; within 0.6 s of the election in every
one), not when the executors happen to find the new leader by timeouts.

One iteration of each command runs in the default suite; ``-m soak`` loops each 10 times and
prints the figures.
"""

from __future__ import annotations

import datetime
import itertools
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.model import CronTrigger, Misfire, Overlap, TaskSpec
from raftsched.testing.cluster import wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.helpers import Fleet, now_ms

pytestmark = pytest.mark.integration

TASK = "stall"
# The bound: the run of S starts within this of the SIGSTOP. The election alone takes
# 0.4-1.4 s (raft_min/max_timeout: the first survivor's timeout, the earlier of two uniform
# draws, 0.73 s on average; about 1 % of elections split and take a second timeout), so one
# iteration may miss it: the soak asserts it in at least SOAK_WITHIN of SOAK_ITERATIONS.
STALL_BOUND_MS = 1500
SOAK_ITERATIONS = 10
SOAK_WITHIN = 9
# What raftsched adds after Raft elected the new leader (its barrier, the executors finding it and
# registering, the re-send of the undelivered run): measured 74-132 ms in 20 soak iterations on
# the shared 2 cores (85-341 ms in earlier runs at a load average of ~17, before the executors
# stopped spending a timeout on the paused leader); every iteration (the CI suite runs one)
# asserts it with slack.
AFTER_ELECTION_BOUND_MS = 600
# Where in the second the leader is stopped: after its driver planned the fire of S (wheel tick
# 10 ms) and the entry went out, before the assignment's commit made it dispatch.
STOP_AT_MS_IN_SECOND = 12


@dataclass
class Figures:
    """What one iteration measured."""

    false_skips: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    early: list[str] = field(default_factory=list)
    unaccounted: list[int] = field(default_factory=list)
    skips: int = 0
    stall_start_ms: int | None = None  # the run of S: its last shard's start minus the SIGSTOP
    stall_elected_ms: int = 0  # the new leader's election minus the SIGSTOP
    stall_takeover_ms: int = 0  # its dispatcher's takeover (its barrier applied) minus the SIGSTOP
    stall_found_ms: int | None = None  # the last executor found it (see _found), minus the SIGSTOP
    kill_start_ms: int | None = None  # the same for the second fault (SIGKILL of the new leader)
    stall_run_epoch: int = 0  # the epoch whose leader created the run of S (0: none)
    stall_leader_epoch: int = 0
    timeline: list[str] = field(default_factory=list)  # printed when an iteration fails

    def clean(self) -> bool:
        return not (self.false_skips or self.duplicated or self.early or self.unaccounted) and (
            self.stall_start_ms is not None
            and self.stall_start_ms - self.stall_elected_ms <= AFTER_ELECTION_BOUND_MS
        )

    def within_bound(self) -> bool:
        """The run of S started within the issue's bound of the SIGSTOP."""
        return self.stall_start_ms is not None and self.stall_start_ms <= STALL_BOUND_MS

    def describe(self) -> str:
        return (
            f"false skips {len(self.false_skips)} (of {self.skips} skipped_overlap), duplicated "
            f"{len(self.duplicated)}, early {len(self.early)}, unaccounted {len(self.unaccounted)}; "
            f"run of S started {self.stall_start_ms} ms after the SIGSTOP (new leader elected after "
            f"{self.stall_elected_ms} ms, took over after {self.stall_takeover_ms} ms, executors "
            f"found it after {self.stall_found_ms} ms; run created in epoch "
            f"{self.stall_run_epoch}, stalled leader's {self.stall_leader_epoch}), the run after the "
            f"SIGKILL {self.kill_start_ms} ms after it"
        )


def _live(client: Client) -> set[str]:
    return {e.name for e in client.list_executors().executors if e.state == pb.EXECUTOR_ALIVE}


def _just_after_a_second() -> int:
    """Wait (polling the clock) until ``STOP_AT_MS_IN_SECOND`` ms past the next whole second;
    returns that second (ms)."""
    second = (now_ms() // 1000 + 1) * 1000
    wait_until(lambda: now_ms() >= second + STOP_AT_MS_IN_SECOND, 3, 0.001, "the next whole second")
    return second


def _leader_epoch(fleet: Fleet, node: str) -> int:
    return int(fleet.cluster.status(node).term)


def run_scenario(fleet: Fleet, sleep_s: float) -> Figures:
    fleet.start_executor("ex1", 4)
    fleet.start_executor("ex2", 4)
    m = fleet.marker
    command = f'echo "$RAFTSCHED_EXECUTION_ID start $(date +%s%3N)" >> {m}; '
    if sleep_s:
        command += f"sleep {sleep_s}; "
    command += f'echo "$RAFTSCHED_EXECUTION_ID end $(date +%s%3N)" >> {m}'
    cluster = fleet.cluster
    with Client(cluster.targets()) as client:
        wait_until(lambda: _live(client) == {"ex1", "ex2"}, 30, 0.2, "both executors registered")
        client.add_task(
            TaskSpec(
                TASK,
                CronTrigger("* * * * * *"),
                command=command,
                shards=2,
                misfire=Misfire.ALL,
                overlap=Overlap.SKIP,
            )
        )
        wait_until(lambda: len(fleet.lines()) >= 12, 30, 0.1, "first executions")
        first = cluster.wait_for_leader(10)
        first_epoch = _leader_epoch(fleet, first)
        stall_second = _just_after_a_second()
        cluster.pause(first)
        stopped = now_ms()
        others = [n for n in cluster.alive() if n != first]
        second = cluster.wait_for_leader(30, among=others)
        wait_until(lambda: now_ms() - stopped >= 6000, 10, 0.05, "6 s of SIGSTOP")
        cluster.resume(first)
        resumed = now_ms()
        wait_until(lambda: now_ms() - resumed >= 4000, 10, 0.05, "4 s after SIGCONT")
        kill_second = _just_after_a_second()
        cluster.kill(second, signal.SIGKILL)
        killed = now_ms()
        cluster.wait_for_leader(30, among=[n for n in cluster.alive() if n != second])
        wait_until(lambda: now_ms() - killed >= 6000, 10, 0.05, "6 s under the third leader")
        client.disable_task(TASK)
        wait_until(
            lambda: not [r for r in client.runs(TASK, limit=1000) if r.state in (pb.PENDING, pb.RUNNING)],
            60,
            0.3,
            "every fired run to finish",
        )
        fires = client.fire_accounting(TASK, limit=1000)
        runs = client.runs(TASK, limit=1000)
    figures = check(fleet, fires, runs)
    by_nominal = {r.nominal_ms: r for r in runs}
    starts = _starts(fleet)
    stall_run = by_nominal.get(stall_second)
    figures.stall_leader_epoch = first_epoch
    took_over = _takeovers(fleet.cluster.log_dir)
    new_epoch, new_takeover = min(
        ((e, t) for e, t in took_over.items() if t > stopped), key=lambda et: et[1], default=(0, stopped)
    )
    figures.stall_takeover_ms = new_takeover - stopped
    figures.stall_elected_ms = _elections(fleet.cluster.log_dir).get(new_epoch, stopped) - stopped
    found = _found(fleet.base)
    if all((name, new_epoch) in found for name in ("ex1", "ex2")):
        figures.stall_found_ms = max(found[name, new_epoch] for name in ("ex1", "ex2")) - stopped
    if stall_run is not None:
        figures.stall_run_epoch = int(stall_run.epoch)
        figures.stall_start_ms = _run_started(starts, stall_run.run_id, stopped)
    kill_run = by_nominal.get(kill_second)
    if kill_run is not None:
        figures.kill_start_ms = _run_started(starts, kill_run.run_id, killed)
    return figures


def _starts(fleet: Fleet) -> dict[str, list[int]]:
    """Execution id -> its start times (wall ms), from the marker file."""
    out: dict[str, list[int]] = {}
    for exec_id, what, at in fleet.lines():
        if what == "start":
            out.setdefault(exec_id, []).append(int(at))
    return out


def _run_started(starts: dict[str, list[int]], run_id: str, since: int) -> int | None:
    """When the last shard of ``run_id`` first started, relative to ``since`` (None: a shard never
    started)."""
    per_shard: dict[str, int] = {}
    for exec_id, times in starts.items():
        rid, shard, _ = exec_id.split("/")
        if rid == run_id:
            per_shard[shard] = min(per_shard.get(shard, 1 << 62), *times)
    if len(per_shard) < 2:
        return None
    return max(per_shard.values()) - since


def check(fleet: Fleet, fires: list[pb.FireRecord], runs: list[pb.Run]) -> Figures:
    """False skips, duplicates, early starts and unaccounted seconds of the whole history.

    A ``skipped_overlap`` decided at D is real only against an earlier run that was in progress
    at D in reality: one of its shards had started at or before D and one had not ended - or had
    ended after the deciding leader took over with its result not committed by D (on the wire:
    the ordinary race of any overlap decision). A run fired in the same batch also counts
    (misfire=all catching up several seconds at once runs the first and skips the others
    against it: the policy, not stale state), and so does a run the deciding leader fired that
    had not started by D while every executor had found that leader (on its way).
    A run that had not started by D otherwise (committed and never delivered, or waiting for
    its executor to find the new leader) or that had ended before the deciding leader took
    over (its result lost with the old leader) does not: a skip against it is false.
    (Executors have free slots throughout: nothing waits for one.)"""
    fig = Figures()
    lines = fleet.lines()
    started: dict[str, int] = {}
    ended: dict[str, int] = {}
    shard_starts: dict[tuple[str, str], set[str]] = {}
    for exec_id, what, at in lines:
        run_id, shard, attempt = exec_id.split("/")
        t = int(at)
        if what == "start":
            started[run_id] = min(started.get(run_id, 1 << 62), t)
            shard_starts.setdefault((run_id, shard), set()).add(attempt)
        elif what == "end":
            ended[run_id] = max(ended.get(run_id, 0), t)
    took_over = _takeovers(fleet.cluster.log_dir)
    assert {rec.epoch for rec in fires} <= took_over.keys(), took_over
    found = _found(fleet.base)

    def since_all_found(epoch: int) -> int:
        """When the last executor found the leader of ``epoch`` (never: a huge time)."""
        times = [found.get((name, epoch)) for name in ("ex1", "ex2")]
        return max(t for t in times if t is not None) if all(t is not None for t in times) else 1 << 62

    nominal_of = {r.run_id: r.nominal_ms for r in runs}
    for rec in fires:
        if rec.outcome != pb.SKIPPED_OVERLAP:
            continue
        fig.skips += 1
        decided = rec.decided_ms
        since = took_over[rec.epoch]
        real = []
        for r in runs:
            if r.created_ms > decided or r.nominal_ms >= rec.nominal_ms:
                continue
            begun = started.get(r.run_id)
            if begun is not None and begun <= decided:
                end = ended.get(r.run_id, 1 << 62)
                if end > decided or (end > since and r.finished_ms > decided):
                    real.append(r.run_id)
            elif r.epoch == rec.epoch and (r.created_ms == decided or since_all_found(rec.epoch) < decided):
                # Fired in the same batch (misfire=all catching up), or the deciding leader's own
                # run on its way to executors that had all found it: unfinished (the ordinary
                # race of a fire right after a late one). Not so while an executor still looked
                # for the new leader: the run could not start.
                real.append(r.run_id)
        if not real:
            fig.false_skips.append(f"{rec.nominal_ms} decided {decided} (epoch {rec.epoch}): {rec.reason}")
    for (run_id, shard), attempts in sorted(shard_starts.items()):
        if len(attempts) > 1:
            fig.duplicated.append(f"{run_id}/{shard} attempts {sorted(attempts)}")
    for exec_id, what, at in lines:
        run_id = exec_id.split("/")[0]
        if what == "start" and run_id in nominal_of and int(at) < nominal_of[run_id]:
            fig.early.append(f"{exec_id} started {nominal_of[run_id] - int(at)} ms early")
    nominal = sorted(n for rec in fires for n in _covered(rec))
    fig.unaccounted = [b for a, b in itertools.pairwise(nominal) if b - a != 1000]
    runs_at = {r.nominal_ms: r for r in runs}
    for rec in fires:
        run = runs_at.get(rec.nominal_ms)
        ran = (
            f"run created {run.created_ms} (epoch {run.epoch}) started {started.get(run.run_id)} ended "
            f"{ended.get(run.run_id)} finished {run.finished_ms}"
            if run is not None
            else ""
        )
        outcome = pb.FireOutcome.Name(rec.outcome)
        fig.timeline.append(f"{rec.nominal_ms} {outcome} decided {rec.decided_ms} epoch {rec.epoch} {ran}")
    fig.timeline.append(f"takeovers {sorted(took_over.items())}")
    assert len(nominal) == len(set(nominal)), "a fire accounted twice"
    return fig


def _takeovers(log_dir: Path) -> dict[int, int]:
    """Epoch -> when its leader's dispatcher took over (ms), from the nodes' logs."""
    out: dict[int, int] = {}
    for log in log_dir.glob("*.log"):
        for line in log.read_text(errors="replace").splitlines():
            found = _TAKEOVER.match(line)
            if found:
                at = datetime.datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                out[int(found[2])] = int(at * 1000)
    return out


def _elections(log_dir: Path) -> dict[int, int]:
    """Term -> when a node became its leader (ms), from the nodes' logs."""
    out: dict[int, int] = {}
    for log in log_dir.glob("*.log"):
        for line in log.read_text(errors="replace").splitlines():
            found = _ELECTED.match(line)
            if found:
                at = datetime.datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                out[int(found[2])] = int(at * 1000)
    return out


def _found(base: Path) -> dict[tuple[str, int], int]:
    """(executor, epoch) -> when it found that epoch's leader (ms): the leader accepted its
    heartbeat when it asked who leads, or it registered there, whichever came first; from the
    executors' logs."""
    out: dict[tuple[str, int], int] = {}
    for name in ("ex1", "ex2"):
        log = base / f"{name}.log"
        if not log.exists():
            continue
        for line in log.read_text(errors="replace").splitlines():
            hit = _FOUND.match(line)
            if hit:
                at = datetime.datetime.strptime(hit[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                out.setdefault((name, int(hit[2])), int(at * 1000))
    return out


_FOUND = re.compile(
    r"^(\S+ \S+) INFO raftsched\.executor\.agent: \S+: "
    r"(?:registered with \S+|\S+ answers as the leader) \(epoch (\d+)[,)]"
)
_ELECTED = re.compile(r"^(\S+ \S+) INFO raftsched\.node: node \S+ became the leader \(term (\d+),")
_TAKEOVER = re.compile(
    r"^(\S+ \S+) INFO raftsched\.rpc\.executor_service: dispatcher on \S+ leads epoch (\d+):"
)


def _covered(rec: pb.FireRecord) -> list[int]:
    if rec.through_ms:
        return list(range(rec.nominal_ms, rec.through_ms + 1, 1000))
    return [rec.nominal_ms]


def assert_clean(fig: Figures) -> None:
    if not fig.clean():
        print("\n".join(fig.timeline))
    assert not fig.false_skips, f"false skipped_overlap: {fig.false_skips}; {fig.describe()}"
    assert not fig.duplicated, fig.describe()
    assert not fig.early, fig.describe()
    assert not fig.unaccounted, fig.describe()
    assert fig.stall_start_ms is not None, fig.describe()
    assert fig.stall_start_ms - fig.stall_elected_ms <= AFTER_ELECTION_BOUND_MS, fig.describe()


@pytest.mark.parametrize("sleep_s", [0.0, 0.5], ids=["instant", "half-second"])
def test_a_stalled_leader_then_a_killed_one_skip_nothing_falsely(fleet: Fleet, sleep_s: float) -> None:
    fig = run_scenario(fleet, sleep_s)
    print(fig.describe())
    assert_clean(fig)


@pytest.mark.soak
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("sleep_s", [0.0, 0.5], ids=["instant", "half-second"])
def test_a_stalled_leader_then_a_killed_one_looped(tmp_path: Path, sleep_s: float) -> None:
    """The issue's loop: 10 iterations, each on a fresh cluster; every one clean, and the run of S
    started within 1.5 s of the SIGSTOP in at least 9."""
    results = []
    for i in range(SOAK_ITERATIONS):
        f = Fleet(tmp_path / f"run{i}")
        try:
            f.cluster.start()
            f.cluster.wait_for_leader(60)
            results.append(run_scenario(f, sleep_s))
        finally:
            f.stop()
        print(f"iteration {i}: {results[-1].describe()}")
    starts = sorted(fig.stall_start_ms for fig in results if fig.stall_start_ms is not None)
    elected = sorted(fig.stall_elected_ms for fig in results)
    print(f"run of S started (ms after the SIGSTOP): {starts}; new leader elected: {elected}")
    for fig in results:
        assert_clean(fig)
    within = sum(1 for fig in results if fig.within_bound())
    assert within >= SOAK_WITHIN, (
        f"run of S within {STALL_BOUND_MS} ms of the SIGSTOP in {within}/{len(results)}"
    )
