"""raftsched.config: TOML → frozen, validated ClusterConfig; every problem reported at once, with its path."""

from __future__ import annotations

import copy
import dataclasses
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raftsched.alerts.config import AlertsConfig
from raftsched.config.load import load_config, parse_config
from raftsched.config.types import ClusterConfig, NodeConfig, RaftTuning, SchedulerSettings
from raftsched.config.values import parse_address
from raftsched.errors import ConfigError, InvalidSpec

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = REPO_ROOT / "cluster.example.toml"
SECRET = "0123456789abcdef-test"

Data = dict[str, object]


def valid_data(n: int = 3) -> Data:
    return {
        "cluster": {"secret": SECRET},
        "nodes": [
            {
                "id": f"n{i}",
                "raft": f"127.0.0.1:{7000 + i}",
                "grpc": f"127.0.0.1:{7100 + i}",
                "data_dir": f"data/n{i}",
            }
            for i in range(1, n + 1)
        ],
    }


def problems_of(data: Data, base_dir: Path | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data, source="test.toml", base_dir=base_dir)
    assert info.value.source == "test.toml"
    return info.value.problems


def node(data: Data, i: int) -> dict[str, object]:
    nodes = data["nodes"]
    assert isinstance(nodes, list)
    item = nodes[i]
    assert isinstance(item, dict)
    return item


def table(data: Data, key: str) -> dict[str, object]:
    value = data.setdefault(key, {})
    assert isinstance(value, dict)
    return value


# --------------------------------------------------------------------------------------------
# Valid input
# --------------------------------------------------------------------------------------------


def test_example_file_loads() -> None:
    config = load_config(EXAMPLE)

    assert config.source == str(EXAMPLE)
    assert config.name == "demo"
    assert len(config.secret) >= 16
    assert [n.id for n in config.nodes] == ["n1", "n2", "n3"]
    assert [n.raft for n in config.nodes] == ["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"]
    assert config.grpc_targets() == ["127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103"]
    assert [n.data_dir for n in config.nodes] == [REPO_ROOT / "data" / f"n{i}" for i in (1, 2, 3)]
    # The example documents the defaults: its [raft] and [scheduler] values are exactly them.
    assert config.raft == RaftTuning()
    assert config.scheduler == SchedulerSettings()
    assert config.alerts == AlertsConfig()


def test_example_file_documents_every_key_with_a_comment() -> None:
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if "=" in line and not line.lstrip().startswith("#"):
            assert lines[i - 1].lstrip().startswith("#"), f"line {i + 1} has no comment: {line!r}"
    text = "\n".join(lines)
    for cls in (NodeConfig, RaftTuning, SchedulerSettings):
        for f in dataclasses.fields(cls):
            # Optional keys are documented as commented-out examples.
            optional = f.name in ("grpc_bind", "raft_bind", "raft_via", "http")
            assert f"\n{'# ' if optional else ''}{f.name} = " in text, f.name
    assert "\n# secret_file = " in text
    assert "CHANGE IT" in text


def test_defaults(tmp_path: Path) -> None:
    config = parse_config(valid_data(1), base_dir=tmp_path)

    assert config.name == "raftsched"
    assert config.source == "<config>"
    assert config.raft == RaftTuning()
    assert config.raft.append_entries_period == 0.02
    assert config.raft.raft_min_timeout == 0.4
    assert config.raft.log_compaction_min_entries == 20000
    assert config.scheduler.misfire_grace_seconds == 5
    assert config.scheduler.history_keep_seconds == 604800
    assert config.scheduler.max_fires_per_batch == 1000


def test_values_override_defaults_and_ints_are_accepted_for_floats(tmp_path: Path) -> None:
    data = valid_data()
    table(data, "raft").update({"append_entries_period": 0.05, "connection_timeout": 4})
    table(data, "scheduler").update({"misfire_grace_seconds": 0, "max_fires_per_batch": 100000})

    config = parse_config(data, base_dir=tmp_path)

    assert config.raft.append_entries_period == 0.05
    assert config.raft.connection_timeout == 4.0
    assert type(config.raft.connection_timeout) is float
    assert config.scheduler.misfire_grace_seconds == 0
    assert config.scheduler.max_fires_per_batch == 100000


def test_duration_keys_also_take_a_duration_string_with_a_unit(tmp_path: Path) -> None:
    data = valid_data()
    table(data, "raft").update(
        {"append_entries_period": "50ms", "raft_max_timeout": "1.5s", "log_compaction_min_time": "10m"}
    )
    table(data, "scheduler").update(
        {
            "misfire_grace_seconds": "30s",
            "misfire_all_window_seconds": "2h",
            "history_keep_seconds": "2w",
            "idempotency_keep_seconds": "1d",
            "lease_ms": "30s",
            "heartbeat_ms": "2.5s",
            "kill_grace_ms": "500ms",
            "retry_backoff_cap_ms": "1h",
        }
    )

    config = parse_config(data, base_dir=tmp_path)

    assert config.raft.append_entries_period == 0.05
    assert config.raft.raft_max_timeout == 1.5
    assert config.raft.log_compaction_min_time == 600
    settings = config.scheduler
    assert (settings.misfire_grace_seconds, settings.misfire_all_window_seconds) == (30, 7200)
    assert (settings.history_keep_seconds, settings.idempotency_keep_seconds) == (1_209_600, 86_400)
    assert (settings.lease_ms, settings.heartbeat_ms, settings.kill_grace_ms) == (30_000, 2_500, 500)
    assert settings.retry_backoff_cap_ms == 3_600_000


def test_duration_string_problems_are_reported_with_their_path_and_nothing_else() -> None:
    data = valid_data()
    table(data, "raft").update({"auto_tick_period": "5 ms"})
    table(data, "scheduler").update(
        {
            "misfire_grace_seconds": "1500ms",
            "heartbeat_ms": "soon",
            "lease_ms": "1000",
            "max_fires_per_batch": "10s",
        }
    )

    problems = problems_of(data)

    # heartbeat_ms is unreadable, so the heartbeat/lease relation is not checked against a default.
    assert problems == [
        "raft.auto_tick_period: '5 ms' is not a duration (no space between the number and the unit); "
        "use a number with a unit: 500ms, 90s, 10m, 2h, 1d, 1w (decimals such as 1.5h too)",
        "scheduler.misfire_grace_seconds: '1500ms' is not a whole number of seconds",
        "scheduler.heartbeat_ms: 'soon' is not a duration; "
        "use a number with a unit: 500ms, 90s, 10m, 2h, 1d, 1w (decimals such as 1.5h too)",
        "scheduler.lease_ms: '1000' has no unit; "
        "use a number with a unit: 500ms, 90s, 10m, 2h, 1d, 1w (decimals such as 1.5h too)",
        "scheduler.max_fires_per_batch: expected an integer, got string",
    ]


def test_relative_data_dir_resolves_against_base_dir(tmp_path: Path) -> None:
    data = valid_data(2)
    node(data, 0)["data_dir"] = "./state/../data/n1"
    node(data, 1)["data_dir"] = "/var/lib/raftsched/n2"

    config = parse_config(data, base_dir=tmp_path)

    assert config.nodes[0].data_dir == tmp_path / "data" / "n1"
    assert config.nodes[1].data_dir == Path("/var/lib/raftsched/n2")


def test_relative_data_dir_defaults_to_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = parse_config(valid_data(1))
    assert config.nodes[0].data_dir == tmp_path / "data" / "n1"


def test_load_config_resolves_against_the_config_files_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf_dir = tmp_path / "etc"
    conf_dir.mkdir()
    (conf_dir / "cluster.toml").write_text(
        f"""
[cluster]
secret = "{SECRET}"
[[nodes]]
id = "n1"
raft = "127.0.0.1:7001"
grpc = "127.0.0.1:7101"
data_dir = "data/n1"
""",
        encoding="utf-8",
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    config = load_config("../etc/cluster.toml")

    assert config.source == "../etc/cluster.toml"
    assert config.nodes[0].data_dir == conf_dir / "data" / "n1"


def test_secret_file_is_read_relative_to_base_dir_and_stripped(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text(SECRET + "\n", encoding="utf-8")
    data = valid_data()
    data["cluster"] = {"secret_file": "secret"}

    config = parse_config(data, base_dir=tmp_path)

    assert config.secret == SECRET


def test_secret_is_not_in_repr() -> None:
    config = parse_config(valid_data())
    assert SECRET not in repr(config)


def test_addresses_are_stored_in_canonical_form() -> None:
    data = valid_data(2)
    node(data, 0).update({"raft": "[0:0:0:0:0:0:0:1]:07001", "grpc": "Node-1.Example:7101"})
    table(data, "cluster")["insecure"] = True  # an exposed, plaintext API must be asked for

    config = parse_config(data)

    assert config.nodes[0].raft == "[::1]:7001"
    assert config.nodes[0].grpc == "node-1.example:7101"


def test_cluster_lookups() -> None:
    config = parse_config(valid_data())

    assert config.node("n2").raft == "127.0.0.1:7002"
    assert config.raft_peers("n2") == ["127.0.0.1:7001", "127.0.0.1:7003"]
    assert config.grpc_targets() == ["127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103"]
    assert config.node_by_raft("127.0.0.1:7003") == config.node("n3")
    assert config.node_by_raft("127.0.0.1:7103") is None  # a grpc address is not a raft address
    assert config.node_by_raft("127.0.0.1:9") is None
    assert config.node_by_raft("not an address") is None


def test_grpc_bind_and_raft_via_put_proxies_between_nodes() -> None:
    data = valid_data()
    node(data, 0)["raft"] = "127.0.0.2:7001"
    node(data, 0)["grpc_bind"] = "0.0.0.0:7201"  # a wildcard is fine to listen on
    table(data, "cluster")["insecure"] = True  # (it exposes the API: safe defaults refuse it otherwise)
    node(data, 0)["raft_via"] = {"n2": "127.0.0.1:17002", "n3": "127.0.0.1:17003"}

    config = parse_config(data)

    n1 = config.node("n1")
    assert (n1.grpc, n1.grpc_listen, config.node("n2").grpc_listen) == (
        "127.0.0.1:7101",
        "0.0.0.0:7201",
        "127.0.0.1:7102",
    )
    assert config.grpc_targets()[0] == "127.0.0.1:7101"  # clients still dial the advertised one
    assert config.raft_peers("n1") == ["127.0.0.1:17002", "127.0.0.1:17003"]
    assert config.raft_peers("n2") == ["127.0.0.2:7001", "127.0.0.1:7003"]  # n1 by its identity
    assert config.peer_by_raft("n1", "127.0.0.1:17003") == config.node("n3")
    assert config.peer_by_raft("n1", "127.0.0.1:7002") == config.node("n2")  # own address too
    assert config.peer_by_raft("n2", "127.0.0.1:17003") is None  # only n1 knows n3 by that one


def test_raft_bind_is_where_the_raft_port_listens_and_raft_stays_the_identity() -> None:
    data = valid_data()
    node(data, 0)["raft"] = "127.0.0.2:7001"
    node(data, 0)["raft_bind"] = "127.0.0.1:7001"

    config = parse_config(data)

    n1 = config.node("n1")
    assert (n1.raft, n1.raft_listen, config.node("n2").raft_listen) == (
        "127.0.0.2:7001",
        "127.0.0.1:7001",
        "127.0.0.1:7002",
    )
    assert config.raft_peers("n2")[0] == "127.0.0.2:7001"  # peers know n1 by its identity

    node(data, 1)["raft_bind"] = "127.0.0.1:7001"
    with pytest.raises(ConfigError, match=r"nodes\[1\]\.raft_bind: address 127.0.0.1:7001 already used"):
        parse_config(data)


def test_raft_via_must_respect_who_dials_whom() -> None:
    data = valid_data()
    node(data, 0)["raft_via"] = {"n2": "127.0.0.1:17002", "n9": "127.0.0.1:17009", "n1": "127.0.0.1:1"}
    node(data, 2)["raft_via"] = {"n1": "127.0.0.2:17001", "n2": "127.0.0.1:7001"}

    assert problems_of(data) == [
        "nodes[0].raft_via.n2: this node never dials n2 (pysyncobj dials only from the node whose raft "
        "address sorts after the other's: 127.0.0.1:7001 < 127.0.0.1:7002); set the entry on n2 instead",
        "nodes[0].raft_via.n9: no node has this id; expected the id of another node",
        "nodes[0].raft_via.n1: this node itself; expected the id of another node",
        "nodes[2].raft_via.n1: 127.0.0.2:17001 must sort before this node's raft address 127.0.0.1:7003 "
        "(pysyncobj only dials addresses that sort before its own)",
        "nodes[2].raft_via.n2: 127.0.0.1:7001 is nodes[0].raft, not n2's raft address",
    ]


def test_node_by_raft_compares_canonical_forms() -> None:
    data = valid_data(1)
    node(data, 0)["raft"] = "[::1]:7001"
    config = parse_config(data)
    assert config.node_by_raft("[0::1]:7001") == config.nodes[0]


def test_node_unknown_id_lists_known_ids() -> None:
    config = parse_config(valid_data(), source="cluster.toml")

    with pytest.raises(ConfigError) as info:
        config.node("n9")

    assert info.value.source == "cluster.toml"
    assert info.value.problems == ["nodes: no node with id 'n9' (known ids: n1, n2, n3)"]
    with pytest.raises(ConfigError):
        config.raft_peers("n9")


# --------------------------------------------------------------------------------------------
# Problems, one class at a time
# --------------------------------------------------------------------------------------------

Mutation = Callable[[Data], None]


def _parent(data: Data, path: tuple[str | int, ...]) -> dict[str, object] | list[object]:
    """The container holding ``path[-1]``; tables are created on the way, as a TOML edit would."""
    target: dict[str, object] | list[object] = data
    for part in path[:-1]:
        child = target[int(part)] if isinstance(target, list) else target.setdefault(str(part), {})
        if not isinstance(child, dict | list):
            raise TypeError(f"{path}: {part!r} is not a container")
        target = child
    return target


def _set(path: tuple[str | int, ...], value: object) -> Mutation:
    def mutate(data: Data) -> None:
        parent, key = _parent(data, path), path[-1]
        if isinstance(parent, list):
            parent[int(key)] = value
        else:
            parent[str(key)] = value

    return mutate


def _delete(path: tuple[str | int, ...]) -> Mutation:
    def mutate(data: Data) -> None:
        parent, key = _parent(data, path), path[-1]
        if isinstance(parent, list):
            del parent[int(key)]
        else:
            del parent[str(key)]

    return mutate


CASES: list[tuple[str, Mutation, str]] = [
    # cluster
    (
        "no secret",
        _delete(("cluster", "secret")),
        "cluster.secret: required (a shared secret of at least 16 characters; "
        "the Raft port accepts pickle from anyone without one)",
    ),
    (
        "no cluster table",
        _delete(("cluster",)),
        "cluster.secret: required (a shared secret of at least 16 characters; "
        "the Raft port accepts pickle from anyone without one)",
    ),
    (
        "short secret",
        _set(("cluster", "secret"), "too-short"),
        "cluster.secret: too short (9 characters; at least 16 required)",
    ),
    (
        "secret not a string",
        _set(("cluster", "secret"), 1234),
        "cluster.secret: expected a string, got integer",
    ),
    (
        "secret and secret_file",
        _set(("cluster", "secret_file"), "s"),
        "cluster.secret_file: set exactly one of cluster.secret and cluster.secret_file",
    ),
    ("empty name", _set(("cluster", "name"), " "), "cluster.name: must not be empty"),
    ("cluster not a table", _set(("cluster",), "x"), "cluster: expected a table ([cluster]), got string"),
    # raft
    ("raft not a table", _set(("raft",), [1]), "raft: expected a table ([raft]), got array"),
    (
        "non-positive period",
        _set(("raft", "append_entries_period"), 0),
        "raft.append_entries_period: must be > 0, got 0.0",
    ),
    (
        "bool is not a number",
        _set(("raft", "auto_tick_period"), True),
        "raft.auto_tick_period: expected a number, got boolean",
    ),
    (
        "a string duration needs a unit",
        _set(("raft", "raft_min_timeout"), "0.4"),
        "raft.raft_min_timeout: '0.4' has no unit; use a number with a unit: 500ms, 90s",
    ),
    (
        "infinity",
        _set(("raft", "connection_timeout"), float("inf")),
        "raft.connection_timeout: must be a finite",
    ),
    ("nan", _set(("raft", "raft_max_timeout"), float("nan")), "raft.raft_max_timeout: must be a finite"),
    (
        "min timeout vs heartbeat",
        _set(("raft", "raft_min_timeout"), 0.06),
        "raft.raft_min_timeout: must be > 3 * append_entries_period (0.06), got 0.06",
    ),
    (
        "max timeout vs min",
        _set(("raft", "raft_max_timeout"), 0.4),
        "raft.raft_max_timeout: must be > raft_min_timeout (0.4), got 0.4",
    ),
    (
        "connection timeout vs max",
        _set(("raft", "connection_timeout"), 1.0),
        "raft.connection_timeout: must be >= raft_max_timeout (1.4), got 1.0",
    ),
    (
        "fallback vs heartbeat",
        _set(("raft", "leader_fallback_timeout"), 0.01),
        "raft.leader_fallback_timeout: must be > append_entries_period (0.02), got 0.01",
    ),
    (
        "float for an int",
        _set(("raft", "log_compaction_min_entries"), 2.0),
        "raft.log_compaction_min_entries: expected an integer, got float 2.0",
    ),
    (
        "compaction entries",
        _set(("raft", "log_compaction_min_entries"), 1),
        "raft.log_compaction_min_entries: must be >= 2, got 1",
    ),
    (
        "negative retry",
        _set(("raft", "connection_retry_time"), -1),
        "raft.connection_retry_time: must be >= 0, got -1.0",
    ),
    # scheduler
    (
        "negative grace",
        _set(("scheduler", "misfire_grace_seconds"), -1),
        "scheduler.misfire_grace_seconds: must be >= 0, got -1",
    ),
    ("zero cap", _set(("scheduler", "misfire_all_cap"), 0), "scheduler.misfire_all_cap: must be >= 1, got 0"),
    (
        "zero window",
        _set(("scheduler", "misfire_all_window_seconds"), 0),
        "scheduler.misfire_all_window_seconds: must be > 0, got 0",
    ),
    (
        "zero keep count",
        _set(("scheduler", "history_keep_count"), 0),
        "scheduler.history_keep_count: must be >= 1, got 0",
    ),
    (
        "bool keep seconds",
        _set(("scheduler", "history_keep_seconds"), False),
        "scheduler.history_keep_seconds: expected an integer, got boolean",
    ),
    (
        "zero idempotency",
        _set(("scheduler", "idempotency_keep_seconds"), 0),
        "scheduler.idempotency_keep_seconds: must be > 0, got 0",
    ),
    (
        "batch too big",
        _set(("scheduler", "max_fires_per_batch"), 100001),
        "scheduler.max_fires_per_batch: must be between 1 and 100000, got 100001",
    ),
    (
        "negative dispatch backlog",
        _set(("scheduler", "max_dispatch_backlog"), -1),
        "scheduler.max_dispatch_backlog: must be between 0 (no limit) and 10000000, got -1",
    ),
    # nodes
    ("no nodes", _delete(("nodes",)), "nodes: required (at least one [[nodes]] table)"),
    ("empty nodes", _set(("nodes",), []), "nodes: at least one node is required"),
    (
        "nodes as a table",
        _set(("nodes",), {"id": "n1"}),
        "nodes: expected an array of tables ([[nodes]]), got table",
    ),
    ("node not a table", _set(("nodes", 1), "n2"), "nodes[1]: expected a table, got string"),
    (
        "missing raft",
        _delete(("nodes", 2, "raft")),
        "nodes[2].raft: required (host:port of this node's Raft port)",
    ),
    ("missing data_dir", _delete(("nodes", 0, "data_dir")), "nodes[0].data_dir: required"),
    ("empty data_dir", _set(("nodes", 0, "data_dir"), ""), "nodes[0].data_dir: must be a non-empty path"),
    (
        "data_dir not a string",
        _set(("nodes", 0, "data_dir"), 1),
        "nodes[0].data_dir: expected a string, got integer",
    ),
    ("id not a string", _set(("nodes", 0, "id"), 1), "nodes[0].id: expected a string, got integer"),
    (
        "address not a string",
        _set(("nodes", 0, "grpc"), 7101),
        "nodes[0].grpc: expected a string, got integer",
    ),
    (
        "wildcard address",
        _set(("nodes", 0, "grpc"), "0.0.0.0:7101"),
        "nodes[0].grpc: 0.0.0.0:7101 is a wildcard address",
    ),
    (
        "ipv6 wildcard address",
        _set(("nodes", 0, "raft"), "[::]:7001"),
        "nodes[0].raft: [::]:7001 is a wildcard address",
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), [(m, e) for _, m, e in CASES], ids=[c[0] for c in CASES])
def test_each_problem_is_reported_with_its_path(mutate: Mutation, expected: str) -> None:
    data = valid_data()
    mutate(data)

    problems = problems_of(data)

    assert any(p.startswith(expected) for p in problems), problems
    assert len(problems) == 1, problems


@pytest.mark.parametrize(
    ("port", "reason"),
    [
        ("70000", "port 70000 out of range (1-65535)"),
        ("0", "port 0 out of range (1-65535)"),
        ("65536", "port 65536 out of range (1-65535)"),
        ("99999999999999999999", "port 99999999999999999999 out of range (1-65535)"),
        ("x1", "'127.0.0.1:x1': port 'x1' is not a number"),
        ("-1", "'127.0.0.1:-1': port '-1' is not a number"),
        ("", "'127.0.0.1:': missing port"),
    ],
)
def test_bad_ports(port: str, reason: str) -> None:
    data = valid_data()
    node(data, 2)["raft"] = f"127.0.0.1:{port}"

    problems = problems_of(data)

    assert len(problems) == 1
    assert problems[0].startswith(f"nodes[2].raft: {reason}"), problems


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "missing port"),
        ("::1:7001", "an IPv6 address needs brackets"),
        ("[::1]", "expected [ipv6-address]:port"),
        ("[::g]:7001", "'::g' is not an IPv6 address"),
        ("[127.0.0.1]:7001", "is not an IPv6 address"),
        (":7001", "missing host"),
        ("256.1.1.1:7001", "is not an IPv4 address"),
        ("bad host:7001", "is not a valid hostname"),
        ("-bad.example:7001", "is not a valid hostname"),
        ("a..b:7001", "is not a valid hostname"),
        (" 127.0.0.1:7001", "is not a valid hostname"),
        ("", "empty address"),
    ],
)
def test_bad_addresses(address: str, reason: str) -> None:
    data = valid_data()
    node(data, 0)["grpc"] = address

    problems = problems_of(data)

    assert len(problems) == 1
    assert problems[0].startswith("nodes[0].grpc: "), problems
    assert reason in problems[0]


@pytest.mark.parametrize("node_id", ["", "n 1", "n.1", "x" * 65, "n1\n", "nœud", "n/1"])
def test_bad_ids(node_id: str) -> None:
    data = valid_data()
    node(data, 1)["id"] = node_id

    assert problems_of(data) == [
        f"nodes[1].id: invalid id {node_id!r} (1-64 characters from A-Z a-z 0-9 _ -)"
    ]


@pytest.mark.parametrize("node_id", ["n", "N_1", "node-1", "x" * 64, "0"])
def test_good_ids(node_id: str) -> None:
    data = valid_data(1)
    node(data, 0)["id"] = node_id
    assert parse_config(data).nodes[0].id == node_id


def test_unknown_keys_at_every_level_with_a_suggestion() -> None:
    data = valid_data()
    data["node"] = []
    table(data, "cluster")["secert"] = "x"
    table(data, "raft")["raft_min_timout"] = 1
    table(data, "scheduler")["zzz"] = 1
    node(data, 1)["grcp"] = "127.0.0.1:1"
    node(data, 2)["weird key"] = 1

    assert problems_of(data) == [
        "node: unknown key (did you mean 'nodes'?)",
        "cluster.secert: unknown key (did you mean 'secret'?)",
        "raft.raft_min_timout: unknown key (did you mean 'raft_min_timeout'?)",
        "scheduler.zzz: unknown key (expected one of: misfire_grace_seconds, misfire_all_cap, "
        "misfire_all_window_seconds, history_keep_count, history_keep_seconds, idempotency_keep_seconds, "
        "event_dedupe_window_seconds, max_fires_per_batch, max_dispatch_backlog, lease_ms, heartbeat_ms, "
        "kill_grace_ms, retry_backoff_ms, retry_backoff_cap_ms, "
        "max_clock_skew_ms)",
        "nodes[1].grcp: unknown key (did you mean 'grpc'?)",
        'nodes[2]."weird key": unknown key '
        "(expected one of: id, raft, grpc, data_dir, grpc_bind, raft_bind, raft_via, http)",
    ]


def test_duplicates(tmp_path: Path) -> None:
    data = valid_data(5)
    node(data, 1)["id"] = "n1"
    node(data, 2)["raft"] = "127.0.0.1:7001"  # another node's raft address
    node(data, 3)["raft"] = "127.0.0.1:7101"  # another node's grpc address
    node(data, 4)["grpc"] = "127.0.0.1:7005"  # its own raft address
    node(data, 4)["data_dir"] = "./data/./n2"  # the same directory as nodes[1], spelled differently

    assert problems_of(data, base_dir=tmp_path) == [
        "nodes[1].id: duplicate id 'n1' (also nodes[0].id)",
        "nodes[2].raft: address 127.0.0.1:7001 already used by nodes[0].raft",
        "nodes[3].raft: address 127.0.0.1:7101 already used by nodes[0].grpc",
        "nodes[4].grpc: address 127.0.0.1:7005 already used by nodes[4].raft",
        f"nodes[4].data_dir: {tmp_path / 'data' / 'n2'} is also the data_dir of nodes[1]",
    ]


def test_duplicate_addresses_are_compared_in_canonical_form() -> None:
    data = valid_data(2)
    node(data, 0)["raft"] = "[::1]:7001"
    node(data, 1)["raft"] = "[0:0::1]:007001"
    node(data, 1)["grpc"] = "LocalHost:7101"
    node(data, 0)["grpc"] = "localhost:7101"

    assert problems_of(data) == [
        "nodes[1].raft: address [::1]:7001 already used by nodes[0].raft",
        "nodes[1].grpc: address localhost:7101 already used by nodes[0].grpc",
    ]


def test_metrics_per_task_is_an_opt_in_boolean() -> None:
    assert parse_config(valid_data()).metrics.per_task is False
    data = valid_data()
    data["metrics"] = {"per_task": True}
    assert parse_config(data).metrics.per_task is True
    data["metrics"] = {"per_task": "yes", "pertask": 1}
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert info.value.problems == [
        "metrics.pertask: unknown key (did you mean 'per_task'?)",
        "metrics.per_task: expected true or false, got string",
    ]


def test_many_problems_are_all_reported_in_one_error(tmp_path: Path) -> None:
    data: Data = {
        "cluster": {"secret": "short", "nmae": "x"},
        "raft": {"append_entries_period": -1, "raft_max_timeout": 0.1},
        "scheduler": {"max_fires_per_batch": 0, "history_keep_count": 1.5},
        "nodes": [
            {"id": "n 1", "raft": "127.0.0.1:70000", "grpc": "127.0.0.1:7101", "data_dir": "a"},
            {"id": "n2", "raft": "127.0.0.1:7101", "grpc": "::1:7102", "data_dir": "a"},
            {"id": "n2", "raft": "127.0.0.1:7003"},
        ],
        "extra": True,
    }

    with pytest.raises(ConfigError) as info:
        parse_config(data, source="cluster.toml", base_dir=tmp_path)

    expected = [
        "extra: unknown key (expected one of: "
        "cluster, raft, scheduler, storage, metrics, api, tls, auth, nodes, alerts, events)",
        "cluster.nmae: unknown key (did you mean 'name'?)",
        "cluster.secret: too short (5 characters; at least 16 required)",
        "raft.append_entries_period: must be > 0, got -1.0",
        "raft.raft_max_timeout: must be > raft_min_timeout (0.4), got 0.1",
        "scheduler.history_keep_count: expected an integer, got float 1.5",
        "scheduler.max_fires_per_batch: must be between 1 and 100000, got 0",
        "nodes[0].id: invalid id 'n 1' (1-64 characters from A-Z a-z 0-9 _ -)",
        "nodes[0].raft: port 70000 out of range (1-65535)",
        "nodes[1].grpc: '::1:7102': an IPv6 address needs brackets, e.g. [::1]:7001",
        "nodes[2].grpc: required (host:port of this node's gRPC API)",
        "nodes[2].data_dir: required (the directory this node keeps its state in)",
        "nodes[1].raft: address 127.0.0.1:7101 already used by nodes[0].grpc",
        f"nodes[1].data_dir: {tmp_path / 'a'} is also the data_dir of nodes[0]",
        "nodes[2].id: duplicate id 'n2' (also nodes[1].id)",
    ]
    assert info.value.problems == expected
    message = str(info.value)
    assert message.startswith(f"cluster.toml: {len(expected)} problem(s):")
    assert all(p in message for p in expected)


def test_input_is_not_modified() -> None:
    data = valid_data()
    table(data, "raft")["connection_timeout"] = 4
    before = copy.deepcopy(data)
    parse_config(data)
    assert data == before


# --------------------------------------------------------------------------------------------
# secret_file
# --------------------------------------------------------------------------------------------


def test_secret_file_missing_is_a_problem_with_its_path(tmp_path: Path) -> None:
    data = valid_data()
    data["cluster"] = {"secret_file": "nope/secret"}

    problems = problems_of(data, base_dir=tmp_path)

    assert problems == [
        f"cluster.secret_file: cannot read {tmp_path / 'nope' / 'secret'}: No such file or directory"
    ]


def test_secret_file_that_is_a_directory(tmp_path: Path) -> None:
    data = valid_data()
    data["cluster"] = {"secret_file": str(tmp_path)}

    problems = problems_of(data)

    assert len(problems) == 1
    assert problems[0].startswith(f"cluster.secret_file: cannot read {tmp_path}: ")


def test_secret_file_too_short(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("  short \n", encoding="utf-8")
    data = valid_data()
    data["cluster"] = {"secret_file": "secret"}

    assert problems_of(data, base_dir=tmp_path) == [
        f"cluster.secret_file: the secret in {tmp_path / 'secret'}: "
        "too short (5 characters; at least 16 required)"
    ]


def test_secret_file_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "secret").write_bytes(b"\xff" * 20)
    data = valid_data()
    data["cluster"] = {"secret_file": "secret"}

    assert problems_of(data, base_dir=tmp_path) == [
        f"cluster.secret_file: {tmp_path / 'secret'} is not valid UTF-8 text"
    ]


def test_secret_file_other_problems_are_still_reported(tmp_path: Path) -> None:
    data = valid_data()
    data["cluster"] = {"secret_file": "missing"}
    node(data, 0)["raft"] = "127.0.0.1:0"

    problems = problems_of(data, base_dir=tmp_path)

    assert [p.split(":")[0] for p in problems] == ["cluster.secret_file", "nodes[0].raft"]


# --------------------------------------------------------------------------------------------
# load_config: files
# --------------------------------------------------------------------------------------------


def test_toml_syntax_error_reports_the_line(tmp_path: Path) -> None:
    path = tmp_path / "cluster.toml"
    path.write_text('[cluster]\nname = "demo"\nsecret = \n', encoding="utf-8")

    with pytest.raises(ConfigError) as info:
        load_config(path)

    assert info.value.source == str(path)
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith("TOML syntax error: ")
    assert "line 3" in info.value.problems[0]


def test_duplicate_toml_key_is_a_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "cluster.toml"
    path.write_text('[cluster]\nname = "a"\nname = "b"\n', encoding="utf-8")

    with pytest.raises(ConfigError, match=r"TOML syntax error: .*line 3"):
        load_config(path)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"

    with pytest.raises(ConfigError) as info:
        load_config(path)

    assert info.value.source == str(path)
    assert info.value.problems == ["cannot read config file: no such file"]


def test_config_path_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path)


def test_file_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "cluster.toml"
    path.write_bytes(b'[cluster]\nname = "\xff"\n')

    with pytest.raises(ConfigError, match="not valid UTF-8"):
        load_config(path)


def test_toml_round_trip_of_the_example_through_parse_config() -> None:
    data = tomllib.loads(EXAMPLE.read_text(encoding="utf-8"))
    assert parse_config(data, source="x", base_dir=REPO_ROOT) == dataclasses.replace(
        load_config(EXAMPLE), source="x"
    )


# --------------------------------------------------------------------------------------------
# The value types validate at construction too
# --------------------------------------------------------------------------------------------


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ConfigError) as info:
        RaftTuning(raft_min_timeout=2.0)
    assert info.value.problems == ["raft.raft_max_timeout: must be > raft_min_timeout (2.0), got 1.4"]

    with pytest.raises(ConfigError, match=r"scheduler\.max_fires_per_batch"):
        SchedulerSettings(max_fires_per_batch=0)

    with pytest.raises(ConfigError) as info:
        NodeConfig("bad id", "127.0.0.1:70000", "x:1", Path("/d"))
    assert info.value.problems == [
        "id: invalid id 'bad id' (1-64 characters from A-Z a-z 0-9 _ -)",
        "raft: port 70000 out of range (1-65535)",
    ]

    n1 = NodeConfig("n1", "127.0.0.1:7001", "127.0.0.1:7101", Path("/d1"))
    with pytest.raises(ConfigError) as info:
        ClusterConfig(name="c", secret="short", nodes=(n1, n1), source="hand")
    assert info.value.source == "hand"
    assert info.value.problems == [
        "cluster.secret: too short (5 characters; at least 16 required)",
        "nodes[1].id: duplicate id 'n1' (also nodes[0].id)",
        "nodes[1].raft: address 127.0.0.1:7001 already used by nodes[0].raft",
        "nodes[1].grpc: address 127.0.0.1:7101 already used by nodes[0].grpc",
        "nodes[1].data_dir: /d1 is also the data_dir of nodes[0]",
    ]

    with pytest.raises(ConfigError, match="nodes: at least one node is required"):
        ClusterConfig(name="c", secret=SECRET, nodes=())


def test_direct_construction_defaults_and_int_to_float() -> None:
    n1 = NodeConfig("n1", "127.0.0.1:7001", "127.0.0.1:7101", Path("/d1"))
    config = ClusterConfig(name="c", secret=SECRET, nodes=(n1,), raft=RaftTuning(connection_timeout=5))

    assert config.scheduler == SchedulerSettings()
    assert config.source == "<config>"
    assert type(config.raft.connection_timeout) is float
    assert config.raft_peers("n1") == []


def test_values_are_frozen() -> None:
    config = parse_config(valid_data())
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.name = "other"  # type: ignore[misc]
    assert hash(config) == hash(parse_config(valid_data()))


# --------------------------------------------------------------------------------------------
# parse_address
# --------------------------------------------------------------------------------------------


def test_parse_address() -> None:
    assert parse_address("127.0.0.1:7001", "f") == ("127.0.0.1", 7001)
    assert parse_address("[::1]:7001", "f") == ("::1", 7001)
    assert parse_address("[fe80::1%eth0]:7001", "f") == ("fe80::1%eth0", 7001)
    assert parse_address("Host-1.Example.COM:80", "f") == ("host-1.example.com", 80)
    assert parse_address("db_1:65535", "f") == ("db_1", 65535)
    assert parse_address("0.0.0.0:1", "f") == ("0.0.0.0", 1)  # wildcards are only refused for nodes


def test_parse_address_raises_invalid_spec_with_the_field() -> None:
    with pytest.raises(InvalidSpec) as info:
        parse_address("127.0.0.1:70000", "nodes[2].raft")
    assert info.value.field == "nodes[2].raft"
    assert info.value.reason == "port 70000 out of range (1-65535)"
    assert str(info.value) == "nodes[2].raft: port 70000 out of range (1-65535)"


@given(
    host=st.ip_addresses().map(str)
    | st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9](\.[a-z]{1,10}){0,3}", fullmatch=True),
    port=st.integers(1, 65535),
)
def test_parse_address_round_trips(host: str, port: int) -> None:
    text = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    assert parse_address(text, "f") == (host, port)


@given(port=st.integers(min_value=65536) | st.just(0))
def test_parse_address_rejects_every_out_of_range_port(port: int) -> None:
    with pytest.raises(InvalidSpec, match=f"^f: port {port} out of range"):
        parse_address(f"h:{port}", "f")


def test_heartbeat_must_fit_several_times_into_the_lease() -> None:
    data = {
        "cluster": {"secret": "s" * 20},
        "scheduler": {"lease_ms": 1000, "heartbeat_ms": 600},
        "nodes": [{"id": "n1", "raft": "127.0.0.1:7001", "grpc": "127.0.0.1:7101", "data_dir": "d"}],
    }
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert info.value.problems == ["scheduler.heartbeat_ms: must be at most lease_ms / 3 (333.333), got 600"]
