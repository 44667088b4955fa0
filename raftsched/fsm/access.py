"""Replicated access control: tokens (their hashed secrets and grants) and the audit log.

Pure like the rest of the state machine: time is the command's leader-stamped ``now``; nothing
here reads a clock, draws randomness or raises for bad input (rejections are
:class:`raftsched.errors.RaftschedError` values the caller turns into a result).

* ``CreateToken`` stores a :class:`TokenRecord` under ``k/<id>``; its ``created_ms`` (and
  ``expires_ms`` from ``ttl_ms``) come from ``now``. A second token with the same id is refused.
* ``RevokeToken`` marks the record revoked (kept, so the id is never reused and ``token list``
  shows it).
* Every accepted command that carries an :class:`AuditStamp` leaves an :class:`AuditRecord`
  under ``u/<at>/<seq>``; records older than the retention are pruned a few per command.
"""

from __future__ import annotations

from typing import Any

from raftsched import bounds
from raftsched.abc import StateStore
from raftsched.errors import AlreadyExists, InvalidSpec, NotFound
from raftsched.fsm import keys
from raftsched.v1 import log_pb2 as pb

__all__ = ["TokenBook", "audit_records", "prune_audit", "record_audit"]

ROLES = ("admin", "maintainer", "viewer", "executor")
MAX_DESCRIPTION = 256
MAX_NAMESPACES = 64
MIN_SCRYPT_N = 2**10


class TokenBook:
    """The token records, in memory (they are few) and in the store."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.tokens: dict[str, pb.TokenRecord] = {}

    def load(self) -> None:
        self.tokens.clear()
        for _, value in self.store.scan(keys.TOKEN, keys.TOKEN + keys.END):
            rec = pb.TokenRecord()
            rec.ParseFromString(value)
            self.tokens[rec.info.id] = rec

    def get(self, token_id: str) -> pb.TokenRecord | None:
        """The record of ``token_id`` (any thread: one dict read)."""
        return self.tokens.get(token_id)

    def records(self) -> list[pb.TokenRecord]:
        """Every token record, by id (any thread: the keys are copied in one C call, and a record
        is replaced, never changed in place)."""
        tokens = self.tokens
        return [rec for tid in sorted(tokens) if (rec := tokens.get(tid)) is not None]

    def create(self, body: pb.CreateToken, now: int) -> pb.CommandResult:
        info = body.info
        if len(info.id) != 16 or any(c not in "0123456789abcdef" for c in info.id):
            raise InvalidSpec("token.id", "expected 16 lowercase hex digits")
        if info.id in self.tokens:
            raise AlreadyExists(f"token {info.id} exists already")
        if info.role not in ROLES:
            raise InvalidSpec("token.role", f"{info.role!r} is not one of {', '.join(ROLES)}")
        if len(info.namespaces) > MAX_NAMESPACES or any(not 0 < len(n) <= 128 for n in info.namespaces):
            raise InvalidSpec("token.namespaces", f"at most {MAX_NAMESPACES}, each 1-128 characters")
        if len(info.description) > MAX_DESCRIPTION:
            raise InvalidSpec("token.description", f"at most {MAX_DESCRIPTION} characters")
        if len(body.salt) < 16 or len(body.hash) < 16:
            raise InvalidSpec("token.hash", "a salt and hash of at least 16 bytes are required")
        if body.scrypt_n < MIN_SCRYPT_N or body.scrypt_r < 1 or body.scrypt_p < 1:
            raise InvalidSpec("token.scrypt", f"n >= {MIN_SCRYPT_N}, r >= 1 and p >= 1 are required")
        if not 0 <= body.ttl_ms <= bounds.MAX_TTL_MS:
            raise InvalidSpec("token.ttl_ms", f"{body.ttl_ms} out of range ({bounds.TTL.text()})")
        # The expiry is a time: now + ttl must stay in the time range (and its int64 field).
        expires = (
            bounds.check_sum("token.ttl_ms", now, body.ttl_ms, bounds.TIME, "expiry") if body.ttl_ms else 0
        )
        rec = pb.TokenRecord(
            salt=body.salt,
            hash=body.hash,
            scrypt_n=body.scrypt_n,
            scrypt_r=body.scrypt_r,
            scrypt_p=body.scrypt_p,
        )
        rec.info.CopyFrom(info)
        rec.info.created_ms = now
        rec.info.expires_ms = expires
        rec.info.revoked = False
        rec.info.revoked_ms = 0
        rec.info.last_used_ms = 0
        self._put(rec)
        return pb.CommandResult(ok=True, token=rec.info)

    def revoke(self, body: pb.RevokeToken, now: int) -> pb.CommandResult:
        rec = self.tokens.get(body.id)
        if rec is None:
            raise NotFound(f"token {body.id!r} does not exist")
        if not rec.info.revoked:
            # Copy first: readers on other threads hold the old record and must see it whole.
            new = pb.TokenRecord()
            new.CopyFrom(rec)
            new.info.revoked = True
            new.info.revoked_ms = now
            self._put(new)
            rec = new
        return pb.CommandResult(ok=True, token=rec.info)

    def _put(self, rec: pb.TokenRecord) -> None:
        self.store.put(keys.token_key(rec.info.id), rec.SerializeToString(deterministic=True))
        self.tokens[rec.info.id] = rec


def record_audit(store: StateStore, stamp: pb.AuditStamp, now: int, seq: int) -> None:
    """Keep one audit record for an accepted write."""
    rec = pb.AuditRecord(at_ms=now, principal=stamp.principal, rpc=stamp.rpc, target=stamp.target, seq=seq)
    store.put(keys.audit_key(now, seq), rec.SerializeToString(deterministic=True))


def prune_audit(store: StateStore, horizon_ms: int, step: int) -> None:
    """Delete at most ``step`` audit records older than ``horizon_ms``."""
    if horizon_ms <= 0:
        return
    end = keys.AUDIT + f"{horizon_ms:016x}".encode()
    for k, _ in store.scan(keys.AUDIT, end, limit=step):
        store.delete(k)


def audit_records(reader: Any, since_ms: int, principal: str, limit: int) -> list[pb.AuditRecord]:
    """Audit records at or after ``since_ms`` (of ``principal`` if given), newest first, at most
    ``limit``; ``reader`` is a committed-store reader (``store.reader()``)."""
    out: list[pb.AuditRecord] = []
    for _, value in reader.scan(keys.audit_key(max(since_ms, 0), 0), keys.AUDIT + keys.END, reverse=True):
        rec = pb.AuditRecord.FromString(value)
        if principal and rec.principal != principal:
            continue
        out.append(rec)
        if len(out) >= limit:
            break
    return out
