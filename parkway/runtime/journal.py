"""The names of an activation's journal fields: where each hook records what it did.

An activation's journal (``Attempt.journal``, the Redis hash ``pw:{R}:j:<step>``) maps a field name
to a :class:`~parkway.runtime.store.JournalEntry`. The name is how a replay finds a hook's record
again, so it is the hook's identity: its prefix says which hook, the rest the id the node gave it
(or the call's position, for a hook called without one). The names are made here and nowhere else.

==========  =====================================================================
field       recorded by
==========  =====================================================================
``@<n>``    a hook called without an id: its position in the attempt (0, 1, ...)
``i:<id>``  ``use_interrupt(id=)`` (the answer); a session's hooks name theirs
            ``i:tool:<call>``, ``i:defer:<call>``, ``i:results:<call>``, ``i:policy:...``
``w:<id>``  ``use_workflow`` and each child of ``use_workflows`` (``<id>.<i>``): the child's outcome
``c:<id>``  the same child when it started: what the parent asked for (its workflow, a hash of its input)
``x:<id>``  ``use_first(child=)``: the loser's end (the interrupt closed, or the child cancelled)
``n:<key>`` ``use_node_state(key=)``
``s:<id>``  ``use_step`` (and ``use_stable_id``, ``use_now``: ``s:id:<id>``, ``s:now:<id>``)
``g:<seq>`` a trigger delivered to a session's branch run (written by ``session_clear.lua``)
``r:<n>``   the executor: the ``n``-th attempt of the activation failed and was retried (its error)
``m:<id>``  a session's model call; ``a:<id>`` a message; ``t:<id>`` a tool call
==========  =====================================================================

These letters name journal fields only: the run's hash and summary use some of the same letters
for their own fields (``parkway.adapters.redis.layout``), in other hashes.
"""

from __future__ import annotations

POSITION = "@"
INTERRUPT = "i:"
CHILD = "w:"
CHILD_ASKED = "c:"
RACE = "x:"
NODE_STATE = "n:"
STEP = "s:"
TRIGGER = "g:"
MODEL_CALL = "m:"
MESSAGE = "a:"
TOOL_CALL = "t:"
RETRY = "r:"


def retry(attempt: int) -> str:
    """The field recording that attempt ``attempt`` (from 1) of an activation failed and was retried."""
    return f"{RETRY}{attempt}"


def position(n: int) -> str:
    """The field of the ``n``-th hook (from 0) of an attempt called without an id."""
    return f"{POSITION}{n}"


def interrupt(name: str) -> str:
    """The field of ``use_interrupt(id=name)``'s answer."""
    return INTERRUPT + name


def interrupt_name(field: str) -> str:
    """The ``id=`` of the interrupt answered at ``field`` ("" for one matched by call order)."""
    return field.removeprefix(INTERRUPT) if field.startswith(INTERRUPT) else ""


def child(name: str) -> str:
    """The field of child ``name``'s outcome in its parent's journal."""
    return CHILD + name


def child_name(field: str) -> str:
    """The child's name from the field of its outcome (``child``)."""
    return field.removeprefix(CHILD)


def child_asked(name: str) -> str:
    """The field recording what the parent asked of child ``name`` when it started."""
    return CHILD_ASKED + name


def race(name: str) -> str:
    """The field recording the end of the loser of ``use_first``'s race with child ``name``."""
    return RACE + name


def node_state(key: str) -> str:
    return NODE_STATE + key


def model_call(call_id: str) -> str:
    return MODEL_CALL + call_id


def message(message_id: str) -> str:
    return MESSAGE + message_id


def tool_call(call_id: str) -> str:
    return TOOL_CALL + call_id


def step(name: str) -> str:
    return STEP + name


def trigger_seq(field: str) -> int | None:
    """The sequence number of the trigger recorded at ``field`` (None: not a trigger's field)."""
    seq = field.removeprefix(TRIGGER)
    return int(seq) if field.startswith(TRIGGER) and seq.isdigit() else None
