"""``raftsched demo``: a local 3-node cluster, two executors and sample tasks; prints each fire as
it is committed and each execution as it finishes.

Starts the nodes of a config file (by default ``cluster.example.toml``), each with its state in
``demo-data/<node>`` next to the config rather than its configured ``data_dir``, and two
executors, as child processes (their pids printed, to kill one by hand); installs sample tasks
(one of them sharded), then prints every fire the cluster commits (nominal time, outcome, epoch,
run) and every shard an executor finishes (which executor, how long after the nominal time it
started, what the command printed). Ctrl-C stops everything.

The demo runs with mutual TLS: unless the config has a ``[tls]`` table of its own, it makes a
local CA, a node and a client certificate under ``demo-data/tls``
(:func:`raftsched.security.certs.write_demo_pki`), writes the config with that ``[tls]`` to
``demo-data/demo-cluster.toml``, and prints how the CLI uses them. It runs with authentication too:
unless the config has an ``[auth]`` table, it writes a fresh admin token to ``demo-data/admin.token``
(mode 600, kept across runs) as the ``[auth] bootstrap_token_file``; the demo's executors get an
executor token, and the printed command line carries ``--token-file``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from raftsched.client import Client
from raftsched.config.load import load_config
from raftsched.config.types import ClusterConfig, TlsSettings
from raftsched.config.values import parse_address
from raftsched.display import enum_name, task_state, wf_state
from raftsched.errors import AlreadyExists, InvalidSpec, RaftschedError
from raftsched.explain import iso
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.security.auth import AuthSettings
from raftsched.security.certs import DemoPki, write_demo_pki
from raftsched.security.tls import TlsConfig, node_client_tls
from raftsched.security.tokens import new_token, read_token_file
from raftsched.testing.cluster import LocalCluster
from raftsched.timing.clock import SystemClock
from raftsched.v1 import raftsched_pb2 as pb

SAMPLES = (
    TaskSpec(
        "hello-every-2s",
        CronTrigger("* * * * * */2"),
        command='echo "hello from $RAFTSCHED_EXECUTION_ID"',
        overlap=Overlap.ALLOW,
        description="demo: every two seconds",
    ),
    TaskSpec(
        "report-every-10s",
        CronTrigger("* * * * * */10"),
        command='echo "shard $RAFTSCHED_SHARD of $RAFTSCHED_SHARDS for $RAFTSCHED_NOMINAL_TIME"',
        shards=3,
        overlap=Overlap.ALLOW,
        description="demo: every ten seconds, three shards",
    ),
    TaskSpec(
        "nightly-backup",
        CronTrigger("30 2 * * *", "Europe/Berlin"),
        command="echo backup",
        description="demo: 02:30 Berlin time (runs once on DST change days)",
    ),
)
EXECUTORS = ("demo-ex1", "demo-ex2")


def demo_workflow() -> pb.WorkflowSpec:
    """extract -> validate -> load (load needs both), an alert only if validate fails."""
    spec = pb.WorkflowSpec(
        name="demo-pipeline",
        schedule=pb.CronTrigger(expr="* * * * * */20"),
        params_json='{"table": "orders"}',
        description="demo: a three-step pipeline every twenty seconds",
    )
    spec.tasks.add(name="extract", command='echo "extract {{ params.table }} for {{ ds }}"')
    spec.tasks.add(
        name="validate", command='echo "validate {{ ts }}"', depends_on=[pb.Dependency(task="extract")]
    )
    spec.tasks.add(
        name="load",
        command='echo "load {{ params.table }} ({{ run_id }})"',
        depends_on=[pb.Dependency(task="extract"), pb.Dependency(task="validate")],
    )
    spec.tasks.add(
        name="alert",
        command='echo "validate failed"',
        depends_on=[pb.Dependency(task="validate", condition=pb.ON_FAILURE)],
    )
    return spec


DEMO_DATA = "demo-data"
"""The demo's own directory, next to its config: every node's state, the executors' execution
logs, the process logs, and (unless the config has ``[tls]``) the demo's TLS files and the config
the nodes run with. A cluster started by hand from the same config keeps its state in
the config's ``data_dir`` entries, so it never inherits the demo's tasks (nor the demo its)."""


def run_demo(config_path: str, duration: str = "0") -> int:
    config = Path(config_path)
    if not config.is_file():
        raise RaftschedError(
            f"{config}: no such config file (run from the repository root, or pass --config)"
        )
    stop_after = float(duration)
    data = config.parent / DEMO_DATA
    clock = SystemClock()
    demo_config, tls = with_demo_tls(config, data, clock)
    demo_config, token_file = with_demo_auth(demo_config, data, config)
    demo_config = with_demo_http(demo_config, data, config)
    admin = read_token_file(token_file) if token_file is not None else None
    cluster = LocalCluster(demo_config, data / "logs", tls=tls, token=admin)
    executors: list[subprocess.Popen[bytes]] = []
    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    say(
        f"starting {len(cluster.config.nodes)} nodes and {len(EXECUTORS)} executors from {config}; "
        f"their state and logs are in {data}/ (delete it to start afresh)"
    )
    for node in cluster.config.nodes:
        cluster.start(node.id, extra_args=["--data-dir", str(data / node.id)])
    try:
        leader = _wait_for_leader(cluster)
        say(
            f"leader elected: {leader} (term {cluster.status(leader).term}); "
            f"gRPC targets {','.join(cluster.targets())}"
        )
        say_tls_usage(cluster, demo_config, token_file)
        say_console(cluster, token_file)
        with Client(cluster.targets(), tls=tls, token=admin) as client:
            executor_token = None
            if admin is not None:
                executor_token, _ = client.create_token("executor", description="raftsched demo executors")
            for name in EXECUTORS:
                executors.append(
                    cluster.start_executor(name, slots=4, data_dir=data / name, token=executor_token)
                )
            for node_id, proc in cluster.procs.items():
                say(f"node {node_id:8} pid {proc.pid:<8} (fail it over: kill -9 {proc.pid})")
            for name, proc in zip(EXECUTORS, executors, strict=True):
                say(f"executor {name:4} pid {proc.pid:<8} (kill -9 {proc.pid})")
            _wait_for_executors(cluster, client, dict(zip(EXECUTORS, executors, strict=True)))
            say(f"executors {', '.join(EXECUTORS)} registered")
            for spec in SAMPLES:
                try:
                    rec = client.add_task(spec)
                    say(f"added task {spec.name:18} next fire {iso(rec.next_fire_ms)}")
                except AlreadyExists:
                    rec = client.get_task(spec.name)
                    nxt = iso(rec.next_fire_ms)
                    say(f"task {spec.name:18} exists (version {rec.version}), next fire {nxt}")
            workflow, _ = client.apply_workflow(demo_workflow())
            say(
                f"applied workflow {workflow.spec.name} (version {workflow.version}): "
                "extract -> validate -> load, every 20 s"
            )
            say("fires as they are committed, and executions as they finish (Ctrl-C to stop):")
            since = {spec.name: clock.now_ms() for spec in SAMPLES}
            done: set[str] = set()
            workflows_done: set[str] = set()
            started = time.monotonic()
            while not stopping and not (stop_after and time.monotonic() - started > stop_after):
                for name in since:
                    try:
                        show_fires(client, name, since)
                        show_runs(client, name, since[name] - 60_000, done)
                    except RaftschedError as exc:
                        say(f"  ({exc})")
                try:
                    show_workflow_runs(client, "demo-pipeline", workflows_done)
                except RaftschedError as exc:
                    say(f"  ({exc})")
                time.sleep(0.5)  # pacing of the display loop, not synchronisation
    finally:
        say("stopping the executors and the cluster...")
        for proc in executors:
            proc.terminate()
        for proc in executors:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        cluster.stop()
    return 0


def _wait_for_leader(cluster: LocalCluster) -> str:
    """The leader's id, once elected; a node process that exits first (its ports taken by another
    cluster, say) fails the demo with that node's last log line."""
    deadline = time.monotonic() + 60
    while True:
        for node_id, proc in cluster.procs.items():
            if proc.poll() is not None:
                log = cluster.log_dir / f"{node_id}.log"
                lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
                last = lines[-1] if lines else f"exit status {proc.returncode}"
                raise RaftschedError(f"demo node {node_id} stopped: {last} (log: {log})")
        leader = cluster.leader()
        if leader is not None:
            return leader
        if time.monotonic() > deadline:
            raise RaftschedError(f"no leader elected within 60 s (logs in {cluster.log_dir})")
        time.sleep(0.1)  # polling the node processes, not synchronising with them


def _wait_for_executors(
    cluster: LocalCluster, client: Client, procs: dict[str, subprocess.Popen[bytes]]
) -> None:
    """Return once every executor in ``procs`` is in the replicated membership, so the demo's
    first fires have somewhere to run; one that exits first fails the demo with its last log
    line."""
    deadline = time.monotonic() + 60
    while True:
        for name, proc in procs.items():
            if proc.poll() is not None:
                log = cluster.log_dir / f"{name}.log"
                lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
                last = lines[-1] if lines else f"exit status {proc.returncode}"
                raise RaftschedError(f"demo executor {name} stopped: {last} (log: {log})")
        with contextlib.suppress(RaftschedError):
            joined = {e.name for e in client.list_executors().executors if e.state == pb.EXECUTOR_ALIVE}
            if joined >= set(procs):
                return
        if time.monotonic() > deadline:
            raise RaftschedError(f"executors did not register within 60 s (logs in {cluster.log_dir})")
        time.sleep(0.1)  # polling the executors' registration, not synchronising with them


def with_demo_tls(config_path: Path, data: Path, clock: SystemClock) -> tuple[Path, TlsConfig | None]:
    """The config the demo runs and how its clients dial it: ``config_path`` as it is if it has
    ``[tls]``; otherwise a copy with mutual TLS on certificates made under ``data/tls`` (``data``:
    the demo's own directory)."""
    config = load_config(config_path)
    if config.tls is not None:
        return config_path, node_client_tls(config)
    now = dt.datetime.fromtimestamp(clock.now_ms() / 1000, dt.UTC)
    hosts = [parse_address(n.grpc, "grpc")[0] for n in config.nodes]
    pki = write_demo_pki(data / "tls", hosts, now=now)
    tls = TlsSettings(pki.node_cert, pki.node_key, pki.ca_file, require_client_cert=True)
    path = data / "demo-cluster.toml"
    data.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds the Raft secret
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(
            config_toml(dataclasses.replace(config, tls=tls), f"written by raftsched demo from {config_path}")
        )
    return path, demo_client_tls(pki)


def with_demo_auth(config_path: Path, data: Path, source: Path) -> tuple[Path, Path | None]:
    """The config the demo runs and its admin token file: ``config_path`` as it is if it has
    ``[auth]`` (its bootstrap token file, if any, is the demo's admin token); otherwise a copy,
    ``demo-data/demo-cluster.toml``, with ``[auth]`` on a bootstrap token in ``demo-data/admin.token``."""
    config = load_config(config_path)
    if config.auth is not None:
        return config_path, config.auth.bootstrap_token_file
    data.mkdir(parents=True, exist_ok=True)
    token_file = data / "admin.token"
    try:
        read_token_file(token_file)
    except InvalidSpec:  # absent or unusable: a new one
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new_token() + "\n")
    path = data / "demo-cluster.toml"
    auth = AuthSettings(bootstrap_token_file=token_file.resolve())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds the Raft secret
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(
            config_toml(dataclasses.replace(config, auth=auth), f"written by raftsched demo from {source}")
        )
    return path, token_file


def with_demo_http(config_path: Path, data: Path, source: Path) -> Path:
    """The config the demo runs, with an HTTP listener (the web console, ``/metrics``, the probes)
    on every node: a node without ``http`` gets ``127.0.0.1`` at its gRPC port + 2000 (7101 ->
    9101, so the console keeps its address across runs), or a free port when that one is taken.
    ``config_path`` as it is when every node has one; else ``demo-data/demo-cluster.toml``."""
    config = load_config(config_path)
    if all(n.http is not None for n in config.nodes):
        return config_path
    nodes = []
    for n in config.nodes:
        if n.http is None:
            port = parse_address(n.grpc, "grpc")[1] + 2000
            n = dataclasses.replace(n, http=f"127.0.0.1:{port if _port_free(port) else _free_port()}")
        nodes.append(n)
    data.mkdir(parents=True, exist_ok=True)
    path = data / "demo-cluster.toml"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds the Raft secret
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(
            config_toml(
                dataclasses.replace(config, nodes=tuple(nodes)), f"written by raftsched demo from {source}"
            )
        )
    return path


def _port_free(port: int) -> bool:
    if not 0 < port < 65536:
        return False
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def say_console(cluster: LocalCluster, token_file: Path | None) -> None:
    """Where the web console and the metrics are, how to sign in, and what to try there."""
    for n in cluster.config.nodes:
        if n.http is not None:
            say(f"console  {n.id:8} http://{n.http}/   metrics http://{n.http}/metrics")
    if token_file is not None:
        say(f"sign in to the console with the admin token: cat {token_file}")
    say(
        "try: open Tasks, trigger report-every-10s, follow its run; then kill -9 the leader's pid "
        "(below) and watch the Cluster page elect a new one"
    )


def demo_client_tls(pki: DemoPki) -> TlsConfig:
    return TlsConfig(ca_file=pki.ca_file, cert_file=pki.client_cert, key_file=pki.client_key)


def say_tls_usage(cluster: LocalCluster, config_path: Path, token_file: Path | None = None) -> None:
    tls = cluster.tls
    token = f" --token-file {token_file}" if token_file is not None else ""
    if token_file is not None:
        say(f"authentication is on: the admin token is in {token_file} (mode 600)")
    if tls is None:
        say("TLS is off (the config's nodes serve plaintext gRPC)")
        say(f"  raftsched --cluster {','.join(cluster.targets())}{token} status")
        return
    required = cluster.config.tls is not None and cluster.config.tls.require_client_cert
    say(
        f"TLS is on{' (mutual: clients need a certificate)' if required else ''}; "
        f"config {config_path}. Use the cluster from another shell with:"
    )
    flags = " ".join(cluster.tls_arguments())
    say(f"  raftsched --cluster {','.join(cluster.targets())} {flags}{token} status")
    env = [
        f"{name}={path}"
        for name, path in (
            ("RAFTSCHED_TLS_CA", tls.ca_file),
            ("RAFTSCHED_TLS_CERT", tls.cert_file),
            ("RAFTSCHED_TLS_KEY", tls.key_file),
        )
        if path is not None
    ]
    if token_file is not None:
        env.append(f'RAFTSCHED_TOKEN="$(cat {token_file})"')
    say(f"  or: export RAFTSCHED_CLUSTER={','.join(cluster.targets())} {' '.join(env)}")


def config_toml(config: ClusterConfig, comment: str) -> str:
    """``config`` as a TOML file that :func:`raftsched.config.load_config` reads back equal
    (paths absolute, every [raft] and [scheduler] value spelled out)."""

    def value(v: object) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        return json.dumps(str(v))  # a JSON string is a TOML basic string

    lines = [f"# {comment}", "[cluster]", f"name = {value(config.name)}", f"secret = {value(config.secret)}"]
    if config.insecure:
        lines.append("insecure = true")
    for table, section in (("raft", config.raft), ("scheduler", config.scheduler)):
        lines += ["", f"[{table}]"]
        lines += [f"{f.name} = {value(getattr(section, f.name))}" for f in dataclasses.fields(section)]
    if config.tls is not None:
        t = config.tls
        lines += ["", "[tls]", f"cert_file = {value(t.cert_file)}", f"key_file = {value(t.key_file)}"]
        if t.ca_file is not None:
            lines.append(f"ca_file = {value(t.ca_file)}")
        lines.append(f"require_client_cert = {value(t.require_client_cert)}")
    if config.auth is not None:
        a = config.auth
        lines += ["", "[auth]", f'audit_keep = "{a.audit_keep_ms}ms"']
        if a.bootstrap_token_file is not None:
            lines.append(f"bootstrap_token_file = {value(a.bootstrap_token_file)}")
        if a.subjects:
            lines += ["", "[auth.subjects]"]
            for cn, (role, namespaces) in a.subjects.items():
                lines.append(f"{value(cn)} = {value(role.value + ':' + ','.join(namespaces))}")
    for n in config.nodes:
        lines += [
            "",
            "[[nodes]]",
            f"id = {value(n.id)}",
            f"raft = {value(n.raft)}",
            f"grpc = {value(n.grpc)}",
        ]
        lines.append(f"data_dir = {value(n.data_dir)}")
        if n.grpc_bind is not None:
            lines.append(f"grpc_bind = {value(n.grpc_bind)}")
        if n.http is not None:
            lines.append(f"http = {value(n.http)}")
        if n.raft_via:
            pairs = ", ".join(f"{value(peer)} = {value(via)}" for peer, via in n.raft_via)
            lines.append(f"raft_via = {{ {pairs} }}")
    return "\n".join(lines) + "\n"


def say(text: str) -> None:
    print(text, flush=True)


def show_fires(client: Client, name: str, since: dict[str, int]) -> None:
    for f in client.fire_accounting(name, since_ms=since[name] + 1):
        if f.nominal_ms <= since[name]:
            continue
        extra = f" x{f.count} through {iso(f.through_ms)}" if f.through_ms else ""
        outcome = enum_name(pb.FireOutcome, f.outcome)
        say(f"{iso(f.nominal_ms)}  {name:18} {outcome:10} epoch {f.epoch}  {f.run_id}{extra}")
        since[name] = max(f.nominal_ms, f.through_ms)


def show_runs(client: Client, name: str, since_ms: int, done: set[str]) -> None:
    for run in reversed(client.runs(name, since_ms=max(0, since_ms), limit=50)):
        if run.run_id in done or run.state not in (pb.SUCCEEDED, pb.FAILED):
            continue
        done.add(run.run_id)
        for s in run.shards:
            out = (s.stdout_tail or s.error).strip().splitlines()
            verdict = "ok" if s.state == pb.SUCCEEDED else "failed"
            late = max(0, s.assigned_ms - run.nominal_ms)
            say(
                f"{'':26}{'':18} {'ran':10} {verdict} on {s.executor or '-'} (shard {s.shard}, attempt "
                f"{s.attempt}, assigned +{late} ms): {out[-1] if out else ''}"
            )


def show_workflow_runs(client: Client, name: str, done: set[str]) -> None:
    for run in reversed(client.list_workflow_runs(name, limit=10)):
        if run.run_id in done or run.state == pb.WORKFLOW_RUNNING:
            continue
        done.add(run.run_id)
        tasks = ", ".join(f"{t.name} {task_state(t.state)}" for t in run.tasks)
        say(f"{iso(run.logical_ms)}  {name:18} {wf_state(run.state):10} {tasks}")


if __name__ == "__main__":
    sys.exit(run_demo(sys.argv[1] if len(sys.argv) > 1 else "cluster.example.toml"))
