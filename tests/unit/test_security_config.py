"""The [tls] table, cluster.insecure and the safe-defaults rule; the certificates module; the
demo's generated config."""

from __future__ import annotations

import dataclasses
import datetime as dt
import stat
import tomllib
from pathlib import Path

import pytest

from raftsched.config.load import load_config, parse_config
from raftsched.config.types import ClusterConfig, NodeConfig, TlsSettings
from raftsched.config.values import is_loopback
from raftsched.errors import ConfigError
from raftsched.security.certs import check_key_pair, names_host, new_ca, write_demo_pki
from raftsched.testing.demo import config_toml

SECRET = "unit-test-secret-0123456789"
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
EXAMPLE = Path(__file__).resolve().parents[2] / "cluster.example.toml"


def _data(*grpc: str, **extra: object) -> dict[str, object]:
    data: dict[str, object] = {
        "cluster": {"secret": SECRET},
        "nodes": [
            {"id": f"n{i}", "raft": f"127.0.0.1:{7001 + i}", "grpc": g, "data_dir": f"d{i}"}
            for i, g in enumerate(grpc)
        ],
    }
    data.update(extra)
    return data


def _problems(data: dict[str, object]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data, base_dir=Path("/base"))
    return info.value.problems


def test_tls_table_paths_resolve_against_the_config_directory() -> None:
    tls = {
        "cert_file": "tls/node.pem",
        "key_file": "/etc/k.key",
        "ca_file": "ca.pem",
        "require_client_cert": True,
    }
    config = parse_config(_data("127.0.0.1:7101", tls=tls), base_dir=Path("/base"))
    assert config.tls == TlsSettings(
        Path("/base/tls/node.pem"), Path("/etc/k.key"), Path("/base/ca.pem"), True
    )
    assert parse_config(_data("127.0.0.1:7101"), base_dir=Path("/base")).tls is None


@pytest.mark.parametrize(
    ("tls", "expected"),
    [
        (
            {},
            [
                "tls.cert_file: required (the node's PEM certificate chain)",
                "tls.key_file: required (the node's PEM private key)",
            ],
        ),
        (
            {"cert_file": "c", "key_file": "k", "require_client_cert": True},
            [
                "tls.ca_file: required when tls.require_client_cert is true "
                "(client certificates are checked against it)"
            ],
        ),
        (
            {"cert_file": "c", "key_file": "k", "require_client_cert": "yes"},
            ["tls.require_client_cert: expected a boolean (true or false), got string"],
        ),
        ({"cert_file": 1, "key_file": "k"}, ["tls.cert_file: expected a string, got integer"]),
        (
            {"cert_file": "c", "key_file": "k", "ca_fil": "x"},
            ["tls.ca_fil: unknown key (did you mean 'ca_file'?)"],
        ),
    ],
)
def test_tls_table_problems_are_reported_with_their_path(tls: dict[str, object], expected: list[str]) -> None:
    assert _problems(_data("127.0.0.1:7101", tls=tls)) == expected


def test_insecure_must_be_a_boolean() -> None:
    data = _data("127.0.0.1:7101")
    data["cluster"] = {"secret": SECRET, "insecure": 1}
    assert _problems(data) == ["cluster.insecure: expected a boolean (true or false), got integer"]


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1:1", True),
        ("127.5.6.7:1", True),
        ("[::1]:1", True),
        ("localhost:1", True),
        ("node.localhost:1", True),
        ("0.0.0.0:1", False),
        ("[::]:1", False),
        ("10.0.0.1:1", False),
        ("node-1.example:1", False),
        ("not an address", False),
    ],
)
def test_is_loopback(address: str, loopback: bool) -> None:
    assert is_loopback(address) is loopback


def test_a_non_loopback_grpc_address_needs_tls_and_auth_or_insecure() -> None:
    data = _data("127.0.0.1:7101", "10.0.0.2:7102")
    expected = (
        "nodes[1].grpc: 10.0.0.2:7102 is not a loopback address, and serving the gRPC API beyond "
        "this machine requires TLS (the [tls] table) and authentication (the [auth] table); "
        "configure them, or set cluster.insecure = true to accept the exposure (anyone who "
        "reaches the port can then run commands on the executors)"
    )
    assert _problems(data) == [expected]
    # TLS alone is not enough: authentication is the other half of the rule, and the reverse.
    with_tls = _data("127.0.0.1:7101", "10.0.0.2:7102", tls={"cert_file": "c", "key_file": "k"})
    assert _problems(with_tls) == [expected.replace("TLS (the [tls] table) and ", "")]
    with_auth = _data("127.0.0.1:7101", "10.0.0.2:7102")
    with_auth["auth"] = {}
    assert _problems(with_auth) == [expected.replace(" and authentication (the [auth] table)", "")]
    both = _data("127.0.0.1:7101", "10.0.0.2:7102", tls={"cert_file": "c", "key_file": "k"})
    both["auth"] = {"bootstrap_token_file": "admin.token"}
    assert parse_config(both).auth_configured is True
    data["cluster"] = {"secret": SECRET, "insecure": True}
    assert parse_config(data).insecure is True


def test_a_wildcard_grpc_bind_is_exposure_too() -> None:
    data = _data("127.0.0.1:7101")
    nodes = data["nodes"]
    assert isinstance(nodes, list)
    nodes[0]["grpc_bind"] = "0.0.0.0:7101"
    (problem,) = _problems(data)
    assert problem.startswith("nodes[0].grpc_bind: 0.0.0.0:7101 is not a loopback address")


def test_the_rule_holds_for_hand_built_configs_too(tmp_path: Path) -> None:
    node = NodeConfig("n1", "127.0.0.1:7001", "192.168.1.5:7101", tmp_path)
    with pytest.raises(ConfigError, match="is not a loopback address"):
        ClusterConfig(name="c", secret=SECRET, nodes=(node,))
    assert ClusterConfig(name="c", secret=SECRET, nodes=(node,), insecure=True).auth_configured is False


def test_the_example_config_documents_tls_and_insecure() -> None:
    text = EXAMPLE.read_text()
    for key in ("[tls]", "cert_file", "key_file", "ca_file", "require_client_cert", "insecure"):
        assert key in text
    assert load_config(EXAMPLE).tls is None  # the example itself runs plaintext on loopback


# --------------------------------------------------------------------------------------------
# Certificates
# --------------------------------------------------------------------------------------------


def test_issued_certificates_match_their_keys_and_name_their_hosts() -> None:
    ca = new_ca("test CA", now=NOW, days=10)
    pair = ca.issue("n1", ["127.0.0.1", "node1.example"], now=NOW, days=2)
    summary = check_key_pair(pair.cert_pem, pair.key_pem)
    assert summary.startswith("CN=n1, serial ") and summary.endswith("expires 2026-01-03T00:00:00Z")
    assert "key_pem" not in repr(pair) or "BEGIN" not in repr(pair)
    other = ca.issue("n2", now=NOW)
    with pytest.raises(ValueError, match="does not belong"):
        check_key_pair(pair.cert_pem, other.key_pem)
    with pytest.raises(ValueError, match="not a PEM private key"):
        check_key_pair(pair.cert_pem, b"junk")
    with pytest.raises(ValueError, match="not a PEM certificate"):
        check_key_pair(b"junk", pair.key_pem)


def test_demo_pki_is_written_once_with_private_keys_readable_by_the_owner_only(tmp_path: Path) -> None:
    pki = write_demo_pki(tmp_path / "tls", ["127.0.0.1"], now=NOW)
    for key in (pki.node_key, pki.client_key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert not list((tmp_path / "tls").glob("*ca*.key")), "the CA key is not kept"
    before = pki.node_cert.read_bytes()
    assert write_demo_pki(tmp_path / "tls", ["127.0.0.1"], now=NOW + dt.timedelta(days=30)) == pki
    assert pki.node_cert.read_bytes() == before  # still valid: kept
    write_demo_pki(tmp_path / "tls", ["127.0.0.1"], now=NOW + dt.timedelta(days=400))
    assert pki.node_cert.read_bytes() != before  # expired (or about to): made anew


def test_the_demo_config_reads_back_equal(tmp_path: Path) -> None:
    base = load_config(EXAMPLE)
    nodes = (dataclasses.replace(base.nodes[0], grpc_bind="127.0.0.1:9999"), *base.nodes[1:])
    config = dataclasses.replace(
        base, nodes=nodes, tls=TlsSettings(tmp_path / 'a "b".pem', tmp_path / "k", tmp_path / "ca", True)
    )
    path = tmp_path / "demo.toml"
    path.write_text(config_toml(config, "test"))
    tomllib.loads(path.read_text())
    assert dataclasses.replace(load_config(path), source=config.source) == config


def test_names_host_matches_ips_dns_names_and_one_label_wildcards() -> None:
    ca = new_ca("test CA", now=NOW)
    cert = ca.issue("n1", ["127.0.0.1", "::1", "node1.example", "*.nodes.example"], now=NOW).cert_pem
    for host in ("127.0.0.1", "::1", "Node1.Example", "n7.nodes.example"):
        assert names_host(cert, host), host
    for host in ("127.0.0.2", "node2.example", "a.b.nodes.example", "nodes.example"):
        assert not names_host(cert, host), host
    assert not names_host(ca.issue("bare", now=NOW).cert_pem, "127.0.0.1")  # no SAN at all
