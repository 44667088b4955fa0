"""A Jepsen-style test of the Admin API as a register: several clients read one task and update
it conditionally (CAS on its version) through every node, while a nemesis cuts the leader's Raft
links, pauses it (SIGSTOP) and kills it (SIGKILL, then restarts it). The recorded history must be
linearizable (:mod:`raftsched.testing.chaos.linearizability`): no read older than a write acknowledged
before it, no lost or doubled update."""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable

import pytest

from raftsched.client import Client
from raftsched.errors import Conflict, RaftschedError
from raftsched.model import IntervalTrigger, TaskSpec
from raftsched.testing.chaos.linearizability import CAS, READ, Op, check
from raftsched.testing.chaos.netproxy import ProxyNet
from raftsched.testing.cluster import LocalCluster, wait_until
from tests.integration.test_linearizable_reads import proxied as proxied  # the same 3 proxied nodes

pytestmark = pytest.mark.integration

TASK = "register"


def _spec(value: str) -> TaskSpec:
    return TaskSpec(TASK, IntervalTrigger(3600_000), command=f"echo {value}")


def _value(command: str) -> str:
    return command.removeprefix("echo ")


class Recorder:
    """The history, from every client thread."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self._lock = threading.Lock()

    def add(self, op: Op) -> None:
        with self._lock:
            self.ops.append(op)


def _client_loop(name: str, targets: list[str], history: Recorder, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    seq = 0
    known = 1  # the version this client last saw
    # A short deadline: a client stuck on a node that cannot commit moves on within the fault.
    with Client(targets, timeout=1, retries=4) as client:
        while not stop.is_set():
            call = time.monotonic()
            if rng.random() < 0.6:
                try:
                    rec = client.get_task(TASK)
                except RaftschedError:
                    continue  # an unknown read constrains nothing
                known = rec.version
                history.add(
                    Op(
                        name,
                        READ,
                        call,
                        time.monotonic(),
                        version=rec.version,
                        value=_value(rec.spec.command),
                    )
                )
                continue
            seq += 1
            value = f"{name}-{seq}"
            try:
                rec = client.update_task(_spec(value), expected_version=known)
            except Conflict:
                history.add(Op(name, CAS, call, time.monotonic(), expected=known, value=value, ok=False))
            except RaftschedError:
                history.add(Op(name, CAS, call, None, expected=known, value=value))
            else:
                assert rec.version == known + 1, f"CAS from v{known} answered v{rec.version}"
                history.add(Op(name, CAS, call, time.monotonic(), expected=known, value=value))
                known = rec.version


def _hold(seconds: float) -> None:
    """Let a fault (or a quiet spell) last ``seconds`` of real time."""
    until = time.monotonic() + seconds
    wait_until(lambda: time.monotonic() >= until, seconds + 5, 0.05, f"{seconds} s to pass")


def _faults(cluster: LocalCluster, net: ProxyNet, rounds: int) -> list[str]:
    done: list[str] = []

    def leader() -> str:
        return cluster.wait_for_leader(60, among=cluster.alive())

    def new_leader(old: str, term: int) -> None:
        wait_until(
            lambda: any(
                (st := cluster.status(n)).role == "leader" and st.term > term
                for n in cluster.alive()
                if n != old
            ),
            60,
            0.05,
            "a new leader",
        )

    def partition() -> None:
        old = leader()
        term = cluster.status(old).term
        links = [n for n in net.names() if n.startswith("raft:") and old in n[5:].split("->")]
        net.cut(links)
        try:
            new_leader(old, term)
            wait_until(
                lambda: (st := cluster.status(old)).role != "leader" or st.term > term,
                60,
                0.05,
                f"{old} to step down",
            )
        finally:
            net.heal(links)
        done.append(f"partition {old}")

    def pause() -> None:
        old = leader()
        term = cluster.status(old).term
        cluster.pause(old)
        try:
            new_leader(old, term)
            _hold(1.0)
        finally:
            cluster.resume(old)
        done.append(f"pause {old}")

    def kill() -> None:
        old = leader()
        term = cluster.status(old).term
        cluster.kill(old, signal.SIGKILL)
        new_leader(old, term)
        cluster.start(old)
        done.append(f"kill {old}")

    faults: list[Callable[[], None]] = [partition, pause, kill]
    for i in range(rounds):
        faults[i % len(faults)]()
        wait_until(lambda: len(cluster.alive()) == 3 and cluster.leader() is not None, 60, 0.1, "recovery")
        _hold(0.5)  # the clients run between faults
    return done


def _run(proxied: tuple[LocalCluster, ProxyNet], rounds: int, clients: int = 4) -> None:
    cluster, net = proxied
    with Client(cluster.targets(), timeout=10) as admin:
        start = admin.add_task(_spec("initial"))
    history = Recorder()
    stop = threading.Event()
    targets = cluster.targets()
    threads = [
        threading.Thread(
            target=_client_loop,
            args=(f"c{i}", targets[i % 3 :] + targets[: i % 3], history, stop, i),
            daemon=True,
        )
        for i in range(clients)
    ]
    for t in threads:
        t.start()
    try:
        faults = _faults(cluster, net, rounds)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    with Client(cluster.targets(), timeout=10, retries=20) as admin:
        call = time.monotonic()
        final = admin.get_task(TASK)
        history.add(
            Op("final", READ, call, time.monotonic(), version=final.version, value=_value(final.spec.command))
        )
    ops = history.ops
    acked = sum(1 for op in ops if op.kind == CAS and op.ok and op.ret is not None)
    reads = sum(1 for op in ops if op.kind == READ)
    assert len(faults) == rounds
    assert acked > 0 and reads > 0, f"{acked} acknowledged writes, {reads} reads: the clients did nothing"
    verdict = check(ops, initial=(start.version, "initial"))
    assert verdict, f"{verdict.problem} ({len(ops)} ops, faults: {faults})"
    # Every acknowledged CAS made exactly one version; unknown ones at most one each.
    unknown = sum(1 for op in ops if op.kind == CAS and op.ret is None)
    assert start.version + acked <= final.version <= start.version + acked + unknown


def test_reads_and_cas_stay_linearizable_under_partitions_pauses_and_kills(
    proxied: tuple[LocalCluster, ProxyNet],
) -> None:
    _run(proxied, rounds=3)


@pytest.mark.soak
def test_reads_and_cas_stay_linearizable_over_many_leader_faults(
    proxied: tuple[LocalCluster, ProxyNet],
) -> None:
    _run(proxied, rounds=12, clients=6)
