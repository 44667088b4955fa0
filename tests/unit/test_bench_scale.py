"""bench/scale.py reads a restarted node's start-up phases from its log lines."""

from __future__ import annotations

from pathlib import Path

from bench.scale import restart_phases


def test_restart_phases_read_the_state_loaded_and_started_lines(tmp_path: Path) -> None:
    log = tmp_path / "n2.log"
    log.write_text(
        "2026-12-05 08:10:08,062 INFO raftsched.node: node n2: state loaded at index 7 (12 entries, "
        "3 tasks) at 1796458208.000: store open 1 ms (1 ms CPU), tasks 4 ms (4 ms CPU)\n"
        "2026-12-05 08:10:08,500 INFO raftsched.node: node n2 started: raft 127.0.0.1:1, grpc "
        "127.0.0.1:2, data d, 3 tasks loaded at index 7 (Raft journal and snapshot opened in 75 ms)\n"
    )
    started = restart_phases(log, spawned=1796458207.0, caught_up=1796458210.0)
    assert started["spawn_to_state_loaded_s"] == 1.0
    assert started["state_load_phases"] == "store open 1 ms (1 ms CPU), tasks 4 ms (4 ms CPU)"
    assert started["raft_journal_open"] == "75 ms"
    assert isinstance(started["state_loaded_to_raft_started_s"], float)
