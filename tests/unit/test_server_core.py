"""The one wiring of a node's replicated core (raftsched.server.core), as the node and the
simulation both use it: the guards that once existed in one and not the other."""

from __future__ import annotations

import asyncio
import gc
import random
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from raftsched.config.load import load_config
from raftsched.fsm.effects import BarrierCommitted
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.leader.dispatch.hub import ExecutorHub
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.leader.driver import DriverThread
from raftsched.leader.gate import LeaderGate
from raftsched.model import TaskSpec
from raftsched.server.node import Node
from raftsched.testing import SimHarness
from raftsched.testing.cluster import write_config
from raftsched.timing.clock import ManualClock
from tests.support.fsm import EVERY_SECOND, T0, create, fresh


def test_a_simulated_follower_replaying_its_own_old_barrier_does_not_start_dispatching() -> None:
    """The chaos finding of tests/chaos/test_findings.py, through the simulation's wiring: its
    effect sink once handed every barrier of the node's own to the dispatcher, without the node's
    guard (the driver leads that term), so a regression there passed every simulation test."""
    sim = SimHarness(["n1", "n2", "n3"])
    sim.elect("n1")  # n1's barrier of term 1 is in the log
    sim.crash("n1")
    sim.elect("n2")
    sim.restart("n1", wipe=True)  # n1 replays the whole log, its own old barrier included
    sim.settle()
    n1 = sim.nodes["n1"]
    assert n1.replica.last_applied > 0, "n1 did not catch up on the log"
    assert not n1.driver.leading
    assert not n1.dispatcher.leading, "a follower took dispatch leadership from its own old barrier"
    assert sim.nodes["n2"].dispatcher.leading


def test_the_driver_has_the_overlap_hold_before_its_thread_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver asks the dispatcher whether to hold a fire whose overlap is not known yet
    (LeaderDriver.hold_fires); the node once attached that hook when it started serving gRPC,
    after the driver thread had started, so a leader elected in between fired without it."""
    seen: list[object] = []
    start = DriverThread.start

    def recording_start(self: DriverThread) -> None:
        seen.append(self.driver.hold_fires)
        start(self)

    monkeypatch.setattr(DriverThread, "start", recording_start)
    write_config(tmp_path / "cluster.toml", 1)
    node = Node(load_config(tmp_path / "cluster.toml"), "n1")
    switch = sys.getswitchinterval()
    try:
        node.start()
    finally:
        node.stop()
        sys.setswitchinterval(switch)
        gc.unfreeze()
    assert seen == [node.core.dispatcher.overlap_unknown]


def test_a_hub_started_after_the_barrier_applied_takes_over_the_term() -> None:
    """The node's consensus starts, and may win an election and apply its barrier, before the
    executor hub exists (it is built when the node serves gRPC): the barrier's effect found no
    hub, so the dispatcher never led that term, executors got Unavailable and every non-allow
    fire was held for the whole term (review of issue 27). The hub catches up when it starts."""
    state = fresh()
    assert create(state, TaskSpec("t", EVERY_SECOND, command="true")).ok
    driver = SimpleNamespace(leading=True, ready=True, epoch=4)  # elected, barrier applied
    gate = LeaderGate("n1", ManualClock(T0), state, driver, lambda: None, lambda: None)
    node = SimpleNamespace(node_id="n1", state=state, gate=gate)
    hub = ExecutorHub(node, Dispatcher(state, DispatchSettings(lease_ms=2000), random.Random(0)))

    async def start_and_yield() -> None:
        hub.start()
        await asyncio.sleep(0)  # one pass of the loop
        await hub.stop()

    asyncio.run(start_and_yield())
    assert hub.dispatcher.leading and hub.dispatcher.epoch == 4
    term = hub.dispatcher.term
    hub._on_effects((BarrierCommitted("n1", 4),))  # the effect arriving after all: no new term
    assert hub.dispatcher.term is term
