"""The only module that imports ``lmdb``: how raftsched opens an LMDB environment, and its limits.

Both LMDB users (the node's state store, :mod:`raftsched.storage.lmdb_store`, and the executor's
execution log, :mod:`raftsched.storage.lmdb_execlog`) open their environments here, so the
options that matter (file mode, fsync policy, the key-size check, freeing stale reader slots)
are chosen once. Environments, transactions and cursors are returned as ``Any``: py-lmdb ships
no type information.
"""

from __future__ import annotations

import logging
import struct
import time
from pathlib import Path
from typing import Any, NamedTuple

import lmdb

# Every LMDB failure (MapFullError, a corrupt file, a bad option...) is a subclass of this.
Error = lmdb.Error
# The failures that mean the file itself is damaged (not full, not a bad call).
DAMAGE: tuple[type[Exception], ...] = (
    lmdb.CorruptedError,
    lmdb.PageNotFoundError,
    lmdb.InvalidError,
    lmdb.PanicError,
    lmdb.VersionMismatchError,
)

MAX_KEY = 511  # env.max_key_size() of the bundled LMDB 0.9; checked when an env opens
INDEX = struct.Struct(">Q")  # big-endian, so packed integers sort numerically as keys


def valid_key(key: bytes) -> bool:
    """Whether LMDB can store ``key`` (1 to :data:`MAX_KEY` bytes)."""
    return 0 < len(key) <= MAX_KEY


def open_env(path: Path, *, map_size: int, max_dbs: int, sync: bool) -> Any:
    """Open (creating if needed) the read-write environment in directory ``path``.

    Files are private to the owner (mode 0600). ``sync`` fsyncs every commit, data and meta
    pages; without it commits stay atomic and survive a killed process but not a host crash.
    Reader slots left behind by a killed process are freed. Raises :class:`RuntimeError` if the
    LMDB library's key-size limit is not :data:`MAX_KEY` (the key checks rely on it), and
    :data:`Error` if LMDB cannot open the files.
    """
    env = lmdb.open(
        str(path), map_size=map_size, subdir=True, max_dbs=max_dbs, sync=sync, metasync=sync, mode=0o600
    )
    try:
        if env.max_key_size() != MAX_KEY:
            raise RuntimeError(f"unexpected LMDB max key size {env.max_key_size()}")
        env.reader_check()  # free reader slots left by a killed process
    except BaseException:
        env.close()
        raise
    return env


def open_readonly(path: Path, *, map_size: int, max_dbs: int) -> Any:
    """Open the environment in ``path`` read-only and without a lock file (to validate a copy
    nobody else uses). Raises :data:`Error` if it is not a readable LMDB environment."""
    return lmdb.open(str(path), map_size=map_size, readonly=True, lock=False, subdir=True, max_dbs=max_dbs)


USAGE_WARN_FRACTION = 0.8
USAGE_WARN_EVERY_S = 60.0  # the warning is repeated at most this often


class StoreUsage(NamedTuple):
    """How full an environment's map is: ``used_bytes`` of ``map_bytes`` (LMDB never shrinks it)."""

    used_bytes: int
    map_bytes: int

    @property
    def fraction(self) -> float:
        return self.used_bytes / self.map_bytes if self.map_bytes else 0.0


def usage(env: Any) -> StoreUsage:
    """Bytes in use (pages up to the highest one in use) and the map size of ``env``."""
    info = env.info()
    page: int = env.stat()["psize"]
    return StoreUsage((info["last_pgno"] + 1) * page, info["map_size"])  # pages count from 0


class UsageAlarm:
    """Logs a warning when a map passes :data:`USAGE_WARN_FRACTION`, at most once a minute."""

    def __init__(self, what: str, key: str, logger: logging.Logger) -> None:
        self._what = what  # e.g. "LMDB store /data/n1/state"
        self._key = key  # the setting that raises the limit
        self._log = logger
        self._next = 0.0

    def check(self, current: StoreUsage) -> None:
        now = time.monotonic()
        if current.fraction >= USAGE_WARN_FRACTION and now >= self._next:
            self._next = now + USAGE_WARN_EVERY_S
            self._log.warning(
                "%s is %.0f%% full (%d of %d bytes); raise %s (or free disk) before it fills",
                self._what,
                current.fraction * 100,
                current.used_bytes,
                current.map_bytes,
                self._key,
            )
