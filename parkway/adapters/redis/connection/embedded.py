"""The in-process Redis of embedded mode: fakeredis, running parkway's own Lua through lupa.

Embedded mode runs the Redis store and RQ's worker unchanged on this server, so every
way fakeredis differs from Redis that parkway meets is named here, with what parkway
does about it (``tests/test_embedded.py`` checks each, and fails on a fakeredis that
changes it):

- **No INFO.** RQ asks for the server version to choose its dequeue command, gets an
  error, and takes its own fallback for servers before 6.2: BLPOP. That is what parkway
  needs, because fakeredis's **BLMOVE does not block** (on an empty list it answers
  None at once, which would turn an idle worker into a busy loop); BLPOP blocks across
  threads and is woken by a push from a Lua script or a MULTI. The price is RQ's
  intermediate list, which BLPOP does not fill: a job is popped from the queue outright.
  In one process that loses nothing (a job and its worker die together).
- **XREAD BLOCK on nothing new** answers an empty list rather than nil; the store reads
  both as "no events".

What parkway relies on and fakeredis does as Redis does is checked there too: BLPOP and
XREAD BLOCK block across threads and wake on a script's write, and an XREAD BLOCK sent in
a pipeline holds back the commands behind it until it returns (a waiting
``list_interrupts`` sends its wait and its listing in one round trip).
"""

from __future__ import annotations

import fakeredis


def server() -> fakeredis.FakeServer:
    """A new, empty in-process Redis."""
    return fakeredis.FakeServer()


def client(on: fakeredis.FakeServer) -> fakeredis.FakeRedis:
    """A client of ``on``; clients of one server, in any thread, see the same data."""
    return fakeredis.FakeRedis(server=on)
