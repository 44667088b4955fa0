"""A bounded fuzz of every admin and executor RPC against a real 3-node cluster (see
:mod:`tests.rpc_fuzz`): no UNKNOWN or INTERNAL status, no rejected call that changed the state,
replicas identical at the end, no error or traceback in any node log. Auth off (plaintext
loopback) for most calls, then a short phase on a cluster with auth on and an admin token, so the
authorization layer sees the same requests. ``bench/fuzz.py`` runs it longer.

The clusters are made here rather than by ``make_cluster``: the fuzzer checks the node logs
itself, with the one pysyncobj notice the chaos harness also tolerates
(:data:`tests.rpc_fuzz.KNOWN_LIBRARY_NOISE`), which ``make_cluster`` would fail the test on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from raftsched.localcluster import LocalCluster
from raftsched.security.tokens import new_token
from tests.rpc_fuzz import Fuzzer, methods

ROUNDS_AUTH_OFF = 7  # every RPC once per round
ROUNDS_AUTH_ON = 2
AUTH = '[auth]\nbootstrap_token_file = "admin.token"\n'


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[Callable[[str, str | None], LocalCluster]]:
    """``clusters(name, admin_token)``: a started 3-node cluster (auth on with that bootstrap
    token, if given), stopped when the test ends; on failure the node logs stay in ``tmp_path``."""
    made: list[LocalCluster] = []

    def make(name: str, token: str | None) -> LocalCluster:
        base = tmp_path / name
        base.mkdir()
        if token is not None:
            (base / "admin.token").write_text(token + "\n")
        cluster = LocalCluster.create(base, 3, extra_config=AUTH if token is not None else "")
        cluster.token = token
        made.append(cluster)
        cluster.start()
        cluster.wait_for_leader()
        return cluster

    try:
        yield make
    finally:
        for cluster in made:
            cluster.stop()


def _run(fuzzer: Fuzzer, rounds: int) -> None:
    try:
        fuzzer.rounds(rounds)
        fuzzer.finish()
    finally:
        fuzzer.close()
    print(fuzzer.summary())
    assert not fuzzer.problems, "\n".join(fuzzer.problems[:30])
    assert set(fuzzer.by_method) == {m.name for m in methods()}
    assert fuzzer.calls == rounds * len(methods())
    assert fuzzer.rejected_checked > fuzzer.calls // 10  # the state check did run


def test_fuzz_every_rpc_auth_off(clusters: Callable[[str, str | None], LocalCluster]) -> None:
    _run(Fuzzer(clusters("plain", None)), ROUNDS_AUTH_OFF)


def test_fuzz_every_rpc_with_an_admin_token(clusters: Callable[[str, str | None], LocalCluster]) -> None:
    admin = new_token()
    _run(Fuzzer(clusters("auth", admin), token=admin), ROUNDS_AUTH_ON)
