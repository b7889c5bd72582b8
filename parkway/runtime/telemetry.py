"""Interrupt lifecycle telemetry: what each interrupt's record keeps, and what capture lets into it.

Every interrupt keeps a lifecycle record in its run's summary, so it outlives the run's records by
the retention of run summaries (``parkway.adapters.redis.keys``): when it was created, how it
presents (``static-options``, ``dynamic-picker``, ``freeform``, ``contract``) and how many options
the server embedded, its contract's identity, the answers refused while it was open, and how it
ended (``resumed``, ``resume_failed``, ``cancelled``, ``expired``) with when, the wait and who.
Each part is written by the script of the transition it records (resume, cancel and expire write
the first part, ``created``, together with the end: while the interrupt is open its run's record
says the same, so a parked run does not pay for it twice; refuse and finish write theirs); the
parts are built here, as plain dicts, so what capture leaves out is decided in one place. An open
interrupt's record is read from its run's record, and one whose run's records vanish without an
end (the reconciler down past the expiry grace) keeps none.

Capture (``capture_content``, per workflow or per ``use_interrupt``) says which application content
the record may hold: ``"input"`` the request (question, options, payload), ``"output"`` the answer
(and the texts that can quote it: a cancellation's reason, a refusal's message, the error of a
failed replay; without it they are recorded by their type only). With neither, the record holds
the lifecycle and the contract's identity and no application content. Capture governs this record
only: the run's journal keeps the answer (the replay needs it) and the run's record keeps the open
request (a resume is validated against it) for the run's TTL, as they always do.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from . import kinds
from .errors import ValidationError
from .protocol import ID_PATTERN, TENANT_SEPARATOR, InterruptRequest
from .store import InterruptRecord

CAPTURE_KINDS = ("input", "output")
CLOSED_STATUSES = ("resolved", "cancelled", "expired")
"""how an interrupt can end (its status after pending)"""
DEFAULT_CAPTURE: tuple[str, ...] = CAPTURE_KINDS
"""capture both, unless a workflow or an interrupt says otherwise"""
MAX_REASON = 500
"""longest reason a lifecycle record keeps (longer ones are cut)"""


def check_capture(value: object, what: str = "capture_content") -> tuple[str, ...]:
    """``value`` as a capture setting: an iterable of ``"input"`` and ``"output"`` (none = capture
    nothing). A lone string is refused: ``("input",)`` is meant, and ``"input"`` would be its letters."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ValidationError(f"{what} must be a tuple of 'input' and/or 'output' (or () for none), not {value!r}")
    kinds = tuple(value)
    unknown = [k for k in kinds if k not in CAPTURE_KINDS]
    if unknown:
        raise ValidationError(f"{what} takes 'input' and 'output' only, not {unknown!r}")
    return tuple(k for k in CAPTURE_KINDS if k in kinds)


def presentation(public_request: Mapping[str, Any]) -> str:
    """How a client shows an interrupt: ``static-options`` (the options are embedded),
    ``dynamic-picker`` (a schema id, the client resolves the options), ``freeform`` (text) or
    ``contract`` (a typed request and response)."""
    found = kinds.find(public_request.get("kind"))
    if found is not None:
        return found.presentation(public_request)
    return "static-options" if public_request.get("options") else "dynamic-picker"  # (a record that kept none)


def public_request(request: InterruptRequest | None) -> dict[str, Any]:
    """An interrupt record's request as clients see it ({} for a record that kept none)."""
    return request.public() if request is not None else {}


def created(record: InterruptRecord, *, with_request: bool = True) -> dict[str, Any]:
    """The record's first part: where and when, presentation, option count, contract identity,
    capture, and (``with_request``) the request as clients see it, only if ``input`` is captured
    (``record.capture``); without ``with_request`` (an open interrupt, whose request is its
    record's) it is left out. The record's request was validated where it was read."""
    capture, request = record.capture, record.request
    out: dict[str, Any] = {
        "k": presentation({"kind": request.kind, "options": request.options} if request is not None else {}),
        "o": len(request.options) if request is not None else 0,
        "c": record.created_at,
        "x": record.expires_at,
        "n": record.node,
        "s": record.step,
        "cap": list(capture),
    }
    for key, value in (("rr", record.root_run_id), ("pr", record.parent_run_id), ("v", record.version)):
        if value is not None:
            out[key] = value
    if request is not None and request.schema_id is not None:
        out["sid"] = request.schema_id
    if request is not None and request.schema_version is not None:
        out["sv"] = request.schema_version
    if with_request and "input" in capture and request is not None:
        out["q"] = request.public()
    return out


def ended(
    outcome: str,
    at: int,
    created_at: int,
    capture: tuple[str, ...],
    *,
    responder: str | None = None,
    reason: str | None = None,
    answer: Any = None,
    reason_is_content: bool = True,
) -> dict[str, Any]:
    """How the interrupt ended (resume, cancel, expire): the outcome, when, the wait from its
    creation, who; the answer and the reason only if ``output`` is captured (a reason that is not
    application content, say the expiry policy applied, always)."""
    out: dict[str, Any] = {"o": outcome, "t": at, "w": max(0, at - created_at)}
    if responder is not None:
        out["r"] = responder
    if reason is not None and ("output" in capture or not reason_is_content):
        out["why"] = reason[:MAX_REASON]
    if answer is not None and "output" in capture:
        out["a"] = answer
    return out


def failure(at: int, kind: str, message: str, capture: tuple[str, ...]) -> dict[str, Any]:
    """A refused answer (refuse) or a replay that failed the run (finish): when and why. The message
    can quote the answer, so without ``output`` captured the reason is the error's type only."""
    return {"t": at, "why": (message if "output" in capture else kind)[:MAX_REASON]}


_MINTED = re.compile(r"i([0-9a-z]{1,13})_([0-9a-z]{5,8})_(.+)")
"""``i<fence>_<nonce>_<run id>``: an interrupt id parkway minted, carrying its run's id"""
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
MIN_NONCE, MAX_NONCE = 5, 8
"""random base-36 characters a minted request id carries (as many as fit in 64, at least 5)"""


def _base36(n: int) -> str:
    out = ""
    while True:
        n, d = divmod(n, 36)
        out = _DIGITS[d] + out
        if n == 0:
            return out


def mint_request_id(run_id: str, fence: int, fallback: str) -> str:
    """The request id a pause parks under: ``i<fence, base 36>_<nonce>_<run id>``, or ``fallback``
    when that would not fit in an id (each part of it, before and after a tenant's run id's ``~``,
    is at most 64 characters: a long child run id).

    The run id can be read back from it, so ``get_interrupt`` needs no lookup. The fence makes it
    unique within the run (each pause commits at a fence of its own). The nonce (5 to 8 random
    base-36 characters, as many as fit) makes it differ from the ids of an earlier run of the same
    id (run ids may be chosen, and reused once the earlier run's summary is gone): a token is signed
    over the run and request ids, so an old run's token must not name a new run's interrupt."""
    head = f"i{_base36(fence)}_"
    scope, sep, _ = run_id.rpartition(TENANT_SEPARATOR)
    first = scope if sep else run_id  # the part of the request id before its '~', if the run id has one
    room = min(MAX_NONCE, 64 - len(head) - 1 - len(first))
    if room < MIN_NONCE:
        return fallback
    nonce = "".join(_DIGITS[b % 36] for b in os.urandom(room))
    minted = f"{head}{nonce}_{run_id}"
    return minted if ID_PATTERN.fullmatch(minted) else fallback


_HEAD = re.compile(r"i[0-9a-z]{1,13}_[0-9a-z]{5,8}")


def is_minted_head(text: str) -> bool:
    """Whether ``text`` is a minted request id's head, ``i<fence>_<nonce>`` (the id without its run id)."""
    return _HEAD.fullmatch(text) is not None


@functools.lru_cache(maxsize=4096)
def run_of_request(request_id: str) -> str | None:
    """The run id a minted request id carries (matched in full and checked as a run id), else None:
    ids parkway did not mint (a session's ``int_<hash>`` and ``tool_<hash>``, the fallback
    ``int_<hex>``) carry none. Cached: a resume asks it of one id five times (the keys and fields
    its script names), a listed interrupt seven, and each answer is two full matches."""
    m = _MINTED.fullmatch(request_id)
    if m is None or not ID_PATTERN.fullmatch(m.group(3)):
        return None
    return m.group(3)
