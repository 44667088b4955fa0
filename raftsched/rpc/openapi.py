"""The OpenAPI 3.1 document of the HTTP/JSON API, generated from :data:`raftsched.rpc.routes.ROUTES`
and the protobuf descriptors (the messages' JSON mapping as :mod:`raftsched.rpc.http_api` speaks
it). ``tools/genopenapi.py`` writes it to ``raftsched/rpc/openapi.json`` (shipped in the wheel and
served at ``/api/v1/openapi.json``); a test regenerates it and compares, so the committed document
cannot drift from the routes or the protos.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, Final

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

from raftsched.rpc import routes
from raftsched.rpc.http_api import FULL_LOGS, FULL_LOGS_INTS, full_logs_maximum
from raftsched.rpc.http_requests import ADMIN, FOLLOW_PARAM, STALE_PARAM, query_fields
from raftsched.v1 import raftsched_pb2 as pb

__all__ = ["build", "document_bytes", "render"]

FILE: Final = "openapi.json"
JSON_TYPE: Final = "application/json"
VERSION: Final = "1.0.0"

_I32 = (-(2**31), 2**31 - 1)
_U32 = (0, 2**32 - 1)
_I64 = (-(2**63), 2**63 - 1)
_U64 = (0, 2**64 - 1)
_INT = {
    FieldDescriptor.TYPE_INT32: ("int32", _I32),
    FieldDescriptor.TYPE_SINT32: ("int32", _I32),
    FieldDescriptor.TYPE_SFIXED32: ("int32", _I32),
    FieldDescriptor.TYPE_UINT32: ("int64", _U32),
    FieldDescriptor.TYPE_FIXED32: ("int64", _U32),
}
_INT64 = {
    FieldDescriptor.TYPE_INT64: _I64,
    FieldDescriptor.TYPE_SINT64: _I64,
    FieldDescriptor.TYPE_SFIXED64: _I64,
    FieldDescriptor.TYPE_UINT64: _U64,
    FieldDescriptor.TYPE_FIXED64: _U64,
}


# Fields of the shared records that only the stored state uses (state format 3: a read fills the
# run's timeline in from them and clears them, raftsched.fsm.timeline): never in an answer.
_STORED_ONLY = frozenset(
    {
        "raftsched.v1.Run.timeline_derived",
        "raftsched.v1.ShardAttempt.started_ms",
        "raftsched.v1.ShardAttempt.duration_ms",
    }
)


def _fields(message: Descriptor) -> list[FieldDescriptor]:
    return [f for f in message.fields if f.full_name not in _STORED_ONLY]


def _ref(message: Descriptor | EnumDescriptor) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{message.full_name}"}


class _Schemas:
    def __init__(self) -> None:
        self.out: dict[str, Any] = {}

    def message(self, message: Descriptor, patch: bool = False) -> dict[str, str]:
        """A reference to ``message``'s schema; ``patch``: to the schema of a JSON merge patch of
        it (every field may be null, nested messages are patches too)."""
        name = message.full_name + ("Patch" if patch else "")
        if name not in self.out:
            self.out[name] = {}  # placeholder: recursive messages
            if patch:
                props = {
                    f.name: {"anyOf": [self.field(f, patch), {"type": "null"}]} for f in _fields(message)
                }
            else:
                props = {f.name: self.field(f) for f in _fields(message)}
            self.out[name] = {"type": "object", "properties": props, "additionalProperties": False}
            if patch:
                self.out[name]["description"] = (
                    f"A JSON merge patch (RFC 7396) of {message.name}: a field left out keeps its "
                    "value, null resets it to its default (a map key: removes it), an object "
                    "merges into the message or map it names (a oneof member replaces its "
                    "siblings), anything else, a list too, replaces."
                )
        return {"$ref": f"#/components/schemas/{name}"}

    def merge_body(self, request: Descriptor, merge: routes.Merge) -> dict[str, Any]:
        """The body of a merge-patch route: ``request`` whose ``merge.field`` is a JSON merge
        patch (RFC 7396) of its message, in which any field of any message, and any map value,
        may be null."""
        target = request.fields_by_name[merge.field].message_type
        assert target is not None  # the table test checks a merge field is a message
        props = {f.name: self.field(f) for f in request.fields}
        props[merge.field] = {"$ref": self.message(target, patch=True)["$ref"]}
        return {"type": "object", "properties": props, "additionalProperties": False}

    def enum(self, enum: EnumDescriptor) -> dict[str, str]:
        if enum.full_name not in self.out:
            self.out[enum.full_name] = {
                "description": "By name (as answered); a request may also send the number.",
                "anyOf": [
                    {"type": "string", "enum": [v.name for v in enum.values]},
                    {"type": "integer", "format": "int32"},
                ],
            }
        return _ref(enum)

    def scalar(self, fd: FieldDescriptor, patch: bool = False) -> dict[str, Any]:
        t = fd.type
        if t == FieldDescriptor.TYPE_STRING:
            return {"type": "string"}
        if t == FieldDescriptor.TYPE_BYTES:
            return {"type": "string", "contentEncoding": "base64"}
        if t == FieldDescriptor.TYPE_BOOL:
            return {"type": "boolean"}
        if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
            return {
                "anyOf": [{"type": "number"}, {"type": "string", "enum": ["NaN", "Infinity", "-Infinity"]}]
            }
        if t in _INT:
            fmt, (low, high) = _INT[t]
            return {"type": "integer", "format": fmt, "minimum": low, "maximum": high}
        if t in _INT64:
            # Protobuf's JSON mapping: a number when it is exact as a double, else a decimal string.
            low, high = _INT64[t]
            number = {"type": "integer", "minimum": low, "maximum": high}
            digits = "^[0-9]+$" if low == 0 else "^-?[0-9]+$"
            return {"anyOf": [number, {"type": "string", "pattern": digits}]}
        if fd.enum_type is not None:
            return self.enum(fd.enum_type)
        assert fd.message_type is not None  # the only type left
        return self.message(fd.message_type, patch)

    def field(self, fd: FieldDescriptor, patch: bool = False) -> dict[str, Any]:
        """``fd``'s schema; ``patch``: in a merge patch (a nested message is a patch, a map
        value may be null; a list replaces, so its items are whole messages)."""
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            value = self.scalar(fd.message_type.fields_by_name["value"])  # a key's value replaces
            nullable = {"anyOf": [value, {"type": "null"}]}
            return {"type": "object", "additionalProperties": nullable if patch else value}
        if fd.is_repeated:
            return {"type": "array", "items": self.scalar(fd)}
        return self.scalar(fd, patch)


def _response_schema(schemas: _Schemas, route: routes.Route) -> dict[str, Any]:
    method = ADMIN.methods_by_name[route.rpc]
    if method.server_streaming:
        return {"type": "array", "items": schemas.message(method.output_type)}
    message = method.output_type
    if not route.response:
        return schemas.message(message)
    fd: FieldDescriptor | None = None
    for name in route.response.split("."):
        fd = message.fields_by_name[name]
        if fd.message_type is not None:
            message = fd.message_type
    assert fd is not None
    if fd.is_repeated:
        return {"type": "array", "items": schemas.message(message)}
    return schemas.message(message)


def _content(schemas: _Schemas, route: routes.Route) -> dict[str, Any]:
    out: dict[str, Any] = {}
    stream = route.stream
    if stream is None or stream.follow:
        out["application/json"] = {"schema": _response_schema(schemas, route)}
    if stream is not None:
        out["text/event-stream"] = {
            "schema": {
                "type": "string",
                "description": f"server-sent events: `{stream.event}` (data: the JSON of one item of "
                f"the reply's {stream.items}, when new or changed; id: its "
                f"{'/'.join(stream.key)})"
                + (", then `end` when the run has finished" if stream.done else "")
                + "; `error` (a problem) if a later call is refused",
            }
        }
    return out


PROBLEM_SCHEMA: Final = {
    "type": "object",
    "description": "RFC 9457 problem details; detail is the gRPC status message.",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "instance": {"type": "string"},
        "code": {"type": "string", "description": "raftsched's error code (raftsched/errors.py)"},
        "grpc_status": {"type": "string"},
        "field": {"type": "string", "description": "the field path of an invalid argument"},
        "permission": {"type": "string", "description": "401/403: the permission the route needs"},
        "leader": {"type": "string", "description": "307: the leader's gRPC address"},
    },
    "required": ["type", "title", "status", "detail"],
}


_PROBLEM_RESPONSE: Final = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}


def _full_logs() -> dict[str, Any]:
    """The operation of :data:`raftsched.rpc.http_api.FULL_LOGS`, the one route outside the
    route table (a byte stream of ``Logs.ReadLogs``, answered by ``HttpApi._logs``)."""
    fields = pb.ReadLogsRequest.DESCRIPTOR.fields_by_name
    params: list[dict[str, Any]] = [
        {
            "name": "run_id",
            "in": "path",
            "required": True,
            "description": "sets the request's run_id",
            "schema": {"type": "string", "minLength": 1},
        }
    ]
    notes = {
        "shard": "the shard (0: the first)",
        "attempt": "the attempt (0: the shard's latest)",
        "since_line": "the first line to send (1-based; 0 or 1: from the start)",
        "tail_bytes": "only about the last this many bytes, from a line start (0: all)",
    }
    for name in FULL_LOGS_INTS:
        assert name in fields  # the request's own fields
        params.append(
            {
                "name": name,
                "in": "query",
                "required": False,
                "description": notes[name],
                "schema": {"type": "integer", "minimum": 0, "maximum": full_logs_maximum(name)},
            }
        )
    params += [
        {
            "name": "stream",
            "in": "query",
            "required": False,
            "description": "which output (stdout unless stderr)",
            "schema": {"type": "string", "enum": ["stdout", "stderr"]},
        },
        {
            "name": FOLLOW_PARAM,
            "in": "query",
            "required": False,
            "description": "keep sending as the attempt writes, until it ends",
            "schema": {"type": "boolean"},
        },
    ]
    header = {"schema": {"type": "string"}}
    return {
        "operationId": "ReadLogs",
        "summary": "An attempt's full log as text, streamed",
        "description": "Calls the Logs RPC ReadLogs and answers its bytes as text/plain: the "
        "executor's full file, or the stored tail when the executor cannot send it (the "
        "X-Raftsched-Log-Source header says which; X-Raftsched-Log-Note why).",
        "tags": ["runs"],
        "parameters": params,
        "responses": {
            "200": {
                "description": "OK",
                "headers": {
                    "X-Raftsched-Log-Source": {
                        "description": "executor (the full file) or stored_tail (the run record's tail)",
                        **header,
                    },
                    "X-Raftsched-Log-Note": {
                        "description": "why the full log is not available (stored_tail)",
                        **header,
                    },
                },
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
            "307": {
                "description": "this node follows: the same request on the leader (Location)",
                "content": _PROBLEM_RESPONSE,
            },
            "default": {"description": "refused (RFC 9457 problem details)", "content": _PROBLEM_RESPONSE},
        },
    }


def build() -> dict[str, Any]:
    """The document (a JSON-able dict); deterministic for a given route table and protos."""
    schemas = _Schemas()
    paths: dict[str, dict[str, Any]] = {}
    for route in routes.ROUTES:
        method = ADMIN.methods_by_name[route.rpc]
        request = method.input_type
        params: list[dict[str, Any]] = [
            {
                "name": p,
                "in": "path",
                "required": True,
                "description": f"sets the request's {route.field_of(p)}",
                "schema": {"type": "string", "minLength": 1},
            }
            for p in route.params
        ]
        for fd in query_fields(route):
            params.append({"name": fd.name, "in": "query", "required": False, "schema": schemas.field(fd)})
        if not route.write:
            params.append(
                {
                    "name": STALE_PARAM,
                    "in": "query",
                    "required": False,
                    "description": "answer from this node's applied state, even on a follower",
                    "schema": {"type": "boolean"},
                }
            )
        if route.stream is not None and route.stream.follow:
            params.append(
                {
                    "name": FOLLOW_PARAM,
                    "in": "query",
                    "required": False,
                    "description": "answer as server-sent events while it changes, until the run ends",
                    "schema": {"type": "boolean"},
                }
            )
        if "idempotency_key" in request.fields_by_name:
            params.append(
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "description": "the request's idempotency_key (a retry gets the first outcome)",
                    "schema": {"type": "string", "maxLength": 128},
                }
            )
        op: dict[str, Any] = {
            "operationId": route.operation_id,
            "summary": route.summary,
            "description": f"Calls the Admin RPC {route.rpc}"
            + (
                f" with {', '.join(f'{k}={json.dumps(v)}' for k, v in route.fixed.items())}"
                if route.fixed
                else ""
            )
            + ".",
            "tags": [route.path.strip("/").split("/")[0].split(":")[0]],
            "parameters": params,
            "responses": {
                "200": {
                    "description": "OK",
                    "content": _content(schemas, route),
                },
                "307": {
                    "description": "this node follows: the same request on the leader (Location)",
                    "content": {
                        "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
                    },
                },
                "default": {
                    "description": "refused (RFC 9457 problem details)",
                    "content": {
                        "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
                    },
                },
            },
        }
        if route.body:
            target = request if route.body == "*" else request.fields_by_name[route.body].message_type
            assert target is not None  # the table test checks a body field is a message
            if route.merge is not None:
                body = schemas.merge_body(request, route.merge)
                content = {kind: {"schema": body} for kind in ("application/merge-patch+json", JSON_TYPE)}
            else:
                content = {JSON_TYPE: {"schema": schemas.message(target)}}
            op["requestBody"] = {"required": False, "content": content}
        paths.setdefault(routes.PREFIX + route.path, {})[route.method.lower()] = op
        if route.path + ":full" == FULL_LOGS[1]:  # beside the stored tails' route
            paths.setdefault(routes.PREFIX + FULL_LOGS[1], {})[FULL_LOGS[0].lower()] = _full_logs()
    components = dict(sorted(schemas.out.items()))
    components["Problem"] = PROBLEM_SCHEMA
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "raftsched HTTP/JSON API",
            "version": VERSION,
            "description": "Every Admin RPC over HTTP/JSON (protobuf's JSON mapping, proto field "
            "names). Generated by tools/genopenapi.py from raftsched/rpc/routes.py and the protos.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
    }


def render() -> bytes:
    """:func:`build` as the committed file's bytes."""
    return (json.dumps(build(), indent=1, sort_keys=False, ensure_ascii=False) + "\n").encode()


_CACHED: list[bytes] = []


def document_bytes() -> bytes:
    """The committed document (``raftsched/rpc/openapi.json``, package data)."""
    if not _CACHED:
        _CACHED.append(resources.files("raftsched.rpc").joinpath(FILE).read_bytes())
    return _CACHED[0]
