"""Authentication and authorization over the real gRPC API of a real 3-node cluster.

Every RPC of the proto against every role (and no token, and a malformed one); namespaces;
expiry and revocation on every node; rogue executors; the audit log; tokens across a leader
failover and a snapshot install; and no token secret in any node log or status reply.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2

from raftsched.client import Client
from raftsched.errors import NotFound, PermissionDenied, Unauthenticated
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.security.auth import ROLE_PERMISSIONS, Permission, Role
from raftsched.security.authz import PUBLIC, TABLE
from raftsched.security.tokens import new_token, parse_token, token_id
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import NODES, wait_caught_up

pytestmark = pytest.mark.integration

AUTH = '[auth]\nbootstrap_token_file = "admin.token"\n'
DENIED = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED}
SERVICES = {
    **{s.full_name: s for s in pb.DESCRIPTOR.services_by_name.values()},
    **{s.full_name: s for s in health_pb2.DESCRIPTOR.services_by_name.values()},
}


def _auth_cluster(make_cluster: ClusterFactory, tmp_path: Path, extra: str = "") -> tuple[LocalCluster, str]:
    admin = new_token()
    base = tmp_path / "cluster"
    base.mkdir(parents=True, exist_ok=True)
    (base / "admin.token").write_text(admin + "\n")
    cluster = make_cluster(extra_config=AUTH + extra, start=False)
    cluster.token = admin
    cluster.start()
    cluster.wait_for_leader()
    return cluster, admin


def _md(token: str | None) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")] if token else []


def _call(channel: grpc.Channel, method: str, token: str | None, request: Any = None) -> grpc.StatusCode:
    """Call ``method`` with an empty request (or ``request``); the status it ended with."""
    service, name = method.strip("/").split("/")
    desc = SERVICES[service].methods_by_name[name]
    req = request if request is not None else GetMessageClass(desc.input_type)()
    out = GetMessageClass(desc.output_type)
    try:
        if desc.server_streaming:
            call = channel.unary_stream(
                method, request_serializer=type(req).SerializeToString, response_deserializer=out.FromString
            )(req, metadata=_md(token), timeout=3)
            for _ in call:
                call.cancel()
                break
        else:
            channel.unary_unary(
                method, request_serializer=type(req).SerializeToString, response_deserializer=out.FromString
            )(req, metadata=_md(token), timeout=5)
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


def _details(channel: grpc.Channel, method: str, token: str | None) -> str:
    service, name = method.strip("/").split("/")
    desc = SERVICES[service].methods_by_name[name]
    req = GetMessageClass(desc.input_type)()
    out = GetMessageClass(desc.output_type)
    try:
        channel.unary_unary(
            method, request_serializer=type(req).SerializeToString, response_deserializer=out.FromString
        )(req, metadata=_md(token), timeout=5)
    except grpc.RpcError as err:
        return err.details() or ""
    return ""


@pytest.fixture
def channel_factory() -> Iterator[Any]:
    made: list[grpc.Channel] = []

    def make(address: str) -> grpc.Channel:
        ch = grpc.insecure_channel(address)
        made.append(ch)
        return ch

    yield make
    for ch in made:
        ch.close()


def _cli(
    cluster: LocalCluster, *args: str, token_file: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI against the leader only: what it reads then includes every write that returned."""
    env = {k: v for k, v in os.environ.items() if k != "RAFTSCHED_TOKEN"}
    leader = cluster.grpc_of(cluster.wait_for_leader())
    cmd = [sys.executable, "-m", "raftsched.cli", "--cluster", leader]
    if token_file is not None:
        cmd += ["--token-file", str(token_file)]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, timeout=60)


def test_roles_namespaces_audit_and_no_secret_in_logs(
    make_cluster: ClusterFactory, tmp_path: Path, channel_factory: Any
) -> None:
    cluster, admin = _auth_cluster(make_cluster, tmp_path)
    leader = cluster.wait_for_leader()
    secrets_seen = [admin]
    with Client(cluster.targets(), token=admin) as root:
        # The matrix tokens use the default namespace (that of an empty request); the namespace
        # checks below use tokens of namespace "team".
        matrix: dict[str, str] = {"admin": admin}
        tokens: dict[str, str] = {"admin": admin}
        for role in ("maintainer", "viewer", "executor"):
            tok, info = root.create_token(role, ["team"], description=f"{role} of team")
            assert info.role == role and list(info.namespaces) == ["team"] and info.created_ms > 0
            tokens[role] = tok
            matrix[role], _ = root.create_token(role, description=f"{role} of default")
            secrets_seen += [tok, matrix[role]]

        # -- the matrix: every RPC of the proto, every role, on the leader ------------------------
        ch = channel_factory(cluster.grpc_of(leader))
        for method, need in sorted(TABLE.items()):
            if need == PUBLIC:
                # Health/List is in the proto but not implemented by grpcio's health servicer
                # (calling it logs an error); Watch streams forever. Check stands for the three.
                if method.endswith("/Check"):
                    assert _call(ch, method, None) == grpc.StatusCode.OK, method
                continue
            assert _call(ch, method, None) == grpc.StatusCode.UNAUTHENTICATED, method
            assert _call(ch, method, "rst_0000000000000000_" + "x" * 43) == grpc.StatusCode.UNAUTHENTICATED
            for role, tok in matrix.items():
                status = _call(ch, method, tok)
                if Permission(need) in ROLE_PERMISSIONS[Role(role)]:
                    assert status not in DENIED, f"{role} refused {method}: {status}"
                else:
                    assert status == grpc.StatusCode.PERMISSION_DENIED, f"{role} got {status} for {method}"
        assert "tokens.manage" in _details(ch, "/raftsched.v1.Admin/ListTokens", tokens["viewer"])
        assert "no credentials" in _details(ch, "/raftsched.v1.Admin/ListTasks", None)

        # -- namespaces ------------------------------------------------------------------------
        root.add_task(TaskSpec("ops-job", ManualTrigger(), command="true"))  # namespace default
        with Client([cluster.grpc_of(leader)], token=tokens["maintainer"]) as m:
            with pytest.raises(PermissionDenied, match="namespace 'default'"):
                m.add_task(TaskSpec("sneaky", ManualTrigger(), command="true"))
            m.add_task(TaskSpec("team-job", ManualTrigger(), command="true", namespace="team"))
            assert [t.spec.name for t in m.list_tasks()] == ["team-job"]
            with pytest.raises(NotFound):
                m.get_task("ops-job")
            for write in (m.delete_task, m.disable_task, m.trigger):
                with pytest.raises(PermissionDenied):
                    write("ops-job")
            with pytest.raises(PermissionDenied):
                m.update_task(TaskSpec("ops-job", ManualTrigger(), command="id", namespace="team"))
            wf = pb.WorkflowSpec(name="team-flow", namespace="team")
            wf.tasks.add(name="a", command="true")
            wf.tasks.add(name="b", command="true").depends_on.add(task="a")
            m.apply_workflow(wf)
            other = pb.WorkflowSpec(name="ops-flow")
            other.tasks.add(name="a", command="true")
            with pytest.raises(PermissionDenied):
                m.apply_workflow(other)
            run = m.trigger("team-job")
        root.apply_workflow(other)
        # Reads from the leader: a follower may not have applied the last write yet.
        with Client([cluster.grpc_of(leader)], token=tokens["viewer"]) as v:
            assert [t.spec.name for t in v.list_tasks()] == ["team-job"]
            assert [w.spec.name for w in v.list_workflows()] == ["team-flow"]
            with pytest.raises(NotFound):
                v.get_workflow("ops-flow")
            with pytest.raises(PermissionDenied, match=r"tasks\.write"):
                v.add_task(TaskSpec("v", ManualTrigger(), command="true", namespace="team"))
        assert {t.spec.name for t in root.list_tasks()} >= {"ops-job", "team-job"}

        # -- the audit log ---------------------------------------------------------------------
        maint_id = f"token:{token_id(tokens['maintainer'])}"
        records = root.audit(principal=maint_id)
        done = {(r.rpc.rsplit("/", 1)[-1], r.target) for r in records}
        assert ("AddTask", "team-job") in done and ("TriggerNow", "team-job") in done, done
        assert ("ApplyWorkflow", "team-flow") in done
        assert all(r.principal == maint_id and r.at_ms > 0 for r in records)
        assert not any(r.target == "sneaky" for r in records), "a refused write was audited"
        creates = {r.target for r in root.audit() if r.rpc.endswith("/CreateToken")}
        assert creates == {token_id(t) for t in secrets_seen[1:]}
        assert run.run_id

    # -- the CLI: token create / list / revoke, audit, exit statuses ---------------------------
    admin_file = cluster.config_path.parent / "admin.token"
    made = _cli(cluster, "token", "create", "--role", "viewer", "--ttl", "30d", token_file=admin_file)
    assert made.returncode == 0, made.stderr
    cli_token = made.stdout.splitlines()[0]
    secrets_seen.append(cli_token)
    assert token_id(cli_token) and "not shown again" in made.stdout
    viewer_file = tmp_path / "viewer.token"
    viewer_file.write_text(cli_token)
    listed = _cli(cluster, "token", "list", "--json", token_file=admin_file)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert token_id(cli_token) in {r["id"] for r in rows}
    assert all("hash" not in r and "salt" not in r for r in rows)
    assert _cli(cluster, "task", "list").returncode == 3
    assert _cli(cluster, "token", "list", token_file=viewer_file).returncode == 4
    assert _cli(cluster, "task", "list", token_file=viewer_file).returncode == 0
    audit = _cli(cluster, "audit", "--json", "--principal", maint_id, token_file=admin_file)
    assert audit.returncode == 0, audit.stderr
    assert {r["target"] for r in json.loads(audit.stdout)} >= {"team-job", "team-flow"}
    revoked = _cli(cluster, "token", "revoke", token_id(cli_token), token_file=admin_file)
    assert revoked.returncode == 0, revoked.stderr
    wait_until(
        lambda: _cli(cluster, "task", "list", token_file=viewer_file).returncode == 3, 10, 0.1, "revoked"
    )

    # -- no secret in any log or status reply --------------------------------------------------
    replies = []
    for nid in NODES:
        replies.append(str(cluster.status(nid)))
        with Client([cluster.grpc_of(nid)], token=admin) as c:
            replies.append(str(c.cluster_status()))
            replies.append(str(c.list_tokens()))
    texts = [p.read_text(errors="replace") for p in cluster.log_dir.glob("*.log")] + replies
    for tok in secrets_seen:
        secret = parse_token(tok)[1]
        for text in texts:
            assert secret not in text, "a token secret appears in a log or reply"
    assert any("refused /raftsched.v1.Admin/" in t and "ipv4:127.0.0.1" in t for t in texts)


def test_expiry_and_revocation_on_every_node(make_cluster: ClusterFactory, tmp_path: Path) -> None:
    cluster, admin = _auth_cluster(make_cluster, tmp_path)
    with Client(cluster.targets(), token=admin) as root:
        short, info = root.create_token("viewer", ttl_ms=3000)
        assert info.expires_ms == info.created_ms + 3000
        doomed, _ = root.create_token("viewer")
        clients = {
            nid: Client([cluster.grpc_of(nid)], token=doomed, retries=0, stale_reads=True) for nid in NODES
        }
        expiring = {
            nid: Client([cluster.grpc_of(nid)], token=short, retries=0, stale_reads=True) for nid in NODES
        }
        try:
            for nid in NODES:  # each node verifies (and caches) them once
                wait_until(partial(_answers, clients[nid]), 10, 0.05, f"{nid} knows it")
                wait_until(partial(_answers, expiring[nid]), 10, 0.05, f"{nid} knows it")
            start = time.monotonic()
            root.revoke_token(token_id(doomed))
            for nid in NODES:
                wait_until(partial(_refused, clients[nid]), 10, 0.02, f"revocation on {nid}")
            took = time.monotonic() - start
            assert took < 3.0, f"revocation took {took:.2f} s to reach every node"
            assert [t.revoked for t in root.list_tokens() if t.id == token_id(doomed)] == [True]
            for nid in NODES:
                wait_until(partial(_refused, expiring[nid]), 15, 0.05, f"expiry on {nid}")
        finally:
            for c in [*clients.values(), *expiring.values()]:
                c.close()
    # revoking again is not an error; the bootstrap token can be revoked like any other
    with Client(cluster.targets(), token=admin) as root:
        root.revoke_token(token_id(doomed))


def _answers(client: Client) -> bool:
    return client.list_tasks() == []


def _refused(client: Client) -> bool:
    try:
        client.list_tasks()
    except Unauthenticated:
        return True
    return False


def test_rogue_executors_are_refused(make_cluster: ClusterFactory, tmp_path: Path) -> None:
    cluster, admin = _auth_cluster(make_cluster, tmp_path)
    leader = cluster.wait_for_leader()
    with Client(cluster.targets(), token=admin) as root:
        real, _ = root.create_token("executor", description="exec-a")
        rogue, _ = root.create_token("executor", description="rogue")
        viewer, _ = root.create_token("viewer")
        root.add_task(TaskSpec("sleepy", ManualTrigger(), command="sleep 120"))
        ch = grpc.insecure_channel(
            cluster.grpc_of(leader), options=[("grpc.max_send_message_length", 8 << 20)]
        )
        stub = pb_grpc.ExecutorServiceStub(ch)
        try:
            stub.Register(pb.RegisterRequest(name="exec-a", slots=2), metadata=_md(real), timeout=5)
            items: list[pb.WorkItem] = []
            stream = stub.DispatchBatch(pb.DispatchRequest(name="exec-a"), metadata=_md(real))

            def consume() -> None:
                try:
                    for batch in stream:
                        items.extend(batch.items)
                except grpc.RpcError:
                    pass

            reader = threading.Thread(target=consume, daemon=True)
            reader.start()
            run = root.trigger("sleepy")
            item = wait_until(
                lambda: next((i for i in items if i.run_id == run.run_id), None), 15, 0.05, "work"
            )

            def status(fn: Any, req: Any, token: str | None) -> grpc.StatusCode:
                try:
                    result = fn(req, metadata=_md(token), timeout=5)
                    if hasattr(result, "__iter__") and not isinstance(result, pb.RegisterReply):
                        for _ in result:
                            break
                except grpc.RpcError as err:
                    return err.code()
                return grpc.StatusCode.OK

            forged = pb.ExecResult(execution_id=item.execution_id, success=True, stdout_tail="pwned")
            rogue_calls = [
                (stub.Register, pb.RegisterRequest(name="exec-a", slots=10000)),
                (stub.Heartbeat, pb.HeartbeatRequest(name="exec-a", running=[item.execution_id])),
                (stub.Report, pb.ReportRequest(name="exec-a", results=[forged])),
                (stub.Leave, pb.LeaveRequest(name="exec-a")),
                (stub.DispatchBatch, pb.DispatchRequest(name="exec-a")),
            ]
            for fn, req in rogue_calls:
                assert status(fn, req, rogue) == grpc.StatusCode.PERMISSION_DENIED, fn
                assert status(fn, req, None) == grpc.StatusCode.UNAUTHENTICATED, fn
                assert status(fn, req, viewer) == grpc.StatusCode.PERMISSION_DENIED, fn
                assert status(fn, req, admin) in (grpc.StatusCode.PERMISSION_DENIED,), fn
            (shard,) = root.runs("sleepy")[0].shards
            assert shard.state == pb.RUNNING and shard.executor == "exec-a", "a forged report was accepted"
            assert reader.is_alive(), "the real executor's stream was taken over"

            # The real executor's own report is accepted, its 3 MiB output tail capped.
            huge = pb.ExecResult(execution_id=item.execution_id, success=True, stdout_tail="x" * (3 << 20))
            stub.Report(pb.ReportRequest(name="exec-a", results=[huge]), metadata=_md(real), timeout=10)
            done = wait_until(
                lambda: next((r for r in root.runs("sleepy") if r.state == pb.SUCCEEDED), None),
                10,
                0.05,
                "done",
            )
            assert 0 < len(done.shards[0].stdout_tail) <= 64 * 1024
            stream.cancel()
        finally:
            ch.close()


def test_tokens_survive_failover_and_snapshot_install(make_cluster: ClusterFactory, tmp_path: Path) -> None:
    cluster, admin = _auth_cluster(make_cluster, tmp_path, "[raft]\nlog_compaction_min_entries = 50\n")
    leader = cluster.wait_for_leader()
    with Client(cluster.targets(), token=admin) as root:
        kept, _ = root.create_token("maintainer")
        gone, _ = root.create_token("maintainer")
        root.revoke_token(token_id(gone))
        for i in range(80):  # enough entries for the leader to compact its log
            root.add_task(TaskSpec(f"job-{i:03d}", ManualTrigger(), command="true"))
        index = cluster.status(leader).applied_index
    cluster.kill(leader, signal.SIGKILL)
    survivors = [n for n in NODES if n != leader]
    new_leader = cluster.wait_for_leader(among=survivors)
    with Client([cluster.grpc_of(new_leader)], token=kept) as c:
        c.add_task(TaskSpec("after-failover", ManualTrigger(), command="true"))
    with Client([cluster.grpc_of(new_leader)], token=gone, retries=0) as c, pytest.raises(Unauthenticated):
        c.list_tasks()
    # The old leader comes back empty and catches up from a snapshot: the tokens come with it.
    cluster.wipe(leader)
    cluster.start(leader)
    wait_caught_up(cluster, leader, max(index, cluster.status(new_leader).applied_index))
    log = (cluster.log_dir / f"{leader}.log").read_text(errors="replace")
    assert "installed snapshot" in log, f"{leader} caught up without installing a snapshot"
    with Client([cluster.grpc_of(leader)], token=kept) as c:
        assert "after-failover" in {t.spec.name for t in c.list_tasks()}
    with Client([cluster.grpc_of(leader)], token=gone, retries=0) as c, pytest.raises(Unauthenticated):
        c.list_tasks()


def test_real_executor_with_token_runs_work(make_cluster: ClusterFactory, tmp_path: Path) -> None:
    cluster, admin = _auth_cluster(make_cluster, tmp_path)
    marker = tmp_path / "ran.txt"
    with Client(cluster.targets(), token=admin) as root:
        tok, _ = root.create_token("executor")
        proc = cluster.start_executor("worker", 2, tmp_path / "worker", token=tok)
        try:
            root.add_task(TaskSpec("hello", ManualTrigger(), command=f"echo hi >> {marker}"))
            run = root.trigger("hello")
            wait_until(
                lambda: any(r.state == pb.SUCCEEDED for r in root.runs("hello") if r.run_id == run.run_id),
                30,
                0.1,
                "the run to succeed",
            )
            execs = [r for r in root.audit() if r.rpc.endswith("/Register")]
            assert execs and execs[0].principal == f"token:{token_id(tok)}" and execs[0].target == "worker"
        finally:
            proc.terminate()
            proc.wait(timeout=15)
    assert marker.read_text().strip() == "hi"
