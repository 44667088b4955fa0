"""A bounded fuzz of every admin and executor RPC against a real 3-node cluster (see
:mod:`tests.rpc_fuzz`): no UNKNOWN or INTERNAL status, no rejected call that changed the state,
replicas identical at the end, no error or traceback in any node log. Every integer field of
every RPC is sent each of its boundary values (0, 1, -1, the type's extremes, its documented
limits +- 1: :meth:`Fuzzer.boundary_sweep`), then random requests from a fixed seed and from a
fresh one that a failure prints (``RAFTSCHED_FUZZ_SEED=<seed>`` replays it). Auth off (plaintext
loopback) for most calls, then a short phase on a cluster with auth on and an admin token, so the
authorization layer sees the same requests. ``bench/fuzz.py`` runs it longer.

The clusters are made here rather than by ``make_cluster``: the fuzzer checks the node logs
itself, with the one pysyncobj notice the chaos harness also tolerates
(:data:`tests.rpc_fuzz.KNOWN_LIBRARY_NOISE`), which ``make_cluster`` would fail the test on.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from raftsched.security.tokens import new_token
from raftsched.testing.cluster import LocalCluster
from tests.integration.conftest import ClusterFactory
from tests.rpc_fuzz import Fuzzer, boundary_cases, methods, show_path

ROUNDS_AUTH_OFF = 7  # every RPC once per round
ROUNDS_AUTH_ON = 2
AUTH = '[auth]\nbootstrap_token_file = "admin.token"\n'


@pytest.fixture
def clusters(make_cluster: ClusterFactory, tmp_path: Path) -> Callable[[str, str | None], LocalCluster]:
    """``clusters(name, admin_token)``: a started 3-node cluster (auth on with that bootstrap
    token, if given), stopped when the test ends (``make_cluster``)."""

    def make(name: str, token: str | None) -> LocalCluster:
        base = tmp_path / name
        base.mkdir()
        if token is not None:
            (base / "admin.token").write_text(token + "\n")
        cluster = make_cluster(extra_config=AUTH if token is not None else "", start=False, name=name)
        cluster.token = token
        cluster.start()
        cluster.wait_for_leader()
        return cluster

    return make


FIXED_SEED = 34  # the seed every run replays (with the boundary sweep, the CI's fixed part)
ROUNDS_RANDOM = 3  # then rounds from a fresh seed, printed on failure
SEED_ENV = "RAFTSCHED_FUZZ_SEED"  # set it to replay a failed run's random part


def _run(fuzzer: Fuzzer, rounds: int, *, sweep: bool = False, random_rounds: int = 0) -> None:
    """The boundary sweep (``sweep``), ``rounds`` from :data:`FIXED_SEED`, ``random_rounds`` from
    a random seed (or ``$RAFTSCHED_FUZZ_SEED``); then the checks. A failure names the seed."""
    seed = int(os.environ.get(SEED_ENV) or random.randrange(2**32))
    try:
        if sweep:
            fuzzer.boundary_sweep()
        fuzzer.rounds(rounds, seed=FIXED_SEED)
        if random_rounds:
            fuzzer.rounds(random_rounds, seed=seed)
        fuzzer.finish()
    finally:
        fuzzer.close()
    replay = (
        f"random part: seed {seed} (replay: {SEED_ENV}={seed} pytest {__file__})"
        if random_rounds
        else f"fixed seed {FIXED_SEED} only"
    )
    print(fuzzer.summary(), replay)
    assert not fuzzer.problems, replay + "\n" + "\n".join(fuzzer.problems[:30])
    assert set(fuzzer.by_method) == {m.name for m in methods()}
    swept = len(boundary_cases()) if sweep else 0
    assert fuzzer.calls == swept + (rounds + random_rounds) * len(methods())
    assert fuzzer.rejected_checked > fuzzer.calls // 10  # the state check did run
    if sweep:
        # Every boundary of every integer field of every RPC was sent (0, 1, -1, the type's
        # extremes, the documented limits +- 1).
        wanted = {(m.full_name, show_path(p), v) for m, p, v in boundary_cases()}
        assert fuzzer.boundaries_sent == wanted


def test_fuzz_every_rpc_auth_off(clusters: Callable[[str, str | None], LocalCluster]) -> None:
    _run(Fuzzer(clusters("plain", None)), ROUNDS_AUTH_OFF, sweep=True, random_rounds=ROUNDS_RANDOM)


def test_fuzz_every_rpc_with_an_admin_token(clusters: Callable[[str, str | None], LocalCluster]) -> None:
    admin = new_token()
    _run(Fuzzer(clusters("auth", admin), token=admin), ROUNDS_AUTH_ON)
