"""Fuzz every admin and executor RPC of a real cluster with random requests.

The RPCs are enumerated from the proto's service descriptors and the requests are built from the
message descriptors, so a new RPC or field is fuzzed without touching this module. Field values
come from :mod:`tests.fuzz_strategies` (hostile strings, integers at and past every range, open
enum numbers, deeply nested and non-JSON params) with a few field names steered to values the
cluster may know (task and workflow names, run ids, reused idempotency keys), so calls get past
the first lookup too. About one call in sixteen has its encoded bytes spoiled (invalid UTF-8 in a
string field, cut short, a byte changed), as only a hostile client could send them.

Per call the harness checks: the status is never UNKNOWN (an exception escaped a handler) nor
INTERNAL, and a call that failed left the replicated state as it was: the leader's
``content_digest`` (the state digest without the apply chain) after the call equals the one
before, whenever no command was accepted in between (``accepted_commands`` unchanged; a fire or
an executor's lease may commit concurrently, and such a pair is counted as unchecked). At the end
(:meth:`Fuzzer.finish`): every replica reports the same state digest at the same index and no
node logged an error or a traceback (one known pysyncobj notice aside: :data:`KNOWN_LIBRARY_NOISE`).

Used by ``tests/integration/test_fuzz.py`` (a bounded run in the suite) and ``bench/fuzz.py``
(a longer one).
"""

from __future__ import annotations

import collections
import re
import time
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from raftsched.security.tokens import new_token
from raftsched.testing.cluster import LocalCluster
from raftsched.v1 import raftsched_pb2 as pb
from tests.fuzz_strategies import (
    INT32_MAX,
    INT32_MIN,
    boundary_ints,
    enums,
    int64s,
    names,
    params_json,
    task_specs,
    texts,
    uint32s,
    workflow_specs,
)

SERVICES: tuple[ServiceDescriptor, ...] = (
    pb.DESCRIPTOR.services_by_name["Admin"],
    pb.DESCRIPTOR.services_by_name["ExecutorService"],
)
UINT64_MAX = 2**64 - 1
MAX_DEPTH = 3
CALL_TIMEOUT_S = 15.0
STREAM_TIMEOUT_S = 0.5
# Statuses that are a bug whatever the input: an exception escaped a handler, or apply failed.
BUGS = frozenset({grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL})
_LOG_PROBLEM = re.compile(r" (ERROR|CRITICAL) |^Traceback ")
# pysyncobj logs this when a follower truncates entries it already applied and takes identical
# ones again (its "spurious truncation" after a leader's pause; seen about once in 4,000 fuzzed
# calls on a loaded machine). The replica never applies an index twice, and a real divergence
# would show as unequal state digests at one index, which finish() checks: counted, not a problem
# (as the chaos harness treats it).
KNOWN_LIBRARY_NOISE = re.compile(r"CRITICAL pysyncobj\.syncobj: truncating already-applied log entries")


def methods() -> list[MethodDescriptor]:
    """Every RPC of the admin and executor services, in proto order."""
    return [m for s in SERVICES for m in s.methods]


# -- requests from descriptors ---------------------------------------------------------------------

_KNOWN_NAMES = ["t", "u", "a", "etl", "w2", "fz"]


def _run_ids() -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(lambda n, t: f"{n}@{t}", st.sampled_from(_KNOWN_NAMES), int64s()),
        texts(),
    )


def _strings(fd: FieldDescriptor) -> st.SearchStrategy[str]:
    name = fd.name
    if name.endswith("_json"):
        return params_json()
    if name in ("name", "task", "workflow", "prefix", "executor"):
        return st.one_of(st.sampled_from(_KNOWN_NAMES), names())
    if name in ("run_id", "workflow_run_id"):
        return _run_ids()
    if name == "execution_id":
        return st.one_of(
            st.builds(
                lambda r, s, a: f"{r}/{s}/{a}", _run_ids(), st.integers(0, 2**40), st.integers(0, 2**40)
            ),
            texts(),
        )
    if name == "idempotency_key":
        # A few shared keys, so a key is reused for a different request now and then.
        return st.one_of(st.sampled_from(["", "", "k1", "k2", "k" * 129]), texts())
    if name == "token":
        return st.one_of(st.builds(new_token), texts())
    if name == "role":
        return st.one_of(st.sampled_from(["admin", "maintainer", "operator", "viewer", "executor"]), texts())
    return texts()


def _scalars(fd: FieldDescriptor) -> st.SearchStrategy[Any]:
    t = fd.type
    if t == FieldDescriptor.TYPE_STRING:
        return _strings(fd)
    if t == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64)
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t == FieldDescriptor.TYPE_ENUM:
        assert fd.enum_type is not None
        return enums([v.number for v in fd.enum_type.values])
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(width=32 if t == FieldDescriptor.TYPE_FLOAT else 64)
    if fd.cpp_type in _INTEGERS and t != FieldDescriptor.TYPE_ENUM:
        # The field's boundaries (0, 1, -1, the type's extremes, its documented limits +- 1)
        # drawn often on purpose; the sweep (Fuzzer.boundary_sweep) sends each of them once.
        return st.one_of(st.sampled_from(boundary_ints(fd)), _plain_ints(fd))
    return _plain_ints(fd)


_INTEGERS = frozenset(
    {
        FieldDescriptor.CPPTYPE_INT32,
        FieldDescriptor.CPPTYPE_UINT32,
        FieldDescriptor.CPPTYPE_INT64,
        FieldDescriptor.CPPTYPE_UINT64,
    }
)


def _plain_ints(fd: FieldDescriptor) -> st.SearchStrategy[Any]:
    t = fd.type
    if t in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return uint32s()
    if t in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return st.one_of(st.sampled_from([0, 1, 1000, 2**63, UINT64_MAX]), st.integers(0, UINT64_MAX))
    if t in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32):
        return st.one_of(st.sampled_from([0, 1, -1, INT32_MIN, INT32_MAX]), st.integers(INT32_MIN, INT32_MAX))
    return int64s()  # int64, sint64, sfixed64


def _merge(target: Message, value: Message) -> None:
    # The strategies' classes and the descriptor's are the same types; merging by bytes does not
    # depend on it.
    target.MergeFromString(value.SerializeToString())


@st.composite
def messages(draw: st.DrawFn, desc: Descriptor, depth: int = 0) -> Message:
    """A ``desc`` message with random fields set (each with a hostile or plausible value)."""
    if desc.full_name == "raftsched.v1.TaskSpec" and draw(st.booleans()):
        return draw(task_specs())
    if desc.full_name == "raftsched.v1.WorkflowSpec" and draw(st.booleans()):
        return draw(workflow_specs())
    msg = GetMessageClass(desc)()
    if depth > MAX_DEPTH:
        return msg
    for fd in desc.fields:
        if not draw(st.integers(0, 3)):  # a quarter of the fields left unset
            continue
        sub = fd.message_type
        if sub is not None and sub.GetOptions().map_entry:
            key_fd, value_fd = sub.fields_by_name["key"], sub.fields_by_name["value"]
            keys = draw(st.lists(_scalars(key_fd), max_size=3))
            target = getattr(msg, fd.name)
            for key in keys:
                if value_fd.message_type is not None:
                    _merge(target[key], draw(messages(value_fd.message_type, depth + 1)))
                else:
                    target[key] = draw(_scalars(value_fd))
        elif fd.is_repeated:
            count = draw(st.integers(0, 2 if sub is not None else 3))
            target = getattr(msg, fd.name)
            for _ in range(count):
                if sub is not None:
                    _merge(target.add(), draw(messages(sub, depth + 1)))
                else:
                    target.append(draw(_scalars(fd)))
        elif sub is not None:
            _merge(getattr(msg, fd.name), draw(messages(sub, depth + 1)))
        else:
            setattr(msg, fd.name, draw(_scalars(fd)))
    return msg


# -- boundary values, every one of every integer field ----------------------------------------------

FieldPath = tuple[FieldDescriptor, ...]


def integer_paths(desc: Any, _inside: tuple[str, ...] = ()) -> list[FieldPath]:
    """Every path from ``desc`` to an integer field (through singular and repeated messages, not
    maps, which hold strings only), each message type entered once per path."""
    out: list[FieldPath] = []
    for fd in desc.fields:
        sub = fd.message_type
        if sub is not None:
            if sub.GetOptions().map_entry or sub.full_name in _inside:
                continue
            out.extend((fd, *rest) for rest in integer_paths(sub, (*_inside, desc.full_name)))
        elif fd.cpp_type in _INTEGERS and fd.type != FieldDescriptor.TYPE_ENUM:
            out.append((fd,))
    return out


def show_path(path: FieldPath) -> str:
    return ".".join(fd.name for fd in path)


def set_path(msg: Message, path: FieldPath, value: int) -> None:
    """Set the field at ``path`` to ``value`` (a repeated step gets or reuses its first element)."""
    for fd in path[:-1]:
        field_value = getattr(msg, fd.name)
        if fd.is_repeated and not len(field_value):
            field_value.add()
        msg = field_value[0] if fd.is_repeated else field_value
    last = path[-1]
    if last.is_repeated:
        getattr(msg, last.name).append(value)
    else:
        setattr(msg, last.name, value)


def _base_request(method: MethodDescriptor) -> Message:
    """A request that gets past the checks before the integers where that is cheap (a fresh
    token and a valid role for CreateToken, a valid spec for AddTask), else an empty one."""
    msg = GetMessageClass(method.input_type)()
    if method.name == "CreateToken":
        msg.token, msg.role = new_token(), "viewer"  # type: ignore[attr-defined]
    elif method.name in ("AddTask", "UpdateTask"):
        msg.spec.name, msg.spec.command = "fzb", "true"  # type: ignore[attr-defined]
    return msg


def boundary_cases() -> list[tuple[MethodDescriptor, FieldPath, int]]:
    """``(rpc, field path, value)`` for every boundary value of every integer field of every RPC."""
    return [
        (m, path, value)
        for m in methods()
        for path in integer_paths(m.input_type)
        for value in boundary_ints(path[-1])
    ]


# -- the harness -----------------------------------------------------------------------------------


@dataclass
class Fuzzer:
    """Calls RPCs of ``cluster`` and records what they answered (see the module docstring).

    ``token`` (auth on): sent on most calls; some go without one, or with a malformed one.
    """

    cluster: LocalCluster
    token: str | None = None
    calls: int = 0
    by_code: collections.Counter[str] = field(default_factory=collections.Counter)
    by_method: collections.Counter[str] = field(default_factory=collections.Counter)
    rejected_checked: int = 0
    rejected_unchecked: int = 0
    library_noise: int = 0
    problems: list[str] = field(default_factory=list)
    boundaries_sent: set[tuple[str, str, int]] = field(default_factory=set)
    _channels: dict[str, grpc.Channel] = field(default_factory=dict)
    _leader: str = ""

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()

    def _channel(self, node_id: str) -> grpc.Channel:
        ch = self._channels.get(node_id)
        if ch is None:
            ch = self._channels[node_id] = grpc.insecure_channel(
                self.cluster.grpc_of(node_id), options=[("grpc.max_send_message_length", 64 * 1024 * 1024)]
            )
        return ch

    def leader(self) -> str:
        if not self._leader or self._leader not in self.cluster.alive():
            self._leader = self.cluster.wait_for_leader()
        return self._leader

    def _content(self, node_id: str) -> tuple[str, int] | None:
        try:
            st_ = self.cluster.status(node_id, timeout=10, digest=True)
        except grpc.RpcError:
            return None
        if st_.role != "leader":
            self._leader = ""
            return None
        return st_.content_digest, st_.accepted_commands

    def call(
        self, method: MethodDescriptor, request: Message, on_leader: bool, credential: int, mangle: int = 0
    ) -> None:
        """One call; ``credential`` (auth on) 0: the token, 1: none, 2: a malformed one.
        ``mangle`` > 0 spoils the encoded request (see :func:`_mangled`)."""
        node = self.leader() if on_leader else self._follower()
        before = self._content(self.leader())
        metadata: list[tuple[str, str]] = []
        if self.token is not None:
            if credential == 0:
                metadata = [("authorization", f"Bearer {self.token}")]
            elif credential == 2:
                metadata = [("authorization", "Bearer rst_nope")]
        code, details = _invoke(self._channel(node), method, request, metadata, mangle)
        self.calls += 1
        self.by_code[code.name] += 1
        self.by_method[method.name] += 1
        what = f"{method.containing_service.name}/{method.name}"
        if code in BUGS:
            self.problems.append(f"{what} -> {code.name}: {details[:500]}\n  request: {_show(request)}")
        if code in (grpc.StatusCode.OK, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
            return  # accepted (or a stream that stayed open): nothing to compare
        after = self._content(self.leader())
        if before is None or after is None or before[1] != after[1]:
            self.rejected_unchecked += 1  # a leader change or a concurrent accepted command
            return
        self.rejected_checked += 1
        if before[0] != after[0]:
            self.problems.append(
                f"{what} -> {code.name} ({details[:200]}) changed the replicated state\n"
                f"  request: {_show(request)}"
            )

    def _follower(self) -> str:
        others = [n for n in self.cluster.alive() if n != self.leader()]
        return others[0] if others else self.leader()

    def boundary_sweep(self) -> None:
        """Call every RPC once per boundary value of each of its integer fields (that field set,
        the rest as :func:`_base_request` leaves it): the extremes appear in every run, whatever
        the random draws (:attr:`boundaries_sent` records them)."""
        for method, path, value in boundary_cases():
            request = _base_request(method)
            set_path(request, path, value)
            self.call(method, request, on_leader=True, credential=0)
            self.boundaries_sent.add((method.full_name, show_path(path), value))

    def rounds(self, rounds: int, *, derandomize: bool = True, seed: int | None = None) -> None:
        """``rounds`` Hypothesis examples, each calling every RPC once with a drawn request
        (``derandomize``: the same requests on every run, as the suite wants; ``seed``: the
        requests of that seed, to replay a run that found something)."""
        every = methods()
        strategies = {m.full_name: messages(m.input_type) for m in every}

        @settings(
            max_examples=rounds,
            deadline=None,
            database=None,
            phases=[Phase.generate],  # no shrinking: problems are collected, not raised
            suppress_health_check=list(HealthCheck),
            derandomize=derandomize and seed is None,
        )
        @given(data=st.data())
        def one(data: st.DataObject) -> None:
            for m in every:
                request = data.draw(strategies[m.full_name], label=m.name)
                on_leader = data.draw(st.integers(0, 9), label="target") > 0
                credential = data.draw(st.sampled_from([0, 0, 0, 0, 0, 0, 1, 2]), label="credential")
                mangle = data.draw(st.one_of(st.just(0), st.integers(1, 2**31)), label="mangle")
                self.call(m, request, on_leader, credential, mangle if mangle % 8 == 1 else 0)

        if seed is not None:
            one = hypothesis_seed(seed)(one)
        one()

    def finish(self, timeout: float = 60.0) -> str:
        """Wait until every replica has the same state digest at the same index, check the logs;
        the digest. Problems found are added to :attr:`problems`."""
        digest = ""
        try:
            digest = self.cluster.wait_converged(timeout)
        except Exception as exc:  # a timeout names the diverging replicas
            self.problems.append(f"replicas did not converge: {exc}")
        for log in sorted(self.cluster.log_dir.glob("*.log")):
            for line in log.read_text(errors="replace").splitlines():
                if KNOWN_LIBRARY_NOISE.search(line):
                    self.library_noise += 1
                elif _LOG_PROBLEM.search(line):
                    self.problems.append(f"{log.name}: {line[:300]}")
        return digest

    def summary(self) -> str:
        codes = ", ".join(f"{c} {n}" for c, n in sorted(self.by_code.items()))
        return (
            f"{self.calls} calls over {len(self.by_method)} RPCs; statuses: {codes}; "
            f"rejections checked for no state change: {self.rejected_checked} "
            f"(unchecked, a concurrent write: {self.rejected_unchecked}); "
            f"pysyncobj truncation notices: {self.library_noise}"
        )


def _mangled(data: bytes, mangle: int) -> bytes:
    """``data`` spoiled as a hostile client could: a string field (number 1..15, chosen by
    ``mangle``) holding invalid UTF-8 appended, the message cut short, or one byte changed."""
    how, where = mangle % 3, mangle // 3
    if how == 0:
        return data + bytes([((where % 15) + 1) << 3 | 2, 3]) + b"\xff\xfe\xc0"
    if how == 1 and data:
        return data[: where % len(data)]
    if data:
        i = where % len(data)
        return data[:i] + bytes([(data[i] + 1 + where % 255) % 256]) + data[i + 1 :]
    return b"\xff"


def _invoke(
    channel: grpc.Channel,
    method: MethodDescriptor,
    request: Message,
    metadata: list[tuple[str, str]],
    mangle: int = 0,
) -> tuple[grpc.StatusCode, str]:
    path = f"/{method.containing_service.full_name}/{method.name}"
    reply = GetMessageClass(method.output_type)

    def serialize(m: Message) -> bytes:
        data = m.SerializeToString()
        return _mangled(data, mangle) if mangle else data

    try:
        if method.server_streaming:
            stream = channel.unary_stream(
                path, request_serializer=serialize, response_deserializer=reply.FromString
            )(request, metadata=metadata, timeout=STREAM_TIMEOUT_S)
            deadline = time.monotonic() + STREAM_TIMEOUT_S
            for _ in stream:
                if time.monotonic() > deadline:
                    break
            stream.cancel()
        else:
            channel.unary_unary(path, request_serializer=serialize, response_deserializer=reply.FromString)(
                request, metadata=metadata, timeout=CALL_TIMEOUT_S
            )
    except grpc.RpcError as err:
        return err.code(), err.details() or ""
    return grpc.StatusCode.OK, ""


def _show(request: Message) -> str:
    text = str(request).replace("\n", " ")
    return text if len(text) <= 600 else f"{text[:600]}... ({len(text):,} characters)"
