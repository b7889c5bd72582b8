"""One Lua call for a batch of RQ's bookkeeping commands, instead of a MULTI/EXEC transaction.

redis-py sends a transaction's commands in one round trip but parses a reply for each of
them (``QUEUED``, then every result): for RQ's 10-16 command start and finish transactions
that is most of their client CPU. ``AtomicBatch`` collects the same commands, made by RQ's
own code, and runs them in one script call whose single reply is parsed once. Like
MULTI/EXEC, the batch runs atomically and a failing command does not stop the others; the
first error is raised after all ran. The commands' own replies are not returned (RQ does
not read them on the paths parkway's worker batches).

The script touches keys it is not given as KEYS, as RQ's transactions do on a single
Redis; neither is Redis-Cluster safe.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgpack
import redis
from redis.client import Pipeline

_SCRIPT = """
local commands = cmsgpack.unpack(ARGV[1])
local failed = nil
for i, command in ipairs(commands) do
  local reply = redis.pcall(unpack(command))
  if failed == nil and type(reply) == 'table' and reply.err then
    failed = 'command ' .. i .. ' (' .. command[1] .. '): ' .. reply.err
  end
end
if failed then return redis.error_reply(failed) end
return #commands
"""
_SCRIPT_SHA = hashlib.sha1(_SCRIPT.encode()).hexdigest()


class AtomicBatch(Pipeline):
    """A pipeline whose ``execute`` runs the queued commands as one atomic script call.

    ``also`` commands (``execute_also``) go after the script in the same round trip, outside
    the batch, and their replies are returned: parkway's ``begin`` rides along this way.
    """

    def __init__(self, client: redis.Redis) -> None:
        super().__init__(client.connection_pool, client.response_callbacks, transaction=False, shard_hint=None)
        self._client = client
        self._script = _script(client)
        self._encoder: Any = client.connection_pool.get_encoder()
        self._also: list[tuple[Any, ...]] = []

    def execute_also(self, *args: Any) -> None:
        self._also.append(args)

    def _arg(self, value: Any) -> Any:
        """A command argument as Redis gets it: str and bytes as they are (msgpack carries both
        as strings), numbers as redis-py writes them, anything else through redis-py's encoder."""
        kind = type(value)
        if kind is str or kind is bytes:
            return value
        if kind is int:
            return str(value)
        if kind is float:
            return repr(value)
        return self._encoder.encode(value)

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        arg = self._arg
        packed = msgpack.packb([[arg(a) for a in args] for args, _ in self.command_stack], use_bin_type=False)
        also = self._also
        self.command_stack, self._also = [], []
        if not also:
            self._script(args=[packed], client=self._client)
            return []
        with self._client.pipeline(transaction=False) as pipe:
            pipe.execute_command("EVALSHA", self._script.sha, 0, packed)  # type: ignore[no-untyped-call]
            for args in also:
                pipe.execute_command(*args)  # type: ignore[no-untyped-call]
            replies = pipe.execute(raise_on_error=False)
        if isinstance(replies[0], redis.exceptions.NoScriptError):  # first use, or after SCRIPT FLUSH
            self._script(args=[packed], client=self._client)
        elif isinstance(replies[0], Exception):
            raise replies[0]
        return list(replies[1:])


_scripts: dict[int, Any] = {}


def _script(client: redis.Redis) -> Any:
    key = id(client)
    if key not in _scripts:
        _scripts[key] = client.register_script(_SCRIPT)
    return _scripts[key]
