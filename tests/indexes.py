"""What a test reads of a lex index (``keys.index``, ``keys.filter_index``, ``keys.runs``) in both its
forms: the single zset written before format 4 and its buckets (``ix_add`` in _common.lua)."""

from __future__ import annotations

from typing import Any

from parkway.adapters.redis import keys


def members(r: Any, index: str) -> list[bytes]:
    """Every member of ``index``, in lex order, whichever form holds it."""
    found = list(r.zrange(index, 0, -1))
    for entry in r.zrange(keys.bucket_directory(index), 0, -1):
        found += r.zrange(keys.bucket(index, entry.rsplit(b"\0", 1)[1].decode()), 0, -1)
    return sorted(found)


def count(r: Any, index: str) -> int:
    return len(members(r, index))


def buckets(r: Any, index: str) -> list[str]:
    """The keys of ``index``'s buckets, in the directory's order."""
    return [keys.bucket(index, e.rsplit(b"\0", 1)[1].decode()) for e in r.zrange(keys.bucket_directory(index), 0, -1)]


def indexes(r: Any, pattern: str = "pw:ix:*") -> set[str]:
    """The indexes holding members among the keys matching ``pattern`` (a bucket's key named by its index)."""
    return {k.decode().split("/", 1)[0] for k in r.keys(pattern) if r.type(k) == b"zset"}
