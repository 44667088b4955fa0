"""Authorization table, roles, tokens and their verification cache, the refusal log, the
replicated token and audit records, executor name binding and namespace-aware placement."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2

from raftsched import codec
from raftsched.config.load import parse_config
from raftsched.errors import ConfigError, InvalidSpec, PermissionDenied, Unauthenticated, Unavailable
from raftsched.fsm import keys
from raftsched.fsm.access import audit_records
from raftsched.fsm.effects import AttemptReady
from raftsched.fsm.records import Retention
from raftsched.fsm.state import SchedulerState
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.rpc.executor_client import GrpcExecutorTransport
from raftsched.security import authz
from raftsched.security.auth import (
    ALL_NAMESPACES,
    ROLE_PERMISSIONS,
    Permission,
    Principal,
    Role,
    parse_auth_table,
    principal_from_cert,
)
from raftsched.security.tokens import (
    BearerInterceptor,
    TokenVerifier,
    create_command,
    hash_secret,
    new_token,
    parse_token,
    read_token_file,
    resolve_token,
    token_id,
)
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

FAST_N = 2**10  # scrypt cost in tests (the records carry it; production uses SCRYPT_N)

# -- the table --------------------------------------------------------------------------------


def _all_rpcs() -> set[str]:
    out = set()
    for file in (pb.DESCRIPTOR, health_pb2.DESCRIPTOR, reflection_pb2.DESCRIPTOR):
        for service in file.services_by_name.values():
            for method in service.methods:
                out.add(f"/{service.full_name}/{method.name}")
    return out


def test_every_rpc_of_the_proto_is_in_the_table_and_nothing_else() -> None:
    rpcs = _all_rpcs()
    assert rpcs - set(authz.TABLE) == set(), "RPCs without a permission (they would be refused)"
    assert set(authz.TABLE) - rpcs == set(), "table entries for RPCs that do not exist"
    assert {m for m, need in authz.TABLE.items() if need == authz.PUBLIC} == {
        "/grpc.health.v1.Health/Check",
        "/grpc.health.v1.Health/Watch",
        "/grpc.health.v1.Health/List",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    }


def test_a_method_missing_from_the_table_is_refused() -> None:
    with pytest.raises(PermissionDenied, match="not in the authorization table"):
        authz.required_permission("/raftsched.v1.Admin/DropEverything")
    assert authz.required_permission("/raftsched.v1.Admin/AddTask") is Permission.TASKS_WRITE


def test_roles() -> None:
    assert ROLE_PERMISSIONS[Role.ADMIN] == frozenset(Permission)
    maint = ROLE_PERMISSIONS[Role.MAINTAINER]
    assert (
        Permission.TOKENS not in maint and Permission.AUDIT not in maint and Permission.EXECUTE not in maint
    )
    assert ROLE_PERMISSIONS[Role.VIEWER] == {
        Permission.STATUS,
        Permission.TASKS_READ,
        Permission.WORKFLOWS_READ,
    }
    assert ROLE_PERMISSIONS[Role.EXECUTOR] == {Permission.STATUS, Permission.EXECUTE}
    # A backup holds every namespace's state (and token hashes); draining moves work: admin only.
    for admin_only in (Permission.BACKUP, Permission.EXECUTORS_MANAGE):
        assert [r for r, perms in ROLE_PERMISSIONS.items() if admin_only in perms] == [Role.ADMIN]
    assert authz.TABLE["/raftsched.v1.Admin/Backup"] == Permission.BACKUP
    assert authz.TABLE["/raftsched.v1.Admin/DrainExecutor"] == Permission.EXECUTORS_MANAGE
    assert authz.TABLE["/raftsched.v1.ExecutorService/Drain"] == Permission.EXECUTE
    admin = Principal("token:a", Role.ADMIN, frozenset({"x"}))
    assert admin.namespaces == {ALL_NAMESPACES} and admin.in_namespace("anything")
    viewer = Principal("token:v", Role.VIEWER, frozenset({"team"}))
    assert viewer.in_namespace("team") and not viewer.in_namespace("default") and not viewer.in_namespace("")


def test_certificate_subjects_grant_only_what_the_config_says() -> None:
    grants = {"exec-1": (Role.EXECUTOR, ("default",))}
    p = principal_from_cert({"x509_common_name": [b"exec-1"]}, grants)
    assert p == Principal("cert:exec-1", Role.EXECUTOR, frozenset({"default"}))
    assert principal_from_cert({"x509_common_name": [b"stranger"]}, grants) is None
    assert principal_from_cert({}, grants) is None


# -- tokens -----------------------------------------------------------------------------------


def test_token_format_and_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tok = new_token()
    tid, secret = parse_token(tok)
    assert len(tid) == 16 and len(secret) == 43 and token_id(tok) == tid
    for bad in ("", "rst_xyz", tok + "x", "Bearer " + tok):
        with pytest.raises(InvalidSpec) as info:
            parse_token(bad)
        assert secret not in str(info.value)
    path = tmp_path / "t"
    path.write_text(f"\n{tok}\n")
    assert read_token_file(path) == tok
    path.write_text("not a token " + secret)
    with pytest.raises(InvalidSpec) as info:
        read_token_file(path)
    assert secret not in str(info.value)
    monkeypatch.setenv("RAFTSCHED_TOKEN", tok)
    assert resolve_token() == tok
    other = new_token()
    assert resolve_token(other) == other
    monkeypatch.setenv("RAFTSCHED_TOKEN", "garbage")
    with pytest.raises(InvalidSpec, match="RAFTSCHED_TOKEN"):
        resolve_token()


def _record(tok: str, role: Role = Role.VIEWER, ns: tuple[str, ...] = ("default",)) -> logpb.TokenRecord:
    body = create_command(tok, role, list(ns), ttl_ms=0, description="", created_by="test", n=FAST_N)
    rec = logpb.TokenRecord(
        salt=body.salt, hash=body.hash, scrypt_n=body.scrypt_n, scrypt_r=body.scrypt_r, scrypt_p=body.scrypt_p
    )
    rec.info.CopyFrom(body.info)
    return rec


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def test_the_stored_hash_is_salted_scrypt_with_its_parameters() -> None:
    tok = new_token()
    a, b = _record(tok), _record(tok)
    secret = parse_token(tok)[1]
    assert a.salt != b.salt and a.hash != b.hash  # salted
    assert a.hash == hash_secret(secret, a.salt, a.scrypt_n, a.scrypt_r, a.scrypt_p)
    assert secret.encode() not in a.SerializeToString() and tok.encode() not in a.SerializeToString()


def test_verifier_runs_scrypt_once_and_sees_revocation_and_expiry_every_call() -> None:
    tok = new_token()
    records = {token_id(tok): _record(tok, Role.MAINTAINER, ("team",))}
    clock = Clock()
    v = TokenVerifier(records.get, clock)
    assert v.cached(tok) is None
    p = v.check(tok)
    assert p == Principal(f"token:{token_id(tok)}", Role.MAINTAINER, frozenset({"team"}))
    for _ in range(100):
        assert v.cached(tok) == p
    assert v.scrypt_runs == 1 and v.last_used[token_id(tok)] == clock.ms
    # a wrong secret for a known id is refused (and never cached)
    tid = token_id(tok)
    forged = f"rst_{tid}_{'A' * 43}"
    for _ in range(3):
        with pytest.raises(Unauthenticated, match="wrong secret"):
            v.check(forged)
    assert v.cached(forged) is None
    assert v.scrypt_runs == 2  # a repeated wrong secret is remembered, not hashed again
    # expiry: compared with the node's clock on every call, cached or not
    rec = records[tid]
    rec.info.expires_ms = clock.ms + 10
    assert v.cached(tok) == Principal(p.id, p.role, p.namespaces, expires_ms=clock.ms + 10)
    clock.ms += 10
    with pytest.raises(Unauthenticated, match="expired"):
        v.cached(tok)
    rec.info.expires_ms = 0
    # revocation: the next call is refused
    rec.info.revoked = True
    with pytest.raises(Unauthenticated, match="revoked"):
        v.cached(tok)
    with pytest.raises(Unauthenticated, match="revoked"):
        v.check(tok)
    del records[tid]
    with pytest.raises(Unauthenticated, match="unknown token"):
        v.check(tok)


def test_a_follower_says_retry_for_a_token_it_has_not_applied_yet() -> None:
    """A token is handed out once the leader applied its creation; a follower may not have yet.
    There the token is "not known here yet" (UNAVAILABLE, which the SDK retries on the next
    node), not "unknown" (UNAUTHENTICATED, final); the leader's answer stays final."""
    records: dict[str, logpb.TokenRecord] = {}
    leading = [False]
    v = TokenVerifier(records.get, Clock(), leads=lambda: leading[0])
    tok = new_token()
    with pytest.raises(Unavailable, match="not known to this node yet"):
        v.check(tok)
    leading[0] = True
    with pytest.raises(Unauthenticated, match="unknown token"):
        v.check(tok)
    leading[0] = False
    records[token_id(tok)] = _record(tok)
    assert v.check(tok).role == Role.VIEWER  # applied here now: accepted on the follower too


def test_bootstrap_token_stands_in_until_its_record_exists() -> None:
    boot = new_token()
    records: dict[str, logpb.TokenRecord] = {}
    v = TokenVerifier(records.get, Clock(), bootstrap=boot)
    assert v.check(boot).role is Role.ADMIN
    with pytest.raises(Unauthenticated):
        v.check(f"rst_{token_id(boot)}_{'B' * 43}")
    rec = _record(boot, Role.ADMIN)
    rec.info.revoked = True
    records[token_id(boot)] = rec
    with pytest.raises(Unauthenticated, match="revoked"):
        v.check(boot)


def test_an_unknown_role_grants_nothing() -> None:
    tok = new_token()
    rec = _record(tok)
    rec.info.role = "superuser"
    v = TokenVerifier({token_id(tok): rec}.get, Clock())
    with pytest.raises(Unauthenticated, match="unknown to this node"):
        v.check(tok)


# -- the interceptor's pieces -----------------------------------------------------------------


def test_refusal_log_is_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    refusals = authz.RefusalLog(burst=3, window_s=10.0, clock=lambda: now[0])
    with caplog.at_level("WARNING", logger="raftsched.auth"):
        for _ in range(10):
            refusals.refused(
                grpc.StatusCode.UNAUTHENTICATED, "/raftsched.v1.Admin/AddTask", "ipv4:10.0.0.9:5", "x"
            )
        now[0] = 11.0
        refusals.refused(
            grpc.StatusCode.PERMISSION_DENIED, "/raftsched.v1.Admin/AddTask", "ipv4:10.0.0.9:5", "y"
        )
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4 and refusals.total == 11
    assert "ipv4:10.0.0.9:5" in lines[0] and "7 more refusals not logged" in lines[-1]


class FakeContext:
    def __init__(self, metadata: list[tuple[str, str]], auth: dict[str, list[bytes]] | None = None) -> None:
        self._md = metadata
        self._auth = auth or {}

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return self._md

    def auth_context(self) -> dict[str, list[bytes]]:
        return self._auth


def test_authenticator_reads_bearer_tokens_and_certificates() -> None:
    tok = new_token()
    v = TokenVerifier({token_id(tok): _record(tok)}.get, Clock())
    a = authz.Authenticator(v, {"exec-1": (Role.EXECUTOR, ("default",))})

    async def who(ctx: Any) -> Principal:
        return await a.principal(ctx)

    assert asyncio.run(who(FakeContext([("authorization", f"Bearer {tok}")]))).role is Role.VIEWER
    assert asyncio.run(who(FakeContext([], {"x509_common_name": [b"exec-1"]}))).id == "cert:exec-1"
    for md in (
        [],
        [("authorization", tok)],
        [("authorization", "Basic abc")],
        [("authorization", "Bearer ")],
    ):
        with pytest.raises(Unauthenticated):
            asyncio.run(who(FakeContext(md)))
    with pytest.raises(Unauthenticated, match="granted no role"):
        asyncio.run(who(FakeContext([], {"x509_common_name": [b"stranger"]})))


def test_caller_and_audit_target() -> None:
    assert authz.caller().principal.role is Role.ADMIN and not authz.auth_on()  # auth off
    assert authz.target_of(pb.DeleteTaskRequest(name="etl")) == "etl"
    assert authz.target_of(pb.RetryRunRequest(run_id="etl@1")) == "etl@1"
    assert authz.target_of(pb.AddTaskRequest(spec=pb.TaskSpec(name="x"))) == "x"
    assert authz.target_of(pb.CreateTokenRequest(token=new_token())) == ""  # never the secret


# -- config -----------------------------------------------------------------------------------


def _config(extra: str, tmp_path: Path) -> Any:
    import tomllib

    text = f"""
[cluster]
secret = "0123456789abcdef0123"
[[nodes]]
id = "n1"
raft = "127.0.0.1:7001"
grpc = "127.0.0.1:7002"
data_dir = "d"
{extra}
"""
    return parse_config(tomllib.loads(text), source="c.toml", base_dir=tmp_path)


def test_auth_table_in_the_config(tmp_path: Path) -> None:
    assert _config("", tmp_path).auth is None
    cfg = _config(
        '[auth]\nbootstrap_token_file = "admin.token"\naudit_keep = "30d"\n'
        '[auth.subjects]\n"exec-1" = "executor:a,b"\nops = "admin"\n',
        tmp_path,
    )
    assert cfg.auth.bootstrap_token_file == tmp_path / "admin.token"
    assert cfg.auth.audit_keep_ms == 30 * 86_400_000
    assert cfg.auth.subjects == {"exec-1": (Role.EXECUTOR, ("a", "b")), "ops": (Role.ADMIN, ("default",))}
    with pytest.raises(ConfigError) as info:
        _config('[auth]\nbootstrap = 1\naudit_keep = "soon"\n[auth.subjects]\nx = "root"\n', tmp_path)
    text = str(info.value)
    assert "auth.bootstrap: unknown key" in text and "auth.audit_keep" in text and "auth.subjects.x" in text
    problems: list[str] = []
    parse_auth_table({"audit_keep": 0}, tmp_path, problems)
    assert problems == ["auth.audit_keep: must be > 0"]


# -- the replicated records -------------------------------------------------------------------


def _token(st: SchedulerState, tid: str) -> logpb.TokenRecord:
    rec = st.access.get(tid)
    assert rec is not None
    return rec


def _state() -> SchedulerState:
    return SchedulerState(MemoryStore())


def _cmd(now: int, **body: Any) -> bytes:
    cmd = logpb.Command(epoch=1, now_ms=now, origin="n1")
    for name, value in body.items():
        getattr(cmd, name).CopyFrom(value)
    return codec.encode_command(cmd)


def _create(st: SchedulerState, tok: str, now: int, ttl_ms: int = 0) -> logpb.CommandResult:
    body = create_command(
        tok, Role.VIEWER, ["team"], ttl_ms=ttl_ms, description="d", created_by="t", n=FAST_N
    )
    return st.apply(_cmd(now, create_token=body)).result


def test_tokens_apply_deterministically_and_survive_a_snapshot() -> None:
    tok, other = new_token(), new_token()
    a, b = _state(), _state()
    body = create_command(tok, Role.VIEWER, ["team"], ttl_ms=5000, description="d", created_by="t", n=FAST_N)
    data = _cmd(1000, create_token=body)
    for st in (a, b):
        res = st.apply(data).result
        assert res.ok and res.token.created_ms == 1000 and res.token.expires_ms == 6000
    # same log on both replicas: same bytes (the leader drew the salt, not apply)
    data = _cmd(
        1000,
        create_token=create_command(
            other, Role.ADMIN, [], ttl_ms=0, description="", created_by="t", n=FAST_N
        ),
    )
    assert a.apply(data).result.token.namespaces == ["*"]
    b.apply(data)
    assert a.snapshot() == b.snapshot()
    dup = _create(a, tok, 2000)
    assert not dup.ok and dup.code == "already_exists"
    res = a.apply(_cmd(3000, revoke_token=logpb.RevokeToken(id=token_id(tok)))).result
    assert res.ok and res.token.revoked and res.token.revoked_ms == 3000
    assert _token(a, token_id(tok)).info.revoked
    again = a.apply(_cmd(4000, revoke_token=logpb.RevokeToken(id=token_id(tok)))).result
    assert again.ok and again.token.revoked_ms == 3000
    missing = a.apply(_cmd(4000, revoke_token=logpb.RevokeToken(id="0" * 16))).result
    assert not missing.ok and missing.code == "not_found"
    restored = _state()
    restored.restore(a.snapshot(), 10)
    assert _token(restored, token_id(tok)).info.revoked
    assert _token(restored, token_id(other)).info.role == "admin"


def test_bad_token_records_are_refused_as_values() -> None:
    st = _state()
    body = create_command(new_token(), Role.VIEWER, [], ttl_ms=0, description="", created_by="t", n=FAST_N)
    changes: list[tuple[str, str, Any]] = [
        ("info", "role", "root"),
        ("info", "id", "XYZ"),
        ("", "hash", b""),
        ("", "scrypt_n", 2),
        ("info", "description", "x" * 1000),
    ]
    for part, field, value in changes:
        bad = logpb.CreateToken()
        bad.CopyFrom(body)
        setattr(bad.info if part else bad, field, value)
        res = st.apply(_cmd(1000, create_token=bad)).result
        assert not res.ok and res.code == "invalid_argument", res
    assert st.access.tokens == {}


def test_accepted_writes_are_audited_and_pruned_by_age() -> None:
    st = SchedulerState(MemoryStore(), Retention(audit_keep_ms=10_000))
    spec = codec.spec_to_pb(TaskSpec("a", ManualTrigger(), command="true"))
    for i, now in enumerate((1000, 2000, 30_000)):
        cmd = logpb.Command(epoch=1, now_ms=now, origin="n1")
        cmd.create_task.spec.CopyFrom(spec)
        cmd.create_task.spec.name = f"t{i}"
        cmd.audit.principal, cmd.audit.rpc, cmd.audit.target = (
            "token:x",
            "/raftsched.v1.Admin/AddTask",
            f"t{i}",
        )
        assert st.apply(codec.encode_command(cmd)).result.ok
    refused = logpb.Command(epoch=1, now_ms=30_001, origin="n1")
    refused.delete_task.name = "nope"
    refused.audit.principal = "token:x"
    assert not st.apply(codec.encode_command(refused)).result.ok
    with st.store.reader() as r:
        records = audit_records(r, 0, "", 100)
    # t0 and t1 are older than 10 s at 30 s: pruned; the refused delete is not recorded
    assert [(x.target, x.at_ms) for x in records] == [("t2", 30_000)]
    with st.store.reader() as r:
        assert audit_records(r, 0, "token:other", 100) == []
        assert [k for k, _ in r.scan(keys.AUDIT, keys.AUDIT + keys.END)] == [keys.audit_key(30_000, 3)]


def _join(st: SchedulerState, name: str, principal: str, now: int, namespaces: tuple[str, ...] = ()) -> Any:
    cmd = logpb.Command(epoch=1, now_ms=now, origin="n1")
    cmd.executor_join.name, cmd.executor_join.slots, cmd.executor_join.principal = name, 2, principal
    cmd.executor_join.namespaces.extend(namespaces)
    return st.apply(codec.encode_command(cmd)).result


def test_an_executor_name_is_bound_to_its_principal() -> None:
    st = _state()
    tok = new_token()
    assert _create(st, tok, 1000, ttl_ms=10_000).ok
    owner = f"token:{token_id(tok)}"
    assert _join(st, "exec-a", owner, 1000).ok
    taken = _join(st, "exec-a", "token:rogue", 2000)
    assert not taken.ok and taken.code == "permission_denied" and "bound" in taken.message
    assert _join(st, "exec-a", owner, 3000).ok  # the owner may re-register
    assert st.executors["exec-a"].principal == owner
    # the bound token expired: the name is free for the executor's next token
    assert _join(st, "exec-a", "token:next", 20_000).ok
    assert st.executors["exec-a"].principal == "token:next"
    # a certificate subject keeps its names
    assert _join(st, "exec-c", "cert:exec-c", 1000).ok
    assert not _join(st, "exec-c", "token:next", 99_000_000).ok


def test_restricted_executors_get_only_work_of_their_namespaces() -> None:
    st = _state()
    for name, ns in (("team-job", "team"), ("ops-job", "default")):
        cmd = logpb.Command(epoch=1, now_ms=1000, origin="n1")
        cmd.create_task.spec.CopyFrom(
            codec.spec_to_pb(TaskSpec(name, ManualTrigger(), command="true", namespace=ns))
        )
        assert st.apply(codec.encode_command(cmd)).result.ok
    assert _join(st, "team-exec", "token:t", 1000, ("team",)).ok
    assert _join(st, "any-exec", "token:a", 1000, ("*",)).ok
    d = Dispatcher(st)
    d.become_leader(1, 1000)
    d.on_effects(
        [AttemptReady(f"{t}@{s}", t, 0, s, 1, 1) for s in range(40) for t in ("team-job", "ops-job")], 1000
    )
    owners = {(w.ready.task, w.owner) for w in d.waiting.values()}
    assert ("ops-job", "team-exec") not in owners
    assert ("team-job", "team-exec") in owners and ("ops-job", "any-exec") in owners
    # with auth off (no namespaces recorded) nothing is restricted
    plain = _state()
    assert _join(plain, "e", "", 1000).ok
    d2 = Dispatcher(plain)
    d2.become_leader(1, 1000)
    assert d2.term is not None and d2.term.placement.restricted == {}


# -- the clients send the token ----------------------------------------------------------------


class _Recorder(pb_grpc.ExecutorServiceServicer):  # type: ignore[misc]
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def Register(self, request: pb.RegisterRequest, context: Any) -> pb.RegisterReply:
        self.seen += [v for k, v in context.invocation_metadata() if k == "authorization"]
        return pb.RegisterReply(epoch=1)

    async def DispatchBatch(self, request: pb.DispatchRequest, context: Any) -> Any:
        self.seen += [v for k, v in context.invocation_metadata() if k == "authorization"]
        yield pb.WorkBatch()


def test_the_executor_transport_sends_the_bearer_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAFTSCHED_TOKEN", raising=False)
    tok = new_token()

    async def scenario() -> list[str]:
        server = grpc.aio.server()
        recorder = _Recorder()
        pb_grpc.add_ExecutorServiceServicer_to_server(recorder, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            transport = GrpcExecutorTransport(token=tok)
            target = f"127.0.0.1:{port}"
            await transport.register(target, pb.RegisterRequest(name="e", slots=1), timeout_s=5)
            async for _ in transport.dispatch(target, pb.DispatchRequest(name="e")):
                break
            await transport.close()
            plain = GrpcExecutorTransport()
            await plain.register(target, pb.RegisterRequest(name="e", slots=1), timeout_s=5)
            await plain.close()
        finally:
            await server.stop(None)
        return recorder.seen

    assert asyncio.run(scenario()) == [f"Bearer {tok}", f"Bearer {tok}"]
    assert "<token>" in repr(BearerInterceptor(tok)) and tok not in repr(BearerInterceptor(tok))


# -- a Session stream is admitted at open, and again while it lives ------------------------------


class StreamContext(FakeContext):
    def __init__(self, metadata: list[tuple[str, str]]) -> None:
        super().__init__(metadata)
        self.status: grpc.StatusCode | None = None

    def peer(self) -> str:
        return "ipv4:127.0.0.1:9"

    def set_trailing_metadata(self, metadata: object) -> None:
        pass

    async def abort(self, status: grpc.StatusCode, details: str) -> None:
        self.status = status
        raise RuntimeError(f"aborted: {details}")


def test_a_session_stream_takes_no_message_after_its_token_is_revoked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The unary Heartbeat and Report calls it replaces were admitted one by one, so a revoked
    executor token stopped working within a heartbeat; a Session was admitted once, at open,
    and went on heartbeating and reporting for as long as it stayed open."""
    monkeypatch.setattr(authz, "STREAM_RECHECK_S", 0.0)  # every message (the default: each second)
    tok = new_token()
    records = {token_id(tok): _record(tok, Role.EXECUTOR)}
    interceptor = authz.AuthInterceptor(authz.Authenticator(TokenVerifier(records.get, Clock())))
    got: list[str] = []

    async def inner(requests: Any, context: Any) -> Any:
        async for message in requests:
            got.append(message)
            yield message

    wrapped = interceptor._wrap(
        grpc.stream_stream_rpc_method_handler(inner), authz._E + "Session", Permission.EXECUTE
    )
    revoked = asyncio.Event()

    async def ups() -> Any:
        yield "first"
        await revoked.wait()
        yield "second"

    async def main() -> None:
        call = wrapped.stream_stream(ups(), StreamContext([("authorization", f"Bearer {tok}")]))
        assert await anext(call) == "first"
        records[token_id(tok)].info.revoked = True
        revoked.set()
        with pytest.raises(Unauthenticated, match="revoked"):
            await anext(call)

    asyncio.run(main())
    assert got == ["first"]
