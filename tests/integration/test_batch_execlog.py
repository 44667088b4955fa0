"""The execution log per batch with real processes: an executor SIGKILLed while a batch of
attempts runs, restarted on the same data dir within its lease, is sent the same attempts again
by the leader and runs none of them again (exactly-once start): it reports them failed as
interrupted, and its log holds batch records, not one entry per id. Over the Session stream
(issue 31 P2, the default) and over DispatchBatch, Report and Heartbeat (``--no-session``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.executor.execlog_records import MARKER_KEY, record_head
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.helpers import Fleet

pytestmark = pytest.mark.integration

SHARDS = 6
# A lease far longer than an executor's restart: the leader re-sends the attempts it still holds
# on the restarted executor instead of declaring them lost.
CONFIG = "[scheduler]\nlease_ms = 15000\nheartbeat_ms = 500\nretry_backoff_ms = 200\n"


@pytest.fixture
def long_lease_fleet(tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(tmp_path)
    f.cluster = LocalCluster.create(tmp_path / "long", 3, extra_config=CONFIG)
    try:
        f.cluster.start()
        f.cluster.wait_for_leader(60)
        yield f
    finally:
        f.stop()


@pytest.mark.parametrize("session", [True, False], ids=["session", "no-session"])
def test_an_executor_killed_mid_batch_and_restarted_runs_no_begun_attempt_again(
    long_lease_fleet: Fleet, session: bool
) -> None:
    fleet = long_lease_fleet
    extra = () if session else ("--no-session",)
    m = fleet.marker
    command = (
        f'echo "$RAFTSCHED_EXECUTION_ID start" >> {m}; sleep 4; echo "$RAFTSCHED_EXECUTION_ID end" >> {m}'
    )
    fleet.start_executor("ex1", SHARDS, *extra)
    with Client(fleet.cluster.targets()) as client:
        wait_until(fleet.all_registered, 30, what="ex1 registered")
        client.add_task(TaskSpec("job", ManualTrigger(), command=command, shards=SHARDS, max_retries=2))
        run = client.trigger("job")
        # Every shard's attempt was dispatched in one message and begun in one record: all start.
        wait_until(
            lambda: sum(1 for x in fleet.lines() if x[1] == "start") >= SHARDS, 30, 0.1, "attempts started"
        )
        fleet.kill_executor("ex1")  # each attempt begun, none finished
        before = fleet.registered()  # (more than 1 if a leader change made it register again)
        fleet.start_executor("ex1", SHARDS, *extra)  # the same data dir: its execution log survives
        wait_until(lambda: fleet.registered() > before, 30, what="ex1 registered again")
        wait_until(
            lambda: (
                next(r for r in client.runs("job") if r.run_id == run.run_id).state
                in (pb.SUCCEEDED, pb.FAILED)
            ),
            90,
            0.2,
            "the run to finish",
        )
        [final] = [r for r in client.runs("job") if r.run_id == run.run_id]
    fleet.stop()  # the executor closes its log: read it
    starts = Counter(x[0] for x in fleet.lines() if x[1] == "start")
    assert all(n == 1 for n in starts.values()), f"an execution id started twice: {starts}"
    first = {f"{run.run_id}/{shard}/1" for shard in range(SHARDS)}
    assert first <= set(starts)
    assert final.state == pb.SUCCEEDED, final
    assert all(s.attempt == 2 for s in final.shards), final  # each first attempt reported failed
    log_text = (fleet.base / "ex1.log").read_text()
    assert log_text.count("session 1 open with") == (2 if session else 0), log_text[-3000:]
    # Interrupted attempts are recovered from the begin record by the restarted agent.
    assert log_text.count("was interrupted by a restart") == SHARDS, log_text[-3000:]
    with LmdbExecutionLog(fleet.base / "ex1") as raw:
        keys = [key for key, _, _ in raw.items()]
        kinds = Counter(chr(record_head(k, v)[0]) for k, v, _ in raw.items() if k != MARKER_KEY)
    assert keys[0] == MARKER_KEY and all(k.startswith("\x01") for k in keys), keys  # no per-id entries
    assert kinds["B"] >= 1 and kinds["F"] >= 1
