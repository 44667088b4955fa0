"""Bearer tokens: their format, the salted scrypt hash the cluster replicates, and verification.

A token is ``rst_<id>_<secret>``: ``id`` is 16 hex digits (public: it names the token in
``token list``, ``token revoke`` and the audit log), ``secret`` 43 URL-safe characters (32 random
bytes). Clients send it as ``authorization: Bearer <token>``. The cluster keeps only
``scrypt(secret, salt, n, r, p)`` with the parameters beside it (so they can be raised for new
tokens without invalidating old ones); neither the token nor its secret is stored, replicated,
logged or returned after creation.

Cost: scrypt (about 30-50 ms at the default parameters) runs once per token per node, off the event
loop; later calls with the same token are recognised by a SHA-256 of it in an in-memory cache.
Every call, cached or not, re-reads the token's replicated record, so a revocation or an expiry
takes effect on a node as soon as that node applies it (revocation) or its clock passes the
expiry (expiry is compared with the node's local clock, which the leader's stamps follow).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import grpc

from raftsched.errors import InvalidSpec, Unauthenticated, Unavailable
from raftsched.security.auth import ALL_NAMESPACES, DEFAULT_NAMESPACE, Principal, Role
from raftsched.v1 import log_pb2 as logpb

__all__ = [
    "SCRYPT_N",
    "SCRYPT_P",
    "SCRYPT_R",
    "TOKEN_ENV",
    "BearerInterceptor",
    "TokenVerifier",
    "aio_interceptors",
    "hash_secret",
    "new_token",
    "parse_token",
    "read_token_file",
    "resolve_token",
    "token_id",
]

TOKEN_ENV: Final = "RAFTSCHED_TOKEN"
SCRYPT_N: Final = 2**14
SCRYPT_R: Final = 8
SCRYPT_P: Final = 1
_DKLEN: Final = 32
_MAXMEM: Final = 256 * 1024 * 1024
_TOKEN_RE: Final = re.compile(r"rst_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
_CACHE_MAX: Final = 4096
_WRONG_REMEMBERED_MS: Final = 60_000
_TOKEN_FORMAT: Final = (
    "expected rst_<16 hex digits>_<43 URL-safe characters> (as `raftsched token create` prints)"
)


def new_token() -> str:
    """A fresh random token (``rst_<id>_<secret>``)."""
    return f"rst_{secrets.token_hex(8)}_{secrets.token_urlsafe(32)}"


def parse_token(token: str) -> tuple[str, str]:
    """``(id, secret)`` of a well-formed token. Raises :class:`InvalidSpec` (field ``token``),
    without echoing the value, for anything else."""
    m = _TOKEN_RE.fullmatch(token.strip())
    if m is None:
        raise InvalidSpec("token", f"malformed token; {_TOKEN_FORMAT}")
    return m.group(1), m.group(2)


def token_id(token: str) -> str:
    """The public id of a well-formed token (see :func:`parse_token`)."""
    return parse_token(token)[0]


def read_token_file(path: Path | str) -> str:
    """The token stored in ``path`` (surrounding whitespace dropped). Raises :class:`InvalidSpec`
    if it cannot be read or holds no well-formed token; the message never shows the contents."""
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InvalidSpec("token_file", f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InvalidSpec("token_file", f"{path} is not UTF-8 text") from None
    try:
        parse_token(text)
    except InvalidSpec:
        raise InvalidSpec("token_file", f"{path} holds no well-formed token; {_TOKEN_FORMAT}") from None
    return text


def hash_secret(secret: str, salt: bytes, n: int = SCRYPT_N, r: int = SCRYPT_R, p: int = SCRYPT_P) -> bytes:
    """The stored hash of ``secret``: stdlib scrypt with these parameters."""
    return hashlib.scrypt(secret.encode(), salt=salt, n=n, r=r, p=p, dklen=_DKLEN, maxmem=_MAXMEM)


def create_command(
    token: str,
    role: Role,
    namespaces: list[str],
    *,
    ttl_ms: int,
    description: str,
    created_by: str,
    n: int = SCRYPT_N,
) -> logpb.CreateToken:
    """The replicated body that creates ``token``: its grant and a fresh salted hash. Runs scrypt
    (call it off the event loop). Raises :class:`InvalidSpec` for a malformed token."""
    tid, secret = parse_token(token)
    salt = secrets.token_bytes(16)
    body = logpb.CreateToken(
        ttl_ms=ttl_ms,
        salt=salt,
        hash=hash_secret(secret, salt, n, SCRYPT_R, SCRYPT_P),
        scrypt_n=n,
        scrypt_r=SCRYPT_R,
        scrypt_p=SCRYPT_P,
    )
    ns = [ALL_NAMESPACES] if role is Role.ADMIN else sorted(set(namespaces or [DEFAULT_NAMESPACE]))
    body.info.id = tid
    body.info.role = role.value
    body.info.namespaces.extend(ns)
    body.info.description = description
    body.info.created_by = created_by
    return body


def principal_of(info: logpb.TokenInfo) -> Principal:
    """The principal a token record grants. Raises :class:`Unauthenticated` for a role this
    build does not know (fail closed: a newer node's role grants nothing here)."""
    try:
        role = Role(info.role)
    except ValueError:
        raise Unauthenticated(f"token {info.id} has role {info.role!r}, unknown to this node") from None
    return Principal(
        id=f"token:{info.id}", role=role, namespaces=frozenset(info.namespaces), expires_ms=info.expires_ms
    )


@dataclass(slots=True)
class _Verified:
    hash: bytes  # the record hash this token was checked against
    principal: Principal


class TokenVerifier:
    """Turns a bearer token into a :class:`Principal`, cheaply after the first time.

    ``lookup(id)`` returns the token's current replicated record (or None); ``now_ms()`` is this
    node's clock. ``bootstrap`` is the ``[auth] bootstrap_token_file`` token: until a record of
    its id is replicated (the first leader creates one), it is accepted as ``admin`` on its own,
    so a new cluster is usable at once; from then on its record decides (revoking it works).
    ``last_used`` maps token id to the last time this node accepted it. :meth:`check` runs
    scrypt: call it off the event loop.

    ``leads()`` (if given) says whether this node leads. A follower may not have applied a token
    created moments ago (its creation was acknowledged once the leader applied it): there an
    unknown token is :class:`Unavailable` ("not known here yet; retry"), which the SDK retries on
    the next node, and only the leader answers :class:`Unauthenticated` for it.
    """

    def __init__(
        self,
        lookup: Callable[[str], logpb.TokenRecord | None],
        now_ms: Callable[[], int],
        bootstrap: str | None = None,
        leads: Callable[[], bool] | None = None,
    ) -> None:
        self._lookup = lookup
        self._now_ms = now_ms
        self._leads = leads
        self._bootstrap_id, self._bootstrap = (
            ("", b"") if not bootstrap else (token_id(bootstrap), bootstrap.encode())
        )
        self._cache: dict[bytes, _Verified] = {}
        # Wrong secrets seen recently, by SHA-256 of the token: a client repeating a bad token
        # (or a guesser) costs a dict lookup, not an scrypt run each time.
        self._wrong: dict[bytes, int] = {}
        self.last_used: dict[str, int] = {}
        self.scrypt_runs = 0

    def cached(self, token: str) -> Principal | None:
        """The principal of ``token`` if it was verified before and its record still holds
        (not revoked, not expired, same hash); None if it needs a full check.
        Raises :class:`Unauthenticated` if the token is revoked, expired or unknown."""
        fast = hashlib.sha256(token.encode()).digest()
        hit = self._cache.get(fast)
        if hit is None:
            return None
        rec = self._current(hit.principal.id.removeprefix("token:"))
        if rec.hash != hit.hash:
            self._cache.pop(fast, None)
            return None
        self.last_used[rec.info.id] = self._now_ms()
        return principal_of(rec.info)

    def _current(self, tid: str) -> logpb.TokenRecord:
        rec = self._lookup(tid)
        if rec is None:
            if self._leads is not None and not self._leads():
                raise Unavailable(
                    f"token {tid} is not known to this node yet (a follower: a token created moments"
                    " ago may not have reached it); retry, or ask the leader"
                )
            raise Unauthenticated(f"unknown token {tid}")
        if rec.info.revoked:
            raise Unauthenticated(f"token {tid} was revoked")
        if rec.info.expires_ms and self._now_ms() >= rec.info.expires_ms:
            raise Unauthenticated(f"token {tid} expired")
        return rec

    def check(self, token: str) -> Principal:
        """Full verification (runs scrypt unless cached). Raises :class:`Unauthenticated`."""
        hit = self.cached(token)
        if hit is not None:
            return hit
        try:
            tid, secret = parse_token(token)
        except InvalidSpec:
            raise Unauthenticated(f"malformed bearer token; {_TOKEN_FORMAT}") from None
        if tid == self._bootstrap_id and self._lookup(tid) is None:
            if hmac.compare_digest(token.encode(), self._bootstrap):
                self.last_used[tid] = self._now_ms()
                return Principal(id=f"token:{tid}", role=Role.ADMIN)
            raise Unauthenticated(f"wrong secret for token {tid}")
        rec = self._current(tid)
        fast = hashlib.sha256(token.encode()).digest()
        until = self._wrong.get(fast)
        if until is not None and self._now_ms() < until:
            raise Unauthenticated(f"wrong secret for token {tid}")
        self.scrypt_runs += 1
        got = hash_secret(
            secret, rec.salt, rec.scrypt_n or SCRYPT_N, rec.scrypt_r or SCRYPT_R, rec.scrypt_p or SCRYPT_P
        )
        if not hmac.compare_digest(got, rec.hash):
            if len(self._wrong) >= _CACHE_MAX:
                self._wrong.clear()
            self._wrong[fast] = self._now_ms() + _WRONG_REMEMBERED_MS
            raise Unauthenticated(f"wrong secret for token {tid}")
        if len(self._cache) >= _CACHE_MAX:
            self._cache.clear()  # rare: more distinct live tokens than the cap; re-verify as needed
        self._cache[fast] = _Verified(rec.hash, principal_of(rec.info))
        self.last_used[tid] = self._now_ms()
        return principal_of(rec.info)


# -- the client side: every call of a channel carries the token ----------------------------------


def _with_token(metadata: Any, value: str) -> list[tuple[str, str | bytes]]:
    out = [(k, v) for k, v in (metadata or ()) if k != "authorization"]
    out.append(("authorization", value))
    return out


class _Details(grpc.ClientCallDetails):  # type: ignore[misc]
    def __init__(self, base: grpc.ClientCallDetails, metadata: list[tuple[str, str | bytes]]) -> None:
        self.method = base.method
        self.timeout = base.timeout
        self.metadata = metadata
        self.credentials = base.credentials
        self.wait_for_ready = getattr(base, "wait_for_ready", None)
        self.compression = getattr(base, "compression", None)


class BearerInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):  # type: ignore[misc]
    """Adds ``authorization: Bearer <token>`` to every call of a synchronous channel
    (``grpc.intercept_channel(channel, BearerInterceptor(token))``). The token is held in memory
    only and never logged."""

    def __init__(self, token: str) -> None:
        self._value = f"Bearer {token}"

    def __repr__(self) -> str:
        return "BearerInterceptor(<token>)"

    def intercept_unary_unary(self, continuation: Any, details: grpc.ClientCallDetails, request: Any) -> Any:
        return continuation(_Details(details, _with_token(details.metadata, self._value)), request)

    def intercept_unary_stream(self, continuation: Any, details: grpc.ClientCallDetails, request: Any) -> Any:
        return continuation(_Details(details, _with_token(details.metadata, self._value)), request)


class _AioUnary(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self, value: str) -> None:
        self._value = value

    def __repr__(self) -> str:
        return "BearerInterceptor(<token>)"

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_aio_details(details, self._value), request)


class _AioStream(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, value: str) -> None:
        self._value = value

    def __repr__(self) -> str:
        return "BearerInterceptor(<token>)"

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_aio_details(details, self._value), request)


class _AioStreamUnary(grpc.aio.StreamUnaryClientInterceptor):  # type: ignore[misc]
    """The executor's client-streaming ``SendLogs`` (full logs, issue 29)."""

    def __init__(self, value: str) -> None:
        self._value = value

    def __repr__(self) -> str:
        return "BearerInterceptor(<token>)"

    async def intercept_stream_unary(self, continuation: Any, details: Any, request_iterator: Any) -> Any:
        return await continuation(_aio_details(details, self._value), request_iterator)


class _AioStreamStream(grpc.aio.StreamStreamClientInterceptor):  # type: ignore[misc]
    """The executor's bidirectional ``Session`` stream (issue 31 P2)."""

    def __init__(self, value: str) -> None:
        self._value = value

    def __repr__(self) -> str:
        return "BearerInterceptor(<token>)"

    async def intercept_stream_stream(self, continuation: Any, details: Any, request_iterator: Any) -> Any:
        return await continuation(_aio_details(details, self._value), request_iterator)


def _aio_details(details: Any, value: str) -> Any:
    metadata = grpc.aio.Metadata(*_with_token(details.metadata, value))
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )


def aio_interceptors(token: str | None) -> list[Any]:
    """Client interceptors that send ``token`` on every call of a ``grpc.aio`` channel (none
    without a token, so a cluster without auth pays nothing)."""
    if not token:
        return []
    value = f"Bearer {token}"
    return [_AioUnary(value), _AioStream(value), _AioStreamUnary(value), _AioStreamStream(value)]


def resolve_token(token: str | None = None, token_file: str | Path | None = None) -> str | None:
    """The token a client uses: ``token``, else the contents of ``token_file``, else the
    ``RAFTSCHED_TOKEN`` environment variable, else None. Raises :class:`InvalidSpec` for a
    malformed one (never echoing it)."""
    if token:
        parse_token(token)
        return token.strip()
    if token_file:
        return read_token_file(token_file)
    env = os.environ.get(TOKEN_ENV, "").strip()
    if env:
        try:
            parse_token(env)
        except InvalidSpec:
            raise InvalidSpec(TOKEN_ENV, f"malformed token; {_TOKEN_FORMAT}") from None
        return env
    return None
