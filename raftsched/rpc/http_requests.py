"""An HTTP request of the JSON API as the Admin RPC's request message (:mod:`raftsched.rpc.http_api`).

Path parameters, query parameters and the JSON body become one request message through
protobuf's JSON mapping (proto field names, as the SDK's messages and the CLI's ``--json`` spell
them); the ``Idempotency-Key`` header is the request's ``idempotency_key``. What protobuf's parser
would take silently and the document does not allow (a JSON null, an enum given as a fraction or
a boolean, an unknown query parameter, a body on a route without one) is refused with
:class:`BadRequest` naming the field. :func:`merge_patch` is RFC 7396 for the PATCH routes,
aware of the message (oneofs, maps).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from raftsched.errors import InvalidSpec
from raftsched.observability.listener import HttpRequest
from raftsched.rpc import routes
from raftsched.v1 import raftsched_pb2 as pb

__all__ = [
    "ADMIN",
    "BOOLS",
    "FOLLOW_PARAM",
    "STALE_PARAM",
    "BadRequest",
    "body_object",
    "build_request",
    "merge_patch",
    "query_fields",
    "request_header",
]

STALE_PARAM: Final = "stale"
FOLLOW_PARAM: Final = "follow"
ADMIN: Final = pb.DESCRIPTOR.services_by_name["Admin"]


class BadRequest(InvalidSpec):
    """The HTTP request cannot become the RPC's request (bad JSON, an unknown parameter)."""


BOOLS: Final = {"true": True, "1": True, "false": False, "0": False}


def _query_value(fd: FieldDescriptor, name: str, raw: str) -> Any:
    """A query parameter's text as the JSON value ParseDict takes for field ``fd``."""
    if fd.type == FieldDescriptor.TYPE_BOOL:
        if raw.lower() not in BOOLS:
            raise BadRequest(name, f"{raw[:50]!r} is not a boolean (true or false)")
        return BOOLS[raw.lower()]
    if fd.type == FieldDescriptor.TYPE_ENUM and raw.lstrip("-").isdigit():
        return int(raw)
    if fd.cpp_type in (FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64) or fd.cpp_type in (
        FieldDescriptor.CPPTYPE_UINT32,
        FieldDescriptor.CPPTYPE_UINT64,
    ):
        try:
            return int(raw)
        except ValueError:
            raise BadRequest(name, f"{raw[:50]!r} is not an integer") from None
    return raw


def query_fields(route: routes.Route) -> list[FieldDescriptor]:
    """The request fields ``route`` takes as query parameters: the scalar (and repeated scalar)
    top-level fields no path parameter, body or fixed value sets."""
    if route.body:
        return []
    taken = {route.field_of(p).split(".")[0] for p in route.params} | set(route.fixed)
    method = ADMIN.methods_by_name[route.rpc]
    return [
        fd
        for fd in method.input_type.fields
        if fd.name not in taken and fd.message_type is None and fd.name != "idempotency_key"
    ]


def body_object(request: HttpRequest) -> dict[str, Any]:
    """The request's JSON body (``{}`` when empty); raises :class:`BadRequest` unless an object."""
    text = request.body.decode("utf-8", "replace").strip() if request.body else ""
    try:
        data = json.loads(text) if text else {}
    except ValueError as exc:
        raise BadRequest("body", f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest("body", "must be a JSON object")
    return data


def merge_patch(current: Mapping[str, Any], patch: Mapping[str, Any], descriptor: Any) -> dict[str, Any]:
    """``patch`` merged onto ``current`` (both a message of ``descriptor`` in the API's JSON,
    proto field names or JSON names) as RFC 7396 says, aware of the message: a null removes the
    field (its default) or the map key, an object merges into the message or map it names, a
    member of a ``oneof`` removes its siblings, anything else (a list too) replaces. Unknown
    names are kept for the parser to refuse."""
    out = dict(current)
    for key, value in patch.items():
        fd = descriptor.fields_by_name.get(key) or _by_json_name(descriptor, key)
        if fd is None:
            out[key] = {} if value is None else value  # the parser names the unknown field
            continue
        prior = out.get(fd.name, out.get(fd.json_name))
        out.pop(fd.name, None)
        out.pop(fd.json_name, None)
        if value is None:  # removing a field: a oneof's other members stay as they are
            continue
        for sibling in fd.containing_oneof.fields if fd.containing_oneof is not None else ():
            out.pop(sibling.name, None)
            out.pop(sibling.json_name, None)
        base = prior if isinstance(prior, dict) else {}
        if not isinstance(value, dict) or fd.message_type is None:
            out[fd.name] = value
        elif fd.message_type.GetOptions().map_entry:
            out[fd.name] = {k: v for k, v in {**base, **value}.items() if v is not None}
        elif fd.is_repeated:
            out[fd.name] = value
        else:
            out[fd.name] = merge_patch(base, value, fd.message_type)
    return out


def _by_json_name(descriptor: Any, key: str) -> FieldDescriptor | None:
    found: FieldDescriptor | None = next((f for f in descriptor.fields if f.json_name == key), None)
    return found


def build_request(route: routes.Route, params: Mapping[str, str], request: HttpRequest) -> Message:
    """The RPC's request message for ``request`` on ``route`` (raises :class:`BadRequest`)."""
    method = ADMIN.methods_by_name[route.rpc]
    message: Message = getattr(pb, method.input_type.name)()
    if route.body:
        data = body_object(request)
        null = _null_path(data)
        if null is not None:
            raise BadRequest(null, "null is not a value here: leave the field out for its default")
        target_descriptor = (
            message.DESCRIPTOR if route.body == "*" else getattr(message, route.body).DESCRIPTOR
        )
        bad_enum = _float_enum_path(data, target_descriptor)
        if bad_enum is not None:
            raise BadRequest(bad_enum, "an enum value is a name or an integer")
        target = message if route.body == "*" else getattr(message, route.body)
        try:
            json_format.ParseDict(data, target)
        except json_format.ParseError as exc:
            raise BadRequest("body" if route.body == "*" else route.body, str(exc)) from None
    elif request.body.strip():
        raise BadRequest("body", f"{route.method} {routes.PREFIX}{route.path} takes no body")
    fields = {fd.name: fd for fd in query_fields(route)}
    for name, raw in request.query.items():
        if name == STALE_PARAM or (name == FOLLOW_PARAM and route.stream is not None and route.stream.follow):
            if raw.lower() not in BOOLS:
                raise BadRequest(name, f"{raw[:50]!r} is not a boolean (true or false)")
            if name not in fields:
                continue  # stale: the servicer reads it from the metadata; follow: the gateway
        fd = fields.get(name)
        if fd is None:
            known = ", ".join([*sorted(fields), STALE_PARAM]) if not route.write else ""
            raise BadRequest(
                name,
                "not a query parameter of this route" + (f" (it takes: {known})" if known else ""),
            )
        try:
            json_format.ParseDict({name: _query_value(fd, name, raw)}, message, ignore_unknown_fields=False)
        except json_format.ParseError as exc:
            raise BadRequest(name, str(exc)) from None
    for path, value in params.items():
        _set_path(message, path, value)
    for name, fixed in route.fixed.items():
        setattr(message, name, fixed)
    key = request_header(request.headers, "idempotency-key")
    if key is not None and "idempotency_key" in method.input_type.fields_by_name:
        current = getattr(message, "idempotency_key")  # noqa: B009  (Message has no such attribute)
        if current and current != key:
            raise BadRequest("idempotency_key", "the body and the Idempotency-Key header differ")
        setattr(message, "idempotency_key", key)  # noqa: B010
    return message


def _null_path(value: Any, path: str = "") -> str | None:
    """The path of the first JSON null in ``value`` (protobuf's parser would take it silently as
    the field's default, which the document does not allow)."""
    if value is None:
        return path or "body"
    if isinstance(value, dict):
        for key, item in value.items():
            found = _null_path(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _null_path(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def _float_enum_path(value: Any, descriptor: Any, path: str = "") -> str | None:
    """The path of the first enum field in ``value`` (JSON for ``descriptor``) given as a
    non-integer number or a boolean: protobuf's parser takes 2.5e-42 as the enum's value 0."""
    if not isinstance(value, dict):
        return None
    for key, item in value.items():
        fd = descriptor.fields_by_name.get(key) or descriptor.fields_by_camelcase_name.get(key)
        if fd is None:
            continue
        where = f"{path}.{key}" if path else str(key)
        items = item if fd.is_repeated and isinstance(item, list) else [item]
        if fd.enum_type is not None:
            for one in items:
                if isinstance(one, bool) or (isinstance(one, float) and not one.is_integer()):
                    return where
        elif fd.message_type is not None and not fd.message_type.GetOptions().map_entry:
            for i, one in enumerate(items):
                found = _float_enum_path(one, fd.message_type, f"{where}[{i}]" if fd.is_repeated else where)
                if found is not None:
                    return found
    return None


def _set_path(message: Message, path: str, value: str) -> None:
    *parents, leaf = path.split(".")
    target = message
    for name in parents:
        target = getattr(target, name)
    current = getattr(target, leaf)
    if current and current != value:
        raise BadRequest(path, f"the path names {value!r}, the body {current!r}")
    setattr(target, leaf, value)


def request_header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None
