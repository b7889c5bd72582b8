"""What a pause does when nobody answers: its ``on_expire`` policy (expire, fail, cancel, answer
with a value, or escalate to other audiences first), checked when ``use_interrupt`` asks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import kinds
from .contracts import Contract
from .errors import ValidationError
from .protocol import MAX_TTL_MS, InterruptRequest, check_audience

EXPIRY_ACTIONS = ("expire", "fail", "cancel")
MAX_ESCALATIONS = 10
"""the most times an ``escalate`` policy asks again"""
_ESCALATE_KEYS = {"to", "ttl_ms", "times", "then"}


def expiry_policy(
    request: InterruptRequest, on_expire: str | Mapping[str, Any], contract: Contract[Any, Any] | None = None
) -> dict[str, Any]:
    """``on_expire`` checked against the request: ``{"action": ...}``, with ``value`` for an answer.

    ``{"escalate": {"to": audience | [audience, ...], "ttl_ms": N, "times": K, "then": policy}}``
    asks again K times (default: one per audience in ``to``; the last audience repeats when K is
    larger), escalation i to ``to[i]``, each with a TTL of ``ttl_ms`` (at least 1000; default: the
    interrupt's own), then applies ``then`` (any other policy; default ``"expire"``). Returns
    ``{"action": "escalate", "to": [one audience per escalation], "ttl_ms": N | None, "then": policy}``.
    """
    if isinstance(on_expire, Mapping) and set(on_expire) == {"escalate"}:
        return _escalation(request, on_expire["escalate"], contract)
    if isinstance(on_expire, str):
        if on_expire not in EXPIRY_ACTIONS:
            raise ValidationError(f"on_expire must be one of {EXPIRY_ACTIONS} or {{'answer': value}}")
        return {"action": on_expire}
    if isinstance(on_expire, Mapping) and set(on_expire) == {"answer"}:
        from .answers import validate_answer

        given = {kinds.get(request.kind).answer_arg: on_expire["answer"]}  # as its kind takes an answer
        return {"action": "answer", "value": validate_answer(request, contract=contract, **given)}
    raise ValidationError(
        f"on_expire must be one of {EXPIRY_ACTIONS}, {{'answer': value}} or {{'escalate': {{...}}}}, not {on_expire!r}"
    )


def _escalation(request: InterruptRequest, spec: Any, contract: Contract[Any, Any] | None) -> dict[str, Any]:
    """An ``escalate`` policy's spec, checked (see :func:`expiry_policy`)."""
    if not isinstance(spec, Mapping) or not set(spec) <= _ESCALATE_KEYS or "to" not in spec:
        raise ValidationError(f"on_expire escalate takes {{'to': ..., 'ttl_ms'?, 'times'?, 'then'?}}, not {spec!r}")
    to = spec["to"]
    audiences = [to] if isinstance(to, str) else to
    if not isinstance(audiences, list) or not audiences or len(audiences) > MAX_ESCALATIONS:
        raise ValidationError(f"on_expire escalate 'to' must be an audience or a list of 1-{MAX_ESCALATIONS}")
    audiences = [check_audience(a, "on_expire escalate audience") for a in audiences]
    times = spec.get("times", len(audiences))
    if isinstance(times, bool) or not isinstance(times, int) or not len(audiences) <= times <= MAX_ESCALATIONS:
        raise ValidationError(f"on_expire escalate 'times' must be an integer from {len(audiences)} "
                              f"(the audiences given) to {MAX_ESCALATIONS}")
    ttl_ms = spec.get("ttl_ms")
    if ttl_ms is not None and (isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int)
                               or not 1000 <= ttl_ms <= MAX_TTL_MS):
        raise ValidationError(f"on_expire escalate 'ttl_ms' must be an integer from 1000 to {MAX_TTL_MS}")
    then = spec.get("then", "expire")
    if isinstance(then, Mapping) and "escalate" in then:
        raise ValidationError("on_expire escalate 'then' cannot escalate again: list the audiences in 'to'")
    in_turn = audiences + [audiences[-1]] * (times - len(audiences))  # one audience per escalation
    return {"action": "escalate", "to": in_turn, "ttl_ms": ttl_ms, "then": expiry_policy(request, then, contract)}
