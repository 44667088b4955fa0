"""The integration fixture ``make_cluster`` fails a passing test whose nodes logged an error; the
one exception is pysyncobj's spurious-truncation notice (LIBRARY-NOTES 1.11), and only once the
live replicas are shown not to have diverged (equal apply chains, else equal state digests)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import grpc
import pytest

from raftsched.testing.cluster import LocalCluster
from tests.integration.conftest import _log_problems, _noise_unproven
from tests.integration.helpers import KNOWN_LIBRARY_NOISE, set_aside_known_noise

NOISE = f"2026-12-05 08:00:00,000 {KNOWN_LIBRARY_NOISE} [12, 15] state machine may have diverged\n"


class _Proc:
    def __init__(self) -> None:
        self.signals: list[int] = []

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)


@dataclass
class _Cluster:
    """What ``_noise_unproven`` asks of a LocalCluster: its logs, live nodes, chains, digests."""

    log_dir: Path
    chains: str = "equal"  # equal | differ | unrecorded
    digests_equal: bool = True
    procs: dict[str, _Proc] = field(default_factory=lambda: {n: _Proc() for n in ("n1", "n2", "n3")})

    def alive(self) -> list[str]:
        return list(self.procs)

    def chains_agree(self, nodes: list[str], timeout: float) -> tuple[int, str]:
        if self.chains == "differ":
            raise AssertionError("replicas disagree at index 40: {...}")
        if self.chains == "unrecorded":
            raise TimeoutError("timed out after 15s waiting for every node to report its chain")
        return 40, "c"

    def wait_converged(self, timeout: float, nodes: list[str]) -> str:
        if not self.digests_equal:
            raise TimeoutError("timed out after 30s waiting for replicas to converge")
        return "d"


def _cluster(tmp_path: Path, **kw: object) -> _Cluster:
    logs = tmp_path / "cluster" / "logs"
    logs.mkdir(parents=True)
    (logs / "n1.log").write_text("INFO started\n")
    (logs / "n2.log").write_text("INFO started\n" + NOISE + "INFO caught up\n")
    return _Cluster(logs, **kw)  # type: ignore[arg-type]


def test_the_notice_is_set_aside_when_the_apply_chains_agree(tmp_path: Path) -> None:
    fake = _cluster(tmp_path)
    cluster = cast(LocalCluster, fake)
    assert _log_problems(cluster) == [f"n2.log: {NOISE.rstrip()}"]
    assert _noise_unproven(cluster) is None
    set_aside_known_noise(cluster, fake.log_dir.parent)
    assert _log_problems(cluster) == []
    assert (fake.log_dir / "n2.log").read_text() == "INFO started\nINFO caught up\n"
    assert (fake.log_dir.parent / "n2.noise.log").read_text() == NOISE  # kept, outside the logs


def test_unequal_apply_chains_keep_it_a_problem(tmp_path: Path) -> None:
    why = _noise_unproven(cast(LocalCluster, _cluster(tmp_path, chains="differ")))
    assert why is not None and "apply chains differ" in why and "index 40" in why


def test_without_chain_records_equal_digests_prove_it(tmp_path: Path) -> None:
    assert _noise_unproven(cast(LocalCluster, _cluster(tmp_path, chains="unrecorded")), 0.3) is None
    why = _noise_unproven(
        cast(LocalCluster, _cluster(tmp_path / "b", chains="unrecorded", digests_equal=False)), 0.3
    )
    assert why is not None and "not shown equal" in why


def test_a_node_not_yet_answering_is_asked_again(tmp_path: Path) -> None:
    fake = _cluster(tmp_path)
    answers = iter([grpc.RpcError(), grpc.RpcError()])

    def flaky(nodes: list[str], timeout: float) -> tuple[int, str]:
        failure = next(answers, None)
        if failure is not None:
            raise failure  # "connection refused": its gRPC port is not up yet
        return 40, "c"

    fake.chains_agree = flaky  # type: ignore[method-assign]
    fake.digests_equal = False  # so only the chains can prove it
    assert _noise_unproven(cast(LocalCluster, fake), 5) is None


def test_one_live_node_proves_nothing(tmp_path: Path) -> None:
    fake = _cluster(tmp_path)
    fake.procs = {"n2": _Proc()}
    why = _noise_unproven(cast(LocalCluster, fake))
    assert why is not None and "1 live node" in why


def test_paused_nodes_are_resumed_before_they_are_asked(tmp_path: Path) -> None:
    fake = _cluster(tmp_path)
    _noise_unproven(cast(LocalCluster, fake))
    assert all(proc.signals for proc in fake.procs.values())


@pytest.mark.parametrize("line", ["2026-12-05 ERROR raftsched.node: flush failed\n", "Traceback (x)\n"])
def test_other_problems_are_never_set_aside(tmp_path: Path, line: str) -> None:
    fake = _cluster(tmp_path)
    (fake.log_dir / "n1.log").write_text(line)
    cluster = cast(LocalCluster, fake)
    assert _noise_unproven(cluster) is None
    set_aside_known_noise(cluster, fake.log_dir.parent)
    assert _log_problems(cluster) == [f"n1.log: {line.rstrip()}"]
