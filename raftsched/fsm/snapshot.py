"""The state machine's image: the canonical snapshot, its digests, and the format checks.

A snapshot is every replicated ``(key, value)`` of the store, in key order, in a versioned
:class:`~raftsched.v1.log_pb2.Snapshot` message; the digests hash the same items, so replicas at
the same log index agree on all three byte for byte. A build refuses state written in a newer
format than it reads (:func:`refuse_newer`), whether it comes from its own store, a snapshot
sent by a peer, or a backup: it says which build to run and changes nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable

from raftsched import codec
from raftsched.errors import SnapshotFormatError
from raftsched.fsm import keys
from raftsched.v1 import log_pb2 as pb


def refuse_newer(what: str, fmt: int) -> None:
    """Raise :class:`SnapshotFormatError` if ``fmt`` (the format of ``what``, e.g. ``"snapshot
    format"``) is newer than this build reads."""
    if fmt > codec.SNAPSHOT_FORMAT:
        raise SnapshotFormatError(
            f"{what} {fmt}, newer than this build reads ({codec.SNAPSHOT_FORMAT}): "
            "run a raftsched build that supports it"
        )


def check_snapshot_format(snap: pb.Snapshot) -> None:
    """Raise :class:`SnapshotFormatError` if ``snap`` (or the state stored in it) has a newer
    format than this build reads."""
    refuse_newer("snapshot format", snap.format)
    for entry in snap.entries:
        if entry.key == keys.META:
            refuse_newer("snapshot holds state format", pb.Meta.FromString(entry.value).state_format)


def check_stored_format(get: Callable[[bytes], bytes | None]) -> None:
    """Raise :class:`SnapshotFormatError` if the state that ``get`` reads (a store or a snapshot
    copy about to be installed) was written in a newer state format than this build reads."""
    raw = get(keys.META)
    refuse_newer("the state has format", pb.Meta.FromString(raw).state_format if raw else 0)


def encode(items: Iterable[tuple[bytes, bytes]], fmt: int = codec.SNAPSHOT_FORMAT) -> bytes:
    """The canonical snapshot of ``items`` (every replicated ``(key, value)``, in key order), of
    format ``fmt`` (the state's: a build that reads it can install it)."""
    snap = pb.Snapshot(format=fmt)
    for key, value in items:
        snap.entries.add(key=key, value=value)
    return snap.SerializeToString(deterministic=True)


def digest(items: Iterable[tuple[bytes, bytes]]) -> str:
    """SHA-256 over ``items``, each key and value length-prefixed."""
    h = hashlib.sha256()
    for key, value in items:
        h.update(len(key).to_bytes(4, "big") + key + len(value).to_bytes(4, "big") + value)
    return h.hexdigest()


def content_digest(items: Iterable[tuple[bytes, bytes]]) -> tuple[str, int]:
    """``(digest, accepted)``: :func:`digest` with the apply chain left out of the metadata, and
    the count of accepted commands (see ``SchedulerState.content_digest``)."""
    accepted = 0

    def without_chain() -> Iterable[tuple[bytes, bytes]]:
        nonlocal accepted
        for key, value in items:
            if key == keys.META:
                meta = pb.Meta.FromString(value)
                accepted = meta.applied_commands
                meta.ClearField("chain")
                value = meta.SerializeToString(deterministic=True)
            yield key, value

    return digest(without_chain()), accepted
