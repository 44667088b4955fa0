"""Small helpers shared by the integration tests (cluster-level waits; no assertions of invariants,
those live in :mod:`tests.integration.checks`)."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from raftsched.model import CronTrigger, Misfire, Overlap, TaskSpec
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.timing.clock import SystemClock
from tests.integration.checks import node_client

EVERY_SECOND = "* * * * * *"  # six fields: seconds last
NODES = ("n1", "n2", "n3")

_CLOCK = SystemClock()


def now_ms() -> int:
    """The wall clock the nodes on this machine read too."""
    return _CLOCK.now_ms()


def per_second_task(name: str = "tick") -> TaskSpec:
    """Fires every second; runs never finish (no executors), so overlap must be allowed."""
    return TaskSpec(
        name,
        CronTrigger(EVERY_SECOND),
        command="true",
        overlap=Overlap.ALLOW,
        misfire=Misfire.LATEST,
    )


def watermark(cluster: LocalCluster, node_id: str, task: str) -> int:
    with node_client(cluster, node_id) as client:
        return client.get_task(task).watermark_ms


def wait_accounted_through(
    cluster: LocalCluster, nodes: list[str] | tuple[str, ...], task: str, until_ms: int, timeout: float = 30.0
) -> None:
    """Wait until every node in ``nodes`` has accounted ``task``'s fires up to ``until_ms``."""
    wait_until(
        lambda: all(watermark(cluster, n, task) >= until_ms for n in nodes),
        timeout,
        0.2,
        f"{task} accounted through {until_ms} on {', '.join(nodes)}",
    )


def wait_time_passed(until_ms: int, timeout: float = 60.0) -> None:
    """Let real time pass (for cron schedules and timeouts to matter), polling the clock."""
    wait_until(lambda: now_ms() >= until_ms, timeout, 0.1, f"the clock to reach {until_ms}")


def wait_caught_up(cluster: LocalCluster, node_id: str, index: int, timeout: float = 30.0) -> None:
    """Wait until ``node_id`` has applied log index ``index``."""
    wait_until(
        lambda: cluster.status(node_id).applied_index >= index,
        timeout,
        0.1,
        f"{node_id} to apply index {index}",
    )


def wait_all_applied(cluster: LocalCluster, index: int, timeout: float = 30.0) -> None:
    """Wait until every live node has applied log index ``index``."""
    wait_until(
        lambda: all(cluster.status(n).applied_index >= index for n in cluster.alive()),
        timeout,
        0.1,
        f"every node to apply index {index}",
    )


# pysyncobj's spurious truncation while a follower catches up (LIBRARY-NOTES 1.11; the chaos
# harness and test_store_damage treat it the same way): the entries taken again are identical.
KNOWN_LIBRARY_NOISE = "CRITICAL pysyncobj.syncobj: truncating already-applied log entries"


def set_aside_known_noise(cluster: LocalCluster, keep: Path) -> None:
    """Move pysyncobj's known spurious-truncation line out of the node logs the suite checks for
    errors (into ``keep``/<node>.noise.log). Call it only after the apply chains were found equal
    (``cluster.chains_agree()``): that, not the absence of the line, is what shows no divergence."""
    for log in sorted(cluster.log_dir.glob("*.log")):
        lines = log.read_text(errors="replace").splitlines(keepends=True)
        noise = [line for line in lines if KNOWN_LIBRARY_NOISE in line]
        if noise:
            (keep / f"{log.stem}.noise.log").write_text("".join(noise))
            log.write_text("".join(line for line in lines if KNOWN_LIBRARY_NOISE not in line))


def chains_agree_after(cluster: LocalCluster, index: int) -> tuple[int, str]:
    """``cluster.chains_agree()`` once every node has applied past ``index``.

    A node records its apply-chain hash only for entries it applies itself: not for entries it
    skips on replay after a restart, nor for the index of a snapshot it installed. Comparing at an
    index every node has applied *after* such an event avoids asking one for a hash it never had.
    ``index`` must be at least the restart or snapshot index of every node.
    """
    wait_all_applied(cluster, index + 1)
    return cluster.chains_agree()


FAST_LEASES = (
    "[scheduler]\nlease_ms = 1500\nheartbeat_ms = 300\nretry_backoff_ms = 200\nkill_grace_ms = 1000\n"
)
"""Short leases and heartbeats, so executor faults are detected within a couple of seconds."""


class Fleet:
    """A 3-node cluster with :data:`FAST_LEASES` under ``base`` and the executors a test starts;
    commands append to :attr:`marker`, read back by :meth:`lines`."""

    def __init__(self, base: Path) -> None:
        self.cluster = LocalCluster.create(base, 3, extra_config=FAST_LEASES)
        self.base = base
        self.executors: dict[str, subprocess.Popen[bytes]] = {}
        self.marker = base / "marker.log"

    def timed_command(self, seconds: float) -> str:
        """A command that sleeps ``seconds`` between two lines in :attr:`marker`: execution id,
        executor, ``start``/``end`` and the time in ns (:meth:`lines` reads them back)."""
        stamp = f'echo "$RAFTSCHED_EXECUTION_ID $RAFTSCHED_EXECUTOR %s $(date +%%s%%N)" >> {self.marker}'
        return f"{stamp % 'start'}; sleep {seconds}; {stamp % 'end'}"

    def start_executor(self, name: str, slots: int = 4, *extra: str) -> None:
        self.executors[name] = self.cluster.start_executor(
            name, slots, self.base / name, self.base / f"{name}.log", extra=extra
        )

    def registered(self) -> int:
        """How many registrations with a leader the executors have logged (0 while no leader)."""
        if self.cluster.leader() is None:
            return 0
        logs = [self.base / f"{n}.log" for n in self.executors]
        return "".join(log.read_text() for log in logs if log.exists()).count("registered with")

    def all_registered(self) -> bool:
        """Whether every executor started has registered with a leader (once or more: a leader
        change under load makes an executor register again, so counting the lines of
        :meth:`registered` against the number of executors can stay above it for ever)."""
        if self.cluster.leader() is None:
            return False
        logs = [self.base / f"{n}.log" for n in self.executors]
        return all(log.exists() and "registered with" in log.read_text() for log in logs)

    def kill_executor(self, name: str) -> None:
        proc = self.executors[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def lines(self) -> list[list[str]]:
        if not self.marker.exists():
            return []
        return [line.split() for line in self.marker.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        for proc in self.executors.values():
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
        self.cluster.stop()
