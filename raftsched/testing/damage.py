"""Damage a node's state store on purpose, for the tests and benchmarks of damaged stores."""

from __future__ import annotations

import random
from pathlib import Path

from raftsched.errors import StoreDamaged
from raftsched.storage.lmdb_store import LmdbStore

PAGE = 4096  # LMDB's page size here


def damage_store(data_dir: Path, seed: int) -> None:
    """Overwrite 16 KiB in the middle of the pages the store uses, moving on until the damage
    lands on pages in use (noise on free pages harms nothing and is not found)."""
    path = data_dir / "state" / "data.mdb"
    with LmdbStore(data_dir) as store:
        used = store.stats()["map_used_bytes"] // PAGE
    rng = random.Random(seed)
    for page in range(max(2, used // 2), used, 4):
        with open(path, "r+b") as f:
            f.seek(page * PAGE)
            f.write(rng.randbytes(4 * PAGE))
        try:
            with LmdbStore(data_dir) as store:
                store.verify()
        except StoreDamaged:
            return
    raise RuntimeError(f"no damage found in {path}")
