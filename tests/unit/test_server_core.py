"""The one wiring of a node's replicated core (raftsched.server.core), as the node and the
simulation both use it: the guards that once existed in one and not the other."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

from raftsched.config.load import load_config
from raftsched.leader.driver import DriverThread
from raftsched.server.node import Node
from raftsched.testing import SimHarness
from raftsched.testing.cluster import write_config


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
