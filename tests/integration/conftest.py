"""Fixtures of the integration suite: real node processes on loopback, always stopped afterwards."""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.testing.cluster import LocalCluster
from tests.integration.helpers import Fleet

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


@pytest.fixture
def make_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ClusterFactory]:
    """``make_cluster(nodes=3, extra_config="", start=True)``: a LocalCluster in ``tmp_path``.

    Every cluster made is stopped (SIGCONT + SIGTERM, then SIGKILL) when the test ends, pass or
    fail; on failure the tail of every node log is printed (pytest shows it with the failure).
    A passing test whose nodes logged an ERROR, CRITICAL or traceback errors in teardown.
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
        for cluster in made:
            cluster.stop()
        if made and _failed(request):
            for cluster in made:
                print(_log_tails(cluster))
        elif made:
            problems = [line for cluster in made for line in _log_problems(cluster)]
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
