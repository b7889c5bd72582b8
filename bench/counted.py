"""Count redis-py round trips by owner, in this process or in a worker started through it.

A round trip is one ``send_packed_command`` call: one command, or one whole pipeline
(its reply is read before the next send). It belongs to parkway when what it sends
names a ``pw:`` key, to RQ when it names an ``rq:`` key, and is "other" otherwise
(health-check PINGs, SCRIPT EXISTS/LOAD, CLIENT SETNAME, ...).

``python -m bench.counted OUT.json MODULE [ARGS...]`` installs the counter, then runs
``MODULE`` as ``__main__`` with ARGS (e.g. ``parkway.cli worker --redis-url URL``).
SIGUSR2 (unused by RQ) writes the counts so far to OUT.json; so does a normal exit.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import signal
import sys
from collections import Counter
from typing import Any

COUNTS: Counter[str] = Counter()
_installed = False


def owner(packed: Any) -> str:
    data = (
        packed
        if isinstance(packed, bytes | bytearray)
        else b"".join(p if isinstance(p, bytes | bytearray) else bytes(p) for p in packed)
    )
    if b"pw:" in data:
        return "parkway"
    if b"rq:" in data:
        return "rq"
    return "other"


def install() -> None:
    global _installed
    if _installed:
        return
    from redis.connection import AbstractConnection

    original = AbstractConnection.send_packed_command

    def counting(self: Any, command: Any, check_health: bool = True) -> Any:
        COUNTS[owner(command)] += 1
        return original(self, command, check_health)

    AbstractConnection.send_packed_command = counting  # type: ignore[method-assign]
    _installed = True


def snapshot() -> dict[str, int]:
    return dict(COUNTS)


def main() -> None:
    out, module, args = sys.argv[1], sys.argv[2], sys.argv[3:]

    def dump(*_: Any) -> None:
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(snapshot(), f)
        os.replace(tmp, out)

    install()
    signal.signal(signal.SIGUSR2, dump)
    atexit.register(dump)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
