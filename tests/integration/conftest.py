"""Fixtures of the integration suite: real node processes on loopback, always stopped afterwards."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.testing.cluster import LocalCluster, wait_until
from tests.integration.helpers import KNOWN_LIBRARY_NOISE, Fleet, set_aside_known_noise

ClusterFactory = Callable[..., LocalCluster]

_LOG_TAIL_LINES = 40
# A node logging an error or a traceback is a bug even when every assertion held (an exception
# swallowed on the tick thread, a failed flush...): the test reports it.
_LOG_PROBLEM = re.compile(r" (ERROR|CRITICAL) |^Traceback ")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, object, object]:
    # Remember each phase's report on the item, so a fixture's finalizer knows whether the test failed.
    report = yield
    setattr(item, f"report_{call.when}", report)
    return report


def _failed(request: pytest.FixtureRequest) -> bool:
    report = getattr(request.node, "report_call", None)
    return report is None or bool(getattr(report, "failed", True))


def _log_problems(cluster: LocalCluster, limit: int = 20) -> list[str]:
    found: list[str] = []
    for log in sorted(cluster.log_dir.glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if _LOG_PROBLEM.search(line):
                found.append(f"{log.name}: {line}")
    return found[:limit] + ([f"... {len(found) - limit} more"] if len(found) > limit else [])


def _log_tails(cluster: LocalCluster) -> str:
    parts = []
    for log in sorted(cluster.log_dir.glob("*.log")):
        lines = log.read_text(errors="replace").splitlines()
        parts.append(f"==== {log} (last {_LOG_TAIL_LINES} of {len(lines)} lines)")
        parts += lines[-_LOG_TAIL_LINES:]
    return "\n".join(parts)


def _noise_unproven(cluster: LocalCluster, wait_s: float = 20.0) -> str | None:
    """Whether pysyncobj's spurious-truncation line (``KNOWN_LIBRARY_NOISE``, LIBRARY-NOTES 1.11)
    in ``cluster``'s node logs may be set aside: ``None`` when it is absent or the live replicas
    are shown not to have diverged, else why it stays a problem. Asked while the nodes run.

    pysyncobj logs the line (CRITICAL) when a follower drops entries it has applied because a
    late reply moved the leader's ``nextIndex`` back; it then takes the identical entries again,
    and the replica guard never applies an index twice. A real divergence shows as unequal apply
    chains or state digests, so that, not the line, is what is checked: the apply chains at one
    index, or (when a restarted node has applied nothing itself since: it has no chain record of
    what it replayed) the state digests. Only the line is then set aside (into
    ``<cluster>/<node>.noise.log``); any other error or traceback still fails the test.
    """
    logs = sorted(cluster.log_dir.glob("*.log"))
    if not any(KNOWN_LIBRARY_NOISE in log.read_text(errors="replace") for log in logs):
        return None
    live = cluster.alive()
    if len(live) < 2:
        return f"pysyncobj's truncation notice, and {len(live)} live node to compare"
    for nid in live:
        cluster.procs[nid].send_signal(signal.SIGCONT)  # a node the test left paused
    differ: list[str] = []

    def compared() -> bool:
        # An unreachable node (one still starting) or a missing chain record raises: asked again.
        try:
            cluster.chains_agree(live, timeout=min(10.0, wait_s))
        except AssertionError as exc:  # an answer: they differ
            differ.append(str(exc))
        return True

    try:
        wait_until(compared, wait_s, 0.2, "the live nodes' apply chains")
    except TimeoutError:  # no chain record at the lowest applied index: compare the digests
        try:
            cluster.wait_converged(30, live)
        except Exception as exc:
            return f"pysyncobj's truncation notice, and the replicas were not shown equal: {exc!r}"
    if differ:
        return f"pysyncobj's truncation notice, and the apply chains differ: {differ[0]}"
    return None


@pytest.fixture
def make_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ClusterFactory]:
    """``make_cluster(nodes=3, extra_config="", start=True)``: a LocalCluster in ``tmp_path``.

    Every cluster made is stopped (SIGCONT + SIGTERM, then SIGKILL) when the test ends, pass or
    fail; on failure the tail of every node log is printed (pytest shows it with the failure).
    A passing test whose nodes logged an ERROR, CRITICAL or traceback errors in teardown, except
    pysyncobj's known truncation notice once the replicas are shown equal
    (:func:`_noise_unproven`).
    """
    made: list[LocalCluster] = []

    def make(
        nodes: int = 3, extra_config: str = "", start: bool = True, name: str = "cluster"
    ) -> LocalCluster:
        cluster = LocalCluster.create(tmp_path / name, nodes, extra_config=extra_config)
        made.append(cluster)
        if start:
            cluster.start()
        return cluster

    try:
        yield make
    finally:
        failed = _failed(request)
        # Checked while the nodes still run: whether replicas diverged is asked of them.
        unproven = [] if failed else [_noise_unproven(cluster) for cluster in made]
        for cluster in made:
            cluster.stop()
        for cluster, why in zip(made, unproven, strict=False):
            if why is None:
                set_aside_known_noise(cluster, cluster.log_dir.parent)
        if made and failed:
            for cluster in made:
                print(_log_tails(cluster))
        elif made:
            problems = [why for why in unproven if why]
            problems += [line for cluster in made for line in _log_problems(cluster)]
            if problems:
                pytest.fail("node logs report errors:\n" + "\n".join(problems), pytrace=False)


@pytest.fixture
def cluster(make_cluster: ClusterFactory) -> LocalCluster:
    """A started 3-node cluster (stopped by ``make_cluster``'s finalizer)."""
    return make_cluster()


@pytest.fixture
def client(cluster: LocalCluster) -> Iterator[Client]:
    """The SDK client over every node of ``cluster``."""
    with Client(cluster.targets()) as c:
        yield c


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    """A started :class:`~tests.integration.helpers.Fleet` (3 nodes with fast leases) with its
    leader elected; its executors and nodes are stopped when the test ends."""
    f = Fleet(tmp_path)
    try:
        f.cluster.start()
        f.cluster.wait_for_leader(60)
        yield f
    finally:
        f.stop()
