"""The store checksum's pair hash: ``content_hash`` and the copy ``LmdbStore.put`` inlines feed a
cached hasher piece by piece; both must give the one-shot BLAKE2b of the concatenation, on every
key length and across BLAKE2b's 128-byte block boundaries (a stored checksum from an older build
must still match)."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from raftsched.storage.lmdb_env import MAX_KEY
from raftsched.storage.lmdb_store import LmdbStore, content_hash

MASK = (1 << 128) - 1


def one_shot(key: bytes, value: bytes) -> int:
    """The definition: 128-bit BLAKE2b of len(key) (2 bytes, big-endian), key, value."""
    data = len(key).to_bytes(2, "big") + key + value
    return int.from_bytes(hashlib.blake2b(data, digest_size=16).digest(), "big")


# Values around BLAKE2b's block (128 bytes) and the 2-block buffer of its implementations.
VALUE_SIZES = (0, 1, 2, 60, 95, 96, 97, 125, 126, 127, 128, 129, 200, 253, 254, 255, 256, 257, 383, 384, 1000)


def test_content_hash_is_the_one_shot_hash_on_varied_input() -> None:
    rng = random.Random(31)
    key_sizes = [0, 1, 2, 3, 16, 30, 63, 64, 126, 127, 128, 129, 255, 256, 300, MAX_KEY - 1, MAX_KEY]
    key_sizes += [MAX_KEY + 1, 600]  # not storable keys: the one-shot fallback, still the same value
    for ks in key_sizes:
        for vs in VALUE_SIZES:
            key, value = rng.randbytes(ks), rng.randbytes(vs)
            assert content_hash(key, value) == one_shot(key, value), (ks, vs)
    for _ in range(2000):
        key, value = rng.randbytes(rng.randint(1, MAX_KEY)), rng.randbytes(rng.randint(0, 700))
        assert content_hash(key, value) == one_shot(key, value)


def test_content_hash_values_are_pinned() -> None:
    # Values stored checksums hold: a change of the hash would fail every older store's verify.
    assert content_hash(b"k", b"") == 0x6C6C07556E0457B92E95CEE48C077699
    assert content_hash(b"r/hot-0000001\x00", b"x" * 200) == 0x9A0368DA79661CDDB1135BC5EB35F705


def test_the_cached_prefix_is_not_consumed_by_use() -> None:
    key, value = b"k" * 40, b"v" * 150
    first = content_hash(key, value)
    for i in range(50):  # the same key length, other content, between the two
        content_hash(b"%040d" % i, b"w" * i)
    assert content_hash(key, value) == first == one_shot(key, value)


def test_put_keeps_the_checksum_of_the_one_shot_hashes(tmp_path: Path) -> None:
    """Puts (new keys and replacements, every key length, values across block boundaries) and
    deletes: the running checksum is the sum of the one-shot hashes of what is stored, equal to
    the one a full scan finds (verify) and to a store filled at once (replace_all)."""
    rng = random.Random(19)
    a = LmdbStore(tmp_path / "a", map_size=64 << 20, replicated_below=b"~")
    b = LmdbStore(tmp_path / "b", map_size=64 << 20, replicated_below=b"~")
    try:
        content: dict[bytes, bytes] = {}
        keys = [b"k" + rng.randbytes(rng.randint(0, MAX_KEY - 1)) for _ in range(300)]
        for step in range(1500):
            key = rng.choice(keys)
            if step % 7 == 3:
                a.delete(key)
                content.pop(key, None)
                continue
            value = rng.randbytes(rng.choice((*VALUE_SIZES, rng.randint(0, 600))))
            a.put(key, value)
            content[key] = value
        a.put(b"~local", b"not summed")
        expected = sum(one_shot(k, v) for k, v in content.items()) & MASK
        assert a.content_sum() == expected
        a.commit(1)
        assert a.verify().checksum == expected
        b.replace_all(iter(sorted(content.items())), 1)
        assert b.content_sum() == expected
        with a.reader() as ra, b.reader() as rb:
            assert list(ra.scan(b"", b"~")) == list(rb.scan(b"", b"~")) == sorted(content.items())
    finally:
        a.close()
        b.close()
