"""``nodes[].http``: the optional HTTP listener address of a node (off when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftsched.config import NodeConfig, parse_config
from raftsched.errors import ConfigError
from tests.unit.test_config import node, problems_of, valid_data


def test_http_is_off_when_absent_and_canonical_when_given() -> None:
    data = valid_data()
    node(data, 0)["http"] = "LOCALHOST:09101"
    node(data, 1)["http"] = "0.0.0.0:9102"  # a wildcard is fine to listen on
    node(data, 2)["http"] = "[::1]:9103"

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
