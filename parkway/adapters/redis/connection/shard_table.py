"""The bucket -> shard table each shard stores, and the checks every process makes of it at connect
(see :mod:`.shards`): kept apart so that a process with one Redis URL checks it without importing the
router."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from ....runtime.errors import ConfigError
from .. import keys
from .errors import translated


def table_digest(table: Sequence[int]) -> str:
    return hashlib.sha256(bytes(str(list(table)), "ascii")).hexdigest()[:16]


def check_table(client: Any, index: int, table: Sequence[int]) -> None:
    """Write (first process) or check (every other) that this Redis is shard ``index`` of ``table``;
    ConfigError when it holds another table, or another place in it, or holds runs but no table
    (it served parkway alone: the runs whose bucket names another shard would be looked for there)."""
    mine = f"{index} {max(table) + 1} {table_digest(table)}"
    with translated():
        held = client.get(keys.shard_table())
        if held is None and client.exists(keys.runs(), keys.bucket_directory(keys.runs())):
            raise ConfigError(
                f"shard {index} holds runs but no shard table: it served parkway without PARKWAY_SHARDS, and the "
                "runs whose bucket names another shard would be looked for there; moving runs between shards is a "
                "migration, not a change of the variable (start the shards on Redis servers of their own)"
            )
        if held is None:
            client.set(keys.shard_table(), mine, nx=True)
            held = client.get(keys.shard_table())
    held = held.decode() if isinstance(held, bytes) else held
    if held != mine:
        raise ConfigError(
            f"shard {index} holds the shard table {held!r}, this process has {mine!r} (shard, shards, table): "
            "PARKWAY_SHARDS must list the same servers in the same order everywhere; adding a shard moves buckets "
            "and is a migration, not a change of the variable"
        )


def check_alone(client: Any, shard: int | None) -> None:
    """A process with one Redis URL: ConfigError when that Redis is one of several shards (a run it
    started would be placed there whatever its bucket), unless the process serves that shard
    (``shard``: ``parkway worker --shard K``, which checked the whole table first)."""
    with translated():
        held = client.get(keys.shard_table())
    if held is None:
        return
    index, count, _ = (held.decode() if isinstance(held, bytes) else held).split(" ", 2)
    if int(count) > 1 and (shard is None or int(index) != shard):
        raise ConfigError(
            f"this Redis is shard {index} of {count} (PARKWAY_SHARDS): a process given it alone would place runs "
            "where the others do not look for them; set PARKWAY_SHARDS to the deployment's shards (a worker: "
            "with --shard K)"
        )
