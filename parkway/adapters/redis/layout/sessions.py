"""A session's events: its stream and the message records readers join into them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ....runtime.store import StoredEvent
from ... import codec
from .. import keys
from .events import Plan, _xread
from .records import _s

# --- a session's events ------------------------------------------------------------------
#
# A session's stream ``pw:{S}:sev`` holds entries ``t`` (type), ``d`` (msgpack data) and ``i`` (the
# incarnation of the session that wrote it). A ``message.added`` keeps only its message's id
# (``message_reference``): the message's record (``pw:{S}:m``) and its parent (``pw:{S}:up``) hold
# the rest, and readers join them (``with_messages``). Entries written before keep the message's
# fields but its content, and read as they are.


RUN_KEYS = ("runId",)
"""the fields of a session's message record and event data that name a branch run of the session:
stored as the run id past ``<session>--`` (``run_reference``; an id without ``--`` is such a
suffix, one with it is whole, as stored before), read whole (``with_runs``)"""


def run_reference(session_id: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` as a session stores it: each ``RUN_KEYS`` field naming a branch run of ``session_id``
    kept as its id past the session's (the key's hash tag says the rest)."""
    head = keys.tagged_run_id(session_id, "")
    out = dict(data)
    for name in RUN_KEYS:
        value = out.get(name)
        if isinstance(value, str) and value.startswith(head) and len(value) > len(head):
            out[name] = value[len(head):]
    return out


def with_runs(session_id: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` as a session's record or event reads: each ``RUN_KEYS`` field kept as a suffix made
    the whole run id again (``run_reference``)."""
    out = dict(data)
    for name in RUN_KEYS:
        value = out.get(name)
        if isinstance(value, str) and value and keys.CHILD_SEPARATOR not in value:
            out[name] = keys.tagged_run_id(session_id, value)
    return out


def message_reference(message_id: str) -> dict[str, Any]:
    """A ``message.added`` event's data as the session's stream keeps it: the message's id alone."""
    return {"id": message_id}


def session_events_from(rows: Any) -> list[StoredEvent]:
    """A session stream's entries (an XRANGE reply, or one stream's entries of an XREAD) as stored:
    each one's data carries the ``incarnation`` of the session that wrote it ('' for an entry
    without one); a ``message.added`` may be the message's id alone (``with_messages`` joins it)."""
    out = []
    for event_id, fields in rows:
        named = {_s(a): b for a, b in fields.items()}
        eid = _s(event_id)
        data = codec.decode(named["d"], what="event")
        data = {**(data if isinstance(data, dict) else {}), "incarnation": _s(named.get("i", b""))}
        out.append(StoredEvent(eid, _s(named["t"]), int(eid.split("-")[0]), data))
    return out


def _referenced(event: StoredEvent) -> bool:
    """Whether ``event`` is a ``message.added`` kept as its message's id (any other shape reads as stored)."""
    return event.type == "message.added" and "role" not in event.data and isinstance(event.data.get("id"), str)


def with_messages(
    session_id: str,
    events: list[StoredEvent],
    ids: Sequence[str],
    messages: Sequence[bytes | None],
    parents: Sequence[bytes | None],
) -> list[StoredEvent]:
    """``events`` with each ``message.added`` kept as its message's id made whole again: the id, the
    parent (a user's message: it names where it was added; an agent's goes below its run's leaf),
    then the message's fields but its content, as the event was before it kept only the id.
    ``messages``, ``parents``: the records (HMGET of the messages and of ``up``) of ``ids``."""
    found = {i: (m, p) for i, m, p in zip(ids, messages, parents, strict=True)}
    out = []
    for event in events:
        if _referenced(event) and found.get(str(event.data["id"]), (None, None))[0] is not None:
            blob, parent = found[str(event.data["id"])]
            message = codec.decode(blob, what="session message")
            message = with_runs(session_id, message) if isinstance(message, dict) else {}
            head: dict[str, Any] = {"id": event.data["id"]}
            if message.get("role") == "user":
                head["parent"] = _s(parent)
            body = {k: v for k, v in message.items() if k != "content"}
            if "run" in body:  # a message stored before its run was named runId
                body["runId"] = body.pop("run")
            event = replace(event, data=head | body | {"incarnation": event.data.get("incarnation", "")})
        out.append(event)
    return out


def read_session_events(session_id: str, after: str, block_ms: int | None, count: int) -> Plan[list[StoredEvent]]:
    """The session's events after ``after`` (an XRANGE, or with ``block_ms`` an XREAD BLOCK), then,
    when some ``message.added`` kept only its message's id, its message and parent in one more round
    trip (``with_messages``)."""
    stream = keys.session_events(session_id)
    if block_ms is None:
        (rows,) = yield [("XRANGE", stream, f"({after}" if after != "0" else "-", "+", "COUNT", count)]
    else:
        (reply,) = yield [_xread(stream, after, count, block_ms)]
        rows = _entries(reply)
    events = [replace(e, data=with_runs(session_id, e.data)) for e in session_events_from(rows or [])]
    ids = sorted({str(e.data["id"]) for e in events if _referenced(e)})
    if not ids:
        return events
    messages, parents = yield [("HMGET", keys.session_messages(session_id), *ids),
                               ("HMGET", keys.session_up(session_id), *ids)]
    return with_messages(session_id, events, ids, messages, parents)


def _entries(reply: Any) -> list[Any]:
    """The entries of an XREAD reply on one stream (RESP2's list or RESP3's map)."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return list(next(iter(reply.values())))
    return list(reply[0][1])


