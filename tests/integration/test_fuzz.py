"""A bounded fuzz of every admin and executor RPC against a real 3-node cluster (see
:mod:`tests.rpc_fuzz`): no UNKNOWN or INTERNAL status, no rejected call that changed the state,
replicas identical at the end, no error or traceback in any node log. Auth off (plaintext
loopback) for most calls, then a short phase on a cluster with auth on and an admin token, so the
authorization layer sees the same requests. ``bench/fuzz.py`` runs it longer."""

from __future__ import annotations

from pathlib import Path

from raftsched.security.tokens import new_token
from tests.integration.conftest import ClusterFactory
from tests.rpc_fuzz import Fuzzer, methods

ROUNDS_AUTH_OFF = 7  # every RPC once per round
ROUNDS_AUTH_ON = 2


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


def test_fuzz_every_rpc_auth_off(make_cluster: ClusterFactory) -> None:
    cluster = make_cluster()
    cluster.wait_for_leader()
    _run(Fuzzer(cluster), ROUNDS_AUTH_OFF)


def test_fuzz_every_rpc_with_an_admin_token(make_cluster: ClusterFactory, tmp_path: Path) -> None:
    admin = new_token()
    (tmp_path / "auth").mkdir()
    (tmp_path / "auth" / "admin.token").write_text(admin + "\n")
    cluster = make_cluster(
        extra_config='[auth]\nbootstrap_token_file = "admin.token"\n', start=False, name="auth"
    )
    cluster.token = admin
    cluster.start()
    cluster.wait_for_leader()
    _run(Fuzzer(cluster, token=admin), ROUNDS_AUTH_ON)
