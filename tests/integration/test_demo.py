"""``raftsched demo`` against real processes: its state goes to ``demo-data/`` (never the config's
``data_dir`` entries, which a cluster started by hand from the same config uses), and it prints
the pid of every process it started, the pids to kill one by hand."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from pathlib import Path

from raftsched.cli.process import LOCK_FILE
from raftsched.testing.cluster import wait_until, write_config


def test_the_demo_keeps_its_state_apart_and_prints_its_pids(tmp_path: Path) -> None:
    config = tmp_path / "cluster.toml"
    write_config(config, 3)  # data_dir = "data/n1" ... like cluster.example.toml's ./data/n1
    log = tmp_path / "demo.out"
    with log.open("w") as sink:
        demo = subprocess.Popen(
            # 12 s: long enough for a fire of the every-ten-seconds 3-shard task to run.
            [sys.executable, "-m", "raftsched.cli", "demo", "--config", str(config), "--duration", "12"],
            cwd=tmp_path,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        # Every node serves the console and /metrics, and the demo says where and how to sign in.
        wait_until(lambda: "executors demo-ex1, demo-ex2 registered" in log.read_text(), 120, 0.2, "the demo")
        consoles = dict(re.findall(r"^console\s+(n\d)\s+http://(\S+)/\s", log.read_text(), re.M))
        assert sorted(consoles) == ["n1", "n2", "n3"], log.read_text()
        assert "sign in to the console with the admin token: cat " in log.read_text()
        for address in consoles.values():
            with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as reply:
                assert "raftsched_raft_term" in reply.read().decode()
            with urllib.request.urlopen(f"http://{address}/", timeout=10) as reply:
                assert "raftsched" in reply.read().decode().lower()  # the sign-in page
        assert demo.wait(timeout=180) == 0, log.read_text()
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    out = log.read_text()
    demo_data = tmp_path / "demo-data"
    assert f"their state and logs are in {demo_data}/ (delete it to start afresh)" in out
    assert not (tmp_path / "data").exists()
    node_pids = dict(re.findall(r"^node (n\d)\s+pid (\d+)\s+\(fail it over: kill -9 \2\)$", out, re.M))
    assert sorted(node_pids) == ["n1", "n2", "n3"], out
    for node_id, pid in node_pids.items():
        # The lock file names the process that held this data dir: the pid the demo printed.
        assert (demo_data / node_id / LOCK_FILE).read_text() == f"{pid}\n"
        assert (demo_data / node_id / "raft.journal").is_file()
    executor_pids = re.findall(r"^executor (demo-ex\d) pid (\d+)\s+\(kill -9 \2\)$", out, re.M)
    assert [name for name, _ in executor_pids] == ["demo-ex1", "demo-ex2"], out
    for name, pid in executor_pids:
        assert (demo_data / name / LOCK_FILE).read_text() == f"{pid}\n"
    assert re.search(r"^\S+Z  hello-every-2s\s+fired ", out, re.M), out
    # The 3-shard task's shards spread over both executors (all three landed on one before).
    spreads = [
        set(re.findall(r"^\s+ran\s+ok on (demo-ex\d) \(shard", block, re.M))
        for block in re.split(r"^\S+Z  ", out, flags=re.M)
        if block.startswith("report-every-10s")
    ]
    assert {"demo-ex1", "demo-ex2"} in spreads, out
