"""``nodes[].http``: the optional HTTP listener address of a node (off when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftsched.config.load import parse_config
from raftsched.config.types import NodeConfig
from raftsched.errors import ConfigError
from tests.unit.test_config import node, problems_of, valid_data


def test_http_is_off_when_absent_and_canonical_when_given() -> None:
    data = valid_data()
    node(data, 0)["http"] = "LOCALHOST:09101"
    node(data, 1)["http"] = "0.0.0.0:9102"  # a wildcard is fine to listen on
    node(data, 2)["http"] = "[::1]:9103"
    data["cluster"]["insecure"] = True  # type: ignore[index]  # a non-loopback listener without TLS and auth (see below)

    config = parse_config(data)

    assert [n.http for n in config.nodes] == ["localhost:9101", "0.0.0.0:9102", "[::1]:9103"]
    assert parse_config(valid_data()).node("n1").http is None


def test_http_problems_are_listed_with_their_key_path() -> None:
    data = valid_data()
    node(data, 0)["http"] = "127.0.0.1:70000"
    node(data, 1)["http"] = 9102
    node(data, 2)["http"] = "127.0.0.1:7001"  # n1's raft address

    assert problems_of(data) == [
        "nodes[0].http: port 70000 out of range (1-65535)",
        "nodes[1].http: expected a string, got integer",
        "nodes[2].http: address 127.0.0.1:7001 already used by nodes[0].raft",
    ]


def test_a_hand_built_node_config_checks_http_too() -> None:
    with pytest.raises(ConfigError, match="http: 'x': missing port"):
        NodeConfig("n1", "127.0.0.1:7001", "127.0.0.1:7101", Path("/x"), http="x")


def test_a_non_loopback_http_listener_needs_tls_on_it_and_auth(tmp_path: Path) -> None:
    data = valid_data()
    node(data, 1)["http"] = "0.0.0.0:9102"
    assert problems_of(data) == [
        "nodes[1].http: 0.0.0.0:9102 is not a loopback address, and serving the HTTP API and console "
        "beyond this machine requires TLS on it (the [tls] table with http = true) and authentication "
        "(the [auth] table); configure them, or set cluster.insecure = true to accept the exposure"
    ]
    data["tls"] = {"cert_file": str(tmp_path / "n.pem"), "key_file": str(tmp_path / "n.key")}
    data["auth"] = {}
    assert [p.split(" requires ")[1] for p in problems_of(data)] == [
        "TLS on it (the [tls] table with http = true); configure them, or set cluster.insecure = true "
        "to accept the exposure"
    ]
    data["tls"]["http"] = True  # type: ignore[index]
    assert parse_config(data).tls is not None


def test_tls_http_keys_are_checked(tmp_path: Path) -> None:
    data = valid_data()
    data["tls"] = {
        "cert_file": str(tmp_path / "n.pem"),
        "key_file": str(tmp_path / "n.key"),
        "http": "yes",
        "http_metrics_client_cert": True,
    }
    assert problems_of(data) == [
        "tls.http: expected a boolean (true or false), got string",
        "tls.http_metrics_client_cert: needs tls.http = true and tls.ca_file (scrapers' certificates "
        "are checked against it)",
    ]


def test_the_api_table_defaults_match_the_gateway_and_are_checked() -> None:
    from raftsched.config.types import ApiSettings
    from raftsched.leader.window import DEFAULT_LEAD_MS
    from raftsched.rpc.http_api import FIRING_HOLD_MS, MAX_CALLS, MAX_WAITING

    defaults = ApiSettings(MAX_CALLS, MAX_WAITING, FIRING_HOLD_MS, DEFAULT_LEAD_MS)
    assert parse_config(valid_data()).api == defaults
    data = valid_data()
    data["api"] = {"max_calls": 8, "max_waiting": 0, "firing_hold_ms": "250ms", "firing_lead_ms": 0}
    assert parse_config(data).api == ApiSettings(8, 0, 250, 0)
    data["api"] = {"max_calls": 0, "firing_hold_ms": -1, "firing_lead_ms": "2s", "max_wait": 3}
    assert problems_of(data) == [
        "api.max_wait: unknown key (did you mean 'max_waiting'?)",
        "api.max_calls: must be between 1 and 10000, got 0",
        "api.firing_hold_ms: must be between 0 (never wait) and 10000, got -1",
        "api.firing_lead_ms: must be between 0 and 1000, got 2000",
    ]
    with pytest.raises(ConfigError, match=r"api\.max_waiting"):
        ApiSettings(max_waiting=-1)
