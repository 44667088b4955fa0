"""The only module that imports ``lmdb``: how raftsched opens an LMDB environment, and its limits.

Both LMDB users (the node's state store, :mod:`raftsched.storage.lmdb_store`, and the executor's
execution log, :mod:`raftsched.storage.lmdb_execlog`) open their environments here, so the
options that matter (file mode, fsync policy, the key-size check, freeing stale reader slots)
are chosen once. Environments, transactions and cursors are returned as ``Any``: py-lmdb ships
no type information.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import lmdb

# Every LMDB failure (MapFullError, a corrupt file, a bad option...) is a subclass of this.
Error = lmdb.Error

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
