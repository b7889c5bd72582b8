"""RQ's job serializer: msgpack, never pickle."""

from __future__ import annotations

from typing import Any

import msgpack


class MsgpackSerializer:
    """Serializes RQ job data (function name, args, kwargs) as msgpack."""

    @staticmethod
    def dumps(obj: Any) -> bytes:
        return msgpack.packb(obj, use_bin_type=True, default=_plain)  # type: ignore[no-any-return]

    @staticmethod
    def loads(data: bytes) -> Any:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)


MSGPACK = MsgpackSerializer()
"""The serializer as an instance, which is what parkway hands RQ: RQ checks its serializer against a
runtime Protocol each time it builds a Job, a Queue or a registry (several times per job), and that
check costs about three times as much for a class as for an instance."""


def _plain(obj: Any) -> Any:
    if isinstance(obj, (tuple, set, frozenset)):
        return list(obj)
    if isinstance(obj, BaseException):
        return repr(obj)
    raise TypeError(f"cannot serialize {type(obj).__name__} into an RQ job")
