"""The shapes an agent's policy speaks: the triggers it sees, the actions it returns (``use_tool``,
``parkway.runtime.agents``), and the text limits both use. Inside or outside a session alike."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .errors import ValidationError
from .protocol import check_id

MAX_MESSAGE_CHARS = 100_000
MAX_REASON_CHARS = 1000


def check_text(value: object, what: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise ValidationError(f"{what} must be a non-empty string of at most {limit} characters")
    return value


TRIGGERS = ("session.start", "user.message", "tool.execute", "tool.results", "interrupt.resumed")
ACTIONS = ("interrupt", "tool.run", "tool.defer", "tool.result", "tool.error")


def loaded(value: Any, what: str) -> Any:
    if isinstance(value, str | bytes):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ValidationError(f"{what} is not valid JSON: {exc}") from exc
    return value


def parse_action(raw: Any) -> dict[str, Any]:
    """One action, checked: ``{"type": "interrupt", "reason": ..., "interrupt_id"?, "payload"?}``,
    ``{"type": "tool.result", "result": ...}``, ``{"type": "tool.error", "error": "..."}``,
    ``{"type": "tool.run"}`` (run the tool) or ``{"type": "tool.defer"}`` (wait for ``answer_tool``)."""
    action = loaded(raw, "an action")
    if not isinstance(action, Mapping) or action.get("type") not in ACTIONS:
        raise ValidationError(f"an action is a dict whose type is one of {ACTIONS}, not {raw!r:.200}")
    out = dict(action)
    if out["type"] == "interrupt":
        reason = out.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise ValidationError("an interrupt action needs a reason (a non-empty string)")
        check_text(reason, "an interrupt's reason", MAX_REASON_CHARS)
        if out.get("interrupt_id") is not None:
            interrupt_id = check_id(out["interrupt_id"], "interrupt id")
            if interrupt_id.startswith(("int_", "tool_")):
                raise ValidationError("an interrupt id given by a policy may not start with 'int_' or 'tool_'")
    elif out["type"] == "tool.error":
        check_text(out.get("error"), "a tool.error's error", MAX_REASON_CHARS)
    elif out["type"] == "tool.result" and "result" not in out:
        raise ValidationError("a tool.result action needs a result")
    return out


def parse_actions(raw: Any) -> list[dict[str, Any]]:
    """What a policy returned: ``{"actions": [...]}``, a list of actions, one action, or JSON of those."""
    value = loaded(raw, "the policy's decision")
    if value is None:
        return []
    if isinstance(value, Mapping) and "actions" in value:
        value = value["actions"]
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list | tuple):
        raise ValidationError("a policy returns {'actions': [...]}, a list of actions or one action")
    return [parse_action(a) for a in value]


